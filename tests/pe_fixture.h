/* pe_fixture.h - test helper: the PE-slot scaffolding shared by test_pe_circulant.c and
 * test_pe_liere.c (header-only; include from exactly one file per test binary, after
 * harness.h).
 *
 * Provides:
 *  - the binary's arena / tape / rng (file-scope statics; pe_fixture_init, pe_fixture_done);
 *  - a long-double scaling-and-squaring matrix exponential oracle (expm_oracle, expm_apply);
 *  - a PE built from a config with its parameters bound to test-owned buffers (fix,
 *    fix_make, fix_free) and tensor helpers on the arena (begin, new_t, fill, rand_buf);
 *  - one pass through the PE slot with optional backward, its loss, and that loss as a
 *    gc_loss_fn for gradcheck.h (run_pe, loss_of, pe_loss_ctx, pe_loss); the kind's
 *    explicit-coordinates prepare function (e.g. vt_pe_liere_prepare_coords) is a
 *    pe_prepare_fn parameter;
 *  - shared checks: the PE against a kind's dense oracle (pe_dense_compare), translation
 *    invariance (pe_invariance_gap), a parameter's name and shape (pe_param_shape_is), a
 *    PE per share mode (pe_share_make) and what that mode shares (pe_share_check), and a
 *    kind's parameter inside a ViT (pe_model_check).
 */
#ifndef VT_TEST_PE_FIXTURE_H
#define VT_TEST_PE_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "gradcheck.h"
#include "harness.h"
#include "ops/ops.h"
#include "pe/kinds.h"
#include "pe/pe.h"
#include "pe_bind.h"
#include "resolve.h"
#include "rng.h"
#include "tape.h"
#include "tensor.h"
#include "test_runtime.h"
#include "vit.h"
#include "vit_fixture.h"

static vt_arena arena;
static vt_tape tape;
static vt_rng rng;

/* Kernel dispatch, a 1 MiB arena, the tape on it and rng seeded with `seed`; 0 on
 * success, 1 (message printed) when the kernels cannot be initialised. */
static int pe_fixture_init(uint64_t seed) {
    if (test_runtime_init(&arena, 1 << 20, &tape) != 0) return 1;
    vt_rng_seed(&rng, seed);
    return 0;
}

/* Frees what pe_fixture_init set up. */
static void pe_fixture_done(void) { test_runtime_done(&arena, &tape); }

/* ---------- long double matrix exponential oracle ---------- */

/* C = A B for n x n row-major long double matrices. */
static void mm_ld(long double *C, const long double *A, const long double *B, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            long double s = 0;
            for (int k = 0; k < n; k++) s += A[i * n + k] * B[k * n + j];
            C[i * n + j] = s;
        }
}

/* Oracle: Taylor to 60 terms in long double after scaling by 2^s (||A/2^s||_1 <= 1/4). */
static void expm_oracle(const double *A, int n, double *E) {
    size_t nn = (size_t)n * n;
    long double *X = malloc(nn * sizeof *X), *T = malloc(nn * sizeof *T), *P = malloc(nn * sizeof *P),
                *Q = malloc(nn * sizeof *Q);
    double nrm = 0;
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += fabs(A[i * n + j]);
        if (s > nrm) nrm = s;
    }
    int s = 0;
    while (nrm > 0.25) { nrm /= 2; s++; }
    for (size_t i = 0; i < nn; i++) X[i] = ldexpl((long double)A[i], -s);
    for (size_t i = 0; i < nn; i++) T[i] = P[i] = (i % (n + 1) == 0);
    for (int k = 1; k <= 60; k++) {
        mm_ld(Q, P, X, n);
        for (size_t i = 0; i < nn; i++) {
            P[i] = Q[i] / k;
            T[i] += P[i];
        }
    }
    for (int i = 0; i < s; i++) {
        mm_ld(Q, T, T, n);
        memcpy(T, Q, nn * sizeof *T);
    }
    for (size_t i = 0; i < nn; i++) E[i] = (double)T[i];
    free(X); free(T); free(P); free(Q);
}

/* y = expm(A) x for an n x n generator A (n <= 64) through expm_oracle, in double. */
static void expm_apply(const double *A, int n, const float *x, double *y) {
    double E[64 * 64];
    expm_oracle(A, n, E);
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += E[i * n + j] * x[j];
        y[i] = s;
    }
}

/* ---------- PE fixtures ---------- */

/* A PE and the buffers its parameters live in (data / grad, `total` floats, one view
 * per parameter with the model's shape, pe_bind.h); hd, H, L of the model it was made for. */
typedef struct {
    vt_pe *pe;
    float *data, *grad;
    int64_t total;
    vt_tensor views[VT_PE_MAX_PARAMS];
    int hd, H, L;
} fix;

/* A PE of `kind` for width D, H heads, depth L, with extra "--set" assignments. */
static int fix_make(fix *f, const char *kind, int D, int H, int L, const char *const *sets, int nsets,
                    uint64_t seed) {
    vt_config cfg;
    vt_config_defaults(&cfg);
    char buf[6][64];
    snprintf(buf[0], 64, "model.width=%d", D);
    snprintf(buf[1], 64, "model.heads=%d", H);
    snprintf(buf[2], 64, "model.depth=%d", L);
    snprintf(buf[3], 64, "pe.kind=%s", kind);
    snprintf(buf[4], 64, "model.img_size=16");
    snprintf(buf[5], 64, "model.patch_size=4");
    for (int i = 0; i < 6; i++)
        if (vt_config_set(&cfg, buf[i]) != VT_OK) return fprintf(stderr, "%s\n", vt_last_error()), 0;
    for (int i = 0; i < nsets; i++)
        if (vt_config_set(&cfg, sets[i]) != VT_OK) return fprintf(stderr, "%s\n", vt_last_error()), 0;
    if (vt_resolve(&cfg) != VT_OK) return fprintf(stderr, "%s\n", vt_last_error()), 0;
    memset(f, 0, sizeof *f);
    f->pe = vt_pe_create(&cfg.pe, &cfg.model);
    f->total = pe_bind_init(f->pe, f->views, &f->data, &f->grad, seed);
    f->hd = D / H;
    f->H = H;
    f->L = L;
    return 1;
}

/* Frees the PE and its buffers. */
static void fix_free(fix *f) {
    vt_pe_free(f->pe);
    free(f->data);
    free(f->grad);
}

/* Reset the arena and tape for a new pass, gradients recorded when `grad`. */
static void begin(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
    tape.training = 0;
}

/* A tensor of ndim <= 4 dims (a, b, c, d) on the arena, with a grad buffer when grad. */
static vt_tensor *new_t(int grad, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t s[4] = {a, b, c, d};
    return vt_tensor_new(&arena, grad, ndim, s);
}

/* Copy t->size floats from src into t. */
static void fill(vt_tensor *t, const float *src) { memcpy(t->data, src, (size_t)t->size * sizeof(float)); }

/* Replay the tape with the output grads seeded by the caller. */
static void run_backward(void) {
    vt_tape_replay(&tape);
}

/* A kind's explicit-coordinates prepare (vt_pe_circulant_prepare_coords, ...). */
typedef void (*pe_prepare_fn)(vt_pe *pe, vt_tape *t, vt_tensor *coords);

/* q, k (B, H, 1 + Np, hd) from qsrc/ksrc, coords (Ba, Np, C) from csrc; prepares the
 * coordinates with `prepare` and applies layer `layer`; writes outputs to qo, ko. With
 * grad: seeds with rq, rk and leaves grads. */
typedef struct {
    vt_tensor *q, *k, *coords, *qo, *ko;
} run_out;

static run_out run_pe(fix *f, pe_prepare_fn prepare, int layer, int B, int Np, int Ba, const float *qsrc,
                      const float *ksrc, const float *csrc, int grad, const float *rq, const float *rk) {
    run_out o;
    int C = f->pe->cfg.coord_dim;
    begin(grad);
    o.q = new_t(grad, 4, B, f->H, 1 + Np, f->hd);
    o.k = new_t(grad, 4, B, f->H, 1 + Np, f->hd);
    o.coords = new_t(grad, 3, Ba, Np, C, 1);
    fill(o.q, qsrc);
    fill(o.k, ksrc);
    fill(o.coords, csrc);
    prepare(f->pe, &tape, o.coords);
    o.qo = o.q;
    o.ko = o.k;
    vt_pe_apply_qk(f->pe, &tape, layer, &o.qo, &o.ko);
    if (grad) {
        memcpy(o.qo->grad, rq, (size_t)o.qo->size * sizeof(float));
        memcpy(o.ko->grad, rk, (size_t)o.ko->size * sizeof(float));
        run_backward();
    }
    return o;
}

/* L = <rq, q'> + <rk, k'> in double. */
static double loss_of(const run_out *o, const float *rq, const float *rk) {
    double L = 0;
    for (int64_t i = 0; i < o->qo->size; i++) L += (double)o->qo->data[i] * rq[i] + (double)o->ko->data[i] * rk[i];
    return L;
}

/* The arguments of L = loss_of(run_pe(f, prepare, layer, B, Np, 1, q, k, c), rq, rk)
 * without gradients, for central differences in an entry of q, k, c or f's parameters
 * (gradcheck.h: pe_loss is the gc_loss_fn). */
typedef struct {
    fix *f;
    pe_prepare_fn prepare;
    int layer, B, Np;
    const float *q, *k, *c, *rq, *rk;
} pe_loss_ctx;

static double pe_loss(void *p) {
    const pe_loss_ctx *l = p;
    run_out o = run_pe(l->f, l->prepare, l->layer, l->B, l->Np, 1, l->q, l->k, l->c, 0, NULL, NULL);
    return loss_of(&o, l->rq, l->rk);
}

/* n floats uniform in [lo, hi) from rng (malloc'd; the caller frees). */
static float *rand_buf(int64_t n, double lo, double hi) {
    float *b = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) b[i] = (float)(lo + (hi - lo) * vt_rng_uniform(&rng));
    return b;
}

/* A kind's float64 oracle for one token: y = R(r) x with the parameter set of parameter
 * layer lp, parameter head hp, r the token's coordinates (coord_dim values). */
typedef void (*pe_dense_fn)(fix *f, int lp, int hp, const float *r, const float *x, double *y);

/* Worst gaps of pe_dense_compare: |y - oracle|, |y - x| (the largest move), | |y| - |x| |,
 * |<y, ky> - <x, kx>| over patch tokens; cls_q / cls_k: the CLS rows of q / k unchanged. */
typedef struct {
    double worst, maxmove, worst_norm, worst_dot;
    int cls_q, cls_k;
} pe_dense_stats;

/* Layer 1 of f on random q, k (B = 2, Np = 5 patches) with 2-d coordinates uniform in
 * [-c_abs, c_abs), shared by the batch (Ba = 1) or per image (Ba = 2), against `dense`
 * token by token (needs f->hd <= 64, coord_dim 2). */
static pe_dense_stats pe_dense_compare(fix *f, pe_prepare_fn prepare, pe_dense_fn dense, int Ba, double c_abs) {
    int B = 2, Np = 5, hd = f->hd, H = f->H, N = 1 + Np;
    pe_dense_stats st = {0, 0, 0, 0, 1, 1};
    float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *k = rand_buf((int64_t)B * H * N * hd, -1, 1);
    float *c = rand_buf((int64_t)Ba * Np * 2, -c_abs, c_abs);
    run_out o = run_pe(f, prepare, 1, B, Np, Ba, q, k, c, 0, NULL, NULL);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t row = (size_t)(b * H + h) * N;
            const float *x0 = q + row * hd, *y0 = o.qo->data + row * hd;
            st.cls_q &= memcmp(x0, y0, (size_t)hd * sizeof(float)) == 0;
            st.cls_k &= memcmp(k + row * hd, o.ko->data + row * hd, (size_t)hd * sizeof(float)) == 0;
            for (int n = 1; n < N; n++) {
                const float *x = x0 + (size_t)n * hd, *y = y0 + (size_t)n * hd;
                const float *kx = k + (row + n) * hd, *ky = o.ko->data + (row + n) * hd;
                double ref[64], nx = 0, ny = 0, d0 = 0, d1 = 0;
                dense(f, 1, h, c + ((size_t)(Ba > 1 ? b : 0) * Np + n - 1) * 2, x, ref);
                for (int i = 0; i < hd; i++) {
                    st.worst = fmax(st.worst, fabs(y[i] - ref[i]));
                    st.maxmove = fmax(st.maxmove, fabs(y[i] - x[i]));
                    nx += (double)x[i] * x[i];
                    ny += (double)y[i] * y[i];
                    d0 += (double)x[i] * kx[i];
                    d1 += (double)y[i] * ky[i];
                }
                st.worst_norm = fmax(st.worst_norm, fabs(sqrt(ny) - sqrt(nx)));
                st.worst_dot = fmax(st.worst_dot, fabs(d1 - d0));
            }
        }
    free(q); free(k); free(c);
    return st;
}

/* Translation invariance at layer 0 (f->H <= 8 heads, C = coord_dim <= 3): over 4 trials
 * of random real coordinates for Np = 2 patches and a random shift of all of them, the
 * largest change of the patch 1 - patch 2 logit of any head (q, k random). When spread
 * is not NULL, *spread gets the largest change of head 0's logit from the unrotated
 * <q, k> (> 0 shows the logits depend on the positions at all). */
static double pe_invariance_gap(fix *f, pe_prepare_fn prepare, int C, double *spread) {
    int hd = f->hd, H = f->H, Np = 2, N = 3;
    float *q = rand_buf((int64_t)H * N * hd, -1, 1), *k = rand_buf((int64_t)H * N * hd, -1, 1);
    double worst = 0, moved = 0;
    for (int trial = 0; trial < 4; trial++) {
        float c[6], cs[6], s3[3];
        for (int i = 0; i < Np * C; i++) c[i] = (float)(3 * (2 * vt_rng_uniform(&rng) - 1));
        for (int kk = 0; kk < C; kk++) s3[kk] = (float)(2.5 * (2 * vt_rng_uniform(&rng) - 1));
        for (int n = 0; n < Np; n++)
            for (int kk = 0; kk < C; kk++) cs[n * C + kk] = c[n * C + kk] + s3[kk];
        double dots[2][8];
        for (int pass = 0; pass < 2; pass++) {
            run_out o = run_pe(f, prepare, 0, 1, Np, 1, q, k, pass ? cs : c, 0, NULL, NULL);
            for (int h = 0; h < H; h++) {
                const float *qi = o.qo->data + ((size_t)h * N + 1) * hd, *kj = o.ko->data + ((size_t)h * N + 2) * hd;
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qi[i] * kj[i];
                dots[pass][h] = d;
            }
        }
        double d0 = 0;
        for (int i = 0; i < hd; i++) d0 += (double)q[hd + i] * k[2 * hd + i];
        moved = fmax(moved, fabs(dots[0][0] - d0));
        for (int h = 0; h < H; h++) worst = fmax(worst, fabs(dots[1][h] - dots[0][h]));
    }
    free(q);
    free(k);
    if (spread) *spread = moved;
    return worst;
}

/* The share modes in pe.share's order: mode sm shares layers when sm is 1 or 3 and heads
 * when sm is 2 or 3. */
static const char *const pe_share_names[4] = {"none", "layers", "heads", "all"};

/* fix_make with "pe.share=<mode sm>" and one more assignment `extra` (seed 51), counting
 * one check; *Lp, *Hp get the parameter's layer and head extents under that mode. */
static int pe_share_make(fix *f, const char *kind, int D, int H, int L, int sm, const char *extra, int *Lp,
                         int *Hp) {
    char s1[64];
    snprintf(s1, sizeof s1, "pe.share=%s", pe_share_names[sm]);
    const char *sets[] = {s1, extra};
    int ok = fix_make(f, kind, D, H, L, sets, 2, 51);
    CHECK(ok, "make share=%s", pe_share_names[sm]);
    *Lp = sm == 0 || sm == 2 ? L : 1;
    *Hp = sm == 0 || sm == 1 ? H : 1;
    return ok;
}

/* Whether PE parameter p is called `name` and has shape want[0..ndim). */
static int pe_param_shape_is(const vt_pe_param *p, const char *name, const int64_t *want, int ndim) {
    int ok = p->ndim == ndim && strcmp(p->name, name) == 0;
    for (int i = 0; ok && i < ndim; i++) ok = p->shape[i] == want[i];
    return ok;
}

/* Share mode `share` (Lp parameter layers, Hp parameter heads): on one image with heads 0
 * and 1 given the same q = k and random coordinates in [0, c_hi), layers 0 and 2 give
 * equal outputs exactly when Lp == 1 and heads 0 and 1 exactly when Hp == 1 (2 checks;
 * needs f->L >= 3, f->H == 2). */
static void pe_share_check(fix *f, pe_prepare_fn prepare, const char *share, int Lp, int Hp, double c_hi) {
    int B = 1, Np = 2, N = 3, hd = f->hd, H = f->H;
    float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *c = rand_buf((int64_t)Np * 2, 0, c_hi);
    memcpy(q + (size_t)N * hd, q, (size_t)N * hd * sizeof(float)); /* head 1 = head 0 */
    run_out a = run_pe(f, prepare, 0, B, Np, 1, q, q, c, 0, NULL, NULL);
    float *y0 = malloc((size_t)a.qo->size * 4);
    memcpy(y0, a.qo->data, (size_t)a.qo->size * 4);
    run_out b = run_pe(f, prepare, 2, B, Np, 1, q, q, c, 0, NULL, NULL);
    int same_layers = memcmp(y0, b.qo->data, (size_t)b.qo->size * 4) == 0;
    int same_heads = memcmp(y0, y0 + (size_t)N * hd, (size_t)N * hd * 4) == 0;
    CHECK(same_layers == (Lp == 1), "share=%s: layers 0 and 2 %s", share, Lp == 1 ? "equal" : "differ");
    CHECK(same_heads == (Hp == 1), "share=%s: heads 0 and 1 %s", share, Hp == 1 ? "equal" : "differ");
    free(q); free(c); free(y0);
}

/* A ViT built from the "--set" assignments `sets` (seed 7): checks that the config is
 * valid, the model initialises, parameter `pname` has checkpoint shape want[0..ndim) and
 * no weight decay, and that a forward/backward on a random 2 x 3 x 8 x 8 batch (labels
 * 0, 2) gives a finite loss and a finite, non-zero gradient of `pname` (5 checks). */
static void pe_model_check(const char *const *sets, int nsets, const char *pname, const int64_t *want,
                           int ndim) {
    vt_config cfg;
    vt_config_defaults(&cfg);
    int ok = 1;
    for (int i = 0; i < nsets; i++) ok &= vt_config_set(&cfg, sets[i]) == VT_OK;
    ok &= vt_resolve(&cfg) == VT_OK;
    CHECK(ok, "model config: %s", vt_last_error());
    vt_vit m;
    CHECK(vit_init_config(&m, &cfg, 7) == VT_OK, "vit init: %s", vt_last_error());
    vt_param *p = vt_vit_find(&m, pname);
    char shape[96];
    int len = snprintf(shape, sizeof shape, "(");
    int shape_ok = p && p->ckpt_ndim == ndim;
    for (int i = 0; i < ndim; i++) {
        len += snprintf(shape + len, sizeof shape - (size_t)len, "%s%lld", i ? ", " : "", (long long)want[i]);
        shape_ok = shape_ok && p->ckpt_shape[i] == want[i];
    }
    snprintf(shape + len, sizeof shape - (size_t)len, ")");
    CHECK(shape_ok, "model: %s checkpoint shape %s", pname, shape);
    CHECK(p && !p->decay, "%s gets no weight decay", pname);
    begin(1);
    vt_tensor *img = new_t(0, 4, 2, 3, 8, 8);
    for (int64_t i = 0; i < img->size; i++) img->data[i] = (float)vt_rng_uniform(&rng);
    vt_vit_zero_grad(&m);
    vt_tensor *logits = vt_vit_forward(&m, &tape, img);
    int labels[2] = {0, 2};
    vt_tensor *loss = vt_op_cross_entropy(&tape, logits, labels, NULL, 0.0f);
    vt_tape_backward(&tape, loss);
    double gn = 0;
    int finite = 1;
    for (int64_t i = 0; p && i < p->t.size; i++) {
        gn += (double)p->t.grad[i] * p->t.grad[i];
        finite &= isfinite(p->t.grad[i]);
    }
    CHECK(isfinite(loss->data[0]) && finite && gn > 0, "model forward/backward reaches %s (|g|^2 = %.3g)", pname, gn);
    vt_vit_free(&m);
}

#endif
