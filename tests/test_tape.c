/* test_tape.c - the tape end to end: composite forwards gradient-checked through
 * vt_tape_backward, accumulation into tensors used twice, evaluation mode recording
 * nothing, arena reuse after reset, the arena's rewind (in place and across chained
 * blocks), vt_aligned_alloc's huge-page blocks, the large-buffer policy (vt_alloc_policy)
 * and bitwise-reproducible steps.
 *
 * Models:
 *  - "mlp" (the residual fan-out composite): x -> layernorm -> linear -> gelu -> linear
 *    -> add(x, .) -> mean_tokens -> linear -> cross_entropy, x (2, 5, 6) trainable.
 *  - "vit": a one-block ViT: patch_embed (8 x 12 image, P = 4) -> cat_cls -> add pos
 *    (1, N, D) -> layernorm -> linear qkv -> split_heads -> attention (heads merged) ->
 *    linear -> mul_channels -> drop_path -> add residual -> layernorm -> select_token ->
 *    dropout -> linear head -> cross_entropy (smoothing 0.1).
 * Gradient check: central differences with h = 1e-2 on every parameter element (and
 * the mlp's input), tolerance |analytic - numeric| <= 3e-4 + 5e-3 |numeric| (the loss
 * is O(1) and float32: rounding contributes ~1e-5 to the quotient; a wrong backward
 * is off by far more). Dropout-type ops are off in the gradient checks and on (with
 * the rng reseeded per step) in the determinism check. */
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "rng.h"
#include "status.h"
#include "tape.h"
#include "tape_fixture.h"
#include "tensor.h"

#define GC_H 1e-2
#define GC_ATOL 3e-4
#define GC_RTOL 5e-3
#define MAX_PARAMS 24


typedef struct {
    vt_tensor *p[MAX_PARAMS];
    const char *name[MAX_PARAMS];
    int n;
    int B, N, D, Dh, K, H, P, Hi, Wi, C;
    float drop;
    vt_tensor *x;   /* mlp input / vit image (not a parameter) */
    int labels[8];
} model;

static vt_tensor *param(model *m, const char *name, vt_rng *r, float lo, float hi, int ndim,
                        int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    int64_t shape[4] = {d0, d1, d2, d3};
    vt_tensor *t = vt_tensor_new(&store, 1, ndim, shape);
    for (int64_t i = 0; i < t->size; i++) t->data[i] = lo + (hi - lo) * (float)vt_rng_uniform(r);
    VT_ASSERT(m->n < MAX_PARAMS, "too many params");
    m->p[m->n] = t;
    m->name[m->n++] = name;
    return t;
}

static void zero_grads(model *m) {
    for (int i = 0; i < m->n; i++) memset(m->p[i]->grad, 0, (size_t)m->p[i]->size * sizeof(float));
}

/* ---- mlp: params 0 x, 1 g, 2 b, 3 W1, 4 b1, 5 W2, 6 b2, 7 Wh, 8 bh */
static void mlp_init(model *m, vt_rng *r, int B, int N, int D, int Dh, int K) {
    memset(m, 0, sizeof *m);
    m->B = B; m->N = N; m->D = D; m->Dh = Dh; m->K = K;
    param(m, "x", r, -1, 1, 3, B, N, D, 0);
    param(m, "ln.g", r, 0.5f, 1.5f, 1, D, 0, 0, 0);
    param(m, "ln.b", r, -0.5f, 0.5f, 1, D, 0, 0, 0);
    param(m, "fc1.w", r, -0.6f, 0.6f, 2, Dh, D, 0, 0);
    param(m, "fc1.b", r, -0.5f, 0.5f, 1, Dh, 0, 0, 0);
    param(m, "fc2.w", r, -0.6f, 0.6f, 2, D, Dh, 0, 0);
    param(m, "fc2.b", r, -0.5f, 0.5f, 1, D, 0, 0, 0);
    param(m, "head.w", r, -1, 1, 2, K, D, 0, 0);
    param(m, "head.b", r, -0.5f, 0.5f, 1, K, 0, 0, 0);
    for (int b = 0; b < B; b++) m->labels[b] = (b * 2 + 1) % K;
}

static vt_tensor *mlp_forward(model *m, vt_tape *t) {
    vt_tensor **p = m->p;
    vt_tensor *h = vt_op_layernorm(t, p[0], p[1], p[2], 1e-5f);
    h = vt_op_linear(t, h, p[3], p[4]);
    h = vt_op_gelu(t, h);
    h = vt_op_linear(t, h, p[5], p[6]);
    h = vt_op_add(t, p[0], h);
    h = vt_op_mean_tokens(t, h, 0);
    h = vt_op_linear(t, h, p[7], p[8]);
    return vt_op_cross_entropy(t, h, m->labels, NULL, 0.0f);
}

/* ---- vit: params 0 pe.w, 1 pe.b, 2 cls, 3 pos, 4 ln1.g, 5 ln1.b, 6 qkv.w, 7 qkv.b,
 * 8 proj.w, 9 proj.b, 10 ls.gamma, 11 norm.g, 12 norm.b, 13 head.w, 14 head.b */
static void vit_init(model *m, vt_rng *r, int B, int C, int Hi, int Wi, int P, int D, int H, int K, float drop) {
    memset(m, 0, sizeof *m);
    m->B = B; m->C = C; m->Hi = Hi; m->Wi = Wi; m->P = P; m->D = D; m->H = H; m->K = K;
    m->N = 1 + (Hi / P) * (Wi / P);
    m->drop = drop;
    int64_t ishape[4] = {B, C, Hi, Wi};
    m->x = vt_tensor_new(&store, 0, 4, ishape);
    for (int64_t i = 0; i < m->x->size; i++) m->x->data[i] = (float)(2.0 * vt_rng_uniform(r) - 1.0);
    param(m, "pe.w", r, -0.3f, 0.3f, 4, D, C, P, P);
    param(m, "pe.b", r, -0.5f, 0.5f, 1, D, 0, 0, 0);
    param(m, "cls", r, -1, 1, 3, 1, 1, D, 0);
    param(m, "pos", r, -0.5f, 0.5f, 3, 1, m->N, D, 0);
    param(m, "ln1.g", r, 0.5f, 1.5f, 1, D, 0, 0, 0);
    param(m, "ln1.b", r, -0.5f, 0.5f, 1, D, 0, 0, 0);
    param(m, "qkv.w", r, -0.6f, 0.6f, 2, 3 * D, D, 0, 0);
    param(m, "qkv.b", r, -0.5f, 0.5f, 1, 3 * D, 0, 0, 0);
    param(m, "proj.w", r, -0.6f, 0.6f, 2, D, D, 0, 0);
    param(m, "proj.b", r, -0.5f, 0.5f, 1, D, 0, 0, 0);
    param(m, "ls.gamma", r, 0.5f, 1.5f, 1, D, 0, 0, 0);
    param(m, "norm.g", r, 0.5f, 1.5f, 1, D, 0, 0, 0);
    param(m, "norm.b", r, -0.5f, 0.5f, 1, D, 0, 0, 0);
    param(m, "head.w", r, -1, 1, 2, K, D, 0, 0);
    param(m, "head.b", r, -0.5f, 0.5f, 1, K, 0, 0, 0);
    for (int b = 0; b < B; b++) m->labels[b] = (b * 3 + 2) % K;
}

static vt_tensor *vit_forward(model *m, vt_tape *t) {
    vt_tensor **p = m->p;
    vt_tensor *x = vt_op_patch_embed(t, m->x, p[0], p[1], m->P);
    x = vt_op_cat_cls(t, p[2], x);
    x = vt_op_add(t, x, p[3]);
    vt_tensor *h = vt_op_layernorm(t, x, p[4], p[5], 1e-6f);
    h = vt_op_linear(t, h, p[6], p[7]);
    vt_tensor *q, *k, *v;
    vt_op_split_heads(t, h, m->H, &q, &k, &v);
    h = vt_op_attention(t, q, k, v, 1.0f / sqrtf((float)(m->D / m->H)), m->drop,
                        vt_attention_keep_probs((int)q->shape[2], m->D / m->H, t->bf16));
    h = vt_op_linear(t, h, p[8], p[9]);
    h = vt_op_mul_channels(t, h, p[10]);
    h = vt_op_drop_path(t, h, m->drop);
    x = vt_op_add(t, x, h);
    x = vt_op_layernorm(t, x, p[11], p[12], 1e-6f);
    x = vt_op_select_token(t, x, 0);
    x = vt_op_dropout(t, x, m->drop);
    x = vt_op_linear(t, x, p[13], p[14]);
    return vt_op_cross_entropy(t, x, m->labels, NULL, 0.1f);
}

typedef vt_tensor *(*model_fwd)(model *m, vt_tape *t);

/* One step: reset, forward, and (grad) backward. Returns the loss. */
static float step(model *m, model_fwd f, int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
    vt_rng_seed(&tape_rng, 99);
    if (grad) zero_grads(m);
    vt_tensor *loss = f(m, &tape);
    if (grad) vt_tape_backward(&tape, loss);
    return loss->data[0];
}

typedef struct {
    model *m;
    model_fwd f;
} model_loss_ctx;

/* The loss of a step without gradients (gc_loss_fn). */
static double model_loss(void *p) {
    model_loss_ctx *c = p;
    return step(c->m, c->f, 0);
}

static void grad_check_model(const char *name, model *m, model_fwd f) {
    step(m, f, 1);
    model_loss_ctx lc = {m, f};
    for (int i = 0; i < m->n; i++) {
        vt_tensor *p = m->p[i];
        float *ana = vt_arena_alloc(&store, (size_t)p->size * sizeof(float));
        memcpy(ana, p->grad, (size_t)p->size * sizeof(float));
        gc_result r = gc_check_array(m->name[i], p->data, ana, p->size, 0, 1, GC_H, GC_ATOL, GC_RTOL, model_loss, &lc);
        CHECK(r.bad == 0, "%s: d loss / d %s: %d of %d elements off (worst %.3g of the tolerance)", name, m->name[i],
              r.bad, r.checked, r.worst_rel);
        CHECK(r.max_ana > 1e-4, "%s: gradient of %s is all zero", name, m->name[i]);
    }
}

/* A tensor used twice receives the sum of both contributions. */
static void test_accumulation(vt_rng *r) {
    int64_t shape[3] = {2, 3, 4};
    vt_tensor *x = vt_tensor_new(&store, 1, 3, shape);
    for (int i = 0; i < 24; i++) x->data[i] = (float)(vt_rng_uniform(r) - 0.5);
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    vt_tensor *y = vt_op_add(&tape, x, x);
    for (int i = 0; i < 24; i++) y->grad[i] = (float)(i + 1);
    vt_tape_replay(&tape);
    int bad = 0;
    for (int i = 0; i < 24; i++) bad += x->grad[i] != 2.0f * (float)(i + 1);
    CHECK(bad == 0, "add(x, x): %d grads are not 2 dy", bad);

    /* c = x x^T per batch (matmul with both operands x): dx = (dc + dc^T) x. */
    memset(x->grad, 0, 24 * sizeof(float));
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    vt_tensor *c = vt_op_matmul(&tape, x, x, 0, 1);
    for (int i = 0; i < 18; i++) c->grad[i] = (float)(vt_rng_uniform(r) - 0.5);
    vt_tape_replay(&tape);
    double ref[24];
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 4; k++) {
                double s = 0;
                for (int j = 0; j < 3; j++)
                    s += ((double)c->grad[b * 9 + i * 3 + j] + c->grad[b * 9 + j * 3 + i]) * x->data[b * 12 + j * 4 + k];
                ref[b * 12 + i * 4 + k] = s;
            }
    CHECK_ARRAY_CLOSE(x->grad, ref, 24, 1e-5, 1e-4, "matmul(x, x^T) accumulates both operand grads");

    /* Fan-out through two different ops: gelu(x) + mul_channels(x, g) summed. */
    memset(x->grad, 0, 24 * sizeof(float));
    int64_t gs[1] = {4};
    vt_tensor *g = vt_tensor_new(&store, 0, 1, gs);
    for (int i = 0; i < 4; i++) g->data[i] = (float)(i + 1);
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    vt_tensor *s = vt_op_add(&tape, vt_op_gelu(&tape, x), vt_op_mul_channels(&tape, x, g));
    CHECK(tape.n == 3, "fan-out records 3 entries, got %d", tape.n);
    for (int i = 0; i < 24; i++) s->grad[i] = 1.0f;
    vt_tape_replay(&tape);
    for (int i = 0; i < 24; i++) {
        double xv = x->data[i];
        ref[i] = 0.5 * (1 + erf(xv / sqrt(2.0))) + xv * exp(-0.5 * xv * xv) / sqrt(2 * M_PI) + (i % 4 + 1);
    }
    CHECK_ARRAY_CLOSE(x->grad, ref, 24, 1e-5, 1e-4, "gelu(x) + x g: dx is the sum of both paths");
}

/* Fresh gradients (tape.h): three scopes like model blocks, each
 *   h = linear(x, W1); a = linear(h, W2); b = gelu(h); y = add(a, b);
 *   v = gelu_linear(linear(y, W1), W2); x = add(v, x)
 * with the last add outside the scope. h has two consumers, the overwriting linear
 * recorded first (so its backward runs last): h's gradient must be accumulated, while
 * a's, b's, y's and gelu_linear's input's (one overwriting consumer each) are written.
 * The gradients of x and of W1, W2 must equal those without scopes (every gradient
 * zeroed and accumulated); treating h as fresh, or not zeroing, fails this. Twice, for
 * the region reuse. */
static void test_fresh_grads(vt_rng *r) {
    const int rows = 6, D = 8, L = 3;
    int64_t xs[2] = {rows, D}, ws[2] = {D, D};
    vt_tensor *x0 = vt_tensor_new(&store, 1, 2, xs), *w1[3], *w2[3];
    for (int i = 0; i < rows * D; i++) x0->data[i] = (float)(vt_rng_uniform(r) - 0.5);
    for (int l = 0; l < L; l++) {
        w1[l] = vt_tensor_new(&store, 1, 2, ws);
        w2[l] = vt_tensor_new(&store, 1, 2, ws);
        for (int i = 0; i < D * D; i++) {
            w1[l]->data[i] = (float)(vt_rng_uniform(r) - 0.5);
            w2[l]->data[i] = (float)(vt_rng_uniform(r) - 0.5);
        }
    }
    float ref[(3 * 2 + 1) * 64];
    for (int run = 0; run < 3; run++) {
        int scoped = run > 0; /* run 0: the reference without scopes */
        tape.scopes_enabled = scoped;
        memset(x0->grad, 0, sizeof(float) * rows * D);
        for (int l = 0; l < L; l++) {
            memset(w1[l]->grad, 0, sizeof(float) * D * D);
            memset(w2[l]->grad, 0, sizeof(float) * D * D);
        }
        vt_arena_reset(&arena);
        vt_tape_clear(&tape);
        tape.grad_enabled = 1;
        vt_tensor *x = x0;
        for (int l = 0; l < L; l++) {
            vt_tape_scope_begin(&tape);
            vt_tensor *h = vt_op_linear(&tape, x, w1[l], NULL);
            vt_tensor *a = vt_op_linear(&tape, h, w2[l], NULL);
            vt_tensor *y = vt_op_add(&tape, a, vt_op_gelu(&tape, h));
            vt_tensor *v = vt_op_gelu_linear(&tape, vt_op_linear(&tape, y, w1[l], NULL), w2[l], NULL);
            vt_tape_scope_end(&tape);
            x = vt_tape_scope_result(&tape, vt_op_add(&tape, v, x));
        }
        for (int i = 0; i < rows * D; i++) x->grad[i] = (float)(i % 7) - 3.0f;
        vt_tape_replay(&tape);
        float got[(3 * 2 + 1) * 64];
        memcpy(got, x0->grad, sizeof(float) * rows * D);
        for (int l = 0; l < L; l++) {
            memcpy(got + 64 + 128 * l, w1[l]->grad, sizeof(float) * D * D);
            memcpy(got + 128 + 128 * l, w2[l]->grad, sizeof(float) * D * D);
        }
        if (!scoped) {
            memcpy(ref, got, sizeof ref);
            continue;
        }
        int bad = 0;
        for (int i = 0; i < rows * D; i++) bad += got[i] != ref[i];
        for (int i = 64; i < (3 * 2 + 1) * 64; i++) bad += got[i] != ref[i];
        CHECK(bad == 0, "run %d: %d gradients differ with grad scopes (fresh gradients) from without", run, bad);
    }
    tape.scopes_enabled = 1;
}

/* Evaluation mode: nothing recorded, no grad buffers, same loss, parameter grads
 * untouched. */
static void test_grad_disabled(model *m, model_fwd f, const char *name) {
    float lg = step(m, f, 1);
    size_t used_grad = arena.total_used;
    zero_grads(m);
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 0;
    vt_rng_seed(&tape_rng, 99);
    vt_tensor *loss = f(m, &tape);
    CHECK(tape.n == 0, "%s: %d entries recorded with gradients disabled", name, tape.n);
    CHECK(loss->grad == NULL, "%s: loss has a grad buffer with gradients disabled", name);
    CHECK(loss->data[0] == lg, "%s: eval loss %.9g != training-forward loss %.9g", name, loss->data[0], lg);
    CHECK(arena.total_used < used_grad, "%s: eval uses %zu arena bytes, training step %zu", name,
          arena.total_used, used_grad);
    int nonzero = 0;
    for (int i = 0; i < m->n; i++)
        for (int64_t e = 0; e < m->p[i]->size; e++) nonzero += m->p[i]->grad[e] != 0.0f;
    CHECK(nonzero == 0, "%s: %d parameter grads written with gradients disabled", name, nonzero);
}

/* After a reset the same step allocates no new block; the same step twice gives
 * bitwise equal grads. */
static void test_reuse_and_determinism(model *m, model_fwd f, const char *name) {
    vt_arena_free(&arena);
    vt_arena_init(&arena, 4096);
    float l1 = step(m, f, 1);
    CHECK(arena.head->next != NULL, "%s: first step should have grown the 4 KiB arena", name);
    int64_t total = 0;
    for (int i = 0; i < m->n; i++) total += m->p[i]->size;
    float *g1 = vt_arena_alloc(&store, (size_t)total * sizeof(float));
    for (int i = 0, off = 0; i < m->n; off += (int)m->p[i]->size, i++)
        memcpy(g1 + off, m->p[i]->grad, (size_t)m->p[i]->size * sizeof(float));

    float l2 = step(m, f, 1);
    vt_arena_block *blk = arena.head;
    CHECK(blk->next == NULL, "%s: step after reset chained a new arena block", name);
    float l3 = step(m, f, 1);
    CHECK(arena.head == blk && blk->next == NULL, "%s: third step allocated a new arena block", name);
    CHECK(l1 == l2 && l2 == l3, "%s: losses differ between identical steps: %.9g %.9g %.9g", name, l1, l2, l3);
    int diff = 0;
    for (int i = 0, off = 0; i < m->n; off += (int)m->p[i]->size, i++)
        diff += memcmp(g1 + off, m->p[i]->grad, (size_t)m->p[i]->size * sizeof(float)) != 0;
    CHECK(diff == 0, "%s: %d parameter grads differ bitwise between identical steps", name, diff);
}

/* vt_arena_rewind_keep: everything since the mark given back but one buffer, moved. */
static void test_rewind_keep(void) {
    vt_arena a;
    vt_arena_init(&a, 1 << 16);
    (void)vt_arena_alloc(&a, 1000);
    vt_arena_mark m = vt_arena_get_mark(&a);
    unsigned char *at_mark = a.head->base + a.head->used;
    (void)vt_arena_alloc(&a, 3000);
    float *keep = vt_arena_alloc(&a, 100 * sizeof(float));
    for (int i = 0; i < 100; i++) keep[i] = (float)i;
    float *moved = vt_arena_rewind_keep(&a, m, keep, 100 * sizeof(float));
    int same = 1;
    for (int i = 0; i < 100; i++) same &= moved[i] == (float)i;
    CHECK((unsigned char *)moved == at_mark && same && a.total_used == m.total_used + 448,
          "in place: kept buffer at the mark (%d), contents (%d), %zu bytes in use", (unsigned char *)moved == at_mark,
          same, a.total_used);

    /* A span that chains blocks: they are freed, one block holds the kept buffer, and
     * the same span again fits in it without chaining. */
    vt_arena_free(&a);
    vt_arena_init(&a, 4096);
    (void)vt_arena_alloc(&a, 1000);
    for (int round = 0; round < 2; round++) {
        m = vt_arena_get_mark(&a);
        vt_arena_block *head = a.head;
        float *k = NULL;
        for (int j = 0; j < 10; j++) {
            k = vt_arena_alloc(&a, 4000 * sizeof(float));
            for (int i = 0; i < 4000; i++) k[i] = (float)(j * 4000 + i);
        }
        int chained = a.head != head;
        moved = vt_arena_rewind_keep(&a, m, k, 4000 * sizeof(float));
        same = 1;
        for (int i = 0; i < 4000; i++) same &= moved[i] == (float)(36000 + i);
        int blocks = 0;
        for (vt_arena_block *b = a.head; b; b = b->next) blocks++;
        CHECK(same && chained == (round == 0) && a.total_used == m.total_used + 16000,
              "round %d: contents (%d), chained %d, %zu bytes in use", round, same, chained, a.total_used);
        CHECK(blocks == 2, "round %d: %d blocks after the rewind (the first and the kept one)", round, blocks);
    }
    vt_arena_free(&a);
}

/* Whether the mapping holding p carries MADV_HUGEPAGE ("hg" in its smaps VmFlags). */
static int mapping_has_hugepage_hint(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int inside = 0, hint = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line */
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0)
            hint = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return hint;
}

/* vt_aligned_alloc: 64-byte alignment for small blocks; 1 MiB and more are whole 2 MiB
 * pages (usable size rounded up), 2 MiB aligned, with the transparent-huge-page hint
 * (where the kernel has THP). */
static void test_aligned_alloc(void) {
    float *small = vt_aligned_alloc(1000);
    CHECK(small && (uintptr_t)small % 64 == 0, "1000 bytes at %p", (void *)small);
    size_t n = (3u << 20) / sizeof(float) + 5; /* 3 MiB + 20 bytes: two pages and a bit */
    float *big = vt_aligned_alloc(n * sizeof(float));
    CHECK(big && (uintptr_t)big % (2u << 20) == 0, "3 MiB at %p, not 2 MiB aligned", (void *)big);
    if (big) {
        CHECK(malloc_usable_size(big) >= (4u << 20), "3 MiB block of %zu usable bytes, not rounded to 2 pages",
              malloc_usable_size(big));
        FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
        if (thp) {
            fclose(thp);
            CHECK(mapping_has_hugepage_hint(big) == 1, "3 MiB block without the MADV_HUGEPAGE hint");
        }
    }
    free(small);
    free(big);
}

/* vt_alloc_policy: after a 4 MiB buffer is freed, a 1 MiB one is still a mapping of its
 * own (glibc's default raises its mmap threshold to 4 MiB at that free and serves the
 * next one from its heap, where it stays resident once freed); a smaller one is not.
 * Not under AddressSanitizer, whose allocator replaces glibc's (mallopt and mallinfo2
 * do not describe it). */
static void test_alloc_policy(void) {
    vt_alloc_policy();
#if defined(__SANITIZE_ADDRESS__)
    fprintf(stderr, "test_tape: AddressSanitizer's allocator: the large-buffer policy is not tested\n");
#else
    free(malloc(4u << 20));
    size_t sizes[2] = {1u << 20, (1u << 20) - (64u << 10)};
    for (int i = 0; i < 2; i++) {
        size_t before = mallinfo2().hblks;
        void *p = malloc(sizes[i]);
        size_t mapped = mallinfo2().hblks - before;
        CHECK(p && mapped == (i == 0), "a %zu-byte buffer after a freed 4 MiB one: %zu new mappings, want %d",
              sizes[i], mapped, i == 0);
        free(p);
    }
#endif
}

int main(void) {
    if (tape_fixture_init() != 0) return 1;
    test_rewind_keep();
    test_aligned_alloc();
    test_alloc_policy();
    tape.training = 1;
    vt_rng r;
    vt_rng_seed(&r, 2024);

    model mlp, vit, big_mlp, big_vit;
    mlp_init(&mlp, &r, 2, 5, 6, 8, 3);
    grad_check_model("mlp", &mlp, mlp_forward);
    vit_init(&vit, &r, 2, 3, 8, 12, 4, 6, 2, 4, 0.0f);
    grad_check_model("vit", &vit, vit_forward);

    test_accumulation(&r);
    test_fresh_grads(&r);
    test_grad_disabled(&mlp, mlp_forward, "mlp");
    test_grad_disabled(&vit, vit_forward, "vit");

    /* Shapes large enough that GEMMs, reductions and elementwise loops run threaded,
     * with dropout, attention dropout and drop-path active. */
    mlp_init(&big_mlp, &r, 4, 65, 64, 128, 10);
    test_reuse_and_determinism(&big_mlp, mlp_forward, "big mlp");
    vit_init(&big_vit, &r, 8, 3, 32, 32, 4, 64, 4, 10, 0.2f);
    test_reuse_and_determinism(&big_vit, vit_forward, "big vit");

    tape_fixture_done();
    return test_summary();
}
