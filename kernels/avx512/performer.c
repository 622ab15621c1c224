/* avx512/performer.c - AVX-512 feature_exp and feature_grad, the elementwise passes of
 * Performer's positive feature map (contracts in ../entries.def). feature_exp is the
 * reference's expression with vt512_exp (relative error <= 1.2e-7) for expf;
 * feature_grad's d is bitwise the reference's (same operations), its sum accumulates
 * in double lanes. Tails use masked loads/stores. */
#include "avx512.h"

void vt_avx512_feature_exp(const float *x, float *y, size_t n, float t, float c, float eps) {
    const __m512 vt = _mm512_set1_ps(t), vc = _mm512_set1_ps(c), ve = _mm512_set1_ps(eps);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        __m512 e = vt512_exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vt));
        _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(vc, _mm512_add_ps(e, ve)));
    }
}

double vt_avx512_feature_grad(float *d, const float *p, float ce, size_t n) {
    const __m512 vce = _mm512_set1_ps(ce);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, d + i),
                                 _mm512_sub_ps(_mm512_maskz_loadu_ps(k, p + i), vce));
        _mm512_mask_storeu_ps(d + i, k, v);
        v = _mm512_maskz_mov_ps(k, v); /* lanes past n add 0 */
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}
