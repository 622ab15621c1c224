/* test_attention_fma.c - vt_op_attention in bf16 on the fma product path, where it rounds
 * q, k, v, the output gradient, Pd and dS once and multiplies them with the float32 GEMM
 * (attention.c): bitwise the results of the same products through the fma path's
 * gemm_bf16 (which rounds as it packs), computed here step by step as the op specifies
 * them for one row block: S = scale q k^T, P = softmax(S), out = P v; dv += P^T dout,
 * dP = dout v^T, dS = softmax_bwd(P, dP), dq += scale dS k, dk += scale dS^T q. Shapes:
 * ViT's head (N 197, hd 64: the float32 GEMM reads P and dS in place there) and ragged
 * ones (N 37 and 70, hd 16 and 24). A level without the fma path (scalar) skips. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "rng.h"
#include "status.h"
#include "tape.h"
#include "test_runtime.h"

static vt_arena arena;
static vt_tape tape;

/* The reference for one (b, h) block: q, k, v, dq, dk, dv N x hd (stride hd); out and dout
 * rows H hd floats apart. */
static void reference(int N, int hd, int H, float scale, const float *q, const float *k, const float *v,
                      const float *dout, float *out, float *dq, float *dk, float *dv) {
    float *P = calloc((size_t)N * N, sizeof(float)), *dP = calloc((size_t)N * N, sizeof(float));
    size_t wf = vt_k.gemm_bf16_work_floats(N, N, N > hd ? N : hd);
    float *w = aligned_alloc(64, (wf + 16) * sizeof(float));
    int ldo = H * hd;
    vt_k.gemm_bf16(0, 1, N, N, hd, scale, q, hd, k, NULL, hd, 0.0f, NULL, P, N, w, NULL);
    vt_k.softmax_rows(P, P, N, N, 1.0f);
    vt_k.gemm_bf16(0, 0, N, hd, N, 1.0f, P, N, v, NULL, hd, 0.0f, NULL, out, ldo, w, NULL);
    vt_k.gemm_bf16(1, 0, N, hd, N, 1.0f, P, N, dout, NULL, ldo, 1.0f, NULL, dv, hd, w, NULL);
    vt_k.gemm_bf16(0, 1, N, N, hd, 1.0f, dout, ldo, v, NULL, hd, 0.0f, NULL, dP, N, w, NULL);
    vt_k.softmax_bwd_rows(P, dP, dP, N, N);
    vt_k.gemm_bf16(0, 0, N, hd, N, scale, dP, N, k, NULL, hd, 1.0f, NULL, dq, hd, w, NULL);
    vt_k.gemm_bf16(1, 0, N, hd, N, scale, dP, N, q, NULL, hd, 1.0f, NULL, dk, hd, w, NULL);
    free(P);
    free(dP);
    free(w);
}

static void check_shape(int H, int N, int hd) {
    VT_ASSERT(vt_attention_row_block(N) == N, "test shape N %d must be one row block", N);
    const size_t n = (size_t)H * N * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    vt_rng r;
    vt_rng_seed(&r, (uint64_t)(N * 131 + hd));
    float *src = malloc(4 * n * sizeof(float)); /* q, k, v (H, N, hd), dout (N, H hd) */
    for (size_t i = 0; i < 4 * n; i++) src[i] = 2.0f * (float)vt_rng_uniform(&r) - 1.0f;
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    tape.training = 1;
    tape.bf16 = 1;
    int64_t shape[4] = {1, H, N, hd};
    vt_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = vt_tensor_new(&arena, 1, 4, shape);
        memcpy(in[i]->data, src + i * n, n * sizeof(float));
    }
    vt_tensor *o = vt_op_attention(&tape, in[0], in[1], in[2], scale, 0.0f, vt_attention_keep_probs(N, hd, 1));
    memcpy(o->grad, src + 3 * n, n * sizeof(float));
    vt_tape_replay(&tape);

    float *ref = calloc(4 * n, sizeof(float)); /* out (N, H hd), dq, dk, dv (H, N, hd) */
    for (int h = 0; h < H; h++) {
        size_t bo = (size_t)h * N * hd;
        reference(N, hd, H, scale, src + bo, src + n + bo, src + 2 * n + bo, src + 3 * n + (size_t)h * hd,
                  ref + (size_t)h * hd, ref + n + bo, ref + 2 * n + bo, ref + 3 * n + bo);
    }
    const float *got[4] = {o->data, in[0]->grad, in[1]->grad, in[2]->grad};
    static const char *const what[4] = {"out", "dq", "dk", "dv"};
    for (int t = 0; t < 4; t++) {
        long bad = -1;
        for (size_t i = 0; i < n && bad < 0; i++)
            if (memcmp(&got[t][i], &ref[t * n + i], sizeof(float))) bad = (long)i;
        CHECK(bad < 0, "H %d N %d hd %d: %s[%ld] = %a, the fma path's gemm_bf16 step by step gives %a", H, N, hd,
              what[t], bad, bad < 0 ? 0.0 : got[t][bad], bad < 0 ? 0.0 : ref[t * n + bad]);
    }
    free(src);
    free(ref);
}

int main(void) {
    if (test_runtime_init(&arena, 1 << 20, &tape) != 0) return 1;
    char why[256];
    if (vt_kernels_set_bf16_path(VT_BF16_FMA, why, sizeof why) != 0) {
        printf("test_attention_fma: skipped (%s)\n", why);
        return test_summary();
    }
    CHECK(vt_kernels_bf16_path() == VT_BF16_FMA, "the fma path is set but the table reports %d",
          vt_kernels_bf16_path());
    check_shape(2, 197, 64);
    check_shape(3, 37, 16);
    check_shape(1, 70, 24);
    test_runtime_done(&arena, &tape);
    return test_summary();
}
