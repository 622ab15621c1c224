/* avx512/gelu.c - AVX-512 exact (erf) GELU forward and backward (contracts in
 * kernels.h), on vt512_erf (|err| <= 2e-7 absolute) and vt512_exp (relative error <= 1.2e-7).
 * Forward abs error <= 0.5 |x| 2e-7 + rounding; backward likewise per unit dy. */
#include "avx512.h"

void vt_avx512_gelu_fwd(const float *x, float *y, size_t n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f),
                 r2 = _mm512_set1_ps(0.70710678118654752f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        __m512 e = vt512_erf(_mm512_mul_ps(v, r2));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e)));
    }
}

void vt_avx512_gelu_bwd(const float *x, const float *dy, float *dx, size_t n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f),
                 r2 = _mm512_set1_ps(0.70710678118654752f),
                 inv_sqrt_2pi = _mm512_set1_ps(0.3989422804014327f),
                 mhalf = _mm512_set1_ps(-0.5f);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        __m512 cdf = _mm512_mul_ps(half, _mm512_add_ps(one, vt512_erf(_mm512_mul_ps(v, r2))));
        __m512 pdf = _mm512_mul_ps(inv_sqrt_2pi, vt512_exp(_mm512_mul_ps(_mm512_mul_ps(mhalf, v), v)));
        __m512 d = _mm512_fmadd_ps(v, pdf, cdf);
        _mm512_mask_storeu_ps(dx + i, k, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, dy + i), d,
                                                         _mm512_maskz_loadu_ps(k, dx + i)));
    }
}
