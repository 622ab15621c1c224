/* avx512bf16/avx512bf16.h - private to kernels/avx512bf16/ and kernels/amx/: the
 * AVX512-BF16 level's entries (on top of avx512's) and the bf16 vector operations its
 * kernels share, as functions on __m512i holding 32 bf16 (2 per 32-bit lane):
 *   vt_dpbf16(acc, a, b)   VDPBF16PS: acc[j] += a[2j+1] b[2j+1], then + a[2j] b[2j], each a
 *                          float32 FMA rounded to nearest even, denormal inputs read as
 *                          zero and denormal results flushed to zero;
 *   vt_cvtne2ps(hi, lo)    VCVTNE2PS2BF16: lo's 16 floats rounded to bf16 in elements
 *                          0..15, hi's in 16..31 (kernels.h: bf16 rounding);
 *   vt_cvtneps(x)          VCVTNEPS2BF16: x's 16 floats rounded, in a __m256i;
 *   vt_loadu_bf16(k, p), vt_storeu_bf16(p, k, v)   the bf16 elements under mask k of 32
 *                          (16) lanes, others neither read (0) nor written.
 * In the emulation build (VT_AVX512_EMULATED, `make emu`) the AVX-512 intrinsics are
 * SIMDe's (../avx512/emulated.h) and these are C with the instructions' documented
 * semantics: SIMDe 0.7.4 has no VCVTNE2PS2BF16 / VCVTNEPS2BF16, and its dpbf16_ps adds
 * the even product first without flushing denormals. tests/test_kernels.c checks the
 * native level and the emulation against the same model of the documented order. */
#ifndef VT_KERNELS_AVX512BF16_H
#define VT_KERNELS_AVX512BF16_H

#include "../avx512/avx512.h"
#include "../bf16.h"
#include "../gemm_tiles.h" /* VT_BF16_NR */

#define VT_AVX512BF16_ENTRIES(X)                                                                           \
    X(avx512bf16, gemm_bf16) X(avx512bf16, gemm_bf16_work_floats) X(avx512bf16, gemm_bf16_packed_b_floats)    \
        X(avx512bf16, gemm_bf16_pack_b) X(avx512bf16, gemm_bf16_packed_b) X(avx512bf16, gemm_bf16_packed_a_floats) \
        X(avx512bf16, gemm_bf16_pack_a) X(avx512bf16, gemm_bf16_packed_a) X(avx512bf16, gemm_sums)             \
        X(avx512bf16, bf16_round)
VT_AVX512BF16_ENTRIES(VT_LEVEL_PROTOTYPE)

#ifndef VT_AVX512_EMULATED

static inline __m512 vt_dpbf16(__m512 acc, __m512i a, __m512i b) {
    return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b);
}
static inline __m512i vt_cvtne2ps(__m512 hi, __m512 lo) { return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); }
static inline __m256i vt_cvtneps(__m512 x) { return (__m256i)_mm512_cvtneps_pbh(x); }
static inline __m512i vt_loadu_bf16(__mmask32 k, const vt_bf16 *p) { return _mm512_maskz_loadu_epi16(k, p); }
static inline void vt_storeu_bf16(vt_bf16 *p, __mmask16 k, __m256i v) { _mm256_mask_storeu_epi16(p, k, v); }

#else /* the emulation: the documented operations, element by element */

static inline __m512 vt_dpbf16(__m512 acc, __m512i a, __m512i b) {
    float c[16];
    vt_bf16 x[32], y[32];
    _mm512_storeu_ps(c, acc);
    _mm512_storeu_si512(x, a);
    _mm512_storeu_si512(y, b);
    for (int j = 0; j < 16; j++) {
        float s = vt_bf16_ftz(c[j]);
        s = vt_bf16_ftz(fmaf(vt_bf16_ftz(vt_bf16_float(x[2 * j + 1])), vt_bf16_ftz(vt_bf16_float(y[2 * j + 1])), s));
        s = vt_bf16_ftz(fmaf(vt_bf16_ftz(vt_bf16_float(x[2 * j])), vt_bf16_ftz(vt_bf16_float(y[2 * j])), s));
        c[j] = s;
    }
    return _mm512_loadu_ps(c);
}

static inline __m512i vt_cvtne2ps(__m512 hi, __m512 lo) {
    float f[32];
    vt_bf16 h[32];
    _mm512_storeu_ps(f, lo);
    _mm512_storeu_ps(f + 16, hi);
    for (int i = 0; i < 32; i++) h[i] = vt_bf16_round(f[i]);
    return _mm512_loadu_si512(h);
}

static inline __m256i vt_cvtneps(__m512 x) {
    float f[16];
    vt_bf16 h[16];
    _mm512_storeu_ps(f, x);
    for (int i = 0; i < 16; i++) h[i] = vt_bf16_round(f[i]);
    return _mm256_loadu_si256((const __m256i *)h);
}

static inline __m512i vt_loadu_bf16(__mmask32 k, const vt_bf16 *p) {
    vt_bf16 h[32];
    for (int i = 0; i < 32; i++) h[i] = (k >> i) & 1 ? p[i] : 0;
    return _mm512_loadu_si512(h);
}

static inline void vt_storeu_bf16(vt_bf16 *p, __mmask16 k, __m256i v) {
    vt_bf16 h[16];
    _mm256_storeu_si256((__m256i *)h, v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) p[i] = h[i];
}

#endif

/* Packed B panels (avx512bf16/gemm.c), shared with kernels/amx/: steps [p0, p0 + kc) x
 * columns [j0, j0 + nc) of op(B) (float32 B rounded, or bf16 B16 copied) in panels of
 * VT_BF16_NR columns; panel q's pair p, column j is the word (B'[2p][j], B'[2p + 1][j]) at
 * dst[q NR kc2p + p NR + j] (low half the even step), for p < kc2p pairs, kc2p >=
 * (kc + 1) / 2, the pairs past K zero. dst 64-byte aligned. */
void vt_avx512bf16_pack_b(int tb, const float *B, const vt_bf16 *B16, int ldb, int p0, int j0, int kc, int nc,
                          int kc2p, uint32_t *dst);
/* The 16-bit permutation index giving the words (x[i], x[hi_base + i]) for i < 16. */
__m512i vt_bf16_interleave_idx(int hi_base);

/* The low n (0..32) lanes of 32. */
static inline __mmask32 vt512_tail32(int n) {
    return n >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << n) - 1u);
}

#endif
