/* avx2/rotary.c - AVX2 rot_pairs, rot_pairs_bwd, rot_pairs_bwd_cs (contracts in
 * ../entries.def): 4 (cos, sin) pairs per vector. Each output is the reference's expression
 * with the same IEEE operations (two rounded products, then their sum or difference;
 * then the accumulate), so results are bitwise the reference's. Even lanes hold the
 * first channel of a pair, odd lanes the second; swap() exchanges the two, and
 * odd(a, b) takes a's even lanes and b's odd ones. Tails use masked loads/stores. */
#include "avx2.h"

static inline __m256 swap(__m256 v) { return _mm256_permute_ps(v, 0xB1); }
static inline __m256 odd(__m256 a, __m256 b) { return _mm256_blend_ps(a, b, 0xAA); }

/* The pairs of v rotated by r's (c, s): (u c - w s, u s + w c); inverse: by the
 * transpose, (u c + w s, w c - u s). */
static inline __m256 rotate(__m256 v, __m256 r, const int inverse) {
    __m256 p = _mm256_mul_ps(v, _mm256_moveldup_ps(r));       /* u c, w c */
    __m256 q = _mm256_mul_ps(swap(v), _mm256_movehdup_ps(r)); /* w s, u s */
    return inverse ? odd(_mm256_add_ps(p, q), _mm256_sub_ps(p, q)) : odd(_mm256_sub_ps(p, q), _mm256_add_ps(p, q));
}

void vt_avx2_rot_pairs(const float *x, const float *r, size_t npr, size_t n, float *y) {
    for (size_t i = 0; i < 2 * npr; i += 8) {
        size_t k = 2 * npr - i;
        vt256_store(k, y + i, rotate(vt256_load(k, x + i), vt256_load(k, r + i), 0));
    }
    for (size_t i = 2 * npr; i < n; i += 8) vt256_store(n - i, y + i, vt256_load(n - i, x + i));
}

void vt_avx2_rot_pairs_bwd(const float *dy, const float *r, size_t npr, size_t n, float *dx) {
    for (size_t i = 0; i < 2 * npr; i += 8) {
        size_t k = 2 * npr - i;
        __m256 t = rotate(vt256_load(k, dy + i), vt256_load(k, r + i), 1);
        vt256_store(k, dx + i, _mm256_add_ps(vt256_load(k, dx + i), t));
    }
    for (size_t i = 2 * npr; i < n; i += 8)
        vt256_store(n - i, dx + i, _mm256_add_ps(vt256_load(n - i, dx + i), vt256_load(n - i, dy + i)));
}

void vt_avx2_rot_pairs_bwd_cs(const float *x, const float *dy, size_t npr, float *dcs) {
    for (size_t i = 0; i < 2 * npr; i += 8) {
        size_t k = 2 * npr - i;
        __m256 xv = vt256_load(k, x + i), g = vt256_load(k, dy + i);
        __m256 p = _mm256_mul_ps(xv, g);       /* u g0, w g1 */
        __m256 q = _mm256_mul_ps(xv, swap(g)); /* u g1, w g0 */
        __m256 t = odd(_mm256_add_ps(p, swap(p)), _mm256_sub_ps(swap(q), q));
        vt256_store(k, dcs + i, _mm256_add_ps(vt256_load(k, dcs + i), t));
    }
}
