/* avx512/gelu.c - AVX-512 exact (erf) GELU forward, backward and both in one pass
 * (contracts in ../entries.def), on vt512_erf (|err| <= 5.9e-8 absolute, the interval
 * table of ../erf_table.h) and vt512_exp (relative error <= 1.2e-7).
 * Forward abs error <= 0.5 |x| 2e-7 + rounding; backward likewise per unit dy.
 * The passes over large arrays prefetch ahead of their streams (../prefetch.h). */
#include "../prefetch.h"
#include "avx512.h"

/* The shared pieces (forward, backward and the fused entry give bitwise the same values):
 * e = erf(x / sqrt 2), gelu = (x / 2)(1 + e), gelu' = Phi + x phi = (1 + e) / 2 + x phi. */
static inline __m512 gelu_erf(__m512 v) {
    return vt512_erf(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118654752f)));
}
static inline __m512 gelu_value(__m512 v, __m512 e) {
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
static inline __m512 gelu_deriv(__m512 v, __m512 e) {
    __m512 cdf = _mm512_mul_ps(_mm512_set1_ps(0.5f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    __m512 pdf = _mm512_mul_ps(_mm512_set1_ps(0.3989422804014327f),
                               vt512_exp(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), v), v)));
    return _mm512_fmadd_ps(v, pdf, cdf);
}

void vt_avx512_gelu_fwd(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        _mm512_mask_storeu_ps(y + i, k, gelu_value(v, gelu_erf(v)));
    }
}

void vt_avx512_gelu_bwd(const float *x, const float *dy, float *dx, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(dy + i);
        vt_prefetch_ahead(dx + i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        __m512 d = gelu_deriv(v, gelu_erf(v));
        __m512 dxv = _mm512_maskz_loadu_ps(k, dx + i);
        _mm512_mask_storeu_ps(dx + i, k, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, dy + i), d, dxv));
    }
}

void vt_avx512_gelu_bwd_fwd(const float *x, float *g, float *dx, size_t n, int add) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(g + i);
        vt_prefetch_ahead(dx + i);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i), e = gelu_erf(v);
        __m512 d = gelu_deriv(v, e), gv = _mm512_maskz_loadu_ps(k, g + i);
        _mm512_mask_storeu_ps(dx + i, k,
                              add ? _mm512_fmadd_ps(gv, d, _mm512_maskz_loadu_ps(k, dx + i)) : _mm512_mul_ps(gv, d));
        _mm512_mask_storeu_ps(g + i, k, gelu_value(v, e));
    }
}
