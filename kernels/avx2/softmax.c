/* avx2/softmax.c - AVX2 row softmax forward (max-subtracted, vt256_exp) and backward
 * (contracts in ../entries.def). Row sums are accumulated in 8 float lanes; results match
 * the scalar reference within rtol ~1e-6 (exp relative error <= 1.2e-7). */
#include <math.h>

#include "avx2.h"

void vt_avx2_softmax_rows(const float *x, float *y, int rows, int cols, int ld, float scale) {
    const __m256 vs = _mm256_set1_ps(scale), ninf = _mm256_set1_ps(-INFINITY);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * ld;
        float *yr = y + (size_t)r * ld;
        __m256 vm = ninf;
        for (int c = 0; c < cols; c += 8) {
            size_t k = (size_t)(cols - c);
            __m256 v = _mm256_mul_ps(vs, vt256_load(k, xr + c));
            vm = _mm256_max_ps(vm, _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(vt256_tail(k))));
        }
        __m256 mx = _mm256_set1_ps(vt256_hmax(vm));
        __m256 vsum = _mm256_setzero_ps();
        for (int c = 0; c < cols; c += 8) {
            size_t k = (size_t)(cols - c);
            __m256 v = _mm256_mul_ps(vs, vt256_load(k, xr + c));
            __m256 e = _mm256_and_ps(vt256_exp(_mm256_sub_ps(v, mx)), _mm256_castsi256_ps(vt256_tail(k)));
            vsum = _mm256_add_ps(vsum, e);
            vt256_store(k, yr + c, e);
        }
        __m256 inv = _mm256_set1_ps(1.0f / vt256_hsum(vsum));
        for (int c = 0; c < cols; c += 8) {
            size_t k = (size_t)(cols - c);
            vt256_store(k, yr + c, _mm256_mul_ps(vt256_load(k, yr + c), inv));
        }
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
