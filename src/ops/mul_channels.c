/* mul_channels.c - vt_op_mul_channels: y = x * gamma (LayerScale), gamma (D) broadcast
 * over the last dim of x (..., D).
 * Backward: dx += dy * gamma;  dgamma += sum over rows of dy * x (vt_par_colsum_acc). */
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    vt_arena *arena;
    const float *x, *gamma, *dy;
    float *dx, *dgamma;
    int64_t rows, D;
} mulch_ctx;

static void mul_channels_bwd(void *p) {
    mulch_ctx *c = p;
    if (c->dx) {
        #pragma omp parallel for schedule(static) if (c->rows * c->D > VT_PAR_MIN)
        for (int64_t r = 0; r < c->rows; r++) {
            const float *dy = c->dy + r * c->D;
            float *dx = c->dx + r * c->D;
            for (int64_t j = 0; j < c->D; j++) dx[j] += dy[j] * c->gamma[j];
        }
    }
    if (c->dgamma) vt_par_colsum_acc(c->arena, c->dy, c->x, c->rows, c->D, c->dgamma);
}

vt_tensor *vt_op_mul_channels(vt_tape *t, vt_tensor *x, vt_tensor *gamma) {
    int64_t D = x->shape[x->ndim - 1];
    VT_ASSERT(gamma->size == D, "mul_channels: gamma has %lld elements, x last dim is %lld",
              (long long)gamma->size, (long long)D);
    int64_t rows = x->size / D;
    int g = vt_tape_wants_grad(t, x, gamma, NULL);
    vt_tensor *y = vt_tape_new(t, g, x->ndim, x->shape);
    const float *xd = x->data, *gd = gamma->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if (x->size > VT_PAR_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < D; j++) yd[r * D + j] = xd[r * D + j] * gd[j];
    if (g) {
        mulch_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (mulch_ctx){t->arena, x->data, gamma->data, y->grad, x->grad, gamma->grad, rows, D};
        vt_tape_record(t, "mul_channels", mul_channels_bwd, c);
    }
    return y;
}
