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
#include "pe_fixture.h"
#include "pe/lie.h"
#include "pe/pe.h"
#include "pe/rotary.h"
#include "rng.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"

/* ---------- PE fixtures ---------- */

static float *c_of(fix *f) { return f->views[0].data; }

/* Dense oracle: y = blockdiag(expm(sum_k r_k (C_k - C_k^T))) x for one token, set (lp, hp). */
static void dense_apply(fix *f, int lp, int hp, const float *r, const float *x, double *y) {
    int C = f->pe->cfg.coord_dim, b = f->pe->cfg.block_size, nb = f->hd / b;
    int Hp = (int)f->pe->params[0].shape[1];
    const float *cp = c_of(f) + (size_t)(lp * Hp + hp) * C * nb * b;
    double A[64 * 64];
    for (int n = 0; n < nb; n++) {
        memset(A, 0, sizeof(double) * b * b);
        for (int k = 0; k < C; k++) {
            const float *c = cp + ((size_t)k * nb + n) * b;
            for (int i = 0; i < b; i++)
                for (int j = 0; j < b; j++)
                    A[i * b + j] += (double)r[k] * ((double)c[((i - j) % b + b) % b] - c[((j - i) % b + b) % b]);
        }
        expm_apply(A, b, x + n * b, y + n * b);
    }
}

static void test_dense_orthogonal_cls(void) {
    const char *sets[] = {"pe.block_size=8", "pe.init=normal", "pe.init_std=0.3"};
    fix f;
    CHECK(fix_make(&f, "circulant", 32, 2, 2, sets, 3, 11), "make circulant");
    int hd = f.hd, H = f.H;
    for (int Ba = 1; Ba <= 2; Ba++) {
        pe_dense_stats st = pe_dense_compare(&f, vt_pe_circulant_prepare_coords, dense_apply, Ba, 3);
        CHECK(st.worst < 1e-5, "circulant vs dense expm of the generator (Ba=%d): max diff %.3g", Ba, st.worst);
        CHECK(st.maxmove > 0.1, "the rotation is not trivial (Ba=%d): max change %.3g", Ba, st.maxmove);
        CHECK(st.worst_norm < 1e-5, "circulant preserves norms (Ba=%d): %.3g", Ba, st.worst_norm);
        CHECK(st.worst_dot < 1e-5, "circulant preserves inner products (Ba=%d): %.3g", Ba, st.worst_dot);
        CHECK(st.cls_q && st.cls_k, "CLS token of q and k untouched (Ba=%d)", Ba);
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
    run_out o = run_pe(&f, vt_pe_circulant_prepare_coords, 0, 1, 2, 1, q, q, c, 0, NULL, NULL);
    CHECK_ARRAY_CLOSE(o.qo->data, q, o.qo->size, 1e-6, 1e-6, "DC and Nyquist directions fixed");
    /* ...while a generic vector moves */
    for (int i = 0; i < hd; i++) q[hd + i] = (float)(i % 3) - 1.0f;
    o = run_pe(&f, vt_pe_circulant_prepare_coords, 0, 1, 2, 1, q, q, c, 0, NULL, NULL);
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
        double spread;
        double worst = pe_invariance_gap(&f, vt_pe_circulant_prepare_coords, C, &spread);
        CHECK(worst < 1e-4, "circulant (C=%d) translation invariant: gap %.3g", C, worst);
        CHECK(spread > 1e-2, "circulant (C=%d) logits depend on positions: %.3g", C, spread);
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
    run_out o = run_pe(&f, vt_pe_circulant_prepare_coords, 1, B, Np, 1, q, k, c, 1, rq, rk);
    float *gq = malloc(nq * 4), *gk = malloc(nq * 4), *gc = malloc((size_t)Np * C * 4), *gp = malloc((size_t)f.total * 4);
    memcpy(gq, o.q->grad, nq * 4);
    memcpy(gk, o.k->grad, nq * 4);
    memcpy(gc, o.coords->grad, (size_t)Np * C * 4);
    memcpy(gp, f.grad, (size_t)f.total * 4);
    const double eps = 1e-2;
    pe_loss_ctx lc = {&f, vt_pe_circulant_prepare_coords, 1, B, Np, q, k, c, rq, rk};
    float *targets[4] = {q, k, c_of(&f), c};
    float *grads[4] = {gq, gk, gp, gc};
    int64_t counts[4] = {nq, nq, f.views[0].size, (int64_t)Np * C};
    const char *names[4] = {"q", "k", "circulant_c", "coords"};
    for (int t = 0; t < 4; t++) {
        int64_t start = t == 2 ? counts[2] / 2 : 0; /* parameter: layer 1's set (share none) */
        gc_result r = gc_check_array(names[t], targets[t], grads[t], counts[t], start, t < 2 ? 13 : 1, eps, 3e-3,
                                     3e-3, pe_loss, &lc);
        CHECK(r.bad == 0 && r.checked > 0, "d %s vs finite differences: %d of %d bad, worst %.3g", names[t], r.bad,
              r.checked, r.worst);
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
    run_out a = run_pe(&f, vt_pe_circulant_prepare_coords, 0, B, Np, 1, q, q, c, 0, NULL, NULL);
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
    const char *const *names = pe_share_names;
    int D = 32, H = 2, L = 3, b = 8;
    for (int sm = 0; sm < 4; sm++) {
        fix f;
        int Lp, Hp;
        pe_share_make(&f, "circulant", D, H, L, sm, "pe.block_size=8", &Lp, &Hp);
        vt_pe_param *p = &f.pe->params[0];
        int64_t want[5] = {Lp, Hp, 2, 16 / b, b};
        CHECK(pe_param_shape_is(p, "pe.circulant_c", want, 5), "share=%s: pe.circulant_c shape (%d, %d, 2, 2, 8)",
              names[sm], Lp, Hp);
        pe_share_check(&f, vt_pe_circulant_prepare_coords, names[sm], Lp, Hp, 3);
        fix_free(&f);
    }
    const char *ms[] = {"model.width=32", "model.heads=2", "model.depth=2", "model.img_size=8",
                        "model.patch_size=4", "model.num_classes=3", "pe.kind=circulant", "pe.block_size=4"};
    const int64_t want[5] = {2, 2, 2, 4, 4};
    pe_model_check(ms, 8, "pe.circulant_c", want, 5);
}

int main(void) {
    if (pe_fixture_init(4321) != 0) return 1;
    test_dense_orthogonal_cls();
    test_translation_invariance();
    test_init();
    test_gradients();
    test_grid_path();
    test_share_and_shapes();
    pe_fixture_done();
    return test_summary();
}
