/* avx512/avx512.h - private to kernels/avx512/: the AVX-512 (F/BW/DQ/VL) kernels,
 * vt_avx512_<entry> for the entries VT_AVX512_ENTRIES lists (contracts in ../entries.def),
 * and the vector exp/erf they share.
 *
 * vt512_exp(x): e^x by ../exp_poly.h's approximation (range, error bound), bitwise
 *   vt256_exp's values; 2^n by scalef.
 * vt512_erf(x): |x| < 4 in 16 intervals [i / 4, (i + 1) / 4): the interval's degree-5
 *   polynomial in u = 4 |x| - i - 1/2 (Chebyshev fits of erf, coefficients rounded to
 *   float, fetched for every lane at once by permutexvar from vt_erf16_coef of
 *   ../erf_table.h; vt256_erf has a table of its own, 8 intervals wide); |x| >= 4
 *   gives 1 (erf(4) = 1 - 1.5e-8 rounds to 1 in float); sign(x) restored; NaN stays
 *   NaN. |error| <= 5.9e-8 absolute against double erf, the bound ../erf_table.h states;
 *   tests/test_kernels.c enforces 2e-7 through GELU against double precision.
 */
#ifndef VT_KERNELS_AVX512_H
#define VT_KERNELS_AVX512_H

#ifdef VT_AVX512_EMULATED
#include "emulated.h" /* test build: SIMDe on AVX2, see there */
#else
#include <immintrin.h>
#endif
#include <stddef.h>

#include "../erf_table.h"
#include "../exp_poly.h"
#include "../level.h"

static inline __m512 vt512_exp(__m512 x) {
    const __m512 hi = _mm512_set1_ps(VT_EXP_HI), lo = _mm512_set1_ps(VT_EXP_LO);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(lo, _mm512_min_ps(hi, x)); /* operand order keeps NaN */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(VT_EXP_LOG2E)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VT_EXP_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(VT_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(vt_exp_coef[0]);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(vt_exp_coef[1]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(vt_exp_coef[2]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(vt_exp_coef[3]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(vt_exp_coef[4]));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(vt_exp_coef[5]));
    __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    /* y 2^n: n is in [-126, 127] after the clamp, so scalef rounds exactly as a multiply
     * by the power of two built in the exponent field would (bitwise the same) */
    return _mm512_maskz_scalef_ps((__mmask16)~under, y, n);
}

static inline __m512 vt512_erf(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 ax = _mm512_andnot_ps(sign, x);
    /* t = 4 |x| in [0, 16) (operand order keeps NaN), i = floor(t) the interval */
    __m512 t = _mm512_mul_ps(_mm512_min_ps(_mm512_set1_ps(3.99999976f), ax), _mm512_set1_ps(4.0f));
    __m512i i = _mm512_cvttps_epi32(t);
    __m512 u = _mm512_sub_ps(_mm512_sub_ps(t, _mm512_cvtepi32_ps(i)), _mm512_set1_ps(0.5f));
    /* Horner written out, as vt256_erf's */
#define VT512_ERF_COEF(j) _mm512_permutexvar_ps(i, _mm512_load_ps(vt_erf16_coef[j]))
    __m512 p = VT512_ERF_COEF(5);
    p = _mm512_fmadd_ps(p, u, VT512_ERF_COEF(4));
    p = _mm512_fmadd_ps(p, u, VT512_ERF_COEF(3));
    p = _mm512_fmadd_ps(p, u, VT512_ERF_COEF(2));
    p = _mm512_fmadd_ps(p, u, VT512_ERF_COEF(1));
    p = _mm512_fmadd_ps(p, u, VT512_ERF_COEF(0));
#undef VT512_ERF_COEF
    p = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(4.0f), _CMP_GE_OQ), p, _mm512_set1_ps(1.0f));
    return _mm512_or_ps(p, _mm512_and_ps(x, sign));
}

/* In-register transpose of 16 rows of 16 floats: r[j][i] <- r[i][j]. Every index is
 * a constant after unrolling, so r stays in registers. */
static inline __attribute__((always_inline)) void vt512_transpose16(__m512 r[16]) {
    __m512 t[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
#pragma GCC unroll 16
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    }
}

/* Tail mask: the low n (0..16) lanes. */
static inline __mmask16 vt512_tail(size_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

/* x rounded to bf16 (kernels.h: bf16 numerics; ../bf16.h's rule in integer arithmetic),
 * as the 32-bit pattern of the rounded value: the bf16 bits in the upper half, zeros in
 * the lower. Nearest even; a zero or denormal gives a zero of its sign; a NaN stays a
 * NaN, made quiet. */
static inline __m512i vt512_bf16_rounded(__m512 x) {
    const __m512i expo = _mm512_set1_epi32(0x7f800000);
    __m512i u = _mm512_castps_si512(x);
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(u, odd), _mm512_set1_epi32(0x7fff));
    /* one instruction per special case (the packs of the bf16 fma path run this on
     * every operand element): NaN is x unordered with itself, zero or denormal an
     * exponent of zeros */
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __mmask16 tiny = _mm512_testn_epi32_mask(u, expo);
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
    r = _mm512_mask_and_epi32(r, tiny, u, _mm512_set1_epi32((int)0x80000000u));
    return _mm512_and_si512(r, _mm512_set1_epi32((int)0xffff0000u));
}

/* The first min(n, 16) bf16 at p widened to float32 (exact), lanes past n zero and
 * memory past n not read. */
static inline __m512 vt512_load_bf16(size_t n, const vt_bf16 *p) {
    __m256i h;
    if (n >= 16) {
        h = _mm256_loadu_si256((const __m256i *)p);
    } else {
        vt_bf16 t[16] = {0};
        for (size_t i = 0; i < n; i++) t[i] = p[i];
        h = _mm256_loadu_si256((const __m256i *)t);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* C = beta C (+ bias on every row) over M x N, row stride ldc; beta == 0 never reads C. */
static inline void vt512_scale_c(int M, int N, float beta, const float *bias, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        float *cr = C + (size_t)i * ldc;
        for (int j = 0; j < N; j += 16) {
            __mmask16 k = vt512_tail((size_t)(N - j));
            __m512 v = beta == 0.0f ? _mm512_setzero_ps()
                                    : _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(k, cr + j));
            if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + j));
            _mm512_mask_storeu_ps(cr + j, k, v);
        }
    }
}

/* A GEMM call without a product, the BLAS convention of the GEMMs of this level and the
 * bf16 levels above it: M or N <= 0 does nothing; K <= 0 or alpha == 0 gives C = beta C
 * (+ bias) without reading A or B. Returns 1 when the call is one of these (and done). */
static inline int vt512_gemm_no_product(int M, int N, int K, float alpha, float beta, const float *bias, float *C,
                                        int ldc) {
    if (M <= 0 || N <= 0) return 1;
    if (K > 0 && alpha != 0.0f) return 0;
    vt512_scale_c(M, N, beta, bias, C, ldc);
    return 1;
}

/* p[0:m] += rows [0, rows) of a (row stride lda floats), each column's adds in row order:
 * the weight gradients' column sums (../gemm_sums.h), shared with the bf16 levels' GEMMs
 * (gemm.c). */
void vt_avx512_sum_rows(float *p, const float *a, size_t lda, int m, int rows);

/* The entries this level implements (../level.h), by file; the table keeps the scalar
 * version of any entry not listed. */
#define VT_AVX512_ENTRIES(X)                                                                                          \
    /* gemm.c */ X(avx512, gemm) X(avx512, gemm_bias) X(avx512, gemm_prefetch) X(avx512, gemm_work_floats)            \
    /* gemm.c */ X(avx512, gemm_sums)                                                                                 \
    /* gemm.c */ X(avx512, gemm_b_blocks) X(avx512, gemm_packed_b_floats) X(avx512, gemm_pack_b)                      \
    /* gemm.c */ X(avx512, gemm_packed_b)                                                                             \
    /* gemm.c */ X(avx512, gemm_bf16) X(avx512, gemm_bf16_work_floats) X(avx512, gemm_bf16_packed_b_floats)           \
    /* gemm.c */ X(avx512, gemm_bf16_packed_a_floats)                                                                 \
    /* bf16.c */ X(avx512, bf16_round) X(avx512, bf16_round_float)                                                    \
    /* softmax.c */ X(avx512, softmax_rows) X(avx512, softmax_bwd_rows)                                               \
    /* layernorm.c */ X(avx512, layernorm_fwd) X(avx512, layernorm_bwd)                                               \
    /* gelu.c */ X(avx512, gelu_fwd) X(avx512, gelu_bwd) X(avx512, gelu_bwd_fwd)                                      \
    /* elementwise.c */ X(avx512, add) X(avx512, scale) X(avx512, zero_stream) X(avx512, copy_stream) X(avx512, axpy) \
    /* elementwise.c */ X(avx512, sum) X(avx512, dot) X(avx512, max) X(avx512, adamw)                                 \
    /* rotary.c */ X(avx512, rot_pairs) X(avx512, rot_pairs_bwd) X(avx512, rot_pairs_bwd_cs)                          \
    /* matmul_f64.c */ X(avx512, matmul_f64)                                                                          \
    /* performer.c */ X(avx512, feature_exp) X(avx512, feature_grad)
VT_AVX512_ENTRIES(VT_LEVEL_PROTOTYPE)

#endif
