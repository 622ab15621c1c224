/* linear.c - vt_op_linear: y = x W^T + b (torch nn.Linear), forward, backward, record.
 * x (..., Din) viewed as M = size / Din rows; w (Dout, Din); b (Dout) or NULL;
 * y (..., Dout). All products through vt_gemm (deterministic, no cross-thread sums).
 * Backward: dx += dy W;  dW += dy^T x;  db += column sums of dy (vt_ops_colsum_acc). */
#include "kernels.h"
#include "ops.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *x, *w, *dy;
    float *dx, *dw, *db;
    int M, Din, Dout;
} linear_ctx;

static void linear_bwd(void *p) {
    linear_ctx *c = p;
    if (c->dx) vt_gemm(0, 0, c->M, c->Din, c->Dout, 1.0f, c->dy, c->Dout, c->w, c->Din, 1.0f, c->dx, c->Din);
    if (c->dw) vt_gemm(1, 0, c->Dout, c->Din, c->M, 1.0f, c->dy, c->Dout, c->x, c->Din, 1.0f, c->dw, c->Din);
    if (c->db) vt_ops_colsum_acc(c->arena, c->dy, NULL, c->M, c->Dout, c->db);
}

vt_tensor *vt_op_linear(vt_tape *t, vt_tensor *x, vt_tensor *w, vt_tensor *b) {
    VT_ASSERT(w->ndim == 2, "linear: weight must be 2-D (Dout, Din), got %d-D", w->ndim);
    int Dout = (int)w->shape[0], Din = (int)w->shape[1];
    VT_ASSERT(x->shape[x->ndim - 1] == Din, "linear: x last dim %lld != weight Din %d",
              (long long)x->shape[x->ndim - 1], Din);
    VT_ASSERT(!b || (b->ndim == 1 && b->shape[0] == Dout), "linear: bias must be (%d)", Dout);
    int M = (int)(x->size / Din);
    int64_t shape[VT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = Dout;
    int g = vt_tape_wants_grad(t, x, w, b);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, shape);

    vt_gemm(0, 1, M, Dout, Din, 1.0f, x->data, Din, w->data, Din, 0.0f, y->data, Dout);
    if (b) {
        float *yd = y->data;
        const float *bd = b->data;
        #pragma omp parallel for schedule(static) if ((int64_t)M * Dout > 16384)
        for (int r = 0; r < M; r++) vt_k.add(yd + (size_t)r * Dout, bd, yd + (size_t)r * Dout, (size_t)Dout);
    }
    if (g) {
        linear_ctx *c = vt_tape_ctx(t, sizeof *c);
        c->arena = t->arena;
        c->x = x->data; c->w = w->data; c->dy = y->grad;
        c->dx = x->grad; c->dw = w->grad; c->db = b ? b->grad : NULL;
        c->M = M; c->Din = Din; c->Dout = Dout;
        vt_tape_record(t, "linear", linear_bwd, c);
    }
    return y;
}
