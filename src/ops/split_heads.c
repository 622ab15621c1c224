/* split_heads.c - vt_op_split_heads: qkv (B, N, 3D) from the fused projection ->
 * q, k, v each (B, H, N, hd) contiguous, D = H hd. Within a token's 3D row, part s
 * (0 q, 1 k, 2 v) occupies [s D, (s+1) D) and head h [s D + h hd, s D + (h+1) hd).
 * Pure data movement; backward scatters dq/dk/dv back into dqkv (+=, vt_k.axpy with
 * a = 1: the fused multiply-add by 1 rounds exactly like a plain add). One tape entry
 * covers the three outputs. */
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

typedef struct {
    float *dqkv;
    const float *dq, *dk, *dv;
    int B, N, H, hd;
} split_ctx;

static void split_heads_bwd(void *p) {
    split_ctx *c = p;
    int B = c->B, N = c->N, H = c->H, hd = c->hd, D = H * hd;
    const float *src[3] = {c->dq, c->dk, c->dv};
    #pragma omp parallel for collapse(2) schedule(static) if ((int64_t)B * N * D > VT_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            float *row = c->dqkv + ((size_t)b * N + n) * 3 * D;
            for (int s = 0; s < 3; s++)
                for (int h = 0; h < H; h++) {
                    const float *g = src[s] + (((size_t)b * H + h) * N + n) * hd;
                    float *d = row + (size_t)s * D + (size_t)h * hd;
                    vt_k.axpy(1.0f, g, d, (size_t)hd);
                }
        }
}

void vt_op_split_heads(vt_tape *t, vt_tensor *qkv, int H,
                       vt_tensor **q, vt_tensor **k, vt_tensor **v) {
    VT_ASSERT(qkv->ndim == 3 && qkv->shape[2] % (3 * H) == 0,
              "split_heads: qkv must be (B, N, 3 D) with H=%d | D, got last dim %lld", H,
              (long long)qkv->shape[qkv->ndim - 1]);
    int B = (int)qkv->shape[0], N = (int)qkv->shape[1], D = (int)(qkv->shape[2] / 3), hd = D / H;
    int g = vt_tape_wants_grad(t, qkv, NULL, NULL);
    int64_t shape[4] = {B, H, N, hd};
    vt_tensor *out[3];
    for (int s = 0; s < 3; s++) out[s] = vt_tape_new(t, g, 4, shape);
    const float *src = qkv->data;
    float *dst[3] = {out[0]->data, out[1]->data, out[2]->data};
    #pragma omp parallel for collapse(2) schedule(static) if ((int64_t)B * N * D > VT_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) {
            const float *row = src + ((size_t)b * N + n) * 3 * D;
            for (int s = 0; s < 3; s++)
                for (int h = 0; h < H; h++)
                    memcpy(dst[s] + (((size_t)b * H + h) * N + n) * hd,
                           row + (size_t)s * D + (size_t)h * hd, (size_t)hd * sizeof(float));
        }
    if (g) {
        split_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (split_ctx){qkv->grad, out[0]->grad, out[1]->grad, out[2]->grad, B, N, H, hd};
        vt_tape_record(t, "split_heads", split_heads_bwd, c);
    }
    *q = out[0];
    *k = out[1];
    *v = out[2];
}
