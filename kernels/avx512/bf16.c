/* avx512/bf16.c - bf16 at the AVX-512 (F/BW/DQ/VL) level, which has no bf16 instructions
 * (kernels.h: bf16 numerics): bf16_round in integer arithmetic, bitwise the scalar
 * rounding, 16 floats a step, prefetching ahead (../prefetch.h); gemm_bf16 through the
 * fp32 GEMM (../gemm_bf16_f32.h). */
#include "avx512.h"
#include "../prefetch.h"
#include "../gemm_bf16_f32.h"

void vt_avx512_bf16_round(const float *x, vt_bf16 *y, size_t n) {
    const __m512i expo = _mm512_set1_epi32(0x7f800000), absm = _mm512_set1_epi32(0x7fffffff);
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    /* the low 16 bits of each 32-bit lane, gathered into the low 256 bits */
    const __m512i low_halves = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 30, 28, 26, 24,
                                                22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        vt_prefetch_ahead(x + i);
        vt_prefetch_ahead(y + i);
        __m512i u = _mm512_castps_si512(_mm512_loadu_ps(x + i));
        __m512i hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(hi, one))), 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absm), expo);
        __mmask16 tiny = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u, expo), _mm512_setzero_si512());
        r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
        r = _mm512_mask_and_epi32(r, tiny, hi, _mm512_set1_epi32(0x8000));
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_castsi512_si256(_mm512_permutexvar_epi16(low_halves, r)));
    }
    for (; i < n; i++) y[i] = vt_bf16_round(x[i]);
}

VT_GEMM_BF16_VIA_F32(avx512)
