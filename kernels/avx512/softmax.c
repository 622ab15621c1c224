/* avx512/softmax.c - AVX-512 row softmax forward (max-subtracted, vt512_exp) and
 * backward (contracts in ../entries.def); the forward takes two rows at a time with their
 * passes interleaved (a row's max and sum reductions are serial chains).
 * Row sums are accumulated in 16 float lanes;
 * results match the scalar reference within rtol ~1e-6 (exp relative error <= 1.2e-7). */
#include <math.h>

#include "avx512.h"

/* Rows r0 .. r0 + nr - 1 (nr = 1 or 2) of softmax_rows, their passes interleaved so that
 * one row's reductions overlap the other's (a row's max and sum are serial chains);
 * rows ld floats apart; scaled: whether to multiply by scale (1 skips it). */
static inline __attribute__((always_inline)) void softmax_rows_n(const float *x, float *y, int cols, int ld,
                                                                 float scale, const int nr, const int scaled) {
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    __m512 vm[2] = {ninf, ninf}, mx[2], vsum[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, inv[2];
    for (int c = 0; c < cols; c += 16) {
        __mmask16 k = vt512_tail((size_t)(cols - c));
        for (int r = 0; r < nr; r++) {
            __m512 v = _mm512_maskz_loadu_ps(k, x + (size_t)r * ld + c);
            if (scaled) v = _mm512_mul_ps(vs, v);
            vm[r] = _mm512_mask_max_ps(vm[r], k, vm[r], v);
        }
    }
    for (int r = 0; r < nr; r++) mx[r] = _mm512_set1_ps(_mm512_reduce_max_ps(vm[r]));
    for (int c = 0; c < cols; c += 16) {
        __mmask16 k = vt512_tail((size_t)(cols - c));
        for (int r = 0; r < nr; r++) {
            __m512 v = _mm512_maskz_loadu_ps(k, x + (size_t)r * ld + c);
            if (scaled) v = _mm512_mul_ps(vs, v);
            __m512 e = vt512_exp(_mm512_sub_ps(v, mx[r]));
            vsum[r] = _mm512_mask_add_ps(vsum[r], k, vsum[r], e);
            _mm512_mask_storeu_ps(y + (size_t)r * ld + c, k, e);
        }
    }
    for (int r = 0; r < nr; r++) inv[r] = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum[r]));
    for (int c = 0; c < cols; c += 16) {
        __mmask16 k = vt512_tail((size_t)(cols - c));
        for (int r = 0; r < nr; r++) {
            float *yr = y + (size_t)r * ld + c;
            _mm512_mask_storeu_ps(yr, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, yr), inv[r]));
        }
    }
}

void vt_avx512_softmax_rows(const float *x, float *y, int rows, int cols, int ld, float scale) {
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

void vt_avx512_softmax_bwd_rows(const float *y, const float *dy, float *dx, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * ld, *dyr = dy + (size_t)r * ld;
        float *dxr = dx + (size_t)r * ld;
        __m512 vsum = _mm512_setzero_ps();
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = vt512_tail((size_t)(cols - c));
            vsum = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, dyr + c),
                                   _mm512_maskz_loadu_ps(k, yr + c), vsum);
        }
        __m512 s = _mm512_set1_ps(_mm512_reduce_add_ps(vsum));
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = vt512_tail((size_t)(cols - c));
            __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dyr + c), s);
            _mm512_mask_storeu_ps(dxr + c, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, yr + c), d));
        }
    }
}
