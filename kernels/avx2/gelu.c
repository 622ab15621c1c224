/* avx2/gelu.c - AVX2 exact (erf) GELU forward, backward and both in one pass
 * (contracts in ../entries.def), on vt256_erf (|err| <= 8.1e-8 absolute, the 8-interval
 * table of ../erf_table.h) and vt256_exp (relative error <= 1.2e-7).
 * Forward abs error <= 0.5 |x| 2e-7 + rounding; backward likewise per unit dy.
 * The passes over large arrays prefetch ahead of their streams (../prefetch.h). */
#include "../prefetch.h"
#include "avx2.h"

/* The shared pieces (forward, backward and the fused entry give bitwise the same values):
 * e = erf(x / sqrt 2), gelu = (x / 2)(1 + e), gelu' = Phi + x phi = (1 + e) / 2 + x phi. */
static inline __m256 gelu_erf(__m256 v) {
    return vt256_erf(_mm256_mul_ps(v, _mm256_set1_ps(0.70710678118654752f)));
}
static inline __m256 gelu_value(__m256 v, __m256 e) {
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}
static inline __m256 gelu_deriv(__m256 v, __m256 e) {
    __m256 cdf = _mm256_mul_ps(_mm256_set1_ps(0.5f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    __m256 pdf = _mm256_mul_ps(_mm256_set1_ps(0.3989422804014327f),
                               vt256_exp(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), v), v)));
    return _mm256_fmadd_ps(v, pdf, cdf);
}

/* One vector of each pass over min(k, 8) values. */
static inline void gelu_fwd_vec(const float *x, float *y, size_t k) {
    __m256 v = vt256_load(k, x);
    vt256_store(k, y, gelu_value(v, gelu_erf(v)));
}
static inline void gelu_bwd_vec(const float *x, const float *dy, float *dx, size_t k) {
    __m256 v = vt256_load(k, x);
    __m256 d = gelu_deriv(v, gelu_erf(v));
    vt256_store(k, dx, _mm256_fmadd_ps(vt256_load(k, dy), d, vt256_load(k, dx)));
}
static inline void gelu_bwd_fwd_vec(const float *x, float *g, float *dx, size_t k, int add) {
    __m256 v = vt256_load(k, x), e = gelu_erf(v);
    __m256 d = gelu_deriv(v, e), gv = vt256_load(k, g);
    vt256_store(k, dx, add ? _mm256_fmadd_ps(gv, d, vt256_load(k, dx)) : _mm256_mul_ps(gv, d));
    vt256_store(k, g, gelu_value(v, e));
}

/* The loops take two vectors a step: one vector's erf is a chain of dependent steps too
 * long for the out-of-order window to overlap consecutive steps fully (kernels/TUNING.md). */
void vt_avx2_gelu_fwd(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        gelu_fwd_vec(x + i, y + i, 8);
        gelu_fwd_vec(x + i + 8, y + i + 8, 8);
    }
    for (; i < n; i += 8) gelu_fwd_vec(x + i, y + i, n - i);
}

void vt_avx2_gelu_bwd(const float *x, const float *dy, float *dx, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(dy + i);
        vt_prefetch_ahead(dx + i);
        gelu_bwd_vec(x + i, dy + i, dx + i, 8);
        gelu_bwd_vec(x + i + 8, dy + i + 8, dx + i + 8, 8);
    }
    for (; i < n; i += 8) gelu_bwd_vec(x + i, dy + i, dx + i, n - i);
}

void vt_avx2_gelu_bwd_fwd(const float *x, float *g, float *dx, size_t n, int add) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(g + i);
        vt_prefetch_ahead(dx + i);
        gelu_bwd_fwd_vec(x + i, g + i, dx + i, 8, add);
        gelu_bwd_fwd_vec(x + i + 8, g + i + 8, dx + i + 8, 8, add);
    }
    for (; i < n; i += 8) gelu_bwd_fwd_vec(x + i, g + i, dx + i, n - i, add);
}
