/* avx2/gelu.c - AVX2 exact (erf) GELU forward and backward (contracts in kernels.h),
 * on vt256_erf (|err| <= 2e-7 absolute) and vt256_exp (relative error <= 1.2e-7).
 * Forward abs error <= 0.5 |x| 2e-7 + rounding; backward likewise per unit dy. */
#include "avx2.h"

void vt_avx2_gelu_fwd(const float *x, float *y, size_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f),
                 r2 = _mm256_set1_ps(0.70710678118654752f);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        __m256 v = vt256_load(k, x + i);
        __m256 e = vt256_erf(_mm256_mul_ps(v, r2));
        vt256_store(k, y + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e)));
    }
}

void vt_avx2_gelu_bwd(const float *x, const float *dy, float *dx, size_t n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f),
                 r2 = _mm256_set1_ps(0.70710678118654752f),
                 inv_sqrt_2pi = _mm256_set1_ps(0.3989422804014327f),
                 mhalf = _mm256_set1_ps(-0.5f);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        __m256 v = vt256_load(k, x + i);
        __m256 cdf = _mm256_mul_ps(half, _mm256_add_ps(one, vt256_erf(_mm256_mul_ps(v, r2))));
        __m256 pdf = _mm256_mul_ps(inv_sqrt_2pi, vt256_exp(_mm256_mul_ps(_mm256_mul_ps(mhalf, v), v)));
        __m256 d = _mm256_fmadd_ps(v, pdf, cdf);
        vt256_store(k, dx + i, _mm256_fmadd_ps(vt256_load(k, dy + i), d, vt256_load(k, dx + i)));
    }
}
