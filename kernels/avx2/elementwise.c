/* avx2/elementwise.c - AVX2 add, scale, zero_stream, copy_stream, axpy, sum, dot, max and AdamW (contracts in
 * ../entries.def). Tails use masked loads/stores, so any n and any alignment work.
 * sum/dot accumulate in double lanes (each float widened, products formed exactly in
 * double): |err| <= n 2^-53 sum|terms|, the scalar reference's bound up to ordering.
 * AdamW evaluates the scalar expression in the same order with the same IEEE ops
 * (no FMA contraction), so it matches the reference exactly.
 * The passes over large arrays prefetch ahead of their streams (../prefetch.h). */
#include <math.h>
#include <stdint.h>

#include "../prefetch.h"
#include "avx2.h"

void vt_avx2_add(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        vt_prefetch_ahead(a + i);
        vt_prefetch_ahead(b + i);
        vt_prefetch_ahead(y + i);
        vt256_store(k, y + i, _mm256_add_ps(vt256_load(k, a + i), vt256_load(k, b + i)));
    }
}

void vt_avx2_scale(float *x, float s, size_t n) {
    __m256 vs = _mm256_set1_ps(s);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        vt_prefetch_ahead(x + i);
        vt256_store(k, x + i, _mm256_mul_ps(vt256_load(k, x + i), vs));
    }
}

void vt_avx2_zero_stream(float *x, size_t n) {
    size_t head = (size_t)(-(uintptr_t)x & 31) / sizeof(float); /* floats up to 32-byte alignment */
    if (head > n) head = n;
    vt256_store(head, x, _mm256_setzero_ps());
    size_t i = head;
    for (; i + 8 <= n; i += 8) _mm256_stream_ps(x + i, _mm256_setzero_ps());
    _mm_sfence(); /* streaming stores are weakly ordered: visible before anything after */
    vt256_store(n - i, x + i, _mm256_setzero_ps());
}

void vt_avx2_copy_stream(const float *x, float *y, size_t n) {
    size_t head = (size_t)(-(uintptr_t)y & 31) / sizeof(float); /* floats up to 32-byte alignment */
    if (head > n) head = n;
    vt256_store(head, y, vt256_load(head, x));
    size_t i = head;
    for (; i + 8 <= n; i += 8) {
        vt_prefetch_ahead(x + i);
        _mm256_stream_ps(y + i, _mm256_loadu_ps(x + i));
    }
    _mm_sfence(); /* streaming stores are weakly ordered: visible before anything after */
    vt256_store(n - i, y + i, vt256_load(n - i, x + i));
}

void vt_avx2_axpy(float a, const float *x, float *y, size_t n) {
    __m256 va = _mm256_set1_ps(a);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m256 p = _mm256_mul_ps(va, vt256_load(k, x + i));
        vt256_store(k, y + i, _mm256_add_ps(vt256_load(k, y + i), p));
    }
}

double vt_avx2_sum(const float *x, size_t n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t i = 0; i < n; i += 8) {
        vt_prefetch_ahead(x + i);
        __m256 v = vt256_load(n - i, x + i);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    return vt256_hsum_pd(_mm256_add_pd(s0, s1));
}

double vt_avx2_dot(const float *x, const float *y, size_t n) {
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        vt_prefetch_ahead(x + i);
        if (y != x) vt_prefetch_ahead(y + i);
        __m256 a = vt256_load(k, x + i), b = vt256_load(k, y + i);
        s0 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                             _mm256_cvtps_pd(_mm256_castps256_ps128(b)), s0);
        s1 = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)),
                             _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)), s1);
    }
    return vt256_hsum_pd(_mm256_add_pd(s0, s1));
}

float vt_avx2_max(const float *x, size_t n) {
    __m256 m = _mm256_set1_ps(-INFINITY);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i; /* masked-off lanes stay -inf */
        __m256 v = _mm256_blendv_ps(m, vt256_load(k, x + i), _mm256_castsi256_ps(vt256_tail(k)));
        m = _mm256_max_ps(m, v);
    }
    return vt256_hmax(m);
}

void vt_avx2_adamw(float *p, const float *g, float *m, float *v, size_t n,
                   float lr, float b1, float b2, float eps, float wd, float bc1, float bc2) {
    const __m256 vlrwd = _mm256_set1_ps(lr * wd), vb1 = _mm256_set1_ps(b1),
                 vb2 = _mm256_set1_ps(b2), vc1 = _mm256_set1_ps(1.0f - b1),
                 vc2 = _mm256_set1_ps(1.0f - b2), vbc1 = _mm256_set1_ps(bc1),
                 vbc2 = _mm256_set1_ps(bc2), veps = _mm256_set1_ps(eps), vlr = _mm256_set1_ps(lr);
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i;
        vt_prefetch_ahead(p + i);
        vt_prefetch_ahead(g + i);
        vt_prefetch_ahead(m + i);
        vt_prefetch_ahead(v + i);
        __m256 pp = vt256_load(k, p + i), gg = vt256_load(k, g + i);
        __m256 mm = vt256_load(k, m + i), vv = vt256_load(k, v + i);
        pp = _mm256_sub_ps(pp, _mm256_mul_ps(vlrwd, pp));
        mm = _mm256_add_ps(_mm256_mul_ps(vb1, mm), _mm256_mul_ps(vc1, gg));
        vv = _mm256_add_ps(_mm256_mul_ps(vb2, vv), _mm256_mul_ps(_mm256_mul_ps(vc2, gg), gg));
        __m256 mhat = _mm256_div_ps(mm, vbc1);
        __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vv, vbc2)), veps);
        pp = _mm256_sub_ps(pp, _mm256_div_ps(_mm256_mul_ps(vlr, mhat), den));
        vt256_store(k, p + i, pp);
        vt256_store(k, m + i, mm);
        vt256_store(k, v + i, vv);
    }
}
