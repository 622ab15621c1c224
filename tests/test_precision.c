/* test_precision.c - train.precision = bf16 (src/precision.h; numerics: kernels.h).
 *
 * (1) Every op that multiplies matrices (linear, layernorm_linear, gelu_linear,
 *     patch_embed, attention on q, k, v and on qkv in place, with kept and recomputed
 *     probabilities and with dropout, batched matmul in all four transpositions), run
 *     with tape.bf16 on the active level, against the same op in float32 on a copy of
 *     the table whose four float32 GEMM entries round both operands to bf16 and then
 *     call the scalar GEMM (gemm_sums's column sums of A as stored): the forward output and every input gradient agree within a
 *     relative RMS of 2e-6 (1e-5 for attention) and a relative max of 1e-3 (5e-3). The
 *     two differ only by float32 sums in another order (and, in attention, the odd
 *     probability that this moves across a bf16 rounding boundary before P v); a product
 *     whose operands were not rounded would be off by ~1e-3 RMS. Weights with and
 *     without a bf16 copy (vt_tensor.bf16).
 * (2) A bf16 op gives the same bits twice.
 * (3) A model's forward and backward under bf16 give the same bits with the weights'
 *     copies attached as without them (the copy is what packing rounds to); attach
 *     covers exactly the weight-decay parameters; after vt_optim_step (AdamW and SGD)
 *     every copy is the rounding of its updated weight; detach clears them.
 * (4) bf16 and float32 model outputs differ, a little: the precision is in effect.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "optim.h"
#include "precision.h"
#include "resolve.h"
#include "rng.h"
#include "tape_fixture.h"
#include "vit.h"
#include "vit_fixture.h"

/* ---------------------------------------------------------------- the reference table */

static vt_kernels scalar_t;

/* A copy of the rows x cols block at X (row stride ld) rounded to bf16 (as floats). */
static float *rounded(const float *X, int rows, int cols, int ld) {
    size_t n = rows > 0 ? (size_t)(rows - 1) * ld + cols : 0;
    float *y = malloc((n > 0 ? n : 1) * sizeof(float));
    vt_bf16 *h = malloc((n > 0 ? n : 1) * sizeof(vt_bf16));
    scalar_t.bf16_round(X, h, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)h[i] << 16;
        memcpy(&y[i], &u, sizeof u);
    }
    free(h);
    return y;
}

static void ref_gemm_bias(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                          int ldb, float beta, const float *bias, float *C, int ldc, float *work) {
    (void)work;
    float *a = K > 0 ? rounded(A, ta ? K : M, ta ? M : K, lda) : NULL;
    float *b = K > 0 ? rounded(B, tb ? N : K, tb ? K : N, ldb) : NULL;
    scalar_t.gemm_bias(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, bias, C, ldc, NULL);
    free(a);
    free(b);
}
static void ref_gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc, float *work) {
    ref_gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, work);
}
static void ref_gemm_prefetch(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                              const float *B, int ldb, float beta, float *C, int ldc, float *work,
                              const vt_region next[2]) {
    (void)next;
    ref_gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, ldc, work);
}

static void ref_gemm_sums(int bf16, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                          float beta, float *C, int ldc, float *work, int nchunks, const int *edge, float *sums) {
    (void)bf16;
    ref_gemm_bias(1, 0, M, N, K, 1.0f, A, lda, B, ldb, beta, NULL, C, ldc, work);
    for (int c = 0; c < nchunks; c++) /* the sums of A as stored */
        for (int k = edge[c]; k < edge[c + 1]; k++)
            for (int i = 0; i < M; i++) sums[(size_t)c * M + i] += A[(size_t)k * lda + i];
}

/* ---------------------------------------------------------------- ops */

#define MAX_T 6

/* One op case: builds its inputs from seed into in[] (n_in of them; which of them are
 * weights that may carry a bf16 copy: weight_mask), runs the forward. */
typedef struct {
    const char *name;
    int n_in, weight_mask;
    double rms_tol, max_tol;
    vt_tensor *(*build)(vt_tensor **in, vt_rng *r);
    vt_tensor *(*forward)(vt_tape *t, vt_tensor **in, int variant);
    int variants;
} op_case;

static vt_tensor *new_input(vt_rng *r, float amp, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t shape[4] = {d0, d1, d2, d3};
    vt_tensor *t = vt_tensor_new(&store, 1, ndim, shape);
    for (int64_t i = 0; i < t->size; i++) t->data[i] = amp * (float)(2 * vt_rng_uniform(r) - 1);
    return t;
}

static vt_tensor *b_linear(vt_tensor **in, vt_rng *r) {
    in[0] = new_input(r, 1, 3, 3, 5, 24, 0);
    in[1] = new_input(r, 0.3f, 2, 20, 24, 0, 0);
    in[2] = new_input(r, 0.1f, 1, 20, 0, 0, 0);
    return NULL;
}
static vt_tensor *f_linear(vt_tape *t, vt_tensor **in, int v) {
    (void)v;
    return vt_op_linear(t, in[0], in[1], in[2]);
}
static vt_tensor *b_lnlin(vt_tensor **in, vt_rng *r) {
    in[0] = new_input(r, 2, 3, 3, 5, 24, 0);
    in[1] = new_input(r, 1, 1, 24, 0, 0, 0);
    in[2] = new_input(r, 0.5f, 1, 24, 0, 0, 0);
    in[3] = new_input(r, 0.3f, 2, 40, 24, 0, 0);
    in[4] = new_input(r, 0.1f, 1, 40, 0, 0, 0);
    return NULL;
}
static vt_tensor *f_lnlin(vt_tape *t, vt_tensor **in, int v) {
    (void)v;
    return vt_op_layernorm_linear(t, in[0], in[1], in[2], 1e-6f, in[3], in[4]);
}
static vt_tensor *b_gelulin(vt_tensor **in, vt_rng *r) {
    in[0] = new_input(r, 2, 3, 3, 5, 40, 0);
    in[1] = new_input(r, 0.3f, 2, 24, 40, 0, 0);
    in[2] = new_input(r, 0.1f, 1, 24, 0, 0, 0);
    return NULL;
}
static vt_tensor *f_gelulin(vt_tape *t, vt_tensor **in, int v) {
    (void)v;
    return vt_op_gelu_linear(t, in[0], in[1], in[2]);
}
static vt_tensor *b_patch(vt_tensor **in, vt_rng *r) {
    in[0] = new_input(r, 1, 4, 2, 3, 8, 8);
    in[1] = new_input(r, 0.3f, 4, 16, 3, 4, 4);
    in[2] = new_input(r, 0.1f, 1, 16, 0, 0, 0);
    return NULL;
}
static vt_tensor *f_patch(vt_tape *t, vt_tensor **in, int v) {
    (void)v;
    return vt_op_patch_embed(t, in[0], in[1], in[2], 4);
}
static vt_tensor *b_attn(vt_tensor **in, vt_rng *r) {
    for (int i = 0; i < 3; i++) in[i] = new_input(r, 2, 4, 2, 2, 9, 8);
    return NULL;
}
/* variants: 0 keep P, 1 recompute, 2 keep with dropout, 3 recompute with dropout */
static vt_tensor *f_attn(vt_tape *t, vt_tensor **in, int v) {
    return vt_op_attention(t, in[0], in[1], in[2], 0.35f, v >= 2 ? 0.2f : 0.0f, !(v & 1));
}
static vt_tensor *b_attn_qkv(vt_tensor **in, vt_rng *r) {
    in[0] = new_input(r, 2, 3, 2, 9, 3 * 2 * 8, 0);
    return NULL;
}
static vt_tensor *f_attn_qkv(vt_tape *t, vt_tensor **in, int v) {
    return vt_op_attention_qkv(t, in[0], 2, 0.35f, v >= 2 ? 0.2f : 0.0f, !(v & 1));
}
static vt_tensor *b_matmul(vt_tensor **in, vt_rng *r) {
    in[0] = new_input(r, 1, 3, 3, 7, 7, 0); /* square, so every transposition fits */
    in[1] = new_input(r, 1, 3, 3, 7, 7, 0);
    return NULL;
}
static vt_tensor *f_matmul(vt_tape *t, vt_tensor **in, int v) { return vt_op_matmul(t, in[0], in[1], v >> 1, v & 1); }

static const op_case ops[] = {
    {"linear", 3, 2, 2e-6, 1e-3, b_linear, f_linear, 1},
    {"layernorm_linear", 5, 8, 2e-6, 1e-3, b_lnlin, f_lnlin, 1},
    {"gelu_linear", 3, 2, 2e-6, 1e-3, b_gelulin, f_gelulin, 1},
    {"patch_embed", 3, 2, 2e-6, 1e-3, b_patch, f_patch, 1},
    {"attention", 3, 0, 1e-5, 5e-3, b_attn, f_attn, 4},
    {"attention_qkv", 1, 0, 1e-5, 5e-3, b_attn_qkv, f_attn_qkv, 4},
    {"matmul", 2, 0, 2e-6, 1e-3, b_matmul, f_matmul, 4},
};

/* The output and every input gradient of one run, concatenated. */
typedef struct {
    float *v;
    size_t n;
} run_result;

static run_result run_op(const op_case *oc, int variant, int bf16, int copies) {
    vt_arena_reset(&store);
    vt_rng r;
    vt_rng_seed(&r, 1234);
    vt_tensor *in[MAX_T] = {0};
    oc->build(in, &r);
    uint16_t *w16[MAX_T] = {0};
    for (int i = 0; i < oc->n_in; i++)
        if (copies && (oc->weight_mask >> i & 1)) {
            w16[i] = malloc((size_t)in[i]->size * sizeof(uint16_t));
            vt_k.bf16_round(in[i]->data, w16[i], (size_t)in[i]->size);
            in[i]->bf16 = w16[i];
        }
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    tape.training = 1;
    tape.bf16 = bf16;
    vt_rng_seed(&tape_rng, 777);
    vt_tensor *out = oc->forward(&tape, in, variant);
    vt_rng g;
    vt_rng_seed(&g, 99);
    for (int64_t i = 0; i < out->size; i++) out->grad[i] = (float)(2 * vt_rng_uniform(&g) - 1);
    vt_tape_replay(&tape);
    run_result res = {NULL, (size_t)out->size};
    for (int i = 0; i < oc->n_in; i++) res.n += (size_t)in[i]->size;
    res.v = malloc(res.n * sizeof(float));
    memcpy(res.v, out->data, (size_t)out->size * sizeof(float));
    size_t o = (size_t)out->size;
    for (int i = 0; i < oc->n_in; i++) {
        memcpy(res.v + o, in[i]->grad, (size_t)in[i]->size * sizeof(float));
        o += (size_t)in[i]->size;
        free(w16[i]);
    }
    tape.bf16 = 0;
    return res;
}

static void compare(const char *what, const run_result *a, const run_result *b, double rms_tol, double max_tol) {
    double num = 0, den = 0, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < a->n; i++) {
        double d = (double)a->v[i] - b->v[i];
        num += d * d;
        den += (double)b->v[i] * b->v[i];
    }
    double scale = sqrt(den / (double)a->n) + 1e-30;
    for (size_t i = 0; i < a->n; i++) {
        double d = fabs((double)a->v[i] - b->v[i]) / scale;
        if (!(d <= worst)) worst = d, at = i;
    }
    double rms = sqrt(num / (den + 1e-300));
    CHECK(rms <= rms_tol && worst <= max_tol, "%s: relative RMS %.3g (tol %.3g), max %.3g at %zu (tol %.3g): %.9g vs %.9g",
          what, rms, rms_tol, worst, at, max_tol, a->v[at], b->v[at]);
}

static void test_ops(void) {
    vt_kernels saved = vt_k, ref = vt_k;
    ref.gemm = ref_gemm;
    ref.gemm_bias = ref_gemm_bias;
    ref.gemm_prefetch = ref_gemm_prefetch;
    ref.gemm_sums = ref_gemm_sums;
    for (size_t c = 0; c < sizeof ops / sizeof *ops; c++)
        for (int v = 0; v < ops[c].variants; v++) {
            char what[160];
            vt_k = ref;
            run_result want = run_op(&ops[c], v, 0, 0);
            vt_k = saved;
            for (int copies = 0; copies < (ops[c].weight_mask ? 2 : 1); copies++) {
                run_result got = run_op(&ops[c], v, 1, copies);
                snprintf(what, sizeof what, "%s variant %d%s on %s against rounded operands + scalar GEMM",
                         ops[c].name, v, copies ? " (bf16 weight copy)" : "", vt_k.name);
                CHECK(got.n == want.n, "%s: sizes", what);
                if (got.n == want.n) compare(what, &got, &want, ops[c].rms_tol, ops[c].max_tol);
                run_result again = run_op(&ops[c], v, 1, copies);
                CHECK(again.n == got.n && memcmp(again.v, got.v, got.n * sizeof(float)) == 0,
                      "%s variant %d: a second bf16 run gives other bits", ops[c].name, v);
                free(got.v);
                free(again.v);
            }
            free(want.v);
        }
}

/* ---------------------------------------------------------------- the model */

static vt_config small_cfg(void) {
    vt_config c;
    vt_config_defaults(&c);
    const char *sets[] = {"model.width=16", "model.depth=2", "model.heads=2", "model.mlp_ratio=2",
                          "model.patch_size=4", "model.img_size=8", "model.in_chans=3", "model.num_classes=5",
                          "model.qkv_bias=true", "data.kind=synthetic", "train.precision=bf16"};
    for (size_t i = 0; i < sizeof sets / sizeof *sets; i++)
        CHECK(vt_config_set(&c, sets[i]) == VT_OK, "set %s: %s", sets[i], vt_last_error());
    CHECK(vt_resolve(&c) == VT_OK, "resolve: %s", vt_last_error());
    return c;
}

/* logits then every gradient of one forward + backward with tape.bf16 = bf16. */
static run_result model_step(vt_vit *m, const float *img, int bf16) {
    vt_vit_zero_grad(m);
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    tape.training = 1;
    tape.bf16 = bf16;
    vt_rng_seed(&tape_rng, 5);
    int64_t shape[4] = {2, 3, 8, 8};
    vt_tensor *x = vt_tensor_wrap(&arena, (float *)img, 4, shape);
    vt_tensor *logits = vt_vit_forward(m, &tape, x);
    int labels[2] = {1, 3};
    vt_tape_backward(&tape, vt_op_cross_entropy(&tape, logits, labels, NULL, 0.0f));
    run_result r = {malloc(((size_t)logits->size + (size_t)m->n_params) * sizeof(float)),
                    (size_t)logits->size + (size_t)m->n_params};
    memcpy(r.v, logits->data, (size_t)logits->size * sizeof(float));
    memcpy(r.v + logits->size, m->grads, (size_t)m->n_params * sizeof(float));
    tape.bf16 = 0;
    return r;
}

/* The weights' bf16 copies (the amx and dpbf16 paths): on exactly the GEMM weights, the
 * bits of rounding the weights as they are packed (plain), refreshed by the optimizer. */
static void check_copies(vt_vit *m, const vt_config *c, const float *img, const run_result *plain) {
    uint16_t *buf = NULL;
    CHECK(vt_bf16_weights_attach(m, &buf) == VT_OK && buf, "attach: %s", vt_last_error());
    CHECK(vt_bf16_weights_attached(m), "attached");
    int which_ok = 1;
    for (int i = 0; i < m->n_p; i++) which_ok &= (m->p[i].t.bf16 != NULL) == (m->p[i].decay != 0);
    CHECK(which_ok, "copies on exactly the weight-decay parameters (linear and convolution weights)");
    run_result copied = model_step(m, img, 1);
    CHECK(copied.n == plain->n && memcmp(copied.v, plain->v, plain->n * sizeof(float)) == 0,
          "bf16 forward + backward with the weights' copies gives the bits of rounding them when packed");
    free(copied.v);

    for (int opt = 0; opt < 2; opt++) {
        vt_optim o;
        vt_optim_config oc = c->optim;
        oc.name = opt ? VT_OPT_SGD : VT_OPT_ADAMW;
        CHECK(vt_optim_init(&o, &oc, m->n_params) == VT_OK, "optim init");
        vt_optim_step(&o, m, 1e-2f);
        long bad = -1;
        for (int i = 0; i < m->n_p && bad < 0; i++) {
            if (!m->p[i].t.bf16) continue;
            uint16_t *want = malloc((size_t)m->p[i].t.size * sizeof(uint16_t));
            scalar_t.bf16_round(m->p[i].t.data, want, (size_t)m->p[i].t.size);
            if (memcmp(want, m->p[i].t.bf16, (size_t)m->p[i].t.size * sizeof(uint16_t)) != 0) bad = i;
            free(want);
        }
        CHECK(bad < 0, "%s step: the bf16 copy of %s is not the rounding of the updated weight", opt ? "SGD" : "AdamW",
              bad < 0 ? "-" : m->p[bad].name);
        vt_optim_free(&o);
    }
    vt_bf16_weights_detach(m, buf);
    CHECK(!vt_bf16_weights_attached(m), "detached");
}

static void test_model(void) {
    vt_config c = small_cfg();
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 11) == VT_OK, "init: %s", vt_last_error());
    float img[2 * 3 * 8 * 8];
    vt_rng r;
    vt_rng_seed(&r, 3);
    for (size_t i = 0; i < sizeof img / sizeof *img; i++) img[i] = (float)(2 * vt_rng_uniform(&r) - 1);

    run_result plain = model_step(&m, img, 1), f32 = model_step(&m, img, 0);
    double num = 0, den = 0;
    for (size_t i = 0; i < plain.n; i++) num += (plain.v[i] - f32.v[i]) * (double)(plain.v[i] - f32.v[i]),
                                         den += (double)f32.v[i] * f32.v[i];
    CHECK(num > 0 && sqrt(num / den) < 5e-2, "bf16 against float32: relative RMS %.3g (expected small, not 0)",
          sqrt(num / (den + 1e-300)));
    CHECK(!vt_bf16_weights_attached(&m), "a new model has no bf16 copies");
    if (vt_kernels_bf16_path() == VT_BF16_FMA) { /* precision.h: no copies on the fma path */
        uint16_t *buf = NULL;
        CHECK(vt_bf16_weights_attach(&m, &buf) == VT_OK && !buf && !vt_bf16_weights_attached(&m),
              "attach on the fma path keeps no copies: %s", vt_last_error());
    } else {
        check_copies(&m, &c, img, &plain);
    }
    free(plain.v);
    free(f32.v);
    vt_vit_free(&m);
}

int main(void) {
    if (tape_fixture_init()) return 1;
    vt_kernels_table(VT_ISA_SCALAR, &scalar_t);
    test_ops();
    test_model();
    tape_fixture_done();
    return test_summary();
}
