/* test_pe_fused.c - the fused q/k preparation the model runs (src/pe/qkv_fused.c and the
 * kinds' fold_qkv / split_qkv hooks) against the reference form (the projection,
 * vt_op_split_heads, vt_pe_apply_qk):
 *  - vt_op_rot_split_heads equals split + vt_op_rot_pairs bitwise, CLS copied or mapped
 *    by cls^T (float64 reference); vt_op_qkv_fold equals the float64 product; both
 *    with central-difference gradients of every input (positions per sample or shared,
 *    angles per head or shared, a partly rotated head);
 *  - per kind, on the tiny model's sizes with random weights: every logit q_n . k_m
 *    (CLS rows and columns included) and v agree with the reference path, q and k
 *    themselves too where the kind returns them in the contract's basis (all but
 *    circulant with softmax attention, which keeps them in its DFT basis), bitwise for
 *    the RoPE kinds; and the gradients of L = sum W . logits + sum R . v with respect
 *    to the projection's input, weight and bias and every pe.* parameter agree. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "pe/pe.h"
#include "pe/kinds.h"
#include "pe/rotary.h"
#include "pe_tiny_model.h"

static void reset(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
}

/* A test-owned tensor (malloc'd data and zeroed grad) filled N(0, scale^2). */
static vt_tensor *owned(vt_rng *r, double scale, int ndim, const int64_t *shape) {
    vt_tensor *t = calloc(1, sizeof *t);
    t->ndim = ndim;
    t->size = 1;
    for (int i = 0; i < ndim; i++) t->size *= (t->shape[i] = shape[i]);
    t->data = malloc(sizeof(float) * (size_t)t->size);
    t->grad = calloc((size_t)t->size, sizeof(float));
    for (int64_t i = 0; i < t->size; i++) t->data[i] = (float)(scale * vt_rng_normal(r));
    return t;
}

static void owned_free(vt_tensor *t) {
    if (!t) return;
    free(t->data);
    free(t->grad);
    free(t);
}

/* ---- The ops ---- */

typedef struct {
    vt_tensor *qkv, *cs, *cls;
    int H;
    double *R; /* weights of q, k, v in the loss */
} split_case;

static double split_loss(split_case *c, int grad) {
    reset(grad);
    vt_tensor *o[3];
    vt_op_rot_split_heads(&tape, c->qkv, c->H, c->cs, c->cls, &o[0], &o[1], &o[2]);
    double L = 0;
    for (int s = 0; s < 3; s++)
        for (int64_t i = 0; i < o[s]->size; i++) {
            double w = c->R[s * o[0]->size + i];
            L += w * o[s]->data[i];
            if (grad) o[s]->grad[i] += (float)w;
        }
    if (grad) vt_tape_replay(&tape);
    return L;
}

/* Central differences of every element of t against its analytic gradient (the op is
 * linear in each input, so the quotient is exact up to float rounding of the loss);
 * returns how many are off. */
static int fd_count_bad(gc_loss_fn loss, void *c, vt_tensor *t, const char *what) {
    return gc_check_array(what, t->data, t->grad, t->size, 0, 1, 0.01, 1e-3, 1e-3, loss, c).bad;
}

static double split_value(void *c) { return split_loss(c, 0); }

static void test_split_op(void) {
    const int N = 5, H = 2, hd = 6, npr = 2, D = H * hd;
    for (int B = 2; B <= 9; B += 7) /* 9: several sample chunks in the backward, the last partial */
    for (int Ba = 1; Ba <= B; Ba += B - 1)
        for (int G = 1; G <= H; G += H - 1)
            for (int Gc = 0; Gc <= H; Gc++) { /* 0: no cls map */
                vt_rng rng;
                vt_rng_seed(&rng, (uint64_t)(100 + Ba * 10 + G * 3 + Gc));
                split_case c = {0};
                int64_t qs[3] = {B, N, 3 * D}, css[4] = {Ba, G, N - 1, 2 * npr}, cl[3] = {Gc, hd, hd};
                c.qkv = owned(&rng, 1.0, 3, qs);
                c.cs = owned(&rng, 1.0, 4, css);
                c.cls = Gc ? owned(&rng, 0.5, 3, cl) : NULL;
                c.H = H;
                c.R = malloc(sizeof(double) * 3 * B * N * D);
                for (int i = 0; i < 3 * B * N * D; i++) c.R[i] = vt_rng_normal(&rng);
                char what[96];
                snprintf(what, sizeof what, "rot_split_heads B %d Ba %d G %d cls %d", B, Ba, G, Gc);

                /* forward: split + rot_pairs (patch rows bitwise), CLS copied or cls^T x */
                reset(0);
                vt_tensor *o[3], *p[3];
                vt_op_rot_split_heads(&tape, c.qkv, H, c.cs, c.cls, &o[0], &o[1], &o[2]);
                vt_op_split_heads(&tape, c.qkv, H, &p[0], &p[1], &p[2]);
                vt_tensor *rq = vt_op_rot_pairs(&tape, p[0], c.cs), *rk = vt_op_rot_pairs(&tape, p[1], c.cs);
                int same = memcmp(o[2]->data, p[2]->data, sizeof(float) * (size_t)p[2]->size) == 0;
                double cls_err = 0;
                for (int b = 0; b < B; b++)
                    for (int h = 0; h < H; h++) {
                        size_t base = ((size_t)b * H + h) * N * hd;
                        for (int s = 0; s < 2; s++) {
                            const float *got = o[s]->data + base, *rot = (s ? rk : rq)->data + base;
                            same &= memcmp(got + hd, rot + hd, sizeof(float) * (size_t)(N - 1) * hd) == 0;
                            const float *x = c.qkv->data + (size_t)b * N * 3 * D + s * D + h * hd;
                            for (int i = 0; i < hd; i++) {
                                double want = x[i];
                                if (Gc) {
                                    const float *m = c.cls->data + (Gc > 1 ? h : 0) * hd * hd;
                                    want = 0;
                                    for (int j = 0; j < hd; j++) want += (double)m[j * hd + i] * x[j];
                                }
                                cls_err = fmax(cls_err, fabs(got[i] - want));
                            }
                        }
                    }
                CHECK(same, "%s: patch q, k and all of v bitwise equal to split + rot_pairs", what);
                CHECK(Gc ? cls_err < 1e-5 : cls_err == 0, "%s: CLS %s (err %g)", what,
                      Gc ? "mapped by cls^T" : "copied", cls_err);

                /* gradients */
                memset(c.qkv->grad, 0, sizeof(float) * (size_t)c.qkv->size);
                memset(c.cs->grad, 0, sizeof(float) * (size_t)c.cs->size);
                if (c.cls) memset(c.cls->grad, 0, sizeof(float) * (size_t)c.cls->size);
                split_loss(&c, 1);
                int bad = fd_count_bad(split_value, &c, c.qkv, "dqkv") + fd_count_bad(split_value, &c, c.cs, "dcs");
                if (c.cls) bad += fd_count_bad(split_value, &c, c.cls, "dcls");
                CHECK(bad == 0, "%s: central differences of qkv, cs%s (%d off)", what, Gc ? ", cls" : "", bad);
                owned_free(c.qkv);
                owned_free(c.cs);
                owned_free(c.cls);
                free(c.R);
            }
}

typedef struct {
    vt_tensor *w, *b, *m;
    int H;
    double *R;
} fold_case;

static double fold_loss(void *p, int grad) {
    fold_case *c = p;
    reset(grad);
    vt_tensor *w2, *b2;
    vt_op_qkv_fold(&tape, c->w, c->b, c->m, c->H, &w2, &b2);
    double L = 0;
    for (int64_t i = 0; i < w2->size + (b2 ? b2->size : 0); i++) {
        vt_tensor *o = i < w2->size ? w2 : b2;
        int64_t j = i < w2->size ? i : i - w2->size;
        L += c->R[i] * o->data[j];
        if (grad) o->grad[j] += (float)c->R[i];
    }
    if (grad) vt_tape_replay(&tape);
    return L;
}

static double fold_value(void *c) { return fold_loss(c, 0); }

static void test_fold_op(void) {
    const int H = 2, hd = 4, D = H * hd, Din = 5;
    for (int G = 1; G <= H; G += H - 1)
        for (int bias = 0; bias < 2; bias++) {
            vt_rng rng;
            vt_rng_seed(&rng, (uint64_t)(200 + G * 2 + bias));
            int64_t ws[2] = {3 * D, Din}, bs[1] = {3 * D}, ms[3] = {G, hd, hd};
            fold_case c = {owned(&rng, 1.0, 2, ws), bias ? owned(&rng, 1.0, 1, bs) : NULL, owned(&rng, 0.5, 3, ms), H, NULL};
            c.R = malloc(sizeof(double) * (3 * D * Din + 3 * D));
            for (int i = 0; i < 3 * D * Din + 3 * D; i++) c.R[i] = vt_rng_normal(&rng);
            char what[64];
            snprintf(what, sizeof what, "qkv_fold G %d bias %d", G, bias);
            reset(0);
            vt_tensor *w2, *b2;
            vt_op_qkv_fold(&tape, c.w, c.b, c.m, H, &w2, &b2);
            double err = 0;
            int vsame = memcmp(w2->data + 2 * D * Din, c.w->data + 2 * D * Din, sizeof(float) * D * Din) == 0;
            for (int s = 0; s < 2; s++)
                for (int h = 0; h < H; h++) {
                    const float *m = c.m->data + (G > 1 ? h : 0) * hd * hd;
                    int r0 = s * D + h * hd;
                    for (int i = 0; i < hd; i++) {
                        for (int col = 0; col <= Din; col++) {
                            if (col == Din && !bias) continue;
                            double want = 0;
                            for (int j = 0; j < hd; j++)
                                want += (double)m[i * hd + j] *
                                        (col < Din ? c.w->data[(r0 + j) * Din + col] : c.b->data[r0 + j]);
                            float got = col < Din ? w2->data[(r0 + i) * Din + col] : b2->data[r0 + i];
                            err = fmax(err, fabs(got - want));
                        }
                    }
                }
            if (bias) vsame &= memcmp(b2->data + 2 * D, c.b->data + 2 * D, sizeof(float) * D) == 0;
            CHECK(err < 1e-5 && vsame, "%s: q, k rows = m w (err %g), v rows copied (%d)", what, err, vsame);
            CHECK(bias || b2 == NULL, "%s: no bias in, none out", what);
            fold_loss(&c, 1);
            int bad = fd_count_bad(fold_value, &c, c.w, "dw") + fd_count_bad(fold_value, &c, c.m, "dm");
            if (bias) bad += fd_count_bad(fold_value, &c, c.b, "db");
            CHECK(bad == 0, "%s: central differences of w, m%s (%d off)", what, bias ? ", b" : "", bad);
            owned_free(c.w);
            owned_free(c.b);
            owned_free(c.m);
            free(c.R);
        }
}

/* ---- Per kind: fused path vs reference path ---- */

typedef struct {
    vt_tensor *q, *k, *v;
} qkv_out;

typedef struct {
    box b;
    vt_tensor *x, *w, *bias, images;
    double *W, *R; /* loss weights: logits (L, B, H, N, N) and v (L, B, H, N, hd) */
    int B, N, L, rgbd;
} kcase;

/* One forward of both layers through the fused (model) or reference path, and with grad
 * the backward of L = sum W . logits + sum R . v. Fills out[l] and returns L. */
static double kind_run(kcase *c, int fused, int grad, qkv_out *out) {
    reset(grad);
    vt_pe *pe = c->b.pe;
    int B = c->B, H = pe->H, N = c->N, hd = pe->hd;
    vt_pe_prepare(pe, &tape, 3, 3, c->rgbd ? &c->images : NULL);
    double loss = 0;
    for (int l = 0; l < c->L; l++) {
        vt_tensor *q, *k, *v, *w = c->w, *bias = c->bias;
        if (fused) {
            vt_pe_fold_qkv(pe, &tape, l, &w, &bias);
            vt_pe_split_qkv(pe, &tape, l, vt_op_linear(&tape, c->x, w, bias), &q, &k, &v);
        } else {
            vt_op_split_heads(&tape, vt_op_linear(&tape, c->x, w, bias), H, &q, &k, &v);
            vt_pe_apply_qk(pe, &tape, l, &q, &k);
        }
        out[l] = (qkv_out){q, k, v};
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int n = 0; n < N; n++) {
                    size_t row = (((size_t)l * B + b) * H + h) * N + n;
                    for (int m = 0; m < N; m++) {
                        double wt = c->W[row * N + m];
                        loss += wt * logit(q, k, b, h, n, m);
                        if (grad) {
                            size_t qi = (((size_t)b * H + h) * N + n) * hd, ki = (((size_t)b * H + h) * N + m) * hd;
                            for (int i = 0; i < hd; i++) {
                                q->grad[qi + i] += (float)(wt * k->data[ki + i]);
                                k->grad[ki + i] += (float)(wt * q->data[qi + i]);
                            }
                        }
                    }
                    size_t vi = (((size_t)b * H + h) * N + n) * hd;
                    for (int i = 0; i < hd; i++) {
                        double r = c->R[row * hd + i];
                        loss += r * v->data[vi + i];
                        if (grad) v->grad[vi + i] += (float)r;
                    }
                }
    }
    if (grad) vt_tape_replay(&tape);
    return loss;
}

/* max |a - b| / max(max |b|, floor) over n values */
static double rel_diff(const float *a, const float *b, int64_t n, double floor) {
    double d = 0, s = floor;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return d / s;
}

static void check_kind(const char *sets, int rgbd, int same_basis, int bitwise) {
    kcase c;
    memset(&c, 0, sizeof c);
    box_make(&c.b, sets, 61);
    vt_pe *pe = c.b.pe;
    vt_rng rng;
    vt_rng_seed(&rng, 62);
    for (int64_t i = 0; i < c.b.n; i++) c.b.data[i] += (float)(0.3 * vt_rng_normal(&rng));
    vt_pe_clear_unused(pe);
    c.B = 2;
    c.N = 10;
    c.L = pe->L;
    c.rgbd = rgbd;
    int H = pe->H, hd = pe->hd, D = pe->D, N = c.N, B = c.B;
    int64_t xs[3] = {B, N, D}, ws[2] = {3 * D, D}, bs[1] = {3 * D};
    c.x = owned(&rng, 1.0, 3, xs);
    c.w = owned(&rng, 0.3, 2, ws);
    c.bias = owned(&rng, 0.3, 1, bs);
    size_t nw = (size_t)c.L * B * H * N * N, nr = (size_t)c.L * B * H * N * hd;
    c.W = malloc(sizeof(double) * nw);
    c.R = malloc(sizeof(double) * nr);
    for (size_t i = 0; i < nw; i++) c.W[i] = vt_rng_normal(&rng) / N;
    for (size_t i = 0; i < nr; i++) c.R[i] = vt_rng_normal(&rng);
    if (rgbd) {
        c.images = vt_shape(4, (int64_t)B, (int64_t)4, (int64_t)12, (int64_t)12);
        c.images.data = malloc(sizeof(float) * c.images.size);
        for (int64_t i = 0; i < c.images.size; i++) c.images.data[i] = (float)(0.5 + vt_rng_uniform(&rng));
    }

    /* gradients of both paths: x, w, bias, PE parameters */
    vt_tensor *ins[3] = {c.x, c.w, c.bias};
    float *g[2][4];
    double loss[2];
    qkv_out o[2][2];
    float *keep[2][2][3];
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < 3; i++) memset(ins[i]->grad, 0, sizeof(float) * (size_t)ins[i]->size);
        memset(c.b.grad, 0, sizeof(float) * (size_t)c.b.n);
        loss[f] = kind_run(&c, f, 1, o[f]);
        for (int i = 0; i < 3; i++) {
            g[f][i] = malloc(sizeof(float) * (size_t)ins[i]->size);
            memcpy(g[f][i], ins[i]->grad, sizeof(float) * (size_t)ins[i]->size);
        }
        g[f][3] = malloc(sizeof(float) * (size_t)(c.b.n + 1));
        memcpy(g[f][3], c.b.grad, sizeof(float) * (size_t)(c.b.n + 1));
        /* the arena is reset by the next run: keep q, k, v */
        for (int l = 0; l < 2 && l < c.L; l++) {
            vt_tensor *t3[3] = {o[f][l].q, o[f][l].k, o[f][l].v};
            for (int s = 0; s < 3; s++) {
                keep[f][l][s] = malloc(sizeof(float) * (size_t)t3[s]->size);
                memcpy(keep[f][l][s], t3[s]->data, sizeof(float) * (size_t)t3[s]->size);
            }
        }
    }
    int64_t n = (int64_t)B * H * N * hd;
    double lg = 0, dv = 0, dq = 0;
    int bits = 1;
    for (int l = 0; l < 2 && l < c.L; l++) {
        vt_tensor qa = vt_shape(4, (int64_t)B, (int64_t)H, (int64_t)N, (int64_t)hd), ka = qa, qb = qa, kb = qa;
        qa.data = keep[0][l][0], ka.data = keep[0][l][1], qb.data = keep[1][l][0], kb.data = keep[1][l][1];
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < N; i++)
                    for (int j = 0; j < N; j++) {
                        double ref = logit(&qa, &ka, b, h, i, j);
                        lg = fmax(lg, fabs(logit(&qb, &kb, b, h, i, j) - ref) / (1 + fabs(ref)));
                    }
        dv = fmax(dv, rel_diff(keep[1][l][2], keep[0][l][2], n, 1));
        dq = fmax(dq, fmax(rel_diff(qb.data, qa.data, n, 1), rel_diff(kb.data, ka.data, n, 1)));
        bits &= memcmp(qb.data, qa.data, sizeof(float) * n) == 0 && memcmp(kb.data, ka.data, sizeof(float) * n) == 0;
    }
    CHECK(lg < 1e-5, "%s: every logit (CLS included) as the reference path (rel %g)", sets, lg);
    CHECK(dv == 0, "%s: v bitwise as the reference path (rel %g)", sets, dv);
    if (same_basis) CHECK(dq < 1e-5, "%s: q and k as the reference path (rel %g)", sets, dq);
    else CHECK(dq > 1e-2, "%s: q and k in another basis (rel %g), logits the same", sets, dq);
    if (bitwise) CHECK(bits, "%s: q and k bitwise equal to the reference path", sets);
    CHECK(fabs(loss[1] - loss[0]) <= 1e-5 * (1 + fabs(loss[0])), "%s: loss %.9g vs %.9g", sets, loss[1], loss[0]);
    const char *names[4] = {"input", "qkv weight", "qkv bias", "pe.* parameters"};
    int64_t sizes[4] = {c.x->size, c.w->size, c.bias->size, c.b.n};
    for (int i = 0; i < 4; i++) {
        if (sizes[i] == 0) continue;
        double d = rel_diff(g[1][i], g[0][i], sizes[i], 1e-6);
        CHECK(d < 1e-4, "%s: gradient of the %s as the reference path (rel %g)", sets, names[i], d);
    }
    for (int f = 0; f < 2; f++) {
        for (int i = 0; i < 4; i++) free(g[f][i]);
        for (int l = 0; l < 2 && l < c.L; l++)
            for (int s = 0; s < 3; s++) free(keep[f][l][s]);
    }
    owned_free(c.x);
    owned_free(c.w);
    owned_free(c.bias);
    free(c.W);
    free(c.R);
    free(c.images.data);
    box_free(&c.b);
}

static void test_kinds(void) {
    /* config, RGB-D images, q and k in the contract's basis, bitwise equal to the reference */
    static const struct {
        const char *sets;
        int rgbd, same_basis, bitwise;
    } cases[] = {
        {"pe.kind=rope_axial", 0, 1, 1},
        {"pe.kind=rope_axial;pe.coord_dim=1", 0, 1, 1},
        {"pe.kind=rope_mixed", 0, 1, 1},
        {"pe.kind=rope_mixed;pe.share=heads", 0, 1, 1},
        {"model.in_chans=4;pe.kind=rope_mixed;pe.coord_dim=3", 1, 1, 1},
        {"pe.kind=cayley", 0, 1, 0},
        {"pe.kind=cayley;pe.inner=axial;pe.share=layers", 0, 1, 0},
        {"pe.kind=cayley;pe.share=all;pe.coord_dim=3", 0, 1, 0},
        {"pe.kind=circulant;pe.block_size=4", 0, 0, 0},
        {"pe.kind=circulant;pe.block_size=8;pe.share=layers", 0, 0, 0},
        {"pe.kind=circulant;pe.block_size=4;model.attention=performer", 0, 1, 1},
        {"pe.kind=liere", 0, 1, 1},
        {"pe.kind=liere_commute", 0, 1, 1},
        {"pe.kind=ape", 0, 1, 1},
        {"pe.kind=none", 0, 1, 1},
    };
    for (int k = 0; k < VT_PE_KIND_COUNT; k++) { /* every kind of the registry has a case */
        int found = 0;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            found |= sets_have_kind(cases[i].sets, (vt_pe_kind)k);
        CHECK(found, "fused split: no case with pe.kind=%s", vt_pe_kind_name((vt_pe_kind)k));
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_kind(cases[i].sets, cases[i].rgbd, cases[i].same_basis, cases[i].bitwise);
}

int main(void) {
    if (pe_tiny_init() != 0) return 1;
    test_split_op();
    test_fold_op();
    test_kinds();
    pe_tiny_done();
    return test_summary();
}
