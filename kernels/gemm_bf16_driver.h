/* gemm_bf16_driver.h - the half of the bf16 GEMMs in avx512bf16/gemm.c (VDPBF16PS) and
 * amx/gemm.c (AMX tiles) that does not depend on the product unit: the work-space size,
 * the NC / KC / MC blocking loops and their packing calls, the optional L2 prefetch of
 * the next packing's source, and the C tile's epilogue (alpha, beta, bias under column
 * masks). Private to those two files: each includes it after its own header and passes
 * its blocking, its pack_a, its pack_b and its microkernel, so everything here is compiled (and,
 * being always_inline with constant arguments, specialised) with that file's flags; its
 * entry points are BF16_ENTRY_POINTS (at the end).
 * Loops: jc over N in NC blocks -> pc over K in equal blocks of at most KC steps, each a
 * whole number of k_step steps but the last (pack op(B)'s block into VT_BF16_NR-column
 * panels, the level's pack_b) -> ic over M in equal blocks of at most MC rows, whole
 * MR panels (pack op(A)'s block into MR-row panels, the level's pack_a) -> jr over NR
 * columns -> ir over MR rows -> the level's microkernel.
 * Packed rows hold kc2p words (pairs of steps), kc2p = (kc + 1) / 2 rounded up to a
 * multiple of pair_step; A panels are MR kc2p words apart, B panels NR kc2p.
 * alpha and beta are applied at the store of the first K block (later K blocks add with
 * beta = 1), the bias after the last; beta == 0 never reads C. Splitting M and N into
 * blocks does not change any element's sums.
 * The shared packed form of op(B) (entries.def: gemm_bf16_packed_b_floats) is the blocks
 * pack_b fills in those loops, one after the other: N block by N block, K block by K
 * block within each; that of op(A) (gemm_bf16_packed_a_floats) the blocks pack_a fills,
 * K block by K block, all the rows' panels within each. gemm_bf16_blocked then reads
 * each block there instead of packing it, so its sums are bitwise those of packing it
 * in place; on a packed op(B) wider than one N block it runs ic outermost (ic -> pc ->
 * jc), packing each block of op(A) once. */
#ifndef VT_KERNELS_GEMM_BF16_DRIVER_H
#define VT_KERNELS_GEMM_BF16_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "gemm_sums.h"  /* the column sums of gemm_sums */
#include "gemm_tiles.h" /* VT_BF16_NR */
#include "kernels.h"    /* vt_region */

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

/* A level's tile and blocking: MR rows per microkernel call and A panel; the context's
 * cache blocks kc, mc, nc; K blocks a multiple of k_step steps (2: whole pairs; 32:
 * whole AMX tiles); packed rows a multiple of pair_step pairs (16: whole tiles; 1);
 * prefetch: whether each microkernel call brings a share of the next packing's source
 * into L2 (bf16_pf_block). */
typedef struct {
    int mr, kc, mc, nc, k_step, pair_step, prefetch;
} bf16_blocking;

/* Pack rows [i0, i0 + mc) x steps [p0, p0 + kc) of op(A) (float32, rounded to bf16) into
 * MR-row panels of kc2p words per row at dst. */
typedef void (*bf16_pack_a_fn)(int ta, const float *A, int lda, int i0, int p0, int mc, int kc, int kc2p,
                               uint32_t *dst);
/* Pack steps [p0, p0 + kc) x columns [j0, j0 + nc) of op(B) (B16 when not NULL, else
 * the float32 B rounded to bf16) into VT_BF16_NR-column panels of kc2p words per row at dst. */
typedef void (*bf16_pack_b_fn)(int tb, const float *B, const vt_bf16 *B16, int ldb, int p0, int j0, int kc, int nc,
                               int kc2p, uint32_t *dst);
/* c[0:mr, 0:nr] = alpha (A panel)(B panel) + beta c (+ bias) over kc2p pairs; c_next:
 * the next call's C tile (a prefetch hint). */
typedef void (*bf16_micro_fn)(int kc2p, const uint32_t *a, const uint32_t *b, float *c, int ldc, int mr, int nr,
                              float alpha, float beta, const float *bias, const float *c_next);

/* The pairs of a packed row of a K block of kc steps. */
static inline int bf16_pairs(const bf16_blocking *bl, int kc) {
    return (int)round_up((size_t)(kc + 1) / 2, (size_t)bl->pair_step);
}

/* K in equal blocks of at most kc steps, each a multiple of k_step (the last shorter). */
static inline int bf16_k_block(const bf16_blocking *bl, int K) {
    int blocks = (K + bl->kc - 1) / bl->kc;
    return (int)round_up((size_t)((K + blocks - 1) / blocks), (size_t)bl->k_step);
}

/* Words of packed A for a K block of kc steps, a multiple of 16 (packed B after it
 * starts on a 64-byte line). */
static inline size_t bf16_a_words(const bf16_blocking *bl, int M, int kc) {
    return round_up(round_up((size_t)imin(M, bl->mc), (size_t)bl->mr) * (size_t)bf16_pairs(bl, kc), 16);
}

/* The work space in floats (= 32-bit words): packed A, then packed B. */
static inline size_t bf16_work_floats(const bf16_blocking *bl, int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    int kc = (int)round_up((size_t)imin(K, bl->kc), (size_t)bl->k_step);
    return bf16_a_words(bl, M, kc) + (size_t)bf16_pairs(bl, kc) * round_up((size_t)imin(N, bl->nc), VT_BF16_NR);
}

/* The pairs of a whole column of the packed form: kc2p summed over the K blocks. */
static inline size_t bf16_column_pairs(const bf16_blocking *bl, int K) {
    int KB = bf16_k_block(bl, K), full = K / KB, rest = K - full * KB;
    return (size_t)full * (size_t)bf16_pairs(bl, KB) + (rest ? (size_t)bf16_pairs(bl, rest) : 0);
}

/* Words of op(B) (K x N) packed whole, *panels its VT_BF16_NR-column panels; 0 for an
 * empty op(B). */
static inline size_t bf16_packed_b_words(const bf16_blocking *bl, int N, int K, int *panels) {
    *panels = N > 0 && K > 0 ? (N + VT_BF16_NR - 1) / VT_BF16_NR : 0;
    return *panels ? (size_t)*panels * VT_BF16_NR * bf16_column_pairs(bl, K) : 0;
}

/* Where block (jc, pc) of the packed form starts: past jc whole columns (every N block
 * before it is nc wide, a multiple of VT_BF16_NR) and, within its N block of nc columns,
 * past pc / KB K blocks of KB steps. */
static inline size_t bf16_packed_block_at(const bf16_blocking *bl, int N, int K, int jc, int pc) {
    int KB = bf16_k_block(bl, K), nc = imin(bl->nc, N - jc);
    return (size_t)jc * bf16_column_pairs(bl, K) +
           round_up((size_t)nc, VT_BF16_NR) * (size_t)(pc / KB) * (size_t)bf16_pairs(bl, KB);
}

/* Panels [q0, q1) of op(B) packed into the packed form at packed: each N block's share
 * of them by pack_b, K block by K block. */
static inline __attribute__((always_inline)) void bf16_pack_b_panels(const bf16_blocking *bl, bf16_pack_b_fn pack_b,
                                                                     int tb, int N, int K, const float *B,
                                                                     const vt_bf16 *B16, int ldb, int q0, int q1,
                                                                     uint32_t *packed) {
    const int KB = bf16_k_block(bl, K);
    for (int j0 = q0 * VT_BF16_NR; j0 < imin(q1 * VT_BF16_NR, N);) {
        int jc = j0 / bl->nc * bl->nc, j1 = imin(imin(q1 * VT_BF16_NR, jc + bl->nc), N);
        for (int pc = 0; pc < K; pc += KB) {
            int kc = imin(KB, K - pc), kc2p = bf16_pairs(bl, kc);
            pack_b(tb, B, B16, ldb, pc, j0, kc, j1 - j0, kc2p,
                   packed + bf16_packed_block_at(bl, N, K, jc, pc) + (size_t)(j0 - jc) * kc2p);
        }
        j0 = j1;
    }
}

/* The epilogue of a C tile of nr (<= 32) columns: alpha, beta, the column masks and the
 * bias vectors (bias NULL: none), set once per tile. */
typedef struct {
    __mmask16 k0, k1;
    __m512 va, vb, bias0, bias1;
    float beta;
    int has_bias;
} bf16_epilogue;

static inline __attribute__((always_inline)) bf16_epilogue bf16_epilogue_of(int nr, float alpha, float beta,
                                                                             const float *bias, int nv) {
    bf16_epilogue e;
    e.k0 = vt512_tail((size_t)nr);
    e.k1 = vt512_tail((size_t)(nr > 16 ? nr - 16 : 0));
    e.va = _mm512_set1_ps(alpha);
    e.vb = _mm512_set1_ps(beta);
    e.beta = beta;
    e.has_bias = bias != NULL;
    e.bias0 = e.bias1 = _mm512_setzero_ps();
    if (bias) {
        e.bias0 = _mm512_maskz_loadu_ps(e.k0, bias);
        if (nv == 2) e.bias1 = _mm512_maskz_loadu_ps(e.k1, bias + 16);
    }
    return e;
}

/* One row of the tile at cr from its sums x0 (columns 0..15) and, when nv == 2, x1
 * (16..31): alpha x (+ beta C, read just before, when beta != 0) (+ bias), stored
 * under the column masks. */
static inline __attribute__((always_inline)) void bf16_store_row(const bf16_epilogue *e, float *cr, __m512 x0,
                                                                 __m512 x1, int nv) {
    x0 = _mm512_mul_ps(x0, e->va);
    x1 = _mm512_mul_ps(x1, e->va);
    if (e->beta != 0.0f) {
        x0 = _mm512_fmadd_ps(e->vb, _mm512_maskz_loadu_ps(e->k0, cr), x0);
        if (nv == 2) x1 = _mm512_fmadd_ps(e->vb, _mm512_maskz_loadu_ps(e->k1, cr + 16), x1);
    }
    if (e->has_bias) {
        x0 = _mm512_add_ps(x0, e->bias0);
        if (nv == 2) x1 = _mm512_add_ps(x1, e->bias1);
    }
    _mm512_mask_storeu_ps(cr, e->k0, x0);
    if (nv == 2) _mm512_mask_storeu_ps(cr + 16, e->k1, x1);
}

/* The source of the next packing (a rows x len block of the caller's float32 or bf16
 * matrix, row stride ld bytes), brought into L2 a few lines after each microkernel call
 * of the current block, so that packing it reads from L2 instead of memory. */
typedef struct {
    const char *base;
    size_t ld;
    int rows, lines, r, l; /* lines per row; the next line: row r, line l */
} bf16_pf_block;

static inline bf16_pf_block bf16_pf_of(const void *base, size_t ld_bytes, int rows, int len_bytes) {
    bf16_pf_block p = {base, ld_bytes, base ? rows : 0, (len_bytes + 63) / 64, 0, 0};
    return p;
}

static inline int bf16_pf_lines(const bf16_pf_block *p) { return p->rows * p->lines; }

/* always_inline: GCC deletes calls to a function whose only effect is prefetching. */
static inline __attribute__((always_inline)) void bf16_pf_some(bf16_pf_block *p, int n) {
    for (; n > 0 && p->r < p->rows; n--) {
        _mm_prefetch(p->base + (size_t)p->r * p->ld + (size_t)p->l * 64, _MM_HINT_T1);
        if (++p->l == p->lines) p->l = 0, p->r++;
    }
}

/* op(A)'s block of rows [i0, i0 + mc) x steps [p0, p0 + kc) as pack_a reads it. */
static inline bf16_pf_block bf16_pf_a(int ta, const float *A, int lda, int i0, int p0, int mc, int kc) {
    return ta ? bf16_pf_of(A + (size_t)p0 * lda + i0, (size_t)lda * 4, kc, mc * 4)
              : bf16_pf_of(A + (size_t)i0 * lda + p0, (size_t)lda * 4, mc, kc * 4);
}

/* op(B)'s block of steps [p0, p0 + kc) x columns [j0, j0 + nc) as pack_b reads it. */
static inline bf16_pf_block bf16_pf_b(int tb, const float *B, const vt_bf16 *B16, int ldb, int p0, int j0, int kc,
                                      int nc) {
    size_t es = B16 ? 2 : 4;
    const char *base = B16 ? (const char *)B16 : (const char *)B;
    return tb ? bf16_pf_of(base + ((size_t)j0 * ldb + p0) * es, (size_t)ldb * es, nc, kc * (int)es)
              : bf16_pf_of(base + ((size_t)p0 * ldb + j0) * es, (size_t)ldb * es, kc, nc * (int)es);
}

/* The caller's next[i] (a float32 region it reads right after this product), or
 * nothing (next NULL, or the region empty). */
static inline bf16_pf_block bf16_pf_next(const vt_region *next, int i) {
    if (!next || !next[i].base || next[i].rows <= 0) return bf16_pf_of(NULL, 0, 0, 0);
    return bf16_pf_of(next[i].base, next[i].ld * 4, next[i].rows, next[i].len * 4);
}

/* Words of op(A) (M x K) packed whole, *panels its MR-row panels; 0 for an empty op(A).
 * The packed form holds the K blocks one after the other, each all the panels of that
 * block in row order (MR kc2p words each), so that a block of rows of a K block is the
 * packing pack_a writes for it. */
static inline size_t bf16_packed_a_words(const bf16_blocking *bl, int M, int K, int *panels) {
    *panels = M > 0 && K > 0 ? (M + bl->mr - 1) / bl->mr : 0;
    return *panels ? (size_t)*panels * (size_t)bl->mr * bf16_column_pairs(bl, K) : 0;
}

/* Where rows i0.. (a multiple of MR) of K block pc start in the packed form of op(A):
 * past pc / KB K blocks of all the rows, then i0 rows of this block. */
static inline size_t bf16_packed_a_at(const bf16_blocking *bl, int M, int K, int i0, int pc) {
    int KB = bf16_k_block(bl, K);
    return round_up((size_t)M, (size_t)bl->mr) * (size_t)(pc / KB) * (size_t)bf16_pairs(bl, KB) +
           (size_t)i0 * (size_t)bf16_pairs(bl, imin(KB, K - pc));
}

/* Panels [q0, q1) of op(A) packed into the packed form at packed, K block by K block. */
static inline __attribute__((always_inline)) void bf16_pack_a_panels(const bf16_blocking *bl, bf16_pack_a_fn pack_a,
                                                                     int ta, int M, int K, const float *A, int lda,
                                                                     int q0, int q1, uint32_t *packed) {
    const int KB = bf16_k_block(bl, K), i0 = q0 * bl->mr, i1 = imin(q1 * bl->mr, M);
    if (i0 >= i1) return;
    for (int pc = 0; pc < K; pc += KB) {
        int kc = imin(KB, K - pc);
        pack_a(ta, A, lda, i0, pc, i1 - i0, kc, bf16_pairs(bl, kc), packed + bf16_packed_a_at(bl, M, K, i0, pc));
    }
}

/* One block's microkernel calls: the nc columns of b_block's panels (jr, NR at a time)
 * by the mc rows of pa's panels (ir, MR at a time, inner), into C from c0 on, bias (NULL:
 * none) from the block's first column; after each call a share qa of na's prefetches
 * and qb of nb's. */
static inline __attribute__((always_inline)) void bf16_sweep(const bf16_blocking *bl, bf16_micro_fn micro,
                                                             const uint32_t *pa, const uint32_t *b_block, int kc2p,
                                                             int mc, int nc, float *c0, int ldc, float alpha,
                                                             float bet, const float *bias, bf16_pf_block *na, int qa,
                                                             bf16_pf_block *nb, int qb) {
    const int MR = bl->mr, NR = VT_BF16_NR;
    for (int jr = 0; jr < nc; jr += NR) {
        int nr = imin(NR, nc - jr);
        const uint32_t *b = b_block + (size_t)jr * kc2p;
        for (int ir = 0; ir < mc; ir += MR) {
            float *c = c0 + (size_t)ir * ldc + jr;
            /* the next call's tile: the next rows, or the next columns' first rows */
            const float *cn = ir + MR < mc ? c + (size_t)MR * ldc : jr + NR < nc ? c0 + jr + NR : c;
            micro(kc2p, pa + (size_t)ir * kc2p, b, c, ldc, imin(MR, mc - ir), nr, alpha, bet, bias ? bias + jr : NULL,
                  cn);
            bf16_pf_some(na, qa);
            bf16_pf_some(nb, qb);
        }
    }
}

/* The prefetch quota per microkernel call: p's lines over calls calls. */
static inline int bf16_pf_quota(const bf16_pf_block *p, int calls) { return (bf16_pf_lines(p) + calls - 1) / calls; }

/* C = alpha op(A') op(B') + beta C (+ bias) for M, N, K > 0 and alpha != 0 (the callers
 * handle the rest with vt512_gemm_no_product), through the work space (bf16_work_floats).
 * next (NULL: none): what the caller reads right after, brought into L2 over the last
 * M block's calls as the next packing's source is over the others'.
 * packed (NULL: none): op(B) packed whole (bf16_pack_b_panels), read there instead of
 * packed block by block (tb, B, B16 and ldb unused); when N spans several N blocks the
 * loops then run M blocks outermost (ic -> pc -> jc), so that each block of op(A) is
 * packed once for all of N instead of once per N block (within one N block the usual
 * order keeps a K block of op(B) in L2 for all the M blocks instead).
 * packed_a (NULL: none; never with packed): op(A) packed whole (bf16_pack_a_panels), read
 * there instead of packed block by block (ta, A and lda unused).
 * cs (ta = 1, neither operand packed whole; NULL: none): op(A)'s row sums (A's column
 * sums, gemm_sums), each block's taken right after its pack in the first N block, from
 * cache.
 * Either order makes the same microkernel calls, each C tile's K blocks in order, so the
 * sums are bitwise those of packing in place. */
static inline __attribute__((always_inline)) void
gemm_bf16_blocked(const bf16_blocking *bl, bf16_pack_a_fn pack_a, bf16_pack_b_fn pack_b, bf16_micro_fn micro,
                  int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                  const vt_bf16 *B16, int ldb, float beta, const float *bias, float *C, int ldc, float *work,
                  const vt_region *next, const uint32_t *packed, const uint32_t *packed_a, const gemm_col_sums *cs) {
    const int MR = bl->mr, NR = VT_BF16_NR, NC = bl->nc;
    const int KB = bf16_k_block(bl, K);
    const int mblocks = (M + bl->mc - 1) / bl->mc;
    const int MB = (int)round_up((size_t)((M + mblocks - 1) / mblocks), (size_t)MR);
    const bf16_pf_block none = bf16_pf_of(NULL, 0, 0, 0);
    uint32_t *pa = (uint32_t *)work, *pb = pa + bf16_a_words(bl, M, KB);
    if (packed && N > NC) {
        for (int ic = 0; ic < M; ic += MB) {
            int mc = imin(MB, M - ic);
            for (int pc = 0; pc < K; pc += KB) {
                int kc = imin(KB, K - pc), kc2p = bf16_pairs(bl, kc);
                const float *bias_k = pc + kc == K ? bias : NULL;
                pack_a(ta, A, lda, ic, pc, mc, kc, kc2p, pa);
                /* what the next pack_a reads, or after the last block what the caller reads */
                bf16_pf_block na = none, nb = none;
                if (bl->prefetch) {
                    if (pc + KB < K) na = bf16_pf_a(ta, A, lda, ic, pc + KB, mc, imin(KB, K - pc - KB));
                    else if (ic + MB < M) na = bf16_pf_a(ta, A, lda, ic + MB, 0, imin(MB, M - ic - MB), KB);
                    else na = bf16_pf_next(next, 0), nb = bf16_pf_next(next, 1);
                }
                int calls = ((N + NR - 1) / NR) * ((mc + MR - 1) / MR);
                int qa = bf16_pf_quota(&na, calls), qb = bf16_pf_quota(&nb, calls);
                for (int jc = 0; jc < N; jc += NC)
                    bf16_sweep(bl, micro, pa, packed + bf16_packed_block_at(bl, N, K, jc, pc), kc2p, mc,
                               imin(NC, N - jc), C + (size_t)ic * ldc + jc, ldc, alpha, pc == 0 ? beta : 1.0f,
                               bias_k ? bias_k + jc : NULL, &na, qa, &nb, qb);
            }
        }
        return;
    }
    for (int jc = 0; jc < N; jc += NC) {
        int nc = imin(NC, N - jc);
        for (int pc = 0; pc < K; pc += KB) {
            int kc = imin(KB, K - pc), kc2p = bf16_pairs(bl, kc);
            const float *bias_k = pc + kc == K ? bias : NULL;
            const uint32_t *b_block = pb;
            if (packed) b_block = packed + bf16_packed_block_at(bl, N, K, jc, pc);
            else pack_b(tb, B, B16, ldb, pc, jc, kc, nc, kc2p, pb);
            for (int ic = 0; ic < M; ic += MB) {
                int mc = imin(MB, M - ic);
                const uint32_t *a_block = pa;
                if (packed_a) a_block = packed_a + bf16_packed_a_at(bl, M, K, ic, pc);
                else pack_a(ta, A, lda, ic, pc, mc, kc, kc2p, pa);
                if (cs && jc == 0) col_sums_block(vt_avx512_sum_rows, cs, A, lda, M, ic, mc, pc, kc);
                /* what the next pack_a (and, after the last M block, pack_b) reads, or after
                 * the last block what the caller reads; nothing of an operand packed whole */
                bf16_pf_block na = none, nb = none;
                if (bl->prefetch) {
                    if (ic + MB < M) {
                        if (!packed_a) na = bf16_pf_a(ta, A, lda, ic + MB, pc, imin(MB, M - ic - MB), kc);
                    } else if (pc + KB < K) {
                        int kn = imin(KB, K - pc - KB);
                        if (!packed_a) na = bf16_pf_a(ta, A, lda, 0, pc + KB, imin(MB, M), kn);
                        if (!packed) nb = bf16_pf_b(tb, B, B16, ldb, pc + KB, jc, kn, nc);
                    } else if (jc + NC < N) {
                        if (!packed_a) na = bf16_pf_a(ta, A, lda, 0, 0, imin(MB, M), KB);
                        if (!packed) nb = bf16_pf_b(tb, B, B16, ldb, 0, jc + NC, KB, imin(NC, N - jc - NC));
                    } else {
                        na = bf16_pf_next(next, 0);
                        nb = bf16_pf_next(next, 1);
                    }
                }
                int calls = ((nc + NR - 1) / NR) * ((mc + MR - 1) / MR);
                bf16_sweep(bl, micro, a_block, b_block, kc2p, mc, nc, C + (size_t)ic * ldc + jc, ldc, alpha,
                           pc == 0 ? beta : 1.0f, bias_k ? bias_k + jc : NULL, &na, bf16_pf_quota(&na, calls), &nb,
                           bf16_pf_quota(&nb, calls));
            }
        }
    }
}

/* The level's bf16 entry points (../entries.def: vt_<level>_gemm_bf16, _work_floats, the
 * packed op(B) and op(A) trios and gemm_sums, whose float32 products are avx512's), each
 * a call of the including file's
 *   static bf16_blocking blocking(void);            its blocking under the active context
 *   static void pack_a(...);                        its bf16_pack_a_fn
 *   static void product(ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc,
 *                       work, next, packed, packed_a, cs);
 * (product: gemm_bf16_blocked on the level's microkernel, with what the level sets up
 * around it), op(B) packed by avx512bf16's pack_b on both levels. */
#define BF16_ENTRY_POINTS(level)                                                                                   \
    size_t vt_##level##_gemm_bf16_work_floats(int M, int N, int K) {                                               \
        const bf16_blocking bl = blocking();                                                                       \
        return bf16_work_floats(&bl, M, N, K);                                                                     \
    }                                                                                                              \
    void vt_##level##_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,          \
                                const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias,        \
                                float *C, int ldc, float *work, const vt_region next[2]) {                         \
        product(ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, work, next, NULL, NULL, NULL);    \
    }                                                                                                              \
    void vt_##level##_gemm_sums(int bf16, int M, int N, int K, const float *A, int lda, const float *B, int ldb,   \
                                float beta, float *C, int ldc, float *work, int nchunks, const int *edge,         \
                                float *sums) {                                                                     \
        if (!bf16) {                                                                                               \
            vt_avx512_gemm_sums(0, M, N, K, A, lda, B, ldb, beta, C, ldc, work, nchunks, edge, sums);              \
            return;                                                                                                \
        }                                                                                                          \
        const gemm_col_sums cs = {sums, edge, nchunks};                                                            \
        if (N <= 0) col_sums_no_product(&cs, A, lda, M, K);                                                        \
        product(1, 0, M, N, K, 1.0f, A, lda, B, NULL, ldb, beta, NULL, C, ldc, work, NULL, NULL, NULL, &cs);       \
    }                                                                                                              \
    size_t vt_##level##_gemm_bf16_packed_b_floats(int N, int K, int *panels) {                                     \
        const bf16_blocking bl = blocking();                                                                       \
        return bf16_packed_b_words(&bl, N, K, panels);                                                             \
    }                                                                                                              \
    void vt_##level##_gemm_bf16_pack_b(int tb, int N, int K, const float *B, const vt_bf16 *B16, int ldb, int p0,  \
                                       int p1, float *packed) {                                                    \
        const bf16_blocking bl = blocking();                                                                       \
        bf16_pack_b_panels(&bl, vt_avx512bf16_pack_b, tb, N, K, B, B16, ldb, p0, p1, (uint32_t *)packed);          \
    }                                                                                                              \
    void vt_##level##_gemm_bf16_packed_b(int ta, int M, int N, int K, float alpha, const float *A, int lda,         \
                                         const float *packed, float beta, const float *bias, float *C, int ldc,    \
                                         float *work) {                                                            \
        product(ta, 0, M, N, K, alpha, A, lda, NULL, NULL, 0, beta, bias, C, ldc, work, NULL,                      \
                (const uint32_t *)packed, NULL, NULL);                                                             \
    }                                                                                                              \
    size_t vt_##level##_gemm_bf16_packed_a_floats(int M, int K, int *panels) {                                     \
        const bf16_blocking bl = blocking();                                                                       \
        return bf16_packed_a_words(&bl, M, K, panels);                                                             \
    }                                                                                                              \
    void vt_##level##_gemm_bf16_pack_a(int ta, int M, int K, const float *A, int lda, int p0, int p1,              \
                                       float *packed) {                                                            \
        const bf16_blocking bl = blocking();                                                                       \
        bf16_pack_a_panels(&bl, pack_a, ta, M, K, A, lda, p0, p1, (uint32_t *)packed);                             \
    }                                                                                                              \
    void vt_##level##_gemm_bf16_packed_a(int tb, int M, int N, int K, float alpha, const float *packed,            \
                                         const float *B, const vt_bf16 *B16, int ldb, float beta,                  \
                                         const float *bias, float *C, int ldc, float *work) {                      \
        product(0, tb, M, N, K, alpha, NULL, 0, B, B16, ldb, beta, bias, C, ldc, work, NULL, NULL,                 \
                (const uint32_t *)packed, NULL);                                                                   \
    }

#endif
