/* avx2/bf16.c - bf16 at the AVX2 level, which has no bf16 instructions (kernels.h: bf16
 * numerics): bf16_round in integer arithmetic, bitwise the scalar rounding (../bf16.h
 * owns the rule; avx512/bf16.c restates it with mask registers), 8 floats a step, the
 * three cases blended, prefetching ahead (../prefetch.h); gemm_bf16 through the fp32
 * GEMM (../gemm_bf16_f32.h). */
#include "avx2.h"
#include "../prefetch.h"
#include "../gemm_bf16_f32.h"

void vt_avx2_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    const __m256i expo = _mm256_set1_epi32(0x7f800000), absm = _mm256_set1_epi32(0x7fffffff);
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i hi = _mm256_srli_epi32(u, 16);
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(hi, one))), 16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), expo);
        __m256i tiny = _mm256_cmpeq_epi32(_mm256_and_si256(u, expo), _mm256_setzero_si256());
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x40)), nan);
        r = _mm256_blendv_epi8(r, _mm256_and_si256(hi, _mm256_set1_epi32(0x8000)), tiny);
        /* 8 x 32 -> 8 x 16 bits (every value < 2^16): pack in-lane, then the two lanes' halves */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_castsi256_si128(p));
    }
    for (; i < n; i++) y[i] = vt_bf16_round(x[i]);
}

VT_GEMM_BF16_VIA_F32(avx2)
