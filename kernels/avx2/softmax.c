/* avx2/softmax.c - AVX2 row softmax forward (max-subtracted, vt256_exp) and backward
 * (contracts in ../entries.def). Row sums are accumulated in 8 float lanes; results match
 * the scalar reference within rtol ~1e-6 (exp relative error <= 1.2e-7).
 * The forward takes two rows at a time with their passes interleaved, as the avx512
 * level's does (a row's max and sum reductions are serial chains), each row's arithmetic
 * as it would be alone, and prefetches its streams ahead (../prefetch.h) for arrays
 * larger than the caches. The backward goes row by row without prefetches, which suits
 * the cache-resident blocks attention gives it (kernels/TUNING.md). */
#include <math.h>

#include "../prefetch.h"
#include "avx2.h"

/* Rows r0 .. r0 + nr - 1 (nr = 1 or 2) of softmax_rows, their passes interleaved so that
 * one row's reductions overlap the other's; rows ld floats apart; scaled: whether to
 * multiply by scale (1 skips it). */
static inline __attribute__((always_inline)) void softmax_rows_n(const float *x, float *y, int cols, int ld,
                                                                 float scale, const int nr, const int scaled) {
    const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    __m256 vm[2] = {ninf, ninf}, mx[2], vsum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, inv[2];
    for (int c = 0; c < cols; c += 8) {
        size_t k = (size_t)(cols - c);
        __m256 valid = _mm256_castsi256_ps(vt256_tail(k));
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            vt_prefetch_ahead(x + (size_t)r * ld + c);
            __m256 v = vt256_load(k, x + (size_t)r * ld + c);
            if (scaled) v = _mm256_mul_ps(vs, v);
            vm[r] = _mm256_max_ps(vm[r], _mm256_blendv_ps(ninf, v, valid));
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) mx[r] = _mm256_set1_ps(vt256_hmax(vm[r]));
    for (int c = 0; c < cols; c += 8) {
        size_t k = (size_t)(cols - c);
        __m256 valid = _mm256_castsi256_ps(vt256_tail(k));
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            __m256 v = vt256_load(k, x + (size_t)r * ld + c);
            if (scaled) v = _mm256_mul_ps(vs, v);
            __m256 e = _mm256_and_ps(vt256_exp(_mm256_sub_ps(v, mx[r])), valid);
            vsum[r] = _mm256_add_ps(vsum[r], e);
            vt_prefetch_ahead(y + (size_t)r * ld + c);
            vt256_store(k, y + (size_t)r * ld + c, e);
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < nr; r++) inv[r] = _mm256_set1_ps(1.0f / vt256_hsum(vsum[r]));
    for (int c = 0; c < cols; c += 8) {
        size_t k = (size_t)(cols - c);
#pragma GCC unroll 2
        for (int r = 0; r < nr; r++) {
            float *yr = y + (size_t)r * ld + c;
            vt256_store(k, yr, _mm256_mul_ps(vt256_load(k, yr), inv[r]));
        }
    }
}

void vt_avx2_softmax_rows(const float *x, float *y, int rows, int cols, int ld, float scale) {
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
        size_t o = (size_t)r * ld;
        if (scale == 1.0f) softmax_rows_n(x + o, y + o, cols, ld, scale, 2, 0);
        else softmax_rows_n(x + o, y + o, cols, ld, scale, 2, 1);
    }
    if (r < rows) {
        size_t o = (size_t)r * ld;
        if (scale == 1.0f) softmax_rows_n(x + o, y + o, cols, ld, scale, 1, 0);
        else softmax_rows_n(x + o, y + o, cols, ld, scale, 1, 1);
    }
}

void vt_avx2_softmax_bwd_rows(const float *y, const float *dy, float *dx, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * ld, *dyr = dy + (size_t)r * ld;
        float *dxr = dx + (size_t)r * ld;
        __m256 vsum = _mm256_setzero_ps();
        for (int c = 0; c < cols; c += 8) {
            size_t k = (size_t)(cols - c);
            vsum = _mm256_fmadd_ps(vt256_load(k, dyr + c), vt256_load(k, yr + c), vsum);
        }
        __m256 s = _mm256_set1_ps(vt256_hsum(vsum));
        for (int c = 0; c < cols; c += 8) {
            size_t k = (size_t)(cols - c);
            __m256 d = _mm256_sub_ps(vt256_load(k, dyr + c), s);
            vt256_store(k, dxr + c, _mm256_mul_ps(vt256_load(k, yr + c), d));
        }
    }
}
