/* avx512/rotary.c - AVX-512 rot_pairs, rot_pairs_bwd, rot_pairs_bwd_cs (contracts in
 * kernels.h): 8 (cos, sin) pairs per vector. Each output is the reference's expression
 * with the same IEEE operations (two rounded products, then their sum or difference;
 * then the accumulate), so results are bitwise the reference's. Even lanes hold the
 * first channel of a pair, odd lanes the second; swap() exchanges the two. Tails use
 * masked loads/stores. */
#include "avx512.h"

#define ODD ((__mmask16)0xAAAA)

/* In-lane shuffles (each lane's source within its 4-lane group): swap [1 0 3 2],
 * evens [0 0 2 2] (the cosines of r), odds [1 1 3 3] (the sines). */
static inline __m512 swap(__m512 v) { return _mm512_shuffle_ps(v, v, 0xB1); }
static inline __m512 evens(__m512 v) { return _mm512_shuffle_ps(v, v, 0xA0); }
static inline __m512 odds(__m512 v) { return _mm512_shuffle_ps(v, v, 0xF5); }

void vt_avx512_rot_pairs(const float *x, const float *r, size_t npr, size_t n, float *y) {
    for (size_t i = 0; i < 2 * npr; i += 16) {
        __mmask16 k = vt512_tail(2 * npr - i);
        __m512 xv = _mm512_maskz_loadu_ps(k, x + i), rv = _mm512_maskz_loadu_ps(k, r + i);
        __m512 p = _mm512_mul_ps(xv, evens(rv));       /* u c, w c */
        __m512 q = _mm512_mul_ps(swap(xv), odds(rv)); /* w s, u s */
        _mm512_mask_storeu_ps(y + i, k, _mm512_mask_add_ps(_mm512_sub_ps(p, q), ODD, p, q));
    }
    for (size_t i = 2 * npr; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_maskz_loadu_ps(k, x + i));
    }
}

void vt_avx512_rot_pairs_bwd(const float *dy, const float *r, size_t npr, size_t n, float *dx) {
    for (size_t i = 0; i < 2 * npr; i += 16) {
        __mmask16 k = vt512_tail(2 * npr - i);
        __m512 g = _mm512_maskz_loadu_ps(k, dy + i), rv = _mm512_maskz_loadu_ps(k, r + i);
        __m512 p = _mm512_mul_ps(g, evens(rv));       /* g0 c, g1 c */
        __m512 q = _mm512_mul_ps(swap(g), odds(rv)); /* g1 s, g0 s */
        __m512 t = _mm512_mask_sub_ps(_mm512_add_ps(p, q), ODD, p, q);
        _mm512_mask_storeu_ps(dx + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dx + i), t));
    }
    for (size_t i = 2 * npr; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        _mm512_mask_storeu_ps(dx + i, k,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(k, dx + i), _mm512_maskz_loadu_ps(k, dy + i)));
    }
}

void vt_avx512_rot_pairs_bwd_cs(const float *x, const float *dy, size_t npr, float *dcs) {
    for (size_t i = 0; i < 2 * npr; i += 16) {
        __mmask16 k = vt512_tail(2 * npr - i);
        __m512 xv = _mm512_maskz_loadu_ps(k, x + i), g = _mm512_maskz_loadu_ps(k, dy + i);
        __m512 p = _mm512_mul_ps(xv, g);       /* u g0, w g1 */
        __m512 q = _mm512_mul_ps(xv, swap(g)); /* u g1, w g0 */
        __m512 t = _mm512_mask_sub_ps(_mm512_add_ps(p, swap(p)), ODD, swap(q), q);
        _mm512_mask_storeu_ps(dcs + i, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dcs + i), t));
    }
}
