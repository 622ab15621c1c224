/* avx512/elementwise.c - AVX-512 add, scale, zero_stream, copy_stream, axpy, sum, dot, max and AdamW (contracts in
 * ../entries.def). Tails use masked loads/stores, so any n and any alignment work.
 * sum/dot accumulate in double lanes (each float widened, products formed exactly in
 * double): |err| <= n 2^-53 sum|terms|, the scalar reference's bound up to ordering.
 * AdamW evaluates the scalar expression in the same order with the same IEEE ops
 * (no FMA contraction), so it matches the reference to rounding of sqrt/div (exact).
 * The passes over large arrays prefetch ahead of their streams (../prefetch.h). */
#include <math.h>
#include <stdint.h>

#include "../prefetch.h"
#include "avx512.h"

void vt_avx512_add(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(a + i);
        vt_prefetch_ahead(b + i);
        vt_prefetch_ahead(y + i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, a + i),
                                                      _mm512_maskz_loadu_ps(k, b + i)));
    }
}

void vt_avx512_scale(float *x, float s, size_t n) {
    __m512 vs = _mm512_set1_ps(s);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vs));
    }
}

void vt_avx512_zero_stream(float *x, size_t n) {
    size_t head = (size_t)(-(uintptr_t)x & 63) / sizeof(float); /* floats up to 64-byte alignment */
    if (head > n) head = n;
    _mm512_mask_storeu_ps(x, vt512_tail(head), _mm512_setzero_ps());
    size_t i = head;
    for (; i + 16 <= n; i += 16) _mm512_stream_ps(x + i, _mm512_setzero_ps());
    _mm_sfence(); /* streaming stores are weakly ordered: visible before anything after */
    _mm512_mask_storeu_ps(x + i, vt512_tail(n - i), _mm512_setzero_ps());
}

void vt_avx512_copy_stream(const float *x, float *y, size_t n) {
    size_t head = (size_t)(-(uintptr_t)y & 63) / sizeof(float); /* floats up to 64-byte alignment */
    if (head > n) head = n;
    __mmask16 kh = vt512_tail(head);
    _mm512_mask_storeu_ps(y, kh, _mm512_maskz_loadu_ps(kh, x));
    size_t i = head;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        _mm512_stream_ps(y + i, _mm512_loadu_ps(x + i));
    }
    _mm_sfence(); /* streaming stores are weakly ordered: visible before anything after */
    __mmask16 kt = vt512_tail(n - i);
    _mm512_mask_storeu_ps(y + i, kt, _mm512_maskz_loadu_ps(kt, x + i));
}

void vt_avx512_axpy(float a, const float *x, float *y, size_t n) {
    __m512 va = _mm512_set1_ps(a);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m512 p = _mm512_mul_ps(va, _mm512_maskz_loadu_ps(k, x + i));
        _mm512_mask_storeu_ps(y + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + i), p));
    }
}

double vt_avx512_sum(const float *x, size_t n) {
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (size_t i = 0; i < n; i += 16) {
        vt_prefetch_ahead(x + i);
        __m512 v = _mm512_maskz_loadu_ps(vt512_tail(n - i), x + i);
        s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

double vt_avx512_dot(const float *x, const float *y, size_t n) {
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(x + i);
        if (y != x) vt_prefetch_ahead(y + i);
        __m512 a = _mm512_maskz_loadu_ps(k, x + i), b = _mm512_maskz_loadu_ps(k, y + i);
        s0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(a)),
                             _mm512_cvtps_pd(_mm512_castps512_ps256(b)), s0);
        s1 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1)),
                             _mm512_cvtps_pd(_mm512_extractf32x8_ps(b, 1)), s1);
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

float vt_avx512_max(const float *x, size_t n) {
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, x + i));
    }
    return _mm512_reduce_max_ps(m);
}

void vt_avx512_adamw(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, float b1, float b2, float eps, float wd, float bc1, float bc2) {
    const __m512 vlrwd = _mm512_set1_ps(lr * wd), vb1 = _mm512_set1_ps(b1),
                 vb2 = _mm512_set1_ps(b2), vc1 = _mm512_set1_ps(1.0f - b1),
                 vc2 = _mm512_set1_ps(1.0f - b2), vbc1 = _mm512_set1_ps(bc1),
                 vbc2 = _mm512_set1_ps(bc2), veps = _mm512_set1_ps(eps), vlr = _mm512_set1_ps(lr);
    for (size_t i = 0; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        vt_prefetch_ahead(p + i);
        vt_prefetch_ahead(g + i);
        vt_prefetch_ahead(m + i);
        vt_prefetch_ahead(v + i);
        __m512 pp = _mm512_maskz_loadu_ps(k, p + i), gg = _mm512_maskz_loadu_ps(k, g + i);
        __m512 mm = _mm512_maskz_loadu_ps(k, m + i), vv = _mm512_maskz_loadu_ps(k, v + i);
        pp = _mm512_sub_ps(pp, _mm512_mul_ps(vlrwd, pp));
        mm = _mm512_add_ps(_mm512_mul_ps(vb1, mm), _mm512_mul_ps(vc1, gg));
        vv = _mm512_add_ps(_mm512_mul_ps(vb2, vv), _mm512_mul_ps(_mm512_mul_ps(vc2, gg), gg));
        __m512 mhat = _mm512_div_ps(mm, vbc1);
        __m512 den = _mm512_add_ps(_mm512_sqrt_ps(_mm512_div_ps(vv, vbc2)), veps);
        pp = _mm512_sub_ps(pp, _mm512_div_ps(_mm512_mul_ps(vlr, mhat), den));
        _mm512_mask_storeu_ps(p + i, k, pp);
        _mm512_mask_storeu_ps(m + i, k, mm);
        _mm512_mask_storeu_ps(v + i, k, vv);
    }
}
