/* avx2/avx2.h - private to kernels/avx2/: the AVX2+FMA kernels, vt_avx2_<entry> for the
 * entries VT_AVX2_ENTRIES lists (contracts in ../entries.def), and the vector helpers they
 * share.
 *
 * vt256_exp(x): e^x by ../exp_poly.h's approximation (range, error bound), bitwise
 *   vt512_exp's values; 2^n built in the exponent field.
 * vt256_erf(x): |x| < 4 in 8 intervals [i / 2, (i + 1) / 2): the interval's degree-6
 *   polynomial in u = 2 |x| - i - 1/2, its coefficients fetched for every lane at once by
 *   one 8-entry permute each from vt_erf8_coef (../erf_table.h); 1 for |x| >= 4; sign(x)
 *   restored; NaN stays NaN. Max absolute error 8.1e-8 (see ../erf_table.h).
 * Tails: vt256_load/vt256_store(n, p) move min(n, 8) floats; masked-off lanes are
 * neither read nor written (vt256_tail(n) is the lane mask).
 */
#ifndef VT_KERNELS_AVX2_H
#define VT_KERNELS_AVX2_H

#include <immintrin.h>
#include <stddef.h>

#include "../erf_table.h"
#include "../exp_poly.h"
#include "../level.h"

static inline __m256i vt256_tail(size_t n) {
    int k = n >= 8 ? 8 : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Load/store the first min(n, 8) floats at p: full vectors take plain unaligned moves,
 * a tail (n < 8) a masked load, and a store in pieces of 4, 2 and 1 floats (VMASKMOVPS
 * stores are slow on AMD cores, kernels/TUNING.md). */
static inline __m256 vt256_load(size_t n, const float *p) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, vt256_tail(n));
}
static inline void vt256_store(size_t n, float *p, __m256 v) {
    if (n >= 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    __m128 h = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(p, h);
        h = _mm256_extractf128_ps(v, 1);
        p += 4;
    }
    if (n & 2) {
        _mm_storel_epi64((__m128i *)p, _mm_castps_si128(h));
        h = _mm_movehl_ps(h, h);
        p += 2;
    }
    if (n & 1) _mm_store_ss(p, h);
}

/* x rounded to bf16 (kernels.h: bf16 numerics; ../bf16.h's rule in integer arithmetic,
 * the three cases blended), as the 32-bit pattern of the rounded value: the bf16 bits in
 * the upper half, zeros in the lower. */
static inline __m256i vt256_bf16_rounded(__m256 x) {
    const __m256i expo = _mm256_set1_epi32(0x7f800000), absm = _mm256_set1_epi32(0x7fffffff);
    __m256i u = _mm256_castps_si256(x);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), expo);
    __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(u, expo), _mm256_setzero_si256());
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), nan);
    r = _mm256_blendv_epi8(r, _mm256_and_si256(u, _mm256_set1_epi32((int)0x80000000u)), tiny);
    return _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
}

/* The first min(n, 8) bf16 at p widened to float32 (exact), lanes past n zero and
 * memory past n not read. */
static inline __m256 vt256_load_bf16(size_t n, const vt_bf16 *p) {
    __m128i h;
    if (n >= 8) {
        h = _mm_loadu_si128((const __m128i *)p);
    } else {
        vt_bf16 t[8] = {0};
        for (size_t i = 0; i < n; i++) t[i] = p[i];
        h = _mm_loadu_si128((const __m128i *)t);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

static inline float vt256_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline float vt256_hmax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline double vt256_hsum_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static inline __m256 vt256_exp(__m256 x) {
    const __m256 hi = _mm256_set1_ps(VT_EXP_HI), lo = _mm256_set1_ps(VT_EXP_LO);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, _mm256_min_ps(hi, x)); /* operand order keeps NaN */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(VT_EXP_LOG2E)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VT_EXP_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(VT_EXP_LN2_LO), r);
    __m256 p = _mm256_set1_ps(vt_exp_coef[0]);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(vt_exp_coef[1]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(vt_exp_coef[2]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(vt_exp_coef[3]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(vt_exp_coef[4]));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(vt_exp_coef[5]));
    __m256 y = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    y = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

static inline __m256 vt256_erf(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 ax = _mm256_andnot_ps(sign, x);
    /* t = 2 |x| in [0, 8) (operand order keeps NaN), i = floor(t) the interval */
    __m256 t = _mm256_mul_ps(_mm256_min_ps(_mm256_set1_ps(3.99999976f), ax), _mm256_set1_ps(2.0f));
    __m256i i = _mm256_cvttps_epi32(t);
    __m256 u = _mm256_sub_ps(_mm256_sub_ps(t, _mm256_cvtepi32_ps(i)), _mm256_set1_ps(0.5f));
    /* Horner written out: GCC -O2 keeps a loop over the coefficients as a loop, whose
     * control slows GELU by about a fifth (kernels/TUNING.md) */
#define VT256_ERF_COEF(j) _mm256_permutevar8x32_ps(_mm256_load_ps(vt_erf8_coef[j]), i)
    __m256 p = VT256_ERF_COEF(6);
    p = _mm256_fmadd_ps(p, u, VT256_ERF_COEF(5));
    p = _mm256_fmadd_ps(p, u, VT256_ERF_COEF(4));
    p = _mm256_fmadd_ps(p, u, VT256_ERF_COEF(3));
    p = _mm256_fmadd_ps(p, u, VT256_ERF_COEF(2));
    p = _mm256_fmadd_ps(p, u, VT256_ERF_COEF(1));
    p = _mm256_fmadd_ps(p, u, VT256_ERF_COEF(0));
#undef VT256_ERF_COEF
    p = _mm256_blendv_ps(p, _mm256_set1_ps(1.0f), _mm256_cmp_ps(ax, _mm256_set1_ps(4.0f), _CMP_GE_OQ));
    return _mm256_or_ps(p, _mm256_and_ps(x, sign));
}

/* The entries this level implements (../level.h), by file; the table keeps the scalar
 * version of any entry not listed. */
#define VT_AVX2_ENTRIES(X)                                                                                  \
    /* gemm.c */ X(avx2, gemm) X(avx2, gemm_bias) X(avx2, gemm_prefetch) X(avx2, gemm_work_floats)          \
    /* gemm.c */ X(avx2, gemm_sums)                                                                         \
    /* gemm.c */ X(avx2, gemm_b_blocks) X(avx2, gemm_packed_b_floats) X(avx2, gemm_pack_b)                  \
    /* gemm.c */ X(avx2, gemm_packed_b) X(avx2, gemm_bf16_pack_b) X(avx2, gemm_bf16_packed_b)                \
    /* gemm.c */ X(avx2, gemm_bf16) X(avx2, gemm_bf16_work_floats) X(avx2, gemm_bf16_packed_b_floats)       \
    /* gemm.c */ X(avx2, gemm_bf16_packed_a_floats)                                                         \
    /* bf16.c */ X(avx2, bf16_round) X(avx2, bf16_round_float)                                              \
    /* softmax.c */ X(avx2, softmax_rows) X(avx2, softmax_bwd_rows)                                         \
    /* layernorm.c */ X(avx2, layernorm_fwd) X(avx2, layernorm_bwd)                                         \
    /* gelu.c */ X(avx2, gelu_fwd) X(avx2, gelu_bwd) X(avx2, gelu_bwd_fwd)                                  \
    /* elementwise.c */ X(avx2, add) X(avx2, scale) X(avx2, zero_stream) X(avx2, copy_stream) X(avx2, axpy) \
    /* elementwise.c */ X(avx2, sum) X(avx2, dot) X(avx2, max) X(avx2, adamw)                               \
    /* rotary.c */ X(avx2, rot_pairs) X(avx2, rot_pairs_bwd) X(avx2, rot_pairs_bwd_cs)                      \
    /* matmul_f64.c */ X(avx2, matmul_f64)                                                                  \
    /* performer.c */ X(avx2, feature_exp) X(avx2, feature_grad)
VT_AVX2_ENTRIES(VT_LEVEL_PROTOTYPE)

#endif
