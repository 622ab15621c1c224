/* avx512/emulated.h - test-only: lets kernels/avx512/ run on a CPU without AVX-512.
 *
 * Included by avx512.h instead of <immintrin.h> when VT_AVX512_EMULATED is defined
 * (`make emu`, build tree build-emu512; never in the normal build). The _mm512_*
 * intrinsics become SIMDe's portable versions (Debian libsimde-dev, header-only),
 * which run on AVX2 + FMA: the kernels/avx512 files are then compiled with
 * -mavx2 -mfma, and SSE/AVX/AVX2 intrinsics stay the native ones.
 *
 * SIMDe 0.7.4 has no _mm512_* alias for some intrinsics the kernels use; they are
 * defined below with Intel's semantics, as are two it does not check:
 *   load_ps / store_ps / stream_ps  trap on an address that is not 64-byte aligned, as
 *       the hardware faults (SIMDe would accept it and hide the bug); stream_ps is a
 *       plain store here (SIMDe has none; the cache hint changes no value);
 *   maskz_loadu_ps / mask_storeu_ps (and their 256-bit forms), maskz_loadu_pd /
 *       mask_storeu_pd  never read or write a masked-off lane (the kernels rely on it
 *       at row ends);
 *   cvttps_epi32  truncates, out of range or NaN -> INT32_MIN (vcvttps2dq on each
 *       half); cvtepi32_ps  rounds to nearest-even (vcvtdq2ps on each half);
 *   cvtps_pd, cvtepu16_epi32, extractf32x8_ps, shuffle_f32x4  exact;
 *   testn_epi32_mask  lane i set where a & b is zero in lane i;
 *   reduce_add_ps / reduce_add_pd / reduce_max_ps  Intel leaves the order open; these
 *       use the order of GCC 12's native versions, so they round as a native build does.
 */
#ifndef VT_KERNELS_AVX512_EMULATED_H
#define VT_KERNELS_AVX512_EMULATED_H

#if !defined(__AVX2__) || !defined(__FMA__)
#error "emulated.h: compile with -mavx2 -mfma (the emulation runs on AVX2 + FMA)"
#endif

#include <stdint.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

/* The low and high 256-bit halves of a 512-bit vector. */
static inline simde__m256 vt_emu_lo_ps(simde__m512 a) { return simde_mm512_castps512_ps256(a); }
static inline simde__m256 vt_emu_hi_ps(simde__m512 a) {
    return simde_mm256_castpd_ps(simde_mm512_extractf64x4_pd(simde_mm512_castps_pd(a), 1));
}
static inline simde__m256d vt_emu_lo_pd(simde__m512d a) { return simde_mm512_castpd512_pd256(a); }
static inline simde__m256d vt_emu_hi_pd(simde__m512d a) { return simde_mm512_extractf64x4_pd(a, 1); }

static inline simde__m512 vt_emu_load_ps(const void *p) {
    if ((uintptr_t)p % 64) __builtin_trap();
    return simde_mm512_load_ps(p);
}

static inline void vt_emu_store_ps(void *p, simde__m512 a) {
    if ((uintptr_t)p % 64) __builtin_trap();
    simde_mm512_store_ps(p, a);
}

static inline void vt_emu_stream_ps(void *p, simde__m512 a) { vt_emu_store_ps(p, a); }

/* The lanes of a masked load / store, one float at a time: masked-off lanes of memory
 * are neither read (dst 0) nor written. */
static inline void vt_emu_load_lanes(uint32_t k, const float *src, float *dst, int lanes) {
    for (int i = 0; i < lanes; i++) dst[i] = (k >> i) & 1 ? src[i] : 0.0f;
}
static inline void vt_emu_store_lanes(uint32_t k, const float *src, float *dst, int lanes) {
    for (int i = 0; i < lanes; i++)
        if ((k >> i) & 1) dst[i] = src[i];
}

static inline simde__m512 vt_emu_maskz_loadu_ps(simde__mmask16 k, const void *p) {
    if (k == 0xFFFF) return simde_mm512_loadu_ps(p);
    float r[16];
    vt_emu_load_lanes(k, p, r, 16);
    return simde_mm512_loadu_ps(r);
}

static inline void vt_emu_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    if (k == 0xFFFF) {
        simde_mm512_storeu_ps(p, a);
        return;
    }
    float v[16];
    simde_mm512_storeu_ps(v, a);
    vt_emu_store_lanes(k, v, p, 16);
}

/* The same for 8 doubles. */
static inline simde__m512d vt_emu_maskz_loadu_pd(simde__mmask8 k, const void *p) {
    double r[8];
    for (int i = 0; i < 8; i++) r[i] = (k >> i) & 1 ? ((const double *)p)[i] : 0.0;
    return simde_mm512_loadu_pd(r);
}

static inline void vt_emu_mask_storeu_pd(void *p, simde__mmask8 k, simde__m512d a) {
    double v[8];
    simde_mm512_storeu_pd(v, a);
    for (int i = 0; i < 8; i++)
        if ((k >> i) & 1) ((double *)p)[i] = v[i];
}

/* The 256-bit (AVX-512VL) forms, same rules. */
static inline simde__m256 vt_emu_maskz_loadu_ps256(simde__mmask8 k, const void *p) {
    float r[8];
    vt_emu_load_lanes(k, p, r, 8);
    return simde_mm256_loadu_ps(r);
}

static inline void vt_emu_mask_storeu_ps256(void *p, simde__mmask8 k, simde__m256 a) {
    float v[8];
    simde_mm256_storeu_ps(v, a);
    vt_emu_store_lanes(k, v, p, 8);
}

static inline simde__m512i vt_emu_cvttps_epi32(simde__m512 a) {
    simde__m256i lo = simde_mm256_cvttps_epi32(vt_emu_lo_ps(a));
    simde__m256i hi = simde_mm256_cvttps_epi32(vt_emu_hi_ps(a));
    return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(lo), hi, 1);
}

static inline simde__m512 vt_emu_cvtepi32_ps(simde__m512i a) {
    simde__m256 lo = simde_mm256_cvtepi32_ps(simde_mm512_castsi512_si256(a));
    simde__m256 hi = simde_mm256_cvtepi32_ps(simde_mm512_extracti64x4_epi64(a, 1));
    return simde_mm512_insertf32x8(simde_mm512_castps256_ps512(lo), hi, 1);
}

static inline simde__m512d vt_emu_cvtps_pd(simde__m256 a) {
    simde__m256d lo = simde_mm256_cvtps_pd(simde_mm256_castps256_ps128(a));
    simde__m256d hi = simde_mm256_cvtps_pd(simde_mm256_extractf128_ps(a, 1));
    return simde_mm512_insertf64x4(simde_mm512_castpd256_pd512(lo), hi, 1);
}

static inline simde__m512i vt_emu_cvtepu16_epi32(simde__m256i a) {
    simde__m256i lo = simde_mm256_cvtepu16_epi32(simde_mm256_castsi256_si128(a));
    simde__m256i hi = simde_mm256_cvtepu16_epi32(simde_mm256_extracti128_si256(a, 1));
    return simde_mm512_inserti64x4(simde_mm512_castsi256_si512(lo), hi, 1);
}

/* The reductions, in GCC 12's order: halves, quarters, then lanes (0 + 2, 1 + 3) and
 * the two results. */
static inline float vt_emu_reduce_add_ps(simde__m512 a) {
    simde__m256 h = simde_mm256_add_ps(vt_emu_hi_ps(a), vt_emu_lo_ps(a));
    simde__m128 q = simde_mm_add_ps(simde_mm256_extractf128_ps(h, 1), simde_mm256_castps256_ps128(h));
    q = simde_mm_add_ps(q, simde_mm_shuffle_ps(q, q, SIMDE_MM_SHUFFLE(1, 0, 3, 2)));
    return simde_mm_cvtss_f32(q) + simde_mm_cvtss_f32(simde_mm_shuffle_ps(q, q, 1));
}

static inline float vt_emu_reduce_max_ps(simde__m512 a) {
    simde__m256 h = simde_mm256_max_ps(vt_emu_hi_ps(a), vt_emu_lo_ps(a));
    simde__m128 q = simde_mm_max_ps(simde_mm256_extractf128_ps(h, 1), simde_mm256_castps256_ps128(h));
    q = simde_mm_max_ps(q, simde_mm_shuffle_ps(q, q, SIMDE_MM_SHUFFLE(1, 0, 3, 2)));
    q = simde_mm_max_ps(q, simde_mm_shuffle_ps(q, q, SIMDE_MM_SHUFFLE(0, 1, 0, 1)));
    return simde_mm_cvtss_f32(q);
}

static inline double vt_emu_reduce_add_pd(simde__m512d a) {
    simde__m256d h = simde_mm256_add_pd(vt_emu_hi_pd(a), vt_emu_lo_pd(a));
    simde__m128d q = simde_mm_add_pd(simde_mm256_extractf128_pd(h, 1), simde_mm256_castpd256_pd128(h));
    return simde_mm_cvtsd_f64(q) + simde_mm_cvtsd_f64(simde_mm_unpackhi_pd(q, q));
}

/* SIMDe (load_ps, store_ps) and GCC's <immintrin.h>, which SIMDe includes, may already
 * define these as macros. */
#undef _mm512_load_ps
#undef _mm512_store_ps
#undef _mm512_maskz_loadu_ps
#undef _mm512_mask_storeu_ps
#undef _mm512_maskz_loadu_pd
#undef _mm512_mask_storeu_pd
#undef _mm256_maskz_loadu_ps
#undef _mm256_mask_storeu_ps
#undef _mm512_cvttps_epi32
#undef _mm512_cvtepi32_ps
#undef _mm512_cvtps_pd
#undef _mm512_cvtepu16_epi32
#undef _mm512_extractf32x8_ps
#undef _mm512_shuffle_f32x4
#undef _mm512_reduce_add_ps
#undef _mm512_reduce_max_ps
#undef _mm512_reduce_add_pd
#undef _mm512_stream_ps
#undef _mm512_testn_epi32_mask
#define _mm512_load_ps(p) vt_emu_load_ps(p)
#define _mm512_stream_ps(p, a) vt_emu_stream_ps(p, a)
#define _mm512_store_ps(p, a) vt_emu_store_ps(p, a)
#define _mm512_maskz_loadu_ps(k, p) vt_emu_maskz_loadu_ps(k, p)
#define _mm512_mask_storeu_ps(p, k, a) vt_emu_mask_storeu_ps(p, k, a)
#define _mm512_maskz_loadu_pd(k, p) vt_emu_maskz_loadu_pd(k, p)
#define _mm512_mask_storeu_pd(p, k, a) vt_emu_mask_storeu_pd(p, k, a)
#define _mm256_maskz_loadu_ps(k, p) vt_emu_maskz_loadu_ps256(k, p)
#define _mm256_mask_storeu_ps(p, k, a) vt_emu_mask_storeu_ps256(p, k, a)
#define _mm512_cvttps_epi32(a) vt_emu_cvttps_epi32(a)
#define _mm512_cvtepi32_ps(a) vt_emu_cvtepi32_ps(a)
#define _mm512_cvtps_pd(a) vt_emu_cvtps_pd(a)
#define _mm512_cvtepu16_epi32(a) vt_emu_cvtepu16_epi32(a)
#define _mm512_extractf32x8_ps(a, imm8) \
    simde_mm256_castpd_ps(simde_mm512_extractf64x4_pd(simde_mm512_castps_pd(a), imm8))
#define _mm512_shuffle_f32x4(a, b, imm8) simde_mm512_shuffle_f32x4(a, b, imm8)
#define _mm512_reduce_add_ps(a) vt_emu_reduce_add_ps(a)
#define _mm512_reduce_max_ps(a) vt_emu_reduce_max_ps(a)
#define _mm512_reduce_add_pd(a) vt_emu_reduce_add_pd(a)
#define _mm512_testn_epi32_mask(a, b) simde_mm512_cmpeq_epi32_mask(simde_mm512_and_si512(a, b), simde_mm512_setzero_si512())

#endif
