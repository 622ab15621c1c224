/* avx2/bf16.c - bf16_round and bf16_round_float at the AVX2 level, which has no bf16
 * instructions (kernels.h: bf16 numerics): vt256_bf16_rounded's integer rounding
 * (avx2.h), bitwise the scalar rounding (../bf16.h owns the rule), 8 floats a step,
 * prefetching ahead (../prefetch.h). The level's gemm_bf16, the fma path, is gemm.c's. */
#include "avx2.h"
#include "../bf16.h"
#include "../prefetch.h"

void vt_avx2_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m256i r = _mm256_srli_epi32(vt256_bf16_rounded(_mm256_loadu_ps(x + i)), 16);
        /* 8 x 32 -> 8 x 16 bits (every value < 2^16): pack in-lane, then the two lanes' halves */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(p));
    }
    for (; i < n; i++) y[i] = vt_bf16_round(x[i]);
}

void vt_avx2_bf16_round_float(const float *x, float *y, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(vt256_bf16_rounded(_mm256_loadu_ps(x + i))));
    }
    for (; i < n; i++) y[i] = vt_bf16_float(vt_bf16_round(x[i]));
}
