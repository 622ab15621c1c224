/* avx512/layernorm.c - AVX-512 LayerNorm forward and backward over the last dim
 * (contracts in ../entries.def). The forward mean is accumulated in double lanes, so with a
 * large common offset (|mean| >> std) it is correctly rounded to float (the scalar
 * reference's sequential float sum is not: tests compare both with a double-precision
 * LayerNorm there); the variance and the backward row sums use 16 float lanes.
 * The passes over large arrays prefetch ahead of their streams (../prefetch.h). */
#include <math.h>

#include "../prefetch.h"
#include "avx512.h"

static inline __m512 ld(__mmask16 k, const float *p) { return _mm512_maskz_loadu_ps(k, p); }

void vt_avx512_layernorm_fwd(const float *x, const float *g, const float *b, float *y,
                             float *mean, float *rstd, int rows, int D, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D;
        float *yr = y + (size_t)r * D;
        __m512d m0 = _mm512_setzero_pd(), m1 = _mm512_setzero_pd();
        int i;
        for (i = 0; i < D; i += 16) {
            vt_prefetch_ahead(xr + i);
            vt_prefetch_ahead(yr + i);
            __m512 v = ld(vt512_tail((size_t)(D - i)), xr + i);
            m0 = _mm512_add_pd(m0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
            m1 = _mm512_add_pd(m1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
        }
        float m = (float)(_mm512_reduce_add_pd(_mm512_add_pd(m0, m1)) / D);
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        __m512 vm = _mm512_set1_ps(m);
        for (i = 0; i + 32 <= D; i += 32) {
            __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xr + i), vm);
            __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(xr + i + 16), vm);
            s0 = _mm512_fmadd_ps(d0, d0, s0);
            s1 = _mm512_fmadd_ps(d1, d1, s1);
        }
        for (; i < D; i += 16) {
            __mmask16 k = vt512_tail((size_t)(D - i));
            __m512 d0 = _mm512_maskz_sub_ps(k, ld(k, xr + i), vm);
            s0 = _mm512_fmadd_ps(d0, d0, s0);
        }
        float v = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / (float)D;
        float rs = 1.0f / sqrtf(v + eps);
        __m512 vr = _mm512_set1_ps(rs);
        for (i = 0; i < D; i += 16) {
            __mmask16 k = vt512_tail((size_t)(D - i));
            __m512 xh = _mm512_mul_ps(_mm512_sub_ps(ld(k, xr + i), vm), vr);
            _mm512_mask_storeu_ps(yr + i, k, _mm512_add_ps(_mm512_mul_ps(xh, ld(k, g + i)), ld(k, b + i)));
        }
        mean[r] = m;
        rstd[r] = rs;
    }
}

void vt_avx512_layernorm_bwd(const float *dy, const float *x, const float *g,
                             const float *mean, const float *rstd,
                             float *dx, float *dg, float *db, int rows, int D) {
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * D, *xr = x + (size_t)r * D;
        float *dxr = dx + (size_t)r * D;
        __m512 vm = _mm512_set1_ps(mean[r]), vr = _mm512_set1_ps(rstd[r]);
        __m512 sa = _mm512_setzero_ps(), sb = _mm512_setzero_ps();
        for (int i = 0; i < D; i += 16) {
            __mmask16 k = vt512_tail((size_t)(D - i));
            vt_prefetch_ahead(dyr + i);
            vt_prefetch_ahead(xr + i);
            vt_prefetch_ahead(dxr + i);
            __m512 vdy = ld(k, dyr + i);
            __m512 xh = _mm512_mul_ps(_mm512_sub_ps(ld(k, xr + i), vm), vr);
            __m512 dxh = _mm512_mul_ps(vdy, ld(k, g + i));
            sa = _mm512_add_ps(sa, dxh);
            sb = _mm512_fmadd_ps(dxh, xh, sb);
            if (dg) _mm512_mask_storeu_ps(dg + i, k, _mm512_fmadd_ps(vdy, xh, ld(k, dg + i)));
            if (db) _mm512_mask_storeu_ps(db + i, k, _mm512_add_ps(ld(k, db + i), vdy));
        }
        __m512 ma = _mm512_set1_ps(_mm512_reduce_add_ps(sa) / (float)D);
        __m512 mb = _mm512_set1_ps(_mm512_reduce_add_ps(sb) / (float)D);
        for (int i = 0; i < D; i += 16) {
            __mmask16 k = vt512_tail((size_t)(D - i));
            __m512 xh = _mm512_mul_ps(_mm512_sub_ps(ld(k, xr + i), vm), vr);
            __m512 t = _mm512_sub_ps(_mm512_mul_ps(ld(k, dyr + i), ld(k, g + i)), ma);
            t = _mm512_fnmadd_ps(xh, mb, t);
            _mm512_mask_storeu_ps(dxr + i, k, _mm512_fmadd_ps(vr, t, ld(k, dxr + i)));
        }
    }
}
