/* test_pe_rope.c - the rotary infrastructure (src/pe/rotary.c) and the kinds rope_axial,
 * rope_mixed and cayley (position-encodings.md 1, 2.2-2.4), each PE built from a config
 * through vt_pe_create with its parameters bound to test buffers.
 *
 * A float64 reference written here from the contract (frequencies from the formulas or
 * the PE's parameters, P = (I - S)(I + S)^-1 by its own elimination, interleaved pair
 * rotation) is the oracle: its orthogonality and exact translation invariance at random
 * real positions; the production path (prepare + apply_qk) against it on square and
 * non-square (7 x 10) grids for C = 1, 2, 3 and every position mode, CLS untouched;
 * coordinates; init values; mixed with alpha = 0 equals axial; cayley with S = 0 equals
 * its inner RoPE bitwise; the order-bug detector (P before RoPE changes patch-patch
 * logits, RoPE before P cancels it); central-difference gradients for q, k, pe.freqs,
 * pe.cayley_u (upper entries; lower/diagonal exactly zero) and pe.depth_scale, over
 * the sharing modes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "pe/pe.h"
#include "pe/rotary.h"
#include "pe_tiny_model.h"

static void reset(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
}

static vt_tensor *rand_tensor(vt_rng *r, int grad, int64_t B, int64_t H, int64_t N, int64_t hd) {
    int64_t shape[4] = {B, H, N, hd};
    vt_tensor *x = vt_tape_new(&tape, grad, 4, shape);
    for (int64_t i = 0; i < x->size; i++) x->data[i] = (float)vt_rng_normal(r);
    return x;
}

/* ---- The float64 reference ---- */

typedef struct {
    int hd, C, npr, Lp, Hp;
    double *f; /* sets x npr x C */
    double *P; /* sets x hd x hd, or NULL (identity) */
} ref_t;

/* P = (I - S) (I + S)^-1 from the strict upper triangle of u (n x n), own elimination. */
static void ref_cayley(const float *u, int n, double *P) {
    double *a = malloc(sizeof(double) * n * 2 * n), *s = malloc(sizeof(double) * n * n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) s[i * n + j] = i < j ? u[i * n + j] : i > j ? -(double)u[j * n + i] : 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 2 * n; j++)
            a[i * 2 * n + j] = j < n ? (i == j) + s[i * n + j] : (double)(j - n == i);
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * 2 * n + c]) > fabs(a[piv * 2 * n + c])) piv = r;
        for (int j = 0; j < 2 * n; j++) {
            double x = a[c * 2 * n + j];
            a[c * 2 * n + j] = a[piv * 2 * n + j];
            a[piv * 2 * n + j] = x;
        }
        for (int r = c + 1; r < n; r++) {
            double f = a[r * 2 * n + c] / a[c * 2 * n + c];
            for (int j = c; j < 2 * n; j++) a[r * 2 * n + j] -= f * a[c * 2 * n + j];
        }
    }
    /* back substitution: inv = columns n..2n-1 */
    double *inv = malloc(sizeof(double) * n * n);
    for (int col = 0; col < n; col++)
        for (int r = n - 1; r >= 0; r--) {
            double v = a[r * 2 * n + n + col];
            for (int j = r + 1; j < n; j++) v -= a[r * 2 * n + j] * inv[j * n + col];
            inv[r * n + col] = v / a[r * 2 * n + r];
        }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double v = 0;
            for (int k = 0; k < n; k++) v += ((i == k) - s[i * n + k]) * inv[k * n + j];
            P[i * n + j] = v;
        }
    free(a);
    free(s);
    free(inv);
}

static void ref_make(ref_t *r, box *b) {
    vt_pe *pe = b->pe;
    memset(r, 0, sizeof *r);
    r->hd = pe->hd;
    r->C = pe->cfg.coord_dim;
    vt_share sh = pe->cfg.share;
    r->Lp = (sh == VT_SHARE_NONE || sh == VT_SHARE_HEADS) ? pe->L : 1;
    r->Hp = (sh == VT_SHARE_NONE || sh == VT_SHARE_LAYERS) ? pe->H : 1;
    int sets = r->Lp * r->Hp, C = r->C, hd = r->hd;
    int axial = pe->cfg.kind == VT_PE_ROPE_AXIAL || (pe->cfg.kind == VT_PE_CAYLEY && pe->cfg.inner == VT_INNER_AXIAL);
    r->npr = axial ? C * (hd / (2 * C)) : hd / 2;
    r->f = calloc((size_t)sets * r->npr * C, sizeof(double));
    for (int s = 0; s < sets; s++) {
        if (axial) {
            int k = hd / (2 * C);
            for (int a = 0; a < C; a++)
                for (int i = 0; i < k; i++) r->f[(s * r->npr + a * k + i) * C + a] = pow(pe->cfg.theta, -(double)i / k);
        } else {
            const float *f = box_param(b, "pe.freqs")->t->data + (size_t)s * r->npr * C;
            for (int i = 0; i < r->npr * C; i++) r->f[(size_t)s * r->npr * C + i] = f[i];
        }
    }
    if (pe->cfg.kind == VT_PE_CAYLEY) {
        r->P = malloc(sizeof(double) * sets * hd * hd);
        const float *u = box_param(b, "pe.cayley_u")->t->data;
        for (int s = 0; s < sets; s++) ref_cayley(u + (size_t)s * hd * hd, hd, r->P + (size_t)s * hd * hd);
    }
}

static void ref_free(ref_t *r) {
    free(r->f);
    free(r->P);
}

/* y = R(pos) x for (layer, head). */
static void ref_apply(const ref_t *r, int layer, int head, const double *pos, const double *x, double *y) {
    int set = (r->Lp == 1 ? 0 : layer) * r->Hp + (r->Hp == 1 ? 0 : head), hd = r->hd;
    double t[256];
    for (int i = 0; i < hd; i++) {
        double v = x[i];
        if (r->P) {
            v = 0;
            for (int j = 0; j < hd; j++) v += r->P[((size_t)set * hd + i) * hd + j] * x[j];
        }
        t[i] = v;
    }
    for (int i = 0; i < hd; i++) y[i] = t[i];
    for (int p = 0; p < r->npr; p++) {
        double a = 0;
        for (int c = 0; c < r->C; c++) a += r->f[((size_t)set * r->npr + p) * r->C + c] * pos[c];
        y[2 * p] = t[2 * p] * cos(a) - t[2 * p + 1] * sin(a);
        y[2 * p + 1] = t[2 * p] * sin(a) + t[2 * p + 1] * cos(a);
    }
}

/* Coordinates the contract gives token n of a rows x cols grid (train grid tr x tc). */
static void expect_coords(vt_pos_mode mode, int C, int rows, int cols, int tr, int tc, int n, double *out) {
    if (C == 1) {
        double r = n, nt = (double)tr * tc;
        out[0] = mode == VT_POS_NORMALIZED ? r / fmax(nt - 1, 1) : mode == VT_POS_INTERPOLATE ? r * nt / (rows * cols) : r;
        return;
    }
    double x = n % cols, y = n / cols;
    if (mode == VT_POS_NORMALIZED) {
        x /= fmax(tc - 1, 1);
        y /= fmax(tr - 1, 1);
    } else if (mode == VT_POS_INTERPOLATE) {
        x = x * tc / cols;
        y = y * tr / rows;
    }
    out[0] = x;
    out[1] = y;
    if (C == 3) out[2] = 0;
}

/* Random upper-triangle U (std s) with junk below, for every set of a cayley PE. */
static void randomize_u(box *b, vt_rng *rng, double s) {
    vt_pe_param *p = box_param(b, "pe.cayley_u");
    int hd = b->pe->hd;
    for (int64_t i = 0; i < p->size; i++) {
        int r = (int)((i / hd) % hd), c = (int)(i % hd);
        p->t->data[i] = (float)(r < c ? s * vt_rng_normal(rng) : 7.0 + r);
    }
}

/* ---- Tests ---- */

static void test_axial_freqs(void) {
    float f[64 * 3];
    int npr = vt_rot_axial_freqs(64, 2, 100.0, f);
    CHECK(npr == 32, "hd 64, C 2: 32 rotated pairs, found %d", npr);
    CHECK_CLOSE(f[0], 1.0, 0, 0, "w_0 = 1");
    CHECK_CLOSE(f[1 * 2 + 0], 0.7498942, 1e-6, 0, "w_1 = 100^(-1/16)");
    CHECK_CLOSE(f[2 * 2 + 0], 0.5623413, 1e-6, 0, "w_2");
    CHECK_CLOSE(f[15 * 2 + 0], pow(100.0, -15.0 / 16), 1e-7, 1e-6, "w_15");
    CHECK(f[1 * 2 + 1] == 0 && f[16 * 2 + 0] == 0, "x pairs have no y frequency and vice versa");
    CHECK_CLOSE(f[(16 + 1) * 2 + 1], 0.7498942, 1e-6, 0, "y axis owns pairs [16, 32)");
    npr = vt_rot_axial_freqs(16, 3, 100.0, f);
    CHECK(npr == 6, "hd 16, C 3: k = 2 per axis, 6 pairs (2 trailing unrotated), found %d", npr);
    CHECK_CLOSE(f[(4 + 1) * 3 + 2], 0.1, 1e-7, 1e-6, "z pair 1: 100^(-1/2)");
}

static void test_mixed_init(void) {
    box b;
    box_make(&b, "pe.kind=rope_mixed", 11);
    vt_pe_param *p = box_param(&b, "pe.freqs");
    CHECK(p && p->ndim == 4 && p->shape[0] == 2 && p->shape[1] == 2 && p->shape[2] == 4 && p->shape[3] == 2,
          "pe.freqs (L, H, hd/2, C) = (2, 2, 4, 2) with share none");
    double alphas[4];
    for (int s = 0; s < 4; s++) {
        const float *f = p->t->data + s * 8;
        double a = atan2(f[1], f[0]);
        if (a < 0) a += 2 * M_PI;
        alphas[s] = a;
        int ok = 1;
        for (int q = 0; q < 4; q++) {
            double m = pow(10.0, -4.0 * (q % 2) / 8), ca = cos(a), sa = sin(a);
            double ex0 = q < 2 ? m * ca : -m * sa, ex1 = q < 2 ? m * sa : m * ca;
            ok &= fabs(f[2 * q] - ex0) < 1e-6 && fabs(f[2 * q + 1] - ex1) < 1e-6;
        }
        CHECK(ok, "set %d: m_p (cos a, sin a) then m (-sin a, cos a), m_i = 10^(-4i/hd), a = %g", s, a);
    }
    CHECK(alphas[0] != alphas[1] && alphas[0] != alphas[2] && alphas[1] != alphas[3],
          "one alpha per (layer, head): %g %g %g %g", alphas[0], alphas[1], alphas[2], alphas[3]);
    box_free(&b);

    box_make(&b, "pe.kind=rope_mixed;pe.coord_dim=3;model.width=32", 12);
    p = box_param(&b, "pe.freqs");
    int hd = 16, ok = 1, differ = 0;
    for (int s = 0; s < 4; s++)
        for (int q = 0; q < hd / 2; q++) {
            const float *f = p->t->data + (s * hd / 2 + q) * 3;
            double n = sqrt((double)f[0] * f[0] + (double)f[1] * f[1] + (double)f[2] * f[2]);
            ok &= fabs(n - pow(10.0, -4.0 * (q % 4) / hd)) < 1e-6;
            if (q > 0) differ += fabs(f[0] / n - f[-3] / sqrt((double)f[-3] * f[-3] + (double)f[-2] * f[-2] + (double)f[-1] * f[-1])) > 1e-3;
        }
    CHECK(ok, "C = 3: |f_p| = m_{p mod hd/4}");
    CHECK(differ > 20, "C = 3: independent random directions (%d of 28 differ)", differ);
    box_free(&b);

    box_make(&b, "pe.kind=rope_mixed;pe.coord_dim=1;pe.share=heads", 13);
    p = box_param(&b, "pe.freqs");
    CHECK(p->shape[0] == 2 && p->shape[1] == 1 && p->shape[3] == 1, "share heads: (L, 1, hd/2, 1)");
    int neg = 0, pos = 0;
    ok = 1;
    for (int s = 0; s < 2; s++)
        for (int q = 0; q < 4; q++) {
            float f = p->t->data[s * 4 + q];
            ok &= fabs(fabs(f) - pow(10.0, -4.0 * (q % 2) / 8)) < 1e-7;
            neg += f < 0;
            pos += f > 0;
        }
    CHECK(ok && neg > 0 && pos > 0, "C = 1: random sign times m (%d negative, %d positive)", neg, pos);
    box_free(&b);

    box_make(&b, "pe.kind=rope_mixed;pe.share=all", 13);
    p = box_param(&b, "pe.freqs");
    CHECK(p->shape[0] == 1 && p->shape[1] == 1 && p->size == 8, "share all: (1, 1, hd/2, C)");
    box_free(&b);
    box_make(&b, "pe.kind=cayley;pe.share=layers", 14);
    p = box_param(&b, "pe.cayley_u");
    int zero = 1;
    for (int64_t i = 0; i < p->size; i++) zero &= p->t->data[i] == 0.0f;
    CHECK(p->shape[0] == 1 && p->shape[1] == 2 && p->shape[2] == 8 && p->shape[3] == 8 && zero,
          "pe.cayley_u (1, H, hd, hd) with share layers, init 0");
    CHECK(box_param(&b, "pe.freqs") && box_param(&b, "pe.freqs")->shape[1] == 2, "cayley inner mixed has pe.freqs");
    box_free(&b);
    box_make(&b, "pe.kind=cayley;pe.inner=axial", 14);
    CHECK(!box_param(&b, "pe.freqs") && b.pe->cfg.theta == 100, "cayley inner axial: no pe.freqs, theta 100");
    box_free(&b);
}

static void test_coords(void) {
    const char *modes[3] = {"index", "normalized", "interpolate"};
    const int grids[4][2] = {{3, 3}, {7, 10}, {5, 5}, {2, 4}};
    float out[7 * 10 * 3];
    for (int C = 1; C <= 3; C++)
        for (int m = 0; m < 3; m++) {
            char sets[128];
            snprintf(sets, sizeof sets, "pe.kind=rope_axial;pe.coord_dim=%d;pe.positions=%s", C, modes[m]);
            box b;
            box_make(&b, sets, 1);
            for (int g = 0; g < 4; g++) {
                int rows = grids[g][0], cols = grids[g][1], bad = -1;
                vt_pe_coords(b.pe, rows, cols, NULL, out);
                for (int n = 0; n < rows * cols && bad < 0; n++) {
                    double e[3];
                    expect_coords((vt_pos_mode)m, C, rows, cols, 3, 3, n, e);
                    for (int c = 0; c < C; c++)
                        if (fabs(out[n * C + c] - e[c]) > 1e-6 * (1 + fabs(e[c]))) bad = n;
                }
                CHECK(bad < 0, "coords C %d %s grid %dx%d: token %d", C, modes[m], rows, cols, bad);
            }
            box_free(&b);
        }
    box b;
    box_make(&b, "pe.kind=rope_axial", 1);
    vt_pe_coords(b.pe, 7, 10, NULL, out);
    CHECK(out[2 * 13] == 3 && out[2 * 13 + 1] == 1, "token 13 of a 7 x 10 grid is (x, y) = (3, 1)");
    b.pe->coord_offset[0] = 0.25;
    b.pe->coord_offset[1] = -1.5;
    vt_pe_coords(b.pe, 7, 10, NULL, out);
    CHECK(out[2 * 13] == 3.25f && out[2 * 13 + 1] == -0.5f, "coord_offset shifts every patch");
    box_free(&b);

    /* RGB-D: z = mean depth of the patch times pe.depth_scale. */
    box_make(&b, "model.in_chans=4;pe.kind=rope_mixed", 1);
    CHECK(b.pe->cfg.coord_dim == 3 && b.pe->depth_param >= 0, "RGB-D: coord_dim 3 and pe.depth_scale");
    vt_pe_param *ds = box_param(&b, "pe.depth_scale");
    CHECK(ds && ds->ndim == 1 && ds->shape[0] == 1 && ds->t->data[0] == 1.0f, "pe.depth_scale (1), init 1");
    ds->t->data[0] = 2.0f;
    float *img = calloc(2 * 4 * 144, sizeof(float));
    vt_tensor images = {.data = img, .ndim = 4, .shape = {2, 4, 12, 12}, .size = 2 * 4 * 144};
    for (int b2 = 0; b2 < 2; b2++)
        for (int y = 0; y < 12; y++)
            for (int x = 0; x < 12; x++) img[((b2 * 4 + 3) * 12 + y) * 12 + x] = (float)(b2 + 0.1 * x + 0.01 * y);
    float dc[2 * 9 * 3];
    CHECK(vt_rot_coords_batch(b.pe, &images) == 2, "depth positions are per sample");
    vt_pe_coords(b.pe, 3, 3, &images, dc);
    int ok = 1;
    for (int b2 = 0; b2 < 2; b2++)
        for (int n = 0; n < 9; n++) {
            int i = n / 3, j = n % 3;
            double mean = b2 + 0.1 * (4 * j + 1.5) + 0.01 * (4 * i + 1.5);
            const float *r = dc + (b2 * 9 + n) * 3;
            ok &= r[0] == j && r[1] == i && fabs(r[2] - 2 * mean) < 1e-5;
        }
    CHECK(ok, "RGB-D z = 2 x mean depth of the patch, per sample");
    vt_tensor one = {.data = img, .ndim = 4, .shape = {1, 4, 12, 12}, .size = 4 * 144};
    vt_pe_coords(b.pe, 3, 3, &one, dc);
    CHECK(vt_rot_coords_batch(b.pe, &one) == 1 && fabs(dc[4 * 3 + 2] - 2 * (0.1 * 5.5 + 0.01 * 5.5)) < 1e-5,
          "RGB-D with a batch of one still takes z from depth (z = %g)", dc[4 * 3 + 2]);
    free(img);
    box_free(&b);
}

/* Production prepare + apply_qk of layer `layer` on a rows x cols grid vs the reference. */
static void check_vs_ref(const char *sets, int rows, int cols, int layer, int random_u, const char *what) {
    box b;
    box_make(&b, sets, 21);
    vt_rng rng;
    vt_rng_seed(&rng, 5);
    if (random_u) randomize_u(&b, &rng, 0.4);
    b.pe->coord_offset[0] = 0.37;
    b.pe->coord_offset[1] = -1.21;
    reset(0);
    int H = b.pe->H, hd = b.pe->hd, C = b.pe->cfg.coord_dim, N = 1 + rows * cols;
    vt_tensor *q = rand_tensor(&rng, 0, 2, H, N, hd), *k = rand_tensor(&rng, 0, 2, H, N, hd);
    vt_tensor *qo = q, *ko = k;
    vt_pe_prepare(b.pe, &tape, rows, cols, NULL);
    vt_pe_apply_qk(b.pe, &tape, layer, &qo, &ko);
    ref_t r;
    ref_make(&r, &b);
    double worst = 0, norm_err = 0;
    int cls_ok = 1;
    for (int bb = 0; bb < 2; bb++)
        for (int h = 0; h < H; h++) {
            size_t base = ((size_t)bb * H + h) * N * hd;
            cls_ok &= memcmp(qo->data + base, q->data + base, hd * sizeof(float)) == 0 &&
                      memcmp(ko->data + base, k->data + base, hd * sizeof(float)) == 0;
            for (int n = 1; n < N; n++) {
                double pos[3], x[128], y[128];
                expect_coords(b.pe->cfg.positions, C, rows, cols, 3, 3, n - 1, pos);
                pos[0] += 0.37;
                if (C > 1) pos[1] += -1.21;
                for (int i = 0; i < hd; i++) x[i] = q->data[base + n * hd + i];
                ref_apply(&r, layer, h, pos, x, y);
                double n0 = 0, n1 = 0;
                for (int i = 0; i < hd; i++) {
                    worst = fmax(worst, fabs(qo->data[base + n * hd + i] - y[i]));
                    n0 += x[i] * x[i];
                    n1 += (double)qo->data[base + n * hd + i] * qo->data[base + n * hd + i];
                }
                norm_err = fmax(norm_err, fabs(sqrt(n1) - sqrt(n0)) / sqrt(n0));
            }
        }
    CHECK(cls_ok, "%s: CLS rows of q and k untouched", what);
    CHECK(worst < 2e-5, "%s: production vs float64 reference, worst |diff| %g", what, worst);
    CHECK(norm_err < 1e-5, "%s: token norms preserved (orthogonal), rel err %g", what, norm_err);
    ref_free(&r);
    box_free(&b);
}

static void test_paths(void) {
    const char *kinds[5] = {"pe.kind=rope_axial", "pe.kind=rope_mixed", "pe.kind=cayley",
                            "pe.kind=cayley;pe.inner=axial", "pe.kind=rope_mixed;pe.share=heads"};
    const char *modes[3] = {"index", "normalized", "interpolate"};
    const int grids[3][2] = {{3, 3}, {7, 10}, {5, 5}};
    for (int k = 0; k < 5; k++)
        for (int C = 1; C <= 3; C++)
            for (int m = 0; m < 3; m++)
                for (int g = 0; g < 3; g++) {
                    if (m > 0 && g == 0 && k > 0) continue;
                    char sets[160], what[200];
                    snprintf(sets, sizeof sets, "%s;pe.coord_dim=%d;pe.positions=%s", kinds[k], C, modes[m]);
                    snprintf(what, sizeof what, "%s grid %dx%d", sets, grids[g][0], grids[g][1]);
                    check_vs_ref(sets, grids[g][0], grids[g][1], 1, k == 2 || k == 3, what);
                }
    /* trailing pairs of rope_axial with C = 3, hd 8: k = 1, pair 3 (channels 6, 7) unrotated */
    box b;
    box_make(&b, "pe.kind=rope_axial;pe.coord_dim=3", 1);
    reset(0);
    vt_rng rng;
    vt_rng_seed(&rng, 3);
    vt_tensor *q = rand_tensor(&rng, 0, 1, 2, 10, 8), *k = rand_tensor(&rng, 0, 1, 2, 10, 8), *qo = q, *ko = k;
    vt_pe_prepare(b.pe, &tape, 3, 3, NULL);
    vt_pe_apply_qk(b.pe, &tape, 0, &qo, &ko);
    int same = 1, moved = 0;
    for (int n = 1; n < 10; n++) {
        same &= qo->data[n * 8 + 6] == q->data[n * 8 + 6] && qo->data[n * 8 + 7] == q->data[n * 8 + 7];
        moved += qo->data[n * 8 + 0] != q->data[n * 8 + 0];
    }
    CHECK(same && moved > 0, "rope_axial C 3 hd 8: trailing pair untouched, x pair rotated (%d)", moved);
    box_free(&b);
}

/* Float64: R^T R = I and <R(ri + s) q, R(rj + s) k> = <R(ri) q, R(rj) k> at random real
 * positions and shifts. */
static void test_ref_properties(void) {
    const char *kinds[4] = {"pe.kind=rope_axial", "pe.kind=rope_mixed", "pe.kind=cayley",
                            "pe.kind=cayley;pe.inner=axial"};
    vt_rng rng;
    vt_rng_seed(&rng, 77);
    for (int k = 0; k < 4; k++)
        for (int C = 1; C <= 3; C++) {
            char sets[128];
            snprintf(sets, sizeof sets, "%s;pe.coord_dim=%d;model.width=32", kinds[k], C);
            box b;
            box_make(&b, sets, 31);
            if (k >= 2) randomize_u(&b, &rng, 0.5);
            ref_t r;
            ref_make(&r, &b);
            int hd = r.hd;
            double orth = 0, inv = 0, scale = 0;
            for (int trial = 0; trial < 4; trial++) {
                double ri[3], rj[3], s[3], ri2[3], rj2[3], qv[64], kv[64], a[64], c[64];
                for (int d = 0; d < C; d++) {
                    ri[d] = 20 * vt_rng_uniform(&rng) - 10;
                    rj[d] = 20 * vt_rng_uniform(&rng) - 10;
                    s[d] = 30 * vt_rng_uniform(&rng) - 15;
                    ri2[d] = ri[d] + s[d];
                    rj2[d] = rj[d] + s[d];
                }
                for (int i = 0; i < hd; i++) {
                    qv[i] = vt_rng_normal(&rng);
                    kv[i] = vt_rng_normal(&rng);
                }
                int layer = trial % 2, head = trial / 2;
                ref_apply(&r, layer, head, ri, qv, a);
                ref_apply(&r, layer, head, rj, kv, c);
                double l0 = 0, l1 = 0;
                for (int i = 0; i < hd; i++) l0 += a[i] * c[i];
                ref_apply(&r, layer, head, ri2, qv, a);
                ref_apply(&r, layer, head, rj2, kv, c);
                for (int i = 0; i < hd; i++) l1 += a[i] * c[i];
                inv = fmax(inv, fabs(l1 - l0));
                scale = fmax(scale, fabs(l0));
                /* R^T R = I from the columns R e_j */
                double R[64 * 64];
                for (int j = 0; j < hd; j++) {
                    double e[64] = {0}, col[64];
                    e[j] = 1;
                    ref_apply(&r, layer, head, ri, e, col);
                    for (int i = 0; i < hd; i++) R[i * hd + j] = col[i];
                }
                for (int i = 0; i < hd; i++)
                    for (int j = 0; j < hd; j++) {
                        double d = 0;
                        for (int m = 0; m < hd; m++) d += R[m * hd + i] * R[m * hd + j];
                        orth = fmax(orth, fabs(d - (i == j)));
                    }
            }
            CHECK(orth < 1e-12, "%s: R^T R = I in float64 (worst %g)", sets, orth);
            CHECK(inv < 1e-11 * (1 + scale), "%s: translation invariance at real positions (diff %g)", sets, inv);
            ref_free(&r);
            box_free(&b);
        }
}

/* Production path: shifting every patch by a real offset keeps patch-patch logits. */
static void test_shift_production(void) {
    const char *kinds[4] = {"pe.kind=rope_axial", "pe.kind=rope_mixed", "pe.kind=cayley", "pe.kind=rope_mixed;pe.coord_dim=3"};
    for (int k = 0; k < 4; k++) {
        box b;
        box_make(&b, kinds[k], 41);
        vt_rng rng;
        vt_rng_seed(&rng, 8);
        if (k == 2) randomize_u(&b, &rng, 0.4);
        reset(0);
        vt_tensor *q = rand_tensor(&rng, 0, 1, 2, 1 + 70, 8), *k2 = rand_tensor(&rng, 0, 1, 2, 1 + 70, 8);
        vt_tensor *qa = q, *ka = k2, *qb = q, *kb = k2;
        vt_pe_prepare(b.pe, &tape, 7, 10, NULL);
        vt_pe_apply_qk(b.pe, &tape, 1, &qa, &ka);
        b.pe->coord_offset[0] = 2.71;
        b.pe->coord_offset[1] = -3.3;
        b.pe->coord_offset[2] = 0.9;
        vt_pe_prepare(b.pe, &tape, 7, 10, NULL);
        vt_pe_apply_qk(b.pe, &tape, 1, &qb, &kb);
        double worst = 0, moved = 0;
        for (int h = 0; h < 2; h++)
            for (int n = 1; n <= 70; n += 3)
                for (int m = 1; m <= 70; m += 2) {
                    double l0 = logit(qa, ka, 0, h, n, m), l1 = logit(qb, kb, 0, h, n, m);
                    worst = fmax(worst, fabs(l1 - l0) / (1 + fabs(l0)));
                    moved = fmax(moved, fabs(qb->data[(h * 71 + n) * 8] - qa->data[(h * 71 + n) * 8]));
                }
        CHECK(worst < 5e-5, "%s: patch-patch logits invariant under a real shift (rel %g)", kinds[k], worst);
        CHECK(moved > 1e-2, "%s: the shift does change q itself (%g)", kinds[k], moved);
        box_free(&b);
    }
}

static void test_equivalences(void) {
    vt_rng rng;
    vt_rng_seed(&rng, 9);
    /* mixed with alpha = 0 (frozen) equals axial with the same theta */
    box mb, ab;
    box_make(&mb, "pe.kind=rope_mixed", 3);
    box_make(&ab, "pe.kind=rope_axial;pe.theta=10", 3);
    vt_pe_param *f = box_param(&mb, "pe.freqs");
    for (int s = 0; s < 4; s++)
        for (int p = 0; p < 4; p++) {
            double m = pow(10.0, -4.0 * (p % 2) / 8);
            f->t->data[s * 8 + 2 * p] = (float)(p < 2 ? m : 0.0);
            f->t->data[s * 8 + 2 * p + 1] = (float)(p < 2 ? 0.0 : m);
        }
    reset(0);
    vt_tensor *q = rand_tensor(&rng, 0, 2, 2, 1 + 70, 8), *k = rand_tensor(&rng, 0, 2, 2, 1 + 70, 8);
    vt_tensor *q1 = q, *k1 = k, *q2 = q, *k2 = k;
    vt_pe_prepare(mb.pe, &tape, 7, 10, NULL);
    vt_pe_apply_qk(mb.pe, &tape, 1, &q1, &k1);
    vt_pe_prepare(ab.pe, &tape, 7, 10, NULL);
    vt_pe_apply_qk(ab.pe, &tape, 1, &q2, &k2);
    CHECK_ARRAY_CLOSE(q1->data, q2->data, q->size, 1e-6, 1e-6, "mixed alpha = 0 equals axial (q)");
    CHECK_ARRAY_CLOSE(k1->data, k2->data, k->size, 1e-6, 1e-6, "mixed alpha = 0 equals axial (k)");
    box_free(&mb);
    box_free(&ab);

    /* cayley with S = 0 equals its inner RoPE bitwise (same seed: same frequencies) */
    const char *pairs[2][2] = {{"pe.kind=cayley", "pe.kind=rope_mixed"},
                               {"pe.kind=cayley;pe.inner=axial", "pe.kind=rope_axial"}};
    for (int i = 0; i < 2; i++) {
        box cb, rb;
        box_make(&cb, pairs[i][0], 5);
        box_make(&rb, pairs[i][1], 5);
        q1 = q, k1 = k, q2 = q, k2 = k;
        vt_pe_prepare(cb.pe, &tape, 7, 10, NULL);
        vt_pe_apply_qk(cb.pe, &tape, 0, &q1, &k1);
        vt_pe_prepare(rb.pe, &tape, 7, 10, NULL);
        vt_pe_apply_qk(rb.pe, &tape, 0, &q2, &k2);
        CHECK(memcmp(q1->data, q2->data, (size_t)q->size * sizeof(float)) == 0 &&
                  memcmp(k1->data, k2->data, (size_t)k->size * sizeof(float)) == 0,
              "%s with S = 0 equals %s exactly", pairs[i][0], pairs[i][1]);
        box_free(&cb);
        box_free(&rb);
    }

    /* order-bug detector: RoPE(r) P changes patch-patch logits when S != 0; applying
     * RoPE first and P after (the bug) gives the S = 0 logits again. */
    box cb, rb;
    box_make(&cb, "pe.kind=cayley", 5);
    box_make(&rb, "pe.kind=rope_mixed", 5);
    randomize_u(&cb, &rng, 0.4);
    q1 = q, k1 = k, q2 = q, k2 = k;
    vt_pe_prepare(cb.pe, &tape, 7, 10, NULL);
    vt_pe_apply_qk(cb.pe, &tape, 0, &q1, &k1);
    vt_pe_prepare(rb.pe, &tape, 7, 10, NULL);
    vt_pe_apply_qk(rb.pe, &tape, 0, &q2, &k2);
    int64_t ushape[3] = {2, 8, 8};
    vt_tensor *u0 = vt_tensor_wrap(tape.arena, box_param(&cb, "pe.cayley_u")->t->data, 3, ushape);
    vt_tensor *P = vt_op_cayley(&tape, u0);
    vt_tensor *qw = vt_op_head_matmul(&tape, q2, P), *kw = vt_op_head_matmul(&tape, k2, P);
    double changed = 0, cancel = 0;
    for (int bb = 0; bb < 2; bb++)
        for (int h = 0; h < 2; h++)
            for (int n = 1; n <= 70; n += 3)
                for (int m = 1; m <= 70; m += 4) {
                    double l0 = logit(q2, k2, bb, h, n, m);
                    changed = fmax(changed, fabs(logit(q1, k1, bb, h, n, m) - l0));
                    cancel = fmax(cancel, fabs(logit(qw, kw, bb, h, n, m) - l0) / (1 + fabs(l0)));
                }
    CHECK(changed > 0.1, "cayley logits differ from its inner RoPE when S != 0 (max diff %g)", changed);
    CHECK(cancel < 1e-5, "RoPE-then-P cancels P in patch-patch logits (rel diff %g)", cancel);
    /* vt_op_cayley against the reference P */
    double Pr[64], worst = 0;
    for (int h = 0; h < 2; h++) {
        ref_cayley(u0->data + h * 64, 8, Pr);
        for (int i = 0; i < 64; i++) worst = fmax(worst, fabs(P->data[h * 64 + i] - Pr[i]));
    }
    CHECK(worst < 1e-6, "vt_op_cayley matches (I - S)(I + S)^-1 (worst %g)", worst);
    box_free(&cb);
    box_free(&rb);
}

/* ---- Gradients ---- */

typedef struct {
    box b;
    vt_tensor *q[2], *k[2]; /* inputs per layer (test-owned storage) */
    double *w;              /* weights of the logits: 2 layers x B x H x N x N */
    vt_tensor images;
    int rgbd, B, N;
} gcase;

/* loss = sum_l sum W[l, b, h, n, m] q'_n . k'_m. With grad: also backward. */
static double gloss(gcase *g, int grad) {
    reset(grad);
    vt_pe *pe = g->b.pe;
    int B = g->B, H = pe->H, N = g->N, hd = pe->hd;
    vt_pe_prepare(pe, &tape, 3, 3, g->rgbd ? &g->images : NULL);
    double loss = 0;
    for (int l = 0; l < 2; l++) {
        vt_tensor *q = g->q[l], *k = g->k[l];
        vt_pe_apply_qk(pe, &tape, l, &q, &k);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int n = 0; n < N; n++)
                    for (int m = 0; m < N; m++) {
                        double w = g->w[((((size_t)l * B + b) * H + h) * N + n) * N + m];
                        loss += w * logit(q, k, b, h, n, m);
                        if (grad) {
                            float *dq = q->grad + ((b * H + h) * N + n) * hd, *dk = k->grad + ((b * H + h) * N + m) * hd;
                            const float *qv = q->data + ((b * H + h) * N + n) * hd, *kv = k->data + ((b * H + h) * N + m) * hd;
                            for (int i = 0; i < hd; i++) {
                                dq[i] += (float)(w * kv[i]);
                                dk[i] += (float)(w * qv[i]);
                            }
                        }
                    }
    }
    if (grad) {
        int64_t one = 1;
        vt_tensor *lt = vt_tape_new(&tape, 1, 1, &one);
        vt_tape_backward(&tape, lt);
    }
    return loss;
}

static void gcase_make(gcase *g, const char *sets, int rgbd) {
    memset(g, 0, sizeof *g);
    box_make(&g->b, sets, 51);
    vt_rng rng;
    vt_rng_seed(&rng, 52);
    if (box_param(&g->b, "pe.cayley_u")) randomize_u(&g->b, &rng, 0.3);
    g->rgbd = rgbd;
    g->B = 2;
    g->N = 10;
    int H = g->b.pe->H, hd = g->b.pe->hd;
    for (int l = 0; l < 2; l++) {
        int64_t shape[4] = {g->B, H, g->N, hd};
        for (int j = 0; j < 2; j++) {
            vt_tensor *t = calloc(1, sizeof *t);
            *t = vt_shape(4, shape[0], shape[1], shape[2], shape[3]);
            t->data = malloc(sizeof(float) * t->size);
            t->grad = calloc((size_t)t->size, sizeof(float));
            for (int64_t i = 0; i < t->size; i++) t->data[i] = (float)vt_rng_normal(&rng);
            if (j == 0) g->q[l] = t;
            else g->k[l] = t;
        }
    }
    size_t nw = (size_t)2 * g->B * H * g->N * g->N;
    g->w = malloc(sizeof(double) * nw);
    for (size_t i = 0; i < nw; i++) g->w[i] = vt_rng_normal(&rng) / g->N;
    if (rgbd) {
        g->images = vt_shape(4, (int64_t)g->B, (int64_t)4, (int64_t)12, (int64_t)12);
        g->images.data = malloc(sizeof(float) * g->images.size);
        for (int64_t i = 0; i < g->images.size; i++) g->images.data[i] = (float)(0.5 + vt_rng_uniform(&rng));
    }
}

static void gcase_free(gcase *g) {
    for (int l = 0; l < 2; l++) {
        free(g->q[l]->data);
        free(g->q[l]->grad);
        free(g->q[l]);
        free(g->k[l]->data);
        free(g->k[l]->grad);
        free(g->k[l]);
    }
    free(g->w);
    free(g->images.data);
    box_free(&g->b);
}

/* The loss without gradients (gc_loss_fn); checked with |analytic - numeric| <=
 * GC_ATOL + GC_RTOL |numeric|. */
static double gloss_value(void *g) { return gloss(g, 0); }
#define GC_ATOL 2e-3
#define GC_RTOL 2e-2

static void test_gradients(void) {
    const char *cases[6] = {"pe.kind=rope_mixed", "pe.kind=rope_mixed;pe.share=heads", "pe.kind=cayley",
                            "pe.kind=cayley;pe.share=all;pe.inner=axial", "pe.kind=rope_axial;pe.coord_dim=1",
                            "model.in_chans=4;pe.kind=rope_mixed;pe.share=all"};
    for (int c = 0; c < 6; c++) {
        gcase g;
        gcase_make(&g, cases[c], c == 5);
        memset(g.b.grad, 0, sizeof(float) * g.b.n);
        gloss(&g, 1);
        /* q and k inputs: a spread of elements including the CLS row */
        gc_result qk = {0};
        for (int l = 0; l < 2; l++)
            for (int64_t i = 3; i < g.q[l]->size; i += 37) {
                gc_check_elem(&qk, "q", i, &g.q[l]->data[i], g.q[l]->grad[i], 1e-2, GC_ATOL, GC_RTOL, gloss_value, &g,
                              NULL);
                gc_check_elem(&qk, "k", i, &g.k[l]->data[i], g.k[l]->grad[i], 1e-2, GC_ATOL, GC_RTOL, gloss_value, &g,
                              NULL);
            }
        CHECK(qk.bad == 0, "%s: d loss / d q, k (%d of %d elements off)", cases[c], qk.bad, qk.checked);
        vt_pe_param *f = box_param(&g.b, "pe.freqs");
        if (f) {
            gc_result fr = gc_check_array("freqs", f->t->data, f->t->grad, f->size, 0, 1, 1e-3, GC_ATOL, GC_RTOL,
                                          gloss_value, &g);
            CHECK(fr.bad == 0, "%s: d loss / d pe.freqs (%d of %lld off)", cases[c], fr.bad, (long long)f->size);
        }
        vt_pe_param *u = box_param(&g.b, "pe.cayley_u");
        if (u) {
            int hd = g.b.pe->hd, lower_zero = 1;
            gc_result ur = {0};
            for (int64_t i = 0; i < u->size; i++) {
                int r = (int)((i / hd) % hd), col = (int)(i % hd);
                if (r >= col) {
                    lower_zero &= u->t->grad[i] == 0.0f;
                    continue;
                }
                gc_check_elem(&ur, "cayley_u", i, &u->t->data[i], u->t->grad[i], 1e-3, GC_ATOL, GC_RTOL, gloss_value,
                              &g, NULL);
            }
            CHECK(ur.bad == 0, "%s: d loss / d pe.cayley_u upper entries (%d off)", cases[c], ur.bad);
            CHECK(lower_zero, "%s: lower triangle and diagonal of pe.cayley_u get zero gradient", cases[c]);
            /* junk below the diagonal is ignored: same loss with or without it */
            double l0 = gloss(&g, 0);
            u->t->data[hd] = 123.0f;
            double l1 = gloss(&g, 0);
            vt_pe_clear_unused(g.b.pe);
            CHECK(l0 == l1 && u->t->data[hd] == 0.0f, "%s: lower entries ignored (and cleared by clear_unused)",
                  cases[c]);
        }
        vt_pe_param *ds = box_param(&g.b, "pe.depth_scale");
        if (ds) {
            gc_result dr = {0};
            double num;
            int ok = gc_check_elem(&dr, NULL, 0, &ds->t->data[0], ds->t->grad[0], 1e-3, GC_ATOL, GC_RTOL, gloss_value,
                                   &g, &num);
            CHECK(ok && fabs(num) > 1e-3, "%s: d loss / d pe.depth_scale analytic %g numeric %g", cases[c],
                  ds->t->grad[0], num);
        }
        gcase_free(&g);
    }
}

int main(void) {
    if (pe_tiny_init() != 0) return 1;
    test_axial_freqs();
    test_mixed_init();
    test_coords();
    test_paths();
    test_ref_properties();
    test_shift_production();
    test_equivalences();
    test_gradients();
    pe_tiny_done();
    return test_summary();
}
