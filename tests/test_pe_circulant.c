/* test_pe_circulant.c - Circulant-STRING (position-encodings.md 2.5) through the PE slot.
 *
 * R(r) equals a dense matrix exponential of its generator (an independent long-double
 * scaling-and-squaring oracle) to 1e-5, also per sample; DC and Nyquist directions are
 * fixed; R is orthogonal (norms and inner products kept) and CLS is untouched; exact
 * translation invariance at random real positions and shifts; the rope_mixed init is the
 * minimum-norm odd c (c[0] = c[b/2] = 0, c[b-m] = -c[m]) whose plane frequencies equal
 * RoPE-Mixed's initial ones, and the normal init has the configured spread; finite
 * difference gradients for q, k, circulant_c and the coordinates; the grid path
 * (vt_pe_prepare, non-square grid) equals explicit coordinates; share modes and
 * checkpoint shapes (L', H', C, hd/b, b). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "pe/lie.h"
#include "pe/pe.h"
#include "pe/rotary.h"
#include "rng.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"

static vt_arena arena;
static vt_tape tape;
static vt_rng rng;

/* ---------- float64 / long double helpers ---------- */

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

/* ---------- PE fixtures ---------- */

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
    if (vt_config_validate(&cfg) != VT_OK) return fprintf(stderr, "%s\n", vt_last_error()), 0;
    memset(f, 0, sizeof *f);
    if (vt_pe_create(&cfg, D, L, H, &f->pe) != VT_OK) return fprintf(stderr, "%s\n", vt_last_error()), 0;
    for (int i = 0; i < f->pe->n_params; i++) f->total += f->pe->params[i].size;
    f->data = calloc((size_t)f->total + 1, sizeof(float));
    f->grad = calloc((size_t)f->total + 1, sizeof(float));
    int64_t off = 0;
    for (int i = 0; i < f->pe->n_params; i++) {
        vt_tensor *v = &f->views[i];
        v->data = f->data + off;
        v->grad = f->grad + off;
        v->ndim = 1;
        v->shape[0] = v->size = f->pe->params[i].size;
        f->pe->params[i].t = v;
        off += v->size;
    }
    vt_rng r;
    vt_rng_seed(&r, seed);
    vt_pe_init_params(f->pe, &r);
    f->hd = D / H;
    f->H = H;
    f->L = L;
    return 1;
}

static void fix_free(fix *f) {
    vt_pe_free(f->pe);
    free(f->data);
    free(f->grad);
}

static float *c_of(fix *f) { return f->views[0].data; }

static void begin(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
    tape.training = 0;
}

static vt_tensor *new_t(int grad, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t s[4] = {a, b, c, d};
    return vt_tensor_new(&arena, grad, ndim, s);
}

static void fill(vt_tensor *t, const float *src) { memcpy(t->data, src, (size_t)t->size * sizeof(float)); }

/* Replay the tape with the output grads seeded by the caller. */
static void run_backward(void) {
    for (int i = tape.n - 1; i >= 0; i--) tape.entries[i].fn(tape.entries[i].ctx);
}

/* q, k (B, H, 1 + Np, hd) from qsrc/ksrc, coords (Ba, Np, C) from csrc; applies layer
 * `layer`; writes outputs to qo, ko. With grad: seeds with rq, rk and leaves grads. */
typedef struct {
    vt_tensor *q, *k, *coords, *qo, *ko;
} run_out;

static run_out run_pe(fix *f, int layer, int B, int Np, int Ba, const float *qsrc, const float *ksrc,
                      const float *csrc, int grad, const float *rq, const float *rk) {
    run_out o;
    int C = f->pe->cfg.coord_dim;
    begin(grad);
    o.q = new_t(grad, 4, B, f->H, 1 + Np, f->hd);
    o.k = new_t(grad, 4, B, f->H, 1 + Np, f->hd);
    o.coords = new_t(grad, 3, Ba, Np, C, 1);
    fill(o.q, qsrc);
    fill(o.k, ksrc);
    fill(o.coords, csrc);
    vt_pe_circulant_prepare_coords(f->pe, &tape, o.coords);
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

static double loss_of(const run_out *o, const float *rq, const float *rk) {
    double L = 0;
    for (int64_t i = 0; i < o->qo->size; i++) L += (double)o->qo->data[i] * rq[i] + (double)o->ko->data[i] * rk[i];
    return L;
}

static float *rand_buf(int64_t n, double lo, double hi) {
    float *b = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) b[i] = (float)(lo + (hi - lo) * vt_rng_uniform(&rng));
    return b;
}


/* Dense oracle: y = blockdiag(expm(sum_k r_k (C_k - C_k^T))) x for one token, set (lp, hp). */
static void dense_apply(fix *f, int lp, int hp, const float *r, const float *x, double *y) {
    int C = f->pe->cfg.coord_dim, b = f->pe->cfg.block_size, nb = f->hd / b;
    int Hp = (int)f->pe->params[0].shape[1];
    const float *cp = c_of(f) + (size_t)(lp * Hp + hp) * C * nb * b;
    double A[64 * 64], E[64 * 64];
    for (int n = 0; n < nb; n++) {
        memset(A, 0, sizeof(double) * b * b);
        for (int k = 0; k < C; k++) {
            const float *c = cp + ((size_t)k * nb + n) * b;
            for (int i = 0; i < b; i++)
                for (int j = 0; j < b; j++)
                    A[i * b + j] += (double)r[k] * ((double)c[((i - j) % b + b) % b] - c[((j - i) % b + b) % b]);
        }
        expm_oracle(A, b, E);
        for (int i = 0; i < b; i++) {
            double s = 0;
            for (int j = 0; j < b; j++) s += E[i * b + j] * x[n * b + j];
            y[n * b + i] = s;
        }
    }
}

static void test_dense_orthogonal_cls(void) {
    const char *sets[] = {"pe.block_size=8", "pe.init=normal", "pe.init_std=0.3"};
    fix f;
    CHECK(fix_make(&f, "circulant", 32, 2, 2, sets, 3, 11), "make circulant");
    int B = 2, Np = 5, hd = f.hd, H = f.H, N = 1 + Np;
    for (int Ba = 1; Ba <= 2; Ba++) {
        float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *k = rand_buf((int64_t)B * H * N * hd, -1, 1);
        float *c = rand_buf((int64_t)Ba * Np * 2, -3, 3);
        run_out o = run_pe(&f, 1, B, Np, Ba, q, k, c, 0, NULL, NULL);
        double worst = 0, worst_norm = 0, worst_dot = 0, maxmove = 0;
        int cls_same = 1;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const float *x0 = q + ((size_t)(b * H + h) * N) * hd;
                const float *y0 = o.qo->data + ((size_t)(b * H + h) * N) * hd;
                cls_same &= memcmp(x0, y0, (size_t)hd * sizeof(float)) == 0;
                cls_same &= memcmp(k + ((size_t)(b * H + h) * N) * hd, o.ko->data + ((size_t)(b * H + h) * N) * hd,
                                   (size_t)hd * sizeof(float)) == 0;
                for (int n = 1; n < N; n++) {
                    const float *x = x0 + (size_t)n * hd, *y = y0 + (size_t)n * hd;
                    const float *kx = k + ((size_t)(b * H + h) * N + n) * hd;
                    const float *ky = o.ko->data + ((size_t)(b * H + h) * N + n) * hd;
                    double ref[64], nx = 0, ny = 0, d0 = 0, d1 = 0;
                    dense_apply(&f, 1, h, c + ((size_t)(Ba > 1 ? b : 0) * Np + n - 1) * 2, x, ref);
                    for (int i = 0; i < hd; i++) {
                        worst = fmax(worst, fabs(y[i] - ref[i]));
                        maxmove = fmax(maxmove, fabs(y[i] - x[i]));
                        nx += (double)x[i] * x[i];
                        ny += (double)y[i] * y[i];
                        d0 += (double)x[i] * kx[i];
                        d1 += (double)y[i] * ky[i];
                    }
                    worst_norm = fmax(worst_norm, fabs(sqrt(ny) - sqrt(nx)));
                    worst_dot = fmax(worst_dot, fabs(d1 - d0));
                }
            }
        CHECK(worst < 1e-5, "circulant vs dense expm of the generator (Ba=%d): max diff %.3g", Ba, worst);
        CHECK(maxmove > 0.1, "the rotation is not trivial (Ba=%d): max change %.3g", Ba, maxmove);
        CHECK(worst_norm < 1e-5, "circulant preserves norms (Ba=%d): %.3g", Ba, worst_norm);
        CHECK(worst_dot < 1e-5, "circulant preserves inner products (Ba=%d): %.3g", Ba, worst_dot);
        CHECK(cls_same, "CLS token of q and k untouched (Ba=%d)", Ba);
        free(q); free(k); free(c);
    }
    /* DC and Nyquist directions of every block are fixed */
    int b = 8;
    float *q = calloc((size_t)H * 3 * hd, sizeof(float)), *c = rand_buf(2 * 2, -3, 3);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < hd; i++) {
            int blk = i / b, m = i % b;
            q[((size_t)h * 3 + 1) * hd + i] = blk % 2 ? (float)(m % 2 ? -1 : 1) : 0.5f; /* block 0 DC, 1 Nyquist */
            q[((size_t)h * 3 + 2) * hd + i] = blk % 2 ? 0.25f : (float)(m % 2 ? -2 : 2);  /* swapped */
        }
    run_out o = run_pe(&f, 0, 1, 2, 1, q, q, c, 0, NULL, NULL);
    CHECK_ARRAY_CLOSE(o.qo->data, q, o.qo->size, 1e-6, 1e-6, "DC and Nyquist directions fixed");
    /* ...while a generic vector moves */
    for (int i = 0; i < hd; i++) q[hd + i] = (float)(i % 3) - 1.0f;
    o = run_pe(&f, 0, 1, 2, 1, q, q, c, 0, NULL, NULL);
    double mv = 0;
    for (int i = 0; i < hd; i++) mv = fmax(mv, fabs(o.qo->data[hd + i] - q[hd + i]));
    CHECK(mv > 1e-2, "a generic vector is rotated: %.3g", mv);
    free(q); free(c);
    fix_free(&f);
}

static void test_translation_invariance(void) {
    for (int C = 1; C <= 3; C++) {
        char s[32];
        snprintf(s, sizeof s, "pe.coord_dim=%d", C);
        const char *sets[] = {s, "pe.block_size=4", "pe.init=normal", "pe.init_std=0.5"};
        fix f;
        CHECK(fix_make(&f, "circulant", 16, 2, 1, sets, 4, 20 + C), "make C=%d", C);
        int hd = f.hd, H = f.H, Np = 2, N = 3;
        float *q = rand_buf((int64_t)H * N * hd, -1, 1), *k = rand_buf((int64_t)H * N * hd, -1, 1);
        double worst = 0, spread = 0;
        for (int trial = 0; trial < 4; trial++) {
            float c[6], cs[6], s3[3];
            for (int i = 0; i < Np * C; i++) c[i] = (float)(3 * (2 * vt_rng_uniform(&rng) - 1));
            for (int kk = 0; kk < C; kk++) s3[kk] = (float)(2.5 * (2 * vt_rng_uniform(&rng) - 1));
            for (int n = 0; n < Np; n++)
                for (int kk = 0; kk < C; kk++) cs[n * C + kk] = c[n * C + kk] + s3[kk];
            double dots[2][4];
            for (int pass = 0; pass < 2; pass++) {
                run_out o = run_pe(&f, 0, 1, Np, 1, q, k, pass ? cs : c, 0, NULL, NULL);
                for (int h = 0; h < H; h++) {
                    const float *qi = o.qo->data + ((size_t)h * N + 1) * hd, *kj = o.ko->data + ((size_t)h * N + 2) * hd;
                    double d = 0;
                    for (int i = 0; i < hd; i++) d += (double)qi[i] * kj[i];
                    dots[pass][h] = d;
                }
                if (pass == 0) {
                    /* the logit depends on the positions (so the check is not vacuous) */
                    double d0 = 0;
                    for (int i = 0; i < hd; i++) d0 += (double)q[hd + i] * k[2 * hd + i];
                    spread = fmax(spread, fabs(dots[0][0] - d0));
                }
            }
            for (int h = 0; h < H; h++) worst = fmax(worst, fabs(dots[1][h] - dots[0][h]));
        }
        CHECK(worst < 1e-4, "circulant (C=%d) translation invariant: gap %.3g", C, worst);
        CHECK(spread > 1e-2, "circulant (C=%d) logits depend on positions: %.3g", C, spread);
        free(q); free(k);
        fix_free(&f);
    }
}

static void test_init(void) {
    /* rope_mixed: per (l', h') set, c is the minimum-norm odd solution of RoPE-Mixed's init */
    for (int C = 1; C <= 3; C += 1) {
        char s[32];
        snprintf(s, sizeof s, "pe.coord_dim=%d", C);
        const char *sets[] = {s, "pe.block_size=8"};
        fix f;
        int D = 64, H = 2, L = 2, hd = 32, b = 8, nb = 4;
        CHECK(fix_make(&f, "circulant", D, H, L, sets, 2, 77), "make C=%d", C);
        CHECK(f.pe->cfg.init == VT_PEINIT_ROPE_MIXED && f.pe->cfg.share == VT_SHARE_NONE && fabs(f.pe->cfg.theta - 10) < 1e-12,
              "circulant defaults: init rope_mixed, share none, theta 10");
        vt_rng r;
        vt_rng_seed(&r, 77);
        float fr[16 * 3];
        double worst_odd = 0, worst_w = 0;
        int unused_ok = 1;
        for (int set = 0; set < L * H; set++) {
            vt_rot_mixed_init(hd, C, 10.0, &r, fr);
            const float *cp = c_of(&f) + (size_t)set * C * nb * b;
            for (int k = 0; k < C; k++)
                for (int n = 0; n < nb; n++) {
                    const float *c = cp + ((size_t)k * nb + n) * b;
                    worst_odd = fmax(worst_odd, fabs(c[0]));
                    worst_odd = fmax(worst_odd, fabs(c[b / 2]));
                    for (int m = 1; m < b; m++) worst_odd = fmax(worst_odd, fabs(c[b - m] + c[m]));
                    for (int j = 1; j < b / 2; j++) {
                        double w = 0;
                        for (int m = 0; m < b; m++) w += 2.0 * c[m] * sin(2 * M_PI * j * m / b);
                        worst_w = fmax(worst_w, fabs(w - fr[(n * b / 2 + j - 1) * C + k]));
                    }
                    /* the DC/Nyquist pair's slot p = n b/2 + b/2 - 1 of RoPE-Mixed is unused:
                     * nothing in c encodes it (the w of plane b/2 is identically 0) */
                    double wn = 0;
                    for (int m = 0; m < b; m++) wn += 2.0 * c[m] * sin(M_PI * m);
                    unused_ok &= fabs(wn) < 1e-6;
                }
        }
        CHECK(worst_odd < 1e-7, "init C=%d: c[0] = c[b/2] = 0, c[b-m] = -c[m] (worst %.3g)", C, worst_odd);
        CHECK(worst_w < 1e-6, "init C=%d: plane frequencies = RoPE-Mixed's initial ones (worst %.3g)", C, worst_w);
        CHECK(unused_ok, "init C=%d: pair n b/2 + b/2 - 1 unused", C);
        fix_free(&f);
    }
    /* normal: N(0, init_std^2) */
    const char *sets[] = {"pe.init=normal", "pe.init_std=0.05", "pe.block_size=16"};
    fix f;
    CHECK(fix_make(&f, "circulant", 64, 4, 4, sets, 3, 78), "make normal");
    int64_t n = f.views[0].size;
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; i++) m += c_of(&f)[i];
    m /= n;
    for (int64_t i = 0; i < n; i++) v += (c_of(&f)[i] - m) * (c_of(&f)[i] - m);
    double sd = sqrt(v / n);
    CHECK(n == 4 * 4 * 2 * 1 * 16, "normal init: %lld entries", (long long)n);
    CHECK(fabs(m) < 0.01 && fabs(sd - 0.05) < 0.005, "normal init: mean %.4f, std %.4f (want 0, 0.05)", m, sd);
    fix_free(&f);
}

static void test_gradients(void) {
    const char *sets[] = {"pe.block_size=4", "pe.init=normal", "pe.init_std=0.3", "pe.coord_dim=3"};
    fix f;
    CHECK(fix_make(&f, "circulant", 16, 2, 2, sets, 4, 31), "make");
    int B = 2, Np = 3, N = 1 + Np, hd = f.hd, H = f.H, C = 3;
    int64_t nq = (int64_t)B * H * N * hd;
    float *q = rand_buf(nq, -1, 1), *k = rand_buf(nq, -1, 1), *c = rand_buf((int64_t)Np * C, -1, 1);
    float *rq = rand_buf(nq, -1, 1), *rk = rand_buf(nq, -1, 1);
    memset(f.grad, 0, (size_t)f.total * sizeof(float));
    run_out o = run_pe(&f, 1, B, Np, 1, q, k, c, 1, rq, rk);
    float *gq = malloc(nq * 4), *gk = malloc(nq * 4), *gc = malloc((size_t)Np * C * 4), *gp = malloc((size_t)f.total * 4);
    memcpy(gq, o.q->grad, nq * 4);
    memcpy(gk, o.k->grad, nq * 4);
    memcpy(gc, o.coords->grad, (size_t)Np * C * 4);
    memcpy(gp, f.grad, (size_t)f.total * 4);
    const double eps = 1e-2;
    float *targets[4] = {q, k, c_of(&f), c};
    float *grads[4] = {gq, gk, gp, gc};
    int64_t counts[4] = {nq, nq, f.views[0].size, (int64_t)Np * C};
    const char *names[4] = {"q", "k", "circulant_c", "coords"};
    for (int t = 0; t < 4; t++) {
        int bad = 0, checked = 0;
        double worst = 0;
        int64_t start = t == 2 ? counts[2] / 2 : 0; /* parameter: layer 1's set (share none) */
        for (int64_t i = start; i < counts[t]; i += (t < 2 ? 13 : 1)) {
            float keep = targets[t][i];
            targets[t][i] = keep + (float)eps;
            run_out a = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
            double lp = loss_of(&a, rq, rk);
            targets[t][i] = keep - (float)eps;
            run_out b = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
            double lm = loss_of(&b, rq, rk);
            targets[t][i] = keep;
            double fd = (lp - lm) / (2 * eps);
            if (!test_close(grads[t][i], fd, 3e-3, 3e-3)) bad++;
            worst = fmax(worst, fabs(grads[t][i] - fd));
            checked++;
        }
        CHECK(bad == 0 && checked > 0, "d %s vs finite differences: %d of %d bad, worst %.3g", names[t], bad, checked, worst);
    }
    int other_zero = 1;
    for (int64_t i = 0; i < counts[2] / 2; i++) other_zero &= gp[i] == 0.0f;
    CHECK(other_zero, "layer 0's set gets no gradient from layer 1");
    free(q); free(k); free(c); free(rq); free(rk); free(gq); free(gk); free(gc); free(gp);
    fix_free(&f);
}

/* vt_pe_prepare on a non-square grid equals explicit coordinates (x, y) = (j, i). */
static void test_grid_path(void) {
    const char *sets[] = {"pe.block_size=8", "pe.positions=index"};
    fix f;
    CHECK(fix_make(&f, "circulant", 32, 2, 1, sets, 2, 61), "make");
    int rows = 2, cols = 3, Np = rows * cols, N = 1 + Np, B = 1, hd = f.hd, H = f.H;
    int64_t nq = (int64_t)B * H * N * hd;
    float *q = rand_buf(nq, -1, 1), c[12];
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            c[(i * cols + j) * 2] = (float)j;
            c[(i * cols + j) * 2 + 1] = (float)i;
        }
    run_out a = run_pe(&f, 0, B, Np, 1, q, q, c, 0, NULL, NULL);
    float *ya = malloc(nq * 4);
    memcpy(ya, a.qo->data, nq * 4);
    begin(0);
    vt_tensor *qt = new_t(0, 4, B, H, N, hd), *kt = new_t(0, 4, B, H, N, hd);
    fill(qt, q);
    fill(kt, q);
    vt_pe_prepare(f.pe, &tape, rows, cols, NULL);
    vt_pe_apply_qk(f.pe, &tape, 0, &qt, &kt);
    CHECK_ARRAY_CLOSE(qt->data, ya, nq, 1e-6, 1e-6, "grid path (2 x 3) equals coordinates (j, i)");
    free(q); free(ya);
    fix_free(&f);
}

static void test_share_and_shapes(void) {
    const char *names[] = {"none", "layers", "heads", "all"};
    int D = 32, H = 2, L = 3, b = 8;
    for (int sm = 0; sm < 4; sm++) {
        char s1[64];
        snprintf(s1, sizeof s1, "pe.share=%s", names[sm]);
        const char *sets[] = {s1, "pe.block_size=8"};
        fix f;
        CHECK(fix_make(&f, "circulant", D, H, L, sets, 2, 51), "make share=%s", names[sm]);
        int Lp = sm == 0 || sm == 2 ? L : 1, Hp = sm == 0 || sm == 1 ? H : 1;
        vt_pe_param *p = &f.pe->params[0];
        int64_t want[5] = {Lp, Hp, 2, 16 / b, b};
        int ok = p->ndim == 5 && strcmp(p->name, "pe.circulant_c") == 0;
        for (int i = 0; ok && i < 5; i++) ok = p->shape[i] == want[i];
        CHECK(ok, "share=%s: pe.circulant_c shape (%d, %d, 2, 2, 8)", names[sm], Lp, Hp);
        int B = 1, Np = 2, N = 3, hd = 16;
        float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *c = rand_buf((int64_t)Np * 2, 0, 3);
        memcpy(q + (size_t)N * hd, q, (size_t)N * hd * sizeof(float));
        run_out a = run_pe(&f, 0, B, Np, 1, q, q, c, 0, NULL, NULL);
        float *y0 = malloc((size_t)a.qo->size * 4);
        memcpy(y0, a.qo->data, (size_t)a.qo->size * 4);
        run_out o = run_pe(&f, 2, B, Np, 1, q, q, c, 0, NULL, NULL);
        int same_layers = memcmp(y0, o.qo->data, (size_t)o.qo->size * 4) == 0;
        int same_heads = memcmp(y0, y0 + (size_t)N * hd, (size_t)N * hd * 4) == 0;
        CHECK(same_layers == (Lp == 1), "share=%s: layers 0 and 2 %s", names[sm], Lp == 1 ? "equal" : "differ");
        CHECK(same_heads == (Hp == 1), "share=%s: heads 0 and 1 %s", names[sm], Hp == 1 ? "equal" : "differ");
        free(q); free(c); free(y0);
        fix_free(&f);
    }
    vt_config cfg;
    vt_config_defaults(&cfg);
    const char *ms[] = {"model.width=32", "model.heads=2", "model.depth=2", "model.img_size=8",
                        "model.patch_size=4", "model.num_classes=3", "pe.kind=circulant", "pe.block_size=4"};
    int ok = 1;
    for (int i = 0; i < 8; i++) ok &= vt_config_set(&cfg, ms[i]) == VT_OK;
    ok &= vt_config_validate(&cfg) == VT_OK;
    CHECK(ok, "model config: %s", vt_last_error());
    vt_vit m;
    CHECK(vt_vit_init(&m, &cfg, 7) == VT_OK, "vit init: %s", vt_last_error());
    vt_param *p = vt_vit_find(&m, "pe.circulant_c");
    int64_t want[5] = {2, 2, 2, 4, 4};
    int shape_ok = p && p->ckpt_ndim == 5;
    for (int i = 0; shape_ok && i < 5; i++) shape_ok = p->ckpt_shape[i] == want[i];
    CHECK(shape_ok, "model: pe.circulant_c checkpoint shape (2, 2, 2, 4, 4)");
    CHECK(p && !p->decay, "pe.circulant_c gets no weight decay");
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
    CHECK(isfinite(loss->data[0]) && finite && gn > 0, "model forward/backward reaches pe.circulant_c (|g|^2 = %.3g)", gn);
    vt_vit_free(&m);
}

int main(void) {
    char err[256];
    if (vt_kernels_init(err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    vt_arena_init(&arena, 1 << 20);
    vt_tape_init(&tape, &arena);
    vt_rng_seed(&rng, 4321);
    test_dense_orthogonal_cls();
    test_translation_invariance();
    test_init();
    test_gradients();
    test_grid_path();
    test_share_and_shapes();
    vt_tape_free(&tape);
    vt_arena_free(&arena);
    return test_summary();
}
