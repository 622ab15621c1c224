/* avx2/performer.c - AVX2 feature_exp and feature_grad, the elementwise passes of
 * Performer's positive feature map (contracts in ../entries.def). feature_exp is the
 * reference's expression with vt256_exp (relative error <= 1.2e-7) for expf;
 * feature_grad's d is bitwise the reference's (same operations), its sum accumulates
 * in double lanes. Tails use masked loads/stores. */
#include "avx2.h"

void vt_avx2_feature_exp(const float *x, float *y, size_t n, float t, float c, float eps) {
    const __m256 vt = _mm256_set1_ps(t), vc = _mm256_set1_ps(c), ve = _mm256_set1_ps(eps);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        __m256 e = vt256_exp(_mm256_sub_ps(vt256_load(k, x + i), vt));
        vt256_store(k, y + i, _mm256_mul_ps(vc, _mm256_add_ps(e, ve)));
    }
}

double vt_avx2_feature_grad(float *d, const float *p, float ce, size_t n) {
    const __m256 vce = _mm256_set1_ps(ce);
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i; /* masked-off lanes load as 0, so they add 0 */
        __m256 v = _mm256_mul_ps(vt256_load(k, d + i), _mm256_sub_ps(vt256_load(k, p + i), vce));
        v = _mm256_and_ps(v, _mm256_castsi256_ps(vt256_tail(k)));
        vt256_store(k, d + i, v);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    return vt256_hsum_pd(_mm256_add_pd(s0, s1));
}
