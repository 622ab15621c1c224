/* linear.c - vt_op_linear: y = x W^T + b (torch nn.Linear), forward, backward, record,
 * and its arithmetic on raw rows (vt_par_linear_*, shared with vt_op_gelu_linear).
 * x (..., Din) viewed as M = size / Din rows; w (Dout, Din); b (Dout) or NULL;
 * y (..., Dout). All products through vt_gemm_prec in the tape's precision (the forward
 * with the bias fused; deterministic, no cross-thread sums); under bf16 the weight's
 * bf16 copy is read where it has one.
 * Backward: dW += dy^T x;  db += column sums of dy (vt_par_colsum_acc's bits; with dW, summed
 * by vt_gemm_prec_wgrad in the same pass over dy);  dx += dy W (dx = dy W when x's gradient
 * is fresh, tape.h). vt_op_linear_add adds a residual r to y in place, y through a drop
 * path first (residual.c); its backward first does what vt_op_add's and
 * vt_op_drop_path's would (vt_par_residual_bwd). */
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *x;
    float *dy;
    vt_linear_weight w;
    float *dx, *dw, *db;
    const vt_tensor *xt, *rt; /* for vt_tape_grad_fresh; rt: the residual or NULL */
    const float *factor;      /* the residual branch's drop path factors, or NULL */
    int M, Din, Dout;
} linear_ctx;

int vt_par_linear_shape(const char *op, const vt_tensor *x, const vt_tensor *w, const vt_tensor *b,
                        int64_t *shape) {
    VT_ASSERT(w->ndim == 2, "%s: weight must be 2-D (Dout, Din), got %d-D", op, w->ndim);
    int Dout = (int)w->shape[0], Din = (int)w->shape[1];
    VT_ASSERT(x->shape[x->ndim - 1] == Din, "%s: x last dim %lld != weight Din %d", op,
              (long long)x->shape[x->ndim - 1], Din);
    VT_ASSERT(!b || (b->ndim == 1 && b->shape[0] == Dout), "%s: bias must be (%d)", op, Dout);
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = Dout;
    return (int)(x->size / Din);
}

void vt_par_linear_fwd(const float *x, vt_linear_weight w, const float *b, float *y, int M, int Din, int Dout) {
    vt_gemm_prec(w.bf16, 0, 1, M, Dout, Din, 1.0f, x, Din, w.w, w.w16, Din, 0.0f, b, y, Dout);
}

void vt_par_linear_bwd(vt_arena *arena, const float *x, vt_linear_weight w, const float *dy, float *dx,
                       float dx_beta, float *dw, float *db, int M, int Din, int Dout) {
    if (dw && db) {
        vt_gemm_prec_wgrad(arena, w.bf16, Dout, Din, M, dy, Dout, x, Din, dw, Din, db);
    } else {
        if (dw) vt_gemm_prec(w.bf16, 1, 0, Dout, Din, M, 1.0f, dy, Dout, x, NULL, Din, 1.0f, NULL, dw, Din);
        if (db) vt_par_colsum_acc(arena, dy, NULL, M, Dout, db);
    }
    if (dx) vt_gemm_prec(w.bf16, 0, 0, M, Din, Dout, 1.0f, dy, Dout, w.w, w.w16, Din, dx_beta, NULL, dx, Din);
}

static void linear_bwd(void *p) {
    linear_ctx *c = p;
    /* first, as vt_op_add's and vt_op_drop_path's backwards would run */
    if (c->rt) vt_par_residual_bwd(c->dy, c->rt, c->factor);
    float dx_beta = vt_tape_grad_fresh(c->xt) ? 0.0f : 1.0f;
    vt_par_linear_bwd(c->arena, c->x, c->w, c->dy, c->dx, dx_beta, c->dw, c->db, c->M, c->Din, c->Dout);
}

/* y = x W^T + b, plus r (NULL: none) added in place after a drop path of rate p. */
static vt_tensor *linear(vt_tape *t, const char *op, vt_tensor *x, vt_tensor *w, vt_tensor *b, float p,
                         vt_tensor *r) {
    int64_t shape[VT_MAX_DIMS];
    int M = vt_par_linear_shape(op, x, w, b, shape);
    int Dout = (int)w->shape[0], Din = (int)w->shape[1];
    if (r) vt_par_residual_check(op, r, x->ndim, shape);
    int g = vt_tape_wants_grad(t, x, w, b);
    if (r) g |= vt_tape_wants_grad(t, r, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, shape);
    vt_par_linear_fwd(x->data, vt_linear_weight_of(t, w), b ? b->data : NULL, y->data, M, Din, Dout);
    const float *factor = r ? vt_par_residual_fwd(t, y, r, p) : NULL;
    if (g) {
        linear_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (linear_ctx){t->arena, x->data, y->grad, vt_linear_weight_of(t, w), x->grad, w->grad,
                          b ? b->grad : NULL, x, r, factor, M, Din, Dout};
        if (x->grad) vt_tape_can_overwrite(x);
        if (r && r->grad) vt_tape_can_overwrite(r);
        vt_tape_record(t, op, linear_bwd, c);
    }
    return y;
}

vt_tensor *vt_op_linear(vt_tape *t, vt_tensor *x, vt_tensor *w, vt_tensor *b) {
    return linear(t, "linear", x, w, b, 0.0f, NULL);
}

vt_tensor *vt_op_linear_add(vt_tape *t, vt_tensor *x, vt_tensor *w, vt_tensor *b, float drop_path, vt_tensor *r) {
    VT_ASSERT(r, "linear_add: no residual");
    return linear(t, "linear_add", x, w, b, drop_path, r);
}
