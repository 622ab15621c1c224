/* avx512/softmax.c - AVX-512 row softmax forward (max-subtracted, vt512_exp) and
 * backward (contracts in kernels.h). Row sums are accumulated in 16 float lanes;
 * results match the scalar reference within rtol ~1e-6 (exp relative error <= 1.2e-7). */
#include <math.h>

#include "avx512.h"

void vt_avx512_softmax_rows(const float *x, float *y, int rows, int cols, float scale) {
    const __m512 vs = _mm512_set1_ps(scale), ninf = _mm512_set1_ps(-INFINITY);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        float *yr = y + (size_t)r * cols;
        __m512 vm = ninf;
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = vt512_tail((size_t)(cols - c));
            __m512 v = _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(k, xr + c));
            vm = _mm512_mask_max_ps(vm, k, vm, v);
        }
        __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vm));
        __m512 vsum = _mm512_setzero_ps();
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = vt512_tail((size_t)(cols - c));
            __m512 v = _mm512_mul_ps(vs, _mm512_maskz_loadu_ps(k, xr + c));
            __m512 e = vt512_exp(_mm512_sub_ps(v, mx));
            vsum = _mm512_mask_add_ps(vsum, k, vsum, e);
            _mm512_mask_storeu_ps(yr + c, k, e);
        }
        __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
        for (int c = 0; c < cols; c += 16) {
            __mmask16 k = vt512_tail((size_t)(cols - c));
            _mm512_mask_storeu_ps(yr + c, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, yr + c), inv));
        }
    }
}

void vt_avx512_softmax_bwd_rows(const float *y, const float *dy, float *dx, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * cols, *dyr = dy + (size_t)r * cols;
        float *dxr = dx + (size_t)r * cols;
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
