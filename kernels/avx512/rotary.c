/* avx512/rotary.c - AVX-512 rot_pairs, rot_pairs_bwd, rot_pairs_bwd_cs (contracts in
 * ../entries.def): 8 (cos, sin) pairs per vector. Each output is the reference's expression
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

/* The pairs of v rotated by r's (c, s): (u c - w s, u s + w c); inverse: by the
 * transpose, (u c + w s, w c - u s). */
static inline __m512 rotate(__m512 v, __m512 r, const int inverse) {
    __m512 p = _mm512_mul_ps(v, evens(r));       /* u c, w c */
    __m512 q = _mm512_mul_ps(swap(v), odds(r)); /* w s, u s */
    return inverse ? _mm512_mask_sub_ps(_mm512_add_ps(p, q), ODD, p, q)
                   : _mm512_mask_add_ps(_mm512_sub_ps(p, q), ODD, p, q);
}

void vt_avx512_rot_pairs(const float *x, const float *r, size_t npr, size_t n, float *y) {
    for (size_t i = 0; i < 2 * npr; i += 16) {
        __mmask16 k = vt512_tail(2 * npr - i);
        __m512 v = rotate(_mm512_maskz_loadu_ps(k, x + i), _mm512_maskz_loadu_ps(k, r + i), 0);
        _mm512_mask_storeu_ps(y + i, k, v);
    }
    for (size_t i = 2 * npr; i < n; i += 16) {
        __mmask16 k = vt512_tail(n - i);
        _mm512_mask_storeu_ps(y + i, k, _mm512_maskz_loadu_ps(k, x + i));
    }
}

void vt_avx512_rot_pairs_bwd(const float *dy, const float *r, size_t npr, size_t n, float *dx) {
    for (size_t i = 0; i < 2 * npr; i += 16) {
        __mmask16 k = vt512_tail(2 * npr - i);
        __m512 t = rotate(_mm512_maskz_loadu_ps(k, dy + i), _mm512_maskz_loadu_ps(k, r + i), 1);
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
