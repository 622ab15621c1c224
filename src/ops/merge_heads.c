/* merge_heads.c - vt_op_merge_heads: x (B, H, N, hd) -> y (B, N, H hd), head h at
 * columns [h hd, (h+1) hd) of each token row (the inverse layout of split_heads).
 * Pure data movement; backward gathers dy back into dx (+=, vt_k.axpy with a = 1, which
 * rounds exactly like a plain add). */
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    float *dx;
    const float *dy;
    int B, H, N, hd;
} merge_ctx;

static void merge_heads_bwd(void *p) {
    merge_ctx *c = p;
    int B = c->B, H = c->H, N = c->N, hd = c->hd;
    #pragma omp parallel for collapse(2) schedule(static) if ((int64_t)B * H * N * hd > VT_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int n = 0; n < N; n++) {
                float *d = c->dx + (((size_t)b * H + h) * N + n) * hd;
                const float *g = c->dy + ((size_t)b * N + n) * H * hd + (size_t)h * hd;
                vt_k.axpy(1.0f, g, d, (size_t)hd);
            }
}

vt_tensor *vt_op_merge_heads(vt_tape *t, vt_tensor *x) {
    VT_ASSERT(x->ndim == 4, "merge_heads: x must be (B, H, N, hd), got %d-D", x->ndim);
    int B = (int)x->shape[0], H = (int)x->shape[1], N = (int)x->shape[2], hd = (int)x->shape[3];
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    int64_t shape[3] = {B, N, (int64_t)H * hd};
    vt_tensor *y = vt_tape_new(t, g, 3, shape);
    const float *src = x->data;
    float *dst = y->data;
    #pragma omp parallel for collapse(2) schedule(static) if (x->size > VT_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++)
                memcpy(dst + ((size_t)b * N + n) * H * hd + (size_t)h * hd,
                       src + (((size_t)b * H + h) * N + n) * hd, (size_t)hd * sizeof(float));
    if (g) {
        merge_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (merge_ctx){x->grad, y->grad, B, H, N, hd};
        vt_tape_record(t, "merge_heads", merge_heads_bwd, c);
    }
    return y;
}
