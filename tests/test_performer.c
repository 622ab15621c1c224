/* test_performer.c - Performer (FAVOR+) attention (src/ops/performer.c,
 * src/performer_features.c, the model/training/checkpoint hooks in vit.c and train.c):
 *   - features: rows orthogonal within each block of hd rows, row norms chi(hd)
 *     distributed (mean, mean square), same seed same draw, other seed other draw;
 *   - estimator: for fixed q, k the mean over draws of phi(q).phi(k) (stabilisers undone,
 *     eps = 0) approaches exp(q.k / sqrt(hd)); the mean squared error of one draw shrinks
 *     as m grows;
 *   - the output does not depend on the stabiliser constants (eps = 0, shifted
 *     stabilisers) and stays finite for large q, k;
 *   - the linear form equals the explicitly normalised phi(Q) phi(K)^T V (both kernels);
 *   - finite-difference gradients for q, k, v with the features fixed (both kernels);
 *   - with a rotary PE (RoPE rotations R_p): the draw-average of phi(R_p q).phi(R_p' k)
 *     depends only on p' - p and approaches the softmax-kernel value;
 *   - the model: redraw exactly at multiples of redraw_every and never in evaluation,
 *     checkpoint round trip of pe.performer_w (and its errors), a tiny performer model
 *     with rope_mixed trains on synthetic data through vt_train_run, and a stopped-and-resumed run ends
 *     with the same features and bitwise the same weights as the straight run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "config_overrides.h"
#include "gradcheck.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "performer_features.h"
#include "resolve.h"
#include "test_runtime.h"
#include "train.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

static vt_arena arena;
static vt_tape tape;

static void reset(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
    tape.training = 0;
}

static vt_tensor *randn(vt_rng *r, int grad, float scale, int64_t B, int64_t H, int64_t N, int64_t hd) {
    int64_t shape[4] = {B, H, N, hd};
    vt_tensor *x = vt_tape_new(&tape, grad, 4, shape);
    for (int64_t i = 0; i < x->size; i++) x->data[i] = scale * (float)vt_rng_normal(r);
    return x;
}

/* One layer's features (H, m, hd) drawn with seed, redraw index 0; the caller frees them. */
static float *draw_features(int H, int m, int hd, uint64_t seed) {
    float *w = vt_xmalloc((size_t)H * m * hd * sizeof(float));
    vt_performer_draw(w, 1, H, m, hd, seed, 0);
    return w;
}

/* phi(q).phi(k) with the stabilisers undone, eps 0: the estimate of exp(q.k / sqrt(hd)). */
static double estimate(const float *q, const float *k, int hd, const float *w, int m, float *buf) {
    float *pq = buf, *pk = buf + m, sq, sk;
    float *work = vt_gemm_workspace(vt_performer_work_floats(1, m, hd));
    vt_performer_phi(q, 1, hd, w, m, VT_PERFORMER_POSITIVE, 0, 0.0f, 0.0f, pq, &sq, work);
    vt_performer_phi(k, 1, hd, w, m, VT_PERFORMER_POSITIVE, 1, 0.0f, 0.0f, pk, &sk, work);
    return vt_k.dot(pq, pk, (size_t)m) * exp((double)sq + sk);
}

static void test_features(void) {
    const int hd = 16, m = 40;
    float w[40 * 16], w2[40 * 16], w3[40 * 16];
    vt_performer_draw_head(w, m, hd, 11);
    vt_performer_draw_head(w2, m, hd, 11);
    vt_performer_draw_head(w3, m, hd, 12);
    CHECK(memcmp(w, w2, sizeof w) == 0, "same seed must give the same features");
    CHECK(memcmp(w, w3, sizeof w) != 0, "another seed must give other features");
    double worst = 0.0;
    for (int i = 0; i < m; i++)
        for (int j = i + 1; j < m && j / hd == i / hd; j++) {
            double d = vt_k.dot(w + i * hd, w + j * hd, hd);
            double ni = sqrt(vt_k.dot(w + i * hd, w + i * hd, hd));
            double nj = sqrt(vt_k.dot(w + j * hd, w + j * hd, hd));
            worst = fmax(worst, fabs(d) / (ni * nj));
        }
    CHECK(worst < 1e-5, "rows within a block must be orthogonal: worst |cos| %g", worst);
    /* Across blocks rows are independent, not orthogonal. */
    double across = fabs(vt_k.dot(w, w + hd * hd, hd));
    CHECK(across > 1e-4, "rows of different blocks are independent (|dot| %g)", across);

    const int big = 4096;
    float *wb = vt_xmalloc((size_t)big * hd * sizeof(float));
    vt_performer_draw(wb, 2, 2, big / 4, hd, 5, 3);
    double s1 = 0.0, s2 = 0.0;
    for (int i = 0; i < big; i++) {
        double n = sqrt(vt_k.dot(wb + (size_t)i * hd, wb + (size_t)i * hd, hd));
        s1 += n;
        s2 += n * n;
    }
    double chi_mean = sqrt(2.0) * exp(lgamma((hd + 1) / 2.0) - lgamma(hd / 2.0)); /* 3.9211 */
    CHECK_CLOSE(s1 / big, chi_mean, 0.0, 0.01, "mean row norm vs chi(%d) mean", hd);
    CHECK_CLOSE(s2 / big, (double)hd, 0.0, 0.04, "mean squared row norm vs hd");
    CHECK_CLOSE(s1 / big, sqrt((double)hd), 0.0, 0.04, "mean row norm ~ sqrt(hd)");
    free(wb);
}

static void test_estimator(void) {
    const int hd = 16, draws = 300;
    float q[16], k[16];
    vt_rng r;
    vt_rng_seed(&r, 3);
    for (int j = 0; j < hd; j++) {
        q[j] = 0.4f * (float)vt_rng_normal(&r);
        k[j] = 0.5f * q[j] + 0.35f * (float)vt_rng_normal(&r);
    }
    double want = exp(vt_k.dot(q, k, hd) / sqrt((double)hd));
    const int ms[3] = {8, 64, 512};
    double mse[3], mean[3];
    float *w = vt_xmalloc(512 * 16 * sizeof(float)), buf[1024];
    for (int a = 0; a < 3; a++) {
        double s = 0.0, e2 = 0.0;
        for (int d = 0; d < draws; d++) {
            vt_performer_draw_head(w, ms[a], hd, vt_rng_derive(77, (uint64_t)a, (uint64_t)d));
            double est = estimate(q, k, hd, w, ms[a], buf);
            s += est;
            e2 += (est - want) * (est - want);
        }
        mean[a] = s / draws;
        mse[a] = e2 / draws;
    }
    CHECK(mse[1] < mse[0] && mse[2] < mse[1], "MSE must shrink with m: %g (m 8), %g (m 64), %g (m 512)",
          mse[0], mse[1], mse[2]);
    CHECK(mse[2] < 0.25 * mse[0], "MSE at m 512 (%g) well below m 8 (%g)", mse[2], mse[0]);
    /* Standard errors of these means are about 0.6% (m 512) and 4% (m 8) of the value. */
    CHECK_CLOSE(mean[2], want, 0.0, 0.03, "mean estimate over draws, m 512, vs exp(q.k/sqrt(hd))");
    CHECK_CLOSE(mean[0], want, 0.0, 0.2, "mean estimate over draws, m 8 (unbiased)");
    free(w);
}

/* The explicit quadratic form: A = phi(Q) phi(K)^T (N x N), out = (A / rowsum A) V. */
static void explicit_form(const float *q, const float *k, const float *v, int N, int hd, const float *w, int m,
                          vt_performer_kernel kern, float *out) {
    float *pq = vt_xmalloc((size_t)2 * N * m * sizeof(float)), *pk = pq + (size_t)N * m;
    float *work = vt_gemm_workspace(vt_performer_work_floats(N, m, hd));
    vt_performer_phi(q, N, hd, w, m, kern, 0, VT_PERFORMER_EPS, 0.0f, pq, NULL, work);
    vt_performer_phi(k, N, hd, w, m, kern, 1, VT_PERFORMER_EPS, 0.0f, pk, NULL, work);
    for (int i = 0; i < N; i++) {
        double acc[64] = {0}, den = 0.0;
        for (int j = 0; j < N; j++) {
            double a = vt_k.dot(pq + (size_t)i * m, pk + (size_t)j * m, (size_t)m);
            den += a;
            for (int c = 0; c < hd; c++) acc[c] += a * v[(size_t)j * hd + c];
        }
        for (int c = 0; c < hd; c++) out[(size_t)i * hd + c] = (float)(acc[c] / den);
    }
    free(pq);
}

static void test_linear_form(void) {
    const int B = 2, H = 3, N = 9, hd = 8, m = 24;
    vt_rng r;
    vt_rng_seed(&r, 9);
    float *w = draw_features(H, m, hd, 4);
    for (int kern = 0; kern < 2; kern++) {
        reset(0);
        vt_tensor *q = randn(&r, 0, 1.0f, B, H, N, hd), *k = randn(&r, 0, 1.0f, B, H, N, hd),
                  *v = randn(&r, 0, 1.0f, B, H, N, hd);
        vt_performer_opts o = {(vt_performer_kernel)kern, VT_PERFORMER_EPS, 0.0f, 0.0f};
        vt_tensor *out = vt_op_performer(&tape, q, k, v, w, m, &o);
        float ref[9 * 8];
        for (int bh = 0; bh < B * H; bh++) {
            size_t off = (size_t)bh * N * hd;
            explicit_form(q->data + off, k->data + off, v->data + off, N, hd, w + (size_t)(bh % H) * m * hd, m,
                          (vt_performer_kernel)kern, ref);
            CHECK_ARRAY_CLOSE(out->data + off, ref, N * hd, 1e-5, 1e-4, "linear vs explicit, kernel %d, bh %d",
                              kern, bh);
        }
    }
    free(w);
}

static void test_stabiliser(void) {
    const int B = 1, H = 2, N = 7, hd = 8, m = 32;
    vt_rng r;
    vt_rng_seed(&r, 21);
    float *w = draw_features(H, m, hd, 8);
    reset(0);
    vt_tensor *q = randn(&r, 0, 1.5f, B, H, N, hd), *k = randn(&r, 0, 1.5f, B, H, N, hd),
              *v = randn(&r, 0, 1.0f, B, H, N, hd);
    vt_performer_opts o0 = {VT_PERFORMER_POSITIVE, 0.0f, 0.0f, 0.0f};
    vt_performer_opts o1 = {VT_PERFORMER_POSITIVE, 0.0f, 2.5f, -3.0f};
    vt_performer_opts o2 = {VT_PERFORMER_POSITIVE, 0.0f, -4.0f, 1.5f};
    vt_tensor *a = vt_op_performer(&tape, q, k, v, w, m, &o0);
    vt_tensor *b = vt_op_performer(&tape, q, k, v, w, m, &o1);
    vt_tensor *c = vt_op_performer(&tape, q, k, v, w, m, &o2);
    CHECK_ARRAY_CLOSE(b->data, a->data, a->size, 1e-6, 1e-5, "output with shifted stabilisers (2.5, -3)");
    CHECK_ARRAY_CLOSE(c->data, a->data, a->size, 1e-6, 1e-5, "output with shifted stabilisers (-4, 1.5)");
    /* Default eps: the stabiliser only changes the weight of eps: O(eps) difference. */
    vt_performer_opts e0 = {VT_PERFORMER_POSITIVE, VT_PERFORMER_EPS, 0.0f, 0.0f};
    vt_tensor *d = vt_op_performer(&tape, q, k, v, w, m, &e0);
    CHECK_ARRAY_CLOSE(d->data, a->data, a->size, 1e-2, 1e-2, "eps 1e-4 vs eps 0");
    /* Large inputs: the unstabilised exp would overflow; the output stays finite. */
    vt_tensor *qb = randn(&r, 0, 40.0f, B, H, N, hd), *kb = randn(&r, 0, 40.0f, B, H, N, hd);
    vt_tensor *o = vt_op_performer(&tape, qb, kb, v, w, m, NULL);
    int finite = 1;
    for (int64_t i = 0; i < o->size; i++) finite &= isfinite(o->data[i]) != 0;
    CHECK(finite, "performer output must be finite for |q|, |k| ~ 100");
    free(w);
}

/* The performer's inputs and a fixed random R (gc_loss_fn ctx). */
typedef struct {
    vt_tensor *q, *k, *v;
    const float *w;
    int m;
    const vt_performer_opts *o;
    const float *R;
} perf_loss_ctx;

/* sum(out * R): its gradient w.r.t. q, k, v is checked by central differences. */
static double loss_of(void *p) {
    const perf_loss_ctx *c = p;
    vt_arena a2;
    vt_arena_init(&a2, 1 << 16);
    vt_tape t2;
    vt_tape_init(&t2, &a2);
    vt_tensor qq = *c->q, kk = *c->k, vv = *c->v;
    qq.grad = kk.grad = vv.grad = NULL;
    vt_tensor *out = vt_op_performer(&t2, &qq, &kk, &vv, c->w, c->m, c->o);
    double s = 0.0;
    for (int64_t i = 0; i < out->size; i++) s += (double)out->data[i] * c->R[i];
    vt_tape_free(&t2);
    vt_arena_free(&a2);
    return s;
}

static void test_gradients(void) {
    const int B = 2, H = 2, N = 5, hd = 4, m = 8;
    vt_rng r;
    vt_rng_seed(&r, 31);
    float *w = draw_features(H, m, hd, 2);
    for (int kern = 0; kern < 2; kern++) {
        reset(1);
        vt_tensor *q = randn(&r, 1, 0.8f, B, H, N, hd), *k = randn(&r, 1, 0.8f, B, H, N, hd),
                  *v = randn(&r, 1, 1.0f, B, H, N, hd);
        vt_performer_opts o = {(vt_performer_kernel)kern, VT_PERFORMER_EPS, 0.0f, 0.0f};
        vt_tensor *out = vt_op_performer(&tape, q, k, v, w, m, &o);
        float R[2 * 2 * 5 * 4];
        for (int i = 0; i < (int)out->size; i++) {
            R[i] = (float)vt_rng_normal(&r);
            out->grad[i] = R[i];
        }
        vt_tape_replay(&tape);
        vt_tensor *ins[3] = {q, k, v};
        const char *nm[3] = {"dq", "dk", "dv"};
        perf_loss_ctx lc = {q, k, v, w, m, &o, R};
        for (int a = 0; a < 3; a++) {
            const float h = kern == VT_PERFORMER_RELU ? 1e-3f : 1e-2f;
            gc_result gr = gc_check_array(nm[a], ins[a]->data, ins[a]->grad, ins[a]->size, 0, 1, h, 3e-3, 3e-2,
                                          loss_of, &lc);
            CHECK(gr.bad == 0, "%s, kernel %d: %d of %d elements off (worst %.3g of the tolerance)", nm[a], kern,
                  gr.bad, gr.checked, gr.worst_rel);
        }
    }
    free(w);
}

/* RoPE on a 1-D position p: pairs (2j, 2j+1) rotated by p * 100^(-2j/hd). */
static void rope(const float *x, float *y, int hd, double p) {
    for (int j = 0; j < hd / 2; j++) {
        double th = p * pow(100.0, -2.0 * j / hd), c = cos(th), s = sin(th);
        y[2 * j] = (float)(c * x[2 * j] - s * x[2 * j + 1]);
        y[2 * j + 1] = (float)(s * x[2 * j] + c * x[2 * j + 1]);
    }
}

static void test_rotary_relative(void) {
    const int hd = 8, m = 256, draws = 200;
    float q[8], k[8], rq[8], rk[8], buf[512];
    vt_rng r;
    vt_rng_seed(&r, 17);
    for (int j = 0; j < hd; j++) {
        q[j] = 0.7f * (float)vt_rng_normal(&r);
        k[j] = 0.7f * (float)vt_rng_normal(&r);
    }
    const double pairs[3][2] = {{0, 3}, {5, 8}, {-7, -4}};
    double mean[3], want[3];
    float *w = vt_xmalloc((size_t)m * hd * sizeof(float));
    for (int a = 0; a < 3; a++) {
        rope(q, rq, hd, pairs[a][0]);
        rope(k, rk, hd, pairs[a][1]);
        want[a] = exp(vt_k.dot(rq, rk, hd) / sqrt((double)hd));
        double s = 0.0;
        for (int d = 0; d < draws; d++) {
            vt_performer_draw_head(w, m, hd, vt_rng_derive(99, 0, (uint64_t)d));
            s += estimate(rq, rk, hd, w, m, buf);
        }
        mean[a] = s / draws;
    }
    CHECK_CLOSE(want[1], want[0], 0.0, 1e-5, "softmax kernel of RoPE depends only on p' - p");
    CHECK_CLOSE(want[2], want[0], 0.0, 1e-5, "softmax kernel of RoPE depends only on p' - p");
    for (int a = 0; a < 3; a++)
        CHECK_CLOSE(mean[a], want[a], 0.0, 0.02, "draw-average of phi(R_p q).phi(R_p' k), pair %d", a);
    CHECK_CLOSE(mean[1], mean[0], 0.0, 0.03, "estimates at the same relative position agree");
    CHECK_CLOSE(mean[2], mean[0], 0.0, 0.03, "estimates at the same relative position agree");
    /* Another relative position gives another value (the check above is not vacuous). */
    rope(q, rq, hd, 0);
    rope(k, rk, hd, 2.0);
    double other = exp(vt_k.dot(rq, rk, hd) / sqrt((double)hd));
    CHECK(fabs(other - want[0]) > 0.05 * want[0], "relative position 2 vs 3: %g vs %g", other, want[0]);
    free(w);
}

/* ---- the model ---- */

static const char *TINY =
    "{\"model\": {\"width\": 32, \"depth\": 2, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4, "
    "\"img_size\": 16, \"in_chans\": 1, \"num_classes\": 4, \"attention\": \"performer\"},"
    " \"performer\": {\"features\": 64, \"redraw_every\": 40},"
    " \"data\": {\"kind\": \"synthetic\", \"train_size\": 512, \"val_size\": 128, \"synthetic_seed\": 7,"
    " \"mean\": [0.5, 0.5, 0.5], \"std\": [0.25, 0.25, 0.25], \"hflip\": 0, \"workers\": 0},"
    " \"optim\": {\"lr\": 0.003, \"weight_decay\": 0.05, \"warmup_steps\": 8, \"clip_grad\": 1.0},"
    " \"train\": {\"epochs\": 3, \"batch_size\": 16, \"seed\": 1, \"eval_every\": 3, \"ckpt_every\": 1,"
    " \"log_every\": 1, \"label_smoothing\": 0}}";

/* TINY with ';'-separated overrides. */
static vt_config tiny_cfg(const char *sets) { return config_with_sets(TINY, sets ? sets : ""); }

static void test_redraw_hook(void) {
    vt_config c = tiny_cfg("performer.redraw_every=3");
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 5) == VT_OK, "init: %s", vt_last_error());
    size_t n = (size_t)m.L * m.H * m.performer_m * m.hd;
    float *want = vt_xmalloc(n * sizeof(float));
    vt_performer_draw(want, m.L, m.H, m.performer_m, m.hd, 5, 0);
    CHECK(memcmp(want, m.performer_w, n * sizeof(float)) == 0, "init features are draw 0 of the seed");
    char got[16] = {0};
    for (int s = 0; s < 10; s++) got[s] = (char)('0' + vt_vit_performer_step(&m, s));
    CHECK(strcmp(got, "0001001001") == 0, "redraws before steps 3, 6, 9 only: %s", got);
    vt_performer_draw(want, m.L, m.H, m.performer_m, m.hd, 5, 3);
    CHECK(memcmp(want, m.performer_w, n * sizeof(float)) == 0, "after step 9 the features are draw 3");
    /* Evaluation forwards never touch the features and are deterministic. */
    memcpy(want, m.performer_w, n * sizeof(float));
    vt_rng r;
    vt_rng_seed(&r, 1);
    float l1[8];
    for (int rep = 0; rep < 2; rep++) {
        reset(0);
        int64_t shape[4] = {2, 1, 16, 16};
        vt_tensor *x = vt_tape_new(&tape, 0, 4, shape);
        vt_rng_seed(&r, 1);
        for (int64_t i = 0; i < x->size; i++) x->data[i] = (float)vt_rng_normal(&r);
        vt_tensor *lg = vt_vit_forward(&m, &tape, x);
        if (rep == 0) memcpy(l1, lg->data, sizeof l1);
        else CHECK(memcmp(l1, lg->data, sizeof l1) == 0, "evaluation is deterministic");
    }
    CHECK(memcmp(want, m.performer_w, n * sizeof(float)) == 0, "evaluation does not redraw");
    vt_vit_free(&m);
    vt_config s = tiny_cfg("model.attention=softmax");
    CHECK(vit_init_config(&m, &s, 5) == VT_OK && m.performer_w == NULL && vt_vit_performer_step(&m, 20) == 0,
          "softmax models have no features and never redraw");
    vt_vit_free(&m);
    vt_config z = tiny_cfg("performer.redraw_every=0");
    CHECK(vit_init_config(&m, &z, 5) == VT_OK && vt_vit_performer_step(&m, 20) == 0, "redraw_every 0: never");
    vt_vit_free(&m);
    free(want);
}

static void test_checkpoint(const char *dir) {
    char path[512], path2[512];
    snprintf(path, sizeof path, "%s/perf.safetensors", dir);
    snprintf(path2, sizeof path2, "%s/soft.safetensors", dir);
    vt_config c = tiny_cfg(NULL);
    vt_vit a, b;
    CHECK(vit_init_config(&a, &c, 1) == VT_OK && vit_init_config(&b, &c, 2) == VT_OK, "init: %s", vt_last_error());
    size_t n = (size_t)a.L * a.H * a.performer_m * a.hd;
    vt_vit_performer_step(&a, 40);
    CHECK(memcmp(a.performer_w, b.performer_w, n * sizeof(float)) != 0, "different seeds, different features");
    CHECK(vit_save_config(&a, &c, path) == VT_OK, "save: %s", vt_last_error());
    vt_safetensors st;
    CHECK(vt_st_read(path, &st) == VT_OK, "read: %s", vt_last_error());
    const vt_st_tensor *f = vt_st_find(&st, "pe.performer_w");
    CHECK(f && f->ndim == 4 && f->shape[0] == 2 && f->shape[1] == 2 && f->shape[2] == 64 && f->shape[3] == 16,
          "pe.performer_w saved with shape (L, H, m, hd) = (2, 2, 64, 16)");
    vt_st_free(&st);
    CHECK(vt_vit_load(&b, path) == VT_OK, "load: %s", vt_last_error());
    CHECK(memcmp(a.performer_w, b.performer_w, n * sizeof(float)) == 0, "features survive the round trip");
    CHECK(memcmp(a.params, b.params, (size_t)a.n_params * sizeof(float)) == 0, "parameters survive too");
    /* A softmax checkpoint lacks the features; a softmax model rejects them. */
    vt_config sc = tiny_cfg("model.attention=softmax");
    vt_vit s;
    CHECK(vit_init_config(&s, &sc, 1) == VT_OK, "init softmax");
    CHECK(vit_save_config(&s, &sc, path2) == VT_OK, "save softmax");
    CHECK(vt_vit_load(&b, path2) == VT_ERR_RUNTIME && strstr(vt_last_error(), "missing tensor 'pe.performer_w'"),
          "performer model from a softmax checkpoint: %s", vt_last_error());
    CHECK(vt_vit_load(&s, path) == VT_ERR_RUNTIME && strstr(vt_last_error(), "unknown tensor 'pe.performer_w'"),
          "softmax model from a performer checkpoint: %s", vt_last_error());
    vt_config mc = tiny_cfg("performer.features=16");
    vt_vit d;
    CHECK(vit_init_config(&d, &mc, 1) == VT_OK, "init m 16");
    CHECK(vt_vit_load(&d, path) == VT_ERR_RUNTIME && strstr(vt_last_error(), "(2, 2, 16, 16)") &&
              strstr(vt_last_error(), "(2, 2, 64, 16)"),
          "feature count mismatch names both shapes: %s", vt_last_error());
    vt_vit_free(&a);
    vt_vit_free(&b);
    vt_vit_free(&s);
    vt_vit_free(&d);
    unlink(path);
    unlink(path2);
}

/* Features of the checkpoint `path` (a model of config c), or NULL after a failed CHECK. */
static float *saved_features(const vt_config *c, const char *path, vt_vit *m) {
    if (vit_init_config(m, c, 999) != VT_OK || vt_vit_load(m, path) != VT_OK) {
        CHECK(0, "load %s: %s", path, vt_last_error());
        return NULL;
    }
    return m->performer_w;
}

static int same_draw(const vt_vit *m, uint64_t seed, int64_t index) {
    size_t n = (size_t)m->L * m->H * m->performer_m * m->hd;
    float *want = vt_xmalloc(n * sizeof(float));
    vt_performer_draw(want, m->L, m->H, m->performer_m, m->hd, seed, index);
    int same = memcmp(want, m->performer_w, n * sizeof(float)) == 0;
    free(want);
    return same;
}

/* A tiny performer model with a rotary PE (rope_mixed) learns through vt_train_run,
 * redrawing its features at steps 40 and 80. */
static void test_training(const char *dir) {
    char run[256], ck[600];
    snprintf(run, sizeof run, "%s/learn", dir);
    vt_config c = tiny_cfg("pe.kind=rope_mixed");
    vt_train_opts o = {.run_dir = run};
    vt_train_result r;
    CHECK(vt_train_run(&c, &o, &r) == VT_OK, "train: %s", vt_last_error());
    CHECK(r.steps == 96 && r.final.n == 128, "96 steps and a final evaluation of 128 images: %lld, %lld",
          (long long)r.steps, (long long)r.final.n);
    CHECK(r.final.top1 > 60.0, "a tiny performer + rope_mixed model learns: val top-1 %.1f%% (chance 25%%)",
          r.final.top1);
    CHECK(r.final.loss < 0.8 * log(4.0), "val loss %.3f well below chance %.3f", r.final.loss, log(4.0));
    snprintf(ck, sizeof ck, "%s/last.safetensors", run);
    vt_vit m;
    if (saved_features(&c, ck, &m))
        CHECK(same_draw(&m, 1, 2), "after 96 steps with redraw_every 40 the features are draw 2 of train.seed");
    vt_vit_free(&m);
}

/* Straight run vs stopped + resumed run: same features, bitwise the same weights. */
static void test_resume(const char *dir) {
    char straight[256], split[256], ck[600], ck2[600];
    snprintf(straight, sizeof straight, "%s/straight", dir);
    snprintf(split, sizeof split, "%s/split", dir);
    vt_config c = tiny_cfg("train.steps=12;performer.redraw_every=5");
    vt_train_opts o = {.run_dir = straight}, o1 = {.run_dir = split, .stop_after = 7},
                  o2 = {.run_dir = split, .resume_dir = split};
    vt_train_result r;
    CHECK(vt_train_run(&c, &o, &r) == VT_OK && r.steps == 12, "straight run: %s", vt_last_error());
    CHECK(vt_train_run(&c, &o1, &r) == VT_OK && r.steps == 7 && r.stopped, "stopped run: %s", vt_last_error());
    snprintf(ck2, sizeof ck2, "%s/last.safetensors", split);
    vt_vit a, b;
    if (saved_features(&c, ck2, &b)) CHECK(same_draw(&b, 1, 1), "stopped after 7 steps: features are draw 1");
    vt_vit_free(&b);
    CHECK(vt_train_run(&c, &o2, &r) == VT_OK && r.steps == 12, "resumed run: %s", vt_last_error());
    snprintf(ck, sizeof ck, "%s/last.safetensors", straight);
    float *fa = saved_features(&c, ck, &a), *fb = saved_features(&c, ck2, &b);
    if (fa && fb) {
        size_t n = (size_t)a.L * a.H * a.performer_m * a.hd;
        CHECK(same_draw(&a, 1, 2), "after 12 steps with redraw_every 5 the features are draw 2");
        CHECK(memcmp(fa, fb, n * sizeof(float)) == 0, "resumed run ends with the same features");
        CHECK(memcmp(a.params, b.params, (size_t)a.n_params * sizeof(float)) == 0,
              "resumed run ends with bitwise the same weights");
    }
    vt_vit_free(&a);
    vt_vit_free(&b);
}

int main(void) {
    if (test_runtime_init(&arena, 1 << 20, &tape) != 0) return 1;
    test_features();
    test_estimator();
    test_linear_form();
    test_stabiliser();
    test_gradients();
    test_rotary_relative();
    test_redraw_hook();
    char dir[64];
    if (test_tmpdir(dir, sizeof dir, "test_performer")) return 1;
    test_checkpoint(dir);
    test_training(dir);
    test_resume(dir);
    test_rm_rf(dir);
    test_runtime_done(&arena, &tape);
    return test_summary();
}
