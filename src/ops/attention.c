/* attention.c - vt_op_attention and vt_op_attention_qkv: fused softmax attention per
 * (batch, head). q, k, v (B, H, N, hd), or read in place from the fused projection's
 * output qkv (B, N, 3 H hd) (row stride 3 H hd; its gradient written there too, so no
 * split_heads copy either way), -> out (B, N, H hd), the heads merged (head h in columns
 * [h hd, (h + 1) hd), the layout vt_op_merge_heads gives), written there directly:
 *   S = scale q k^T (N x N),  P = softmax(S) rows,  Pd = P * mask / (1 - p),  out = Pd v.
 *
 * Fused path. One OpenMP loop over the B H blocks, handed out VT_ATTN_CHUNK at a time to
 * the threads as they come free (one parallel region per call, forward and backward
 * each); inside a block the query rows are processed in row blocks of R rows
 * (R = N when an N x N score block fits the per-thread cache budget, VT_ATTN_BLOCK_BYTES;
 * else the largest multiple of 16 that fits), and each row block goes scores -> scale (in
 * the GEMM's alpha, or the softmax's, below) -> softmax -> dropout -> weighted sum while
 * its R x N scores are still in cache. The products of each row block run through the
 * packed GEMM microkernel (vt_k.gemm_prefetch with the thread's workspace), each
 * prefetching into L2 what the next one reads first from memory (the next block's q and
 * k during the weighted sum, and so on): a block's operands are too small for the
 * hardware prefetchers to get ahead of the products (kernels/TUNING.md).
 *
 * Memory, chosen by the caller (keep_probs; vt_attention_keep_probs is the model's rule).
 * Keeping: with gradients the op keeps P (B H N rows of attn_ldp floats: N, or N
 * rounded up to 16 on the gemm_bf16 paths) and, with dropout, the keep mask (B H N N
 * bytes) in the arena for backward. Recomputing: it keeps nothing N x N;
 * the backward recomputes, per (b, h) and row block, the block's P (and mask) with the
 * forward's own calls (attn_probs: the same vt_k.gemm shapes, alpha and workspace
 * sizing, the same softmax_rows call, the same rng streams), so the recomputed P and mask
 * are bitwise those of the forward and both modes give bitwise the same results. Cost:
 * per row block one more R x N x hd product and softmax (and, with dropout, the mask's
 * draws again), 7 products instead of 6, and the softmax's exp again. Without gradients nothing N x N is kept either way.
 * Scratch per thread: forward one R x N block (P, then Pd; a kept P is copied out of it
 * with cache-bypassing stores) and, with dropout when not keeping, an R x N byte mask;
 * backward two R x N float blocks (P, and dP which first holds Pd) and, with dropout, an
 * R x N byte mask.
 *
 * Dropout (p = attn_drop, only when t->training and p > 0): one base seed is drawn from
 * t->rng per call, row i of (b, h) draws its keep decisions from the stream
 * vt_rng_derive(base, (s H + h) N + i, 0) with s = vt_tape_sample_key(t, b) (b itself in
 * one process), so the mask depends neither on the thread count, nor on the row
 * blocking, nor on the number of data-parallel ranks. An element is dropped when its uniform draw is < p.
 *
 * Backward per (b, h), per row block r (rows [i0, i0 + R)), with dPd = dout v^T and
 * dP = dPd * mask / (1 - p):
 *   dv += Pd[r]^T dout[r],  dS[r] = P[r] (dP[r] - rowsum(dP[r] P[r])),
 *   dq[r] += scale dS[r] k,  dk += scale dS[r]^T q[r]
 * (with a fresh qkv gradient, tape.h, the first row block's dv and dk and every dq are
 * written instead of added). The row-block sums into dv and dk run in a fixed order:
 * results are deterministic for any thread count. Numerics: those of vt_k.gemm /
 * softmax_rows / softmax_bwd_rows; with t->bf16 (train.precision = bf16) every product
 * is vt_k.gemm_bf16's instead (q, k, v, P, dout and dS rounded to bf16 as they are
 * packed, float32 sums; kernels.h), the softmax, its backward, the scale and the
 * dropout float32. On the fma bf16 path (float32 FMA kernels on rounded operands) the op
 * rounds each block's q, k, v, output gradient, Pd and dS once into per-thread scratch
 * (bf16_round_float) and multiplies them with vt_k.gemm_prefetch: kernels.h makes the fma
 * path's results bitwise the float32 GEMM's on rounded operands, so the bits are the
 * same, while the float32 GEMM reads the N x N operands in place instead of packing and
 * rounding them for every product. When the products run through vt_k.gemm_bf16 (bf16
 * on the amx and dpbf16 paths), the R x N blocks (P, dP, a kept P) have rows of N rounded
 * up to 16 floats, each starting a 64-byte line, and the scores' product has alpha
 * 1 with the scale in the softmax (scale times the sum, the multiplication alpha would
 * be): the AMX kernel then stores its whole C tiles straight into those rows, where a
 * tile with alpha, or rows that straddle lines, goes through a buffer and the vector
 * unit. With the product trace on (trace.h), the forward and the backward are each
 * timed into it. */
#include <omp.h>
#include <stdint.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"
#include "trace.h"

/* Cache budget for one thread's R x N score block: half of a 1 MB L2 (every row block
 * packs all of k and v again, so fewer, larger blocks win; kernels/TUNING.md). */
#define VT_ATTN_BLOCK_BYTES (512 * 1024)
/* B H blocks per hand-out of the loop over them: blocks go to threads as they come free
 * (a host may run one vCPU slower than the other), a few at a time so that each block's
 * prefetch of the next one mostly serves the same thread. */
#define VT_ATTN_CHUNK 4

/* q, k, v (and dq, dk, dv) point at block 0's row 0; block bh starts at in_offset and
 * its rows are ld floats apart: separate tensors (qkv NULL, ld = hd) or the packed qkv
 * (ld = 3 H hd, k and v at + H hd and + 2 H hd). */
typedef struct {
    vt_arena *arena;
    const float *q, *k, *v, *dout;
    float *dq, *dk, *dv;
    int ld;
    const vt_tensor *qkv;        /* vt_op_attention_qkv's input (its gradient may be fresh), else NULL */
    float scale, drop, inv_keep; /* drop: the dropout p, 0 when no dropout */
    uint64_t base;               /* dropout base seed */
    int64_t sample0, sample_stride; /* the tape's global sample keys (vt_tape_sample_key) */
    const float *Pk;             /* kept P (B H N rows, attn_ldp apart), NULL: the backward recomputes */
    const uint8_t *mk;           /* kept mask with dropout, else NULL */
    int BH, H, N, hd;
    int bf16;                    /* products in bf16 (t->bf16) */
    int preround;                /* bf16 on the fma path: operands rounded once, float32 products */
} attn_ctx;

/* Offset of row 0 of block bh in q, k, v and their gradients. */
static size_t in_offset(const attn_ctx *c, int bh) {
    return c->qkv ? (size_t)(bh / c->H) * c->N * c->ld + (size_t)(bh % c->H) * c->hd
                  : (size_t)bh * c->N * c->hd;
}

/* Offset of row i of head bh in the merged (B, N, H hd) output. */
static size_t out_offset(const attn_ctx *c, int bh, int i) {
    return ((size_t)(bh / c->H) * c->N + (size_t)i) * c->H * c->hd + (size_t)(bh % c->H) * c->hd;
}

/* Rows [i0, i0 + r) of block bh of x (c->q, c->k or c->v), and of the output gradient,
 * as gemm_prefetch regions; no_region: nothing to prefetch. */
static const vt_region no_region = {0};
static vt_region in_rows(const attn_ctx *c, const float *x, int bh, int i0, int r) {
    return (vt_region){x + in_offset(c, bh) + (size_t)i0 * c->ld, (size_t)c->ld, r, c->hd};
}
static vt_region dout_rows(const attn_ctx *c, int bh, int i0, int r) {
    return (vt_region){c->dout + out_offset(c, bh, i0), (size_t)c->H * c->hd, r, c->hd};
}

/* All N rows of x (c->q, c->k or c->v) of block nbh when the row block after the current one
 * (nr rows of block nbh) starts a block other than bh, else nothing: under preround what
 * that block reads first (block_operands rounds all its rows at its start). */
static vt_region next_block_rows(const attn_ctx *c, const float *x, int bh, int nbh, int nr) {
    return nr && nbh != bh ? in_rows(c, x, nbh, 0, c->N) : no_region;
}

/* The row block after (bh, i0) in a loop over blocks and their row blocks of R rows:
 * *nbh, *ni0 and its rows; 0 rows after the last block. */
static int next_row_block(const attn_ctx *c, int R, int bh, int i0, int *nbh, int *ni0) {
    *nbh = i0 + R < c->N ? bh : bh + 1;
    *ni0 = i0 + R < c->N ? i0 + R : 0;
    if (*nbh >= c->BH) return 0;
    return c->N - *ni0 < R ? c->N - *ni0 : R;
}

int vt_attention_keep_probs(int N, int hd, int bf16) {
    int fast_products = bf16 && !vt_kernels_on_fma_path(bf16); /* amx, dpbf16 */
    return !fast_products && N <= 4 * hd;
}

int vt_attention_row_block(int N) {
    size_t rows = VT_ATTN_BLOCK_BYTES / ((size_t)N * sizeof(float));
    if (rows >= (size_t)N) return N;
    rows -= rows % 16;
    return rows < 16 ? 16 : (int)rows;
}

/* Whether the products run through vt_k.gemm_bf16 (bf16 on the amx and dpbf16 paths),
 * with P and dP in rows of 64 bytes and the scale in the softmax (see the top of the file). */
static int on_gemm_bf16(const attn_ctx *c) { return c->bf16 && !c->preround; }

int vt_attention_score_ld(int N, int tiles) { return tiles ? (N + 15) / 16 * 16 : N; }

/* Row stride of the R x N blocks P and dP (scratch and kept P). */
static int attn_ldp(const attn_ctx *c) { return vt_attention_score_ld(c->N, on_gemm_bf16(c)); }

/* Packing workspace for every product of a block (rows <= N). */
static size_t attn_work_floats(const attn_ctx *c) {
    int N = c->N, hd = c->hd;
    int b16 = on_gemm_bf16(c);
    size_t a = b16 ? vt_k.gemm_bf16_work_floats(N, N, hd) : vt_k.gemm_work_floats(N, N, hd);
    size_t b = b16 ? vt_k.gemm_bf16_work_floats(N, hd, N) : vt_k.gemm_work_floats(N, hd, N);
    return a > b ? a : b;
}

/* One product of a row block: vt_k.gemm_prefetch, or under bf16 vt_k.gemm_bf16 (which
 * takes the same prefetch hint) unless the operands are rounded already (preround). */
static void attn_gemm(const attn_ctx *c, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                      const float *B, int ldb, float beta, float *C, int ldc, float *work, const vt_region next[2]) {
    if (on_gemm_bf16(c))
        vt_k.gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta, NULL, C, ldc, work, next);
    else vt_k.gemm_prefetch(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, work, next);
}

/* Pd = P * mask * inv_keep for r rows of n (P's and Pd's rows ld floats apart, the
 * mask's n; Pd may equal P). */
static void apply_mask(const float *P, const uint8_t *mask, float inv_keep, float *Pd, int ld, int r, int n) {
    for (int i = 0; i < r; i++)
        for (int j = 0; j < n; j++)
            Pd[(size_t)i * ld + j] = mask[(size_t)i * n + j] ? P[(size_t)i * ld + j] * inv_keep : 0.0f;
}

/* dst (rows x hd, packed) = the rows x hd floats at x (row stride ldx) rounded to bf16
 * (the fma path's operands, rounded once per block). */
static void round_rows(const float *x, size_t ldx, int rows, int hd, float *dst) {
    enum { AHEAD = 8 }; /* rows a whole memory latency ahead: each is only a few lines */
    for (int i = 0; i < rows; i++) {
        if (i + AHEAD < rows)
            for (int j = 0; j < hd; j += 16) __builtin_prefetch(x + (size_t)(i + AHEAD) * ldx + j, 0, 3);
        vt_k.bf16_round_float(x + (size_t)i * ldx, dst + (size_t)i * hd, (size_t)hd);
    }
}

/* The operands of block bh's products: q, k, v (rows la floats apart) and, with_dout,
 * the output gradient (rows ldo apart; else NULL). Under preround they are copies
 * rounded to bf16 in r (the thread's scratch past its GEMM workspace, rounded_floats:
 * q, k, v, dout, N x hd each, rows hd floats apart); else the caller's tensors. */
typedef struct {
    const float *q, *k, *v, *dout;
    int la, ldo;
} attn_operands;

/* Floats of a thread's rounded operands (block_operands; 0 unless preround): q, k, v and,
 * with_dout, the output gradient. */
static size_t rounded_floats(const attn_ctx *c, int with_dout) {
    return c->preround ? (size_t)(3 + with_dout) * c->N * c->hd : 0;
}

static attn_operands block_operands(const attn_ctx *c, int bh, int with_dout, float *r) {
    size_t o = in_offset(c, bh), nh = (size_t)c->N * c->hd;
    attn_operands x = {c->q + o, c->k + o, c->v + o, with_dout ? c->dout + out_offset(c, bh, 0) : NULL, c->ld,
                       c->H * c->hd};
    if (!c->preround) return x;
    round_rows(x.q, (size_t)x.la, c->N, c->hd, r);
    round_rows(x.k, (size_t)x.la, c->N, c->hd, r + nh);
    round_rows(x.v, (size_t)x.la, c->N, c->hd, r + 2 * nh);
    if (with_dout) round_rows(x.dout, (size_t)x.ldo, c->N, c->hd, r + 3 * nh);
    return (attn_operands){r, r + nh, r + 2 * nh, with_dout ? r + 3 * nh : NULL, c->hd, c->hd};
}

/* Rows [i0, i0 + r) of block bh: P (r x N, rows attn_ldp apart) = softmax(scale q k^T) and,
 * when c->drop > 0, mask (r x N) = the keep decisions; q and k: the block's row 0, rows ld
 * floats apart.
 * The forward and the backward both call this, so the backward's P and mask are bitwise
 * the forward's. work: attn_work_floats(c) floats; next: what the caller reads after
 * (prefetched during the product). */
static void attn_probs(const attn_ctx *c, int bh, const float *q, const float *k, int ld, int i0, int r, float *P,
                       uint8_t *mask, float *work, const vt_region next[2]) {
    int N = c->N, hd = c->hd, tiles = on_gemm_bf16(c);
    attn_gemm(c, 0, 1, r, N, hd, tiles ? 1.0f : c->scale, q + (size_t)i0 * ld, ld, k, ld, 0.0f, P, attn_ldp(c),
              work, next);
    vt_k.softmax_rows(P, P, r, N, attn_ldp(c), tiles ? c->scale : 1.0f);
    if (c->drop == 0.0f) return;
    uint64_t gbh = (uint64_t)(c->sample0 + (int64_t)(bh / c->H) * c->sample_stride) * c->H + bh % c->H;
    for (int i = 0; i < r; i++) {
        vt_rng rg;
        vt_rng_seed(&rg, vt_rng_derive(c->base, gbh * N + i0 + i, 0));
        for (int j = 0; j < N; j++) mask[(size_t)i * N + j] = (uint8_t)(vt_rng_uniform(&rg) >= c->drop);
    }
}

/* Into the trace (trace.h): the forward's or backward's wall time since t0 and its products'
 * flops (2 products forward, 4 backward, of 2 N^2 hd each per block). */
static void trace_attention(const attn_ctx *c, vt_trace_kind kind, double t0) {
    double products = kind == VT_TRACE_ATTENTION_FWD ? 2.0 : 4.0;
    vt_trace_add(&(vt_trace_call){.kind = kind, .M = c->BH, .N = c->N, .K = c->hd,
                                  .flops = products * 2.0 * c->BH * (double)c->N * c->N * c->hd,
                                  .seconds = vt_trace_now() - t0});
}

static void attention_bwd(void *p) {
    attn_ctx *c = p;
    int traced = vt_trace_active();
    double t0 = traced ? vt_trace_now() : 0.0;
    int N = c->N, hd = c->hd, R = vt_attention_row_block(N), ld = c->ld, ldp = attn_ldp(c);
    size_t rn = (size_t)R * ldp, nn = (size_t)N * N, np = (size_t)N * ldp;
    /* a fresh qkv gradient: every dq row written once, dk and dv by the first row block */
    int fresh = c->qkv && vt_tape_grad_fresh(c->qkv);
    int nt = omp_get_max_threads();
    /* Per thread: P and dP (R x N floats each, rows ldp apart); then, with dropout, nt
     * masks of R x N bytes (rn apart). */
    float *scratch = vt_arena_alloc(c->arena, (size_t)nt * rn * (2 * sizeof(float) + (c->drop > 0.0f)));
    uint8_t *masks = (uint8_t *)(scratch + (size_t)nt * 2 * rn);
    size_t wf = attn_work_floats(c);
    #pragma omp parallel for schedule(dynamic, VT_ATTN_CHUNK)
    for (int bh = 0; bh < c->BH; bh++) {
        int tid = omp_get_thread_num();
        float *P = scratch + (size_t)tid * 2 * rn, *dP = P + rn;
        uint8_t *mask = c->drop > 0.0f ? masks + (size_t)tid * rn : NULL;
        /* the GEMM workspace, then (preround) the block's rounded operands */
        float *work = vt_gemm_workspace(wf + rounded_floats(c, 1));
        size_t o = in_offset(c, bh);
        float *dq = c->dq ? c->dq + o : NULL, *dk = c->dk ? c->dk + o : NULL, *dv = c->dv ? c->dv + o : NULL;
        const attn_operands x = block_operands(c, bh, 1, work + wf);
        const float *q = x.q, *k = x.k, *v = x.v;
        const int la = x.la, ldo = x.ldo;
        for (int i0 = 0; i0 < N; i0 += R) {
            int r = N - i0 < R ? N - i0 : R;
            size_t rnb = (size_t)r * N;
            const float *dout = x.dout + (size_t)i0 * ldo;
            /* Each product prefetches what the next ones read first: v and k (read whole,
             * by the first row block), this row block's q rows, then the next row block's
             * kept P rows (or q rows, and k of a new block) and its output gradient. Under
             * preround the block's q, k and v were read whole at its start (rounded), so
             * the first two prefetch the next block's v, k and q instead, which its start
             * reads. */
            int nbh, ni0, nr = next_row_block(c, R, bh, i0, &nbh, &ni0);
            const vt_region whole_v = i0 == 0 ? in_rows(c, c->v, bh, 0, N) : no_region;
            const vt_region whole_k = i0 == 0 ? in_rows(c, c->k, bh, 0, N) : no_region;
            const vt_region next_dv[2] = {c->preround ? next_block_rows(c, c->v, bh, nbh, nr) : whole_v, no_region};
            const vt_region next_dp[2] = {c->preround ? next_block_rows(c, c->k, bh, nbh, nr) : whole_k,
                                          c->preround ? next_block_rows(c, c->q, bh, nbh, nr)
                                                      : in_rows(c, c->q, bh, i0, r)};
            const vt_region next_dq[2] = {
                !nr     ? no_region
                : c->Pk ? (vt_region){c->Pk + nbh * np + (size_t)ni0 * ldp, (size_t)ldp, nr, N}
                        : in_rows(c, c->q, nbh, ni0, nr),
                nr && !c->Pk && nbh != bh ? in_rows(c, c->k, nbh, 0, N) : no_region};
            const vt_region next_dk[2] = {nr ? dout_rows(c, nbh, ni0, nr) : no_region, no_region};
            const float *Pb = P; /* this row block's P (rows ldp apart) and mask: kept, or recomputed */
            const uint8_t *mb = mask;
            if (c->Pk) {
                Pb = c->Pk + bh * np + (size_t)i0 * ldp;
                mb = c->mk ? c->mk + bh * nn + (size_t)i0 * N : NULL;
            } else {
                attn_probs(c, bh, q, k, la, i0, r, P, mask, work, (vt_region[2]){dout_rows(c, bh, i0, r), no_region});
            }
            float first = fresh && i0 == 0 ? 0.0f : 1.0f; /* beta of the sums over row blocks */
            if (dv) {
                const float *pd = Pb; /* Pd: with dropout or rounded, in dP (P stays for the softmax's backward) */
                if (mb) {
                    apply_mask(Pb, mb, c->inv_keep, dP, ldp, r, N);
                    pd = dP;
                }
                if (c->preround) { /* ldp == N */
                    vt_k.bf16_round_float(pd, dP, rnb);
                    pd = dP;
                }
                attn_gemm(c, 1, 0, N, hd, r, 1.0f, pd, ldp, dout, ldo, first, dv, ld, work, next_dv);
            }
            if (!dq && !dk) continue;
            attn_gemm(c, 0, 1, r, N, hd, 1.0f, dout, ldo, v, la, 0.0f, dP, ldp, work, next_dp);
            if (mb) apply_mask(dP, mb, c->inv_keep, dP, ldp, r, N);
            vt_k.softmax_bwd_rows(Pb, dP, dP, r, N, ldp);
            if (c->preround) vt_k.bf16_round_float(dP, dP, rnb); /* dS */
            if (dq)
                attn_gemm(c, 0, 0, r, hd, N, c->scale, dP, ldp, k, la, fresh ? 0.0f : 1.0f, dq + (size_t)i0 * ld, ld,
                          work, next_dq);
            if (dk)
                attn_gemm(c, 1, 0, N, hd, r, c->scale, dP, ldp, q + (size_t)i0 * la, la, first, dk, ld, work, next_dk);
        }
    }
    if (traced) trace_attention(c, VT_TRACE_ATTENTION_BWD, t0);
}

/* The forward of both ops: c holds the inputs, their gradients (NULL: none), layout,
 * scale and sizes; the rest is filled here. g: whether the inputs want gradients. */
static vt_tensor *attention(vt_tape *t, attn_ctx c, int B, int g, float attn_drop, int keep_probs) {
    VT_ASSERT(attn_drop >= 0.0f && attn_drop < 1.0f, "attention: dropout %g not in [0, 1)", attn_drop);
    int traced = vt_trace_active();
    double t0 = traced ? vt_trace_now() : 0.0;
    int H = c.H, BH = c.BH, N = c.N, hd = c.hd;
    int R = vt_attention_row_block(N);
    vt_tensor *out = vt_tape_new(t, g, 3, (const int64_t[]){B, N, (int64_t)H * hd});
    int drop = t->training && attn_drop > 0.0f;
    c.arena = t->arena;
    c.bf16 = t->bf16;
    c.preround = vt_kernels_on_fma_path(t->bf16);
    const int ldp = attn_ldp(&c);
    const size_t rn = (size_t)R * ldp;
    c.dout = out->grad;
    c.drop = drop ? attn_drop : 0.0f;
    c.inv_keep = drop ? 1.0f / (1.0f - attn_drop) : 1.0f;
    if (drop) {
        VT_ASSERT(t->rng != NULL, "attention: dropout in training needs t->rng");
        c.base = vt_rng_u64(t->rng);
        c.sample0 = t->sample0;
        c.sample_stride = t->sample_stride;
    }
    size_t nn = (size_t)N * N, np = (size_t)N * ldp;
    float *Pk = g && keep_probs ? vt_arena_alloc(t->arena, (size_t)BH * np * sizeof(float)) : NULL;
    uint8_t *mk = Pk && drop ? vt_arena_alloc(t->arena, (size_t)BH * nn) : NULL;
    c.Pk = Pk;
    c.mk = mk;
    int nt = omp_get_max_threads();
    /* Per thread one R x N float block (rows ldp apart): P, then Pd (dropout applied) over
     * it; then, with dropout, nt masks of R x N bytes, rn apart (used when not keeping). */
    float *scratch = vt_arena_alloc(t->arena, (size_t)nt * rn * (sizeof(float) + drop));
    uint8_t *masks = (uint8_t *)(scratch + (size_t)nt * rn);
    size_t wf = attn_work_floats(&c);
    float *od = out->data;
    #pragma omp parallel for schedule(dynamic, VT_ATTN_CHUNK)
    for (int bh = 0; bh < BH; bh++) {
        int tid = omp_get_thread_num();
        /* the GEMM workspace, then (preround) the block's rounded operands */
        float *Pd = scratch + (size_t)tid * rn, *work = vt_gemm_workspace(wf + rounded_floats(&c, 0));
        const attn_operands x = block_operands(&c, bh, 0, work + wf);
        for (int i0 = 0; i0 < N; i0 += R) {
            int r = N - i0 < R ? N - i0 : R;
            uint8_t *mask = !drop ? NULL : mk ? mk + bh * nn + (size_t)i0 * N : masks + (size_t)tid * rn;
            /* the scores' product prefetches v (read whole by the first row block; under
             * preround, read and rounded at the block's start, the next block's v), the
             * weighted sum the next row block's q rows and k of a new block */
            int nbh, ni0, nr = next_row_block(&c, R, bh, i0, &nbh, &ni0);
            const vt_region next_v = c.preround ? next_block_rows(&c, c.v, bh, nbh, nr)
                                     : i0 == 0  ? in_rows(&c, c.v, bh, 0, N)
                                                : no_region;
            /* P into the thread's scratch, in cache for the product below; a kept P is
             * streamed from there to the arena (written in place there, the scores'
             * product waited on every line of it coming from memory) */
            attn_probs(&c, bh, x.q, x.k, x.la, i0, r, Pd, mask, work,
                       (vt_region[2]){next_v, no_region});
            if (Pk) vt_k.copy_stream(Pd, Pk + bh * np + (size_t)i0 * ldp, (size_t)r * ldp);
            if (mask) apply_mask(Pd, mask, c.inv_keep, Pd, ldp, r, N);
            if (c.preround) vt_k.bf16_round_float(Pd, Pd, (size_t)r * N); /* ldp == N */
            attn_gemm(&c, 0, 0, r, hd, N, 1.0f, Pd, ldp, x.v, x.la, 0.0f, od + out_offset(&c, bh, i0),
                      H * hd, work,
                      (vt_region[2]){nr ? in_rows(&c, c.q, nbh, ni0, nr) : no_region,
                                     nr && nbh != bh ? in_rows(&c, c.k, nbh, 0, N) : no_region});
        }
    }
    if (g) {
        attn_ctx *cb = vt_tape_ctx(t, sizeof *cb);
        *cb = c;
        vt_tape_record(t, "attention", attention_bwd, cb);
    }
    if (traced) trace_attention(&c, VT_TRACE_ATTENTION_FWD, t0);
    return out;
}

vt_tensor *vt_op_attention(vt_tape *t, vt_tensor *q, vt_tensor *k, vt_tensor *v,
                           float scale, float attn_drop, int keep_probs) {
    VT_ASSERT(q->ndim == 4 && vt_same_shape(q, k) && vt_same_shape(q, v),
              "attention: q, k, v must all be (B, H, N, hd)");
    int H = (int)q->shape[1], N = (int)q->shape[2], hd = (int)q->shape[3];
    attn_ctx c = {.q = q->data, .k = k->data, .v = v->data, .dq = q->grad, .dk = k->grad, .dv = v->grad,
                  .ld = hd, .scale = scale, .BH = (int)q->shape[0] * H, .H = H, .N = N, .hd = hd};
    return attention(t, c, (int)q->shape[0], vt_tape_wants_grad(t, q, k, v), attn_drop, keep_probs);
}

vt_tensor *vt_op_attention_qkv(vt_tape *t, vt_tensor *qkv, int H, float scale, float attn_drop,
                               int keep_probs) {
    char sb[64];
    VT_ASSERT(qkv->ndim == 3 && H > 0 && qkv->shape[2] > 0 && qkv->shape[2] % (3 * H) == 0,
              "attention_qkv: qkv %s must be (B, N, 3 H hd) with H = %d heads", vt_shape_str(qkv, sb, sizeof sb),
              H);
    int D = (int)(qkv->shape[2] / 3), N = (int)qkv->shape[1];
    float *gq = qkv->grad;
    attn_ctx c = {.q = qkv->data, .k = qkv->data + D, .v = qkv->data + 2 * D,
                  .dq = gq, .dk = gq ? gq + D : NULL, .dv = gq ? gq + 2 * D : NULL,
                  .ld = 3 * D, .qkv = qkv, .scale = scale, .BH = (int)qkv->shape[0] * H, .H = H,
                  .N = N, .hd = D / H};
    if (gq) vt_tape_can_overwrite(qkv);
    return attention(t, c, (int)qkv->shape[0], vt_tape_wants_grad(t, qkv, NULL, NULL), attn_drop, keep_probs);
}
