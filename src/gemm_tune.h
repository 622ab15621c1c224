/* gemm_tune.h - the GEMM blocking chosen by measurement: the products of a config's
 * training step, the search over the blocking's knobs and its timing on the running CPU.
 *
 * Owns: which products a config's step runs (the shapes tuned), the knobs searched and
 * their candidate values, the search rule and the timing. Does not own the blocking's
 * fields and rules (kernels/gemm_context.c), the cache (gemm_cache.h) nor which source a
 * run's blocking comes from (blocking.h).
 *
 * The search tunes the blocking of the kernels that run the config's products (its
 * target, vt_tune_target): for float32 products, and bf16 ones on the fma path, the
 * active level's fp32 GEMM's (avx512, or avx2 on an AVX2-only CPU): the register tile
 * (avx512: one of kernels/gemm_tiles.h's shapes), kc, kc_t, mc, nc and the one-pass
 * order's m_one_pass, nc_one_pass and one_pass_min_n; for bf16 products on the amx or
 * dpbf16 path, that path's own blocking (amx, avx512bf16): kc, mc and nc. Candidate
 * values are rounded to what each field must be a multiple of (vt_gemm_context_field)
 * and kept only when the whole context keeps every rule (vt_gemm_context_parse).
 * The search starts from a context (the table's entry for this CPU) and runs one pass of
 * coordinate descent, knob by knob in that order: the incumbent and every valid
 * candidate value of the knob are timed in VT_TUNE_ROUNDS alternating rounds (each round
 * starting one further on) on the products the knob affects, each keeping its best time;
 * the fastest candidate replaces the incumbent only if it is more than VT_TUNE_MARGIN
 * faster (a smaller gain is noise). Last, the start and the result are timed on every
 * product in alternating rounds; the result is kept only if it is faster there too.
 * The timing is injected (vt_tune_measure_fn), so the rule is tested with made-up
 * figures on any CPU.
 *
 * The products are timed as the target's step runs them: float32 through vt_gemm; bf16
 * through vt_gemm_prec with the weight from its bf16 copy (forward and dX) and, on the
 * amx and dpbf16 paths, attention's per-head products through vt_k.gemm_bf16 with the
 * rows of the N x N blocks padded to 16 floats (src/ops/attention.c; on the fma path
 * they are float32 products of rounded operands, vt_k.gemm). Each per-head product runs
 * on one thread in the step, so VT_TUNE_BATCH of them are timed on the calling thread
 * (a parallel region of a few such products would time the threads' wake-up instead).
 * Timed products are
 * shortened where they are long: the rows of a product with A as stored (the tokens of
 * the batch) to VT_TUNE_ROWS, which stays above every m_one_pass candidate, so each
 * shortened product takes the loop order its full one takes; the K of a weight gradient
 * (the same tokens) to VT_TUNE_ROWS too for an fp32 blocking, and for a bf16 one, whose
 * kc candidates reach past it, to twice the longest kc candidate, so that every
 * candidate cuts it into several K blocks as it cuts the full one.
 */
#ifndef VT_GEMM_TUNE_H
#define VT_GEMM_TUNE_H

#include <stddef.h>

#include "config.h"
#include "kernels.h"
#include "status.h"

#define VT_TUNE_MAX_SHAPES 16
#define VT_TUNE_ROUNDS 2
#define VT_TUNE_MARGIN 0.03 /* a candidate must be 3% faster than the incumbent */
#define VT_TUNE_ROWS 1024
#define VT_TUNE_BATCH 8 /* attention's per-head products timed: 8 of them, one after another */
/* A config whose step's products (the 12 linear products, full size) are below this many
 * floating-point operations is not tuned on the fly: its step's GEMMs take well under a
 * second, and seconds of tuning would not pay back over a short run. */
#define VT_TUNE_MIN_FLOPS 2e10

/* One product of the step: C (M x N) = op(A) op(B) + beta C. batch 0: one call of the
 * threaded vt_gemm (a linear layer); batch > 0: that many independent products on one
 * thread each, spread over the threads (attention's per (sample, head) products). */
typedef struct {
    char name[16]; /* "qkv/fwd", "attn/qk" */
    int ta, tb, M, N, K, batch;
    float beta;
} vt_tune_shape;

/* Which blocking a tuning tunes and how it times the products: float32 products, or bf16
 * ones on a path (kernels.h: "bf16 product paths"). */
typedef struct {
    vt_isa level; /* the active level (>= VT_ISA_AVX2): its fp32 GEMM is avx512's or avx2's */
    int bf16;     /* the products' operands in bf16 (train.precision = bf16) */
    int path;     /* under bf16: the vt_bf16_path running them (-1: the scalar reference) */
} vt_tune_target;

/* The target of cfg's training step on the active kernels: its train.precision, the
 * active level and bf16 path. */
vt_tune_target vt_tune_target_of(const vt_config *cfg);
/* The products' precision and path as the cache key and the logs name them: "fp32",
 * "bf16-amx", "bf16-dpbf16", "bf16-fma". */
const char *vt_tune_target_name(const vt_tune_target *t);
/* The blocking t tunes, as VT_GEMM_CONTEXT's items start: "avx2", "avx512", "avx512bf16"
 * or "amx". */
const char *vt_tune_blocking_name(const vt_tune_target *t);

/* The products of cfg's training step on one of `ranks` ranks (its share of
 * train.batch_size): per linear layer (qkv, proj, fc1, fc2) fwd Y = X W^T, dX = dY W,
 * dW += dY^T X; attention's S = Q K^T, O = P V and dV = P^T dO per (sample, head).
 * Returns the count (<= VT_TUNE_MAX_SHAPES). */
int vt_tune_shapes(const vt_config *cfg, int ranks, vt_tune_shape *out);
/* The shapes as text, "qkv/fwd 0 1 6304 2304 768 0;..." (the cache's key). */
void vt_tune_shapes_text(const vt_tune_shape *s, int n, char *buf, size_t len);
/* Floating-point operations of the linear products (batch 0), full size. */
double vt_tune_linear_flops(const vt_tune_shape *s, int n);

/* Seconds the products of `mask` (bit i: shape i) take under context c. */
typedef double (*vt_tune_measure_fn)(void *user, const vt_gemm_context *c, unsigned mask);

/* What a search did. */
typedef struct {
    vt_gemm_context best;  /* the result (start when nothing beat it) */
    double t_start, t_best; /* seconds of every product: start and result, best of the final rounds */
    int timed;             /* measurements made */
    int changed;           /* the result differs from start */
    char changes[512];     /* each kept change "FIELD OLD -> NEW (GAIN%)", comma-separated; "" for none */
} vt_tune_result;

/* The search above from start over t's blocking and shapes s[0..n), timing with
 * measure; only t's blocking changes. */
void vt_tune_search(const vt_gemm_context *start, const vt_tune_target *t, const vt_tune_shape *s, int n,
                    vt_tune_measure_fn measure, void *user, vt_tune_result *r);
/* The search on this CPU for t (on the active kernels: vt_tune_target_of's): the
 * products timed as above on the current OpenMP thread count; the active context is
 * restored afterwards. Errors: out of memory (VT_ERR_RUNTIME). */
vt_status vt_tune_run(const vt_gemm_context *start, const vt_tune_target *t, const vt_tune_shape *s, int n,
                      vt_tune_result *r);

#endif
