/* test_ops_grad.c - every op in src/ops/ops.h: forward values against naive double
 * references, and a central-difference gradient check of every differentiable input;
 * the same gradient check of the ops the rotary PE kinds share (src/pe/rotary.h: their
 * forward values are checked by tests/test_pe_rope.c, test_pe_liere.c, test_pe_fused.c).
 *
 * Gradient check: L = sum_o sum_e out_o[e] R_o[e] (accumulated in double) for fixed
 * random R_o in [-1, 1]. Analytic: the op's backward with out->grad = R (input grads
 * pre-filled with 0.25 to check that backward ACCUMULATES). Numeric: each input element
 * perturbed by +-h (h = 1e-2), (L+ - L-) / 2h from forwards with gradients disabled
 * (which also exercises the evaluation code path). Tolerance |analytic - numeric| <=
 * 5e-4 + 5e-3 |numeric|: float32 forwards on O(1) inputs give about 1e-5 of rounding
 * error in the quotient and the h^2 truncation term stays below 1e-4 (the worst case
 * seen on these shapes is under 5% of the tolerance on every ISA), while a wrong
 * backward is off by O(0.01..1). Each checked input must also get a non-zero
 * gradient. Dropout-type ops are checked with a fixed mask (the tape's rng is reseeded
 * before every forward).
 * Forward references: |got - ref| <= 1e-5 + 1e-4 |ref| (SIMD GEMM/erf orderings). */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "pe/rotary.h"
#include "rng.h"
#include "status.h"
#include "tape.h"
#include "tape_fixture.h"
#include "tensor.h"

#define GC_H 1e-2
#define GC_ATOL 5e-4
#define GC_RTOL 5e-3
#define REF_ATOL 1e-5
#define REF_RTOL 1e-4
#define MAX_OUT 3
#define MAX_OUT_SIZE 8192

static float R[MAX_OUT][MAX_OUT_SIZE];
static int eval_recorded; /* forwards with gradients off that recorded or made grads */

/* A test-owned input with a grad buffer, filled uniform in [lo, hi). */
static vt_tensor *input(vt_rng *r, float lo, float hi, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t shape[4] = {d0, d1, d2, d3};
    vt_tensor *t = vt_tensor_new(&store, 1, ndim, shape);
    for (int64_t i = 0; i < t->size; i++) t->data[i] = lo + (hi - lo) * (float)vt_rng_uniform(r);
    return t;
}

typedef int (*fwd_fn)(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out);

static void begin_step(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
    tape.training = 1;
    vt_rng_seed(&tape_rng, 777);
}

/* One forward (and with grad, the backward seeded with R); returns L. */
static double run_loss(fwd_fn f, vt_tensor **in, const void *arg, int grad) {
    begin_step(grad);
    vt_tensor *out[MAX_OUT];
    int nout = f(&tape, in, arg, out);
    double L = 0.0;
    for (int o = 0; o < nout; o++) {
        VT_ASSERT(out[o]->size <= MAX_OUT_SIZE, "test output too large");
        for (int64_t e = 0; e < out[o]->size; e++) L += (double)out[o]->data[e] * R[o][e];
    }
    if (grad) {
        for (int o = 0; o < nout; o++) {
            VT_ASSERT(out[o]->grad != NULL, "output %d has no grad", o);
            for (int64_t e = 0; e < out[o]->size; e++) out[o]->grad[e] += R[o][e];
        }
        vt_tape_replay(&tape);
    } else {
        if (tape.n != 0) eval_recorded++;
        for (int o = 0; o < nout; o++) eval_recorded += out[o]->grad != NULL;
    }
    return L;
}

typedef struct {
    fwd_fn f;
    vt_tensor **in;
    const void *arg;
} op_loss_ctx;

/* L from a forward with gradients off (gc_loss_fn). */
static double op_loss(void *p) {
    op_loss_ctx *c = p;
    return run_loss(c->f, c->in, c->arg, 0);
}

/* Central-difference check of every input that has a grad buffer. */
static void grad_check(const char *name, fwd_fn f, vt_tensor **in, int nin, const void *arg) {
    float *ana[8];
    for (int i = 0; i < nin; i++)
        if (in[i]->grad)
            for (int64_t e = 0; e < in[i]->size; e++) in[i]->grad[e] = 0.25f;
    double L0 = run_loss(f, in, arg, 1);
    for (int i = 0; i < nin; i++) {
        if (!in[i]->grad) continue;
        ana[i] = vt_arena_alloc(&store, (size_t)in[i]->size * sizeof(float));
        for (int64_t e = 0; e < in[i]->size; e++) ana[i][e] = in[i]->grad[e] - 0.25f;
    }
    eval_recorded = 0;
    double L0e = run_loss(f, in, arg, 0);
    CHECK(L0e == L0, "%s: forward without grad %.17g != with grad %.17g", name, L0e, L0);
    op_loss_ctx lc = {f, in, arg};
    for (int i = 0; i < nin; i++) {
        if (!in[i]->grad) continue;
        gc_result r =
            gc_check_array(name, in[i]->data, ana[i], in[i]->size, 0, 1, GC_H, GC_ATOL, GC_RTOL, op_loss, &lc);
        CHECK(r.bad == 0, "%s: d/d input %d: %d of %d elements off (worst %.3g of the tolerance)", name, i, r.bad,
              r.checked, r.worst_rel);
        CHECK(r.max_ana > 1e-3, "%s: gradient of input %d is all zero", name, i);
    }
    CHECK(eval_recorded == 0, "%s: %d forwards with gradients off recorded entries or made grads",
          name, eval_recorded);
}

/* ---------------------------------------------------------------- op wrappers */

static int f_linear(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_linear(t, in[0], in[1], in[2]);
    return 1;
}
static int f_linear_nobias(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_linear(t, in[0], in[1], NULL);
    return 1;
}
static int f_matmul(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    const int *tt = arg;
    out[0] = vt_op_matmul(t, in[0], in[1], tt[0], tt[1]);
    return 1;
}
static int f_add(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_add(t, in[0], in[1]);
    return 1;
}
static int f_mul_channels(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_mul_channels(t, in[0], in[1]);
    return 1;
}
static int f_layernorm(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_layernorm(t, in[0], in[1], in[2], 1e-5f);
    return 1;
}
static int f_gelu(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_gelu(t, in[0]);
    return 1;
}
/* The fused residual adds and their unfused ops, with a drop path of rate *arg (NULL: 0). */
#define P_DROP 0.4f
static float arg_p(const void *arg) { return arg ? *(const float *)arg : 0.0f; }
static int f_linear_add(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_linear_add(t, in[0], in[1], in[2], arg_p(arg), in[3]);
    return 1;
}
static int f_linear_add_nobias(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_linear_add(t, in[0], in[1], NULL, arg_p(arg), in[2]);
    return 1;
}
static int f_linear_then_add(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_add(t, in[3], vt_op_drop_path(t, vt_op_linear(t, in[0], in[1], in[2]), arg_p(arg)));
    return 1;
}
static int f_gelu_linear_add(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_gelu_linear_add(t, in[0], in[1], in[2], arg_p(arg), in[3]);
    return 1;
}
static int f_gelu_linear_then_add(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_add(t, in[3], vt_op_drop_path(t, vt_op_gelu_linear(t, in[0], in[1], in[2]), arg_p(arg)));
    return 1;
}
static const float p_drop = P_DROP;
static int f_gelu_linear(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_gelu_linear(t, in[0], in[1], in[2]);
    return 1;
}
static int f_gelu_then_linear(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_linear(t, vt_op_gelu(t, in[0]), in[1], in[2]);
    return 1;
}
static int f_layernorm_linear(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_layernorm_linear(t, in[0], in[1], in[2], 1e-5f, in[3], in[4]);
    return 1;
}
static int f_layernorm_then_linear(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_linear(t, vt_op_layernorm(t, in[0], in[1], in[2], 1e-5f), in[3], in[4]);
    return 1;
}
static int f_softmax(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_softmax(t, in[0]);
    return 1;
}
static int f_split_heads(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    vt_op_split_heads(t, in[0], *(const int *)arg, &out[0], &out[1], &out[2]);
    return 3;
}
static int f_merge_heads(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_merge_heads(t, in[0]);
    return 1;
}
typedef struct {
    float p;  /* attention dropout */
    int keep; /* keep_probs */
} attn_arg;
static int f_attention(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    const attn_arg *a = arg;
    out[0] = vt_op_attention(t, in[0], in[1], in[2], 1.0f / sqrtf((float)in[0]->shape[3]), a->p, a->keep);
    return 1;
}
typedef struct {
    int H;
    attn_arg a;
    int split; /* 1: vt_op_split_heads + vt_op_attention, 0: vt_op_attention_qkv */
} attn_qkv_arg;
static int f_attention_qkv(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    const attn_qkv_arg *a = arg;
    int hd = (int)(in[0]->shape[2] / 3 / a->H);
    if (a->split) {
        vt_tensor *q, *k, *v;
        vt_op_split_heads(t, in[0], a->H, &q, &k, &v);
        out[0] = vt_op_attention(t, q, k, v, 1.0f / sqrtf((float)hd), a->a.p, a->a.keep);
    } else {
        out[0] = vt_op_attention_qkv(t, in[0], a->H, 1.0f / sqrtf((float)hd), a->a.p, a->a.keep);
    }
    return 1;
}
static int f_patch_embed(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_patch_embed(t, in[0], in[1], in[2], *(const int *)arg);
    return 1;
}
static int f_cat_cls(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_cat_cls(t, in[0], in[1]);
    return 1;
}
static int f_select_token(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_select_token(t, in[0], *(const int *)arg);
    return 1;
}
static int f_mean_tokens(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_mean_tokens(t, in[0], *(const int *)arg);
    return 1;
}
static int f_dropout(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_dropout(t, in[0], *(const float *)arg);
    return 1;
}
static int f_drop_path(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    out[0] = vt_op_drop_path(t, in[0], *(const float *)arg);
    return 1;
}
typedef struct { const int *labels; const float *soft; float smoothing; } ce_arg;
static int f_cross_entropy(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    const ce_arg *a = arg;
    out[0] = vt_op_cross_entropy(t, in[0], a->labels, a->soft, a->smoothing);
    return 1;
}

/* Forward with gradients off (reference comparisons). */
static vt_tensor *fwd1(fwd_fn f, vt_tensor **in, const void *arg) {
    begin_step(0);
    vt_tensor *out[MAX_OUT];
    f(&tape, in, arg, out);
    return out[0];
}

/* ---------------------------------------------------------------- tests */

static void test_gemm(vt_rng *r) {
    /* Shapes large enough for vt_gemm to split C over threads, by rows and by columns,
     * and (K >= 2 max(M, N), float32) over K, with K cuts inside and at the end of a 64 block;
     * vt_gemm_bias on the same splits (the K split adds the bias after the partials).
     * On 1, 2 and 3 threads (3: blocks of unequal size on a 2-core machine too), and
     * each result again from the same inputs, four times: bitwise the same for a fixed
     * thread count, whichever thread takes which block or range. */
    const int shapes[5][3] = {{70, 33, 41}, {19, 90, 45}, {1, 300, 260}, {20, 17, 300}, {40, 64, 700}};
    const int max_threads = omp_get_max_threads();
    for (int nt = 1; nt <= 3; nt++) {
        omp_set_num_threads(nt);
        for (int s = 0; s < 5; s++)
            for (int ta = 0; ta < 2; ta++)
                for (int tb = 0; tb < 2; tb++) {
                    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    size_t bytes = (size_t)M * N * sizeof(float);
                    vt_tensor *A = input(r, -1, 1, 2, M, K, 0, 0), *B = input(r, -1, 1, 2, K, N, 0, 0);
                    vt_tensor *C = input(r, -1, 1, 2, M, N, 0, 0), *Cb = input(r, -1, 1, 2, M, N, 0, 0);
                    vt_tensor *C0 = input(r, -1, 1, 2, M, N, 0, 0), *C1 = input(r, -1, 1, 2, M, N, 0, 0);
                    vt_tensor *bias = input(r, -1, 1, 1, N, 0, 0, 0);
                    memcpy(Cb->data, C->data, bytes);
                    memcpy(C0->data, C->data, bytes);
                    double *ref = vt_arena_alloc(&store, (size_t)M * N * sizeof(double));
                    int lda = ta ? M : K, ldb = tb ? K : N;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            double acc = 0;
                            for (int p = 0; p < K; p++)
                                acc += (double)(ta ? A->data[p * lda + i] : A->data[i * lda + p]) *
                                       (tb ? B->data[j * ldb + p] : B->data[p * ldb + j]);
                            ref[i * N + j] = 0.5 * acc - 2.0 * C->data[i * N + j];
                        }
                    vt_gemm(ta, tb, M, N, K, 0.5f, A->data, lda, B->data, ldb, -2.0f, C->data, N);
                    CHECK_ARRAY_CLOSE(C->data, ref, M * N, 1e-4, 1e-4, "vt_gemm %dx%dx%d ta=%d tb=%d, %d threads", M, N,
                                      K, ta, tb, nt);
                    /* repeated: the threads take C's blocks or the K split's ranges in another order */
                    for (int rep = 0; rep < (nt > 1 ? 4 : 1); rep++) {
                        memcpy(C1->data, C0->data, bytes);
                        vt_gemm(ta, tb, M, N, K, 0.5f, A->data, lda, B->data, ldb, -2.0f, C1->data, N);
                        CHECK(memcmp(C1->data, C->data, bytes) == 0, "vt_gemm %dx%dx%d ta=%d tb=%d, %d threads: not "
                              "bitwise the same when repeated (%d)", M, N, K, ta, tb, nt, rep + 1);
                    }
                    vt_gemm_bias(ta, tb, M, N, K, 0.5f, A->data, lda, B->data, ldb, -2.0f, bias->data, Cb->data, N);
                    for (int e = 0; e < M * N; e++) ref[e] += bias->data[e % N];
                    CHECK_ARRAY_CLOSE(Cb->data, ref, M * N, 1e-4, 1e-4, "vt_gemm_bias %dx%dx%d ta=%d tb=%d, %d threads",
                                      M, N, K, ta, tb, nt);
                }
    }
    omp_set_num_threads(max_threads);
}

/* C split into more blocks than threads (rows, then columns, then rows of odd sizes, then
 * rows and columns with K past the bf16 kernels' K block, then rows in four rounds of
 * shrinking blocks, the last round part-filled on 3 threads, then rows with K past two of
 * the float32 kernels' K blocks and a part-filled last panel; on 2 and 3 threads; float32
 * and bf16 products, op(B) rounded or from a bf16 copy, every ta / tb, beta 1 or 0.5, with
 * and without a bias): each block handed to whichever thread is free, the float32 cut
 * over rows on an op(B) of one block packed once by all threads (test_gemm_blocks_b: of
 * several), the bf16 cut over rows on op(B) packed once and over columns on op(A) packed
 * once (where the level has packed forms), the result bitwise the 1-thread one (C blocks
 * do not change any element's sums, nor does where an operand is packed). */
static void test_gemm_blocks(vt_rng *r) {
    /* the fourth and fifth: sides of 600, so K = 1100 stays a C split (float32 cuts over K from
     * 2 max(M, N)); the sixth: 5200 rows, 10 blocks (8 on 2 threads) */
    const int shapes[7][3] = {{2100, 40, 30},   {20, 2100, 30},  {1100, 75, 67},  {600, 40, 1100},
                              {40, 600, 1100}, {5200, 24, 20}, {1100, 100, 600}};
    const int max_threads = omp_get_max_threads();
    for (int s = 0; s < (int)(sizeof shapes / sizeof shapes[0]); s++)
        for (int tr = 0; tr < 4; tr++)
            for (int prec = 0; prec < 3; prec++) { /* float32, bf16, bf16 with op(B) from a bf16 copy */
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = tr >> 1, tb = tr & 1;
                const int bf16 = prec > 0, lda = ta ? M : K, ldb = tb ? K : N;
                const float beta = tb ? 0.5f : 1.0f;
                const size_t bytes = (size_t)M * N * sizeof(float);
                vt_tensor *A = input(r, -1, 1, 2, M, K, 0, 0), *B = input(r, -1, 1, 2, K, N, 0, 0);
                vt_tensor *C0 = input(r, -1, 1, 2, M, N, 0, 0), *C1 = input(r, -1, 1, 2, M, N, 0, 0);
                vt_tensor *C = input(r, -1, 1, 2, M, N, 0, 0), *bias = input(r, -1, 1, 1, N, 0, 0, 0);
                uint16_t *B16 = prec == 2 ? malloc((size_t)K * N * sizeof(uint16_t)) : NULL;
                if (B16) vt_k.bf16_round(B->data, B16, (size_t)K * N);
                const float *bv = ta != tb ? bias->data : NULL;
                memcpy(C1->data, C0->data, bytes);
                omp_set_num_threads(1);
                vt_gemm_prec(bf16, ta, tb, M, N, K, 0.5f, A->data, lda, B->data, B16, ldb, beta, bv, C1->data, N);
                for (int nt = 2; nt <= 3; nt++) {
                    omp_set_num_threads(nt);
                    memcpy(C->data, C0->data, bytes);
                    vt_gemm_prec(bf16, ta, tb, M, N, K, 0.5f, A->data, lda, B->data, B16, ldb, beta, bv, C->data, N);
                    CHECK(memcmp(C->data, C1->data, bytes) == 0,
                          "vt_gemm_prec(bf16 %d%s) %dx%dx%d ta=%d tb=%d beta=%g bias=%d in blocks on %d threads: not "
                          "bitwise the 1-thread result", bf16, B16 ? " from a bf16 copy" : "", M, N, K, ta, tb,
                          beta, bv != NULL, nt);
                }
                free(B16);
            }
    omp_set_num_threads(max_threads);
}

/* The cut over rows on op(B) packed block by block (ops/gemm.c: the float32 kernels, an
 * op(B) of 2 MiB or more) across many K blocks, under the level's blocking and under tiny
 * blocks (48 columns, 32 steps: several N blocks too), float32 and bf16 (on the level's
 * path; op(B) rounded or from a bf16 copy), every tb, beta 1 or 0.5, with and without a
 * bias: bitwise the 1-thread result on 2 and 3 threads. ta = 0 only: with ta = 1 this K
 * is cut over K. */
static void test_gemm_blocks_b(vt_rng *r) {
    const int M = 100, N = 100, K = 5300, max_threads = omp_get_max_threads();
    const vt_gemm_context active = vt_gemm_ctx;
    vt_gemm_context tiny;
    char err[256];
    int rc = vt_gemm_context_parse("default,avx2.kc=32,avx2.kc_t=32,avx2.mc=18,avx2.nc=48,avx2.nc_one_pass=32",
                                   &active, &tiny, err, sizeof err);
    CHECK(rc == 0, "the tiny context: %s", err);
    const size_t bytes = (size_t)M * N * sizeof(float);
    vt_tensor *A = input(r, -1, 1, 2, M, K, 0, 0), *B = input(r, -1, 1, 2, K, N, 0, 0);
    vt_tensor *C0 = input(r, -1, 1, 2, M, N, 0, 0), *C1 = input(r, -1, 1, 2, M, N, 0, 0);
    vt_tensor *C = input(r, -1, 1, 2, M, N, 0, 0), *bias = input(r, -1, 1, 1, N, 0, 0, 0);
    uint16_t *B16 = malloc((size_t)K * N * sizeof(uint16_t));
    vt_k.bf16_round(B->data, B16, (size_t)K * N);
    for (int ctx = 0; ctx < (rc == 0 ? 2 : 1); ctx++) {
        vt_gemm_context_set(ctx ? &tiny : &active);
        for (int prec = 0; prec < 3; prec++) /* float32, bf16, bf16 with op(B) from a bf16 copy */
            for (int tb = 0; tb < 2; tb++) {
                const float beta = tb ? 0.5f : 1.0f, *bv = tb ? bias->data : NULL;
                const int ldb = tb ? K : N;
                const uint16_t *b16 = prec == 2 ? B16 : NULL;
                memcpy(C1->data, C0->data, bytes);
                omp_set_num_threads(1);
                vt_gemm_prec(prec > 0, 0, tb, M, N, K, 0.5f, A->data, K, B->data, b16, ldb, beta, bv, C1->data, N);
                for (int nt = 2; nt <= 3; nt++) {
                    omp_set_num_threads(nt);
                    memcpy(C->data, C0->data, bytes);
                    vt_gemm_prec(prec > 0, 0, tb, M, N, K, 0.5f, A->data, K, B->data, b16, ldb, beta, bv, C->data, N);
                    CHECK(memcmp(C->data, C1->data, bytes) == 0,
                          "vt_gemm_prec(bf16 %d%s) %dx%dx%d tb=%d beta=%g bias=%d under the %s blocking on %d "
                          "threads: not bitwise the 1-thread result", prec > 0, b16 ? " from a bf16 copy" : "", M, N,
                          K, tb, beta, bv != NULL, ctx ? "tiny" : "level's", nt);
                }
            }
    }
    free(B16);
    vt_gemm_context_set(&active);
    omp_set_num_threads(max_threads);
}

/* A weight gradient with its bias gradient (vt_gemm_prec_wgrad): the column sums bitwise
 * vt_par_colsum_acc's on 1, 2 and 3 threads; C within tolerance of vt_gemm_prec's product,
 * bitwise it on 1 thread, and bitwise the same when repeated four times on a thread count
 * (the threads take the K split's ranges in another order). Shapes: K cut over threads in
 * ranges of several chunks (float32 K >= 2 max(M, N)), a C split (the sums then a pass of
 * their own), products small enough for one thread, one row, no rows; float32 and bf16 (on
 * the level's own path: make emu runs every level). */
static void test_gemm_wgrad(vt_rng *r) {
    const int shapes[6][3] = {{40, 30, 5000}, {24, 9, 3001}, {600, 40, 1100}, {70, 33, 41}, {5, 3, 1}, {6, 4, 0}};
    const int max_threads = omp_get_max_threads();
    for (int s = 0; s < 6; s++)
        for (int bf16 = 0; bf16 < 2; bf16++)
            for (int nt = 1; nt <= 3; nt++) {
                omp_set_num_threads(nt);
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                const size_t bytes = (size_t)M * N * sizeof(float);
                vt_tensor *A = input(r, -1, 1, 2, K > 0 ? K : 1, M, 0, 0), *B = input(r, -1, 1, 2, K > 0 ? K : 1, N, 0, 0);
                vt_tensor *C0 = input(r, -1, 1, 2, M, N, 0, 0), *C = input(r, -1, 1, 2, M, N, 0, 0);
                vt_tensor *C1 = input(r, -1, 1, 2, M, N, 0, 0), *s0 = input(r, -1, 1, 1, M, 0, 0, 0);
                vt_tensor *sref = input(r, -1, 1, 1, M, 0, 0, 0), *sg = input(r, -1, 1, 1, M, 0, 0, 0);
                memcpy(sref->data, s0->data, (size_t)M * sizeof(float));
                memcpy(sg->data, s0->data, (size_t)M * sizeof(float));
                vt_par_colsum_acc(&store, A->data, NULL, K, M, sref->data);
                memcpy(C->data, C0->data, bytes);
                vt_gemm_prec(bf16, 1, 0, M, N, K, 1.0f, A->data, M, B->data, NULL, N, 1.0f, NULL, C->data, N);
                memcpy(C1->data, C0->data, bytes);
                vt_gemm_prec_wgrad(&store, bf16, M, N, K, A->data, M, B->data, N, C1->data, N, sg->data);
                CHECK(memcmp(sg->data, sref->data, (size_t)M * sizeof(float)) == 0,
                      "vt_gemm_prec_wgrad(bf16 %d) %dx%dx%d on %d threads: column sums not bitwise "
                      "vt_par_colsum_acc's", bf16, M, N, K, nt);
                double *ref = vt_arena_alloc(&store, (size_t)M * N * sizeof(double));
                for (int e = 0; e < M * N; e++) ref[e] = C->data[e];
                CHECK_ARRAY_CLOSE(C1->data, ref, M * N, 1e-4, 1e-4, "vt_gemm_prec_wgrad(bf16 %d) %dx%dx%d on %d threads",
                                  bf16, M, N, K, nt);
                /* one thread, where the kernel sums as it packs (every bf16 path): the plain product's bits */
                if (nt == 1)
                    CHECK(memcmp(C1->data, C->data, bytes) == 0,
                          "vt_gemm_prec_wgrad(bf16 %d) %dx%dx%d on 1 thread: not bitwise vt_gemm_prec", bf16, M, N, K);
                /* repeated: the threads take the K split's ranges in another order */
                for (int rep = 0; rep < (nt > 1 ? 4 : 1); rep++) {
                    memcpy(C->data, C0->data, bytes);
                    memcpy(sg->data, s0->data, (size_t)M * sizeof(float));
                    vt_gemm_prec_wgrad(&store, bf16, M, N, K, A->data, M, B->data, N, C->data, N, sg->data);
                    CHECK(memcmp(C->data, C1->data, bytes) == 0,
                          "vt_gemm_prec_wgrad(bf16 %d) %dx%dx%d on %d threads: not bitwise the same when repeated (%d)",
                          bf16, M, N, K, nt, rep + 1);
                }
            }
    omp_set_num_threads(max_threads);
}

static void test_linear(vt_rng *r) {
    vt_tensor *in[3] = {input(r, -1, 1, 3, 2, 5, 6, 0), input(r, -1, 1, 2, 4, 6, 0, 0), input(r, -1, 1, 1, 4, 0, 0, 0)};
    vt_tensor *y = fwd1(f_linear, in, NULL);
    double ref[40];
    for (int m = 0; m < 10; m++)
        for (int o = 0; o < 4; o++) {
            double acc = in[2]->data[o];
            for (int i = 0; i < 6; i++) acc += (double)in[0]->data[m * 6 + i] * in[1]->data[o * 6 + i];
            ref[m * 4 + o] = acc;
        }
    CHECK(y->ndim == 3 && y->shape[2] == 4, "linear output shape");
    CHECK_ARRAY_CLOSE(y->data, ref, 40, REF_ATOL, REF_RTOL, "linear forward");
    grad_check("linear", f_linear, in, 3, NULL);
    grad_check("linear no bias", f_linear_nobias, in, 2, NULL);
}

static void test_matmul(vt_rng *r) {
    const int Bt = 2, M = 3, K = 5, N = 4;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            vt_tensor *in[2] = {ta ? input(r, -1, 1, 3, Bt, K, M, 0) : input(r, -1, 1, 3, Bt, M, K, 0),
                                tb ? input(r, -1, 1, 3, Bt, N, K, 0) : input(r, -1, 1, 3, Bt, K, N, 0)};
            int tt[2] = {ta, tb};
            vt_tensor *c = fwd1(f_matmul, in, tt);
            double ref[2 * 3 * 4];
            for (int b = 0; b < Bt; b++)
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double acc = 0;
                        for (int p = 0; p < K; p++) {
                            float a = ta ? in[0]->data[b * K * M + p * M + i] : in[0]->data[b * M * K + i * K + p];
                            float bb = tb ? in[1]->data[b * N * K + j * K + p] : in[1]->data[b * K * N + p * N + j];
                            acc += (double)a * bb;
                        }
                        ref[b * M * N + i * N + j] = acc;
                    }
            CHECK(c->shape[0] == Bt && c->shape[1] == M && c->shape[2] == N, "matmul shape ta=%d tb=%d", ta, tb);
            CHECK_ARRAY_CLOSE(c->data, ref, Bt * M * N, REF_ATOL, REF_RTOL, "matmul forward ta=%d tb=%d", ta, tb);
            char name[48];
            snprintf(name, sizeof name, "matmul ta=%d tb=%d", ta, tb);
            grad_check(name, f_matmul, in, 2, tt);
        }
}

static void test_add(vt_rng *r) {
    vt_tensor *a = input(r, -1, 1, 3, 2, 5, 6, 0);
    vt_tensor *bs[3] = {input(r, -1, 1, 3, 2, 5, 6, 0), input(r, -1, 1, 3, 1, 5, 6, 0), input(r, -1, 1, 1, 6, 0, 0, 0)};
    const char *names[3] = {"add same shape", "add (1,N,D)", "add (D)"};
    for (int k = 0; k < 3; k++) {
        vt_tensor *in[2] = {a, bs[k]};
        vt_tensor *y = fwd1(f_add, in, NULL);
        int bad = 0;
        for (int e = 0; e < 60; e++) bad += y->data[e] != a->data[e] + bs[k]->data[e % bs[k]->size];
        CHECK(bad == 0, "%s forward: %d wrong elements", names[k], bad);
        grad_check(names[k], f_add, in, 2, NULL);
    }
    /* Rows longer than one parallel work item (16384 floats) with a ragged last chunk:
     * forward and both gradients are elementwise, so exact; the equal-shape backward
     * takes no arena memory (no partial sums). */
    const int64_t inner = 2 * 16384 + 5;
    vt_tensor *big = input(r, -1, 1, 2, 3, inner, 0, 0);
    vt_tensor *bb[2] = {input(r, -1, 1, 2, 3, inner, 0, 0), input(r, -1, 1, 1, inner, 0, 0, 0)};
    for (int k = 0; k < 2; k++) {
        begin_step(1);
        memset(big->grad, 0, (size_t)big->size * sizeof(float));
        memset(bb[k]->grad, 0, (size_t)bb[k]->size * sizeof(float));
        vt_tensor *y = vt_op_add(&tape, big, bb[k]);
        for (int64_t e = 0; e < y->size; e++) y->grad[e] = (float)(e % 7) - 3.0f;
        size_t used = arena.total_used;
        vt_tape_replay(&tape);
        int64_t bad = 0;
        for (int64_t e = 0; e < y->size; e++) {
            bad += y->data[e] != big->data[e] + bb[k]->data[e % bb[k]->size];
            bad += big->grad[e] != y->grad[e];
        }
        for (int64_t j = 0; j < bb[k]->size; j++) {
            float want = 0.0f;
            for (int64_t o = 0; o < y->size / bb[k]->size; o++) want += y->grad[o * bb[k]->size + j];
            bad += fabsf(bb[k]->grad[j] - want) > 1e-5f;
        }
        CHECK(bad == 0, "add %s over chunked rows: %lld wrong elements", k ? "(inner)" : "same shape", (long long)bad);
        if (k == 0)
            CHECK(arena.total_used == used, "same-shape add backward takes no arena memory (%zu bytes)",
                  arena.total_used - used);
    }
}

static void test_mul_channels(vt_rng *r) {
    vt_tensor *in[2] = {input(r, -1, 1, 3, 2, 5, 6, 0), input(r, -1, 1, 1, 6, 0, 0, 0)};
    vt_tensor *y = fwd1(f_mul_channels, in, NULL);
    int bad = 0;
    for (int e = 0; e < 60; e++) bad += y->data[e] != in[0]->data[e] * in[1]->data[e % 6];
    CHECK(bad == 0, "mul_channels forward: %d wrong elements", bad);
    grad_check("mul_channels", f_mul_channels, in, 2, NULL);
}

static void test_layernorm(vt_rng *r) {
    vt_tensor *in[3] = {input(r, -2, 2, 3, 2, 5, 6, 0), input(r, 0.5f, 1.5f, 1, 6, 0, 0, 0), input(r, -1, 1, 1, 6, 0, 0, 0)};
    vt_tensor *y = fwd1(f_layernorm, in, NULL);
    double ref[60];
    for (int row = 0; row < 10; row++) {
        const float *x = in[0]->data + row * 6;
        double m = 0, v = 0;
        for (int i = 0; i < 6; i++) m += x[i];
        m /= 6;
        for (int i = 0; i < 6; i++) v += (x[i] - m) * (x[i] - m);
        v /= 6;
        for (int i = 0; i < 6; i++) ref[row * 6 + i] = (x[i] - m) / sqrt(v + 1e-5) * in[1]->data[i] + in[2]->data[i];
    }
    CHECK_ARRAY_CLOSE(y->data, ref, 60, REF_ATOL, REF_RTOL, "layernorm forward vs formula");
    grad_check("layernorm", f_layernorm, in, 3, NULL);
}

static void test_gelu(vt_rng *r) {
    vt_tensor *in[1] = {input(r, -3, 3, 3, 2, 5, 6, 0)};
    vt_tensor *y = fwd1(f_gelu, in, NULL);
    double ref[60];
    for (int e = 0; e < 60; e++) ref[e] = 0.5 * in[0]->data[e] * (1.0 + erf(in[0]->data[e] / sqrt(2.0)));
    CHECK_ARRAY_CLOSE(y->data, ref, 60, REF_ATOL, REF_RTOL, "gelu forward vs erf formula");
    grad_check("gelu", f_gelu, in, 1, NULL);
}

/* One forward and backward of f on in[0..nin) (entries may be NULL) with gradients, input
 * grads pre-filled with 0.25 and the output grad seeded with dy; between the two the
 * tape scratch is filled with NaN, as another op's use of it would leave it. Writes y,
 * then the grad of each input that has one, to res; returns the floats written.
 * *used: the step arena's bytes after the backward. */
static int64_t run_and_copy(fwd_fn f, vt_tensor **in, int nin, const void *arg, const float *dy, float *res,
                            size_t *used) {
    for (int i = 0; i < nin; i++)
        if (in[i] && in[i]->grad)
            for (int64_t e = 0; e < in[i]->size; e++) in[i]->grad[e] = 0.25f;
    begin_step(1);
    vt_tensor *out[MAX_OUT];
    f(&tape, in, arg, out);
    memcpy(out[0]->grad, dy, (size_t)out[0]->size * sizeof(float));
    float *scratch = vt_tape_scratch(&tape, 1);
    for (size_t e = 0; e < tape.scratch_floats; e++) scratch[e] = NAN;
    vt_tape_replay(&tape);
    *used = arena.total_used;
    int64_t n = out[0]->size;
    memcpy(res, out[0]->data, (size_t)n * sizeof(float));
    for (int i = 0; i < nin; i++)
        if (in[i] && in[i]->grad) {
            memcpy(res + n, in[i]->grad, (size_t)in[i]->size * sizeof(float));
            n += in[i]->size;
        }
    return n;
}

/* A fused op against the unfused ops it replaces (pair), on the same inputs and dy
 * (run_and_copy, NaN scratch included): output and every input gradient must be the same
 * bits. a, b: room for the floats run_and_copy writes. */
static void check_bitwise(const char *what, fwd_fn fused, fwd_fn pair, vt_tensor **in, int nin,
                          const void *arg, const float *dy, float *a, float *b) {
    size_t used;
    int64_t na = run_and_copy(fused, in, nin, arg, dy, a, &used);
    int64_t nb = run_and_copy(pair, in, nin, arg, dy, b, &used);
    int64_t diff = 0;
    for (int64_t e = 0; e < na && na == nb; e++) diff += memcmp(&a[e], &b[e], sizeof(float)) != 0;
    CHECK(na == nb && diff == 0, "%s: %lld of %lld floats differ from the unfused ops", what, (long long)diff,
          (long long)nb);
}

/* The point of a fused op whose unfused pair keeps an M x Din intermediate: with gradients
 * (forward + backward, dy = 1) the arena holds y and its grad, `kept` more floats (row
 * statistics, partial sums) and headers, but no M x Din buffer, where the pair holds two
 * more (the intermediate and its grad). Without gradients: y and `kept_eval` floats,
 * nothing recorded. a, b as for check_bitwise. */
static void check_fused_memory(const char *name, fwd_fn fused, fwd_fn pair, vt_tensor **in, int nin, int M,
                               int Din, size_t kept, size_t kept_eval, float *a, float *b) {
    vt_tensor *out[MAX_OUT];
    begin_step(0);
    fused(&tape, in, NULL, out);
    int64_t ny = out[0]->size;
    CHECK(arena.total_used <= ((size_t)ny + kept_eval) * sizeof(float) + 512 && tape.n == 0 && out[0]->grad == NULL,
          "%s without grad: arena use %zu bytes, %d entries recorded", name, arena.total_used, tape.n);
    float *dy = vt_arena_alloc(&store, (size_t)ny * sizeof(float));
    for (int64_t e = 0; e < ny; e++) dy[e] = 1.0f;
    size_t fused_used, pair_used;
    run_and_copy(fused, in, nin, NULL, dy, a, &fused_used);
    run_and_copy(pair, in, nin, NULL, dy, b, &pair_used);
    size_t rows = (size_t)M * Din * sizeof(float);
    size_t allowed = ((size_t)2 * ny + kept) * sizeof(float) + 1024;
    CHECK(allowed < rows && fused_used <= allowed && pair_used >= fused_used + 2 * rows,
          "%s arena use with grad %zu bytes (allowed %zu), unfused ops %zu (M x Din is %zu)", name, fused_used,
          allowed, pair_used, rows);
}

static void test_gelu_linear(vt_rng *r) {
    vt_tensor *in[3] = {input(r, -3, 3, 3, 2, 5, 6, 0), input(r, -1, 1, 2, 4, 6, 0, 0), input(r, -1, 1, 1, 4, 0, 0, 0)};
    vt_tensor *y = fwd1(f_gelu_linear, in, NULL);
    double ref[40];
    for (int m = 0; m < 10; m++)
        for (int o = 0; o < 4; o++) {
            double acc = in[2]->data[o];
            for (int i = 0; i < 6; i++) {
                double u = in[0]->data[m * 6 + i];
                acc += 0.5 * u * (1.0 + erf(u / sqrt(2.0))) * in[1]->data[o * 6 + i];
            }
            ref[m * 4 + o] = acc;
        }
    CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 4, "gelu_linear output shape");
    CHECK_ARRAY_CLOSE(y->data, ref, 40, REF_ATOL, REF_RTOL, "gelu_linear forward vs erf formula");
    grad_check("gelu_linear", f_gelu_linear, in, 3, NULL);
    vt_tensor *nobias[3] = {in[0], in[1], NULL};
    grad_check("gelu_linear no bias", f_gelu_linear, nobias, 2, NULL);

    /* Output and gradients bit for bit those of gelu then linear, on ragged shapes, with
     * and without bias, and when only some inputs want a gradient (u only: no recompute;
     * w and b only: no dg). */
    const int Ms[3] = {1, 7, 197 * 3}, Dins[3] = {5, 33, 3072 / 8}, Douts[2] = {3, 17};
    const char *cases[4] = {"all grads", "no bias", "grad of u only", "grads of w, b only"};
    size_t cap = (size_t)591 * 17 + (size_t)591 * 384 + (size_t)17 * 384 + 17;
    float *fused = vt_arena_alloc(&store, cap * sizeof(float)), *pair = vt_arena_alloc(&store, cap * sizeof(float));
    for (int mi = 0; mi < 3; mi++)
        for (int di = 0; di < 3; di++)
            for (int oi = 0; oi < 2; oi++) {
                int M = Ms[mi], Din = Dins[di], Dout = Douts[oi];
                vt_tensor *u = input(r, -3, 3, 2, M, Din, 0, 0), *w = input(r, -0.5f, 0.5f, 2, Dout, Din, 0, 0);
                vt_tensor *b = input(r, -1, 1, 1, Dout, 0, 0, 0);
                float *dy = vt_arena_alloc(&store, (size_t)M * Dout * sizeof(float));
                for (int e = 0; e < M * Dout; e++) dy[e] = (float)(2.0 * vt_rng_uniform(r) - 1.0);
                float *gu = u->grad, *gw = w->grad, *gb = b->grad;
                for (int k = 0; k < 4; k++) {
                    u->grad = k == 3 ? NULL : gu;
                    w->grad = k == 2 ? NULL : gw;
                    b->grad = k == 2 ? NULL : gb;
                    vt_tensor *args[3] = {u, w, k == 1 ? NULL : b};
                    char what[96];
                    snprintf(what, sizeof what, "gelu_linear M=%d Din=%d Dout=%d %s", M, Din, Dout, cases[k]);
                    check_bitwise(what, f_gelu_linear, f_gelu_then_linear, args, 3, NULL, dy, fused, pair);
                }
                u->grad = gu; w->grad = gw; b->grad = gb;
            }

    /* No M x Din buffer (check_fused_memory): beyond y and its grad only the colsum
     * partials of db. */
    const int M = 64, Din = 256, Dout = 8;
    vt_tensor *big[3] = {input(r, -3, 3, 2, M, Din, 0, 0), input(r, -0.5f, 0.5f, 2, Dout, Din, 0, 0),
                         input(r, -1, 1, 1, Dout, 0, 0, 0)};
    check_fused_memory("gelu_linear", f_gelu_linear, f_gelu_then_linear, big, 3, M, Din,
                       (size_t)VT_PAR_MAX_CHUNKS * Dout, 0, fused, pair);
}

/* The residual adds fused into their products (vt_op_linear_add, vt_op_gelu_linear_add):
 * gradient checks, and output and gradients bit for bit those of the product followed by
 * vt_op_drop_path and vt_op_add (rate 0, and P_DROP in training: the same samples dropped,
 * the same draws) on ragged shapes (threaded ones too), with and without bias, with the
 * residual or the input wanting no gradient, and with the input as its own residual. */
static void test_residual_adds(vt_rng *r) {
    vt_tensor *in[4] = {input(r, -2, 2, 3, 4, 5, 6, 0), input(r, -1, 1, 2, 4, 6, 0, 0), input(r, -1, 1, 1, 4, 0, 0, 0),
                        input(r, -1, 1, 3, 4, 5, 4, 0)};
    grad_check("linear_add", f_linear_add, in, 4, NULL);
    grad_check("gelu_linear_add", f_gelu_linear_add, in, 4, NULL);
    grad_check("linear_add with drop path", f_linear_add, in, 4, &p_drop);
    grad_check("gelu_linear_add with drop path", f_gelu_linear_add, in, 4, &p_drop);
    vt_tensor *nobias[3] = {in[0], in[1], in[3]};
    grad_check("linear_add no bias", f_linear_add_nobias, nobias, 3, NULL);

    const int Ms[3] = {1, 7, 197 * 3}, Dins[2] = {5, 40}, Douts[2] = {3, 40};
    const char *cases[5] = {"all grads", "no bias", "no residual grad", "no input grad", "input as residual"};
    size_t cap = 4 * ((size_t)591 * 40 * 3 + (size_t)40 * 40 + 40);
    float *fused = vt_arena_alloc(&store, cap * sizeof(float)), *pair = vt_arena_alloc(&store, cap * sizeof(float));
    for (int mi = 0; mi < 3; mi++)
        for (int di = 0; di < 2; di++)
            for (int oi = 0; oi < 2; oi++) {
                int M = Ms[mi], Din = Dins[di], Dout = Douts[oi];
                vt_tensor *x = input(r, -2, 2, 2, M, Din, 0, 0), *w = input(r, -0.5f, 0.5f, 2, Dout, Din, 0, 0);
                vt_tensor *b = input(r, -1, 1, 1, Dout, 0, 0, 0), *res = input(r, -1, 1, 2, M, Dout, 0, 0);
                float *dy = vt_arena_alloc(&store, (size_t)M * Dout * sizeof(float));
                for (int e = 0; e < M * Dout; e++) dy[e] = (float)(2.0 * vt_rng_uniform(r) - 1.0);
                float *gx = x->grad, *gr = res->grad;
                for (int k = 0; k < 5; k++) {
                    if (k == 4 && Din != Dout) continue;
                    res->grad = k == 2 ? NULL : gr;
                    x->grad = k == 3 ? NULL : gx;
                    vt_tensor *args[4] = {x, w, k == 1 ? NULL : b, k == 4 ? x : res};
                    for (int d = 0; d < 2; d++) { /* drop path rate 0, then P_DROP */
                        const float *p = d ? &p_drop : NULL;
                        char what[112];
                        snprintf(what, sizeof what, "linear_add M=%d Din=%d Dout=%d %s, drop path %g", M, Din, Dout,
                                 cases[k], arg_p(p));
                        check_bitwise(what, f_linear_add, f_linear_then_add, args, 4, p, dy, fused, pair);
                        snprintf(what, sizeof what, "gelu_linear_add M=%d Din=%d Dout=%d %s, drop path %g", M, Din,
                                 Dout, cases[k], arg_p(p));
                        check_bitwise(what, f_gelu_linear_add, f_gelu_linear_then_add, args, 4, p, dy, fused, pair);
                    }
                }
                x->grad = gx;
                res->grad = gr;
            }
}

static void test_layernorm_linear(vt_rng *r) {
    vt_tensor *in[5] = {input(r, -2, 2, 3, 2, 5, 6, 0), input(r, 0.5f, 1.5f, 1, 6, 0, 0, 0),
                        input(r, -1, 1, 1, 6, 0, 0, 0), input(r, -1, 1, 2, 4, 6, 0, 0),
                        input(r, -1, 1, 1, 4, 0, 0, 0)};
    vt_tensor *y = fwd1(f_layernorm_linear, in, NULL);
    double ref[40];
    for (int m = 0; m < 10; m++) {
        const float *x = in[0]->data + m * 6;
        double mean = 0, var = 0, h[6];
        for (int i = 0; i < 6; i++) mean += x[i];
        mean /= 6;
        for (int i = 0; i < 6; i++) var += (x[i] - mean) * (x[i] - mean);
        var /= 6;
        for (int i = 0; i < 6; i++) h[i] = (x[i] - mean) / sqrt(var + 1e-5) * in[1]->data[i] + in[2]->data[i];
        for (int o = 0; o < 4; o++) {
            double acc = in[4]->data[o];
            for (int i = 0; i < 6; i++) acc += h[i] * in[3]->data[o * 6 + i];
            ref[m * 4 + o] = acc;
        }
    }
    CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == 4, "layernorm_linear output shape");
    CHECK_ARRAY_CLOSE(y->data, ref, 40, REF_ATOL, REF_RTOL, "layernorm_linear forward vs formula");
    grad_check("layernorm_linear", f_layernorm_linear, in, 5, NULL);
    vt_tensor *nobias[5] = {in[0], in[1], in[2], in[3], NULL};
    grad_check("layernorm_linear no bias", f_layernorm_linear, nobias, 4, NULL);

    /* Output and gradients bit for bit those of layernorm then linear, on ragged shapes
     * (591 x 384 and 591 x 33 run the row chunks on every thread), with and without bias,
     * and when only some inputs want a gradient (x only: no recompute; w and b only: no
     * dh; g and beta without x: the LayerNorm backward without dx). x has a common offset
     * per row so that the mean matters. */
    const int Ms[3] = {1, 7, 197 * 3}, Ds[3] = {5, 33, 384}, Douts[3] = {3, 17, 3 * 33};
    const char *cases[5] = {"all grads", "no bias", "grad of x only", "grads of w, b only", "grads of g, beta only"};
    size_t cap = (size_t)591 * 99 + (size_t)591 * 384 + (size_t)99 * 384 + 99 + 2 * 384;
    float *fused = vt_arena_alloc(&store, cap * sizeof(float)), *pair = vt_arena_alloc(&store, cap * sizeof(float));
    for (int mi = 0; mi < 3; mi++)
        for (int di = 0; di < 3; di++)
            for (int oi = 0; oi < 3; oi++) {
                int M = Ms[mi], D = Ds[di], Dout = Douts[oi];
                vt_tensor *x = input(r, -2, 2, 2, M, D, 0, 0), *g = input(r, 0.5f, 1.5f, 1, D, 0, 0, 0);
                vt_tensor *beta = input(r, -1, 1, 1, D, 0, 0, 0), *w = input(r, -0.5f, 0.5f, 2, Dout, D, 0, 0);
                vt_tensor *b = input(r, -1, 1, 1, Dout, 0, 0, 0);
                for (int m = 0; m < M; m++)
                    for (int i = 0; i < D; i++) x->data[(size_t)m * D + i] += (float)(m % 5) - 2.0f;
                float *dy = vt_arena_alloc(&store, (size_t)M * Dout * sizeof(float));
                for (int e = 0; e < M * Dout; e++) dy[e] = (float)(2.0 * vt_rng_uniform(r) - 1.0);
                float *gx = x->grad, *gg = g->grad, *gbeta = beta->grad, *gw = w->grad, *gb = b->grad;
                for (int k = 0; k < 5; k++) {
                    x->grad = k == 3 || k == 4 ? NULL : gx;
                    g->grad = k == 2 || k == 3 ? NULL : gg;
                    beta->grad = k == 2 || k == 3 ? NULL : gbeta;
                    w->grad = k == 2 || k == 4 ? NULL : gw;
                    b->grad = k == 2 || k == 4 ? NULL : gb;
                    vt_tensor *args[5] = {x, g, beta, w, k == 1 ? NULL : b};
                    char what[96];
                    snprintf(what, sizeof what, "layernorm_linear M=%d D=%d Dout=%d %s", M, D, Dout, cases[k]);
                    check_bitwise(what, f_layernorm_linear, f_layernorm_then_linear, args, 5, NULL, dy, fused, pair);
                }
                x->grad = gx; g->grad = gg; beta->grad = gbeta; w->grad = gw; b->grad = gb;
            }

    /* No M x D buffer (check_fused_memory): beyond y and its grad only mean and rstd (M
     * each) and the partial sums of db, dg and dbeta (32 chunks); without gradients y,
     * mean and rstd. */
    const int M = 512, D = 64, Dout = 8;
    vt_tensor *big[5] = {input(r, -2, 2, 2, M, D, 0, 0), input(r, 0.5f, 1.5f, 1, D, 0, 0, 0),
                         input(r, -1, 1, 1, D, 0, 0, 0), input(r, -0.5f, 0.5f, 2, Dout, D, 0, 0),
                         input(r, -1, 1, 1, Dout, 0, 0, 0)};
    check_fused_memory("layernorm_linear", f_layernorm_linear, f_layernorm_then_linear, big, 5, M, D,
                       (size_t)2 * M + (size_t)VT_PAR_MAX_CHUNKS * (Dout + 2 * D), (size_t)2 * M, fused, pair);
}

static void test_softmax(vt_rng *r) {
    vt_tensor *in[1] = {input(r, -3, 3, 3, 2, 5, 7, 0)};
    vt_tensor *y = fwd1(f_softmax, in, NULL);
    double ref[70];
    for (int row = 0; row < 10; row++) {
        double s = 0;
        for (int i = 0; i < 7; i++) s += exp(in[0]->data[row * 7 + i]);
        for (int i = 0; i < 7; i++) ref[row * 7 + i] = exp(in[0]->data[row * 7 + i]) / s;
    }
    CHECK_ARRAY_CLOSE(y->data, ref, 70, REF_ATOL, REF_RTOL, "softmax forward");
    grad_check("softmax", f_softmax, in, 1, NULL);
}

static void test_heads(vt_rng *r) {
    const int B = 2, N = 5, H = 2, hd = 3, D = H * hd;
    vt_tensor *in[1] = {input(r, -1, 1, 3, B, N, 3 * D, 0)};
    begin_step(0);
    vt_tensor *q, *k, *v;
    vt_op_split_heads(&tape, in[0], H, &q, &k, &v);
    vt_tensor *qkv3[3] = {q, k, v};
    int bad = 0;
    for (int s = 0; s < 3; s++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int n = 0; n < N; n++)
                    for (int j = 0; j < hd; j++)
                        bad += qkv3[s]->data[((b * H + h) * N + n) * hd + j] !=
                               in[0]->data[(b * N + n) * 3 * D + s * D + h * hd + j];
    CHECK(bad == 0 && q->shape[1] == H && q->shape[3] == hd, "split_heads layout: %d wrong", bad);
    vt_tensor *m = vt_op_merge_heads(&tape, v);
    bad = 0;
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++)
            for (int c = 0; c < D; c++) bad += m->data[(b * N + n) * D + c] != in[0]->data[(b * N + n) * 3 * D + 2 * D + c];
    CHECK(bad == 0 && m->shape[2] == D, "merge_heads(split v) == v part of qkv: %d wrong", bad);
    grad_check("split_heads", f_split_heads, in, 1, &H);
    vt_tensor *x[1] = {input(r, -1, 1, 4, B, H, N, hd)};
    grad_check("merge_heads", f_merge_heads, x, 1, NULL);
}

static void test_attention(vt_rng *r) {
    const int B = 2, H = 2, N = 5, hd = 3;
    vt_tensor *in[3] = {input(r, -1.5f, 1.5f, 4, B, H, N, hd), input(r, -1.5f, 1.5f, 4, B, H, N, hd),
                        input(r, -1, 1, 4, B, H, N, hd)};
    const attn_arg p0 = {0.0f, 1}, p3 = {0.3f, 1}, p0r = {0.0f, 0}, p3r = {0.3f, 0};
    vt_tensor *y = fwd1(f_attention, in, &p0);
    double ref[2 * 2 * 5 * 3];
    double scale = 1.0 / sqrt((double)hd);
    for (int bh = 0; bh < B * H; bh++) {
        const float *q = in[0]->data + bh * N * hd, *k = in[1]->data + bh * N * hd, *v = in[2]->data + bh * N * hd;
        for (int i = 0; i < N; i++) {
            double s[5], mx = -1e300, sum = 0;
            for (int j = 0; j < N; j++) {
                s[j] = 0;
                for (int c = 0; c < hd; c++) s[j] += (double)q[i * hd + c] * k[j * hd + c];
                s[j] *= scale;
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < N; j++) sum += (s[j] = exp(s[j] - mx));
            for (int c = 0; c < hd; c++) {
                double acc = 0;
                for (int j = 0; j < N; j++) acc += s[j] / sum * v[j * hd + c];
                ref[(((bh / H) * N + i) * H + bh % H) * hd + c] = acc; /* merged (B, N, H hd) */
            }
        }
    }
    CHECK_ARRAY_CLOSE(y->data, ref, B * H * N * hd, REF_ATOL, REF_RTOL, "attention vs naive softmax(qk^T)v");
    grad_check("attention", f_attention, in, 3, &p0);
    grad_check("attention dropout 0.3 (fixed mask)", f_attention, in, 3, &p3);
    grad_check("attention, recomputing P", f_attention, in, 3, &p0r);
    grad_check("attention dropout 0.3, recomputing P and mask", f_attention, in, 3, &p3r);

    /* Keeping and recomputing give the same bits: output and every gradient, with and
     * without dropout (same rng seed per step), 2 threads' blocks included (B H = 6). */
    vt_tensor *qkv[3] = {input(r, -1, 1, 4, 2, 3, 23, 8), input(r, -1, 1, 4, 2, 3, 23, 8), input(r, -1, 1, 4, 2, 3, 23, 8)};
    const int64_t n = qkv[0]->size;
    float *res[2];
    for (int d = 0; d < 2; d++) {
        for (int keep = 0; keep < 2; keep++) {
            for (int i = 0; i < 3; i++) memset(qkv[i]->grad, 0, (size_t)n * sizeof(float));
            begin_step(1);
            vt_tensor *o[1];
            const attn_arg a = {d ? 0.3f : 0.0f, keep};
            f_attention(&tape, qkv, &a, o);
            for (int64_t e = 0; e < n; e++) o[0]->grad[e] = R[0][e % MAX_OUT_SIZE];
            vt_tape_replay(&tape);
            res[keep] = vt_arena_alloc(&store, 4 * (size_t)n * sizeof(float));
            memcpy(res[keep], o[0]->data, (size_t)n * sizeof(float));
            for (int i = 0; i < 3; i++) memcpy(res[keep] + (i + 1) * n, qkv[i]->grad, (size_t)n * sizeof(float));
        }
        int64_t diff = 0;
        for (int64_t e = 0; e < 4 * n; e++) diff += memcmp(&res[0][e], &res[1][e], sizeof(float)) != 0;
        CHECK(diff == 0, "attention dropout %.1f: %lld of %lld floats differ between keeping and recomputing P",
              d ? 0.3 : 0.0, (long long)diff, (long long)(4 * n));
    }

    /* Without gradients nothing N x N is kept per (batch, head): the output and one N x N
     * block per thread. With gradients (forward + backward, with and without dropout),
     * recomputing: 16 (b, h) blocks take no more than 1 block plus 15 blocks' output and
     * output grad; keeping adds 15 Nb Nb floats (and bytes with dropout) more. */
    const int Nb = 40;
    vt_tensor *big[3] = {input(r, -1, 1, 4, 2, 2, Nb, 4), input(r, -1, 1, 4, 2, 2, Nb, 4), input(r, -1, 1, 4, 2, 2, Nb, 4)};
    begin_step(0);
    vt_tensor *yo[1];
    f_attention(&tape, big, &p0, yo);
    size_t no_grad = arena.total_used;
    size_t allowed = (size_t)4 * Nb * 4 * sizeof(float) + (size_t)omp_get_max_threads() * Nb * Nb * sizeof(float) + 512;
    CHECK(no_grad <= allowed, "attention arena use without grad %zu bytes (allowed %zu)", no_grad, allowed);
    for (int d = 0; d < 4; d++) {
        const attn_arg *p = d == 0 ? &p0r : d == 1 ? &p3r : d == 2 ? &p0 : &p3;
        size_t with_grad[2];
        for (int s = 0; s < 2; s++) {
            int64_t H = s ? 8 : 1, B = s ? 2 : 1;
            vt_tensor *x[3] = {input(r, -1, 1, 4, B, H, Nb, 4), input(r, -1, 1, 4, B, H, Nb, 4),
                               input(r, -1, 1, 4, B, H, Nb, 4)};
            begin_step(1);
            f_attention(&tape, x, p, yo);
            vt_tape_replay(&tape);
            with_grad[s] = arena.total_used;
        }
        size_t grow = (size_t)15 * 2 * Nb * 4 * sizeof(float) + 128;
        size_t kept = p->keep ? (size_t)15 * Nb * Nb * (sizeof(float) + (p->p > 0)) : 0;
        CHECK(with_grad[1] <= with_grad[0] + grow + kept && with_grad[1] + 128 >= with_grad[0] + kept,
              "attention dropout %.1f keep %d: forward + backward arena use %zu bytes for 1 (b, h) block, %zu "
              "for 16 (allowed %zu more, of them %zu for the kept probabilities)", p->p, p->keep, with_grad[0],
              with_grad[1], grow + kept, kept);
    }
}

/* vt_op_attention_qkv: bitwise split_heads + attention (output and the qkv gradient),
 * with and without dropout, keeping and recomputing P, on 2 threads' blocks; and the
 * finite-difference check. */
static void test_attention_qkv(vt_rng *r) {
    const int B = 2, N = 23, H = 3, hd = 8;
    vt_tensor *in[1] = {input(r, -1, 1, 3, B, N, 3 * H * hd, 0)};
    const int64_t n = in[0]->size, no = (int64_t)B * N * H * hd;
    for (int d = 0; d < 2; d++)
        for (int keep = 0; keep < 2; keep++) {
            float *res[2];
            for (int split = 0; split < 2; split++) {
                memset(in[0]->grad, 0, (size_t)n * sizeof(float));
                begin_step(1);
                vt_tensor *o[1];
                const attn_qkv_arg a = {H, {d ? 0.3f : 0.0f, keep}, split};
                f_attention_qkv(&tape, in, &a, o);
                for (int64_t e = 0; e < no; e++) o[0]->grad[e] = R[0][e % MAX_OUT_SIZE];
                vt_tape_replay(&tape);
                res[split] = vt_arena_alloc(&store, (size_t)(no + n) * sizeof(float));
                memcpy(res[split], o[0]->data, (size_t)no * sizeof(float));
                memcpy(res[split] + no, in[0]->grad, (size_t)n * sizeof(float));
            }
            int64_t diff = 0;
            for (int64_t e = 0; e < no + n; e++) diff += memcmp(&res[0][e], &res[1][e], sizeof(float)) != 0;
            CHECK(diff == 0, "attention_qkv dropout %.1f keep %d: %lld of %lld floats differ from split + attention",
                  d ? 0.3 : 0.0, keep, (long long)diff, (long long)(no + n));
        }
    vt_tensor *small[1] = {input(r, -1.5f, 1.5f, 3, 2, 5, 3 * 2 * 3, 0)};
    const attn_qkv_arg p0 = {2, {0.0f, 1}, 0}, p3r = {2, {0.3f, 0}, 0};
    grad_check("attention_qkv", f_attention_qkv, small, 1, &p0);
    grad_check("attention_qkv dropout 0.3, recomputing P and mask", f_attention_qkv, small, 1, &p3r);
}

static void test_patch_embed(vt_rng *r) {
    const int B = 2, C = 3, Hi = 8, Wi = 12, P = 4, D = 5, gw = Wi / P, np = (Hi / P) * gw;
    vt_tensor *in[3] = {input(r, -1, 1, 4, B, C, Hi, Wi), input(r, -0.5f, 0.5f, 4, D, C, P, P),
                        input(r, -1, 1, 1, D, 0, 0, 0)};
    vt_tensor *y = fwd1(f_patch_embed, in, &P);
    double ref[2 * 6 * 5];
    for (int b = 0; b < B; b++)
        for (int pi = 0; pi < np; pi++)
            for (int d = 0; d < D; d++) {
                int py = pi / gw, px = pi % gw;
                double acc = in[2]->data[d];
                for (int c = 0; c < C; c++)
                    for (int i = 0; i < P; i++)
                        for (int j = 0; j < P; j++)
                            acc += (double)in[1]->data[((d * C + c) * P + i) * P + j] *
                                   in[0]->data[((b * C + c) * Hi + py * P + i) * Wi + px * P + j];
                ref[(b * np + pi) * D + d] = acc;
            }
    CHECK(y->shape[0] == B && y->shape[1] == np && y->shape[2] == D, "patch_embed shape");
    CHECK_ARRAY_CLOSE(y->data, ref, B * np * D, REF_ATOL, REF_RTOL, "patch_embed vs naive conv");
    grad_check("patch_embed", f_patch_embed, in, 3, &P);
}

static void test_tokens(vt_rng *r) {
    vt_tensor *in[2] = {input(r, -1, 1, 3, 1, 1, 6, 0), input(r, -1, 1, 3, 2, 4, 6, 0)};
    vt_tensor *y = fwd1(f_cat_cls, in, NULL);
    int bad = 0;
    for (int b = 0; b < 2; b++)
        for (int n = 0; n < 5; n++)
            for (int d = 0; d < 6; d++)
                bad += y->data[(b * 5 + n) * 6 + d] != (n == 0 ? in[0]->data[d] : in[1]->data[(b * 4 + n - 1) * 6 + d]);
    CHECK(bad == 0 && y->shape[1] == 5, "cat_cls forward: %d wrong", bad);
    grad_check("cat_cls", f_cat_cls, in, 2, NULL);

    vt_tensor *x[1] = {input(r, -1, 1, 3, 2, 5, 6, 0)};
    for (int index = 0; index < 5; index += 3) {
        vt_tensor *s = fwd1(f_select_token, x, &index);
        bad = 0;
        for (int b = 0; b < 2; b++)
            for (int d = 0; d < 6; d++) bad += s->data[b * 6 + d] != x[0]->data[(b * 5 + index) * 6 + d];
        CHECK(bad == 0 && s->ndim == 2, "select_token %d forward: %d wrong", index, bad);
        grad_check("select_token", f_select_token, x, 1, &index);
    }
    for (int start = 0; start < 2; start++) {
        vt_tensor *m = fwd1(f_mean_tokens, x, &start);
        double ref[12];
        for (int b = 0; b < 2; b++)
            for (int d = 0; d < 6; d++) {
                double s = 0;
                for (int n = start; n < 5; n++) s += x[0]->data[(b * 5 + n) * 6 + d];
                ref[b * 6 + d] = s / (5 - start);
            }
        CHECK_ARRAY_CLOSE(m->data, ref, 12, 1e-6, 1e-6, "mean_tokens start=%d forward", start);
        grad_check("mean_tokens", f_mean_tokens, x, 1, &start);
    }
}

static void test_dropout(vt_rng *r) {
    float p = 0.3f;
    vt_tensor *x[1] = {input(r, 0.5f, 1.5f, 3, 2, 5, 6, 0)};
    grad_check("dropout 0.3 (fixed mask)", f_dropout, x, 1, &p);

    /* Large tensor: keep rate, survivor scale, the backward reuses the forward mask. */
    vt_tensor *big = input(r, 0.5f, 1.5f, 2, 100, 1000, 0, 0);
    for (int64_t i = 0; i < big->size; i++) big->grad[i] = 0.0f;
    begin_step(1);
    vt_tensor *y = vt_op_dropout(&tape, big, p);
    int64_t kept = 0, bad_scale = 0, bad_grad = 0;
    for (int64_t i = 0; i < y->size; i++) {
        if (y->data[i] != 0.0f) {
            kept++;
            bad_scale += fabsf(y->data[i] - big->data[i] / (1.0f - p)) > 1e-6f * fabsf(y->data[i]);
        }
        y->grad[i] = 1.0f;
    }
    vt_tape_replay(&tape);
    for (int64_t i = 0; i < y->size; i++) {
        float want = y->data[i] != 0.0f ? 1.0f / (1.0f - p) : 0.0f;
        bad_grad += fabsf(big->grad[i] - want) > 1e-6f;
    }
    /* Binomial(1e5, 0.7): sd = 145; 6 sd = 870 elements. */
    double rate = (double)kept / (double)y->size;
    CHECK(fabs(rate - 0.7) < 0.0087, "dropout keep rate %.4f, want 0.7", rate);
    CHECK(bad_scale == 0, "dropout: %lld survivors not scaled by 1/(1-p)", (long long)bad_scale);
    CHECK(bad_grad == 0, "dropout backward: %lld elements not dy * mask / (1-p)", (long long)bad_grad);

    /* The mask does not depend on the thread count. */
    float *y1 = vt_arena_alloc(&store, (size_t)y->size * sizeof(float));
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    begin_step(0);
    memcpy(y1, vt_op_dropout(&tape, big, p)->data, (size_t)big->size * sizeof(float));
    omp_set_num_threads(2);
    begin_step(0);
    vt_tensor *y2 = vt_op_dropout(&tape, big, p);
    CHECK(memcmp(y1, y2->data, (size_t)big->size * sizeof(float)) == 0, "dropout mask depends on thread count");
    omp_set_num_threads(nt);

    /* Evaluation and p = 0: the identity, x itself. */
    begin_step(1);
    tape.training = 0;
    CHECK(vt_op_dropout(&tape, big, p) == big && tape.n == 0, "dropout in eval must return x");
    tape.training = 1;
    CHECK(vt_op_dropout(&tape, big, 0.0f) == big && tape.n == 0, "dropout p=0 must return x");
}

static void test_drop_path(vt_rng *r) {
    float p = 0.5f;
    vt_tensor *x[1] = {input(r, 0.5f, 1.5f, 3, 6, 2, 3, 0)};
    grad_check("drop_path 0.5 (fixed mask)", f_drop_path, x, 1, &p);

    vt_tensor *big = input(r, 0.5f, 1.5f, 3, 4000, 2, 3, 0);
    for (int64_t i = 0; i < big->size; i++) big->grad[i] = 0.0f;
    p = 0.25f;
    begin_step(1);
    vt_tensor *y = vt_op_drop_path(&tape, big, p);
    int kept = 0, mixed = 0, bad_scale = 0, bad_grad = 0;
    for (int b = 0; b < 4000; b++) {
        int z = 0;
        for (int i = 0; i < 6; i++) {
            float v = y->data[b * 6 + i];
            z += v == 0.0f;
            if (v != 0.0f) bad_scale += fabsf(v - big->data[b * 6 + i] / (1.0f - p)) > 1e-6f * fabsf(v);
            y->grad[b * 6 + i] = 2.0f;
        }
        kept += z == 0;
        mixed += z != 0 && z != 6;
    }
    vt_tape_replay(&tape);
    for (int64_t i = 0; i < y->size; i++)
        bad_grad += fabsf(big->grad[i] - (y->data[i] != 0.0f ? 2.0f / (1.0f - p) : 0.0f)) > 1e-6f;
    /* Binomial(4000, 0.75): sd = 27.4; 6 sd = 164 samples. */
    CHECK(abs(kept - 3000) < 164, "drop_path kept %d of 4000 samples, want ~3000", kept);
    CHECK(mixed == 0, "drop_path: %d samples partly zeroed", mixed);
    CHECK(bad_scale == 0, "drop_path: %d survivors not scaled by 1/(1-p)", bad_scale);
    CHECK(bad_grad == 0, "drop_path backward: %d elements not dy * mask / (1-p)", bad_grad);
    tape.training = 0;
    CHECK(vt_op_drop_path(&tape, big, p) == big, "drop_path in eval must return x");
}

/* ---------------------------------------------------------------- the PE ops (pe/rotary.h) */

static int f_rot_angles(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_rot_angles(t, in[0], in[1]);
    return 1;
}
static int f_rot_cossin(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_rot_cossin(t, in[0]);
    return 1;
}
static int f_rot_pairs(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_rot_pairs(t, in[0], in[1]);
    return 1;
}
static int f_head_matmul(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_head_matmul(t, in[0], in[1]);
    return 1;
}
/* in: qkv, cs and (nin 3) cls; arg: the head count. */
static int f_rot_split_heads(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    const int *a = arg;
    vt_op_rot_split_heads(t, in[0], a[0], in[1], a[1] ? in[2] : NULL, &out[0], &out[1], &out[2]);
    return 3;
}
static int f_qkv_fold(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    vt_op_qkv_fold(t, in[0], in[1], in[2], *(const int *)arg, &out[0], &out[1]);
    return 2;
}
static int f_cayley(vt_tape *t, vt_tensor **in, const void *arg, vt_tensor **out) {
    (void)arg;
    out[0] = vt_op_cayley(t, in[0]);
    return 1;
}

static void test_pe_ops(vt_rng *r) {
    const int B = 2, H = 2, N = 5, hd = 8;
    /* angles: coords (Ba, N - 1, C) x freqs (G, npr, C) */
    vt_tensor *ang_in[2] = {input(r, -1, 1, 3, B, N - 1, 2, 0), input(r, -1, 1, 3, H, 3, 2, 0)};
    grad_check("rot_angles", f_rot_angles, ang_in, 2, NULL);
    vt_tensor *cos_in[1] = {input(r, -3, 3, 4, B, H, N - 1, 3)};
    grad_check("rot_cossin", f_rot_cossin, cos_in, 1, NULL);
    /* pairs: per sample and head (Ba = B, G = H), and shared (1, 1); 3 of the 4 pairs
     * rotated, the last copied */
    for (int shared = 0; shared < 2; shared++) {
        vt_tensor *in[2] = {input(r, -1, 1, 4, B, H, N, hd),
                            input(r, -1, 1, 4, shared ? 1 : B, shared ? 1 : H, N - 1, 6)};
        grad_check(shared ? "rot_pairs shared" : "rot_pairs", f_rot_pairs, in, 2, NULL);
    }
    for (int G = 1; G <= H; G++) {
        vt_tensor *in[2] = {input(r, -1, 1, 4, B, H, N, hd / 2), input(r, -1, 1, 3, G, hd / 2, hd / 2, 0)};
        grad_check(G == 1 ? "head_matmul shared" : "head_matmul", f_head_matmul, in, 2, NULL);
    }
    /* the fused split: qkv (B, N, 3 H hd'), hd' = 4, cs with 2 pairs, with and without cls */
    for (int with_cls = 0; with_cls < 2; with_cls++) {
        int a[2] = {H, with_cls};
        vt_tensor *in[3] = {input(r, -1, 1, 3, B, N, 3 * H * 4, 0), input(r, -1, 1, 4, B, H, N - 1, 4),
                            input(r, -1, 1, 3, H, 4, 4, 0)};
        grad_check(with_cls ? "rot_split_heads cls" : "rot_split_heads", f_rot_split_heads, in, 2 + with_cls, a);
    }
    int h = H;
    vt_tensor *fold_in[3] = {input(r, -1, 1, 2, 3 * H * 4, 6, 0, 0), input(r, -1, 1, 1, 3 * H * 4, 0, 0, 0),
                             input(r, -1, 1, 3, H, 4, 4, 0)};
    grad_check("qkv_fold", f_qkv_fold, fold_in, 3, &h);
    vt_tensor *cay_in[1] = {input(r, -0.5f, 0.5f, 3, H, 4, 4, 0)};
    grad_check("cayley", f_cayley, cay_in, 1, NULL);
}

static void test_cross_entropy(vt_rng *r) {
    const int B = 3, K = 5;
    vt_tensor *in[1] = {input(r, -2, 2, 2, B, K, 0, 0)};
    int labels[3] = {1, 4, 0};
    float soft[15];
    for (int b = 0; b < B; b++) {
        float s = 0;
        for (int k = 0; k < K; k++) s += soft[b * K + k] = (float)vt_rng_uniform(r);
        for (int k = 0; k < K; k++) soft[b * K + k] /= s;
    }
    ce_arg args[3] = {{labels, NULL, 0.0f}, {labels, NULL, 0.1f}, {NULL, soft, 0.0f}};
    const char *names[3] = {"cross_entropy hard", "cross_entropy smoothing 0.1", "cross_entropy soft"};
    for (int c = 0; c < 3; c++) {
        double ref = 0;
        for (int b = 0; b < B; b++) {
            const float *x = in[0]->data + b * K;
            double s = 0;
            for (int k = 0; k < K; k++) s += exp(x[k]);
            for (int k = 0; k < K; k++) {
                double tgt = args[c].soft ? soft[b * K + k]
                                          : (k == labels[b] ? 1.0 - args[c].smoothing : 0.0) + args[c].smoothing / K;
                ref -= tgt * (x[k] - log(s));
            }
        }
        ref /= B;
        vt_tensor *l = fwd1(f_cross_entropy, in, &args[c]);
        CHECK(l->size == 1, "%s: loss must be a (1) tensor", names[c]);
        CHECK_CLOSE(l->data[0], ref, 1e-6, 1e-6, "%s forward", names[c]);
        grad_check(names[c], f_cross_entropy, in, 1, &args[c]);
    }
    /* Targets are copied: changing the caller's labels after the forward does not
     * change the backward. */
    for (int e = 0; e < B * K; e++) in[0]->grad[e] = 0.0f;
    begin_step(1);
    int lab[3] = {2, 2, 2};
    vt_tensor *l = vt_op_cross_entropy(&tape, in[0], lab, NULL, 0.0f);
    lab[0] = lab[1] = lab[2] = 0;
    vt_tape_backward(&tape, l);
    double s = 0;
    for (int b = 0; b < B; b++) s += in[0]->grad[b * K + 2];
    CHECK(s < -0.5 / B, "cross_entropy backward used changed labels (sum dlogit[label] = %g)", s);
}

int main(void) {
    if (tape_fixture_init() != 0) return 1;
    vt_rng rr;
    vt_rng_seed(&rr, 4242);
    for (int o = 0; o < MAX_OUT; o++)
        for (int e = 0; e < MAX_OUT_SIZE; e++) R[o][e] = (float)(2.0 * vt_rng_uniform(&rr) - 1.0);
    vt_rng r;
    vt_rng_seed(&r, 12345);

    test_gemm(&r);
    test_gemm_blocks(&r);
    test_gemm_blocks_b(&r);
    test_gemm_wgrad(&r);
    test_linear(&r);
    test_matmul(&r);
    test_add(&r);
    test_mul_channels(&r);
    test_layernorm(&r);
    test_gelu(&r);
    test_gelu_linear(&r);
    test_residual_adds(&r);
    test_layernorm_linear(&r);
    test_softmax(&r);
    test_heads(&r);
    test_attention(&r);
    test_attention_qkv(&r);
    test_patch_embed(&r);
    test_tokens(&r);
    test_dropout(&r);
    test_drop_path(&r);
    test_cross_entropy(&r);
    test_pe_ops(&r);

    tape_fixture_done();
    return test_summary();
}
