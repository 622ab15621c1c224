/* avx512bf16/gemm.c - the bf16 GEMM on VDPBF16PS, BLIS-style (contract in ../entries.def,
 * numerics in ../kernels.h):
 *   C = alpha op(A') op(B') + beta C (+ bias), A', B' rounded to bf16, float32 sums.
 * Loops: jc over N in NC blocks -> pc over K in equal blocks of at most KC steps (pack
 * op(B)'s block into NR-column panels) -> ic over M in equal blocks of at most MC rows
 * (pack op(A)'s block into MR-row panels) -> jr over NR columns -> ir over MR rows -> the
 * MR x NR microkernel (MR = 14 rows x NR = 32 columns: 28 zmm accumulators, the panel's
 * two B vectors per pair of steps, A's pair broadcast from memory).
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
 * its first steps, and after it a share of what the next pack_a (and at the end of a K
 * block, pack_b) reads, so that packing reads from L2.
 * alpha and beta are applied at the store of the first K block (later K blocks add with
 * beta = 1), the bias after the last; beta == 0 never reads C. K == 0 or alpha == 0
 * gives C = beta C (+ bias) without reading A or B.
 * work: vt_avx512bf16_gemm_bf16_work_floats(M, N, K) floats, 64-byte aligned. */
#include "avx512bf16.h"

#define MR VT_AVX512BF16_MR /* 28 accumulators + 2 B vectors fill 30 of the 32 zmm */
#define NR VT_BF16_NR
/* K blocks of at most KC steps (even), M blocks of MC rows, N blocks of NC columns: this
 * CPU's context's (../gemm_context.c). */
#define KC (vt_gemm_ctx.avx512bf16.kc)
#define MC (vt_gemm_ctx.avx512bf16.mc)
#define NC (vt_gemm_ctx.avx512bf16.nc)

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* K in equal blocks of at most KC steps, each even (whole pairs). */
static inline int k_block(int K) {
    int blocks = (K + KC - 1) / KC;
    return (int)round_up((size_t)((K + blocks - 1) / blocks), 2);
}

static inline size_t a_words(int M, int kc) { return round_up(round_up((size_t)imin(M, MC), MR) * (size_t)(kc / 2), 16); }

size_t vt_avx512bf16_gemm_bf16_work_floats(int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    int kc = (int)round_up((size_t)imin(K, KC), 2);
    return a_words(M, kc) + (size_t)(kc / 2) * round_up((size_t)imin(N, NC), NR);
}

/* The 16-bit index that interleaves two 16-element halves: (lo[i], hi[i]) for i < 16,
 * lo in elements 0..15 of the source (or of a), hi in 16..31 (or of b at +32). */
__m512i vt_bf16_interleave_idx(int hi_base) {
    short idx[32];
    for (int i = 0; i < 16; i++) idx[2 * i] = (short)i, idx[2 * i + 1] = (short)(hi_base + i);
    return _mm512_loadu_si512(idx);
}

/* Pack rows [i0, i0 + mc) x steps [p0, p0 + kc) of op(A) (float32, rounded) into MR-row
 * panels at dst: panel q's pair p, row i at dst[q MR kc2 + p MR + i]. */
static void pack_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, uint32_t *dst) {
    const int kc2 = (kc + 1) / 2;
    const __mmask16 wmask = (__mmask16)((1u << MR) - 1u);
    if (ta) { /* A is K x M: steps 2p, 2p + 1 are two rows of A; each pair of rows is read
               * along its length, one panel's MR columns after the other (a panel at a time
               * down all K rows would touch a page per row) */
        const __m512i inter = vt_bf16_interleave_idx(16);
        for (int p = 0; p < kc2; p++) {
            const float *s0 = A + (size_t)(p0 + 2 * p) * lda + i0, *s1 = s0 + lda;
            const int odd = 2 * p + 1 < kc;
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

/* Row i's epilogue: alpha acc (+ beta C) (+ bias), stored under the column masks. */
#define ROW_STORE(i)                                                                            \
    do {                                                                                        \
        if ((i) < R && (i) < mr) {                                                              \
            float *cr = c + (size_t)(i) * ldc;                                                  \
            __m512 x0 = _mm512_mul_ps(c##i##0, va), x1 = _mm512_mul_ps(c##i##1, va);            \
            if (beta != 0.0f) {                                                                 \
                x0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k0, cr), x0);                    \
                if (NV == 2) x1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(k1, cr + 16), x1);  \
            }                                                                                   \
            if (bias) {                                                                         \
                x0 = _mm512_add_ps(x0, bias0);                                                  \
                if (NV == 2) x1 = _mm512_add_ps(x1, bias1);                                     \
            }                                                                                   \
            _mm512_mask_storeu_ps(cr, k0, x0);                                                  \
            if (NV == 2) _mm512_mask_storeu_ps(cr + 16, k1, x1);                                \
        }                                                                                       \
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
    const __mmask16 k0 = vt512_tail((size_t)nr), k1 = vt512_tail((size_t)(nr > 16 ? nr - 16 : 0));
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    __m512 bias0 = _mm512_setzero_ps(), bias1 = bias0;
    if (bias) {
        bias0 = _mm512_maskz_loadu_ps(k0, bias);
        if (NV == 2) bias1 = _mm512_maskz_loadu_ps(k1, bias + 16);
    }
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

/* C = beta C (+ bias rows) over M x N (beta == 0: C = 0 without reading it). */
static void scale_c(int M, int N, float beta, const float *bias, float *C, int ldc) {
    for (int i = 0; i < M; i++) {
        float *cr = C + (size_t)i * ldc;
        for (int j = 0; j < N; j += 16) {
            __mmask16 k = vt512_tail((size_t)(N - j));
            __m512 v = beta == 0.0f ? _mm512_setzero_ps()
                                    : _mm512_mul_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(k, cr + j));
            if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, bias + j));
            _mm512_mask_storeu_ps(cr + j, k, v);
        }
    }
}

/* The source of the next packing (a rows x len block of the caller's float32 or bf16
 * matrix, row stride ld bytes), brought into L2 a few lines after each microkernel call
 * of the current block, so that packing it reads from L2 instead of memory. */
typedef struct {
    const char *base;
    size_t ld;
    int rows, lines, r, l; /* lines per row; the next line: row r, line l */
} pf_block;

static inline pf_block pf_of(const void *base, size_t ld_bytes, int rows, int len_bytes) {
    pf_block p = {base, ld_bytes, base ? rows : 0, (len_bytes + 63) / 64, 0, 0};
    return p;
}

static inline int pf_lines(const pf_block *p) { return p->rows * p->lines; }

static inline void pf_some(pf_block *p, int n) {
    for (; n > 0 && p->r < p->rows; n--) {
        _mm_prefetch(p->base + (size_t)p->r * p->ld + (size_t)p->l * 64, _MM_HINT_T1);
        if (++p->l == p->lines) p->l = 0, p->r++;
    }
}

/* op(A)'s block of rows [i0, i0 + mc) x steps [p0, p0 + kc) as pack_a reads it. */
static inline pf_block pf_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc) {
    return ta ? pf_of(A + (size_t)p0 * lda + i0, (size_t)lda * 4, kc, mc * 4)
              : pf_of(A + (size_t)i0 * lda + p0, (size_t)lda * 4, mc, kc * 4);
}

/* op(B)'s block of steps [p0, p0 + kc) x columns [j0, j0 + nc) as pack_b reads it. */
static inline pf_block pf_b(int tb, const float *B, const vt_bf16 *B16, int ldb, int p0, int j0, int kc, int nc) {
    size_t es = B16 ? 2 : 4;
    const char *base = B16 ? (const char *)B16 : (const char *)B;
    return tb ? pf_of(base + ((size_t)j0 * ldb + p0) * es, (size_t)ldb * es, nc, kc * (int)es)
              : pf_of(base + ((size_t)p0 * ldb + j0) * es, (size_t)ldb * es, kc, nc * (int)es);
}

void vt_avx512bf16_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                             const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C,
                             int ldc, float *work, const vt_region next[2]) {
    (void)next;
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        scale_c(M, N, beta, bias, C, ldc);
        return;
    }
    const int KB = k_block(K);
    const int mblocks = (M + MC - 1) / MC;
    const int MB = (int)round_up((size_t)((M + mblocks - 1) / mblocks), MR);
    uint32_t *pa = (uint32_t *)work, *pb = pa + a_words(M, KB);
    for (int jc = 0; jc < N; jc += NC) {
        int nc = imin(NC, N - jc);
        for (int pc = 0; pc < K; pc += KB) {
            int kc = imin(KB, K - pc), kc2 = (kc + 1) / 2;
            float bet = pc == 0 ? beta : 1.0f;
            const float *bias_k = pc + kc == K ? bias : NULL;
            vt_avx512bf16_pack_b(tb, B, B16, ldb, pc, jc, kc, nc, kc2, pb);
            for (int ic = 0; ic < M; ic += MB) {
                int mc = imin(MB, M - ic);
                pack_a(ta, A, lda, ic, pc, mc, kc, pa);
                /* what the next pack_a (and, after the last M block, pack_b) reads */
                pf_block na = pf_of(NULL, 0, 0, 0), nb = na;
                if (ic + MB < M) {
                    na = pf_a(ta, A, lda, ic + MB, pc, imin(MB, M - ic - MB), kc);
                } else if (pc + KB < K) {
                    int kn = imin(KB, K - pc - KB);
                    na = pf_a(ta, A, lda, 0, pc + KB, imin(MB, M), kn);
                    nb = pf_b(tb, B, B16, ldb, pc + KB, jc, kn, nc);
                } else if (jc + NC < N) {
                    na = pf_a(ta, A, lda, 0, 0, imin(MB, M), KB);
                    nb = pf_b(tb, B, B16, ldb, 0, jc + NC, KB, imin(NC, N - jc - NC));
                }
                int calls = ((nc + NR - 1) / NR) * ((mc + MR - 1) / MR);
                int qa = (pf_lines(&na) + calls - 1) / calls, qb = (pf_lines(&nb) + calls - 1) / calls;
                for (int jr = 0; jr < nc; jr += NR) {
                    int nr = imin(NR, nc - jr);
                    const uint32_t *b = pb + (size_t)jr * kc2;
                    for (int ir = 0; ir < mc; ir += MR) {
                        float *c = C + (size_t)(ic + ir) * ldc + jc + jr;
                        /* the next call's tile: the next rows, or the next columns' first rows */
                        const float *cn = ir + MR < mc ? c + (size_t)MR * ldc
                                          : jr + NR < nc ? C + (size_t)ic * ldc + jc + jr + NR
                                                         : c;
                        micro(kc2, pa + (size_t)ir * kc2, b, c, ldc, imin(MR, mc - ir), nr, alpha, bet,
                              bias_k ? bias_k + jc + jr : NULL, cn);
                        pf_some(&na, qa);
                        pf_some(&nb, qb);
                    }
                }
            }
        }
    }
}
