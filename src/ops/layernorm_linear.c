/* layernorm_linear.c - vt_op_layernorm_linear: y = LayerNorm(x; g, beta, eps) W^T + b, a
 * block's pre-norm fused into the projection that follows it (norm1 -> qkv, norm2 -> fc1)
 * so that h = LayerNorm(x) is never an activation. Owns the record and the order of the
 * backward; the arithmetic is vt_op_layernorm's (vt_par_layernorm_*) and vt_op_linear's
 * (vt_par_linear_*), so values are bitwise those of the unfused pair.
 * x (..., D) viewed as M = size / D rows; g, beta (D); w (Dout, D); b (Dout) or NULL;
 * y (..., Dout).
 * Forward: mean, rstd per row into the arena (kept), h into the tape scratch (M D floats),
 * y = h W^T + b.
 * Backward, with one scratch buffer of M D floats: h recomputed (only when dW is wanted)
 * by the forward's call, which also rewrites mean and rstd with the same bits;
 * dW += dy^T h, db += column sums of dy, then dh = dy W overwrites h in the scratch and
 * the LayerNorm backward gives dx +=, dg +=, dbeta += (per-chunk partials from the arena;
 * with x without a gradient, a zeroed M D arena buffer takes dx, as in vt_op_layernorm).
 * dh with beta 0 has the floats of the unfused dx += dy W into the zeroed LayerNorm output
 * grad (0 + x = x), but for the sign of a zero result; the LayerNorm backward then gives
 * the same bits unless the input grads held -0, which a zeroed grad that only
 * accumulates never does.
 * Kept for backward: x (the caller's, the residual stream in the model), g, beta, w, dy,
 * mean and rstd (M floats each); nothing of M D floats. */
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_tape *t;
    const float *x, *g, *beta, *dy;
    vt_linear_weight w;
    float *mean, *rstd;
    float *dx, *dg, *dbeta, *dw, *db;
    int M, D, Dout;
    float eps;
} layernorm_linear_ctx;

static void layernorm_linear_bwd(void *p) {
    layernorm_linear_ctx *c = p;
    int want_dh = c->dx || c->dg || c->dbeta;
    float *s = want_dh || c->dw ? vt_tape_scratch(c->t, (size_t)c->M * c->D) : NULL;
    if (c->dw) vt_par_layernorm_fwd(c->x, c->g, c->beta, s, c->mean, c->rstd, c->M, c->D, c->eps);
    vt_par_linear_bwd(c->t->arena, s, c->w, c->dy, want_dh ? s : NULL, 0.0f, c->dw, c->db, c->M, c->D, c->Dout);
    if (want_dh)
        vt_par_layernorm_bwd(c->t->arena, c->x, c->g, c->mean, c->rstd, s, c->dx, c->dg, c->dbeta, c->M, c->D);
}

vt_tensor *vt_op_layernorm_linear(vt_tape *t, vt_tensor *x, vt_tensor *g, vt_tensor *beta, float eps,
                                  vt_tensor *w, vt_tensor *b) {
    int64_t shape[VT_MAX_DIMS];
    int M = vt_par_linear_shape("layernorm_linear", x, w, b, shape);
    int Dout = (int)w->shape[0], D = (int)w->shape[1];
    VT_ASSERT(g->size == D && beta->size == D,
              "layernorm_linear: g/beta have %lld/%lld elements, x last dim is %d",
              (long long)g->size, (long long)beta->size, D);
    int gx = vt_tape_wants_grad(t, x, g, beta), gw = vt_tape_wants_grad(t, w, b, NULL), grad = gx || gw;
    vt_tensor *y = vt_tape_new(t, grad, x->ndim, shape);
    float *mean = vt_arena_alloc(t->arena, (size_t)M * sizeof(float));
    float *rstd = vt_arena_alloc(t->arena, (size_t)M * sizeof(float));
    float *h = vt_tape_scratch(t, (size_t)x->size);
    vt_par_layernorm_fwd(x->data, g->data, beta->data, h, mean, rstd, M, D, eps);
    vt_par_linear_fwd(h, vt_linear_weight_of(t, w), b ? b->data : NULL, y->data, M, D, Dout);
    if (grad) {
        layernorm_linear_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (layernorm_linear_ctx){t, x->data, g->data, beta->data, y->grad, vt_linear_weight_of(t, w), mean, rstd,
                                    x->grad, g->grad, beta->grad, w->grad, b ? b->grad : NULL, M, D, Dout, eps};
        vt_tape_record(t, "layernorm_linear", layernorm_linear_bwd, c);
    }
    return y;
}
