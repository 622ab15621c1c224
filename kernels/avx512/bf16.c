/* avx512/bf16.c - bf16_round and bf16_round_float at the AVX-512 (F/BW/DQ/VL) level,
 * which has no bf16 instructions (kernels.h: bf16 numerics): vt512_bf16_rounded's integer
 * rounding (avx512.h), bitwise the scalar rounding, 16 floats a step, prefetching ahead
 * (../prefetch.h). The level's gemm_bf16, the fma path, is gemm.c's. */
#include "avx512.h"
#include "../bf16.h"
#include "../prefetch.h"

void vt_avx512_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    /* the upper 16 bits of each 32-bit lane, gathered into the low 256 bits */
    const __m512i high_halves = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 31, 29, 27, 25,
                                                 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m512i r = vt512_bf16_rounded(_mm512_loadu_ps(x + i));
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_castsi512_si256(_mm512_permutexvar_epi16(high_halves, r)));
    }
    for (; i < n; i++) y[i] = vt_bf16_round(x[i]);
}

void vt_avx512_bf16_round_float(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        _mm512_storeu_ps(y + i, _mm512_castsi512_ps(vt512_bf16_rounded(_mm512_loadu_ps(x + i))));
    }
    if (i < n) {
        __mmask16 m = vt512_tail(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(vt512_bf16_rounded(_mm512_maskz_loadu_ps(m, x + i))));
    }
}
