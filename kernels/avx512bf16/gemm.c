/* avx512bf16/gemm.c - the bf16 GEMM on VDPBF16PS, BLIS-style (contract in ../entries.def,
 * numerics in ../kernels.h):
 *   C = alpha op(A') op(B') + beta C (+ bias), A', B' rounded to bf16, float32 sums.
 * The blocking loops, the prefetch of the next packing's source and the C tile's
 * epilogue are ../gemm_bf16_driver.h (shared with amx/gemm.c); this file holds the
 * packing of both operands (packed B is shared with amx/gemm.c) and the MR x NR
 * microkernel (MR = 14 rows x NR = 32 columns: 28 zmm accumulators, the panel's two B
 * vectors per pair of steps, A's pair broadcast from memory).
 * Packed layout, one 32-bit word per (row or column, pair of steps): a pair of steps
 * (2p, 2p + 1) of a row i of op(A) is the word (A'[i][2p], A'[i][2p + 1]) (the low half
 * the even step), and A panels hold pair p's MR words at p MR; B panels pair p's NR words
 * (B'[2p][j], B'[2p + 1][j]) at p NR, the pair-interleaved layout VDPBF16PS (and AMX's
 * B tiles, ../amx/gemm.c) read. An odd K leaves the last pair's odd step zero.
 * Packing rounds float32 sources (VCVTNE2PS2BF16, 32 floats at a time) and copies bf16
 * ones; all four (ta, tb) cases go through 16 x 16 transposes of 32-bit words or a
 * 16-bit interleave (VPERMW / VPERMT2W).
 * Edges: panels are zero-padded to MR rows, NR columns and whole pairs; last panels of
 * <= 4 or <= 8 rows run 4- or 8-row variants, of <= 16 columns a one-vector one; the
 * microkernel stores only the valid rows and columns (masked).
 * Latency hiding: each microkernel call brings the next call's C tile into L2 during
 * its first steps; the driver adds after each call a share of what the next pack_a (and
 * at the end of a K block, pack_b) reads, so that packing reads from L2, and in the last
 * M block a share of the caller's next regions (attention's chains of small products);
 * the packings that step down a float32 source's rows prefetch PF_PAIRS pairs ahead.
 * K == 0 or alpha == 0 gives C = beta C (+ bias) without reading A or B.
 * work: vt_avx512bf16_gemm_bf16_work_floats(M, N, K) floats, 64-byte aligned. gemm_bf16_pack_b,
 * gemm_bf16_packed_b, gemm_bf16_pack_a and gemm_bf16_packed_a: the same loops on op(B) or
 * op(A) packed once (../gemm_bf16_driver.h). */
#include "avx512bf16.h"

#include "../gemm_bf16_driver.h"

#define MR VT_AVX512BF16_MR /* 28 accumulators + 2 B vectors fill 30 of the 32 zmm */
#define NR VT_BF16_NR
/* The packings that step down the rows of a float32 source (op(A) = A^T, op(B) = B)
 * prefetch the pair of rows this many pairs ahead: the weight gradients' dY^T and X are
 * activations read cold, a few lines per row at a large row stride, which the hardware
 * prefetchers (and the driver's L2 prefetch, larger than L2 for these blocks) leave
 * mostly to memory latency. */
#define PF_PAIRS 8

/* K blocks of at most kc steps (even: whole pairs), M blocks of mc rows, N blocks of nc
 * columns: this CPU's context's (../gemm_context.c). */
static inline bf16_blocking blocking(void) {
    bf16_blocking bl = {.mr = MR, .kc = vt_gemm_ctx.avx512bf16.kc, .mc = vt_gemm_ctx.avx512bf16.mc,
                        .nc = vt_gemm_ctx.avx512bf16.nc, .k_step = 2, .pair_step = 1, .prefetch = 1};
    return bl;
}

/* The 16-bit index that interleaves two 16-element halves: (lo[i], hi[i]) for i < 16,
 * lo in elements 0..15 of the source (or of a), hi in 16..31 (or of b at +32). */
__m512i vt_bf16_interleave_idx(int hi_base) {
    short idx[32];
    for (int i = 0; i < 16; i++) idx[2 * i] = (short)i, idx[2 * i + 1] = (short)(hi_base + i);
    return _mm512_loadu_si512(idx);
}

/* Pack rows [i0, i0 + mc) x steps [p0, p0 + kc) of op(A) (float32, rounded) into MR-row
 * panels at dst: panel q's pair p, row i at dst[q MR kc2 + p MR + i], kc2 = (kc + 1) / 2
 * (bf16_pack_a_fn; pair_step 1: no padding pairs). */
static void pack_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, int kc2, uint32_t *dst) {
    const __mmask16 wmask = (__mmask16)((1u << MR) - 1u);
    if (ta) { /* A is K x M: steps 2p, 2p + 1 are two rows of A; each pair of rows is read
               * along its length, one panel's MR columns after the other (a panel at a time
               * down all K rows would touch a page per row) */
        const __m512i inter = vt_bf16_interleave_idx(16);
        for (int p = 0; p < kc2; p++) {
            const float *s0 = A + (size_t)(p0 + 2 * p) * lda + i0, *s1 = s0 + lda;
            const int odd = 2 * p + 1 < kc;
            for (int c = 0; c < mc; c += 16) { /* the pair PF_PAIRS ahead */
                _mm_prefetch((const char *)(s0 + (size_t)(2 * PF_PAIRS) * lda + c), _MM_HINT_T0);
                _mm_prefetch((const char *)(s1 + (size_t)(2 * PF_PAIRS) * lda + c), _MM_HINT_T0);
            }
            for (int ir = 0; ir < mc; ir += MR) {
                __mmask16 rm = vt512_tail((size_t)imin(MR, mc - ir));
                __m512 r0 = _mm512_maskz_loadu_ps(rm, s0 + ir);
                __m512 r1 = odd ? _mm512_maskz_loadu_ps(rm, s1 + ir) : _mm512_setzero_ps();
                __m512i w = _mm512_permutexvar_epi16(inter, vt_cvtne2ps(r1, r0));
                _mm512_mask_storeu_ps(dst + (size_t)ir * kc2 + (size_t)p * MR, wmask, _mm512_castsi512_ps(w));
            }
        }
        return;
    }
    for (int ir = 0; ir < mc; ir += MR, dst += (size_t)MR * kc2) {
        int rows = imin(MR, mc - ir);
        { /* rows of A: 32 steps of a row are 16 words; 16 rows transposed at once */
            const float *s = A + (size_t)(i0 + ir) * lda + p0;
            for (int k0 = 0; k0 < kc; k0 += 32) {
                int kk = imin(32, kc - k0);
                __mmask16 m0 = vt512_tail((size_t)kk), m1 = vt512_tail((size_t)(kk > 16 ? kk - 16 : 0));
                __m512 r[16];
#pragma GCC unroll 16
                for (int i = 0; i < 16; i++) {
                    if (i < rows) {
                        const float *si = s + (size_t)i * lda + k0;
                        __m512 lo = _mm512_maskz_loadu_ps(m0, si), hi = _mm512_maskz_loadu_ps(m1, si + 16);
                        r[i] = _mm512_castsi512_ps(vt_cvtne2ps(hi, lo));
                    } else {
                        r[i] = _mm512_setzero_ps();
                    }
                }
                vt512_transpose16(r);
                int pairs = (kk + 1) / 2;
                for (int m = 0; m < pairs; m++) _mm512_mask_storeu_ps(dst + (size_t)(k0 / 2 + m) * MR, wmask, r[m]);
            }
        }
    }
}

void vt_avx512bf16_pack_b(int tb, const float *B, const vt_bf16 *B16, int ldb, int p0, int j0, int kc, int nc,
                          int kc2p, uint32_t *dst) {
    const int kc2 = (kc + 1) / 2;
    for (int jr = 0; jr < nc; jr += NR, dst += (size_t)NR * kc2p) {
        for (int p = kc2; p < kc2p; p++) { /* the pairs past K: zero */
            _mm512_store_si512(dst + (size_t)p * NR, _mm512_setzero_si512());
            _mm512_store_si512(dst + (size_t)p * NR + 16, _mm512_setzero_si512());
        }
        int cols = imin(NR, nc - jr);
        if (!tb) { /* steps are rows of B: pair p interleaves rows 2p and 2p + 1 */
            if (B16) {
                const __m512i lo = vt_bf16_interleave_idx(32), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
                const __mmask32 cm = vt512_tail32(cols);
                const vt_bf16 *s = B16 + (size_t)p0 * ldb + j0 + jr;
                for (int p = 0; p < kc2; p++) {
                    __m512i r0 = vt_loadu_bf16(cm, s + (size_t)(2 * p) * ldb);
                    __m512i r1 = 2 * p + 1 < kc ? vt_loadu_bf16(cm, s + (size_t)(2 * p + 1) * ldb) : _mm512_setzero_si512();
                    _mm512_store_si512(dst + (size_t)p * NR, _mm512_permutex2var_epi16(r0, lo, r1));
                    _mm512_store_si512(dst + (size_t)p * NR + 16, _mm512_permutex2var_epi16(r0, hi, r1));
                }
            } else {
                const __m512i inter = vt_bf16_interleave_idx(16);
                const __mmask16 m0 = vt512_tail((size_t)cols), m1 = vt512_tail((size_t)(cols > 16 ? cols - 16 : 0));
                const float *s = B + (size_t)p0 * ldb + j0 + jr;
                for (int p = 0; p < kc2; p++) {
                    const float *s0 = s + (size_t)(2 * p) * ldb, *s1 = s0 + ldb;
                    int odd = 2 * p + 1 < kc;
                    const float *f0 = s0 + (size_t)(2 * PF_PAIRS) * ldb, *f1 = f0 + ldb; /* PF_PAIRS ahead */
                    _mm_prefetch((const char *)f0, _MM_HINT_T0);
                    _mm_prefetch((const char *)(f0 + 16), _MM_HINT_T0);
                    _mm_prefetch((const char *)f1, _MM_HINT_T0);
                    _mm_prefetch((const char *)(f1 + 16), _MM_HINT_T0);
                    __m512 a0 = _mm512_maskz_loadu_ps(m0, s0), a1 = _mm512_maskz_loadu_ps(m1, s0 + 16);
                    __m512 b0 = odd ? _mm512_maskz_loadu_ps(m0, s1) : _mm512_setzero_ps();
                    __m512 b1 = odd ? _mm512_maskz_loadu_ps(m1, s1 + 16) : _mm512_setzero_ps();
                    _mm512_store_si512(dst + (size_t)p * NR, _mm512_permutexvar_epi16(inter, vt_cvtne2ps(b0, a0)));
                    _mm512_store_si512(dst + (size_t)p * NR + 16, _mm512_permutexvar_epi16(inter, vt_cvtne2ps(b1, a1)));
                }
            }
        } else { /* B is N x K: 32 steps of a column are 16 words; 16 columns transposed at once */
            for (int half = 0; half < 2; half++) {
                int cn = imin(16, cols - 16 * half);
                for (int k0 = 0; k0 < kc; k0 += 32) {
                    int kk = imin(32, kc - k0);
                    __m512 r[16];
#pragma GCC unroll 16
                    for (int j = 0; j < 16; j++) {
                        if (j >= cn) {
                            r[j] = _mm512_setzero_ps();
                        } else if (B16) {
                            r[j] = _mm512_castsi512_ps(
                                vt_loadu_bf16(vt512_tail32(kk), B16 + (size_t)(j0 + jr + 16 * half + j) * ldb + p0 + k0));
                        } else {
                            const float *sj = B + (size_t)(j0 + jr + 16 * half + j) * ldb + p0 + k0;
                            __m512 lo = _mm512_maskz_loadu_ps(vt512_tail((size_t)kk), sj);
                            __m512 hi = _mm512_maskz_loadu_ps(vt512_tail((size_t)(kk > 16 ? kk - 16 : 0)), sj + 16);
                            r[j] = _mm512_castsi512_ps(vt_cvtne2ps(hi, lo));
                        }
                    }
                    vt512_transpose16(r);
                    int pairs = (kk + 1) / 2;
                    for (int m = 0; m < pairs; m++) _mm512_store_ps(dst + (size_t)(k0 / 2 + m) * NR + 16 * half, r[m]);
                }
            }
        }
    }
}

/* X(0); ... X(13);: a row macro over the MR = 14 rows of a tile. */
#define FOR_14_ROWS(X)                                                                        \
    do {                                                                                      \
        X(0); X(1); X(2); X(3); X(4); X(5); X(6); X(7); X(8); X(9); X(10); X(11); X(12); X(13); \
    } while (0)

/* Row i (< R) at pair p: A's word broadcast, times the panel's NV B vectors. */
#define ROW_DP(i)                                                                 \
    do {                                                                          \
        if ((i) < R) {                                                            \
            __m512i a_ = _mm512_set1_epi32((int)a[i]);                            \
            c##i##0 = vt_dpbf16(c##i##0, a_, b0);                                 \
            if (NV == 2) c##i##1 = vt_dpbf16(c##i##1, a_, b1);                    \
        }                                                                         \
    } while (0)

/* Row i's epilogue (bf16_store_row), for the tile's valid rows. */
#define ROW_STORE(i)                                                                          \
    do {                                                                                      \
        if ((i) < R && (i) < mr) bf16_store_row(&e, c + (size_t)(i) * ldc, c##i##0, c##i##1, NV); \
    } while (0)

/* c[0:mr, 0:nr] = alpha (A panel)(B panel) + beta c (+ bias) over kc2 pairs, mr <= R rows
 * of VDPBF16PS (R = 14, or 8 / 4 for a short last panel: every element's sums are the
 * same whatever R), NV = 2 vectors of B (32 columns) or 1 (nr <= 16). */
static inline __attribute__((always_inline)) void kernel(int kc2, const uint32_t *a, const uint32_t *b, float *c,
                                                         int ldc, int mr, int nr, float alpha, float beta,
                                                         const float *bias, const float *cn, const int R,
                                                         const int NV) {
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00, c80 = c00,
           c81 = c00, c90 = c00, c91 = c00, c100 = c00, c101 = c00, c110 = c00, c111 = c00, c120 = c00,
           c121 = c00, c130 = c00, c131 = c00;
    for (int p = 0; p < kc2; p++) {
        /* the next call's C tile into L2, a line per pair of steps: its epilogue reads it */
        if (p < 2 * MR) _mm_prefetch((const char *)(cn + (size_t)(p >> 1) * ldc + (p & 1) * 16), _MM_HINT_T1);
        __m512i b0 = _mm512_load_si512(b), b1 = NV == 2 ? _mm512_load_si512(b + 16) : b0;
        FOR_14_ROWS(ROW_DP);
        a += MR;
        b += NR;
    }
    const bf16_epilogue e = bf16_epilogue_of(nr, alpha, beta, bias, NV);
    FOR_14_ROWS(ROW_STORE);
}

/* The microkernel for a tile of mr rows and nr columns; cn: the next call's tile. */
static void micro(int kc2, const uint32_t *a, const uint32_t *b, float *c, int ldc, int mr, int nr, float alpha,
                  float beta, const float *bias, const float *cn) {
    if (nr > 16) {
        if (mr > 8) kernel(kc2, a, b, c, ldc, mr, nr, alpha, beta, bias, cn, 14, 2);
        else if (mr > 4) kernel(kc2, a, b, c, ldc, mr, nr, alpha, beta, bias, cn, 8, 2);
        else kernel(kc2, a, b, c, ldc, mr, nr, alpha, beta, bias, cn, 4, 2);
    } else {
        if (mr > 8) kernel(kc2, a, b, c, ldc, mr, nr, alpha, beta, bias, cn, 14, 1);
        else if (mr > 4) kernel(kc2, a, b, c, ldc, mr, nr, alpha, beta, bias, cn, 8, 1);
        else kernel(kc2, a, b, c, ldc, mr, nr, alpha, beta, bias, cn, 4, 1);
    }
}

/* Every entry's product (BF16_ENTRY_POINTS). */
static void product(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc, float *work,
                    const vt_region next[2], const uint32_t *packed, const uint32_t *packed_a,
                    const gemm_col_sums *cs) {
    if (vt512_gemm_no_product(M, N, K, alpha, beta, bias, C, ldc)) return;
    const bf16_blocking bl = blocking();
    gemm_bf16_blocked(&bl, pack_a, vt_avx512bf16_pack_b, micro, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta,
                      bias, C, ldc, work, next, packed, packed_a, cs);
}

BF16_ENTRY_POINTS(avx512bf16)
