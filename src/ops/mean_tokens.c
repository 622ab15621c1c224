/* mean_tokens.c - vt_op_mean_tokens: x (B, N, D) -> y (B, D), the mean over tokens
 * [start, N) (global average pooling; start = 1 skips the class token). Sums in float
 * in token order, then one multiply by 1/(N - start).
 * Backward: dx[:, n] += dy / (N - start) for n in [start, N). */
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    const float *dy;
    float *dx;
    int B, N, D, start;
} mean_ctx;

static void mean_tokens_bwd(void *p) {
    mean_ctx *c = p;
    float inv = 1.0f / (float)(c->N - c->start);
    #pragma omp parallel for schedule(static) if ((int64_t)c->B * c->N * c->D > VT_PAR_MIN)
    for (int b = 0; b < c->B; b++) {
        const float *g = c->dy + (size_t)b * c->D;
        for (int n = c->start; n < c->N; n++) {
            float *d = c->dx + ((size_t)b * c->N + n) * c->D;
            for (int j = 0; j < c->D; j++) d[j] += g[j] * inv;
        }
    }
}

vt_tensor *vt_op_mean_tokens(vt_tape *t, vt_tensor *x, int start) {
    VT_ASSERT(x->ndim == 3, "mean_tokens: x must be (B, N, D), got %d-D", x->ndim);
    int B = (int)x->shape[0], N = (int)x->shape[1], D = (int)x->shape[2];
    VT_ASSERT(start >= 0 && start < N, "mean_tokens: start %d not in [0, %d)", start, N);
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    int64_t shape[2] = {B, D};
    vt_tensor *y = vt_tape_new(t, g, 2, shape);
    float inv = 1.0f / (float)(N - start);
    const float *xd = x->data;
    float *yd = y->data;
    #pragma omp parallel for schedule(static) if ((int64_t)B * N * D > VT_PAR_MIN)
    for (int b = 0; b < B; b++) {
        float *o = yd + (size_t)b * D;
        for (int j = 0; j < D; j++) o[j] = 0.0f;
        for (int n = start; n < N; n++) {
            const float *r = xd + ((size_t)b * N + n) * D;
            for (int j = 0; j < D; j++) o[j] += r[j];
        }
        for (int j = 0; j < D; j++) o[j] *= inv;
    }
    if (g) {
        mean_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (mean_ctx){y->grad, x->grad, B, N, D, start};
        vt_tape_record(t, "mean_tokens", mean_tokens_bwd, c);
    }
    return y;
}
