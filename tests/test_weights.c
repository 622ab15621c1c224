/* test_weights.c - weights files into models (src/weights.c, src/checkpoint_timm.c,
 * src/checkpoint_dtype.c).
 *
 * Covers: exact BF16 / F16 widening (every one of the 65536 bit patterns of each, NaN
 * payloads kept) and a file mixing F32, BF16 and F16 at unaligned offsets; timm's layouts
 * (Eva gamma_1/gamma_2, q_bias/v_bias, rope.freqs (2, L, H, hd/2), pos_embed without the
 * class-token row) translated exactly, and a model saved in those layouts (some tensors
 * BF16) loading bitwise equal to our own file; every bad layout named; strict loading's
 * errors; the fine-tuning start (train.init): a 3-class checkpoint into a 10-class model
 * (head re-initialised to the model's own init, the rest bitwise), shared PE tensors
 * expanded, pos_embed resampled, an APE checkpoint into Cayley-STRING (shared weights
 * loaded, the Cayley and inner RoPE parameters at their contract init), unexpected
 * tensors an error unless allowed, a missing block tensor or another width an error
 * naming file, tensor and both shapes, and a failed load leaving the model untouched.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "checkpoint_dtype.h"
#include "checkpoint_timm.h"
#include "config_overrides.h"
#include "harness.h"
#include "test_util.h"
#include "kernels.h"
#include "pe/ape.h"
#include "pe/pe.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

static char dir[64];

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ------------------------------------------------------------------ dtypes */

/* F16 -> double from the IEEE definition, independent of the code under test. */
static double half_ref(uint16_t h) {
    int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return sign ? -v : v;
}

static void test_widen(void) {
    int bad_h = 0, bad_b = 0, first_h = -1;
    for (uint32_t i = 0; i < 65536; i++) {
        unsigned char b[2] = {(unsigned char)(i & 0xff), (unsigned char)(i >> 8)};
        float h, bf;
        vt_st_widen("F16", b, &h, 1);
        vt_st_widen("BF16", b, &bf, 1);
        double want = half_ref((uint16_t)i);
        int ok;
        if (isnan(want)) /* quiet or signalling: sign and payload kept */
            ok = float_bits(h) == ((i & 0x8000u) << 16 | 0x7f800000u | (i & 0x3ffu) << 13);
        else
            ok = (double)h == want && !signbit(h) == !signbit(want);
        if (!ok && first_h < 0) first_h = (int)i;
        bad_h += !ok;
        bad_b += float_bits(bf) != i << 16;
    }
    CHECK(bad_h == 0, "F16: %d of 65536 bit patterns widen wrongly (first 0x%04x)", bad_h, first_h);
    CHECK(bad_b == 0, "BF16: %d of 65536 bit patterns widen wrongly", bad_b);
}

/* A safetensors file with tensors of any dtype: names, dtypes, element counts (1-D), raw
 * little-endian data concatenated in order. */
static void write_raw_st(const char *path, int n, const char *const *names, const char *const *dtypes,
                         const int *counts, const void *data, size_t bytes) {
    char json[2048];
    size_t o = (size_t)snprintf(json, sizeof json, "{");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t b = (size_t)counts[i] * (size_t)vt_st_dtype_size(dtypes[i]);
        o += (size_t)snprintf(json + o, sizeof json - o, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%d],"
                              "\"data_offsets\":[%zu,%zu]}", i ? "," : "", names[i], dtypes[i], counts[i],
                              at, at + b);
        at += b;
    }
    o += (size_t)snprintf(json + o, sizeof json - o, "}");
    CHECK(at == bytes, "test file data size");
    FILE *f = fopen(path, "wb");
    uint64_t hl = o;
    unsigned char len[8];
    for (int b = 0; b < 8; b++) len[b] = (unsigned char)(hl >> (8 * b));
    fwrite(len, 1, 8, f);
    fwrite(json, 1, o, f);
    fwrite(data, 1, bytes, f);
    fclose(f);
}

static void test_mixed_dtypes(void) {
    /* h: F16 (3) = 6 bytes, then a: F32 (2) at the unaligned offset 6, then b: BF16 (2). */
    unsigned char data[6 + 8 + 4];
    uint16_t h[3] = {0x3c00, 0x0001, 0xfbff}; /* 1, smallest subnormal 2^-24, -65504 */
    for (int i = 0; i < 3; i++) {
        data[2 * i] = (unsigned char)(h[i] & 0xff);
        data[2 * i + 1] = (unsigned char)(h[i] >> 8);
    }
    float a[2] = {1.25f, -3.5e-20f};
    memcpy(data + 6, a, 8);
    uint32_t bb = float_bits(-2.5f) >> 16, bc = float_bits(0x1p-130f) >> 16;
    data[14] = (unsigned char)bb, data[15] = (unsigned char)(bb >> 8);
    data[16] = (unsigned char)bc, data[17] = (unsigned char)(bc >> 8);
    const char *names[3] = {"h", "a", "b"}, *dts[3] = {"F16", "F32", "BF16"};
    int counts[3] = {3, 2, 2};
    const char *p = test_path(dir, "mixed.safetensors");
    write_raw_st(p, 3, names, dts, counts, data, sizeof data);
    vt_safetensors st;
    CHECK(vt_st_read(p, &st) == VT_OK, "mixed dtypes read: %s", vt_last_error());
    const vt_st_tensor *th = vt_st_find(&st, "h"), *ta = vt_st_find(&st, "a"), *tb = vt_st_find(&st, "b");
    CHECK(th && ta && tb, "all three tensors");
    if (th && ta && tb) {
        CHECK(th->data[0] == 1.0f && th->data[1] == 0x1p-24f && th->data[2] == -65504.0f,
              "F16 values 1, 2^-24, -65504: %g %g %g", th->data[0], th->data[1], th->data[2]);
        CHECK(ta->data[0] == 1.25f && ta->data[1] == -3.5e-20f, "F32 at an unaligned offset");
        CHECK(tb->data[0] == -2.5f && tb->data[1] == 0x1p-130f, "BF16 values incl. a subnormal");
        CHECK(!strcmp(th->dtype, "F16") && !strcmp(ta->dtype, "F32") && !strcmp(tb->dtype, "BF16"),
              "stored dtypes reported");
        CHECK(((uintptr_t)ta->data & 3) == 0, "float32 data aligned after widening");
    }
    vt_st_free(&st);
    /* Infinities widen exactly (test_widen) but a checkpoint holding one does not load. */
    data[4] = 0x00, data[5] = 0xfc; /* h[2] = -inf */
    write_raw_st(p, 3, names, dts, counts, data, sizeof data);
    CHECK(vt_st_read(p, &st) == VT_ERR_RUNTIME && strstr(vt_last_error(), "tensor \"h\" holds -Inf"),
          "a -inf F16 is refused naming the tensor: %s", vt_last_error());
}

/* ------------------------------------------------------------------ models */

static vt_config tiny(const char *sets) {
    return config_with_sets("{\"model\": {\"width\": 16, \"depth\": 2, \"heads\": 2, \"mlp_ratio\": 2, "
                            "\"patch_size\": 4, \"img_size\": 8, \"num_classes\": 3, \"in_chans\": 3}}", sets);
}

/* m = the tiny model with overrides sets; returns its config (for vit_save_config). */
static vt_config model(vt_vit *m, const char *sets, uint64_t seed) {
    vt_config c = tiny(sets);
    VT_ASSERT(vit_init_config(m, &c, seed) == VT_OK, "init %s: %s", sets, vt_last_error());
    return c;
}

/* Every parameter filled with distinct non-zero values (unused PE entries cleared). */
static void scramble(vt_vit *m, float scale) {
    for (int64_t i = 0; i < m->n_params; i++) m->params[i] = scale * (float)sin(0.37 * (double)i + 1.0);
    vt_pe_clear_unused(m->pe);
}

static const vt_param *param(vt_vit *m, const char *name) {
    const vt_param *p = vt_vit_find(m, name);
    VT_ASSERT(p, "no parameter %s", name);
    return p;
}

static int param_equal(vt_vit *a, vt_vit *b, const char *name) {
    const vt_param *x = param(a, name), *y = param(b, name);
    return x->t.size == y->t.size && memcmp(x->t.data, y->t.data, (size_t)x->t.size * 4) == 0;
}

/* Save m's parameters under its names, except: renames (from -> to), dropped names, and
 * the timm layout transforms named by flags. */
enum { TIMM_GAMMA = 1, TIMM_FREQS = 2, TIMM_NOCLS = 4, TIMM_QVBIAS = 8 };

static void save_timm_layout(vt_vit *m, const char *path, int flags) {
    vt_st_tensor *ts = vt_xcalloc((size_t)m->n_p * 2, sizeof *ts);
    float **owned = vt_xcalloc((size_t)m->n_p * 2, sizeof *owned);
    int n = 0;
    for (int i = 0; i < m->n_p; i++) {
        const vt_param *p = &m->p[i];
        vt_st_tensor *t = &ts[n];
        snprintf(t->name, sizeof t->name, "%s", p->name);
        t->ndim = p->ckpt_ndim;
        memcpy(t->shape, p->ckpt_shape, sizeof t->shape);
        t->size = p->t.size;
        t->data = p->t.data;
        int blk;
        char rest[96];
        if (sscanf(p->name, "blocks.%d.%95s", &blk, rest) == 2) {
            if ((flags & TIMM_GAMMA) && !strcmp(rest, "ls1.gamma")) snprintf(t->name, sizeof t->name, "blocks.%d.gamma_1", blk);
            if ((flags & TIMM_GAMMA) && !strcmp(rest, "ls2.gamma")) snprintf(t->name, sizeof t->name, "blocks.%d.gamma_2", blk);
            if ((flags & TIMM_QVBIAS) && !strcmp(rest, "attn.qkv.bias")) {
                int64_t D = m->D;
                snprintf(t->name, sizeof t->name, "blocks.%d.attn.q_bias", blk);
                t->shape[0] = t->size = D;
                vt_st_tensor *v = &ts[++n];
                *v = *t;
                snprintf(v->name, sizeof v->name, "blocks.%d.attn.v_bias", blk);
                v->data = p->t.data + 2 * D;
            }
        }
        if ((flags & TIMM_FREQS) && !strcmp(p->name, "pe.freqs")) {
            int64_t L = p->ckpt_shape[0], H = p->ckpt_shape[1], P = p->ckpt_shape[2], half = L * H * P;
            snprintf(t->name, sizeof t->name, "rope.freqs");
            int64_t shape[4] = {2, L, H, P};
            memcpy(t->shape, shape, sizeof shape);
            float *d = owned[n] = vt_xmalloc((size_t)p->t.size * 4);
            for (int64_t k = 0; k < half; k++) {
                d[k] = p->t.data[2 * k];
                d[half + k] = p->t.data[2 * k + 1];
            }
            t->data = d;
        }
        if ((flags & TIMM_NOCLS) && !strcmp(p->name, "pos_embed")) {
            t->shape[1] -= 1;
            t->size -= m->D;
            t->data = p->t.data + m->D;
        }
        n++;
    }
    CHECK(vt_st_write(path, ts, n, NULL, NULL, 0) == VT_OK, "write timm layout: %s", vt_last_error());
    for (int i = 0; i < 2 * m->n_p; i++) free(owned[i]);
    free(owned);
    free(ts);
}

static void test_timm_layouts(void) {
    const char *sets = "pe.kind=rope_mixed;pe.ape=learned;model.layer_scale=0.1";
    vt_vit a, b;
    model(&a, sets, 1);
    scramble(&a, 0.5f);
    float *cls_row = vt_vit_find(&a, "pos_embed")->t.data;
    memset(cls_row, 0, (size_t)a.D * 4); /* no_embed_class: the CLS slot is 0 */
    for (int blk = 0; blk < a.L; blk++) { /* Eva's qkv has no k bias */
        char nm[64];
        snprintf(nm, sizeof nm, "blocks.%d.attn.qkv.bias", blk);
        memset(vt_vit_find(&a, nm)->t.data + a.D, 0, (size_t)a.D * 4);
    }
    for (int flags = 1; flags <= 15; flags++) {
        const char *p = test_path(dir, "timm.safetensors");
        save_timm_layout(&a, p, flags);
        model(&b, sets, 2);
        vt_status s = vt_vit_load(&b, p);
        CHECK(s == VT_OK, "timm layout flags %d loads: %s", flags, vt_last_error());
        CHECK(memcmp(a.params, b.params, (size_t)a.n_params * 4) == 0,
              "timm layout flags %d: the parameters equal the saved model bitwise", flags);
        vt_vit_free(&b);
    }
    /* The Eva layer-scale and q/v bias names are what the translation reports. */
    const char *p = test_path(dir, "timm.safetensors");
    save_timm_layout(&a, p, 15);
    vt_safetensors st;
    vt_wfile wf;
    CHECK(vt_st_read(p, &st) == VT_OK && vt_wfile_from_st(&st, p, &wf) == VT_OK, "translate: %s", vt_last_error());
    const vt_wtensor *g = vt_wfile_find(&wf, "blocks.1.ls2.gamma"), *f = vt_wfile_find(&wf, "pe.freqs"),
                     *qb = vt_wfile_find(&wf, "blocks.0.attn.qkv.bias");
    CHECK(g && !strcmp(g->file_name, "blocks.1.gamma_2") && g->layout, "gamma_2 read as ls2.gamma");
    CHECK(f && !strcmp(f->file_name, "rope.freqs") && f->ndim == 4 && f->shape[0] == 2 && f->shape[3] == 2,
          "rope.freqs read as pe.freqs (L, H, hd/2, 2)");
    const float *ab = param(&a, "blocks.0.attn.qkv.bias")->t.data;
    CHECK(qb && qb->shape[0] == 48 && qb->data[0] == ab[0] && qb->data[16] == 0.0f && qb->data[31] == 0.0f &&
              qb->data[32] == ab[32] && qb->data[47] == ab[47],
          "q_bias, 0, v_bias");
    CHECK(wf.n == a.n_p, "one translated tensor per parameter (%d, %d)", wf.n, a.n_p);
    vt_wfile_free(&wf);
    vt_st_free(&st);
    vt_vit_free(&a);
}

/* A file of raw named F32 tensors (1-D unless shape given). */
static void write_tensors(const char *path, int n, const char *const *names, const int64_t (*shapes)[4],
                          const int *ndims) {
    vt_st_tensor ts[8];
    static float zeros[4096];
    for (int i = 0; i < n; i++) {
        memset(&ts[i], 0, sizeof ts[i]);
        snprintf(ts[i].name, sizeof ts[i].name, "%s", names[i]);
        ts[i].ndim = ndims[i];
        ts[i].size = 1;
        for (int d = 0; d < ndims[i]; d++) ts[i].size *= (ts[i].shape[d] = shapes[i][d]);
        ts[i].data = zeros;
    }
    CHECK(vt_st_write(path, ts, n, NULL, NULL, 0) == VT_OK, "write");
}

static void test_bad_layouts(void) {
    struct {
        int n;
        const char *names[2];
        int64_t shapes[2][4];
        int ndims[2];
        const char *want1, *want2;
    } cases[] = {
        {1, {"blocks.0.attn.q_bias"}, {{8}}, {1}, "'blocks.0.attn.q_bias' without 'blocks.0.attn.v_bias'", NULL},
        {1, {"blocks.3.attn.v_bias"}, {{8}}, {1}, "'blocks.3.attn.v_bias' without 'blocks.3.attn.q_bias'", NULL},
        {2, {"blocks.0.attn.q_bias", "blocks.0.attn.v_bias"}, {{8}, {6}}, {1, 1}, "(8)", "(6)"},
        {1, {"rope.freqs"}, {{3, 2, 2, 4}}, {4}, "'rope.freqs' has shape (3, 2, 2, 4)", "(2, L, H, hd/2)"},
        {1, {"pos_embed"}, {{1, 51, 8}}, {3}, "'pos_embed' has shape (1, 51, 8)", "neither a square grid"},
        {1, {"pos_embed"}, {{51, 8}}, {2}, "(51, 8)", "expected (1, tokens, width)"},
        {2, {"blocks.1.gamma_1", "blocks.1.ls1.gamma"}, {{8}, {8}}, {1, 1}, "'blocks.1.gamma_1' and 'blocks.1.ls1.gamma'",
         "both 'blocks.1.ls1.gamma'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = test_path(dir, "bad.safetensors");
        write_tensors(p, cases[i].n, cases[i].names, cases[i].shapes, cases[i].ndims);
        vt_safetensors st;
        vt_wfile wf;
        CHECK(vt_st_read(p, &st) == VT_OK, "read");
        vt_status s = vt_wfile_from_st(&st, p, &wf);
        const char *msg = vt_last_error();
        CHECK(s == VT_ERR_RUNTIME && strstr(msg, p) && strstr(msg, cases[i].want1) &&
                  (!cases[i].want2 || strstr(msg, cases[i].want2)),
              "case %zu: error names the file and '%s': %s", i, cases[i].want1, msg);
        CHECK(wf.n == 0 && wf.t == NULL, "case %zu: nothing left allocated", i);
        vt_st_free(&st);
    }
    /* A 7 x 7 table without class-token row (49 tokens) is no longer "48 patch tokens". */
    vt_vit m;
    model(&m, "model.img_size=28", 3);
    vt_vit src;
    model(&src, "model.img_size=28", 4);
    const char *p = test_path(dir, "nocls.safetensors");
    save_timm_layout(&src, p, TIMM_NOCLS);
    CHECK(vt_vit_load(&m, p) == VT_OK, "7 x 7 pos_embed without class row loads: %s", vt_last_error());
    vt_vit_free(&m);
    vt_vit_free(&src);
}

/* ------------------------------------------------------------------ strict */

static void test_strict_errors(void) {
    vt_vit a, b;
    vt_config ca = model(&a, "", 1);
    const char *p = test_path(dir, "a.safetensors");
    CHECK(vit_save_config(&a, &ca, p) == VT_OK, "save");
    model(&b, "model.num_classes=10", 2);
    float before = param(&b, "cls_token")->t.data[0];
    vt_status s = vt_vit_load(&b, p);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), p) && strstr(vt_last_error(), "'head.weight'") &&
              strstr(vt_last_error(), "(10, 16)") && strstr(vt_last_error(), "(3, 16)") &&
              strstr(vt_last_error(), "train.init"),
          "strict: another head names file, tensor, shapes and train.init: %s", vt_last_error());
    CHECK(param(&b, "cls_token")->t.data[0] == before, "a failed load leaves the model untouched");
    vt_vit_free(&b);
    vt_vit_free(&a);
    /* A timm-layout tensor in an error is named as stored and as read. */
    model(&a, "pe.kind=rope_mixed", 1);
    save_timm_layout(&a, p, TIMM_FREQS);
    model(&b, "pe.kind=rope_mixed;pe.share=all", 2);
    s = vt_vit_load(&b, p);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), "'rope.freqs' (read as 'pe.freqs')") &&
              strstr(vt_last_error(), "expected shape (1, 1, 4, 2), found (2, 2, 4, 2)"),
          "strict: translated tensor named both ways: %s", vt_last_error());
    vt_vit_free(&a);
    vt_vit_free(&b);
}

/* ------------------------------------------------------------------ fine-tuning start */

static char *read_log(FILE *f) {
    fflush(f);
    long n = ftell(f);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = '\0';
    fclose(f);
    return s;
}

static vt_status init_from(vt_vit *m, const char *path, int allow, vt_weights_report *r, char **log) {
    FILE *f = tmpfile();
    vt_weights_opts o = {1, allow};
    vt_status s = vt_weights_load(m, path, &o, r, f);
    *log = read_log(f);
    return s;
}

static void test_init_head(void) {
    vt_vit a, b, fresh;
    vt_config ca = model(&a, "model.layer_scale=0.1", 1);
    scramble(&a, 0.3f);
    const char *p = test_path(dir, "three.safetensors");
    CHECK(vit_save_config(&a, &ca, p) == VT_OK, "save 3-class");
    model(&b, "model.layer_scale=0.1;model.num_classes=10", 7);
    model(&fresh, "model.layer_scale=0.1;model.num_classes=10", 7);
    vt_weights_report r;
    char *log;
    CHECK(init_from(&b, p, 0, &r, &log) == VT_OK, "3-class checkpoint into a 10-class model: %s", vt_last_error());
    CHECK(r.reinit == 2 && r.loaded == b.n_p - 2 && r.ignored == 0 && r.resampled == 0,
          "head re-initialised, everything else loaded (%d loaded, %d re-init)", r.loaded, r.reinit);
    CHECK(param_equal(&b, &fresh, "head.weight") && param_equal(&b, &fresh, "head.bias"),
          "head keeps the model's own init");
    int rest = 1;
    for (int i = 0; i < b.n_p; i++)
        if (strncmp(b.p[i].name, "head.", 5) != 0) rest &= param_equal(&a, &b, b.p[i].name);
    CHECK(rest, "every other tensor loaded bitwise");
    char summary[64];
    snprintf(summary, sizeof summary, "%d of %d model tensors loaded as stored", b.n_p - 2, b.n_p);
    CHECK(strstr(log, "re-initialised head.weight (10, 16): the file has (3, 16)") &&
              strstr(log, "re-initialised head.bias (10): the file has (3)") && strstr(log, summary),
          "log names the re-initialised head and the summary:\n%s", log);
    free(log);
    vt_vit_free(&a);
    vt_vit_free(&b);
    vt_vit_free(&fresh);
}

static void test_init_pe(void) {
    /* An APE checkpoint (16 px: 4 x 4 grid) into Cayley-STRING with a learned APE at 24 px. */
    vt_vit a, b, fresh;
    vt_config ca = model(&a, "pe.kind=ape;model.img_size=16", 1);
    scramble(&a, 0.3f);
    const char *p = test_path(dir, "ape.safetensors");
    CHECK(vit_save_config(&a, &ca, p) == VT_OK, "save ape");
    const char *cay = "pe.kind=cayley;pe.ape=learned;model.img_size=24";
    model(&b, cay, 5);
    model(&fresh, cay, 5);
    vt_weights_report r;
    char *log;
    CHECK(init_from(&b, p, 0, &r, &log) == VT_OK, "APE into cayley: %s", vt_last_error());
    CHECK(r.resampled == 1 && r.reinit == 2 && r.loaded == b.n_p - 3, "pos_embed resampled, 2 PE tensors "
          "re-initialised (%d, %d, %d)", r.resampled, r.reinit, r.loaded);
    CHECK(param_equal(&b, &fresh, "pe.cayley_u") && param_equal(&b, &fresh, "pe.freqs"),
          "Cayley and inner RoPE-Mixed parameters at their contract init");
    int zero = 1;
    const vt_param *u = param(&b, "pe.cayley_u");
    for (int64_t i = 0; i < u->t.size; i++) zero &= u->t.data[i] == 0.0f;
    CHECK(zero, "Cayley U starts at 0 (P = I: the model starts as its inner RoPE)");
    int shared = 1;
    for (int i = 0; i < b.n_p; i++)
        if (strncmp(b.p[i].name, "pe.", 3) != 0 && strcmp(b.p[i].name, "pos_embed") != 0)
            shared &= param_equal(&a, &b, b.p[i].name);
    CHECK(shared, "every shared tensor is the APE model's");
    float want[37 * 16];
    CHECK(vt_pe_resample_pos_embed(param(&a, "pos_embed")->t.data, 16, want, 36, 16, "pos_embed") == VT_OK &&
              memcmp(want, param(&b, "pos_embed")->t.data, sizeof want) == 0,
          "pos_embed resampled 4 x 4 -> 6 x 6");
    CHECK(strstr(log, "resampled pos_embed (1, 37, 16) from (1, 17, 16)") &&
              strstr(log, "re-initialised pe.cayley_u (2, 2, 8, 8): not in the file (the kind's init)"),
          "log:\n%s", log);
    free(log);
    vt_vit_free(&b);

    /* Without pe.ape the pos_embed is unexpected: an error, or ignored when allowed. */
    model(&b, "pe.kind=cayley;model.img_size=16", 5);
    float before = param(&b, "cls_token")->t.data[0];
    vt_status s = init_from(&b, p, 0, &r, &log);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), p) && strstr(vt_last_error(), "unexpected tensor 'pos_embed' (1, 17, 16)") &&
              strstr(vt_last_error(), "train.init_allow_unexpected"),
          "unexpected pos_embed named with the key that allows it: %s", vt_last_error());
    CHECK(param(&b, "cls_token")->t.data[0] == before, "untouched after the error");
    free(log);
    CHECK(init_from(&b, p, 1, &r, &log) == VT_OK && r.ignored == 1 && r.reinit == 2,
          "allowed: ignored (%d) : %s", r.ignored, vt_last_error());
    CHECK(strstr(log, "ignored 'pos_embed' (1, 17, 16)"), "log names the ignored tensor:\n%s", log);
    free(log);
    vt_vit_free(&a);
    vt_vit_free(&b);
    vt_vit_free(&fresh);

    /* Shared PE tensors expand to a model with a set per layer and head. */
    ca = model(&a, "pe.kind=rope_mixed;pe.share=all", 1);
    scramble(&a, 0.3f);
    CHECK(vit_save_config(&a, &ca, p) == VT_OK, "save shared");
    model(&b, "pe.kind=rope_mixed;pe.share=none", 2);
    CHECK(init_from(&b, p, 0, &r, &log) == VT_OK && r.expanded == 1, "shared into per-layer: %s", vt_last_error());
    const vt_param *fa = param(&a, "pe.freqs"), *fb = param(&b, "pe.freqs");
    int same = fb->t.size == 4 * fa->t.size;
    for (int k = 0; same && k < 4; k++) same = !memcmp(fb->t.data + k * fa->t.size, fa->t.data, (size_t)fa->t.size * 4);
    CHECK(same, "each (layer, head) set is the shared one");
    CHECK(strstr(log, "expanded pe.freqs (2, 2, 4, 2) from (1, 1, 4, 2)"), "log:\n%s", log);
    free(log);
    vt_vit_free(&b);
    /* ... but never collapse: a per-layer file into a shared model is an error. */
    CHECK(vit_save_config(&a, &ca, p) == VT_OK, "save");
    vt_config cb = model(&b, "pe.kind=rope_mixed;pe.share=none", 2);
    const char *p2 = test_path(dir, "perlayer.safetensors");
    CHECK(vit_save_config(&b, &cb, p2) == VT_OK, "save per-layer");
    vt_vit_free(&b);
    model(&b, "pe.kind=rope_mixed;pe.share=layers", 2);
    s = init_from(&b, p2, 0, &r, &log);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), "'pe.freqs': expected shape (1, 2, 4, 2), found (2, 2, 4, 2)") &&
              strstr(vt_last_error(), "pe.share"),
          "collapse refused: %s", vt_last_error());
    free(log);
    vt_vit_free(&a);
    vt_vit_free(&b);
}

static void test_init_errors(void) {
    vt_vit a, b;
    vt_config ca = model(&a, "", 1);
    const char *p = test_path(dir, "w.safetensors");
    CHECK(vit_save_config(&a, &ca, p) == VT_OK, "save");
    vt_weights_report r;
    char *log;
    /* another width: named as such (from the file's tensors), before any tensor */
    model(&b, "model.width=8", 2);
    vt_status s = init_from(&b, p, 1, &r, &log);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), p) &&
              strstr(vt_last_error(), "width 16 here, 8 in the config (model.width)") &&
              !strstr(vt_last_error(), "depth"),
          "width mismatch: %s", vt_last_error());
    free(log);
    vt_vit_free(&b);
    /* a model tensor the file lacks (layer scale) is an error even when allowing extras */
    model(&b, "model.layer_scale=0.1", 2);
    s = init_from(&b, p, 1, &r, &log);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), "missing tensor 'blocks.0.ls1.gamma'") &&
              strstr(vt_last_error(), "model.layer_scale = 0"),
          "missing block tensor: %s", vt_last_error());
    free(log);
    vt_vit_free(&b);
    /* another pooling: the hint names model.pool */
    model(&b, "model.pool=avg", 2);
    s = init_from(&b, p, 1, &r, &log);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), "missing tensor 'fc_norm.weight'") &&
              strstr(vt_last_error(), "model.pool = token"),
          "pool mismatch: %s", vt_last_error());
    free(log);
    vt_vit_free(&b);
    /* a file that is not there */
    model(&b, "", 2);
    s = init_from(&b, test_path(dir, "nope.safetensors"), 0, &r, &log);
    CHECK(s == VT_ERR_RUNTIME && strstr(vt_last_error(), "nope.safetensors") && strstr(vt_last_error(), "cannot open"),
          "missing file: %s", vt_last_error());
    free(log);
    vt_vit_free(&a);
    vt_vit_free(&b);
}

/* A timm Eva file with "blocks.00.attn.v_bias" beside "blocks.0.attn.v_bias": the extra
 * tensor is not block 0's bias (the model writes no leading zeros) but a tensor of its own
 * name, so a strict load names it as unknown and a fine-tuning start that allows
 * unexpected tensors counts it and names it in the log; it is never silently dropped. */
static void test_padded_block_index(void) {
    const char *sets = "pe.kind=rope_mixed;pe.ape=learned;model.layer_scale=0.1";
    vt_vit a, b;
    model(&a, sets, 1);
    const char *p = test_path(dir, "eva.safetensors"), *q = test_path(dir, "eva00.safetensors");
    save_timm_layout(&a, p, 15);
    vt_safetensors st;
    CHECK(vt_st_read(p, &st) == VT_OK, "read: %s", vt_last_error());
    vt_st_tensor *ts = calloc((size_t)st.n + 1, sizeof *ts);
    memcpy(ts, st.tensors, (size_t)st.n * sizeof *ts);
    const vt_st_tensor *vb = vt_st_find(&st, "blocks.0.attn.v_bias");
    CHECK(vb != NULL, "the Eva file has blocks.0.attn.v_bias");
    if (vb) {
        ts[st.n] = *vb;
        snprintf(ts[st.n].name, sizeof ts[st.n].name, "blocks.00.attn.v_bias");
    }
    CHECK(vt_st_write(q, ts, st.n + 1, NULL, NULL, 0) == VT_OK, "write: %s", vt_last_error());
    free(ts);
    vt_st_free(&st);
    model(&b, sets, 2);
    CHECK(vt_vit_load(&b, q) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "unknown tensor 'blocks.00.attn.v_bias'"),
          "strict: %s", vt_last_error());
    vt_weights_report r;
    char *log = NULL;
    CHECK(init_from(&b, q, 1, &r, &log) == VT_OK, "init: %s", vt_last_error());
    CHECK(r.ignored == 1 && log && strstr(log, "ignored 'blocks.00.attn.v_bias'") &&
              strstr(log, "1 file tensors ignored"),
          "init: %d ignored, log: %s", r.ignored, log ? log : "");
    free(log);
    vt_vit_free(&b);
    vt_vit_free(&a);
}

/* A (1, 1, D) pos_embed (a 1 x 1 grid without class-token row) is logged as resampled from
 * the shape the file holds, with the row the conversion added said apart. */
static void test_nocls_resample_log(void) {
    vt_vit a, b;
    model(&a, "model.img_size=4", 1);
    const char *p = test_path(dir, "grid1.safetensors");
    save_timm_layout(&a, p, TIMM_NOCLS);
    model(&b, "model.img_size=16", 2);
    vt_weights_report r;
    char *log = NULL;
    CHECK(init_from(&b, p, 0, &r, &log) == VT_OK, "1 x 1 grid into 4 x 4: %s", vt_last_error());
    CHECK(r.resampled == 1 && log &&
              strstr(log, "resampled pos_embed (1, 17, 16) from (1, 1, 16) as stored (read as "
                          "(1, 2, 16): no class-token row"),
          "log: %s", log ? log : "");
    free(log);
    vt_vit_free(&a);
    vt_vit_free(&b);
}

int main(void) {
    if (test_kernels_init()) return 1;
    if (test_tmpdir(dir, sizeof dir, "weights")) return 1;
    test_widen();
    test_mixed_dtypes();
    test_timm_layouts();
    test_bad_layouts();
    test_strict_errors();
    test_init_head();
    test_init_pe();
    test_init_errors();
    test_padded_block_index();
    test_nocls_resample_log();
    test_rm_rf(dir);
    return test_summary();
}
