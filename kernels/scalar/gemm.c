/* scalar/gemm.c - reference GEMM: C = alpha op(A) op(B) + beta C (+ bias rows), see ../entries.def.
 * Plain triple loop with a float accumulator per output element; the specification
 * the SIMD versions are tested against. */
#include "../kernels.h"
#include "scalar.h"

void vt_scalar_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, float *C, int ldc, float *work) {
    (void)work;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int p = 0; p < K; p++) {
                float a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                float b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                acc += a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
            if (bias) *c += bias[j];
        }
    }
}

void vt_scalar_gemm(int ta, int tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc, float *work) {
    vt_scalar_gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, work);
}

/* next is a prefetch hint, which the reference ignores. */
void vt_scalar_gemm_prefetch(int ta, int tb, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc, float *work, const vt_region next[2]) {
    (void)next;
    vt_scalar_gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, work);
}

size_t vt_scalar_gemm_work_floats(int M, int N, int K) {
    (void)M; (void)N; (void)K;
    return 0;
}
