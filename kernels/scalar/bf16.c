/* scalar/bf16.c - the bf16 reference (kernels.h: bf16 numerics): bf16_round,
 * bf16_round_float, and gemm_bf16 as a plain triple loop over the rounded operands, one
 * float accumulator per output element summed over k in order (gemm_bf16_packed_b the same
 * loop on op(B) packed by columns, gemm_bf16_packed_a on op(A) packed by rows). The specification the other levels are tested
 * against. */
#include "../bf16.h"
#include "scalar.h"

void vt_scalar_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = vt_bf16_round(x[i]);
}

void vt_scalar_bf16_round_float(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = vt_bf16_float(vt_bf16_round(x[i]));
}

/* The reference loop; op(B')[p][j] from bt[j K + p] (the packed form: op(B') by columns,
 * widened to float32) when bt is not NULL, else from B16, else from B rounded. */
static void gemm_ref(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     const vt_bf16 *B16, int ldb, const float *bt, float beta, const float *bias, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int p = 0; p < K && alpha != 0.0f; p++) {
                float a = vt_bf16_float(vt_bf16_round(ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]));
                size_t bi = tb ? (size_t)j * ldb + p : (size_t)p * ldb + j;
                float b = bt ? bt[(size_t)j * K + p] : vt_bf16_float(B16 ? B16[bi] : vt_bf16_round(B[bi]));
                acc += a * b;
            }
            float *c = &C[(size_t)i * ldc + j];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
            if (bias) *c += bias[j];
        }
    }
}

void vt_scalar_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                         const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C,
                         int ldc, float *work, const vt_region next[2]) {
    (void)work;
    (void)next;
    gemm_ref(ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, NULL, beta, bias, C, ldc);
}

/* The packed form: op(B') column by column (N x K floats), a panel per column. */
size_t vt_scalar_gemm_bf16_packed_b_floats(int N, int K, int *panels) {
    *panels = N > 0 && K > 0 ? N : 0;
    return (size_t)*panels * (size_t)K;
}

void vt_scalar_gemm_bf16_pack_b(int tb, int N, int K, const float *B, const vt_bf16 *B16, int ldb, int p0, int p1,
                                float *packed) {
    (void)N;
    for (int j = p0; j < p1; j++)
        for (int p = 0; p < K; p++) {
            size_t bi = tb ? (size_t)j * ldb + p : (size_t)p * ldb + j;
            packed[(size_t)j * K + p] = vt_bf16_float(B16 ? B16[bi] : vt_bf16_round(B[bi]));
        }
}

void vt_scalar_gemm_bf16_packed_b(int ta, int M, int N, int K, float alpha, const float *A, int lda,
                                  const float *packed, float beta, const float *bias, float *C, int ldc,
                                  float *work) {
    (void)work;
    gemm_ref(ta, 0, M, N, K, alpha, A, lda, NULL, NULL, 0, packed, beta, bias, C, ldc);
}

/* The packed form of op(A): op(A') row by row (M x K floats), a panel per row. */
size_t vt_scalar_gemm_bf16_packed_a_floats(int M, int K, int *panels) {
    *panels = M > 0 && K > 0 ? M : 0;
    return (size_t)*panels * (size_t)K;
}

void vt_scalar_gemm_bf16_pack_a(int ta, int M, int K, const float *A, int lda, int p0, int p1, float *packed) {
    (void)M;
    for (int i = p0; i < p1; i++)
        for (int p = 0; p < K; p++)
            packed[(size_t)i * K + p] = vt_bf16_float(vt_bf16_round(ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p]));
}

/* The reference loop on the packed rows (rounding them again leaves them as they are). */
void vt_scalar_gemm_bf16_packed_a(int tb, int M, int N, int K, float alpha, const float *packed, const float *B,
                                  const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc,
                                  float *work) {
    (void)work;
    gemm_ref(0, tb, M, N, K, alpha, packed, K, B, B16, ldb, NULL, beta, bias, C, ldc);
}

size_t vt_scalar_gemm_bf16_work_floats(int M, int N, int K) {
    (void)M; (void)N; (void)K;
    return 0;
}
