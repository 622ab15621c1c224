/* scalar/bf16.c - the bf16 reference (kernels.h: bf16 numerics): bf16_round,
 * bf16_round_float, and
 * gemm_bf16 as a plain triple loop over the rounded operands, one float accumulator per
 * output element summed over k in order. The specification the other levels are tested
 * against. */
#include "../bf16.h"
#include "scalar.h"

void vt_scalar_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = vt_bf16_round(x[i]);
}

void vt_scalar_bf16_round_float(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = vt_bf16_float(vt_bf16_round(x[i]));
}

void vt_scalar_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C,
                         int ldc, float *work, const vt_region next[2]) {
    (void)work;
    (void)next;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int p = 0; p < K && alpha != 0.0f; p++) {
                float a = vt_bf16_float(vt_bf16_round(ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]));
                size_t bi = tb ? (size_t)j * ldb + p : (size_t)p * ldb + j;
                float b = vt_bf16_float(B16 ? B16[bi] : vt_bf16_round(B[bi]));
                acc += a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
            if (bias) *c += bias[j];
        }
    }
}

size_t vt_scalar_gemm_bf16_work_floats(int M, int N, int K) {
    (void)M; (void)N; (void)K;
    return 0;
}
