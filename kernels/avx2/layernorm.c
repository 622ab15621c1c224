/* avx2/layernorm.c - AVX2 LayerNorm forward and backward over the last dim (contracts
 * in ../entries.def). The forward mean is accumulated in double lanes, so with a large
 * common offset (|mean| >> std) it is correctly rounded to float (the scalar
 * reference's sequential float sum is not: tests compare both with a double-precision
 * LayerNorm there); the variance and the backward row sums use 8 float lanes.
 * The passes over large arrays prefetch ahead of their streams (../prefetch.h). */
#include <math.h>

#include "../prefetch.h"
#include "avx2.h"

void vt_avx2_layernorm_fwd(const float *x, const float *g, const float *b, float *y,
                           float *mean, float *rstd, int rows, int D, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D;
        float *yr = y + (size_t)r * D;
        __m256d m0 = _mm256_setzero_pd(), m1 = _mm256_setzero_pd();
        for (int i = 0; i < D; i += 8) {
            vt_prefetch_ahead(xr + i);
            vt_prefetch_ahead(yr + i);
            __m256 v = vt256_load((size_t)(D - i), xr + i);
            m0 = _mm256_add_pd(m0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
            m1 = _mm256_add_pd(m1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
        }
        float m = (float)(vt256_hsum_pd(_mm256_add_pd(m0, m1)) / D);
        __m256 vm = _mm256_set1_ps(m);
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        int i = 0;
        for (; i + 16 <= D; i += 16) {
            __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(xr + i), vm);
            __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(xr + i + 8), vm);
            s0 = _mm256_fmadd_ps(d0, d0, s0);
            s1 = _mm256_fmadd_ps(d1, d1, s1);
        }
        for (; i < D; i += 8) {
            size_t k = (size_t)(D - i);
            __m256 d0 = _mm256_and_ps(_mm256_sub_ps(vt256_load(k, xr + i), vm),
                                      _mm256_castsi256_ps(vt256_tail(k)));
            s0 = _mm256_fmadd_ps(d0, d0, s0);
        }
        float v = vt256_hsum(_mm256_add_ps(s0, s1)) / (float)D;
        float rs = 1.0f / sqrtf(v + eps);
        __m256 vr = _mm256_set1_ps(rs);
        for (i = 0; i < D; i += 8) {
            size_t k = (size_t)(D - i);
            __m256 xh = _mm256_mul_ps(_mm256_sub_ps(vt256_load(k, xr + i), vm), vr);
            vt256_store(k, yr + i,
                        _mm256_add_ps(_mm256_mul_ps(xh, vt256_load(k, g + i)), vt256_load(k, b + i)));
        }
        mean[r] = m;
        rstd[r] = rs;
    }
}

void vt_avx2_layernorm_bwd(const float *dy, const float *x, const float *g,
                           const float *mean, const float *rstd,
                           float *dx, float *dg, float *db, int rows, int D) {
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * D, *xr = x + (size_t)r * D;
        float *dxr = dx + (size_t)r * D;
        __m256 vm = _mm256_set1_ps(mean[r]), vr = _mm256_set1_ps(rstd[r]);
        __m256 sa = _mm256_setzero_ps(), sb = _mm256_setzero_ps();
        for (int i = 0; i < D; i += 8) {
            size_t k = (size_t)(D - i);
            vt_prefetch_ahead(dyr + i);
            vt_prefetch_ahead(xr + i);
            vt_prefetch_ahead(dxr + i);
            __m256 vdy = vt256_load(k, dyr + i);
            __m256 xh = _mm256_and_ps(_mm256_mul_ps(_mm256_sub_ps(vt256_load(k, xr + i), vm), vr),
                                      _mm256_castsi256_ps(vt256_tail(k)));
            __m256 dxh = _mm256_mul_ps(vdy, vt256_load(k, g + i));
            sa = _mm256_add_ps(sa, dxh);
            sb = _mm256_fmadd_ps(dxh, xh, sb);
            if (dg) vt256_store(k, dg + i, _mm256_fmadd_ps(vdy, xh, vt256_load(k, dg + i)));
            if (db) vt256_store(k, db + i, _mm256_add_ps(vt256_load(k, db + i), vdy));
        }
        __m256 ma = _mm256_set1_ps(vt256_hsum(sa) / (float)D);
        __m256 mb = _mm256_set1_ps(vt256_hsum(sb) / (float)D);
        for (int i = 0; i < D; i += 8) {
            size_t k = (size_t)(D - i);
            __m256 xh = _mm256_mul_ps(_mm256_sub_ps(vt256_load(k, xr + i), vm), vr);
            __m256 t = _mm256_sub_ps(_mm256_mul_ps(vt256_load(k, dyr + i), vt256_load(k, g + i)), ma);
            t = _mm256_fnmadd_ps(xh, mb, t);
            vt256_store(k, dxr + i, _mm256_fmadd_ps(vr, t, vt256_load(k, dxr + i)));
        }
    }
}
