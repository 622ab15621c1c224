/* gemm_driver.h - the ISA-independent half of the BLIS-style GEMMs in avx2/gemm.c and
 * avx512/gemm.c: the NC / KC / MC blocking loops, the order of packing and microkernel
 * calls, and the L2 prefetch of the next block's packing source (in the last block,
 * of the caller's next regions, gemm_prefetch). Private to those two
 * files: each includes it after its own intrinsics header and passes its tile sizes,
 * packing routines and microkernels, so everything here is compiled (and, being
 * always_inline with constant arguments, specialised) with that file's ISA flags. */
#ifndef VT_KERNELS_GEMM_DRIVER_H
#define VT_KERNELS_GEMM_DRIVER_H

#include <immintrin.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "gemm_sums.h" /* the column sums of gemm_sums */
#include "kernels.h"   /* vt_region */

static inline size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }
static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* Register tile MR x NR and cache blocks MC x KC (packed A; MC a multiple of MR, the
 * largest M block) and KC x NC (packed B), KC at most kc when ta = 0 and kc_t when
 * ta = 1 (k_block; both multiples of 16);
 * short_mr: the most rows the `short_rows` microkernel takes whatever the columns (0:
 * there is none); short_full_mr: the most rows it takes in place of `full` (more than
 * half_nr columns; at least short_mr);
 * narrow_nr: the most columns the `narrow` microkernel takes (0: there is none);
 * half_nr: the most columns the `half` microkernel takes (one vector; 0: NR / 2), and
 * `quarter` half_nr / 2;
 * next_c: whether each call prefetches the next call's C tile;
 * own_c: with next_c, each call of MR rows also prefetches its own C tile into L1, a
 * line per group of PF_GROUP steps over its last own_c steps (0: not);
 * inplace_max_n: products with N up to this read op(A) in place (0: never);
 * inplace_rows_max_n (ta = 0), inplace_t_max_n (ta = 1): the same for A of at least
 * inplace_rows_min_a floats (M K), which streams in place with no pass to skip (ta = 0:
 * the transposing pack; ta = 1: the copy, whose source is each step's MR contiguous
 * floats anyway); a smaller A is packed from cache at little cost and its packed panels
 * read faster;
 * m_one_pass, one_pass_min_n, nc_one_pass: products with M <= m_one_pass and
 * N > one_pass_min_n (>= nc_one_pass) run K blocks outermost, N blocks of nc_one_pass
 * inside, A packed (0: never; see gemm_blocked);
 * src_lines: in the BLIS order, the next block's packing sources are prefetched by the
 * block's last calls, about src_lines lines each (0: by all its calls; gemm_macro). */
typedef struct {
    int mr, nr, kc, kc_t, mc, nc, short_mr, short_full_mr, narrow_nr, half_nr, next_c, own_c, inplace_max_n,
        inplace_rows_max_n, inplace_t_max_n;
    size_t inplace_rows_min_a;
    int m_one_pass, one_pass_min_n, nc_one_pass, src_lines;
} gemm_blocking;

/* Pack the rows x cols block of op(X) at (r0, c0) into dst (pack_a / pack_b); pack_b16:
 * from a bf16 X, widened to float32. */
typedef void (*gemm_pack_fn)(int trans, const float *X, int ldx, int r0, int c0, int rows, int cols,
                             float *dst);
typedef void (*gemm_pack16_fn)(int trans, const vt_bf16 *X, int ldx, int r0, int c0, int rows, int cols,
                               float *dst);

/* The cache lines one microkernel call prefetches into L2 while it runs: the listed
 * lines, this call's share of what the next pack_a / pack_b will read, and with next_c
 * the next call's C tile, c_rows rows ldc_bytes apart of c_lines lines each (the lines
 * at c + 64 j, the last one at c + c_last; c_rows 0: none). The C tile's addresses are
 * computed as they are issued rather than listed, the first line of every row first:
 * each row is a page of its own when ldc is 1024 floats or more, so its page walk
 * starts early. From group own_group on (prefetch_group) the loop also issues the lines
 * of the call's own C tile (own_lines a row) into L1: the next-C prefetch of the call
 * before brought them to L2, and the epilogue's loads and stores then hit L1. A
 * microkernel issues the lines spread over its loop (prefetch_group) or at its start
 * (prefetch_all, without the own tile): a burst of a few dozen prefetches can exceed a
 * core's outstanding-miss buffers and stall it (../TUNING.md). */
/* 512: with K blocks of 1024 a call's lines (its share of the next B panel's source,
 * 2-3 lines a row over a panel's 8 calls, and of the next packing sources) fit the
 * loop's two list slots per group, rather than overflowing in bursts of PREFETCH_MAX */
#define PREFETCH_MAX 512
typedef struct {
    const char *line[PREFETCH_MAX];
    int n;
    const char *c, *own;
    size_t ldc_bytes;
    int c_rows, c_lines, c_last, own_lines, own_group;
} prefetch_list;

/* Line j of row r of the C tile at c (lines a row; the last one at c_last). */
static inline __attribute__((always_inline)) const char *tile_line(const prefetch_list *pf, const char *c,
                                                                   int lines, unsigned r, unsigned j) {
    return c + (size_t)r * pf->ldc_bytes + ((int)j < lines - 1 ? (size_t)64 * j : (size_t)pf->c_last);
}

/* The i-th line of the C tile at c (lines a row, `rows` rows): line i / rows of row
 * i % rows. The microkernels' loops pass their constant MR (pf->c_rows when there is a
 * tile), so the division is a multiply. */
static inline __attribute__((always_inline)) const char *prefetch_tile_line(const prefetch_list *pf,
                                                                            const char *c, int lines, unsigned i,
                                                                            const unsigned rows) {
    return tile_line(pf, c, lines, i % rows, i / rows);
}

/* always_inline throughout: GCC deletes calls to a separate function whose only
 * effect is prefetching (it considers it pure). */
static inline __attribute__((always_inline)) void prefetch_listed(const prefetch_list *pf) {
    for (int i = 0; i < pf->n; i++) _mm_prefetch(pf->line[i], _MM_HINT_T1);
}
static inline __attribute__((always_inline)) void prefetch_all(const prefetch_list *pf) {
    prefetch_listed(pf);
    for (int j = 0; j < pf->c_lines; j++) /* prefetch_tile_line's order: line j of every row */
        for (int r = 0; r < pf->c_rows; r++) _mm_prefetch(tile_line(pf, pf->c, pf->c_lines, r, j), _MM_HINT_T1);
}

/* A full list's lines are issued at once and the list emptied (blocks with few
 * microkernel calls); the C tile stays for the microkernel to issue once. */
static inline __attribute__((always_inline)) void prefetch_add(prefetch_list *pf, const void *p) {
    if (pf->n == PREFETCH_MAX) {
        prefetch_listed(pf);
        pf->n = 0;
    }
    pf->line[pf->n++] = (const char *)p;
}

/* The microkernels' loops issue their prefetches in groups of PF_GROUP steps: per group
 * at most one line of the next C tile, one of the call's own tile and two listed lines
 * (the second slot only when the list is longer than the loop's groups). A C line per
 * group rather than per other step leaves more fill buffers to the B panel's stream
 * from L2, and a loop unrolled by groups carries no per-step bookkeeping (../TUNING.md). */
#define PF_GROUP 4

/* Group g (of `groups` in the loop) of a microkernel whose C tiles have `rows` rows (the
 * blocking's mr): the listed lines g and groups + g, the next C tile's line g and, from
 * own_group on, the own tile's next line. kernel_rows issues the three parts at
 * different steps of the group, the one-vector kernels prefetch_group at its first. */
static inline __attribute__((always_inline)) void prefetch_group_list(const prefetch_list *pf, int g, int groups) {
    if (g < pf->n) _mm_prefetch(pf->line[g], _MM_HINT_T1);
    if (groups + g < pf->n) _mm_prefetch(pf->line[groups + g], _MM_HINT_T1);
}
static inline __attribute__((always_inline)) void prefetch_group_next_c(const prefetch_list *pf, int g,
                                                                        const int rows) {
    if (g < pf->c_rows * pf->c_lines)
        _mm_prefetch(prefetch_tile_line(pf, pf->c, pf->c_lines, (unsigned)g, (unsigned)rows), _MM_HINT_T1);
}
static inline __attribute__((always_inline)) void prefetch_group_own_c(const prefetch_list *pf, int g,
                                                                       const int rows) {
    unsigned o = (unsigned)(g - pf->own_group);
    if (o < (unsigned)(pf->c_rows * pf->own_lines))
        _mm_prefetch(prefetch_tile_line(pf, pf->own, pf->own_lines, o, (unsigned)rows), _MM_HINT_T0);
}
static inline __attribute__((always_inline)) void prefetch_group(const prefetch_list *pf, int g, int groups,
                                                                 const int rows) {
    prefetch_group_list(pf, g, groups);
    prefetch_group_next_c(pf, g, rows);
    prefetch_group_own_c(pf, g, rows);
}

/* After a loop of `groups` groups: what it did not reach of the list and the next C tile
 * (the own tile's lines would arrive after the epilogue). */
static inline __attribute__((always_inline)) void prefetch_rest(const prefetch_list *pf, int groups,
                                                                const int rows) {
    for (int i = 2 * groups; i < pf->n; i++) _mm_prefetch(pf->line[i], _MM_HINT_T1);
    for (int i = groups; i < pf->c_rows * pf->c_lines; i++)
        _mm_prefetch(prefetch_tile_line(pf, pf->c, pf->c_lines, (unsigned)i, (unsigned)rows), _MM_HINT_T1);
}

/* C (mr x nr valid, row stride ldc) = alpha a b + beta C over packed panels of depth kc,
 * prefetching pf's lines. */
typedef void (*gemm_micro_fn)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                              float alpha, float beta, const prefetch_list *pf);

/* A gemm_micro_fn that also adds bias[0:nr] to every row of the tile in registers, right
 * before its store: the bits add_bias gives after the store (the same two roundings). */
typedef void (*gemm_micro_bias_fn)(int kc, const float *a, const float *b, float *c, int ldc, int mr, int nr,
                                   float alpha, float beta, const float *bias, const prefetch_list *pf);

/* The `full` microkernel for MR whole rows of op(A) read in place, row i at step k at
 * a[i rs + k ks] (ta = 0: rs = lda, ks = 1; ta = 1: rs = 1, ks = lda). */
typedef void (*gemm_inplace_fn)(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c,
                                int ldc, int nr, float alpha, float beta, const prefetch_list *pf);
/* The same adding bias[0:nr] in registers before the store, as gemm_micro_bias_fn does. */
typedef void (*gemm_inplace_bias_fn)(int kc, const float *a, size_t rs, size_t ks, const float *b, float *c,
                                     int ldc, int nr, float alpha, float beta, const float *bias,
                                     const prefetch_list *pf);

/* `full` and `inplace` for a panel's first call when op(B) is not transposed (tb = 0):
 * they read the panel's nr > half_nr columns from their source, op(B)[k][j] at
 * bs[k ldbs + j], and store the packed panel to b as pack_b would, so the packing's copy
 * runs beside the FMAs instead of in a pass of its own (gemm_macro). */
typedef void (*gemm_pack_b_fn)(int kc, const float *a, const float *bs, size_t ldbs, float *b, float *c,
                               int ldc, int mr, int nr, float alpha, float beta, const prefetch_list *pf);
typedef void (*gemm_inplace_pack_b_fn)(int kc, const float *a, size_t rs, size_t ks, const float *bs,
                                       size_t ldbs, float *b, float *c, int ldc, int nr, float alpha,
                                       float beta, const prefetch_list *pf);

/* c[0:mr, 0:nr] (row stride ldc) += bias[0:nr] on every row: the bias of gemm_bias,
 * added to a C tile right after its last K block's store, while it is in L1. */
typedef void (*gemm_bias_fn)(float *c, int ldc, int mr, int nr, const float *bias);

/* Add rows [r0, r1) of a len-float-wide region (row stride ld) to pf: the next block's
 * packing source, spread over the current block's microkernel calls so that packing
 * reads from L2 instead of waiting on memory. */
static inline __attribute__((always_inline)) void prefetch_rows(prefetch_list *pf, const float *base, size_t ld,
                                                                int r0, int r1, int len) {
    for (int r = r0; r < r1; r++) {
        /* each 64-byte line the row's len floats touch, once */
        uintptr_t p = (uintptr_t)(base + (size_t)r * ld), end = p + (size_t)len * 4;
        for (p &= ~(uintptr_t)63; p < end; p += 64) prefetch_add(pf, (const void *)p);
    }
}

/* A region's rows cut into `parts` parts, handed out part after part without a
 * division: the p-th call of row_cursor_next gives [*r0, *r1) = [rows p / parts,
 * rows (p + 1) / parts). parts 0 (a block none of whose calls prefetches, gemm_macro's
 * first_src = parts) gives a cursor that must not be advanced. */
typedef struct {
    int r1, q, rem, acc, parts;
} row_cursor;
static inline row_cursor row_cursor_at_0(int rows, int parts) {
    row_cursor c = {0, parts ? rows / parts : 0, parts ? rows % parts : 0, 0, parts};
    return c;
}
static inline __attribute__((always_inline)) void row_cursor_next(row_cursor *c, int *r0, int *r1) {
    *r0 = c->r1;
    c->r1 += c->q;
    c->acc += c->rem; /* (p + 1) rem mod parts, carrying its floor into r1 */
    if (c->acc >= c->parts) {
        c->acc -= c->parts;
        c->r1++;
    }
    *r1 = c->r1;
}

/* The next part of a region (its rows from cursor c) added to pf. */
static inline __attribute__((always_inline)) void prefetch_next_part(prefetch_list *pf, vt_region r, row_cursor *c) {
    int r0, r1;
    row_cursor_next(c, &r0, &r1);
    prefetch_rows(pf, r.base, r.ld, r0, r1, r.len);
}

/* At most how many 64-byte lines the rows x len floats of r touch. */
static inline long region_lines(vt_region r) { return (long)r.rows * ((r.len * 4 + 63) / 64 + 1); }

static inline vt_region a_source(int ta, const float *A, int lda, int i0, int p0, int mc, int kc) {
    vt_region r = {ta ? A + (size_t)p0 * lda + i0 : A + (size_t)i0 * lda + p0, (size_t)lda,
                    ta ? kc : mc, ta ? mc : kc};
    return r;
}

/* From a bf16 B16 (B NULL): the float-aligned region covering the block, whose lines are
 * the block's (for prefetching only); none when ldb is odd. */
static inline vt_region b_source(int tb, const float *B, const vt_bf16 *B16, int ldb, int p0, int j0, int kc,
                                 int nc) {
    size_t at = tb ? (size_t)j0 * ldb + p0 : (size_t)p0 * ldb + j0;
    int rows = tb ? nc : kc, len = tb ? kc : nc;
    if (B16) {
        vt_region r16 = {(const float *)((uintptr_t)(B16 + at) & ~(uintptr_t)3), (size_t)ldb / 2,
                         ldb % 2 ? 0 : rows, len / 2 + 1};
        return r16;
    }
    vt_region r = {B + at, (size_t)ldb, rows, len};
    return r;
}

/* The cache lines a C tile row spans: bytes p to p + last. */
static inline int row_lines(const void *p, int last) { return (int)(((uintptr_t)p % 64 + (size_t)last) / 64) + 1; }

/* The prefetches of one microkernel call on the kc-step tile at c (own: whether it has
 * MR rows): the MR x NR C tile at c_next (NULL: none), with bl.own_c its own tile late
 * (an own tile of fewer rows is not prefetched) and the call's share of the next packing
 * sources na and nb (in the last block, the caller's next regions), their next parts
 * from the cursors ca and cb (NULL: none of that region). */
static inline __attribute__((always_inline)) void call_prefetches(prefetch_list *pf, gemm_blocking bl, int kc,
                                                                  const float *c, int own,
                                                                  const float *c_next, int ldc,
                                                                  vt_region na, vt_region nb, row_cursor *ca,
                                                                  row_cursor *cb) {
    pf->n = 0;
    pf->c_rows = c_next ? bl.mr : 0;
    pf->c = (const char *)c_next;
    pf->ldc_bytes = (size_t)ldc * sizeof(float);
    pf->c_last = bl.nr * (int)sizeof(float) - 1;
    pf->c_lines = row_lines(c_next, pf->c_last);
    pf->own = (const char *)c;
    pf->own_lines = row_lines(c, pf->c_last);
    pf->own_group = own && bl.own_c ? imax(0, (kc - bl.own_c) / PF_GROUP) : INT_MAX;
    if (ca) prefetch_next_part(pf, na, ca);
    if (cb) prefetch_next_part(pf, nb, cb);
}

/* The kernels of one ISA's GEMM (see gemm_blocked). */
typedef struct {
    gemm_pack_fn pack_a, pack_b;
    gemm_pack16_fn pack_b16;               /* NULL: no bf16 B */
    gemm_micro_fn full, half, quarter, narrow, short_rows;
    gemm_inplace_fn inplace;
    gemm_inplace_bias_fn inplace_bias;     /* NULL: add_bias after the store */
    gemm_pack_b_fn full_pack_b;            /* NULL: only pack_b packs op(B) */
    gemm_inplace_pack_b_fn inplace_pack_b; /* (both or neither) */
    gemm_bias_fn add_bias;
    gemm_micro_bias_fn full_bias, half_bias; /* NULL: add_bias after the store */
    gemm_sum_rows_fn sum_rows;               /* the weight gradients' column sums (gemm_sums) */
} gemm_kernels;

/* One packed block's microkernel calls: C[ic : ic + mc, jc : jc + nc] = alpha op(A) op(B)
 * + bet C over K block [pc, pc + kc), op(A)'s first `whole` rows of the block read in
 * place, the others from pa, op(B) from pb (its NR-column panels bcol NR floats apart:
 * kc for a block packed here, K in a packing of all of op(B)); the block's last calls
 * (src_lines lines each; 0: all its calls) prefetch their shares of the next packing
 * sources na and nb.
 * bias_k: added to each tile, by the kernel's bias variant before its store (full_bias,
 * half_bias, inplace_bias) or by add_bias after it (NULL: none).
 * bs (tb = 0 only; NULL: pb is already packed): op(B)[pc + k][jc + j] at bs[k ldb + j],
 * packed into pb here, panel by panel: by the panel's first call (full_pack_b /
 * inplace_pack_b) when it is a whole MR-row call over more than half_nr columns, else by
 * pack_b before it; each panel's calls prefetch the next panel's source. */
static inline __attribute__((always_inline)) void
gemm_macro(gemm_blocking bl, const gemm_kernels *kn, int ta, const float *A, int lda, int ic, int mc,
           int whole, int pc, int kc, int jc, int nc, vt_region na, vt_region nb, float alpha, float bet,
           const float *bias_k, float *C, int ldc, const float *pa, float *pb, size_t bcol, const float *bs,
           int ldb, int src_lines) {
    const int MR = bl.mr, NR = bl.nr, HALF = bl.half_nr ? bl.half_nr : NR / 2;
    const size_t rs = ta ? 1 : (size_t)lda, ks = ta ? (size_t)lda : 1; /* op(A)[i][k] = A[i rs + k ks] */
    int parts = ((nc + NR - 1) / NR) * ((mc + MR - 1) / MR), part = 0;
    /* the calls from first_src on prefetch the next packing sources, src_lines lines each
     * (0: all calls); lines prefetched earlier in the block are evicted again by the time
     * they are packed, where the packed A block and the next source nearly fill the L2 */
    const long src_calls = src_lines ? (region_lines(na) + region_lines(nb) + src_lines - 1) / src_lines : parts;
    const int first_src = src_calls < parts ? parts - (int)src_calls : 0;
    /* the calls from first_src on take parts 0, 1, ... of parts - first_src of each */
    row_cursor ca = row_cursor_at_0(na.rows, parts - first_src), cb = row_cursor_at_0(nb.rows, parts - first_src);
    for (int jr = 0; jr < nc; jr += NR) {
        int nr = imin(NR, nc - jr);
        float *b = pb + (size_t)jr * bcol;
        /* whether the first call packs this panel (its rows: whole MR rows, so `full` or `inplace`) */
        const int first_packs = bs && nr > HALF && mc >= MR && MR > bl.short_full_mr;
        if (bs && !first_packs) kn->pack_b(0, bs + jr, ldb, 0, 0, kc, nr, b);
        /* the next panel's source, a part per call of this panel */
        const vt_region next_bs = {bs && jr + NR < nc ? bs + jr + NR : NULL, (size_t)ldb, kc, imin(NR, nc - jr - NR)};
        row_cursor cbs = row_cursor_at_0(kc, (mc + MR - 1) / MR);
        for (int ir = 0; ir < mc; ir += MR, part++) {
            int mr = imin(MR, mc - ir);
            gemm_micro_fn kern = mr <= bl.short_mr                            ? kn->short_rows
                                 : nr <= bl.narrow_nr                         ? kn->narrow
                                 : nr > HALF && mr <= bl.short_full_mr        ? kn->short_rows
                                 : nr > HALF                                  ? kn->full
                                 : kn->quarter && nr <= HALF / 2              ? kn->quarter
                                                                              : kn->half;
            float *c = C + (size_t)(ic + ir) * ldc + jc + jr;
            /* the next call's tile in this block; for the block's last, its own */
            const float *c_next = ir + MR < mc   ? c + (size_t)MR * ldc
                                  : jr + NR < nc ? C + (size_t)ic * ldc + jc + jr + NR
                                                 : c;
            prefetch_list pf;
            call_prefetches(&pf, bl, kc, c, mr == MR, bl.next_c ? c_next : NULL, ldc, na, nb,
                            part >= first_src && na.rows ? &ca : NULL, part >= first_src && nb.rows ? &cb : NULL);
            /* where this block packs op(B), the next panel's source, over this panel's calls */
            if (next_bs.base) prefetch_next_part(&pf, next_bs, &cbs);
            const float *a_in = A + (size_t)(ic + ir) * rs + (size_t)pc * ks;
            const float *pack_b_from = first_packs && ir == 0 ? bs + jr : NULL;
            /* the call's variant that adds this K block's bias in registers, when its kernel
             * has one (both NULL: add_bias adds it after the call) */
            const int bias_in_regs = bias_k && !pack_b_from;
            gemm_micro_bias_fn kern_bias = !bias_in_regs || ir < whole ? NULL
                                           : kern == kn->full          ? kn->full_bias
                                           : kern == kn->half          ? kn->half_bias
                                                                       : NULL;
            gemm_inplace_bias_fn inplace_bias = bias_in_regs && ir < whole ? kn->inplace_bias : NULL;
            const float *bias_j = bias_k ? bias_k + jc + jr : NULL;
            if (pack_b_from && ir < whole)
                kn->inplace_pack_b(kc, a_in, rs, ks, pack_b_from, (size_t)ldb, b, c, ldc, nr, alpha, bet, &pf);
            else if (pack_b_from)
                kn->full_pack_b(kc, pa, pack_b_from, (size_t)ldb, b, c, ldc, mr, nr, alpha, bet, &pf);
            else if (inplace_bias)
                inplace_bias(kc, a_in, rs, ks, b, c, ldc, nr, alpha, bet, bias_j, &pf);
            else if (ir < whole)
                kn->inplace(kc, a_in, rs, ks, b, c, ldc, nr, alpha, bet, &pf);
            else if (kern_bias)
                kern_bias(kc, pa + (size_t)ir * kc, b, c, ldc, mr, nr, alpha, bet, bias_j, &pf);
            else
                kern(kc, pa + (size_t)ir * kc, b, c, ldc, mr, nr, alpha, bet, &pf);
            if (bias_k && !kern_bias && !inplace_bias) kn->add_bias(c, ldc, mr, nr, bias_j);
        }
    }
}

/* The K block for K steps in blocks of at most kmax (a multiple of 16): K in equal
 * blocks, each rounded up to 16 (the transposing pack's step), the last one shorter.
 * Full blocks of kmax would leave a short last one whose calls pay a whole C tile's
 * load and store and their prefetch lists for a few steps (with kmax = 384, K = 785 runs
 * as 272 + 272 + 241 instead of 384 + 384 + 17). */
static inline int k_block(int K, int kmax) {
    int blocks = (K + kmax - 1) / kmax;
    return (int)round_up((size_t)((K + blocks - 1) / blocks), 16);
}

/* Whether mr rows of op(A) read in place (ta = 0) at row stride lda floats spread over
 * the L1: at most 4 of them in any one set of a cache with 64 sets of 64-byte lines (a
 * 32 KB 8-way L1; larger ones have more sets or ways). Rows a multiple of 4 KB apart all
 * fall in one set and evict each other (../TUNING.md). */
static inline int rows_spread_in_l1(int mr, int lda) {
    int count[64] = {0};
    for (int i = 0; i < mr; i++)
        if (++count[(size_t)i * (size_t)lda * sizeof(float) / 64 % 64] > 4) return 0;
    return 1;
}

/* op(B)'s kc x nc block at (pc, jc) packed into pb: from B16 by pack_b16 when it is not
 * NULL, else from B by pack_b. */
static inline __attribute__((always_inline)) void pack_b_block(const gemm_kernels *kn, int tb, const float *B,
                                                               const vt_bf16 *B16, int ldb, int pc, int jc,
                                                               int kc, int nc, float *pb) {
    if (B16) kn->pack_b16(tb, B16, ldb, pc, jc, kc, nc, pb);
    else kn->pack_b(tb, B, ldb, pc, jc, kc, nc, pb);
}

/* The blocks gemm_blocked walks op(B) (K x N) in, in the BLIS order (entries.def:
 * gemm_b_blocks): NC columns, K blocks of k_block's (the one-pass order's N blocks differ,
 * its K blocks do not, and only those change sums). */
static inline void gemm_b_blocks_of(gemm_blocking bl, int ta, int N, int K, int *nc, int *kc) {
    *nc = imax(1, imin(bl.nc, N));
    *kc = imax(1, imin(K, k_block(K, ta ? bl.kc_t : bl.kc)));
}

/* The floats of op(B) (K x N) packed whole (entries.def: gemm_packed_b_floats) in
 * nr-column panels of all K steps, panel q at q nr K, each as pack_b fills a block (so
 * K block pc of panel q is at q nr K + pc nr); *panels its panel count, 0 for an empty
 * op(B). */
static inline size_t gemm_packed_b_size(int nr, int N, int K, int *panels) {
    *panels = N > 0 && K > 0 ? (N + nr - 1) / nr : 0;
    return (size_t)*panels * (size_t)nr * (size_t)K;
}

/* Panels [p0, p1) of op(B) into its packed form at packed (gemm_packed_b_size). */
static inline __attribute__((always_inline)) void gemm_pack_b_panels(gemm_pack_fn pack_b, int nr, int tb, int N,
                                                                     int K, const float *B, int ldb, int p0, int p1,
                                                                     float *packed) {
    int j0 = p0 * nr, j1 = imin(p1 * nr, N);
    if (j1 > j0) pack_b(tb, B, ldb, 0, j0, K, j1 - j0, packed + (size_t)j0 * K);
}

/* C = alpha op(A) op(B) + beta C (+ bias on every row when bias != NULL, added to each
 * tile in its last K block, see gemm_macro) for M, N, K > 0 and alpha != 0, through
 * packed A at pa and packed B at pb (sized by the caller's work-space formula); the
 * last block's calls prefetch next[0] and next[1] (gemm_prefetch; next NULL: none). Last
 * panels with mr <= short_mr rows use `short_rows`, else those with nr <= narrow_nr columns
 * `narrow`, else those with nr <= half_nr / 2 columns `quarter` (when not NULL), else
 * those with nr <= half_nr columns `half`, else those with mr <= short_full_mr rows
 * `short_rows`, the others `full`.
 * When N <= bl.inplace_max_n, each A block would be packed for at most a few B panels,
 * costing about as much as the FMAs it feeds save (attention's P v and dS k, 197 x 197
 * operands for 64 output columns): the block's whole MR-row panels are then read in
 * place by `inplace` (for every nr), only its last partial panel is packed. Likewise
 * when N <= bl.inplace_rows_max_n (ta = 0) or bl.inplace_t_max_n (ta = 1) and
 * M K >= bl.inplace_rows_min_a, outside the one-pass order: op(A) is read as it is,
 * and its pack (a pass over A from memory) is skipped. Rows (ta = 0) are read in place
 * only when their stride spreads them over the L1 (rows_spread_in_l1).
 * Loop order: N blocks -> K blocks -> M blocks (BLIS), except when M <= bl.m_one_pass
 * and N > bl.one_pass_min_n: then K blocks -> N blocks of nc_one_pass, all of op(A)'s
 * K block packed at once and used by every N block, so the packed B block stays in L2
 * beside it (the weight gradients, whose packed B blocks would not fit in L2 otherwise).
 * With full_pack_b and tb = 0, no pass packs op(B): each B panel is packed by the first
 * call that reads it (in the BLIS order, in the first M block; see gemm_macro), its copy
 * running beside that call's FMAs, whose loads leave the memory ports mostly idle.
 * op(B) comes from B16 (bf16, B NULL) when it is not NULL: kn then has pack_b16.
 * cs (ta = 1 only; NULL: none): op(A)'s row sums (A's column sums, gemm_sums), each
 * block's taken right after its pack in the first N block, from cache.
 * packed (NULL: none; never with cs, B16 or full_pack_b): op(B) packed whole by
 * gemm_pack_b_panels, read there instead of packed block by block (tb, B and ldb
 * unused), always in the BLIS order (the blocks' order changes no sums).
 * The bf16 fma path (kernels.h) runs these loops with kernels whose pack_a and pack_b
 * round to bf16 as they pack (pack_b16 widens), without `inplace` and `full_pack_b`, so
 * that every element of op(A) and op(B) the microkernels read comes through a pack. */
static inline __attribute__((always_inline)) void
gemm_blocked(gemm_blocking bl, const gemm_kernels *kn, int ta, int tb, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias,
             float *C, int ldc, float *pa, float *pb, const vt_region *next, const gemm_col_sums *cs,
             const float *packed) {
    const int MR = bl.mr, KC = k_block(K, ta ? bl.kc_t : bl.kc);
    /* M in blocks of equal size (whole MR panels, at most bl.mc rows): a small last
     * block would get the whole next K block's packing source to prefetch in a few
     * calls, more lines than its loops spread. Row blocks do not change any element's
     * sums. */
    const int mblocks = (M + bl.mc - 1) / bl.mc;
    const int MC = (int)round_up((size_t)((M + mblocks - 1) / mblocks), (size_t)MR);
    const int one_pass = !packed && M <= bl.m_one_pass && N > bl.one_pass_min_n;
    const int rows_max_n = ta ? bl.inplace_t_max_n : bl.inplace_rows_max_n;
    const int in_place = kn->inplace != NULL && !one_pass &&
                         (N <= bl.inplace_max_n || (N <= rows_max_n && (size_t)M * K >= bl.inplace_rows_min_a)) &&
                         (ta || rows_spread_in_l1(MR, lda));
    /* op(B) packed by the microkernels as they first read it (gemm_macro) */
    const int fuse_b = !packed && !tb && kn->full_pack_b != NULL;
    const vt_region none = {NULL, 0, 0, 0};
    const vt_region last_a = next ? next[0] : none, last_b = next ? next[1] : none;
    if (one_pass) {
        /* N in blocks of equal size, whole NR panels, at most nc_one_pass columns */
        const int nblocks = (N + bl.nc_one_pass - 1) / bl.nc_one_pass;
        const int NC = (int)round_up((size_t)((N + nblocks - 1) / nblocks), (size_t)bl.nr);
        for (int pc = 0; pc < K; pc += KC) {
            int kc = imin(KC, K - pc);
            float bet = pc == 0 ? beta : 1.0f;
            const float *bias_k = pc + kc == K ? bias : NULL;
            kn->pack_a(ta, A, lda, 0, pc, M, kc, pa);
            if (cs) col_sums_block(kn->sum_rows, cs, A, lda, M, 0, M, pc, kc);
            for (int jc = 0; jc < N; jc += NC) {
                int nc = imin(NC, N - jc);
                if (!fuse_b) pack_b_block(kn, tb, B, B16, ldb, pc, jc, kc, nc, pb);
                vt_region na = none, nb = none;
                if (jc + NC < N) {
                    nb = b_source(tb, B, B16, ldb, pc, jc + NC, kc, imin(NC, N - jc - NC));
                } else if (pc + KC < K) {
                    na = a_source(ta, A, lda, 0, pc + KC, M, imin(KC, K - pc - KC));
                    nb = b_source(tb, B, B16, ldb, pc + KC, 0, imin(KC, K - pc - KC), imin(NC, N));
                } else {
                    na = last_a;
                    nb = last_b;
                }
                gemm_macro(bl, kn, ta, A, lda, 0, M, 0, pc, kc, jc, nc, na, nb, alpha, bet, bias_k, C, ldc, pa,
                           pb, (size_t)kc, fuse_b ? B + (size_t)pc * ldb + jc : NULL, ldb, 0);
            }
        }
        return;
    }
    const int NC = bl.nc;
    /* the next B block's columns a block prefetches: with fuse_b only its first panel's
     * (a B block is larger than the L2; gemm_macro prefetches each next panel's source
     * while the panel before it runs) */
    const int nb_cols = fuse_b ? bl.nr : N;
    for (int jc = 0; jc < N; jc += NC) {
        int nc = imin(NC, N - jc);
        for (int pc = 0; pc < K; pc += KC) {
            int kc = imin(KC, K - pc);
            float bet = pc == 0 ? beta : 1.0f;
            const float *bias_k = pc + kc == K ? bias : NULL; /* the last K block's */
            if (!fuse_b && !packed) pack_b_block(kn, tb, B, B16, ldb, pc, jc, kc, nc, pb);
            /* this block of op(B): packed here, or its panels' K block pc in packed */
            float *b_block = packed ? (float *)packed + (size_t)jc * K + (size_t)pc * bl.nr : pb;
            for (int ic = 0; ic < M; ic += MC) {
                int mc = imin(MC, M - ic);
                int whole = in_place ? mc / MR * MR : 0; /* rows read in place */
                if (whole < mc) kn->pack_a(ta, A, lda, ic + whole, pc, mc - whole, kc, pa + (size_t)whole * kc);
                if (cs && jc == 0) col_sums_block(kn->sum_rows, cs, A, lda, M, ic, mc, pc, kc);
                /* what the next pack_a / pack_b will read */
                vt_region na = none, nb = none;
                if (ic + MC < M) {
                    na = a_source(ta, A, lda, ic + MC, pc, imin(MC, M - ic - MC), kc);
                } else if (pc + KC < K) {
                    na = a_source(ta, A, lda, 0, pc + KC, imin(MC, M), imin(KC, K - pc - KC));
                    if (!packed) nb = b_source(tb, B, B16, ldb, pc + KC, jc, imin(KC, K - pc - KC), imin(nb_cols, nc));
                } else if (jc + NC < N) {
                    na = a_source(ta, A, lda, 0, 0, imin(MC, M), imin(KC, K));
                    if (!packed)
                        nb = b_source(tb, B, B16, ldb, 0, jc + NC, imin(KC, K), imin(nb_cols, imin(NC, N - jc - NC)));
                } else {
                    na = last_a;
                    nb = last_b;
                }
                gemm_macro(bl, kn, ta, A, lda, ic, mc, whole, pc, kc, jc, nc, na, nb, alpha, bet, bias_k, C, ldc,
                           pa, b_block, packed ? (size_t)K : (size_t)kc,
                           fuse_b && ic == 0 ? B + (size_t)pc * ldb + jc : NULL, ldb, bl.src_lines);
            }
        }
    }
}

/* The level's GEMM entry points (../entries.def: vt_<level>_gemm_bias, _gemm,
 * _gemm_prefetch, _gemm_sums, and the bf16 fma path's _gemm_bf16 with the fp32 work
 * space, and its _gemm_bf16_packed_a_floats: no packed form of op(A) to share; each
 * level says itself whether it has one of op(B)), each but the last two a call of the
 * including file's
 *   gemm_all(ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, work, next, bf16, cs)
 * (B16 NULL: op(B) from B; bias NULL: none; next NULL: nothing to prefetch in the last
 * block; bf16: the operands rounded to bf16 as they are packed; cs: gemm_sums' column
 * sums, NULL: none). */
#define GEMM_ENTRY_POINTS(level)                                                                              \
    void vt_##level##_gemm_bias(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,     \
                                const float *B, int ldb, float beta, const float *bias, float *C, int ldc,    \
                                float *work) {                                                                \
        gemm_all(ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta, bias, C, ldc, work, NULL, 0, NULL);       \
    }                                                                                                         \
    void vt_##level##_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,         \
                           const float *B, int ldb, float beta, float *C, int ldc, float *work) {            \
        gemm_all(ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta, NULL, C, ldc, work, NULL, 0, NULL);       \
    }                                                                                                         \
    void vt_##level##_gemm_prefetch(int ta, int tb, int M, int N, int K, float alpha, const float *A,        \
                                    int lda, const float *B, int ldb, float beta, float *C, int ldc,         \
                                    float *work, const vt_region next[2]) {                                   \
        gemm_all(ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta, NULL, C, ldc, work, next, 0, NULL);       \
    }                                                                                                         \
    void vt_##level##_gemm_bf16(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,     \
                                const float *B, const vt_bf16 *B16, int ldb, float beta, const float *bias,   \
                                float *C, int ldc, float *work, const vt_region next[2]) {                    \
        gemm_all(ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, work, next, 1, NULL);        \
    }                                                                                                         \
    void vt_##level##_gemm_sums(int bf16, int M, int N, int K, const float *A, int lda, const float *B, int ldb, \
                                float beta, float *C, int ldc, float *work, int nchunks, const int *edge,     \
                                float *sums) {                                                                \
        const gemm_col_sums cs = {sums, edge, nchunks};                                                       \
        if (N <= 0) col_sums_no_product(&cs, A, lda, M, K);                                                   \
        gemm_all(1, 0, M, N, K, 1.0f, A, lda, B, NULL, ldb, beta, NULL, C, ldc, work, NULL, bf16, &cs);       \
    }                                                                                                         \
    size_t vt_##level##_gemm_bf16_work_floats(int M, int N, int K) { return vt_##level##_gemm_work_floats(M, N, K); } \
    size_t vt_##level##_gemm_bf16_packed_a_floats(int M, int K, int *panels) { /* none: see below */          \
        (void)M, (void)K;                                                                                     \
        *panels = 0;                                                                                          \
        return 0;                                                                                             \
    }

#endif
