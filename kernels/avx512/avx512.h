/* avx512/avx512.h - private to kernels/avx512/: the AVX-512 (F/BW/DQ/VL) kernel
 * declarations (contracts in kernels.h) and the vector exp/erf they share.
 *
 * vt512_exp(x): e^x for x in [-87.33, 88.0]; below -87.33 (incl. -inf) returns 0,
 *   above 88.0 returns e^88, NaN stays NaN. Cephes-style: n = round(x log2 e),
 *   r = x - n ln2 (two-part ln2), degree-5 polynomial, times 2^n. Max relative error
 *   1.2e-7 in range (measured on a dense grid of [-87, 0]).
 * vt512_erf(x): |x| < 4 in 16 intervals [i / 4, (i + 1) / 4): the interval's degree-5
 *   polynomial in u = 4 |x| - i - 1/2 (Chebyshev fits of erf, coefficients rounded to
 *   float, fetched for every lane at once by permutexvar from vt512_erf_coef); |x| >= 4
 *   gives 1 (erf(4) = 1 - 1.5e-8 rounds to 1 in float); sign(x) restored; NaN stays
 *   NaN. Max absolute error 5.9e-8, measured on every float of [0, 5] against double
 *   erf (the two-branch Cephes-style version it replaced: 1.2e-7, at 2.4x the time);
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

/* vt512_erf_coef[j][i]: coefficient of u^j on interval i (see vt512_erf); printed, with
 * its error, by scripts/fit_erf_table.py. */
static const float vt512_erf_coef[6][16] __attribute__((aligned(64))) = {
    {1.403162032e-01f, 4.041168988e-01f, 6.232408881e-01f, 7.840750813e-01f, 8.883882165e-01f, 9.481700659e-01f, 9.784437418e-01f, 9.919900298e-01f,
     9.973459840e-01f, 9.992170334e-01f, 9.997946024e-01f, 9.999521375e-01f, 9.999901056e-01f, 9.999982119e-01f, 9.999997020e-01f, 9.999999404e-01f},
    {2.777213156e-01f, 2.450882047e-01f, 1.908748895e-01f, 1.311862618e-01f, 7.956849039e-02f, 4.258994386e-02f, 2.011806332e-02f, 8.386456408e-03f,
     3.085204866e-03f, 1.001619501e-03f, 2.869688615e-04f, 7.255712262e-05f, 1.618969873e-05f, 3.187945822e-06f, 5.539833978e-07f, 8.495644721e-08f},
    {-8.678597398e-03f, -2.297659032e-02f, -2.982384712e-02f, -2.869690582e-02f, -2.237877063e-02f, -1.464048214e-02f, -8.173087612e-03f, -3.931187093e-03f,
     -1.638999907e-03f, -5.946849706e-04f, -1.883039804e-04f, -5.214058183e-05f, -1.264427465e-05f, -2.688552286e-06f, -5.017009812e-07f, -8.222207981e-08f},
    {-5.604973063e-03f, -3.669922240e-03f, -8.699186146e-04f, 1.451869495e-03f, 2.538285684e-03f, 2.467781305e-03f, 1.794405165e-03f, 1.053783461e-03f,
     5.162157468e-04f, 2.145392064e-04f, 7.641065167e-05f, 2.347536247e-05f, 6.249417311e-06f, 1.446265628e-06f, 2.916711708e-07f, 5.135552072e-08f},
    {2.663215855e-04f, 6.461477024e-04f, 6.855222164e-04f, 4.380968167e-04f, 1.106830969e-04f, -1.171211916e-04f, -1.928955753e-04f, -1.646994497e-04f,
     -1.031364372e-04f, -5.158572458e-05f, -2.135522845e-05f, -7.455227660e-06f, -2.219619546e-06f, -5.677458716e-07f, -1.254049380e-07f, -2.400958188e-08f},
    {1.011015556e-04f, 4.426381929e-05f, -2.640141429e-05f, -6.514568668e-05f, -5.963007425e-05f, -2.992569898e-05f, -2.249269528e-06f, 1.106252148e-05f,
     1.215255088e-05f, 8.164627616e-06f, 4.137123142e-06f, 1.687214194e-06f, 5.705683748e-07f, 1.626755619e-07f, 3.951132754e-08f, 8.232841964e-09f},
};

static inline __m512 vt512_erf(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 ax = _mm512_andnot_ps(sign, x);
    /* t = 4 |x| in [0, 16) (operand order keeps NaN), i = floor(t) the interval */
    __m512 t = _mm512_mul_ps(_mm512_min_ps(_mm512_set1_ps(3.99999976f), ax), _mm512_set1_ps(4.0f));
    __m512i i = _mm512_cvttps_epi32(t);
    __m512 u = _mm512_sub_ps(_mm512_sub_ps(t, _mm512_cvtepi32_ps(i)), _mm512_set1_ps(0.5f));
    __m512 p = _mm512_permutexvar_ps(i, _mm512_load_ps(vt512_erf_coef[5]));
    for (int j = 4; j >= 0; j--) p = _mm512_fmadd_ps(p, u, _mm512_permutexvar_ps(i, _mm512_load_ps(vt512_erf_coef[j])));
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
void vt_avx512_adamw(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, float b1, float b2, float eps, float wd, float bc1, float bc2);

#endif
