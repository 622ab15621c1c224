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
#include "pe_fixture.h"
#include "pe/expm.h"
#include "pe/lie.h"
#include "pe/pe.h"
#include "pe/rotary.h"
#include "rng.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"

/* ---------- float64 helpers ---------- */

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

static float *u_of(fix *f) { return f->views[0].data; }

/* Dense oracle: y = blockdiag(expm(sum_k r_k (U_k - U_k^T))) x for one token of head h
 * (parameter head hp) in parameter layer lp. */
static void dense_apply(fix *f, int lp, int hp, const float *r, const float *x, double *y) {
    int C = f->pe->cfg.coord_dim, g = f->pe->cfg.block_size, nb = f->hd / g, Hp = (int)f->pe->params[0].shape[1];
    const float *U = u_of(f) + (size_t)(lp * Hp + hp) * C * nb * g * g;
    double A[64 * 64];
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
        expm_apply(A, g, x + n * g, y + n * g);
    }
}

/* ---------- LieRE tests ---------- */

static void test_dense_and_orthogonal(void) {
    const char *sets[] = {"pe.block_size=4", "pe.share=none", "pe.init_scale=0.5"};
    fix f;
    CHECK(fix_make(&f, "liere", 16, 2, 2, sets, 3, 11), "make liere");
    for (int Ba = 1; Ba <= 2; Ba++) {
        pe_dense_stats st = pe_dense_compare(&f, vt_pe_liere_prepare_coords, dense_apply, Ba, 1.5);
        CHECK(st.worst < 1e-5, "liere vs dense expm oracle (Ba=%d): max diff %.3g", Ba, st.worst);
        CHECK(st.worst_norm < 1e-5, "liere preserves norms (Ba=%d): %.3g", Ba, st.worst_norm);
        /* orthogonality: <R q, R k> = <q, k> at the same token */
        CHECK(st.worst_dot < 1e-5, "liere preserves inner products (Ba=%d): %.3g", Ba, st.worst_dot);
        CHECK(st.cls_q, "CLS token untouched (Ba=%d)", Ba);
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
    run_out o = run_pe(&f, vt_pe_liere_prepare_coords, 0, B, Np, 1, q, k, c, 0, NULL, NULL);
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
    run_out o2 = run_pe(&f, vt_pe_liere_prepare_coords, 0, B, Np, 1, q, k, c, 0, NULL, NULL);
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

/* <R(r_i + s) q, R(r_j + s) k> - <R(r_i) q, R(r_j) k>, worst over heads and shifts:
 * below 1e-4 where the generators commute (g = 2, or C = 1), above 1e-2 where they do not. */
static void test_translation_invariance(void) {
    static const struct {
        const char *kind, *label, *sets[2];
        int L, C, invariant;
        uint64_t seed;
    } cases[] = {
        {"liere_commute", "liere_commute (C=2)", {"pe.coord_dim=2"}, 1, 2, 1, 21},
        {"liere", "dense liere (g=8, C=2)", {"pe.coord_dim=2", "pe.block_size=8"}, 2, 2, 0, 22},
        {"liere", "dense liere (g=8, C=1)", {"pe.coord_dim=1", "pe.block_size=8"}, 2, 1, 1, 23},
        {"liere", "dense liere (g=4, C=3)", {"pe.coord_dim=3", "pe.block_size=4"}, 2, 3, 0, 24},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fix f;
        int nsets = cases[i].sets[1] ? 2 : 1;
        CHECK(fix_make(&f, cases[i].kind, 16, 2, cases[i].L, cases[i].sets, nsets, cases[i].seed), "make");
        double gap = pe_invariance_gap(&f, vt_pe_liere_prepare_coords, cases[i].C, NULL);
        if (cases[i].invariant)
            CHECK(gap < 1e-4, "%s translation invariant: gap %.3g", cases[i].label, gap);
        else
            CHECK(gap > 1e-2, "%s is NOT translation invariant: gap %.3g", cases[i].label, gap);
        fix_free(&f);
    }
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
    run_out o = run_pe(&f, vt_pe_liere_prepare_coords, 1, B, Np, 1, q, k, c, 1, rq, rk);
    float *gq = malloc(nq * 4), *gk = malloc(nq * 4), *gc = malloc((size_t)Np * C * 4);
    memcpy(gq, o.q->grad, nq * 4);
    memcpy(gk, o.k->grad, nq * 4);
    memcpy(gc, o.coords->grad, (size_t)Np * C * 4);
    float *gu = malloc((size_t)f.total * 4);
    memcpy(gu, f.grad, (size_t)f.total * 4);
    const double eps = 1e-2;
    pe_loss_ctx lc = {&f, vt_pe_liere_prepare_coords, 1, B, Np, q, k, c, rq, rk};
    /* q and k: a sample of entries, including CLS (token 0) entries */
    gc_result qk = {0};
    for (int which = 0; which < 2; which++) {
        float *src = which ? k : q, *g = which ? gk : gq;
        for (int64_t i = 0; i < nq; i += 11)
            gc_check_elem(&qk, which ? "k" : "q", i, &src[i], g[i], eps, 2e-3, 2e-3, pe_loss, &lc, NULL);
    }
    CHECK(qk.bad == 0, "%s: d q/k vs finite differences: %d bad, worst %.3g", kind, qk.bad, qk.worst);
    /* U: every entry of the layer-1 parameter set (share none); lower/diag exactly 0 */
    int g = f.pe->cfg.block_size, Lp = (int)f.pe->params[0].shape[0];
    int64_t per = f.views[0].size / Lp, base = (Lp > 1 ? 1 : 0) * per;
    gc_result ur = {0};
    int zero_ok = 1;
    for (int64_t e = 0; e < per; e++) {
        int64_t i = base + e;
        int r = (int)((e / g) % g), col = (int)(e % g);
        if (col <= r) {
            zero_ok &= gu[i] == 0.0f;
            continue;
        }
        gc_check_elem(&ur, "liere_u", i, &U[i], gu[i], eps, 3e-3, 3e-3, pe_loss, &lc, NULL);
    }
    CHECK(ur.bad == 0 && ur.checked > 0, "%s: d liere_u (upper, %d entries) vs finite differences: %d bad, worst %.3g",
          kind, ur.checked, ur.bad, ur.worst);
    CHECK(zero_ok, "%s: lower triangle and diagonal of liere_u get exactly zero gradient", kind);
    /* unused entries are ignored on input and cleared: junk there changes nothing */
    float *junk = malloc((size_t)f.total * 4);
    memcpy(junk, U, (size_t)f.total * 4);
    run_out ref = run_pe(&f, vt_pe_liere_prepare_coords, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
    double lref = loss_of(&ref, rq, rk);
    for (int64_t e = 0; e < f.views[0].size; e++)
        if ((e % g) <= (e / g) % g) U[e] = 7.0f + (float)(e % 5);
    run_out jr = run_pe(&f, vt_pe_liere_prepare_coords, 1, B, Np, 1, q, k, c, 0, NULL, NULL);
    CHECK(loss_of(&jr, rq, rk) == lref, "%s: lower/diagonal entries of liere_u are ignored", kind);
    vt_pe_clear_unused(f.pe);
    CHECK(memcmp(junk, U, (size_t)f.total * 4) == 0, "%s: and cleared back to 0 by clear_unused", kind);
    free(junk);
    /* the other layer's set (layer 0) gets no gradient from layer 1 */
    int other_zero = 1;
    if (Lp > 1)
        for (int64_t e = 0; e < per; e++) other_zero &= gu[e] == 0.0f;
    CHECK(other_zero, "%s: unused layer's set has zero gradient", kind);
    /* coordinates */
    gc_result cr = gc_check_array("coords", c, gc, Np * C, 0, 1, eps, 3e-3, 3e-3, pe_loss, &lc);
    CHECK(cr.bad == 0, "%s: d coords vs finite differences: %d bad, worst %.3g", kind, cr.bad, cr.worst);
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

/* The RGB-D case of test_depth_scale: the images, q, k and the loss weights rq, rk. */
typedef struct {
    fix *f;
    const float *img, *q, *k, *rq, *rk;
    int B, S, rows;
} depth_case;

/* One pass through the real prepare path (vt_pe_prepare with images) and layer 0; with
 * grad, the backward seeded with rq, rk into zeroed parameter grads. Returns
 * L = <rq, q'> + <rk, k'>. */
static double depth_run(const depth_case *d, int grad) {
    fix *f = d->f;
    int B = d->B, S = d->S, N = 1 + d->rows * d->rows, H = f->H, hd = f->hd;
    begin(grad);
    vt_tensor *im = new_t(0, 4, B, 4, S, S);
    fill(im, d->img);
    vt_tensor *qt = new_t(grad, 4, B, H, N, hd), *kt = new_t(grad, 4, B, H, N, hd);
    fill(qt, d->q);
    fill(kt, d->k);
    memset(f->grad, 0, (size_t)f->total * 4);
    vt_pe_prepare(f->pe, &tape, d->rows, d->rows, im);
    vt_tensor *qo = qt, *ko = kt;
    vt_pe_apply_qk(f->pe, &tape, 0, &qo, &ko);
    run_out o = {qt, kt, NULL, qo, ko};
    double L = loss_of(&o, d->rq, d->rk);
    if (grad) {
        memcpy(qo->grad, d->rq, (size_t)qo->size * 4);
        memcpy(ko->grad, d->rk, (size_t)ko->size * 4);
        run_backward();
    }
    return L;
}

static double depth_loss(void *d) { return depth_run(d, 0); }

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
    int B = 2, S = 8, P = 4, rows = S / P, N = 1 + rows * rows, hd = f.hd, H = f.H;
    int64_t nq = (int64_t)B * H * N * hd, ni = (int64_t)B * 4 * S * S;
    float *img = rand_buf(ni, 0, 1.5), *q = rand_buf(nq, -1, 1), *k = rand_buf(nq, -1, 1);
    float *rq = rand_buf(nq, -1, 1), *rk = rand_buf(nq, -1, 1);
    depth_case d = {&f, img, q, k, rq, rk, B, S, rows};
    *ds = 0.8f;
    depth_run(&d, 1);
    double ana = *dsg, num;
    gc_result r = {0};
    gc_check_elem(&r, "depth_scale", 0, ds, ana, 1e-2, 3e-3, 3e-3, depth_loss, &d, &num);
    CHECK(fabs(ana) > 1e-4, "depth scale gradient is nonzero (%.3g)", ana);
    CHECK(r.bad == 0, "d depth_scale vs finite differences: analytic %.9g numeric %.9g", ana, num);
    free(img); free(q); free(k); free(rq); free(rk);
    fix_free(&f);
}

/* share modes: checkpoint shapes, and which layers/heads see the same matrices */
static void test_share_and_shapes(void) {
    const char *const *names = pe_share_names;
    int D = 16, H = 2, L = 3, hd = 8;
    for (int sm = 0; sm < 4; sm++) {
        fix f;
        int Lp, Hp;
        pe_share_make(&f, "liere", D, H, L, sm, "pe.coord_dim=2", &Lp, &Hp);
        vt_pe_param *p = &f.pe->params[0];
        int64_t want[6] = {Lp, Hp, 2, 1, hd, hd};
        CHECK(pe_param_shape_is(p, "pe.liere_u", want, 6), "share=%s: pe.liere_u shape (%d, %d, 2, 1, 8, 8)",
              names[sm], Lp, Hp);
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
        pe_share_check(&f, vt_pe_liere_prepare_coords, names[sm], Lp, Hp, 1);
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
    const char *ms[] = {"model.width=16", "model.heads=2", "model.depth=2", "model.img_size=8",
                        "model.patch_size=4", "model.num_classes=3", "pe.kind=liere",
                        "pe.share=layers", "pe.block_size=4"};
    const int64_t want[6] = {1, 2, 2, 2, 4, 4};
    pe_model_check(ms, 9, "pe.liere_u", want, 6);
}

int main(void) {
    if (pe_fixture_init(1234) != 0) return 1;
    test_expm_oracles();
    test_expm_frechet();
    test_dense_and_orthogonal();
    test_commute_equals_rope();
    test_translation_invariance();
    test_gradients();
    test_depth_scale();
    test_share_and_shapes();
    pe_fixture_done();
    return test_summary();
}
