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

/* The product as gemm (bf16: gemm_bf16) computes it, then the column sums row by row. */
void vt_scalar_gemm_sums(int bf16, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                         float beta, float *C, int ldc, float *work, int nchunks, const int *edge, float *sums) {
    if (bf16) vt_scalar_gemm_bf16(1, 0, M, N, K, 1.0f, A, lda, B, NULL, ldb, beta, NULL, C, ldc, work, NULL);
    else vt_scalar_gemm_bias(1, 0, M, N, K, 1.0f, A, lda, B, ldb, beta, NULL, C, ldc, work);
    for (int c = 0; c < nchunks; c++)
        for (int k = edge[c]; k < edge[c + 1]; k++)
            for (int i = 0; i < M; i++) sums[(size_t)c * M + i] += A[(size_t)k * lda + i];
}

size_t vt_scalar_gemm_work_floats(int M, int N, int K) {
    (void)M; (void)N; (void)K;
    return 0;
}

/* One block: the scalar gemm sums each element over all of K at once. */
void vt_scalar_gemm_b_blocks(int ta, int N, int K, int *nc, int *kc) {
    (void)ta;
    *nc = N > 1 ? N : 1;
    *kc = K > 1 ? K : 1;
}

/* The packed form: op(B) column by column (N x K floats), a panel per column. */
size_t vt_scalar_gemm_packed_b_floats(int N, int K, int *panels) {
    *panels = N > 0 && K > 0 ? N : 0;
    return (size_t)*panels * (size_t)K;
}

void vt_scalar_gemm_pack_b(int tb, int N, int K, const float *B, int ldb, int p0, int p1, float *packed) {
    (void)N;
    for (int j = p0; j < p1; j++)
        for (int p = 0; p < K; p++) packed[(size_t)j * K + p] = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
}

/* The same sums as gemm_bias: packed read as the transposed B it is. */
void vt_scalar_gemm_packed_b(int ta, int M, int N, int K, float alpha, const float *A, int lda, const float *packed,
                             float beta, const float *bias, float *C, int ldc, float *work) {
    vt_scalar_gemm_bias(ta, 1, M, N, K, alpha, A, lda, packed, K, beta, bias, C, ldc, work);
}
