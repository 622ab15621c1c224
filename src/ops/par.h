/* par.h - the parallel loops on raw arrays that the ops share (their arithmetic without
 * the tape): the threaded GEMMs, fixed-chunk column sums, GELU, LayerNorm and linear
 * passes. None records anything; each is deterministic for a fixed thread count, most
 * for any (as each says). The ops (ops.h, vt_op_*) and the PE ops (src/pe/) call them.
 */
#ifndef VT_OPS_PAR_H
#define VT_OPS_PAR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "tape.h"
#include "tensor.h"

/* Loops over fewer elements than this run on one thread (an OpenMP if clause): below it
 * starting the team costs more than the work. */
#define VT_PAR_MIN 16384
/* Loops doing fewer multiply-adds than this run on one thread, for the same reason. */
#define VT_PAR_MIN_WORK 65536

/* Threaded GEMM (same contract as vt_k.gemm; splits C over OpenMP threads, each with
 * its own packing workspace). Not an op: no tape. For use inside ops. */
void vt_gemm(int ta, int tb, int M, int N, int K, float alpha,
             const float *A, int lda, const float *B, int ldb,
             float beta, float *C, int ldc);
/* The same with bias (N floats, NULL: none) added to every row of C last (vt_k.gemm_bias:
 * on a C split bitwise vt_gemm followed by adding bias to each row). */
void vt_gemm_bias(int ta, int tb, int M, int N, int K, float alpha,
                  const float *A, int lda, const float *B, int ldb,
                  float beta, const float *bias, float *C, int ldc);
/* vt_gemm_bias in the precision bf16 says: 0, float32 (vt_k.gemm_bias); 1, operands
 * rounded to bf16, float32 sums (vt_k.gemm_bf16, kernels.h: bf16 numerics), op(B) read
 * from B16 (its bf16 copy: the same values) when that is not NULL. */
void vt_gemm_prec(int bf16, int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, const uint16_t *B16, int ldb, float beta, const float *bias, float *C, int ldc);

/* A weight gradient and its bias gradient in one pass over dY: vt_gemm_prec(bf16, 1, 0, M,
 * N, K, 1, A, lda, B, NULL, ldb, 1, NULL, C, ldc) (C += A^T B; A K x M, B K x N as
 * stored) that also adds A's column sums into sums (M floats), bitwise what
 * vt_par_colsum_acc(arena, A, NULL, K, M, sums) adds when lda == M, for any thread count.
 * The kernel sums each block of A right after packing it, while it is in cache (a
 * separate pass would read dY from memory again). C's sums are fixed for a fixed thread
 * count (the K split cuts at chunk edges); on one thread they are vt_gemm_prec's bits.
 * Partials from the arena. */
void vt_gemm_prec_wgrad(vt_arena *arena, int bf16, int M, int N, int K, const float *A, int lda, const float *B,
                        int ldb, float *C, int ldc, float *sums);

/* The calling thread's GEMM packing workspace: at least `floats` floats, 64-byte
 * aligned. Thread-local, allocated on first use and grown only when a larger request
 * comes, so the step loop does not malloc after warm-up. For ops that call vt_k.gemm
 * directly inside their own OpenMP loops (attention, batched matmul). */
float *vt_gemm_workspace(size_t floats);

/* Every OpenMP thread's GEMM buffers allocated now at their largest: the packing
 * workspace any product needs under the current blocking and bf16 path, and, with more
 * than one thread, on the calling thread the K split's partial Cs of partial_floats each
 * (it serves the weight gradients: their largest size; one per range of K past the first)
 * and the packed op(B) its products cut over rows share, of operand_floats (an op(B) of
 * that many elements, a weight or a weight gradient's input, packed: in float32 a block
 * of it, at most as many floats but for its last panel's padding; about half as many in
 * bf16). A step's
 * products then allocate nothing; one that still needs more grows its buffer, and a
 * failure there is vt_out_of_memory's (for the shared packing: the blocks pack op(B)
 * each, as one thread does). Call outside parallel regions, after the
 * blocking is set (vt_gemm_context_set), again after it changes. Errors: out of memory
 * (VT_ERR_RUNTIME naming the buffers, their size and the thread count). */
vt_status vt_gemm_reserve(size_t partial_floats, size_t operand_floats);
/* The floats of the packed op(B) (K x N, op(A) as stored) that the threads of a product
 * of this precision cut over rows share: a block of it on the float32 kernels (float32,
 * and bf16 on the fma path), all of it on the bf16 tile paths; 0 when each row block
 * packs its own (for footprint estimates; ops/gemm.c decides). */
size_t vt_gemm_row_cut_b_floats(int bf16, int N, int K);
/* The floats of partial sums vt_gemm_prec_wgrad(.., bf16, M, N, K, ..) writes on threads
 * threads: its K split's partial Cs, 0 when it does not cut over K (for memory
 * estimates; the current bf16 path decides a bf16 product's cut). */
size_t vt_gemm_wgrad_partial_floats(int bf16, int M, int N, int K, int threads);

/* For each of the outer rows o: y[o] = x[o] + z (z NULL: y[o] += x[o], or with copy
 * y[o] = x[o]), rows of inner floats, z one row; y may be x. Work items are (row, chunk)
 * pairs, so a single large row (outer 1) runs on every thread too. Elementwise: the
 * results do not depend on the thread count. */
void vt_par_rows_add(const float *x, const float *z, float *y, int copy, int64_t outer, int64_t inner);

/* out[c] += sum_r x[r, c] (y == NULL) or sum_r x[r, c] y[r, c], x/y rows x cols.
 * The rows are cut into a fixed number of chunks (independent of the thread count),
 * each chunk summed in float into a partial from the arena, the partials added in
 * chunk order: the result is bitwise reproducible for any thread count. */
void vt_par_colsum_acc(vt_arena *arena, const float *x, const float *y,
                       int64_t rows, int64_t cols, float *out);

/* vt_par_colsum_acc's two steps, for a caller that sums the chunks itself (the weight
 * gradient's product, vt_gemm_prec_wgrad): _chunk adds rows [r0, r1) of x (times y's)
 * into the partial p, row after row; _finish adds the nc partials (nc x cols, chunk c's
 * at part + c cols) into out in chunk order. */
void vt_par_colsum_chunk(const float *x, const float *y, int64_t r0, int64_t r1, int64_t cols, float *p);
void vt_par_colsum_finish(const float *part, int nc, int64_t cols, float *out);

/* Row chunking used by vt_par_colsum_acc and the layernorm backward:
 * n chunks of rows (n <= VT_PAR_MAX_CHUNKS), chunk c is [begin(c), begin(c + 1)). */
#define VT_PAR_MAX_CHUNKS 32
int vt_par_nchunks(int64_t rows);
int64_t vt_par_chunk_begin(int64_t rows, int nchunks, int c);

/* The GELU kernels over n floats in fixed chunks, in parallel (vt_op_gelu's forward and
 * backward): _fwd y = gelu(x) (vt_k.gelu_fwd); _bwd dx += dy gelu'(x) (vt_k.gelu_bwd);
 * _bwd_fwd (vt_k.gelu_bwd_fwd) dx += g gelu'(x) (add 0: dx = that), then g = gelu(x) (g
 * holds dy on entry), bitwise _bwd(x, g, dx, n) followed by _fwd(x, g, n). Elementwise:
 * the results do not depend on the thread count. */
void vt_par_gelu_fwd(const float *x, float *y, int64_t n);
void vt_par_gelu_bwd(const float *x, const float *dy, float *dx, int64_t n);
void vt_par_gelu_bwd_fwd(const float *x, float *g, float *dx, int64_t n, int add);

/* vt_op_layernorm's arithmetic on rows x D, over fixed row chunks in parallel (the
 * chunking of vt_par_nchunks). _fwd: y = LayerNorm(x; g, b, eps) per row (vt_k.layernorm_fwd),
 * writing each row's mean and rstd (rows floats each); per row, so the result does not
 * depend on the thread count and a second call on the same inputs writes the same bits.
 * _bwd (vt_k.layernorm_bwd) from dy (rows x D): dx += the input gradient (dx NULL: the
 * kernel writes it into a zeroed rows x D arena buffer, unused after); dg, db += their
 * column sums (per-chunk partials from arena, added in chunk order), skipped when NULL. */
void vt_par_layernorm_fwd(const float *x, const float *g, const float *b, float *y, float *mean, float *rstd,
                          int64_t rows, int D, float eps);
void vt_par_layernorm_bwd(vt_arena *arena, const float *x, const float *g, const float *mean,
                          const float *rstd, const float *dy, float *dx, float *dg, float *db,
                          int64_t rows, int D);

/* A weight as a linear layer's GEMMs read it: its float32 data, the precision of the
 * step (t->bf16) and, under bf16, the weight's bf16 copy (NULL: rounded when packed). */
typedef struct {
    const float *w;
    const uint16_t *w16;
    int bf16;
} vt_linear_weight;
static inline vt_linear_weight vt_linear_weight_of(const vt_tape *t, const vt_tensor *w) {
    return (vt_linear_weight){w->data, t->bf16 ? w->bf16 : NULL, t->bf16};
}

/* vt_op_linear's arithmetic on M rows, every GEMM in w's precision. _shape: asserts x
 * (..., Din), w (Dout, Din), b (Dout) or NULL (messages start with op), writes y's shape
 * (x's, last dim Dout) and returns M. _fwd: y = x W^T + b (b may be NULL). _bwd, each
 * part skipped when its output is NULL, in this order: dW += dy^T x; db += column sums
 * of dy (partials from arena); dx = dy W + dx_beta dx (1 accumulates, 0 overwrites
 * without reading dx). dx is written last, so it may alias x. */
int vt_par_linear_shape(const char *op, const vt_tensor *x, const vt_tensor *w, const vt_tensor *b,
                        int64_t *shape);
void vt_par_linear_fwd(const float *x, vt_linear_weight w, const float *b, float *y, int M, int Din, int Dout);
void vt_par_linear_bwd(vt_arena *arena, const float *x, vt_linear_weight w, const float *dy, float *dx,
                       float dx_beta, float *dw, float *db, int M, int Din, int Dout);
/* vt_op_drop_path's per-sample factors for a training call of rate p over B samples (0,
 * or 1 / (1 - p) for the kept ones), drawn as it draws them (one base seed from t->rng),
 * into the arena. */
float *vt_par_drop_path_factors(vt_tape *t, int64_t B, float p);

/* The fused residual adds (vt_op_linear_add, vt_op_gelu_linear_add) over a branch whose
 * product op already wrote y. _check aborts naming op unless r is shaped (ndim, shape).
 * _fwd: y = r + y, or, when t trains and p > 0, y = r + y * factor[b] on each sample b
 * (leading dim) with vt_par_drop_path_factors' factors (returned; NULL without a drop
 * path): vt_op_add(r, vt_op_drop_path(y, p))'s bits. _bwd: vt_op_add's backward for r
 * (r->grad += dy, or = dy when fresh; nothing when r's gradient is NULL), then,
 * with factors, vt_op_drop_path's for the branch in place over dy (dy[b] = 0 + dy[b]
 * factor[b], +0 for a dropped sample: the bits of the unfused pair's zeroed gradient):
 * dy, y's gradient, is the branch's own once y's consumers have run. */
void vt_par_residual_check(const char *op, const vt_tensor *r, int ndim, const int64_t *shape);
float *vt_par_residual_fwd(vt_tape *t, vt_tensor *y, const vt_tensor *r, float p);
void vt_par_residual_bwd(float *dy, const vt_tensor *r, const float *factor);

#endif
