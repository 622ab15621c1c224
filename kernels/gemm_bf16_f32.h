/* gemm_bf16_f32.h - private to kernels/: gemm_bf16 on a level without bf16 hardware
 * (avx2, avx512): the same rounded numerics through the level's fp32 GEMM, correct and
 * reproducible, not faster (kernels.h: bf16 numerics). K is taken in chunks of at most
 * VT_BF16_KCHUNK steps; per chunk op(A) and op(B) are rounded to bf16, widened back to
 * float32 into the workspace (in their own orientation), and the level's gemm_bias adds
 * alpha times their product to C (beta on the first chunk, 1 after; the bias with the
 * last). VT_GEMM_BF16_VIA_F32(level) defines vt_<level>_gemm_bf16 and
 * vt_<level>_gemm_bf16_work_floats; the file including it has declared the level's
 * gemm_bias and gemm_work_floats. */
#ifndef VT_KERNELS_GEMM_BF16_F32_H
#define VT_KERNELS_GEMM_BF16_F32_H

#include "bf16.h"

#define VT_BF16_KCHUNK 384 /* K steps per chunk: one K block of the fp32 GEMMs' */

/* dst (rows x cols, row stride cols) = src's rows x cols block (row stride ld) rounded
 * to bf16 and widened back; from src16 (bf16) when it is not NULL. */
static inline void vt_bf16_round_block(const float *src, const vt_bf16 *src16, size_t ld, int rows, int cols,
                                       float *dst) {
    for (int r = 0; r < rows; r++, dst += cols)
        for (int c = 0; c < cols; c++)
            dst[c] = vt_bf16_float(src16 ? src16[(size_t)r * ld + c] : vt_bf16_round(src[(size_t)r * ld + c]));
}

static inline size_t vt_bf16_round16(size_t n) { return (n + 15) / 16 * 16; }

#define VT_GEMM_BF16_VIA_F32(level)                                                                           \
    size_t vt_##level##_gemm_bf16_work_floats(int M, int N, int K) {                                          \
        if (M <= 0 || N <= 0 || K <= 0) return 0;                                                             \
        int kc = K < VT_BF16_KCHUNK ? K : VT_BF16_KCHUNK;                                                     \
        return vt_bf16_round16((size_t)M * kc) + vt_bf16_round16((size_t)kc * N) +                            \
               vt_##level##_gemm_work_floats(M, N, kc);                                                       \
    }                                                                                                         \
                                                                                                              \
    void vt_##level##_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,     \
                                const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias,   \
                                float *C, int ldc, float *work, const vt_region next[2]) {                    \
        (void)next; /* a hint; the chunks' products take none */                                              \
        if (M <= 0 || N <= 0) return;                                                                         \
        if (K <= 0 || alpha == 0.0f) {                                                                        \
            vt_##level##_gemm_bias(ta, tb, M, N, 0, alpha, A, lda, B, ldb, beta, bias, C, ldc, work);        \
            return;                                                                                           \
        }                                                                                                     \
        int KC = K < VT_BF16_KCHUNK ? K : VT_BF16_KCHUNK;                                                     \
        float *a = work, *b = a + vt_bf16_round16((size_t)M * KC);                                            \
        float *w = b + vt_bf16_round16((size_t)KC * N);                                                       \
        for (int p = 0; p < K; p += KC) {                                                                     \
            int kc = K - p < KC ? K - p : KC;                                                                 \
            /* op(A)'s columns p..p+kc: A's rows (ta = 0) or row block (ta = 1), likewise B */                \
            if (ta) vt_bf16_round_block(A + (size_t)p * lda, NULL, (size_t)lda, kc, M, a);                   \
            else vt_bf16_round_block(A + p, NULL, (size_t)lda, M, kc, a);                                     \
            if (tb) vt_bf16_round_block(B16 ? NULL : B + p, B16 ? B16 + p : NULL, (size_t)ldb, N, kc, b);   \
            else vt_bf16_round_block(B16 ? NULL : B + (size_t)p * ldb, B16 ? B16 + (size_t)p * ldb : NULL,    \
                                     (size_t)ldb, kc, N, b);                                                  \
            vt_##level##_gemm_bias(ta, tb, M, N, kc, alpha, a, ta ? M : kc, b, tb ? kc : N,                   \
                                   p == 0 ? beta : 1.0f, p + kc == K ? bias : NULL, C, ldc, w);               \
        }                                                                                                     \
    }

#endif
