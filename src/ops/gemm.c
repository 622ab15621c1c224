/* gemm.c - vt_gemm, the threaded GEMM every op uses (in float32, or with bf16 operands:
 * vt_gemm_prec), and the per-thread packing workspaces. Owns the split of C across
 * OpenMP threads; the arithmetic is vt_k.gemm's or vt_k.gemm_bf16's (kernels.h). Does
 * not own any tape or tensor logic.
 *
 * Split: C is cut into blocks, over rows when M >= N, over columns otherwise, so each
 * block packs the whole of the smaller operand (the one it does not split); up to
 * VT_GEMM_BLOCKS_PER_THREAD blocks per thread of VT_GEMM_MIN_BLOCK rows (columns) or more
 * on average, at least one per thread, handed out to the threads as they come free, so
 * that a thread whose core the host slows (a VM's vCPU) takes fewer of them. The blocks
 * shrink round after round (block_edges), so the threads' last blocks are small and they
 * finish close together. Block edges are multiples of 16 (whole 16-float vectors of a
 * column cut; a row cut leaves at most one part-filled row panel per block, which the
 * edge tiles take) except the last. The blocks' edges depend on the sizes and the thread
 * count only, and each element of C is computed by one kernel call whatever thread makes
 * it, so the result is deterministic and needs no cross-thread reduction (C blocks do not
 * change any element's sums: it equals the 1-thread result). When the kernels have a
 * packed form of op(B) (kernels/entries.def: gemm_packed_b_floats; in bf16
 * gemm_bf16_packed_b_floats), a cut over rows threads the M loop as BLIS does: for each
 * block of op(B) the kernels walk (gemm_b_blocks; the bf16 tile paths' whole op(B)), the
 * threads pack it between them, in parts handed out as they come free, into one buffer
 * of the calling thread's, then run the row blocks on it (vt_k.gemm_packed_b or
 * gemm_bf16_packed_b: beta in the first K block and 1 after it, the bias in the last,
 * which is how the kernels add their K blocks, so the sums are bitwise the 1-thread
 * ones). op(B) is then packed once a product instead of once a row block, and each block
 * is read while it is fresh in the caches, at the price of two barriers a block: on the
 * float32 kernels (float32, and bf16 on the fma path) only when op(B) is one block, or
 * large enough (VT_GEMM_SHARED_B_FLOATS) that packing it again for every row block reads
 * it from memory (a smaller one stays in the caches between row blocks, and its packs
 * cost less than the barriers of its K blocks; kernels/TUNING.md). In bf16 on the tile
 * paths a cut over columns likewise packs op(A) once (gemm_bf16_packed_a_floats), and a
 * row block wider than the kernel's N block packs each block of op(A) once, not once per
 * N block (gemm_bf16_driver.h).
 * Products with a long K and a small C (the weight gradients: K = B N tokens) are cut
 * over K instead, only when op(A) is transposed (the weight gradients' form): with A as
 * stored every row of C stays a function of its row of A alone, so a sample's forward
 * outputs do not depend on the size of its batch, which sharded evaluation relies on
 * (tests/test_dist.c). A C split would make every thread pack the whole of the operand it
 * does not split, for only M / nt rows of work. K is cut into up to
 * VT_GEMM_BLOCKS_PER_THREAD ranges per thread, shrinking round after round as C's blocks
 * do and handed out as the threads come free; range 0 computes alpha A0 B0 + beta C into
 * C, range r > 0 alpha Ar Br into its own partial buffer, and the partials are added to C
 * in range order. Whatever thread computes a range, the result is again fixed for a fixed
 * thread count (but, unlike the C split, not equal to the 1-thread sums).
 * A weight gradient with its layer's bias gradient (vt_gemm_prec_wgrad: dW += dY^T X and
 * db += dY's column sums) runs on one thread or, with the K split, each range on whole
 * vt_par_colsum_acc chunks of K (the rows of dY), and the kernel's gemm_sums sums
 * each block of dY right after packing it, from cache (a separate column sum is a pass
 * over dY from memory); dW then has the bits of the plain product. The sums are
 * vt_par_colsum_acc's, chunk by chunk, so db has its bits for any thread count.
 * Small products (under VT_GEMM_PAR_FLOPS multiply-adds) run on the calling thread.
 * With the product trace on (trace.h), each call is timed into it.
 * Measurements behind the split: kernels/TUNING.md. */
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"
#include "trace.h"

#define VT_GEMM_PAR_FLOPS 65536.0
#define VT_GEMM_ALIGN 16
#define VT_GEMM_K_ALIGN 64 /* K cuts of the K split */
#define VT_GEMM_K_RANGES VT_PAR_MAX_CHUNKS /* K split ranges at most (or one a thread): each a partial C */
#define VT_GEMM_K_SPLIT_F32 2  /* K / max(M, N) from which a float32 product is cut over K (kernels/TUNING.md) */
#define VT_GEMM_K_SPLIT_BF16 4 /* the same for bf16 products on the amx and dpbf16 paths (kernels/TUNING.md) */
#define VT_GEMM_MAX_THREADS 256
#define VT_GEMM_BLOCKS_PER_THREAD 4 /* a slowed thread hands most of its share to the others */
#define VT_GEMM_MIN_BLOCK 512       /* rows a block averages at least: its pack of the unsplit operand stays small */
#define VT_GEMM_SHARED_B_FLOATS (1 << 19) /* op(B) (2 MiB) from which one packing of it beats a barrier a block */

/* A per-thread buffer that only grows (the first training step sizes it). */
typedef struct {
    float *data;
    size_t floats;
} tls_buffer;

/* A thread's buffers: the kernels' packing workspace, the K split's partial Cs (the
 * calling thread's), and the packed operand its products share with their team (the
 * calling thread's). */
typedef struct {
    tls_buffer work, partial, shared;
} tls_buffers;

static _Thread_local tls_buffers tls;

/* Freed when their thread exits: OpenMP ends a team's surplus threads when a later
 * region asks for fewer, and their buffers would otherwise be lost. */
static pthread_key_t tls_key;
static pthread_once_t tls_key_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p) {
    tls_buffers *t = p;
    free(t->work.data);
    free(t->partial.data);
    free(t->shared.data);
    *t = (tls_buffers){{NULL, 0}, {NULL, 0}, {NULL, 0}};
}

static void tls_key_make(void) { VT_ASSERT(pthread_key_create(&tls_key, tls_free) == 0, "gemm: pthread_key_create"); }

/* Grow b to at least floats (0 on success; -1 out of memory, b then holds nothing). */
static int tls_buffer_grow(tls_buffer *b, size_t floats) {
    if (floats == 0) floats = 16;
    if (floats <= b->floats) return 0;
    if (b->data == NULL) { /* this thread's first buffer: free both at its exit */
        pthread_once(&tls_key_once, tls_key_make);
        VT_ASSERT(pthread_setspecific(tls_key, &tls) == 0, "gemm: pthread_setspecific");
    }
    free(b->data);
    b->data = vt_aligned_alloc(floats * sizeof(float));
    b->floats = b->data ? floats : 0;
    return b->data ? 0 : -1;
}

/* The buffer inside a product: a failure is out of memory past the reservation. */
static float *tls_buffer_get(tls_buffer *b, size_t floats, const char *what) {
    if (tls_buffer_grow(b, floats)) vt_out_of_memory(what, (floats ? floats : 16) * sizeof(float));
    return b->data;
}

float *vt_gemm_workspace(size_t floats) { return tls_buffer_get(&tls.work, floats, "a GEMM packing workspace"); }

static int k_ranges(int nt, int units);

/* The threads an M x N x K product runs on when nt are free: one under
 * VT_GEMM_PAR_FLOPS multiply-adds, at most VT_GEMM_MAX_THREADS. */
static int product_threads(int M, int N, int K, int nt) {
    if (nt <= 1 || (double)M * N * K < VT_GEMM_PAR_FLOPS) return 1;
    return nt < VT_GEMM_MAX_THREADS ? nt : VT_GEMM_MAX_THREADS;
}

vt_status vt_gemm_reserve(size_t partial_floats, size_t operand_floats) {
    VT_ASSERT(!omp_in_parallel(), "vt_gemm_reserve inside a parallel region");
    const int any = 1 << 30; /* a workspace's size is bounded by the blocking for any shape */
    size_t work = vt_k.gemm_work_floats(any, any, any), w16 = vt_k.gemm_bf16_work_floats(any, any, any);
    if (w16 > work) work = w16;
    int failed = 0, nt = omp_get_max_threads();
    size_t shared = nt > 1 ? operand_floats : 0; /* one thread packs per call */
    int most = product_threads(any, any, any, nt); /* the threads of the largest product */
    size_t partials = most > 1 ? (size_t)(k_ranges(most, INT_MAX) - 1) * partial_floats : 0;
    #pragma omp parallel num_threads(nt) reduction(| : failed)
    failed |= tls_buffer_grow(&tls.work, work);
    /* the calling thread's */
    if (!failed) failed = tls_buffer_grow(&tls.partial, partials) || tls_buffer_grow(&tls.shared, shared);
    if (!failed) return VT_OK;
    return vt_fail(VT_ERR_RUNTIME, "out of memory: the GEMM buffers of %d thread%s (a packing workspace of %.1f "
                   "MiB each, %.1f MiB of partial sums and %.1f MiB of shared packed operands), which this "
                   "process cannot allocate; fewer threads (--threads) need less", nt, nt == 1 ? "" : "s",
                   (double)work * sizeof(float) / 1048576.0, (double)partials * sizeof(float) / 1048576.0,
                   (double)shared * sizeof(float) / 1048576.0);
}

/* One product: C = alpha op(A) op(B) + beta C (+ bias), op(B) from B16 when bf16 and B16
 * is not NULL. */
typedef struct {
    int bf16, ta, tb;
    float alpha, beta;
    const float *A, *B, *bias;
    const uint16_t *B16;
    int lda, ldb, ldc;
    float *C;
} gemm_args;

/* The kernel on rows [i0, i0 + m), columns [j0, j0 + n) of C and steps [k0, k0 + k),
 * with beta and bias as given, C at c (row stride ldc); the calling thread's workspace. */
static void kernel_call(const gemm_args *g, int i0, int m, int j0, int n, int k0, int k, float beta,
                        const float *bias, float *c, int ldc) {
    size_t ao = g->ta ? (size_t)k0 * g->lda + i0 : (size_t)i0 * g->lda + k0;
    size_t bo = g->tb ? (size_t)j0 * g->ldb + k0 : (size_t)k0 * g->ldb + j0;
    if (g->bf16) {
        float *work = vt_gemm_workspace(vt_k.gemm_bf16_work_floats(m, n, k));
        vt_k.gemm_bf16(g->ta, g->tb, m, n, k, g->alpha, g->A + ao, g->lda, g->B16 ? NULL : g->B + bo,
                       g->B16 ? g->B16 + bo : NULL, g->ldb, beta, bias, c, ldc, work, NULL);
    } else {
        float *work = vt_gemm_workspace(vt_k.gemm_work_floats(m, n, k));
        vt_k.gemm_bias(g->ta, g->tb, m, n, k, g->alpha, g->A + ao, g->lda, g->B + bo, g->ldb, beta, bias, c, ldc,
                       work);
    }
}

/* One block of C: rows [i0, i0 + m), columns [j0, j0 + n), all of K. */
static void gemm_block(const gemm_args *g, int i0, int m, int j0, int n, int K) {
    kernel_call(g, i0, m, j0, n, 0, K, g->beta, g->bias ? g->bias + j0 : NULL, g->C + (size_t)i0 * g->ldc + j0,
                g->ldc);
}

/* A weight gradient's column sums of A (vt_gemm_prec_wgrad): A's K rows in the nc chunks
 * of vt_par_colsum_acc, chunk c summed into part + c M. */
typedef struct {
    float *part;
    int nc;
} col_sums;

/* Rows [begin(c0), begin(c1)) of K (A's chunks c0 to c1, c0 <= c1): C at c (row stride
 * ldc) = beta C + op(A) op(B) over them (a weight gradient: alpha 1), and the chunks
 * summed into their partials by the kernel's gemm_sums as it packs (bf16: on the table's
 * bf16 path). No chunks: no rows, so c = beta c (the GEMMs' K = 0 convention). */
static void kernel_call_sums(const gemm_args *g, int M, int N, int K, const col_sums *cs, int c0, int c1,
                             float beta, float *c, int ldc) {
    const int k0 = (int)vt_par_chunk_begin(K, cs->nc, c0), k = (int)vt_par_chunk_begin(K, cs->nc, c1) - k0;
    int edge[VT_PAR_MAX_CHUNKS + 1];
    for (int a = c0; a <= c1; a++) edge[a - c0] = (int)vt_par_chunk_begin(K, cs->nc, a) - k0;
    float *work = vt_gemm_workspace(g->bf16 ? vt_k.gemm_bf16_work_floats(M, N, k) : vt_k.gemm_work_floats(M, N, k));
    vt_k.gemm_sums(g->bf16, M, N, k, g->A + (size_t)k0 * g->lda, g->lda, g->B + (size_t)k0 * g->ldb, g->ldb, beta, c,
                   ldc, work, c1 - c0, edge, cs->part + (size_t)c0 * M);
}

/* The weight of blocks [0, t) of nblk handed out to nth threads (block_edges): round r of
 * nth blocks weighs (R - r)^2 each, R = ceil(nblk / nth). */
static int64_t blocks_weight(int nblk, int nth, int t) {
    int64_t R = (nblk + nth - 1) / nth, r = t / nth, i = t % nth;
    /* sum of j^2 for j in (R - r, R], plus the part-filled round r */
    int64_t hi = R * (R + 1) * (2 * R + 1) / 6, lo = (R - r) * (R - r + 1) * (2 * (R - r) + 1) / 6;
    return nth * (hi - lo) + i * (R - r) * (R - r);
}

/* Where block t of nblk, handed out to nth threads as they come free, starts on a side
 * of units whole units: the blocks shrink round after round (blocks_weight), so the
 * threads' last blocks are small and they finish close together; with one round (nblk
 * <= nth) the blocks are equal. */
static int block_start(int units, int nblk, int nth, int t) {
    return (int)(units * blocks_weight(nblk, nth, t) / blocks_weight(nblk, nth, nblk));
}

/* Block t of nblk of a side of len rows (columns) of C for nth threads taking blocks as
 * they come free, [*s, *e) (block_start's, in tiles). No block is empty: gemm_prec makes
 * more than one round only with 512 rows a block on average and at most 4 rounds, which
 * leaves the smallest block at least 3 tiles. Edges on multiples of VT_GEMM_ALIGN but the
 * last. */
static void block_edges(int len, int nblk, int nth, int t, int *s, int *e) {
    int tiles = (len + VT_GEMM_ALIGN - 1) / VT_GEMM_ALIGN;
    *s = block_start(tiles, nblk, nth, t) * VT_GEMM_ALIGN;
    *e = block_start(tiles, nblk, nth, t + 1) * VT_GEMM_ALIGN;
    if (*e > len) *e = len;
}

/* The packed op(B) a cut over rows of this product shares (the header): its floats, 0
 * when every row block packs its own; *nc, *kc the block of op(B) packed at a time (N, K:
 * all of it), *panels its panels. */
static size_t row_cut_b(int bf16, int ta, int N, int K, int *nc, int *kc, int *panels) {
    *nc = N, *kc = K, *panels = 0;
    if (bf16 && !vt_kernels_on_fma_path(bf16)) return vt_k.gemm_bf16_packed_b_floats(N, K, panels);
    vt_k.gemm_b_blocks(ta, N, K, nc, kc);
    if ((*nc < N || *kc < K) && (double)N * K < VT_GEMM_SHARED_B_FLOATS) return 0;
    return bf16 ? vt_k.gemm_bf16_packed_b_floats(*nc, *kc, panels) : vt_k.gemm_packed_b_floats(*nc, *kc, panels);
}

size_t vt_gemm_row_cut_b_floats(int bf16, int N, int K) {
    int nc, kc, panels;
    return N > 0 && K > 0 ? row_cut_b(bf16, 0, N, K, &nc, &kc, &panels) : 0;
}

/* The cut over rows of M on op(B) packed block by block (the header; row_cut_b): for
 * each block of op(B) of nc_max columns and kc_max steps, the nth threads pack its panels
 * into packed in up to nblk parts, then run the nblk row blocks on it. */
static void gemm_rows_packed_b(const gemm_args *g, int M, int N, int K, int nblk, int nth, int nc_max, int kc_max,
                               float *packed) {
    #pragma omp parallel num_threads(nth)
    for (int jc = 0; jc < N; jc += nc_max) {
        const int nc = N - jc < nc_max ? N - jc : nc_max;
        for (int pc = 0; pc < K; pc += kc_max) {
            const int kc = K - pc < kc_max ? K - pc : kc_max;
            const size_t bo = g->tb ? (size_t)jc * g->ldb + pc : (size_t)pc * g->ldb + jc;
            const float *b = g->B16 ? NULL : g->B + bo;
            const uint16_t *b16 = g->B16 ? g->B16 + bo : NULL;
            const float beta = pc == 0 ? g->beta : 1.0f, *bias = g->bias && pc + kc == K ? g->bias + jc : NULL;
            int panels;
            if (g->bf16) vt_k.gemm_bf16_packed_b_floats(nc, kc, &panels);
            else vt_k.gemm_packed_b_floats(nc, kc, &panels);
            const int parts = nblk < panels ? nblk : panels;
            #pragma omp for schedule(dynamic, 1)
            for (int t = 0; t < parts; t++) {
                int p0 = (int)((int64_t)panels * t / parts), p1 = (int)((int64_t)panels * (t + 1) / parts);
                if (g->bf16) vt_k.gemm_bf16_pack_b(g->tb, nc, kc, b, b16, g->ldb, p0, p1, packed);
                else vt_k.gemm_pack_b(g->tb, nc, kc, b, g->ldb, p0, p1, packed);
            }
            /* the loop's barrier: the block is packed before any row block reads it */
            #pragma omp for schedule(dynamic, 1)
            for (int t = 0; t < nblk; t++) {
                int s, e;
                block_edges(M, nblk, nth, t, &s, &e);
                const float *a = g->A + (g->ta ? (size_t)pc * g->lda + s : (size_t)s * g->lda + pc);
                float *c = g->C + (size_t)s * g->ldc + jc;
                if (g->bf16) {
                    float *work = vt_gemm_workspace(vt_k.gemm_bf16_work_floats(e - s, nc, kc));
                    vt_k.gemm_bf16_packed_b(g->ta, e - s, nc, kc, g->alpha, a, g->lda, packed, beta, bias, c, g->ldc,
                                            work);
                } else {
                    float *work = vt_gemm_workspace(vt_k.gemm_work_floats(e - s, nc, kc));
                    vt_k.gemm_packed_b(g->ta, e - s, nc, kc, g->alpha, a, g->lda, packed, beta, bias, c, g->ldc, work);
                }
            }
            /* and its barrier: every row block is done with the block before the next one
             * is packed over it */
        }
    }
}

/* The bf16 cut over columns of N with op(A) packed once: the nth threads pack its
 * panels in up to nblk parts, then run the nblk column blocks on packed
 * (gemm_bf16_packed_a_floats floats). */
static void gemm_cols_shared_a(const gemm_args *g, int M, int N, int K, int nblk, int nth, int panels,
                               float *packed) {
    const int parts = nblk < panels ? nblk : panels;
    #pragma omp parallel num_threads(nth)
    {
        #pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < parts; t++)
            vt_k.gemm_bf16_pack_a(g->ta, M, K, g->A, g->lda, (int)((int64_t)panels * t / parts),
                                  (int)((int64_t)panels * (t + 1) / parts), packed);
        /* the loop's barrier: every panel is packed before any block reads one */
        #pragma omp for schedule(dynamic, 1)
        for (int t = 0; t < nblk; t++) {
            int s, e;
            block_edges(N, nblk, nth, t, &s, &e);
            size_t bo = g->tb ? (size_t)s * g->ldb : (size_t)s;
            float *work = vt_gemm_workspace(vt_k.gemm_bf16_work_floats(M, e - s, K));
            vt_k.gemm_bf16_packed_a(g->tb, M, e - s, K, g->alpha, packed, g->B16 ? NULL : g->B + bo,
                                    g->B16 ? g->B16 + bo : NULL, g->ldb, g->beta, g->bias ? g->bias + s : NULL,
                                    g->C + s, g->ldc, work);
        }
    }
}

/* Whether to cut over K: K at least VT_GEMM_K_SPLIT_F32 (bf16 on the amx and dpbf16
 * paths: VT_GEMM_K_SPLIT_BF16) times the larger side of C, so each thread's partial
 * (M N floats) and the final adds cost little next to its M N K / nt FMAs, while a C
 * split's every block would pack (and in bf16 round) the whole of the operand it does not
 * split again. bf16 products on the fma path run the float32 kernels on operands rounded
 * as they are packed, so they are cut as float32 products are. */
static int split_over_k(int bf16, int M, int N, int K, int nt) {
    int side = M > N ? M : N;
    int tiles = bf16 && !vt_kernels_on_fma_path(bf16);
    return K >= (tiles ? VT_GEMM_K_SPLIT_BF16 : VT_GEMM_K_SPLIT_F32) * side && K >= nt * VT_GEMM_K_ALIGN;
}

/* The K split's range count for nt threads over units units of K (its col-sum chunks, or
 * VT_GEMM_K_ALIGN steps): VT_GEMM_BLOCKS_PER_THREAD a thread, at most VT_GEMM_K_RANGES
 * but one a thread, at most one a unit. */
static int k_ranges(int nt, int units) {
    int nr = nt * VT_GEMM_BLOCKS_PER_THREAD, cap = nt > VT_GEMM_K_RANGES ? nt : VT_GEMM_K_RANGES;
    if (nr > cap) nr = cap;
    return nr < units ? nr : units;
}

/* C = alpha op(A) op(B) + beta C (+ bias rows) on nt threads taking ranges of K (with
 * cs, ranges of its chunks, summed as kernel_call_sums does) as they come free, range 0
 * into C and range r > 0 into partial r - 1, which are added to C in range order; the
 * bias is added after the partials. The ranges depend on nt and the sizes only. */
static void gemm_split_k(const gemm_args *g, int M, int N, int K, int nt, const col_sums *cs) {
    const int units = cs ? cs->nc : (K + VT_GEMM_K_ALIGN - 1) / VT_GEMM_K_ALIGN, nr = k_ranges(nt, units);
    float *partial = tls_buffer_get(&tls.partial, (size_t)(nr - 1) * M * N, "the GEMM partial sum buffers");
    #pragma omp parallel num_threads(nr < nt ? nr : nt)
    {
        #pragma omp for schedule(dynamic, 1)
        for (int r = 0; r < nr; r++) {
            int u0 = block_start(units, nr, nt, r), u1 = block_start(units, nr, nt, r + 1);
            float *out = r ? partial + (size_t)(r - 1) * M * N : g->C, beta = r ? 0.0f : g->beta;
            int ldo = r ? N : g->ldc;
            if (cs) {
                kernel_call_sums(g, M, N, K, cs, u0, u1, beta, out, ldo);
            } else {
                int s = u0 * VT_GEMM_K_ALIGN, e = u1 * VT_GEMM_K_ALIGN < K ? u1 * VT_GEMM_K_ALIGN : K;
                kernel_call(g, 0, M, 0, N, s, e - s, beta, NULL, out, ldo);
            }
        }
        /* the loop's barrier: every range is in C or its partial */
        int t = omp_get_thread_num(), nth = omp_get_num_threads();
        int r0 = (int)((int64_t)M * t / nth), r1 = (int)((int64_t)M * (t + 1) / nth);
        for (int i = r0; i < r1; i++) {
            float *c = g->C + (size_t)i * g->ldc;
            for (int r = 1; r < nr; r++) vt_k.add(c, partial + (size_t)(r - 1) * M * N + (size_t)i * N, c, (size_t)N);
            if (g->bias) vt_k.add(c, g->bias, c, (size_t)N);
        }
    }
}

void vt_gemm(int ta, int tb, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc) {
    vt_gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc);
}

void vt_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, const float *bias, float *C, int ldc) {
    vt_gemm_prec(0, ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta, bias, C, ldc);
}

/* The product; with cs (ta = 1, no bias), also A's column sums into cs's partials. */
static void gemm_prec(int bf16, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, const uint16_t *B16, int ldb, float beta, const float *bias, float *C,
                      int ldc, const col_sums *cs) {
    VT_ASSERT(M >= 0 && N >= 0 && K >= 0, "gemm: negative size %d x %d x %d", M, N, K);
    if (M == 0 || N == 0) return;
    const gemm_args g = {bf16, ta, tb, alpha, beta, A, B, bias, bf16 ? B16 : NULL, lda, ldb, ldc, C};
    int nt = product_threads(M, N, K, omp_in_parallel() ? 1 : omp_get_max_threads());
    if (nt == 1) {
        if (cs) kernel_call_sums(&g, M, N, K, cs, 0, cs->nc, beta, C, ldc);
        else gemm_block(&g, 0, M, 0, N, K);
        return;
    }
    if (ta && split_over_k(bf16, M, N, K, nt)) { /* ta: see the header */
        gemm_split_k(&g, M, N, K, nt, cs);
        return;
    }
    if (cs) { /* a C split reads all of A in every block: the sums take a pass of their own */
        gemm_prec(bf16, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, NULL);
        #pragma omp parallel for schedule(static)
        for (int c = 0; c < cs->nc; c++)
            vt_par_colsum_chunk(A, NULL, vt_par_chunk_begin(K, cs->nc, c), vt_par_chunk_begin(K, cs->nc, c + 1), M,
                                cs->part + (size_t)c * M);
        return;
    }
    int by_rows = M >= N;
    int len = by_rows ? M : N;
    int tiles = (len + VT_GEMM_ALIGN - 1) / VT_GEMM_ALIGN;
    int nblk = len / VT_GEMM_MIN_BLOCK;
    if (nblk > nt * VT_GEMM_BLOCKS_PER_THREAD) nblk = nt * VT_GEMM_BLOCKS_PER_THREAD;
    if (nblk < nt) nblk = nt;
    if (nblk > tiles) nblk = tiles;
    int nth = nblk < nt ? nblk : nt, panels = 0;
    int nc = N, kc = K;
    /* K 0 or alpha 0: the kernels' C = beta C (+ bias) on the plain cut */
    size_t packed = nblk < 2 || K == 0 || alpha == 0.0f ? 0
                    : by_rows                         ? row_cut_b(bf16, ta, N, K, &nc, &kc, &panels)
                    : bf16                            ? vt_k.gemm_bf16_packed_a_floats(M, K, &panels)
                                                      : 0;
    /* a packing past the reservation that cannot be allocated: each block packs its own */
    if (packed && tls_buffer_grow(&tls.shared, packed) == 0) {
        if (by_rows) gemm_rows_packed_b(&g, M, N, K, nblk, nth, nc, kc, tls.shared.data);
        else gemm_cols_shared_a(&g, M, N, K, nblk, nth, panels, tls.shared.data);
        return;
    }
    #pragma omp parallel for num_threads(nth) schedule(dynamic, 1)
    for (int t = 0; t < nblk; t++) {
        int s, e;
        block_edges(len, nblk, nth, t, &s, &e);
        if (by_rows) gemm_block(&g, s, e - s, 0, N, K);
        else gemm_block(&g, 0, M, s, e - s, K);
    }
}

/* The product (with cs, its column sums too), timed into the trace when it is on
 * (trace.h). */
static void gemm_traced(int bf16, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                        const float *B, const uint16_t *B16, int ldb, float beta, const float *bias, float *C,
                        int ldc, const col_sums *cs) {
    if (!vt_trace_active()) {
        gemm_prec(bf16, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, cs);
        return;
    }
    double t0 = vt_trace_now();
    gemm_prec(bf16, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, cs);
    vt_trace_add(&(vt_trace_call){VT_TRACE_GEMM, bf16, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, bias, B16,
                                  C, 2.0 * M * N * (double)K, vt_trace_now() - t0, cs != NULL});
}

void vt_gemm_prec(int bf16, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, const uint16_t *B16, int ldb, float beta, const float *bias, float *C, int ldc) {
    gemm_traced(bf16, ta, tb, M, N, K, alpha, A, lda, B, B16, ldb, beta, bias, C, ldc, NULL);
}

size_t vt_gemm_wgrad_partial_floats(int bf16, int M, int N, int K, int threads) {
    int nt = product_threads(M, N, K, threads);
    if (nt == 1 || !split_over_k(bf16, M, N, K, nt)) return 0; /* gemm_prec's choice for ta = 1 */
    return (size_t)(k_ranges(nt, vt_par_nchunks(K)) - 1) * M * N;
}

void vt_gemm_prec_wgrad(vt_arena *arena, int bf16, int M, int N, int K, const float *A, int lda, const float *B,
                        int ldb, float *C, int ldc, float *sums) {
    VT_ASSERT(lda == M, "gemm wgrad: A's rows %d floats apart, not its %d columns", lda, M);
    if (K <= 0 || M <= 0 || N <= 0) { /* an empty product: nothing to fuse */
        vt_gemm_prec(bf16, 1, 0, M, N, K, 1.0f, A, lda, B, NULL, ldb, 1.0f, NULL, C, ldc);
        vt_par_colsum_acc(arena, A, NULL, K, M, sums);
        return;
    }
    col_sums cs = {NULL, vt_par_nchunks(K)};
    cs.part = vt_arena_calloc(arena, (size_t)cs.nc * (size_t)M * sizeof(float));
    gemm_traced(bf16, 1, 0, M, N, K, 1.0f, A, lda, B, NULL, ldb, 1.0f, NULL, C, ldc, &cs);
    vt_par_colsum_finish(cs.part, cs.nc, M, sums);
}
