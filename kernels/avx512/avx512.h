/* avx512/avx512.h - private to kernels/avx512/: the AVX-512 (F/BW/DQ/VL) kernel
 * declarations (contracts in kernels.h) and the vector exp/erf they share.
 *
 * vt512_exp(x): e^x for x in [-87.33, 88.0]; below -87.33 (incl. -inf) returns 0,
 *   above 88.0 returns e^88, NaN stays NaN. Cephes-style: n = round(x log2 e),
 *   r = x - n ln2 (two-part ln2), degree-5 polynomial, times 2^n. Max relative error
 *   1.2e-7 in range (measured on a dense grid of [-87, 0]).
 * vt512_erf(x): |x| < 0.85: x P(x^2) (degree 6, Cephes erff); else
 *   sign(x) (1 - e^{-x^2} R(t)), t = 1 / (1 + 0.47047 |x|) (rcp14 and one Newton step: a
 *   division held the backward GELU pass 20% longer over memory), R degree 7 (least-squares fit
 *   of erfc(x) e^{x^2} on [0.85, 4]), |x| clamped to 4.5. Max absolute error <= 2e-7 over
 *   all finite x (measured 1.14e-7 on a 1e-6 grid of [-8, 8]; tests/test_kernels.c enforces
 *   it through GELU against double precision).
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

static inline __m512 vt512_erf(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 ax = _mm512_andnot_ps(sign, x);
    /* small branch: x P(x^2) */
    __m512 z = _mm512_mul_ps(x, x);
    __m512 s = _mm512_set1_ps(7.853861353153693e-5f);
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-8.010193625184903e-4f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(5.188327685732524e-3f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-2.685381193529856e-2f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(1.128358514861418e-1f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(-3.761262582423300e-1f));
    s = _mm512_fmadd_ps(s, z, _mm512_set1_ps(1.128379165726710e+0f));
    s = _mm512_mul_ps(x, s);
    /* large branch: 1 - e^{-x^2} R(t) */
    __m512 cx = _mm512_min_ps(_mm512_set1_ps(4.5f), ax);
    __m512 den = _mm512_fmadd_ps(cx, _mm512_set1_ps(0.47047f), _mm512_set1_ps(1.0f));
    __m512 t = _mm512_rcp14_ps(den);
    t = _mm512_mul_ps(t, _mm512_fnmadd_ps(den, t, _mm512_set1_ps(2.0f)));
    __m512 g = _mm512_set1_ps(0.11311993644334247f);
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(-0.53000032499077256f));
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(0.8125863763078145f));
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(-0.33773802230549808f));
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(0.46449411855245196f));
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(0.20310721574151718f));
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(0.27509260938772409f));
    g = _mm512_fmadd_ps(g, t, _mm512_set1_ps(-0.00065350874733354527f));
    __m512 ex = vt512_exp(_mm512_mul_ps(_mm512_xor_ps(cx, sign), cx));
    __m512 l = _mm512_fnmadd_ps(ex, g, _mm512_set1_ps(1.0f));
    l = _mm512_or_ps(l, _mm512_and_ps(x, sign));
    __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(0.85f), _CMP_LT_OQ);
    return _mm512_mask_blend_ps(small, l, s);
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
