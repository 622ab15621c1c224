/* test_pe_liere.c - LieRE and LieRE-Commute (position-encodings.md 2.6) and the float64
 * matrix exponential behind them (src/pe/expm.c).
 *
 * expm: against an independent long-double Taylor oracle (small norms) and a conjugated
 * block-rotation oracle exp(Q B Q^T) = Q exp(B) Q^T (any norm); orthogonality of expm of
 * skew matrices; the Frechet derivative and the backward against central differences
 * and the adjoint identity <G, L(A, E)> = <L(A^T, G), E>.
 * LieRE through the PE slot: R matches a dense oracle (also per sample), is orthogonal,
 * leaves CLS untouched; liere_commute with U = -f equals the RoPE pair rotation with
 * frequencies f (rotary.h's op, and the rope_mixed kind on a grid) while U = +f does
 * not; translation invariance holds for liere_commute (C = 2) and dense LieRE with C = 1
 * and fails for dense LieRE with C = 2 and 3 (so the check detects it); finite
 * difference gradients for q, k, liere_u (upper entries; lower and diagonal exactly 0),
 * the coordinates and the RGB-D depth scale; unused entries of liere_u ignored and
 * cleared; share modes, defaults, checkpoint shapes and a ViT training step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "pe/expm.h"
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

static void mm_d(double *C, const double *A, const double *B, int n, int tb) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i * n + k] * (tb ? B[j * n + k] : B[k * n + j]);
            C[i * n + j] = s;
        }
}

static void random_skew(double *A, int n, double scale) {
    for (int i = 0; i < n; i++) {
        A[i * n + i] = 0;
        for (int j = i + 1; j < n; j++) {
            double v = scale * (2 * vt_rng_uniform(&rng) - 1);
            A[i * n + j] = v;
            A[j * n + i] = -v;
        }
    }
}

/* A random orthogonal n x n matrix (Gram-Schmidt of a Gaussian one). */
static void random_orth(double *Q, int n) {
    for (int i = 0; i < n * n; i++) Q[i] = vt_rng_normal(&rng);
    for (int i = 0; i < n; i++) {
        double *q = Q + i * n;
        for (int j = 0; j < i; j++) {
            double d = 0;
            for (int k = 0; k < n; k++) d += q[k] * Q[j * n + k];
            for (int k = 0; k < n; k++) q[k] -= d * Q[j * n + k];
        }
        double nr = 0;
        for (int k = 0; k < n; k++) nr += q[k] * q[k];
        nr = sqrt(nr);
        for (int k = 0; k < n; k++) q[k] /= nr;
    }
}

static double max_abs_diff(const double *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

static double *work_for(int n) {
    size_t w = vt_expm_frechet_work_doubles(n);
    if (vt_expm_work_doubles(n) > w) w = vt_expm_work_doubles(n);
    return malloc(w * sizeof(double));
}

/* ---------- expm tests ---------- */

static void test_expm_oracles(void) {
    int sizes[] = {1, 2, 3, 4, 6, 8, 9};
    for (int si = 0; si < 7; si++) {
        int n = sizes[si];
        size_t nn = (size_t)n * n;
        double *A = malloc(nn * 8), *E = malloc(nn * 8), *O = malloc(nn * 8), *W = work_for(n);
        /* small norm, general (not skew) matrix: Taylor oracle */
        for (size_t i = 0; i < nn; i++) A[i] = 0.3 * (2 * vt_rng_uniform(&rng) - 1);
        vt_expm(A, n, E, W);
        expm_oracle(A, n, O);
        CHECK(max_abs_diff(E, O, nn) < 1e-14, "expm vs Taylor oracle n=%d: %.3g", n, max_abs_diff(E, O, nn));
        /* moderate norm skew */
        random_skew(A, n, 3.0);
        vt_expm(A, n, E, W);
        expm_oracle(A, n, O);
        CHECK(max_abs_diff(E, O, nn) < 1e-12, "skew expm vs oracle n=%d: %.3g", n, max_abs_diff(E, O, nn));
        free(A); free(E); free(O); free(W);
    }
    /* large norm: Q B Q^T with B block-diagonal rotations of known angles */
    int n = 7;
    size_t nn = (size_t)n * n;
    double Q[49], B[49], EB[49], T1[49], M[49], E[49], O[49], I[49];
    double *W = work_for(n);
    memset(B, 0, sizeof B);
    memset(EB, 0, sizeof EB);
    for (int p = 0; p < 3; p++) {
        double th = 40.0 * (2 * vt_rng_uniform(&rng) - 1);
        int i = 2 * p;
        B[i * n + i + 1] = th;
        B[(i + 1) * n + i] = -th;
        EB[i * n + i] = EB[(i + 1) * n + i + 1] = cos(th);
        EB[i * n + i + 1] = sin(th);
        EB[(i + 1) * n + i] = -sin(th);
    }
    EB[6 * n + 6] = 1.0;
    random_orth(Q, n);
    mm_d(T1, Q, B, n, 0);
    mm_d(M, T1, Q, n, 1);
    mm_d(T1, Q, EB, n, 0);
    mm_d(O, T1, Q, n, 1);
    vt_expm(M, n, E, W);
    CHECK(max_abs_diff(E, O, nn) < 1e-11, "expm of Q B Q^T (angles up to 40): %.3g", max_abs_diff(E, O, nn));
    mm_d(I, E, E, n, 1);
    for (int i = 0; i < n; i++) I[i * n + i] -= 1.0;
    double z[49] = {0};
    CHECK(max_abs_diff(I, z, nn) < 1e-12, "expm(skew) orthogonal: |E E^T - I| = %.3g", max_abs_diff(I, z, nn));
    /* zero matrix -> identity exactly */
    memset(M, 0, sizeof M);
    vt_expm(M, n, E, W);
    int id = 1;
    for (int i = 0; i < n * n; i++) id &= E[i] == (i % (n + 1) == 0 ? 1.0 : 0.0);
    CHECK(id, "expm(0) = I exactly");
    free(W);
}

static void test_expm_frechet(void) {
    int sizes[] = {2, 4, 6};
    double scales[] = {0.2, 2.0, 8.0};
    for (int si = 0; si < 3; si++)
        for (int sc = 0; sc < 3; sc++) {
            int n = sizes[si];
            size_t nn = (size_t)n * n;
            double A[36], Ed[36], L[36], Ex[36], Ap[36], Am[36], Fp[36], Fm[36], FD[36], G[36], dA[36];
            double *W = work_for(n);
            random_skew(A, n, scales[sc]);
            for (size_t i = 0; i < nn; i++) A[i] += 0.1 * scales[sc] * (2 * vt_rng_uniform(&rng) - 1);
            for (size_t i = 0; i < nn; i++) Ed[i] = 2 * vt_rng_uniform(&rng) - 1;
            vt_expm_frechet(A, Ed, n, L, Ex, W);
            double h = 1e-6 / (1 + scales[sc]);
            for (size_t i = 0; i < nn; i++) {
                Ap[i] = A[i] + h * Ed[i];
                Am[i] = A[i] - h * Ed[i];
            }
            vt_expm(Ap, n, Fp, W);
            vt_expm(Am, n, Fm, W);
            double big = 0;
            for (size_t i = 0; i < nn; i++) {
                FD[i] = (Fp[i] - Fm[i]) / (2 * h);
                big = fmax(big, fabs(FD[i]));
            }
            CHECK(max_abs_diff(L, FD, nn) < 1e-6 * (1 + big), "Frechet vs central difference n=%d scale=%g: %.3g",
                  n, scales[sc], max_abs_diff(L, FD, nn));
            double E2[36];
            vt_expm(A, n, E2, W);
            CHECK(max_abs_diff(Ex, E2, nn) < 1e-12 * (1 + big), "Frechet's expA equals vt_expm n=%d", n);
            /* adjoint: <G, L(A, E)> = <dA, E> with dA = L(A^T, G) */
            for (size_t i = 0; i < nn; i++) G[i] = 2 * vt_rng_uniform(&rng) - 1;
            vt_expm_backward(A, G, n, dA, W);
            double lhs = 0, rhs = 0;
            for (size_t i = 0; i < nn; i++) {
                lhs += G[i] * L[i];
                rhs += dA[i] * Ed[i];
            }
            CHECK_CLOSE(rhs, lhs, 1e-9, 1e-9, "backward adjoint identity n=%d scale=%g", n, scales[sc]);
            /* backward against finite differences of the scalar <G, expm(A)> in entry (0, n-1) */
            double Ap2[36], Am2[36];
            memcpy(Ap2, A, nn * 8);
            memcpy(Am2, A, nn * 8);
            Ap2[n - 1] += h;
            Am2[n - 1] -= h;
            vt_expm(Ap2, n, Fp, W);
            vt_expm(Am2, n, Fm, W);
            double fd = 0;
            for (size_t i = 0; i < nn; i++) fd += G[i] * (Fp[i] - Fm[i]) / (2 * h);
            CHECK_CLOSE(dA[n - 1], fd, 1e-6 * (1 + big), 1e-6, "backward dA[0][n-1] vs FD n=%d", n);
            free(W);
        }
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

static float *u_of(fix *f) { return f->views[0].data; }

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
    vt_pe_liere_prepare_coords(f->pe, &tape, o.coords);
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

/* Dense oracle: y = blockdiag(expm(sum_k r_k (U_k - U_k^T))) x for one token of head h
 * (parameter head hp) in parameter layer lp. */
static void dense_apply(fix *f, int lp, int hp, const float *r, const float *x, double *y) {
    int C = f->pe->cfg.coord_dim, g = f->pe->cfg.block_size, nb = f->hd / g, Hp = (int)f->pe->params[0].shape[1];
    const float *U = u_of(f) + (size_t)(lp * Hp + hp) * C * nb * g * g;
    double A[64 * 64], E[64 * 64];
    for (int n = 0; n < nb; n++) {
        memset(A, 0, sizeof(double) * g * g);
        for (int k = 0; k < C; k++) {
            const float *u = U + ((size_t)k * nb + n) * g * g;
            for (int i = 0; i < g; i++)
                for (int j = i + 1; j < g; j++) {
                    A[i * g + j] += (double)r[k] * u[i * g + j];
                    A[j * g + i] -= (double)r[k] * u[i * g + j];
                }
        }
        expm_oracle(A, g, E);
        for (int i = 0; i < g; i++) {
            double s = 0;
            for (int j = 0; j < g; j++) s += E[i * g + j] * x[n * g + j];
            y[n * g + i] = s;
        }
    }
}

/* ---------- LieRE tests ---------- */

static void test_dense_and_orthogonal(void) {
    const char *sets[] = {"pe.block_size=4", "pe.share=none", "pe.init_scale=0.5"};
    fix f;
    CHECK(fix_make(&f, "liere", 16, 2, 2, sets, 3, 11), "make liere");
    int B = 2, Np = 5, hd = f.hd, H = f.H, N = 1 + Np;
    for (int Ba = 1; Ba <= 2; Ba++) {
        float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *k = rand_buf((int64_t)B * H * N * hd, -1, 1);
        float *c = rand_buf((int64_t)Ba * Np * 2, -1.5, 1.5);
        run_out o = run_pe(&f, 1, B, Np, Ba, q, k, c, 0, NULL, NULL);
        double worst = 0, worst_norm = 0, worst_dot = 0;
        int cls_same = 1;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                const float *x0 = q + ((size_t)(b * H + h) * N) * hd;
                const float *y0 = o.qo->data + ((size_t)(b * H + h) * N) * hd;
                cls_same &= memcmp(x0, y0, (size_t)hd * sizeof(float)) == 0;
                for (int n = 1; n < N; n++) {
                    const float *x = x0 + (size_t)n * hd, *y = y0 + (size_t)n * hd;
                    double ref[64], nx = 0, ny = 0;
                    dense_apply(&f, 1, h, c + ((size_t)(Ba > 1 ? b : 0) * Np + n - 1) * 2, x, ref);
                    for (int i = 0; i < hd; i++) {
                        worst = fmax(worst, fabs(y[i] - ref[i]));
                        nx += (double)x[i] * x[i];
                        ny += (double)y[i] * y[i];
                    }
                    worst_norm = fmax(worst_norm, fabs(sqrt(ny) - sqrt(nx)));
                    /* orthogonality: <R q, R k> = <q, k> at the same token */
                    const float *kx = k + ((size_t)(b * H + h) * N + n) * hd;
                    const float *ky = o.ko->data + ((size_t)(b * H + h) * N + n) * hd;
                    double d0 = 0, d1 = 0;
                    for (int i = 0; i < hd; i++) {
                        d0 += (double)x[i] * kx[i];
                        d1 += (double)y[i] * ky[i];
                    }
                    worst_dot = fmax(worst_dot, fabs(d1 - d0));
                }
            }
        CHECK(worst < 1e-5, "liere vs dense expm oracle (Ba=%d): max diff %.3g", Ba, worst);
        CHECK(worst_norm < 1e-5, "liere preserves norms (Ba=%d): %.3g", Ba, worst_norm);
        CHECK(worst_dot < 1e-5, "liere preserves inner products (Ba=%d): %.3g", Ba, worst_dot);
        CHECK(cls_same, "CLS token untouched (Ba=%d)", Ba);
        free(q); free(k); free(c);
    }
    fix_free(&f);
}

static void test_commute_equals_rope(void) {
    const char *sets[] = {"pe.share=heads", "pe.positions=index"};
    fix f;
    CHECK(fix_make(&f, "liere_commute", 16, 2, 1, sets, 2, 5), "make liere_commute");
    int hd = f.hd, H = f.H, C = 2, Np = 6, N = 1 + Np, B = 2, npr = hd / 2;
    /* param (1, 1, C, hd/2, 2, 2) with share heads and L = 1; set U = -f */
    CHECK(f.pe->params[0].shape[0] == 1 && f.pe->params[0].shape[1] == 1 && f.pe->params[0].shape[3] == npr,
          "liere_commute share=heads shape");
    float *fr = rand_buf((int64_t)npr * C, -1, 1);
    float *U = u_of(&f);
    for (int k = 0; k < C; k++)
        for (int p = 0; p < npr; p++) U[((size_t)k * npr + p) * 4 + 1] = -fr[p * C + k];
    float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *k = rand_buf((int64_t)B * H * N * hd, -1, 1);
    float *c = rand_buf((int64_t)Np * C, -3, 3);
    run_out o = run_pe(&f, 0, B, Np, 1, q, k, c, 0, NULL, NULL);
    float *lq = malloc((size_t)o.qo->size * sizeof(float));
    memcpy(lq, o.qo->data, (size_t)o.qo->size * sizeof(float));
    begin(0);
    vt_tensor *x = new_t(0, 4, B, H, N, hd), *co = new_t(0, 3, 1, Np, C, 1), *fq = new_t(0, 3, 1, npr, C, 1);
    fill(x, q);
    fill(co, c);
    fill(fq, fr);
    vt_tensor *cs = vt_op_rot_cossin(&tape, vt_op_rot_angles(&tape, co, fq));
    vt_tensor *y = vt_op_rot_pairs(&tape, x, cs);
    CHECK_ARRAY_CLOSE(lq, y->data, y->size, 2e-6, 1e-5, "liere_commute(U = -f) == RoPE(f)");
    /* the sign matters: U = +f gives the rotation by the negative angles, not RoPE(f) */
    for (int kk = 0; kk < C; kk++)
        for (int p = 0; p < npr; p++) U[((size_t)kk * npr + p) * 4 + 1] = fr[p * C + kk];
    run_out o2 = run_pe(&f, 0, B, Np, 1, q, k, c, 0, NULL, NULL);
    double maxd = 0;
    for (int64_t i = 0; i < o2.qo->size; i++) maxd = fmax(maxd, fabs(o2.qo->data[i] - lq[i]));
    CHECK(maxd > 0.1, "liere_commute(U = +f) differs from RoPE(f) (sign convention): %.3g", maxd);
    free(lq); free(fr); free(q); free(k); free(c);
    fix_free(&f);

    /* the same through the kinds themselves on a 3 x 4 grid: liere_commute (U = -f) and
     * rope_mixed (pe.freqs = f), both share all, positions index */
    const char *sa[] = {"pe.share=all", "pe.positions=index"};
    fix lc, rm;
    CHECK(fix_make(&lc, "liere_commute", 16, 2, 2, sa, 2, 6), "make liere_commute");
    CHECK(fix_make(&rm, "rope_mixed", 16, 2, 2, sa, 2, 7), "make rope_mixed");
    CHECK(rm.pe->params[0].size == (int64_t)npr * C && strcmp(rm.pe->params[0].name, "pe.freqs") == 0,
          "rope_mixed pe.freqs (1, 1, hd/2, C)");
    fr = rand_buf((int64_t)npr * C, -1, 1);
    memcpy(rm.views[0].data, fr, (size_t)npr * C * sizeof(float));
    for (int kk = 0; kk < C; kk++)
        for (int p = 0; p < npr; p++) u_of(&lc)[((size_t)kk * npr + p) * 4 + 1] = -fr[p * C + kk];
    int rows = 3, cols = 4;
    N = 1 + rows * cols;
    q = rand_buf((int64_t)B * H * N * hd, -1, 1);
    float *out[2];
    fix *fs[2] = {&lc, &rm};
    for (int i = 0; i < 2; i++) {
        begin(0);
        vt_tensor *qt = new_t(0, 4, B, H, N, hd), *kt = new_t(0, 4, B, H, N, hd);
        fill(qt, q);
        fill(kt, q);
        vt_pe_prepare(fs[i]->pe, &tape, rows, cols, NULL);
        vt_pe_apply_qk(fs[i]->pe, &tape, 1, &qt, &kt);
        out[i] = malloc((size_t)qt->size * sizeof(float));
        memcpy(out[i], qt->data, (size_t)qt->size * sizeof(float));
    }
    CHECK_ARRAY_CLOSE(out[0], out[1], (int64_t)B * H * N * hd, 2e-6, 1e-5,
                      "kind liere_commute (U = -f) == kind rope_mixed (freqs f) on a 3 x 4 grid");
    free(out[0]); free(out[1]); free(q); free(fr);
    fix_free(&lc);
    fix_free(&rm);
}

/* <R(r_i + s) q, R(r_j + s) k> - <R(r_i) q, R(r_j) k>, worst over heads and shifts. */
static double invariance_gap(fix *f, int C) {
    int hd = f->hd, H = f->H, Np = 2, N = 3;
    float *q = rand_buf((int64_t)H * N * hd, -1, 1), *k = rand_buf((int64_t)H * N * hd, -1, 1);
    double worst = 0;
    for (int trial = 0; trial < 4; trial++) {
        float c[6], cs[6];
        for (int i = 0; i < Np * C; i++) c[i] = (float)(3 * (2 * vt_rng_uniform(&rng) - 1));
        float s[3];
        for (int kk = 0; kk < C; kk++) s[kk] = (float)(2.5 * (2 * vt_rng_uniform(&rng) - 1));
        for (int n = 0; n < Np; n++)
            for (int kk = 0; kk < C; kk++) cs[n * C + kk] = c[n * C + kk] + s[kk];
        double dots[2][8];
        for (int pass = 0; pass < 2; pass++) {
            run_out o = run_pe(f, 0, 1, Np, 1, q, k, pass ? cs : c, 0, NULL, NULL);
            for (int h = 0; h < H; h++) {
                const float *qi = o.qo->data + ((size_t)h * N + 1) * hd, *kj = o.ko->data + ((size_t)h * N + 2) * hd;
                double d = 0;
                for (int i = 0; i < hd; i++) d += (double)qi[i] * kj[i];
                dots[pass][h] = d;
            }
        }
        for (int h = 0; h < H; h++) worst = fmax(worst, fabs(dots[1][h] - dots[0][h]));
    }
    free(q);
    free(k);
    return worst;
}

static void test_translation_invariance(void) {
    fix f;
    const char *s_commute[] = {"pe.coord_dim=2"};
    CHECK(fix_make(&f, "liere_commute", 16, 2, 1, s_commute, 1, 21), "make");
    double gap = invariance_gap(&f, 2);
    CHECK(gap < 1e-4, "liere_commute (C=2) translation invariant: gap %.3g", gap);
    fix_free(&f);

    const char *s_dense2[] = {"pe.coord_dim=2", "pe.block_size=8"};
    CHECK(fix_make(&f, "liere", 16, 2, 1, s_dense2, 2, 22), "make");
    gap = invariance_gap(&f, 2);
    CHECK(gap > 1e-2, "dense liere (g=8, C=2) is NOT translation invariant: gap %.3g", gap);
    fix_free(&f);

    const char *s_dense1[] = {"pe.coord_dim=1", "pe.block_size=8"};
    CHECK(fix_make(&f, "liere", 16, 2, 1, s_dense1, 2, 23), "make");
    gap = invariance_gap(&f, 1);
    CHECK(gap < 1e-4, "dense liere (g=8, C=1) translation invariant: gap %.3g", gap);
    fix_free(&f);

    const char *s_dense3[] = {"pe.coord_dim=3", "pe.block_size=4"};
    CHECK(fix_make(&f, "liere", 16, 2, 1, s_dense3, 2, 24), "make");
    gap = invariance_gap(&f, 3);
    CHECK(gap > 1e-2, "dense liere (g=4, C=3) is NOT translation invariant: gap %.3g", gap);
    fix_free(&f);
}

/* Finite differences of L = <rq, q'> + <rk, k'> against the tape's gradients. */
static void grad_check(const char *kind, const char *const *sets, int nsets, double uscale) {
    fix f;
    CHECK(fix_make(&f, kind, 16, 2, 2, sets, nsets, 31), "make %s", kind);
    float *U = u_of(&f);
    for (int64_t i = 0; i < f.views[0].size; i++) U[i] *= (float)uscale;
    int B = 2, Np = 3, N = 1 + Np, hd = f.hd, H = f.H, C = f.pe->cfg.coord_dim;
    int64_t nq = (int64_t)B * H * N * hd;
    float *q = rand_buf(nq, -1, 1), *k = rand_buf(nq, -1, 1), *c = rand_buf((int64_t)Np * C, -1, 1);
    float *rq = rand_buf(nq, -1, 1), *rk = rand_buf(nq, -1, 1);
    memset(f.grad, 0, (size_t)f.total * sizeof(float));
    run_out o = run_pe(&f, 1, B, Np, 1, q, k, c, 1, rq, rk);
    float *gq = malloc(nq * 4), *gk = malloc(nq * 4), *gc = malloc((size_t)Np * C * 4);
    memcpy(gq, o.q->grad, nq * 4);
    memcpy(gk, o.k->grad, nq * 4);
    memcpy(gc, o.coords->grad, (size_t)Np * C * 4);
    float *gu = malloc((size_t)f.total * 4);
    memcpy(gu, f.grad, (size_t)f.total * 4);
    const double eps = 1e-2;
    int bad = 0;
    double worst = 0;
    /* q and k: a sample of entries, including CLS (token 0) entries */
    for (int which = 0; which < 2; which++) {
        float *src = which ? k : q, *g = which ? gk : gq;
        for (int64_t i = 0; i < nq; i += 11) {
            float keep = src[i];
            src[i] = keep + (float)eps;
            run_out a = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
            double lp = loss_of(&a, rq, rk);
            src[i] = keep - (float)eps;
            run_out b = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
            double lm = loss_of(&b, rq, rk);
            src[i] = keep;
            double fd = (lp - lm) / (2 * eps);
            if (!test_close(g[i], fd, 2e-3, 2e-3)) bad++;
            worst = fmax(worst, fabs(g[i] - fd));
        }
    }
    CHECK(bad == 0, "%s: d q/k vs finite differences: %d bad, worst %.3g", kind, bad, worst);
    /* U: every entry of the layer-1 parameter set (share none); lower/diag exactly 0 */
    int g = f.pe->cfg.block_size, Lp = (int)f.pe->params[0].shape[0];
    int64_t per = f.views[0].size / Lp, base = (Lp > 1 ? 1 : 0) * per;
    bad = 0;
    worst = 0;
    int zero_ok = 1, checked = 0;
    for (int64_t e = 0; e < per; e++) {
        int64_t i = base + e;
        int r = (int)((e / g) % g), col = (int)(e % g);
        if (col <= r) {
            zero_ok &= gu[i] == 0.0f;
            continue;
        }
        float keep = U[i];
        U[i] = keep + (float)eps;
        run_out a = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
        double lp = loss_of(&a, rq, rk);
        U[i] = keep - (float)eps;
        run_out b = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
        double lm = loss_of(&b, rq, rk);
        U[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        if (!test_close(gu[i], fd, 3e-3, 3e-3)) bad++;
        worst = fmax(worst, fabs(gu[i] - fd));
        checked++;
    }
    CHECK(bad == 0 && checked > 0, "%s: d liere_u (upper, %d entries) vs finite differences: %d bad, worst %.3g",
          kind, checked, bad, worst);
    CHECK(zero_ok, "%s: lower triangle and diagonal of liere_u get exactly zero gradient", kind);
    /* unused entries are ignored on input and cleared: junk there changes nothing */
    float *junk = malloc((size_t)f.total * 4);
    memcpy(junk, U, (size_t)f.total * 4);
    run_out ref = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
    double lref = loss_of(&ref, rq, rk);
    for (int64_t e = 0; e < f.views[0].size; e++)
        if ((e % g) <= (e / g) % g) U[e] = 7.0f + (float)(e % 5);
    run_out jr = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
    CHECK(loss_of(&jr, rq, rk) == lref, "%s: lower/diagonal entries of liere_u are ignored", kind);
    CHECK(memcmp(junk, U, (size_t)f.total * 4) == 0, "%s: and cleared back to 0", kind);
    free(junk);
    /* the other layer's set (layer 0) gets no gradient from layer 1 */
    int other_zero = 1;
    if (Lp > 1)
        for (int64_t e = 0; e < per; e++) other_zero &= gu[e] == 0.0f;
    CHECK(other_zero, "%s: unused layer's set has zero gradient", kind);
    /* coordinates */
    bad = 0;
    worst = 0;
    for (int i = 0; i < Np * C; i++) {
        float keep = c[i];
        c[i] = keep + (float)eps;
        run_out a = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
        double lp = loss_of(&a, rq, rk);
        c[i] = keep - (float)eps;
        run_out b = run_pe(&f, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
        double lm = loss_of(&b, rq, rk);
        c[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        if (!test_close(gc[i], fd, 3e-3, 3e-3)) bad++;
        worst = fmax(worst, fabs(gc[i] - fd));
    }
    CHECK(bad == 0, "%s: d coords vs finite differences: %d bad, worst %.3g", kind, bad, worst);
    free(q); free(k); free(c); free(rq); free(rk); free(gq); free(gk); free(gc); free(gu);
    fix_free(&f);
}

static void test_gradients(void) {
    const char *dense[] = {"pe.block_size=4", "pe.share=none"};
    grad_check("liere", dense, 2, 0.15);
    const char *full[] = {"pe.block_size=8", "pe.share=none", "pe.coord_dim=3"};
    grad_check("liere", full, 3, 0.1);
    const char *commute[] = {"pe.share=none", "pe.coord_dim=1"};
    grad_check("liere_commute", commute, 2, 0.5);
}

/* RGB-D: positions per sample through pe.depth_scale; its gradient against finite
 * differences through the real prepare path (vt_pe_prepare with images). */
static void test_depth_scale(void) {
    const char *sets[] = {"model.in_chans=4", "pe.block_size=4", "pe.init_scale=0.1"};
    fix f;
    CHECK(fix_make(&f, "liere", 16, 2, 1, sets, 3, 41), "make RGB-D liere");
    CHECK(f.pe->depth_param >= 0, "RGB-D PE declares pe.depth_scale");
    if (f.pe->depth_param < 0) return fix_free(&f);
    float *ds = f.pe->params[f.pe->depth_param].t->data;
    float *dsg = f.pe->params[f.pe->depth_param].t->grad;
    int B = 2, S = 8, P = 4, rows = S / P, Np = rows * rows, N = 1 + Np, hd = f.hd, H = f.H;
    int64_t nq = (int64_t)B * H * N * hd, ni = (int64_t)B * 4 * S * S;
    float *img = rand_buf(ni, 0, 1.5), *q = rand_buf(nq, -1, 1), *k = rand_buf(nq, -1, 1);
    float *rq = rand_buf(nq, -1, 1), *rk = rand_buf(nq, -1, 1);
    double L[3] = {0};
    float base = 0.8f;
    const double eps = 1e-2;
    for (int pass = 0; pass < 3; pass++) {
        int grad = pass == 0;
        *ds = base + (pass == 1 ? (float)eps : pass == 2 ? (float)-eps : 0.0f);
        begin(grad);
        vt_tensor *im = new_t(0, 4, B, 4, S, S);
        fill(im, img);
        vt_tensor *qt = new_t(grad, 4, B, H, N, hd), *kt = new_t(grad, 4, B, H, N, hd);
        fill(qt, q);
        fill(kt, k);
        memset(f.grad, 0, (size_t)f.total * 4);
        vt_pe_prepare(f.pe, &tape, rows, rows, im);
        vt_tensor *qo = qt, *ko = kt;
        vt_pe_apply_qk(f.pe, &tape, 0, &qo, &ko);
        run_out o = {qt, kt, NULL, qo, ko};
        L[pass] = loss_of(&o, rq, rk);
        if (grad) {
            memcpy(qo->grad, rq, nq * 4);
            memcpy(ko->grad, rk, nq * 4);
            run_backward();
        }
        if (grad) L[0] = *dsg; /* pass 0 keeps the analytic gradient, not the loss */
    }
    double fd = (L[1] - L[2]) / (2 * eps);
    CHECK(fabs(L[0]) > 1e-4, "depth scale gradient is nonzero (%.3g)", L[0]);
    CHECK_CLOSE(L[0], fd, 3e-3, 3e-3, "d depth_scale vs finite differences");
    free(img); free(q); free(k); free(rq); free(rk);
    fix_free(&f);
}

/* share modes: checkpoint shapes, and which layers/heads see the same matrices */
static void test_share_and_shapes(void) {
    const char *names[] = {"none", "layers", "heads", "all"};
    int D = 16, H = 2, L = 3, hd = 8;
    for (int sm = 0; sm < 4; sm++) {
        char s1[64];
        snprintf(s1, sizeof s1, "pe.share=%s", names[sm]);
        const char *sets[] = {s1, "pe.coord_dim=2"};
        fix f;
        CHECK(fix_make(&f, "liere", D, H, L, sets, 2, 51), "make share=%s", names[sm]);
        int Lp = sm == 0 || sm == 2 ? L : 1, Hp = sm == 0 || sm == 1 ? H : 1;
        vt_pe_param *p = &f.pe->params[0];
        int64_t want[6] = {Lp, Hp, 2, 1, hd, hd};
        int ok = p->ndim == 6 && strcmp(p->name, "pe.liere_u") == 0;
        for (int i = 0; ok && i < 6; i++) ok = p->shape[i] == want[i];
        CHECK(ok, "share=%s: pe.liere_u shape (%d, %d, 2, 1, 8, 8)", names[sm], Lp, Hp);
        /* init: lower/diag 0, upper in [0, 2 pi) and not all equal */
        int init_ok = 1;
        double mn = 1e9, mx = -1e9;
        for (int64_t e = 0; e < p->size; e++) {
            int r = (int)((e / hd) % hd), c = (int)(e % hd);
            float v = f.views[0].data[e];
            if (c <= r) init_ok &= v == 0.0f;
            else {
                init_ok &= v >= 0.0f && v < (float)(2 * M_PI);
                mn = fmin(mn, v);
                mx = fmax(mx, v);
            }
        }
        CHECK(init_ok && mx - mn > 1.0, "share=%s: init U(0, 2 pi) upper, 0 elsewhere", names[sm]);
        /* layers 0 and 2, heads 0 and 1 on identical inputs */
        int B = 1, Np = 2, N = 3;
        float *q = rand_buf((int64_t)B * H * N * hd, -1, 1), *c = rand_buf((int64_t)Np * 2, 0, 1);
        memcpy(q + (size_t)N * hd, q, (size_t)N * hd * sizeof(float)); /* head 1 = head 0 */
        run_out a = run_pe(&f, 0, B, Np, 1, q, q, c, 0, NULL, NULL);
        float *y0 = malloc((size_t)a.qo->size * 4);
        memcpy(y0, a.qo->data, (size_t)a.qo->size * 4);
        run_out b = run_pe(&f, 2, B, Np, 1, q, q, c, 0, NULL, NULL);
        int same_layers = memcmp(y0, b.qo->data, (size_t)b.qo->size * 4) == 0;
        int same_heads = memcmp(y0, y0 + (size_t)N * hd, (size_t)N * hd * 4) == 0;
        CHECK(same_layers == (Lp == 1), "share=%s: layers 0 and 2 %s", names[sm], Lp == 1 ? "equal" : "differ");
        CHECK(same_heads == (Hp == 1), "share=%s: heads 0 and 1 %s", names[sm], Hp == 1 ? "equal" : "differ");
        free(q); free(c); free(y0);
        fix_free(&f);
    }
    /* the default for liere: positions normalized, share all, g = hd */
    fix f;
    CHECK(fix_make(&f, "liere", D, H, L, NULL, 0, 52), "make default liere");
    CHECK(f.pe->cfg.share == VT_SHARE_ALL && f.pe->cfg.positions == VT_POS_NORMALIZED &&
              f.pe->cfg.block_size == hd, "liere defaults: share all, positions normalized, g = hd");
    fix_free(&f);
    CHECK(fix_make(&f, "liere_commute", D, H, L, NULL, 0, 53), "make default liere_commute");
    CHECK(f.pe->params[0].shape[3] == hd / 2 && f.pe->params[0].shape[4] == 2,
          "liere_commute: (1, 1, C, hd/2, 2, 2)");
    fix_free(&f);

    /* in a model: checkpoint names and shapes, and a forward/backward through the ViT */
    vt_config cfg;
    vt_config_defaults(&cfg);
    const char *ms[] = {"model.width=16", "model.heads=2", "model.depth=2", "model.img_size=8",
                        "model.patch_size=4", "model.num_classes=3", "pe.kind=liere",
                        "pe.share=layers", "pe.block_size=4"};
    int ok = 1;
    for (int i = 0; i < 9; i++) ok &= vt_config_set(&cfg, ms[i]) == VT_OK;
    ok &= vt_config_validate(&cfg) == VT_OK;
    CHECK(ok, "model config: %s", vt_last_error());
    vt_vit m;
    CHECK(vt_vit_init(&m, &cfg, 7) == VT_OK, "vit init: %s", vt_last_error());
    vt_param *p = vt_vit_find(&m, "pe.liere_u");
    int64_t want[6] = {1, 2, 2, 2, 4, 4};
    int shape_ok = p && p->ckpt_ndim == 6;
    for (int i = 0; shape_ok && i < 6; i++) shape_ok = p->ckpt_shape[i] == want[i];
    CHECK(shape_ok, "model: pe.liere_u checkpoint shape (1, 2, 2, 2, 4, 4)");
    CHECK(p && !p->decay, "pe.liere_u gets no weight decay");
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
    CHECK(isfinite(loss->data[0]) && finite && gn > 0, "model forward/backward reaches pe.liere_u (|g|^2 = %.3g)", gn);
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
    vt_rng_seed(&rng, 1234);
    test_expm_oracles();
    test_expm_frechet();
    test_dense_and_orthogonal();
    test_commute_equals_rope();
    test_translation_invariance();
    test_gradients();
    test_depth_scale();
    test_share_and_shapes();
    vt_tape_free(&tape);
    vt_arena_free(&arena);
    return test_summary();
}
