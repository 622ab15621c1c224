/* avx512/avx512.h - private to kernels/avx512/: the AVX-512 (F/BW/DQ/VL) kernel
 * declarations (contracts in kernels.h) and the vector exp/erf they share.
 *
 * vt512_exp(x): e^x for x in [-87.33, 88.0]; below -87.33 (incl. -inf) returns 0,
 *   above 88.0 returns e^88, NaN stays NaN. Cephes-style: n = round(x log2 e),
 *   r = x - n ln2 (two-part ln2), degree-5 polynomial, times 2^n. Max relative error
 *   1.2e-7 in range (measured on a dense grid of [-87, 0]).
 * vt512_erf(x): |x| < 4 in 16 intervals [i / 4, (i + 1) / 4): the interval's degree-5
 *   polynomial in u = 4 |x| - i - 1/2 (Chebyshev fits of erf, coefficients rounded to
 *   float, fetched for every lane at once by permutexvar from vt_erf_coef, the table of
 *   ../erf_table.h that vt256_erf shares: the two agree bitwise); |x| >= 4
 *   gives 1 (erf(4) = 1 - 1.5e-8 rounds to 1 in float); sign(x) restored; NaN stays
 *   NaN. Max absolute error 5.9e-8 against double erf (../erf_table.h says where it was
 *   measured; the two-branch Cephes-style erf this replaced: 1.2e-7, at 2.4x the time);
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
#include "../kernels.h"

static inline __m512 vt512_exp(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.0f), lo = _mm512_set1_ps(-87.33f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(lo, _mm512_min_ps(hi, x)); /* operand order keeps NaN */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
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
    __m512 p = _mm512_permutexvar_ps(i, _mm512_load_ps(vt_erf_coef[5]));
    for (int j = 4; j >= 0; j--) p = _mm512_fmadd_ps(p, u, _mm512_permutexvar_ps(i, _mm512_load_ps(vt_erf_coef[j])));
    p = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(ax, _mm512_set1_ps(4.0f), _CMP_GE_OQ), p, _mm512_set1_ps(1.0f));
    return _mm512_or_ps(p, _mm512_and_ps(x, sign));
}

/* Tail mask: the low n (0..16) lanes. */
static inline __mmask16 vt512_tail(size_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
}

void vt_avx512_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb,
                         float beta, const float *bias, float *C, int ldc, float *work);
void vt_avx512_gemm(int ta, int tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb,
                    float beta, float *C, int ldc, float *work);
void vt_avx512_gemm_prefetch(int ta, int tb, int M, int N, int K, float alpha,
                             const float *A, int lda, const float *B, int ldb,
                             float beta, float *C, int ldc, float *work, const vt_region next[2]);
size_t vt_avx512_gemm_work_floats(int M, int N, int K);
void vt_avx512_softmax_rows(const float *x, float *y, int rows, int cols, float scale);
void vt_avx512_softmax_bwd_rows(const float *y, const float *dy, float *dx, int rows, int cols);
void vt_avx512_layernorm_fwd(const float *x, const float *g, const float *b, float *y,
                             float *mean, float *rstd, int rows, int D, float eps);
void vt_avx512_layernorm_bwd(const float *dy, const float *x, const float *g,
                             const float *mean, const float *rstd,
                             float *dx, float *dg, float *db, int rows, int D);
void vt_avx512_gelu_fwd(const float *x, float *y, size_t n);
void vt_avx512_gelu_bwd(const float *x, const float *dy, float *dx, size_t n);
void vt_avx512_gelu_bwd_fwd(const float *x, float *g, float *dx, size_t n, int add);
void vt_avx512_add(const float *a, const float *b, float *y, size_t n);
void vt_avx512_scale(float *x, float s, size_t n);
void vt_avx512_zero_stream(float *x, size_t n);
void vt_avx512_copy_stream(const float *x, float *y, size_t n);
void vt_avx512_axpy(float a, const float *x, float *y, size_t n);
double vt_avx512_sum(const float *x, size_t n);
double vt_avx512_dot(const float *x, const float *y, size_t n);
float vt_avx512_max(const float *x, size_t n);
void vt_avx512_rot_pairs(const float *x, const float *r, size_t npr, size_t n, float *y);
void vt_avx512_rot_pairs_bwd(const float *dy, const float *r, size_t npr, size_t n, float *dx);
void vt_avx512_rot_pairs_bwd_cs(const float *x, const float *dy, size_t npr, float *dcs);
void vt_avx512_matmul_f64(int n, const double *A, const double *B, double *C, int acc);
void vt_avx512_feature_exp(const float *x, float *y, size_t n, float t, float c, float eps);
double vt_avx512_feature_grad(float *d, const float *p, float ce, size_t n);
void vt_avx512_adamw(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);

#endif
