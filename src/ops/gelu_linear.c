/* gelu_linear.c - vt_op_gelu_linear: y = gelu(u) W^T + b, the MLP's GELU fused into the
 * following nn.Linear so that gelu(u) is never an activation. Owns the record and the
 * order of the backward; the arithmetic is vt_op_gelu's (vt_par_gelu_*) and vt_op_linear's
 * (vt_par_linear_*), so values are bitwise those of the unfused pair.
 * u (..., Din) viewed as M = size / Din rows; w (Dout, Din); b (Dout) or NULL; y (..., Dout).
 * Forward: g = gelu(u) into the tape scratch (M Din floats), y = g W^T + b.
 * Backward, with one scratch buffer s of M Din floats and no arena memory beyond the
 * colsum partials: s = dg = dy W; then one pass du += gelu'(u) dg, s = gelu(u) (the
 * recompute shares the erf with the derivative: vt_par_gelu_bwd_fwd); then dW += dy^T s,
 * db += column sums of dy. Without du: s = gelu(u), dW, db; without dW: s = dg,
 * du += gelu'(u) dg. With dW and a fresh u gradient (tape.h) du is written, not added
 * to. dg with beta 0 has the floats of the unfused dx += dy W into the zeroed gelu
 * output grad (0 + x = x), but for the sign of a zero result; the du update then gives
 * the same bits unless du held -0, which a zeroed grad that only accumulates never does.
 * Kept for backward: u (the caller's), w, dy; nothing of M Din floats.
 * vt_op_gelu_linear_add adds a residual r to y in place as vt_op_linear_add does (through
 * a drop path; par.h vt_par_residual_fwd and _bwd). */
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_tape *t;
    const float *u;
    float *dy;
    vt_linear_weight w;
    float *du, *dw, *db;
    const vt_tensor *ut, *rt; /* for vt_tape_grad_fresh; rt: the residual or NULL */
    const float *factor;      /* the residual branch's drop path factors, or NULL */
    int M, Din, Dout;
} gelu_linear_ctx;

static void gelu_linear_bwd(void *p) {
    gelu_linear_ctx *c = p;
    /* first, as vt_op_add's and vt_op_drop_path's backwards would run */
    if (c->rt) vt_par_residual_bwd(c->dy, c->rt, c->factor);
    int64_t n = (int64_t)c->M * c->Din;
    float *s = c->du || c->dw ? vt_tape_scratch(c->t, (size_t)n) : NULL;
    if (c->du) {
        vt_par_linear_bwd(c->t->arena, NULL, c->w, c->dy, s, 0.0f, NULL, NULL, c->M, c->Din, c->Dout);
        if (c->dw) vt_par_gelu_bwd_fwd(c->u, s, c->du, n, !vt_tape_grad_fresh(c->ut));
        else vt_par_gelu_bwd(c->u, s, c->du, n);
    } else if (c->dw) {
        vt_par_gelu_fwd(c->u, s, n);
    }
    vt_par_linear_bwd(c->t->arena, s, c->w, c->dy, NULL, 0.0f, c->dw, c->db, c->M, c->Din, c->Dout);
}

/* y = gelu(u) W^T + b, plus r (NULL: none) added in place after a drop path of rate p. */
static vt_tensor *gelu_linear(vt_tape *t, const char *op, vt_tensor *u, vt_tensor *w, vt_tensor *b, float p,
                              vt_tensor *r) {
    int64_t shape[VT_MAX_DIMS];
    int M = vt_par_linear_shape(op, u, w, b, shape);
    int Dout = (int)w->shape[0], Din = (int)w->shape[1];
    if (r) vt_par_residual_check(op, r, u->ndim, shape);
    int grad = vt_tape_wants_grad(t, u, w, b);
    if (r) grad |= vt_tape_wants_grad(t, r, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, grad, u->ndim, shape);
    float *g = vt_tape_scratch(t, (size_t)u->size);
    vt_par_gelu_fwd(u->data, g, u->size);
    vt_par_linear_fwd(g, vt_linear_weight_of(t, w), b ? b->data : NULL, y->data, M, Din, Dout);
    const float *factor = r ? vt_par_residual_fwd(t, y, r, p) : NULL;
    if (grad) {
        gelu_linear_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (gelu_linear_ctx){t, u->data, y->grad, vt_linear_weight_of(t, w), u->grad, w->grad, b ? b->grad : NULL, u,
                               r, factor, M, Din, Dout};
        if (u->grad && w->grad) vt_tape_can_overwrite(u); /* the bwd_fwd pass writes du whole */
        if (r && r->grad) vt_tape_can_overwrite(r);
        vt_tape_record(t, op, gelu_linear_bwd, c);
    }
    return y;
}

vt_tensor *vt_op_gelu_linear(vt_tape *t, vt_tensor *u, vt_tensor *w, vt_tensor *b) {
    return gelu_linear(t, "gelu_linear", u, w, b, 0.0f, NULL);
}

vt_tensor *vt_op_gelu_linear_add(vt_tape *t, vt_tensor *u, vt_tensor *w, vt_tensor *b, float drop_path,
                                 vt_tensor *r) {
    VT_ASSERT(r, "gelu_linear_add: no residual");
    return gelu_linear(t, "gelu_linear_add", u, w, b, drop_path, r);
}
