/* ops.h - the differentiable ops (vt_op_*). One file per op under src/ops/ holds its
 * forward, its backward and its tape record; tests/test_ops_grad.c checks each backward
 * against central differences. Their arithmetic on raw arrays, where ops share it, is
 * par.h's (vt_par_*, vt_gemm*): loops that record nothing. The ops only the rotary PE
 * kinds use (angles, cos/sin, pair rotation, per-head matrices, the fused q/k split and
 * fold, Cayley) live beside them, in src/pe/rotary.h; test_ops_grad checks them the same.
 *
 * Every op: takes the tape (arena, training flag, grad switch), validates shapes
 * with VT_ASSERT (a shape mismatch is a bug), returns a new tensor from the arena.
 * The output has a grad buffer iff the tape has gradients enabled and some input
 * has one; then one backward is recorded that ACCUMULATES into every input grad
 * that is non-NULL. OpenMP parallelism is over the dimension an op writes; results
 * are deterministic for a fixed thread count. Heavy math goes through vt_k (kernels.h).
 *
 * Shape letters: B batch, N tokens, D width, H heads, hd head dim, K classes, P patch.
 */
#ifndef VT_OPS_H
#define VT_OPS_H

#include "rng.h"
#include "tape.h"
#include "tensor.h"

/* y = x W^T + b. x (..., Din), w (Dout, Din) (torch nn.Linear layout), b (Dout) or NULL.
 * y (..., Dout). */
vt_tensor *vt_op_linear(vt_tape *t, vt_tensor *x, vt_tensor *w, vt_tensor *b);

/* y = r + drop_path(x W^T + b, drop_path), r shaped like y: bitwise
 * vt_op_add(t, r, vt_op_drop_path(t, vt_op_linear(t, x, w, b), drop_path)) (values, every
 * gradient and the draws from t->rng), with the sum made in place over the product: no
 * (..., Dout) tensors for the product and its drop path or their gradients, and fewer
 * passes each way. A pre-norm block's residual branch. */
vt_tensor *vt_op_linear_add(vt_tape *t, vt_tensor *x, vt_tensor *w, vt_tensor *b, float drop_path, vt_tensor *r);

/* y = gelu(u) W^T + b (exact-erf GELU, then nn.Linear): the same values as
 * vt_op_linear(t, vt_op_gelu(t, u), w, b) but keeps only u for backward; gelu(u) lives
 * in the tape scratch (vt_tape_scratch) while the forward runs and is recomputed there
 * by the backward. u (..., Din), w (Dout, Din), b (Dout) or NULL -> y (..., Dout).
 * Output and the gradients of u, w, b are bitwise those of the unfused pair for the
 * same thread count. Memory: y and its gradient only; the pair also keeps gelu(u) and
 * a gradient buffer of its size, (..., Din) each. */
vt_tensor *vt_op_gelu_linear(vt_tape *t, vt_tensor *u, vt_tensor *w, vt_tensor *b);
/* r + drop_path(gelu(u) W^T + b, drop_path): vt_op_gelu_linear with the residual added in
 * place, as vt_op_linear_add does for vt_op_linear (bitwise vt_op_add(t, r,
 * vt_op_drop_path(t, vt_op_gelu_linear(t, u, w, b), drop_path))). */
vt_tensor *vt_op_gelu_linear_add(vt_tape *t, vt_tensor *u, vt_tensor *w, vt_tensor *b, float drop_path,
                                 vt_tensor *r);

/* y = LayerNorm(x; g, beta, eps) W^T + b: the same values as
 * vt_op_linear(t, vt_op_layernorm(t, x, g, beta, eps), w, b) but h = LayerNorm(x) is not
 * kept: it lives in the tape scratch (vt_tape_scratch) while the forward runs and is
 * recomputed there by the backward. x (..., D), g (D), beta (D), w (Dout, D), b (Dout) or
 * NULL -> y (..., Dout). Output and the gradients of x, g, beta, w, b are bitwise those
 * of the unfused pair for the same thread count. Memory: y, its gradient and the
 * per-row mean/rstd; the pair also keeps h and a gradient buffer of its size, (..., D)
 * each (src/ops/layernorm_linear.c). */
vt_tensor *vt_op_layernorm_linear(vt_tape *t, vt_tensor *x, vt_tensor *g, vt_tensor *beta, float eps,
                                  vt_tensor *w, vt_tensor *b);

/* Batched matmul: c[i] = op(a[i]) op(b[i]) for i < Bt. a (Bt, M, K) or (Bt, K, M) when
 * ta; b (Bt, K, N) or (Bt, N, K) when tb. c (Bt, M, N). 3-D inputs. */
vt_tensor *vt_op_matmul(vt_tape *t, vt_tensor *a, vt_tensor *b, int ta, int tb);

/* y = a + b. b has a's shape, or broadcasts over a's leading dims: b's shape equals
 * a's trailing dims after dropping leading 1s (e.g. a (B, N, D), b (1, N, D) or (D)). */
vt_tensor *vt_op_add(vt_tape *t, vt_tensor *a, vt_tensor *b);

/* y = x * gamma, gamma (D) broadcast over the last dim of x (LayerScale). */
vt_tensor *vt_op_mul_channels(vt_tape *t, vt_tensor *x, vt_tensor *gamma);

/* LayerNorm over the last dim D: x (..., D), g (D), b (D). */
vt_tensor *vt_op_layernorm(vt_tape *t, vt_tensor *x, vt_tensor *g, vt_tensor *b, float eps);

/* Exact-erf GELU, elementwise. */
vt_tensor *vt_op_gelu(vt_tape *t, vt_tensor *x);

/* Softmax over the last dim. */
vt_tensor *vt_op_softmax(vt_tape *t, vt_tensor *x);

/* qkv (B, N, 3D) from the fused projection (rows q, k, v; head h at [h hd, (h+1) hd)
 * within each) -> q, k, v each (B, H, N, hd), contiguous. */
void vt_op_split_heads(vt_tape *t, vt_tensor *qkv, int H,
                       vt_tensor **q, vt_tensor **k, vt_tensor **v);

/* x (B, H, N, hd) -> (B, N, H*hd). */
vt_tensor *vt_op_merge_heads(vt_tape *t, vt_tensor *x);

/* Fused softmax attention per (batch, head): out = softmax(q k^T * scale) v with
 * dropout p on the probabilities when t->training (p = 0: none).
 * q, k, v (B, H, N, hd) -> out (B, N, H hd), heads merged as vt_op_merge_heads lays
 * them out (written there directly: no merge copy). scale = 1/sqrt(hd) is the caller's.
 * keep_probs 1: with gradients the probabilities (B H N N floats, and the dropout mask)
 * are kept for backward; 0: nothing N x N is kept and the backward recomputes them,
 * bitwise the same, for one more product and softmax per row block (src/ops/attention.c). */
vt_tensor *vt_op_attention(vt_tape *t, vt_tensor *q, vt_tensor *k, vt_tensor *v,
                           float scale, float attn_drop, int keep_probs);
/* The same attention on the fused projection's output read in place: qkv (B, N, 3 H hd)
 * as vt_op_split_heads lays it out (q, k, v, head h at [h hd, (h + 1) hd) within each),
 * its gradient accumulated there. Bitwise vt_op_split_heads followed by vt_op_attention
 * (same products on the same values), without the split's copy, its backward's adds
 * and the q, k, v tensors; for position encodings that leave q and k as they are. */
vt_tensor *vt_op_attention_qkv(vt_tape *t, vt_tensor *qkv, int H, float scale, float attn_drop,
                               int keep_probs);
/* The model's rule for keep_probs: in float32 keep when N <= 4 hd, i.e. when the
 * probabilities (H N floats per token) cost at most 4 D per token, no more than the MLP's
 * hidden activation; longer sequences (785 tokens at hd 64: 12 D per token) recompute.
 * Under bf16 (train.precision) on the amx and dpbf16 paths recompute always: the products
 * run at twice the rate or more, so recomputing costs less than moving the kept
 * probabilities through memory, and the memory they would take pays for the weights' bf16
 * copies. On the fma path (the float32 kernels on rounded operands) the products run at
 * the float32 rate, so bf16 keeps what float32 keeps, and it has no weight copies to pay
 * for (precision.h). Reads the bf16 path in the kernel table (vt_precision_select's). */
int vt_attention_keep_probs(int N, int hd, int bf16);

/* Query rows per row block of the fused attention for N tokens: N when one N x N score
 * block fits the per-thread cache budget, else fewer (a multiple of 16, at least 16). */
int vt_attention_row_block(int N);
/* Row stride of attention's N-column score blocks (P, dP) for N tokens: N, or N rounded
 * up to 16 floats (64-byte rows) when the products run through vt_k.gemm_bf16 (tiles:
 * bf16 on the amx and dpbf16 paths), as the tiles store whole rows. */
int vt_attention_score_ld(int N, int tiles);

/* Performer (FAVOR+) linear attention (src/ops/performer.c; position-encodings.md
 * section 3). Feature kernel: positive (exp features) or relu. */
typedef enum { VT_PERFORMER_POSITIVE = 0, VT_PERFORMER_RELU = 1 } vt_performer_kernel;
#define VT_PERFORMER_EPS 1e-4f
typedef struct {
    vt_performer_kernel kernel;
    float eps;              /* VT_PERFORMER_EPS in the model */
    float q_shift, k_shift; /* added to the query / key stabilisers; 0 in the model (tests) */
} vt_performer_opts;

/* out = D^(-1) phi(q) (phi(k)^T v), D = diag(phi(q) phi(k)^T 1), per (batch, head).
 * q, k, v (B, H, N, hd) -> out (B, H, N, hd); w (H, m, hd) this layer's fixed random
 * features (no gradient). opts NULL: positive kernel, eps VT_PERFORMER_EPS, no shifts.
 * O(N m hd) time, O(N m) memory per (b, h); backward exact for fixed features. */
vt_tensor *vt_op_performer(vt_tape *t, vt_tensor *q, vt_tensor *k, vt_tensor *v, const float *w, int m,
                           const vt_performer_opts *opts);

/* The feature map of n rows x (n, hd) with features w (m, hd) -> phi (n, m) (not an op).
 * shared = 0: per-row stabilisers (queries), written to stab[0..n); shared = 1: one
 * stabiliser for all rows (keys), written to stab[0]; shift is added to it; stab may be
 * NULL; relu ignores shift and writes 0. work: vt_performer_work_floats(n, m, hd) floats
 * (a vt_gemm_workspace). */
void vt_performer_phi(const float *x, int n, int hd, const float *w, int m, vt_performer_kernel kernel,
                      int shared, float eps, float shift, float *phi, float *stab, float *work);
size_t vt_performer_work_floats(int n, int m, int hd);

/* Patch embedding, a P x P stride-P convolution: img (B, C, Hi, Wi) with P | Hi, Wi;
 * w (D, C, P, P), b (D) or NULL -> (B, (Hi/P)(Wi/P), D), patches row-major (x fastest). */
vt_tensor *vt_op_patch_embed(vt_tape *t, vt_tensor *img, vt_tensor *w, vt_tensor *b, int P);

/* Prepend the class token: cls (1, 1, D), x (B, Np, D) -> (B, 1 + Np, D). */
vt_tensor *vt_op_cat_cls(vt_tape *t, vt_tensor *cls, vt_tensor *x);

/* Token select: x (B, N, D) -> (B, D), row `index` of each sample. */
vt_tensor *vt_op_select_token(vt_tape *t, vt_tensor *x, int index);

/* Mean over tokens [start, N): x (B, N, D) -> (B, D). */
vt_tensor *vt_op_mean_tokens(vt_tape *t, vt_tensor *x, int start);

/* Inverted dropout: when t->training and p > 0, zero each element with probability p
 * (mask from t->rng) and scale survivors by 1/(1-p); otherwise y = x (a copy-free
 * identity: returns x itself). */
vt_tensor *vt_op_dropout(vt_tape *t, vt_tensor *x, float p);

/* Drop-path (stochastic depth) on a residual branch: when training and p > 0, each
 * sample (leading dim) is zeroed with probability p, survivors scaled by 1/(1-p)
 * (timm drop_path, scale_by_keep). Otherwise returns x itself. */
vt_tensor *vt_op_drop_path(vt_tape *t, vt_tensor *x, float p);

/* Mean cross-entropy over the batch. logits (B, K). Exactly one of:
 *   labels (B ints in [0, K)), with label smoothing eps: target = (1-eps) onehot + eps/K
 *   soft (B, K) target rows (mixup/cutmix), used as given (each row sums to 1).
 * Returns a (1) tensor. Backward: dlogits += (softmax - target) / B * dloss. */
vt_tensor *vt_op_cross_entropy(vt_tape *t, vt_tensor *logits, const int *labels,
                               const float *soft, float smoothing);

/* ---- Shared by the op files (src/ops/common.c, gemm.c, gelu.c, layernorm.c, linear.c); not ops. ---- */

#endif
