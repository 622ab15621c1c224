/* test_pe_model.c - position encodings inside the ViT (vt_vit_init builds the PE):
 *   - shift invariance: for every rotary kind in this build's kind table (vt_pe_kind_
 *     available; dense liere with coord_dim 1, where it is invariant), shifting every
 *     patch position by a real offset (pe->coord_offset) leaves all patch-patch logits of
 *     every layer unchanged (CLS rows/columns excluded), also with RGB-D depth positions;
 *   - permutation equivariance of models without relative PE: no PE (pool avg) and a
 *     learned APE (pool token and avg) give the same logits when the image patches are
 *     permuted (with the APE's patch rows permuted alike); a rotary model does not;
 *   - checkpoints: pe.* tensors under their names with the section 4 shapes for each
 *     share mode, bitwise round trip, pe.cayley_u lower entries written as 0 and ignored
 *     on read, a share mismatch is an error naming the tensor and both shapes;
 *   - evaluation at other resolutions runs (finite logits) for each kind and position
 *     mode, and a training step reaches every pe.* gradient;
 *   - data.synthetic_depth_label: the synthetic RGB-D label needs the depth channel. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "pe/pe.h"
#include "pe/kinds.h"
#include "pe_tiny_model.h"
#include "resolve.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

/* m = the tiny model with overrides sets; returns its config (for vit_save_config). */
static vt_config model_of(vt_vit *m, const char *sets, uint64_t seed) {
    vt_config c = cfg_of(sets);
    if (vit_init_config(m, &c, seed) != VT_OK) {
        fprintf(stderr, "model %s: %s\n", sets, vt_last_error());
        abort();
    }
    return c;
}

static void reset(int grad) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = grad;
    tape.training = 0;
}

static vt_tensor *images_of(vt_rng *r, int B, int C, int S) {
    int64_t shape[4] = {B, C, S, S};
    vt_tensor *x = vt_tape_new(&tape, 0, 4, shape);
    for (int64_t i = 0; i < x->size; i++) x->data[i] = (float)vt_rng_normal(r);
    /* depth (channel 3) positive, smooth-ish */
    if (C == 4)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < S * S; i++) x->data[((int64_t)b * 4 + 3) * S * S + i] = (float)(1.0 + 0.5 * vt_rng_uniform(r));
    return x;
}

/* Config fragment of rotary kind k (dense liere is shift invariant only with C = 1;
 * circulant's default block 16 does not divide this model's head dim 8). */
static void kind_sets(vt_pe_kind k, char *buf, size_t n) {
    snprintf(buf, n, "pe.kind=%s%s", vt_pe_kind_name(k),
             k == VT_PE_LIERE ? ";pe.coord_dim=1" : k == VT_PE_CIRCULANT ? ";pe.block_size=4" : "");
}

/* Every layer's patch-patch logits with the grid shifted by a real offset vs unshifted. */
static void shift_case(const char *sets, int rgbd) {
    vt_vit m;
    model_of(&m, sets, 3);
    vt_rng rng;
    vt_rng_seed(&rng, 4);
    /* give learnable generators non-trivial values where the init is 0 */
    vt_param *u = vt_vit_find(&m, "pe.cayley_u");
    if (u)
        for (int64_t i = 0; i < u->t.size; i++) u->t.data[i] = (float)(0.3 * vt_rng_normal(&rng));
    reset(0);
    vt_tensor *img = rgbd ? images_of(&rng, 2, 4, 12) : NULL;
    int H = m.H, hd = m.hd, N = 10;
    double worst = 0, moved = 0;
    for (int l = 0; l < m.L; l++) {
        int64_t shape[4] = {2, H, N, hd};
        vt_tensor *q = vt_tape_new(&tape, 0, 4, shape), *k = vt_tape_new(&tape, 0, 4, shape);
        for (int64_t i = 0; i < q->size; i++) {
            q->data[i] = (float)vt_rng_normal(&rng);
            k->data[i] = (float)vt_rng_normal(&rng);
        }
        vt_tensor *qa = q, *ka = k, *qb = q, *kb = k;
        memset(m.pe->coord_offset, 0, sizeof m.pe->coord_offset);
        vt_pe_prepare(m.pe, &tape, 3, 3, img);
        vt_pe_apply_qk(m.pe, &tape, l, &qa, &ka);
        m.pe->coord_offset[0] = 1.7;
        m.pe->coord_offset[1] = -0.6;
        m.pe->coord_offset[2] = 0.3;
        vt_pe_prepare(m.pe, &tape, 3, 3, img);
        vt_pe_apply_qk(m.pe, &tape, l, &qb, &kb);
        for (int b = 0; b < 2; b++)
            for (int h = 0; h < H; h++)
                for (int n = 1; n < N; n++) {
                    for (int mm = 1; mm < N; mm++) {
                        double l0 = logit(qa, ka, b, h, n, mm), l1 = logit(qb, kb, b, h, n, mm);
                        worst = fmax(worst, fabs(l1 - l0) / (1 + fabs(l0)));
                    }
                    moved = fmax(moved, fabs(logit(qa, ka, b, h, 0, n) - logit(qb, kb, b, h, 0, n)));
                }
    }
    memset(m.pe->coord_offset, 0, sizeof m.pe->coord_offset);
    CHECK(worst < 1e-4, "%s: patch-patch logits unchanged by a real shift (rel %g)", sets, worst);
    CHECK(moved > 1e-3, "%s: CLS-patch logits do move with the shift (%g)", sets, moved);
    vt_vit_free(&m);
}

static void test_shift(void) {
    int n = 0;
    for (int k = 0; k < VT_PE_KIND_COUNT; k++) {
        if (!vt_pe_kind_entry((vt_pe_kind)k)->rotary) continue;
        char sets[128];
        kind_sets((vt_pe_kind)k, sets, sizeof sets);
        shift_case(sets, 0);
        n++;
    }
    CHECK(n >= 6, "every rotary kind of the registry is tested, the six of position-encodings.md at least (%d)", n);
    shift_case("model.in_chans=4;pe.kind=rope_mixed", 1);
    shift_case("model.in_chans=4;pe.kind=cayley;pe.share=heads", 1);
}

/* Image patch n moves to position perm[n]. */
static void permute_patches(const vt_tensor *src, vt_tensor *dst, const int *perm, int P) {
    int64_t B = src->shape[0], C = src->shape[1], S = src->shape[2], g = S / P;
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t n = 0; n < g * g; n++) {
                int64_t to = perm[n], si = n / g, sj = n % g, di = to / g, dj = to % g;
                for (int y = 0; y < P; y++)
                    for (int x = 0; x < P; x++)
                        dst->data[((b * C + c) * S + di * P + y) * S + dj * P + x] =
                            src->data[((b * C + c) * S + si * P + y) * S + sj * P + x];
            }
}

static void perm_case(const char *sets, int expect_equal) {
    vt_vit m;
    model_of(&m, sets, 6);
    vt_rng rng;
    vt_rng_seed(&rng, 7);
    int perm[9] = {4, 7, 0, 8, 2, 6, 1, 3, 5};
    /* weights of std 0.5 instead of 0.02, so attention is far from uniform */
    for (int i = 0; i < m.n_p; i++)
        if (m.p[i].decay)
            for (int64_t j = 0; j < m.p[i].t.size; j++) m.p[i].t.data[j] *= 25.0f;
    reset(0);
    vt_tensor *img = images_of(&rng, 2, 3, 12);
    vt_tensor *pimg = vt_tape_new(&tape, 0, 4, img->shape);
    permute_patches(img, pimg, perm, 4);
    vt_tensor *y0 = vt_vit_forward(&m, &tape, img);
    vt_param *ape = vt_vit_find(&m, "pos_embed");
    if (ape) {
        float *old = malloc(sizeof(float) * ape->t.size);
        memcpy(old, ape->t.data, sizeof(float) * ape->t.size);
        for (int n = 0; n < 9; n++)
            memcpy(ape->t.data + (1 + perm[n]) * m.D, old + (1 + n) * m.D, sizeof(float) * m.D);
        free(old);
    }
    vt_tensor *y1 = vt_vit_forward(&m, &tape, pimg);
    double diff = 0, scale = 0;
    for (int64_t i = 0; i < y0->size; i++) {
        diff = fmax(diff, fabs(y0->data[i] - y1->data[i]));
        scale = fmax(scale, fabs(y0->data[i]));
    }
    if (expect_equal)
        CHECK(diff <= 1e-5 * (1 + scale), "%s: permuting patch tokens leaves pooled logits (diff %g)", sets, diff);
    else
        CHECK(diff > 1e-4, "%s: a rotary model sees the permutation (diff %g)", sets, diff);
    vt_vit_free(&m);
}

static void test_permutation(void) {
    perm_case("pe.kind=none;model.pool=avg", 1);
    perm_case("pe.kind=none;model.pool=token", 1);
    perm_case("pe.kind=ape;model.pool=token", 1);
    perm_case("pe.kind=ape;model.pool=avg", 1);
    perm_case("pe.kind=rope_axial;model.pool=avg", 0);
}

/* ---- Checkpoints ---- */

static void shape_of(const vt_st_tensor *t, char *buf, size_t n) {
    size_t off = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim; i++) off += (size_t)snprintf(buf + off, n - off, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    snprintf(buf + off, n - off, ")");
}

static void ckpt_case(const char *sets, const char *path) {
    vt_vit m, m2;
    vt_config cm = model_of(&m, sets, 8);
    vt_rng rng;
    vt_rng_seed(&rng, 9);
    int hd = m.hd, C = m.spec.pe.coord_dim;
    vt_share sh = m.spec.pe.share;
    int Lp = (sh == VT_SHARE_NONE || sh == VT_SHARE_HEADS) ? m.L : 1;
    int Hp = (sh == VT_SHARE_NONE || sh == VT_SHARE_LAYERS) ? m.H : 1;
    vt_param *u = vt_vit_find(&m, "pe.cayley_u");
    if (u)
        for (int64_t i = 0; i < u->t.size; i++)
            u->t.data[i] = (i / hd) % hd < i % hd ? (float)(0.2 * vt_rng_normal(&rng)) : 0.0f;
    CHECK(vit_save_config(&m, &cm, path) == VT_OK, "%s: save: %s", sets, vt_last_error());
    vt_safetensors st;
    CHECK(vt_st_read(path, &st) == VT_OK, "%s: read back: %s", sets, vt_last_error());
    char want[64], got[64];
    const vt_st_tensor *f = vt_st_find(&st, "pe.freqs");
    int mixed = m.spec.pe.kind == VT_PE_ROPE_MIXED || (m.spec.pe.kind == VT_PE_CAYLEY && m.spec.pe.inner == VT_INNER_MIXED);
    snprintf(want, sizeof want, "(%d, %d, %d, %d)", Lp, Hp, hd / 2, C);
    if (f) shape_of(f, got, sizeof got);
    CHECK(mixed ? f && strcmp(got, want) == 0 : !f, "%s: pe.freqs %s (want %s)", sets, f ? got : "absent",
          mixed ? want : "absent");
    const vt_st_tensor *cu = vt_st_find(&st, "pe.cayley_u");
    snprintf(want, sizeof want, "(%d, %d, %d, %d)", Lp, Hp, hd, hd);
    if (cu) shape_of(cu, got, sizeof got);
    CHECK(u ? cu && strcmp(got, want) == 0 : !cu, "%s: pe.cayley_u %s (want %s)", sets, cu ? got : "absent", want);
    if (cu) {
        int lower0 = 1, upper_same = 1;
        for (int64_t i = 0; i < cu->size; i++) {
            if ((i / hd) % hd >= i % hd) lower0 &= cu->data[i] == 0.0f;
            else upper_same &= cu->data[i] == u->t.data[i];
        }
        CHECK(lower0 && upper_same, "%s: cayley_u upper stored, lower/diagonal written as 0", sets);
    }
    const vt_st_tensor *ds = vt_st_find(&st, "pe.depth_scale");
    CHECK(m.in_chans == 4 ? ds && ds->ndim == 1 && ds->shape[0] == 1 && ds->data[0] == 1.0f : !ds,
          "%s: pe.depth_scale (1) = 1 iff RGB-D", sets);
    vt_st_free(&st);
    model_of(&m2, sets, 99);
    CHECK(vt_vit_load(&m2, path) == VT_OK, "%s: load: %s", sets, vt_last_error());
    CHECK(m2.n_params == m.n_params && memcmp(m2.params, m.params, sizeof(float) * m.n_params) == 0,
          "%s: bitwise round trip of every parameter", sets);
    vt_vit_free(&m2);
    vt_vit_free(&m);
}

static void test_checkpoints(void) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/vt_test_pe_model_%d.safetensors", (int)getpid());
    const char *shares[4] = {"none", "layers", "heads", "all"};
    const char *kinds[4] = {"pe.kind=rope_mixed", "pe.kind=cayley", "pe.kind=cayley;pe.inner=axial",
                            "model.in_chans=4;pe.kind=rope_mixed"};
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < 4; s++) {
            char sets[160];
            snprintf(sets, sizeof sets, "%s;pe.share=%s", kinds[k], shares[s]);
            ckpt_case(sets, path);
        }
    ckpt_case("pe.kind=rope_axial", path);

    /* junk below the diagonal of pe.cayley_u in a file is ignored on read */
    vt_vit a, b;
    vt_config ca = model_of(&a, "pe.kind=cayley", 10);
    model_of(&b, "pe.kind=cayley", 10);
    vt_param *ua = vt_vit_find(&a, "pe.cayley_u"), *ub = vt_vit_find(&b, "pe.cayley_u");
    int hd = a.hd;
    for (int64_t i = 0; i < ua->t.size; i++) {
        int upper = (i / hd) % hd < i % hd;
        ua->t.data[i] = upper ? (float)(0.01 * (i % 17)) : (float)(5 + i % 3);
        ub->t.data[i] = upper ? ua->t.data[i] : 0.0f;
    }
    CHECK(vit_save_config(&a, &ca, path) == VT_OK, "save with junk: %s", vt_last_error());
    vt_vit c;
    model_of(&c, "pe.kind=cayley", 11);
    CHECK(vt_vit_load(&c, path) == VT_OK, "load with junk: %s", vt_last_error());
    vt_rng rng;
    vt_rng_seed(&rng, 12);
    reset(0);
    vt_tensor *img = images_of(&rng, 2, 3, 12);
    vt_tensor *yb = vt_vit_forward(&b, &tape, img), *yc = vt_vit_forward(&c, &tape, img);
    CHECK(memcmp(yb->data, yc->data, sizeof(float) * yb->size) == 0,
          "cayley_u lower/diagonal entries of a checkpoint are ignored");
    vt_param *uc = vt_vit_find(&c, "pe.cayley_u");
    int cleared = 1;
    for (int64_t i = 0; i < uc->t.size; i++)
        if ((i / hd) % hd >= i % hd) cleared &= uc->t.data[i] == 0.0f;
    CHECK(cleared, "and cleared, so they are written back as 0");
    vt_vit_free(&a);
    vt_vit_free(&b);
    vt_vit_free(&c);

    /* a pe.* shape that does not match the config is an error naming the tensor */
    const char *mism[3][3] = {{"pe.kind=rope_mixed", "pe.kind=rope_mixed;pe.share=all", "pe.freqs"},
                              {"pe.kind=cayley;pe.inner=axial;pe.share=layers",
                               "pe.kind=cayley;pe.inner=axial;pe.share=heads", "pe.cayley_u"},
                              {"pe.kind=rope_mixed;pe.coord_dim=3", "pe.kind=rope_mixed", "pe.freqs"}};
    for (int i = 0; i < 3; i++) {
        ca = model_of(&a, mism[i][0], 1);
        model_of(&b, mism[i][1], 1);
        vit_save_config(&a, &ca, path);
        vt_status s = vt_vit_load(&b, path);
        CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), mism[i][2]) && strstr(vt_last_error(), "expected shape"),
              "%s -> %s: error naming %s: %s", mism[i][0], mism[i][1], mism[i][2], vt_last_error());
        vt_vit_free(&a);
        vt_vit_free(&b);
    }
    /* a rotary checkpoint into an APE model: unknown pe.* tensor */
    ca = model_of(&a, "pe.kind=rope_mixed", 1);
    model_of(&b, "pe.kind=rope_axial", 1);
    vit_save_config(&a, &ca, path);
    CHECK(vt_vit_load(&b, path) == VT_ERR_RUNTIME && strstr(vt_last_error(), "pe.freqs"),
          "rope_mixed checkpoint into a rope_axial model names pe.freqs: %s", vt_last_error());
    vt_vit_free(&a);
    vt_vit_free(&b);
    unlink(path);
}

/* ---- Other resolutions and gradients ---- */

static void test_resolutions(void) {
    const char *modes[3] = {"index", "normalized", "interpolate"};
    /* every rotary kind of the registry, then (k = VT_PE_KIND_COUNT) RGB-D cayley */
    for (int k = 0; k <= VT_PE_KIND_COUNT; k++) {
        int rgbd = k == VT_PE_KIND_COUNT;
        if (!rgbd && !vt_pe_kind_entry((vt_pe_kind)k)->rotary) continue;
        for (int md = 0; md < 3; md++) {
            char sets[160], ks[96];
            if (rgbd) snprintf(ks, sizeof ks, "model.in_chans=4;pe.kind=cayley");
            else kind_sets((vt_pe_kind)k, ks, sizeof ks);
            snprintf(sets, sizeof sets, "%s;pe.positions=%s", ks, modes[md]);
            vt_vit m;
            model_of(&m, sets, 13);
            vt_rng rng;
            vt_rng_seed(&rng, 14);
            int ok = 1;
            const int sizes[3] = {12, 8, 20};
            for (int s = 0; s < 3; s++) {
                reset(0);
                vt_tensor *img = images_of(&rng, 2, m.in_chans, sizes[s]);
                vt_tensor *y = vt_vit_forward(&m, &tape, img);
                ok &= y->shape[0] == 2 && y->shape[1] == 3;
                for (int64_t i = 0; i < y->size; i++) ok &= isfinite(y->data[i]);
            }
            CHECK(ok, "%s: evaluation at 8, 12 and 20 px runs with finite logits", sets);
            vt_vit_free(&m);
        }
    }
}

/* One training step through the whole model reaches every pe.* gradient. */
static void test_model_grads(void) {
    const char *cases[4] = {"pe.kind=rope_mixed", "pe.kind=cayley", "model.in_chans=4;pe.kind=rope_mixed",
                            "pe.kind=cayley;pe.share=all"};
    for (int c = 0; c < 4; c++) {
        vt_vit m;
        model_of(&m, cases[c], 15);
        vt_rng rng;
        vt_rng_seed(&rng, 16);
        vt_param *u = vt_vit_find(&m, "pe.cayley_u");
        if (u)
            for (int64_t i = 0; i < u->t.size; i++)
                if ((i / m.hd) % m.hd < i % m.hd) u->t.data[i] = (float)(0.2 * vt_rng_normal(&rng));
        reset(1);
        vt_tensor *img = images_of(&rng, 2, m.in_chans, 12);
        int labels[2] = {0, 2};
        vt_tensor *loss = vt_op_cross_entropy(&tape, vt_vit_forward(&m, &tape, img), labels, NULL, 0.0f);
        vt_vit_zero_grad(&m);
        vt_tape_backward(&tape, loss);
        for (int i = 0; i < m.n_p; i++) {
            if (strncmp(m.p[i].name, "pe.", 3) != 0) continue;
            vt_param *p = &m.p[i];
            double s = 0, lower = 0;
            for (int64_t j = 0; j < p->t.size; j++) {
                int low = u == p && (j / m.hd) % m.hd >= j % m.hd;
                if (low) lower += fabs(p->t.grad[j]);
                else s += fabs(p->t.grad[j]);
            }
            CHECK(s > 0 && isfinite(s) && lower == 0 && !p->decay,
                  "%s: %s gets a gradient (|g| %g, lower %g), no weight decay", cases[c], p->name, s, lower);
        }
        vt_vit_free(&m);
    }
}

/* With data.synthetic_depth_label, labels 2j, 2j + 1 share RGB pattern j and the depth
 * bump's sign carries the parity: against the same sample without the flag (same
 * streams), RGB is identical for label 0 and differs for others; the depth differs by
 * the tilt (which sums to ~0 over the image) plus (h_on - h_off) times a positive bump,
 * whose sign is + for odd labels, - for even. */
static void test_synthetic_depth_label(void) {
    vt_config on = cfg_of("data.kind=synthetic;model.in_chans=4;pe.kind=rope_mixed;data.synthetic_depth_label=true;"
                          "model.img_size=16");
    vt_config off = cfg_of("data.kind=synthetic;model.in_chans=4;pe.kind=rope_mixed;model.img_size=16");
    vt_dataset *a, *b;
    vt_data_spec son, soff;
    vt_resolve_data_spec(&on, &son);
    vt_resolve_data_spec(&off, &soff);
    CHECK(vt_dataset_synthetic.open(&a, &son, VT_SPLIT_TRAIN) == VT_OK, "open: %s", vt_last_error());
    CHECK(vt_dataset_synthetic.open(&b, &soff, VT_SPLIT_TRAIN) == VT_OK, "open: %s", vt_last_error());
    vt_sample sa = {0}, sb = {0};
    int rgb_ok = 1, depth_ok = 1, strict = 0;
    for (int64_t i = 0; i < 24; i++) {
        int la, lb;
        a->ops->read(a, i, &sa, &la);
        b->ops->read(b, i, &sb, &lb);
        long same = 0, dsum = 0;
        for (int px = 0; px < 16 * 16; px++) {
            for (int ch = 0; ch < 3; ch++) same += sa.pixels[px * 4 + ch] == sb.pixels[px * 4 + ch];
            dsum += (long)sa.pixels[px * 4 + 3] - (long)sb.pixels[px * 4 + 3];
        }
        rgb_ok &= la == lb && (la == 0 ? same == 16 * 16 * 3 : same < 16 * 16 * 3);
        depth_ok &= la % 2 ? dsum >= 0 : dsum <= 0;
        strict += dsum != 0;
    }
    CHECK(rgb_ok, "depth label: labels 2j, 2j + 1 show RGB pattern j");
    CHECK(depth_ok && strict >= 20, "depth label: bump for odd, dent for even labels (%d of 24 moved)", strict);
    vt_sample_free(&sa);
    vt_sample_free(&sb);
    a->ops->close(a);
    b->ops->close(b);
    vt_config c;
    vt_resolve_json(&c, "{\"model\": {\"in_chans\": 3}, \"data\": {\"kind\": \"synthetic\"}}", "test");
    vt_config_set(&c, "data.synthetic_depth_label=true");
    CHECK(vt_resolve(&c) == VT_ERR_USAGE && strstr(vt_last_error(), "data.synthetic_depth_label"),
          "the flag needs RGB-D: %s", vt_last_error());
}

int main(void) {
    if (pe_tiny_init() != 0) return 1;
    test_shift();
    test_permutation();
    test_checkpoints();
    test_resolutions();
    test_model_grads();
    test_synthetic_depth_label();
    pe_tiny_done();
    return test_summary();
}
