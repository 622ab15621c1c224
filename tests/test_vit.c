/* test_vit.c - the ViT model: logits shapes over configs, timm parameter names/shapes
 * and order, the vit_tiny parameter count, init statistics, decay flags, FLOPs, a
 * central-difference gradient check through the whole model, eval vs training mode,
 * the APE slot (bicubic resampling against hand-computed Keys values and torch's
 * output, sincos table against its formula), checkpoint save/load (bitwise round
 * trip, resampled pos_embed, errors naming the tensor) and the blocks' grad scopes
 * (tape.h): every gradient, and without gradients every logit, bitwise equal with and
 * without them, for every PE kind. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "config_overrides.h"
#include "gradcheck.h"
#include "harness.h"
#include "test_util.h"
#include "kernels.h"
#include "ops/ops.h"
#include "pe/ape.h"
#include "pe/pe.h"
#include "pe/kinds.h"
#include "resolve.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

static vt_arena arena;

static vt_config cfg_json(const char *json) {
    vt_config c;
    vt_status st = vt_resolve_json(&c, json, "test");
    if (st != VT_OK) {
        fprintf(stderr, "config %s: %s\n", json, vt_last_error());
        abort();
    }
    return c;
}

/* The small model of most tests (D 8, depth 2, 2 heads, 8x8 RGB images, patch 4,
 * 5 classes, learned APE) with ';'-separated "section.key=value" overrides. */
static vt_config small_cfg(const char *sets) {
    return config_with_sets("{\"model\": {\"width\": 8, \"depth\": 2, \"heads\": 2, \"mlp_ratio\": 4, "
                            "\"patch_size\": 4, \"img_size\": 8, \"num_classes\": 5, \"in_chans\": 3}}", sets);
}

static void fill_images(float *x, int64_t n, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2.0 * vt_rng_uniform(&r) - 1.0);
}

static vt_tensor *images_new(vt_tape *t, int B, int C, int S, uint64_t seed) {
    int64_t shape[4] = {B, C, S, S};
    vt_tensor *x = vt_tape_new(t, 0, 4, shape);
    fill_images(x->data, x->size, seed);
    return x;
}

/* Forward in evaluation mode (no grad, no dropout); logits copied to out. */
static void eval_logits(vt_vit *m, int B, int S, uint64_t seed, float *out, int64_t *shape_out) {
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    t.grad_enabled = 0;
    t.training = 0;
    vt_tensor *img = images_new(&t, B, m->in_chans, S, seed);
    vt_tensor *y = vt_vit_forward(m, &t, img);
    if (shape_out) {
        shape_out[0] = y->ndim;
        shape_out[1] = y->shape[0];
        shape_out[2] = y->ndim > 1 ? y->shape[1] : 0;
    }
    if (out) memcpy(out, y->data, (size_t)y->size * sizeof(float));
    CHECK(t.n == 0, "eval forward records nothing (%d entries)", t.n);
    vt_tape_free(&t);
}

static int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void test_shapes(void) {
    const char *sets[] = {
        "",
        "model.pool=avg;model.layer_scale=1e-5;model.in_chans=1",
        "model.img_size=16;model.qkv_bias=false;pe.ape=sincos",
        "pe.kind=none",
        "model.in_chans=1;model.img_size=12;model.patch_size=2;model.pool=avg",
    };
    int sizes[] = {8, 8, 16, 8, 12};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        vt_config c = small_cfg(sets[i]);
        vt_vit m;
        CHECK(vit_init_config(&m, &c, 7) == VT_OK, "init '%s': %s", sets[i], vt_last_error());
        float out[3 * 5];
        int64_t sh[3];
        eval_logits(&m, 3, sizes[i], 11, out, sh);
        CHECK(sh[0] == 2 && sh[1] == 3 && sh[2] == 5, "logits (3, 5) for '%s', got ndim %lld (%lld, %lld)",
              sets[i], (long long)sh[0], (long long)sh[1], (long long)sh[2]);
        CHECK(all_finite(out, 15), "finite logits for '%s'", sets[i]);
        vt_vit_free(&m);
    }
}

typedef struct {
    const char *name;
    int ndim;
    int64_t s[4];
    int decay;
} want_param;

/* Whether each named field of m is the view of the parameter of its timm name (NULL
 * exactly when the model has no such parameter); prints the first that is not. */
static int named_fields_ok(vt_vit *m) {
    const char *fn = vt_vit_find(m, "fc_norm.weight") ? "fc_norm" : "norm";
    char nw[32], nb[32];
    snprintf(nw, sizeof nw, "%s.weight", fn);
    snprintf(nb, sizeof nb, "%s.bias", fn);
    struct {
        const vt_tensor *field;
        const char *name;
    } top[] = {{m->cls_token, "cls_token"}, {m->patch_w, "patch_embed.proj.weight"},
               {m->patch_b, "patch_embed.proj.bias"}, {m->norm_w, nw}, {m->norm_b, nb},
               {m->head_w, "head.weight"}, {m->head_b, "head.bias"}};
    for (size_t j = 0; j < sizeof top / sizeof top[0]; j++) {
        const vt_param *p = vt_vit_find(m, top[j].name);
        if (!p || top[j].field != &p->t) {
            fprintf(stderr, "  field for %s is not its view\n", top[j].name);
            return 0;
        }
    }
    for (int i = 0; i < m->L; i++) {
        const vt_vit_block *b = &m->blocks[i];
        struct {
            const vt_tensor *field;
            const char *suffix;
        } blk[] = {{b->norm1_w, "norm1.weight"}, {b->norm1_b, "norm1.bias"}, {b->qkv_w, "attn.qkv.weight"},
                   {b->qkv_b, "attn.qkv.bias"}, {b->proj_w, "attn.proj.weight"}, {b->proj_b, "attn.proj.bias"},
                   {b->ls1, "ls1.gamma"}, {b->norm2_w, "norm2.weight"}, {b->norm2_b, "norm2.bias"},
                   {b->fc1_w, "mlp.fc1.weight"}, {b->fc1_b, "mlp.fc1.bias"}, {b->fc2_w, "mlp.fc2.weight"},
                   {b->fc2_b, "mlp.fc2.bias"}, {b->ls2, "ls2.gamma"}};
        for (size_t j = 0; j < sizeof blk / sizeof blk[0]; j++) {
            char nm[96];
            snprintf(nm, sizeof nm, "blocks.%d.%s", i, blk[j].suffix);
            const vt_param *p = vt_vit_find(m, nm);
            if (p ? blk[j].field != &p->t : blk[j].field != NULL) {
                fprintf(stderr, "  field for %s is not its view\n", nm);
                return 0;
            }
        }
    }
    return 1;
}

static void test_names(void) {
    vt_config c = (small_cfg("model.layer_scale=0.1"));
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 1) == VT_OK, "init: %s", vt_last_error());
    /* timm VisionTransformer(embed_dim=8, depth=2, num_heads=2, patch_size=4, img_size=8,
     * num_classes=5, init_values=0.1).named_parameters(), in order. */
    const want_param want[] = {
        {"cls_token", 3, {1, 1, 8}, 0},
        {"pos_embed", 3, {1, 5, 8}, 0},
        {"patch_embed.proj.weight", 4, {8, 3, 4, 4}, 1},
        {"patch_embed.proj.bias", 1, {8}, 0},
        {"blocks.0.norm1.weight", 1, {8}, 0},
        {"blocks.0.norm1.bias", 1, {8}, 0},
        {"blocks.0.attn.qkv.weight", 2, {24, 8}, 1},
        {"blocks.0.attn.qkv.bias", 1, {24}, 0},
        {"blocks.0.attn.proj.weight", 2, {8, 8}, 1},
        {"blocks.0.attn.proj.bias", 1, {8}, 0},
        {"blocks.0.ls1.gamma", 1, {8}, 0},
        {"blocks.0.norm2.weight", 1, {8}, 0},
        {"blocks.0.norm2.bias", 1, {8}, 0},
        {"blocks.0.mlp.fc1.weight", 2, {32, 8}, 1},
        {"blocks.0.mlp.fc1.bias", 1, {32}, 0},
        {"blocks.0.mlp.fc2.weight", 2, {8, 32}, 1},
        {"blocks.0.mlp.fc2.bias", 1, {8}, 0},
        {"blocks.0.ls2.gamma", 1, {8}, 0},
        {"blocks.1.norm1.weight", 1, {8}, 0},
        {"blocks.1.norm1.bias", 1, {8}, 0},
        {"blocks.1.attn.qkv.weight", 2, {24, 8}, 1},
        {"blocks.1.attn.qkv.bias", 1, {24}, 0},
        {"blocks.1.attn.proj.weight", 2, {8, 8}, 1},
        {"blocks.1.attn.proj.bias", 1, {8}, 0},
        {"blocks.1.ls1.gamma", 1, {8}, 0},
        {"blocks.1.norm2.weight", 1, {8}, 0},
        {"blocks.1.norm2.bias", 1, {8}, 0},
        {"blocks.1.mlp.fc1.weight", 2, {32, 8}, 1},
        {"blocks.1.mlp.fc1.bias", 1, {32}, 0},
        {"blocks.1.mlp.fc2.weight", 2, {8, 32}, 1},
        {"blocks.1.mlp.fc2.bias", 1, {8}, 0},
        {"blocks.1.ls2.gamma", 1, {8}, 0},
        {"norm.weight", 1, {8}, 0},
        {"norm.bias", 1, {8}, 0},
        {"head.weight", 2, {5, 8}, 1},
        {"head.bias", 1, {5}, 0},
    };
    int nw = (int)(sizeof want / sizeof want[0]);
    CHECK(m.n_p == nw, "parameter count %d, want %d", m.n_p, nw);
    int64_t total = 0, off = 0;
    int names_ok = 1, shapes_ok = 1, decay_ok = 1, offs_ok = 1;
    for (int i = 0; i < nw && i < m.n_p; i++) {
        const vt_param *p = &m.p[i];
        if (strcmp(p->name, want[i].name) != 0) {
            names_ok = 0;
            fprintf(stderr, "param %d: %s, want %s\n", i, p->name, want[i].name);
        }
        int sh = p->ckpt_ndim == want[i].ndim && p->t.ndim == want[i].ndim;
        int64_t size = 1;
        for (int d = 0; sh && d < want[i].ndim; d++) {
            sh = p->ckpt_shape[d] == want[i].s[d] && p->t.shape[d] == want[i].s[d];
            size *= want[i].s[d];
        }
        if (!sh) fprintf(stderr, "param %s: wrong shape\n", p->name);
        shapes_ok &= sh && p->t.size == size;
        decay_ok &= p->decay == want[i].decay;
        offs_ok &= p->offset == off && p->t.data == m.params + off && p->t.grad == m.grads + off;
        off += size;
        total += size;
    }
    CHECK(names_ok, "names and order are timm's");
    CHECK(shapes_ok, "shapes are timm's");
    CHECK(decay_ok, "decay only on linear/conv weights");
    CHECK(offs_ok, "views are contiguous in order in the flat buffers");
    CHECK(m.n_params == total, "n_params %lld = sum of sizes %lld", (long long)m.n_params, (long long)total);
    CHECK(vt_vit_find(&m, "blocks.1.mlp.fc1.bias") == &m.p[28], "find by name");
    CHECK(vt_vit_find(&m, "blocks.2.mlp.fc1.bias") == NULL, "find unknown name -> NULL");
    const vt_param *g = vt_vit_find(&m, "blocks.1.ls2.gamma");
    int gam = g != NULL;
    for (int i = 0; gam && i < 8; i++) gam = g->t.data[i] == 0.1f;
    CHECK(gam, "LayerScale gamma = model.layer_scale");
    CHECK(named_fields_ok(&m), "named fields are the views of their parameters");
    vt_vit_free(&m);

    /* pool avg: fc_norm instead of norm; qkv_bias off: no qkv.bias; none: no pos_embed. */
    c = (small_cfg("model.pool=avg;model.qkv_bias=false;pe.kind=none"));
    CHECK(vit_init_config(&m, &c, 1) == VT_OK, "init avg: %s", vt_last_error());
    CHECK(vt_vit_find(&m, "fc_norm.weight") && vt_vit_find(&m, "fc_norm.bias"), "avg pool has fc_norm");
    CHECK(!vt_vit_find(&m, "norm.weight"), "avg pool has no final norm");
    CHECK(!vt_vit_find(&m, "blocks.0.attn.qkv.bias"), "qkv_bias false: no qkv bias");
    CHECK(!vt_vit_find(&m, "pos_embed"), "pe none: no pos_embed");
    CHECK(!vt_vit_find(&m, "blocks.0.ls1.gamma"), "layer_scale 0: no gamma");
    CHECK(m.n_p == 3 + 2 * 11 + 4, "parameter count without optional tensors: %d", m.n_p);
    CHECK(named_fields_ok(&m), "named fields without optional tensors: NULL where absent");
    vt_vit_free(&m);
}

static double mean_std(const float *x, int64_t n, double *std) {
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double mu = s / n;
    for (int64_t i = 0; i < n; i++) ss += (x[i] - mu) * (x[i] - mu);
    *std = sqrt(ss / n);
    return mu;
}

static void test_tiny_count_and_init(void) {
    vt_config c = cfg_json("{\"model\": {\"preset\": \"vit_tiny\", \"patch_size\": 16, \"img_size\": 224, "
                           "\"num_classes\": 1000, \"in_chans\": 3}}");
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 42) == VT_OK, "vit_tiny init: %s", vt_last_error());
    CHECK(m.n_params == 5717416, "vit_tiny parameters %lld, want 5717416 (timm)", (long long)m.n_params);

    /* FLOPs: an independent count of the same GEMMs (multiply-add = 2). */
    double N = 197, D = 192;
    double want = 2 * 196 * D * 768 + 12 * (2 * N * D * 576 + 2 * N * D * D + 2 * 2 * N * D * 768 + 4 * N * N * D) +
                  2 * D * 1000;
    CHECK_CLOSE(vt_vit_flops(&m, 224), want, 0, 1e-12, "vit_tiny FLOPs at 224");
    CHECK(vt_vit_flops(&m, 448) > 4 * vt_vit_flops(&m, 224), "FLOPs grow faster than tokens (attention)");

    double sd, mu;
    int64_t nw = 0, bounds_ok = 1;
    for (int i = 0; i < m.n_p; i++) {
        const vt_param *p = &m.p[i];
        const char *nm = p->name;
        size_t ln = strlen(nm);
        int is_w = ln > 7 && strcmp(nm + ln - 7, ".weight") == 0;
        int is_b = ln > 5 && strcmp(nm + ln - 5, ".bias") == 0;
        int is_norm = strstr(nm, "norm") != NULL;
        if (is_w && !is_norm && strncmp(nm, "patch_embed", 11) != 0) {
            mu = mean_std(p->t.data, p->t.size, &sd);
            if (p->t.size > 100000) {
                CHECK_CLOSE(sd, 0.02, 0, 0.03, "std of %s", nm);
                CHECK_CLOSE(mu, 0.0, 3e-4, 0, "mean of %s", nm);
            }
            for (int64_t j = 0; j < p->t.size; j++) bounds_ok &= fabsf(p->t.data[j]) <= 2.0f;
            nw++;
        }
        if (is_b && !is_norm && strncmp(nm, "patch_embed", 11) != 0) {
            int zero = 1;
            for (int64_t j = 0; j < p->t.size; j++) zero &= p->t.data[j] == 0.0f;
            CHECK(zero, "%s is zero", nm);
        }
        if (is_norm) {
            int ok = 1;
            for (int64_t j = 0; j < p->t.size; j++) ok &= p->t.data[j] == (is_w ? 1.0f : 0.0f);
            CHECK(ok, "%s is %s", nm, is_w ? "ones" : "zeros");
        }
    }
    CHECK(nw == 12 * 4 + 1, "linear weights seen: %lld", (long long)nw);
    CHECK(bounds_ok, "truncated normal within [-2, 2]");
    const vt_param *cls = vt_vit_find(&m, "cls_token");
    mean_std(cls->t.data, cls->t.size, &sd);
    CHECK(sd > 5e-7 && sd < 1.5e-6, "cls_token std ~1e-6: %g", sd);
    const vt_param *pos = vt_vit_find(&m, "pos_embed");
    mu = mean_std(pos->t.data, pos->t.size, &sd);
    CHECK_CLOSE(sd, 0.02, 0, 0.03, "pos_embed std");
    CHECK(pos->decay == 0 && cls->decay == 0, "no decay on pos_embed / cls_token");
    /* Conv: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 3 * 16 * 16; std = bound / sqrt(3). */
    const vt_param *cw = vt_vit_find(&m, "patch_embed.proj.weight");
    double bound = 1.0 / sqrt(768.0);
    int in_b = 1;
    for (int64_t j = 0; j < cw->t.size; j++) in_b &= fabs(cw->t.data[j]) <= bound;
    mean_std(cw->t.data, cw->t.size, &sd);
    CHECK(in_b, "patch_embed weight within 1/sqrt(fan_in)");
    CHECK_CLOSE(sd, bound / sqrt(3.0), 0, 0.03, "patch_embed weight std (uniform)");
    const vt_param *cb = vt_vit_find(&m, "patch_embed.proj.bias");
    double babs = 0;
    in_b = 1;
    for (int64_t j = 0; j < cb->t.size; j++) {
        in_b &= fabs(cb->t.data[j]) <= bound;
        babs += fabs(cb->t.data[j]);
    }
    CHECK(in_b && babs > 0, "patch_embed bias uniform within the bound, not zero");
    CHECK(cw->decay == 1 && cb->decay == 0, "conv weight decays, its bias does not");

    /* Same seed, same parameters; another seed, others. */
    vt_vit m2;
    CHECK(vit_init_config(&m2, &c, 42) == VT_OK, "second init");
    CHECK(memcmp(m.params, m2.params, (size_t)m.n_params * sizeof(float)) == 0, "init is deterministic");
    vt_vit_free(&m2);
    vt_vit_free(&m);
}

/* ---- gradient check ---------------------------------------------------------------- */

static double loss_of(vt_vit *m, vt_tensor *img, const int *labels, int with_grad) {
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    t.grad_enabled = with_grad;
    t.training = 1;
    vt_tensor *x = vt_tensor_wrap(&arena, img->data, 4, img->shape);
    vt_tensor *logits = vt_vit_forward(m, &t, x);
    vt_tensor *loss = vt_op_cross_entropy(&t, logits, labels, NULL, 0.0f);
    double v = loss->data[0];
    if (with_grad) vt_tape_backward(&t, loss);
    vt_tape_free(&t);
    return v;
}

typedef struct {
    vt_vit *m;
    vt_tensor *img;
    const int *labels;
} vit_loss_ctx;

/* The loss without gradients (gc_loss_fn). */
static double vit_loss(void *p) {
    vit_loss_ctx *c = p;
    return loss_of(c->m, c->img, c->labels, 0);
}

static void grad_check(const char *json) {
    vt_config c = cfg_json(json);
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 3) == VT_OK, "gradcheck init: %s", vt_last_error());
    /* Larger random parameters than the init so every gradient is well above noise. */
    vt_rng r;
    vt_rng_seed(&r, 99);
    for (int i = 0; i < m.n_p; i++) {
        int ln = strstr(m.p[i].name, "norm") && strstr(m.p[i].name, "weight");
        for (int64_t j = 0; j < m.p[i].t.size; j++)
            m.p[i].t.data[j] = (float)((ln ? 1.0 : 0.0) + 0.5 * (2 * vt_rng_uniform(&r) - 1));
    }
    float img[2 * 3 * 8 * 8];
    fill_images(img, 2 * 3 * 64, 5);
    vt_tensor imt = vt_shape(4, (int64_t)2, (int64_t)3, (int64_t)8, (int64_t)8);
    imt.data = img;
    int labels[2] = {1, 2};
    vt_vit_zero_grad(&m);
    loss_of(&m, &imt, labels, 1);
    float *g = malloc((size_t)m.n_params * sizeof(float));
    memcpy(g, m.grads, (size_t)m.n_params * sizeof(float));
    /* |analytic - numeric| <= 2e-2 (1e-3 + |numeric|) at the first, middle and last entry
     * of every parameter */
    vit_loss_ctx lc = {&m, &imt, labels};
    gc_result res = {0};
    for (int i = 0; i < m.n_p; i++) {
        vt_param *p = &m.p[i];
        int64_t idx[3] = {0, p->t.size / 2, p->t.size - 1};
        for (int k = 0; k < 3; k++) {
            if (k > 0 && idx[k] == idx[k - 1]) continue;
            double ana = g[p->offset + idx[k]], num;
            if (!gc_check_elem(&res, NULL, idx[k], &p->t.data[idx[k]], ana, 1e-2, 2e-5, 2e-2, vit_loss, &lc, &num))
                fprintf(stderr, "  grad %s[%lld]: analytic %.6g numeric %.6g\n", p->name, (long long)idx[k], ana, num);
        }
    }
    CHECK(res.bad == 0, "%d of %d gradients off (worst %.3g of the tolerance) for %s", res.bad, res.checked,
          res.worst_rel, json);
    CHECK(res.checked >= 3 * m.n_p - 8, "checked %d entries over %d tensors", res.checked, m.n_p);
    free(g);
    vt_vit_free(&m);
}

static void test_grad(void) {
    grad_check("{\"model\": {\"width\": 8, \"depth\": 1, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4, "
               "\"img_size\": 8, \"num_classes\": 3, \"in_chans\": 3, \"layer_scale\": 0.5}}");
    grad_check("{\"model\": {\"width\": 8, \"depth\": 1, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4, "
               "\"img_size\": 8, \"num_classes\": 3, \"in_chans\": 3, \"pool\": \"avg\", \"qkv_bias\": false}, "
               "\"pe\": {\"kind\": \"ape\", \"ape\": \"sincos\"}}");
}

/* ---- grad scopes ------------------------------------------------------------------- */

/* Two training steps of m on one tape cleared per step, as the training loop runs them
 * (step 1: the region is made as large as the model's reserve; where a scope needs more,
 * its grads overflow into the arena and the next scope grows the region; step 2: every
 * scope uses the region). Every step's parameter gradients and loss are appended to g
 * (2 n_params floats) and loss (2). Returns the arena bytes step 2 used; *first_bytes =
 * those step 1 used, *region_bytes = the grad region's size. With scopes the tape is in
 * checking mode (tape.h); *checked (if not NULL) = the fresh gradients it checked in step 2. */
static size_t two_steps(vt_vit *m, int scopes, float *g, double *loss, size_t *first_bytes,
                        size_t *region_bytes, int *checked) {
    vt_arena a;
    vt_arena_init(&a, 1 << 16);
    vt_tape t;
    vt_tape_init(&t, &a);
    t.scopes_enabled = scopes;
    t.check = scopes;
    vt_rng r;
    vt_rng_seed(&r, 17);
    t.rng = &r;
    float img[3 * 3 * 64];
    int labels[3] = {1, 4, 0};
    size_t used = 0;
    for (int step = 0; step < 2; step++) {
        vt_arena_reset(&a);
        vt_tape_clear(&t);
        vt_vit_zero_grad(m);
        fill_images(img, 3 * 3 * 64, 40 + (uint64_t)step);
        vt_tensor *x = vt_tensor_wrap(&a, img, 4, (const int64_t[]){3, 3, 8, 8});
        vt_tensor *l = vt_op_cross_entropy(&t, vt_vit_forward(m, &t, x), labels, NULL, 0.0f);
        loss[step] = l->data[0];
        vt_tape_backward(&t, l);
        memcpy(g + (size_t)step * m->n_params, m->grads, (size_t)m->n_params * sizeof(float));
        if (step == 0) *first_bytes = a.total_used;
        used = a.total_used;
    }
    *region_bytes = t.region_cap;
    if (checked) *checked = t.n_checked;
    vt_tape_free(&t);
    vt_arena_free(&a);
    return used;
}

/* Two no-grad forwards (batches of 3 and 5 images) on one tape: logits of the second
 * into out (5 x 5), returns the arena bytes its forward used. */
static size_t eval_two_batches(vt_vit *m, int scopes, float *out) {
    vt_arena a;
    vt_arena_init(&a, 1 << 12);
    vt_tape t;
    vt_tape_init(&t, &a);
    t.scopes_enabled = scopes;
    t.grad_enabled = 0;
    t.training = 0;
    float img[5 * 3 * 64];
    size_t used = 0;
    for (int step = 0; step < 2; step++) {
        vt_arena_reset(&a);
        vt_tape_clear(&t);
        int B = step ? 5 : 3;
        fill_images(img, (int64_t)B * 3 * 64, 60 + (uint64_t)step);
        vt_tensor *x = vt_tensor_wrap(&a, img, 4, (const int64_t[]){B, 3, 8, 8});
        vt_tensor *y = vt_vit_forward(m, &t, x);
        if (step) memcpy(out, y->data, (size_t)y->size * sizeof(float));
        used = a.total_used;
    }
    vt_tape_free(&t);
    vt_arena_free(&a);
    return used;
}

static void test_grad_scopes(void) {
    /* reserve_fits: the model's reserve covers every block's scope, so the first step
     * needs no more arena than the second (not so where drop-path makes later blocks
     * larger or where the PE makes gradients of its own inside the block). */
    static const struct { const char *set; int reserve_fits; } sets[] = {
        {"pe.kind=none", 1},
        {"model.layer_scale=0.3;model.drop_rate=0.2;model.attn_drop_rate=0.2;model.drop_path=0.3", 0},
        {"pe.kind=ape;pe.ape=sincos;model.pool=avg", 1},
        {"pe.kind=rope_axial", 1},
        {"pe.kind=rope_mixed", 1},
        {"pe.kind=rope_mixed;pe.share=heads;model.attention=performer", 1},
        {"pe.kind=cayley", 0},
        {"pe.kind=cayley;pe.share=all", 0},
        {"pe.kind=circulant;pe.block_size=4", 0},
        {"pe.kind=circulant;pe.block_size=4;pe.share=layers;model.attention=performer", 0},
        {"pe.kind=liere", 0},
        {"pe.kind=liere;pe.share=none", 0},
        {"pe.kind=liere_commute", 0},
    };
    for (int k = 0; k < VT_PE_KIND_COUNT; k++) { /* every kind of the registry has a case */
        int found = 0;
        for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
            found |= sets_have_kind(sets[i].set, (vt_pe_kind)k);
        CHECK(found, "grad scopes: no case with pe.kind=%s", vt_pe_kind_name((vt_pe_kind)k));
    }
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
        char all[256];
        snprintf(all, sizeof all, "model.depth=3;%s", sets[i].set);
        vt_config c = small_cfg(all);
        vt_vit m;
        CHECK(vit_init_config(&m, &c, 8) == VT_OK, "init '%s': %s", all, vt_last_error());
        float *gs = malloc(2 * (size_t)m.n_params * sizeof(float)), *gp = malloc(2 * (size_t)m.n_params * sizeof(float));
        double ls[2], lp[2];
        size_t region, no_region, first_scoped, first_plain;
        int checked;
        size_t used_scoped = two_steps(&m, 1, gs, ls, &first_scoped, &region, &checked);
        size_t used_plain = two_steps(&m, 0, gp, lp, &first_plain, &no_region, NULL);
        CHECK(ls[0] == lp[0] && ls[1] == lp[1], "'%s': same losses with and without scopes (%.9g %.9g vs %.9g %.9g)",
              all, ls[0], ls[1], lp[0], lp[1]);
        int64_t differ = 0;
        for (int64_t j = 0; j < 2 * m.n_params; j++) differ += memcmp(&gs[j], &gp[j], sizeof(float)) != 0;
        CHECK(differ == 0, "'%s': %lld of 2 x %lld gradients differ with grad scopes", all, (long long)differ,
              (long long)m.n_params);
        /* Checking mode saw each block's fresh gradients (2 or 3 a block: attention's
         * output, fc1's, and qkv where attention reads it in place; with LayerScale or
         * dropout also the two residual branches' outputs, which otherwise add in place). */
        CHECK(checked >= 2 * 3, "'%s': checking mode checked %d fresh gradients in 3 blocks", all, checked);
        /* The 3 blocks' grads (up to region bytes each; block 0 has no drop-path) leave
         * the arena; a scope's zeroing entry costs one 64-byte context. */
        CHECK(region > 0 && no_region == 0 && used_plain >= used_scoped + 2 * (region - 64),
              "'%s': the blocks' grads leave the arena (step 2 used %zu vs %zu bytes, region %zu)", all,
              used_scoped, used_plain, region);
        if (sets[i].reserve_fits)
            CHECK(first_scoped == used_scoped, "'%s': the first step used %zu arena bytes, the second %zu", all,
                  first_scoped, used_scoped);
        /* Without gradients the scopes give each block's intermediates back: the same
         * logits, bit for bit, from at most 3/4 of the arena (what stays: the image, the
         * embedding, one block's intermediates, the PE's tables, the head). */
        float es[25], ep[25];
        size_t eval_scoped = eval_two_batches(&m, 1, es), eval_plain = eval_two_batches(&m, 0, ep);
        CHECK(memcmp(es, ep, sizeof es) == 0, "'%s': eval logits differ with scopes", all);
        CHECK(4 * eval_scoped < 3 * eval_plain, "'%s': eval forward used %zu arena bytes with scopes, %zu without",
              all, eval_scoped, eval_plain);
        free(gs);
        free(gp);
        vt_vit_free(&m);
    }
}

/* ---- eval vs training mode ---------------------------------------------------------- */

static void test_modes(void) {
    vt_config c = (small_cfg("model.layer_scale=0.3"));
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 5) == VT_OK, "init: %s", vt_last_error());
    float ev[2 * 5], tr[2 * 5];
    eval_logits(&m, 2, 8, 77, ev, NULL);
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    vt_rng r;
    vt_rng_seed(&r, 1);
    t.rng = &r;
    vt_tensor *y = vt_vit_forward(&m, &t, images_new(&t, 2, 3, 8, 77));
    memcpy(tr, y->data, sizeof tr);
    CHECK(t.n > 0, "training forward records the tape");
    vt_tape_free(&t);
    CHECK_ARRAY_CLOSE(tr, ev, 10, 1e-6, 1e-5, "training mode without dropout = eval mode");

    /* With dropout and drop-path active the training logits differ, evaluation does not. */
    vt_vit_free(&m);
    c = (small_cfg("model.layer_scale=0.3;model.drop_rate=0.5;model.attn_drop_rate=0.5;model.drop_path=0.5"));
    CHECK(vit_init_config(&m, &c, 5) == VT_OK, "init dropout: %s", vt_last_error());
    float ev2[10];
    eval_logits(&m, 2, 8, 77, ev2, NULL);
    CHECK_ARRAY_CLOSE(ev2, ev, 10, 0, 0, "drop rates do not change evaluation (same seed, same params)");
    vt_arena_reset(&arena);
    vt_tape_init(&t, &arena);
    t.rng = &r;
    y = vt_vit_forward(&m, &t, images_new(&t, 2, 3, 8, 77));
    double diff = 0;
    for (int i = 0; i < 10; i++) diff += fabs(y->data[i] - ev2[i]);
    CHECK(diff > 1e-4, "dropout changes training logits (diff %g)", diff);
    vt_tape_free(&t);
    vt_vit_free(&m);
}

/* ---- APE: bicubic resampling and sincos -------------------------------------------- */

/* Keys cubic kernel, a = -0.75. */
static double keys(double x) {
    const double a = -0.75;
    x = fabs(x);
    if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
    if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    return 0;
}

/* Hand-computed torch bicubic (align_corners=False): src = (o + 0.5) in/out - 0.5,
 * taps floor(src) - 1 .. + 2 with distance src - tap, indices clamped. */
static double bicubic_ref(const double *src, int hi, int wi, int ho, int wo, int oy, int ox) {
    double sy = (oy + 0.5) * hi / ho - 0.5, sx = (ox + 0.5) * wi / wo - 0.5;
    int fy = (int)floor(sy), fx = (int)floor(sx);
    double acc = 0;
    for (int j = -1; j <= 2; j++)
        for (int i = -1; i <= 2; i++) {
            int yy = fy + j < 0 ? 0 : (fy + j > hi - 1 ? hi - 1 : fy + j);
            int xx = fx + i < 0 ? 0 : (fx + i > wi - 1 ? wi - 1 : fx + i);
            acc += src[yy * wi + xx] * keys(sy - (fy + j)) * keys(sx - (fx + i));
        }
    return acc;
}

static void test_bicubic(void) {
    /* 2x2 -> 3x3, D = 1: values printed by torch 1.13 F.interpolate(bicubic). */
    const float src[4] = {1, 2, 3, 5};
    const double srcd[4] = {1, 2, 3, 5};
    const double torch_out[9] = {0.7471188306808472, 1.2829862833023071, 1.8188540935516357,
                                 1.869792103767395,  2.75,               3.6302082538604736,
                                 2.9924652576446533, 4.217013835906982,  5.441563129425049};
    float out[9];
    double hand[9];
    vt_pe_resample_bicubic(src, 2, 2, out, 3, 3, 1);
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 3; x++) hand[y * 3 + x] = bicubic_ref(srcd, 2, 2, 3, 3, y, x);
    CHECK_ARRAY_CLOSE(out, hand, 9, 1e-6, 1e-6, "2x2 -> 3x3 vs the Keys formula");
    CHECK_ARRAY_CLOSE(out, torch_out, 9, 1e-6, 1e-6, "2x2 -> 3x3 vs torch");
    CHECK_CLOSE(hand[4], 2.75, 1e-12, 0, "centre is the mean of the four (symmetric weights)");

    /* Larger, non-integer ratios both ways, several channels. */
    enum { HI = 5, HO = 7, DD = 3 };
    float s2[HI * HI * DD], o2[HO * HO * DD], back[HI * HI * DD];
    double sd[DD][HI * HI], want2[HO * HO * DD], want3[HI * HI * DD];
    for (int i = 0; i < HI * HI * DD; i++) {
        s2[i] = (float)sin(0.37 * i + 0.1);
        sd[i % DD][i / DD] = s2[i];
    }
    vt_pe_resample_bicubic(s2, HI, HI, o2, HO, HO, DD);
    for (int y = 0; y < HO; y++)
        for (int x = 0; x < HO; x++)
            for (int d = 0; d < DD; d++) want2[(y * HO + x) * DD + d] = bicubic_ref(sd[d], HI, HI, HO, HO, y, x);
    CHECK_ARRAY_CLOSE(o2, want2, HO * HO * DD, 2e-6, 1e-5, "5x5 -> 7x7, 3 channels");
    vt_pe_resample_bicubic(s2, HI, HI, back, HI, HI, DD);
    CHECK_ARRAY_CLOSE(back, s2, HI * HI * DD, 1e-6, 1e-6, "same size is the identity");
    double od[DD][HO * HO];
    for (int i = 0; i < HO * HO * DD; i++) od[i % DD][i / DD] = o2[i];
    vt_pe_resample_bicubic(o2, HO, HO, back, HI, HI, DD);
    for (int y = 0; y < HI; y++)
        for (int x = 0; x < HI; x++)
            for (int d = 0; d < DD; d++) want3[(y * HI + x) * DD + d] = bicubic_ref(od[d], HO, HO, HI, HI, y, x);
    CHECK_ARRAY_CLOSE(back, want3, HI * HI * DD, 2e-6, 1e-5, "7x7 -> 5x5 (downsampling)");

    /* pos_embed (1, 1 + 4, D): the CLS slot is kept, the grid resampled; bad counts fail. */
    float pe_in[5 * 2] = {9, -9, 1, 10, 2, 20, 3, 30, 5, 50}, pe_out[10 * 2];
    CHECK(vt_pe_resample_pos_embed(pe_in, 4, pe_out, 9, 2, "pos_embed") == VT_OK, "resample pos_embed");
    CHECK(pe_out[0] == 9 && pe_out[1] == -9, "CLS slot kept");
    int ok = 1;
    for (int i = 0; i < 9; i++) ok &= fabs(pe_out[2 + 2 * i] - torch_out[i]) < 1e-6 &&
                                      fabs(pe_out[3 + 2 * i] - 10 * torch_out[i]) < 1e-5;
    CHECK(ok, "pos_embed grid resampled per channel");
    CHECK(vt_pe_resample_pos_embed(pe_in, 3, pe_out, 9, 2, "pos_embed") != VT_OK &&
              strstr(vt_last_error(), "pos_embed") != NULL,
          "non-square source grid is an error naming the tensor: %s", vt_last_error());

    /* Through the model: 2x2 training grid evaluated at 3x3 (12x12 images). */
    vt_config c = (small_cfg(""));
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 9) == VT_OK, "init: %s", vt_last_error());
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    t.grad_enabled = 0;
    t.training = 0;
    vt_pe_prepare(m.pe, &t, 3, 3, NULL);
    const vt_param *pos = vt_vit_find(&m, "pos_embed");
    CHECK(m.pe->ape_table && m.pe->ape_table->shape[1] == 10 && m.pe->ape_table->grad == NULL,
          "3x3 table (1, 10, 8) without gradient");
    CHECK(memcmp(m.pe->ape_table->data, pos->t.data, 8 * sizeof(float)) == 0, "model keeps the CLS slot");
    double srcg[8][4], wantg[9 * 8];
    for (int n = 0; n < 4; n++)
        for (int d = 0; d < 8; d++) srcg[d][n] = pos->t.data[8 + n * 8 + d];
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 3; x++)
            for (int d = 0; d < 8; d++) wantg[(y * 3 + x) * 8 + d] = bicubic_ref(srcg[d], 2, 2, 3, 3, y, x);
    CHECK_ARRAY_CLOSE(m.pe->ape_table->data + 8, wantg, 72, 1e-7, 1e-5, "model's resampled pos_embed");
    vt_pe_prepare(m.pe, &t, 2, 2, NULL);
    CHECK(m.pe->ape_table == &pos->t, "training grid uses the parameter itself");
    vt_tape_free(&t);
    float lg[2 * 5];
    int64_t sh[3];
    eval_logits(&m, 2, 12, 3, lg, sh);
    CHECK(sh[1] == 2 && sh[2] == 5 && all_finite(lg, 10), "forward at 12x12 with a 2x2 training grid");
    vt_vit_free(&m);
}

static void test_sincos(void) {
    enum { R = 2, C = 3, D = 8 };
    float tab[(1 + R * C) * D];
    vt_pe_sincos_table(tab, R, C, D);
    double want[(1 + R * C) * D];
    memset(want, 0, sizeof want);
    int pd = D / 4;
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++)
            for (int k = 0; k < pd; k++) {
                double w = pow(10000.0, -(double)k / pd);
                double *r = want + (1 + i * C + j) * D;
                r[k] = sin(i * w);
                r[pd + k] = sin(j * w);
                r[2 * pd + k] = cos(i * w);
                r[3 * pd + k] = cos(j * w);
            }
    CHECK_ARRAY_CLOSE(tab, want, (1 + R * C) * D, 1e-6, 0, "sincos table vs the formula");
    /* Spot values: token (i=1, j=2) = index 1 + 5; k = 0 has w = 1, k = 1 has w = 0.01. */
    CHECK_CLOSE(tab[6 * D + 0], sin(1.0), 1e-6, 0, "sin(i w0)");
    CHECK_CLOSE(tab[6 * D + 3], sin(0.02), 1e-6, 0, "sin(j w1)");
    CHECK_CLOSE(tab[6 * D + 5], cos(0.01), 1e-6, 0, "cos(i w1)");
    CHECK_CLOSE(tab[6 * D + 6], cos(2.0), 1e-6, 0, "cos(j w0)");

    vt_config c = (small_cfg("pe.ape=sincos"));
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 1) == VT_OK, "init sincos: %s", vt_last_error());
    CHECK(!vt_vit_find(&m, "pos_embed"), "sincos is not a parameter");
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    vt_pe_prepare(m.pe, &t, 3, 3, NULL);
    float t33[10 * 8];
    vt_pe_sincos_table(t33, 3, 3, 8);
    CHECK(m.pe->ape_table && m.pe->ape_table->grad == NULL &&
              memcmp(m.pe->ape_table->data, t33, sizeof t33) == 0,
          "model's sincos table is rebuilt on the 3x3 grid, without gradient");
    vt_tape_free(&t);
    vt_vit_free(&m);
}

/* ---- checkpoints ------------------------------------------------------------------- */

static void test_checkpoint(void) {
    char dir[64];
    CHECK(test_tmpdir(dir, sizeof dir, "test_vit") == 0, "tmp dir");
    char path[256], path2[256];
    snprintf(path, sizeof path, "%s/a.safetensors", dir);
    snprintf(path2, sizeof path2, "%s/b.safetensors", dir);

    vt_config c = (small_cfg("model.layer_scale=0.1"));
    vt_vit a, b;
    CHECK(vit_init_config(&a, &c, 1) == VT_OK && vit_init_config(&b, &c, 2) == VT_OK, "init");
    CHECK(memcmp(a.params, b.params, (size_t)a.n_params * 4) != 0, "different seeds differ");
    CHECK(vit_save_config(&a, &c, path) == VT_OK, "save: %s", vt_last_error());
    CHECK(vt_vit_load(&b, path) == VT_OK, "load: %s", vt_last_error());
    CHECK(memcmp(a.params, b.params, (size_t)a.n_params * 4) == 0, "round trip is bitwise");
    vt_safetensors st;
    CHECK(vt_st_read(path, &st) == VT_OK, "read back");
    const char *meta = vt_st_meta(&st, "config");
    char *want_meta = vt_config_to_json(&c);
    CHECK(meta && strcmp(meta, want_meta) == 0, "metadata config is the resolved config's JSON, byte for byte");
    free(want_meta);
    const vt_st_tensor *qkv = vt_st_find(&st, "blocks.1.attn.qkv.weight");
    CHECK(qkv && qkv->ndim == 2 && qkv->shape[0] == 24 && qkv->shape[1] == 8 &&
              memcmp(qkv->data, vt_vit_find(&a, "blocks.1.attn.qkv.weight")->t.data, 24 * 8 * 4) == 0,
          "timm-named tensor with its data");
    CHECK(st.n == a.n_p, "one tensor per parameter (%d)", st.n);
    vt_st_free(&st);

    /* Shape mismatch: 7 classes. */
    vt_vit w;
    vt_config c7 = (small_cfg("model.layer_scale=0.1;model.num_classes=7"));
    CHECK(vit_init_config(&w, &c7, 1) == VT_OK, "init 7 classes");
    float before = w.params[w.n_params - 1];
    CHECK(vt_vit_load(&w, path) != VT_OK, "mismatched head loads with an error");
    CHECK(strstr(vt_last_error(), "head.weight") && strstr(vt_last_error(), "(7, 8)") &&
              strstr(vt_last_error(), "(5, 8)"),
          "error names the tensor and both shapes: %s", vt_last_error());
    CHECK(w.params[w.n_params - 1] == before && w.params[0] == vt_vit_find(&w, "cls_token")->t.data[0],
          "failed load leaves the model untouched");
    vt_vit_free(&w);

    /* Unknown tensor (file has ls gammas, model does not) and missing tensor (reverse). */
    vt_config cn = (small_cfg(""));
    CHECK(vit_init_config(&w, &cn, 1) == VT_OK, "init no-ls");
    CHECK(vt_vit_load(&w, path) != VT_OK && strstr(vt_last_error(), "unknown tensor") &&
              strstr(vt_last_error(), "ls1.gamma"),
          "unknown tensor named: %s", vt_last_error());
    CHECK(vit_save_config(&w, &cn, path2) == VT_OK, "save no-ls");
    CHECK(vt_vit_load(&b, path2) != VT_OK && strstr(vt_last_error(), "missing tensor") &&
              strstr(vt_last_error(), "blocks.0.ls1.gamma"),
          "missing tensor named: %s", vt_last_error());
    vt_vit_free(&w);

    /* A pos_embed of another grid is resampled: 2x2 (img 8) into 3x3 (img 12). */
    vt_config c12 = (small_cfg("model.layer_scale=0.1;model.img_size=12"));
    CHECK(vit_init_config(&w, &c12, 4) == VT_OK, "init img 12");
    CHECK(vt_vit_load(&w, path) == VT_OK, "load with resampling: %s", vt_last_error());
    const vt_param *pa = vt_vit_find(&a, "pos_embed"), *pw = vt_vit_find(&w, "pos_embed");
    float want[10 * 8];
    CHECK(vt_pe_resample_pos_embed(pa->t.data, 4, want, 9, 8, "pos_embed") == VT_OK, "reference resample");
    CHECK(pw->t.size == 80 && memcmp(pw->t.data, want, sizeof want) == 0, "pos_embed resampled on load");
    CHECK(memcmp(vt_vit_find(&w, "head.weight")->t.data, vt_vit_find(&a, "head.weight")->t.data, 40 * 4) == 0,
          "other tensors loaded as stored");
    vt_vit_free(&w);

    vt_vit_free(&a);
    vt_vit_free(&b);
    unlink(path);
    unlink(path2);
    rmdir(dir);
}

/* RGB-D input without depth_as_channel: only channels 0..2 reach the patch embedding.
 * (The config validator requires a rotary PE for in_chans 4; the model itself does not,
 * so the fields are set after validation.) */
static void test_rgbd_channels(void) {
    vt_config c3 = small_cfg(""), c4 = c3;
    c4.model.in_chans = 4;
    vt_vit m3, m4;
    CHECK(vit_init_config(&m3, &c3, 8) == VT_OK && vit_init_config(&m4, &c4, 8) == VT_OK, "init: %s", vt_last_error());
    const vt_param *w4 = vt_vit_find(&m4, "patch_embed.proj.weight");
    CHECK(m4.embed_chans == 3 && w4->t.shape[1] == 3, "in_chans 4: patch embedding over 3 channels");
    CHECK(m3.n_params == m4.n_params && memcmp(m3.params, m4.params, (size_t)m3.n_params * 4) == 0,
          "same layout and init as the RGB model");
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    t.grad_enabled = 0;
    t.training = 0;
    vt_tensor *x4 = images_new(&t, 2, 4, 8, 21);
    int64_t s3[4] = {2, 3, 8, 8};
    vt_tensor *x3 = vt_tape_new(&t, 0, 4, s3);
    for (int b = 0; b < 2; b++) memcpy(x3->data + b * 192, x4->data + b * 256, 192 * sizeof(float));
    vt_tensor *y3 = vt_vit_forward(&m3, &t, x3), *y4 = vt_vit_forward(&m4, &t, x4);
    CHECK_ARRAY_CLOSE(y4->data, y3->data, 10, 0, 0, "the depth channel does not enter the patch embedding");
    vt_tape_free(&t);
    vt_vit_free(&m4);
    c4.model.depth_as_channel = 1;
    CHECK(vit_init_config(&m4, &c4, 8) == VT_OK, "init depth_as_channel");
    w4 = vt_vit_find(&m4, "patch_embed.proj.weight");
    CHECK(m4.embed_chans == 4 && w4->t.shape[1] == 4 && w4->ckpt_shape[1] == 4,
          "depth_as_channel: weight (D, 4, P, P)");
    vt_vit_free(&m4);
    vt_vit_free(&m3);
}

static void test_zero_grad(void) {
    vt_config c = small_cfg("");
    vt_vit m;
    CHECK(vit_init_config(&m, &c, 2) == VT_OK, "init");
    float img[2 * 3 * 64];
    fill_images(img, 2 * 3 * 64, 6);
    vt_tensor imt = vt_shape(4, (int64_t)2, (int64_t)3, (int64_t)8, (int64_t)8);
    imt.data = img;
    int labels[2] = {0, 4};
    loss_of(&m, &imt, labels, 1);
    int64_t nz = 0;
    for (int64_t i = 0; i < m.n_params; i++) nz += m.grads[i] != 0.0f;
    CHECK(nz > m.n_params / 2, "backward fills the flat gradient buffer (%lld nonzero)", (long long)nz);
    float g0 = vt_vit_find(&m, "head.bias")->t.grad[0];
    loss_of(&m, &imt, labels, 1);
    CHECK_CLOSE(vt_vit_find(&m, "head.bias")->t.grad[0], 2 * g0, 1e-7, 1e-5, "gradients accumulate");
    vt_vit_zero_grad(&m);
    nz = 0;
    for (int64_t i = 0; i < m.n_params; i++) nz += m.grads[i] != 0.0f;
    CHECK(nz == 0, "zero_grad clears every gradient (%lld left)", (long long)nz);
    vt_vit_free(&m);
}

/* The model's rules are resolve's (vit.c asserts them): a config set in code that breaks
 * one is caught by vt_resolve with the key's name. */
static void test_bad_configs(void) {
    vt_config c = (small_cfg(""));
    c.model.attention = VT_ATTN_PERFORMER;
    c.performer.features = 0;
    CHECK(vt_resolve(&c) == VT_ERR_USAGE && strstr(vt_last_error(), "performer.features: 0 is below"),
          "performer without features: %s", vt_last_error());
}

int main(void) {
    if (test_kernels_init()) return 1;
    vt_arena_init(&arena, 1 << 20);
    test_shapes();
    test_names();
    test_tiny_count_and_init();
    test_grad();
    test_grad_scopes();
    test_modes();
    test_bicubic();
    test_sincos();
    test_checkpoint();
    test_rgbd_channels();
    test_zero_grad();
    test_bad_configs();
    vt_arena_free(&arena);
    return test_summary();
}
