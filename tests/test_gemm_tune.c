/* test_gemm_tune.c - the GEMM blocking chosen by measurement (gemm_tune.h, gemm_cache.h):
 *   - every field of a context survives the record / cache text (format, parse), and a
 *     text that misses, repeats or breaks a field is refused;
 *   - the products of a config's step (ViT-B/16 at batch 32: the 12 linear products and
 *     attention's per-head ones);
 *   - the search's rule with injected timings (no clock): it finds the fastest value of a
 *     knob, keeps the incumbent when a candidate gains less than the noise margin, only
 *     times a knob on the products it affects, and drops a result that the final rounds
 *     find slower than the start;
 *   - the same rule on a bf16 path's own blocking (amx, avx512bf16): the fastest kc, mc
 *     and nc, a gain inside the margin refused, every candidate timed keeping the
 *     path's multiples (amx: kc of 32, mc of 32; avx512bf16: mc of 14; nc of 32), each
 *     knob timed on the products it affects, nothing but that blocking changed;
 *   - the cache: a round trip, a miss, a corrupt file and another key's file ignored
 *     with a reason naming the file; the cache directory from XDG_CACHE_HOME or HOME;
 *     fp32, bf16-fma, bf16-amx and bf16-dpbf16 keys apart (an entry of one is a miss
 *     for the others);
 *   - blocking.c's choice for a bf16 run: the cache's entry of its own path (and not
 *     another path's, nor fp32's), recorded; a resumed run keeps its record whatever
 *     the cache holds then.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocking.h"
#include "config.h"
#include "gemm_cache.h"
#include "gemm_tune.h"
#include "harness.h"
#include "kernels.h"
#include "resolve.h"
#include "test_util.h"

static int same_blocking(const vt_gemm_context *a, const vt_gemm_context *b) {
    return !memcmp(&a->avx2, &b->avx2, sizeof a->avx2) && !memcmp(&a->avx512, &b->avx512, sizeof a->avx512) &&
           !memcmp(&a->avx512bf16, &b->avx512bf16, sizeof a->avx512bf16) && !memcmp(&a->amx, &b->amx, sizeof a->amx);
}

/* items (a blocking text) without the items whose key starts with prefix, into out. */
static void drop_items(const char *items, const char *prefix, char *out, size_t len) {
    size_t n = 0;
    out[0] = '\0';
    for (const char *p = items; *p;) {
        size_t l = strcspn(p, ",");
        if (strncmp(p, prefix, strlen(prefix)) && n < len)
            n += (size_t)snprintf(out + n, len - n, "%s%.*s", n ? "," : "", (int)l, p);
        p += l + (p[l] == ',');
    }
}

static void test_text_round_trip(void) {
    for (int i = 0; i < vt_gemm_context_count(); i++) {
        const vt_gemm_context *c = vt_gemm_context_at(i);
        char items[1024], why[256] = "";
        vt_gemm_context back;
        memset(&back, 0, sizeof back);
        CHECK(vt_gemm_context_format(c, items, sizeof items) == 0, "%s: format", c->name);
        CHECK(vt_gemm_blocking_parse(items, &back, why, sizeof why) == 0 && same_blocking(c, &back),
              "%s: every field back from '%s' (%s)", c->name, items, why);
    }
    char small[32];
    CHECK(vt_gemm_context_format(vt_gemm_context_at(0), small, sizeof small) == -1, "a short buffer is refused");
    vt_gemm_context c = *vt_gemm_context_at(0), out;
    char items[1024], bad[1100], why[256];
    vt_gemm_context_format(&c, items, sizeof items);
    /* a field missing (the last), a field repeated, a value out of its rules, garbage */
    snprintf(bad, sizeof bad, "%.*s", (int)(strrchr(items, ',') - items), items);
    CHECK(vt_gemm_blocking_parse(bad, &out, why, sizeof why) == -1, "a missing field is refused");
    snprintf(bad, sizeof bad, "%s,avx512.kc=512", items);
    CHECK(vt_gemm_blocking_parse(bad, &out, why, sizeof why) == -1, "a repeated field is refused");
    snprintf(bad, sizeof bad, "%s", items);
    char *kc = strstr(bad, "avx512.kc=");
    memcpy(kc, "avx512.kc=1", 11); /* 1xx: not a multiple of 16 */
    CHECK(vt_gemm_blocking_parse(bad, &out, why, sizeof why) == -1 && strstr(why, "avx512.kc"),
          "a value that breaks a rule is refused naming it: %s", why);
    CHECK(vt_gemm_blocking_parse("nonsense", &out, why, sizeof why) == -1, "garbage is refused");
    /* a record from before the avx512 in-place limits: every field but those two parses,
     * the two from the default entry; one of the two alone is still a field missing */
    const vt_gemm_context *spr = NULL;
    for (int i = 0; i < vt_gemm_context_count(); i++)
        if (!strcmp(vt_gemm_context_at(i)->name, "spr")) spr = vt_gemm_context_at(i);
    CHECK(spr != NULL, "the table has an spr entry");
    if (!spr) return;
    vt_gemm_context_format(spr, items, sizeof items);
    drop_items(items, "avx512.inplace_", bad, sizeof bad);
    memset(&out, 0, sizeof out);
    CHECK(vt_gemm_blocking_parse(bad, &out, why, sizeof why) == 0 && out.avx512.kc == spr->avx512.kc &&
              out.avx512.mr == spr->avx512.mr && out.amx.kc == spr->amx.kc &&
              out.avx512.inplace_rows_max_n == vt_gemm_context_at(0)->avx512.inplace_rows_max_n &&
              out.avx512.inplace_t_max_n == vt_gemm_context_at(0)->avx512.inplace_t_max_n,
          "a record without the in-place limits parses, the limits from the default entry (%s)", why);
    drop_items(items, "avx512.inplace_t_max_n", bad, sizeof bad);
    CHECK(vt_gemm_blocking_parse(bad, &out, why, sizeof why) == -1, "one in-place limit alone missing is refused");
}

static vt_config vit_b(int batch) {
    char b[64];
    snprintf(b, sizeof b, "train.batch_size=%d", batch);
    const char *sets[] = {"model.width=768", "model.depth=12",    "model.heads=12",   "model.mlp_ratio=4",
                          "model.patch_size=16", "model.img_size=224", "model.in_chans=3", b};
    vt_config cfg;
    vt_status st = vt_resolve_file(&cfg, "configs/synthetic_tiny.json", sets, 8);
    CHECK(st == VT_OK, "ViT-B config: %s", vt_last_error());
    return cfg;
}

static void test_shapes(void) {
    vt_config cfg = vit_b(32);
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(&cfg, 1, s);
    CHECK(n == 15, "12 linear and 3 attention products, got %d", n);
    /* fc1: 3072 x 768; 197 tokens x 32 */
    CHECK(!strcmp(s[6].name, "fc1/fwd") && s[6].ta == 0 && s[6].tb == 1 && s[6].M == 6304 && s[6].N == 3072 &&
              s[6].K == 768 && s[6].batch == 0,
          "fc1/fwd: %s %d %d %d %d %d", s[6].name, s[6].ta, s[6].tb, s[6].M, s[6].N, s[6].K);
    CHECK(!strcmp(s[8].name, "fc1/dW") && s[8].ta == 1 && s[8].M == 3072 && s[8].N == 768 && s[8].K == 6304 &&
              s[8].beta == 1.0f,
          "fc1/dW accumulates: %s %d %d %d", s[8].name, s[8].M, s[8].N, s[8].K);
    CHECK(!strcmp(s[12].name, "attn/qk") && s[12].M == 197 && s[12].N == 197 && s[12].K == 64 &&
              s[12].batch == 32 * 12,
          "attn/qk per (sample, head): %d %d %d x %d", s[12].M, s[12].N, s[12].K, s[12].batch);
    CHECK_CLOSE(vt_tune_linear_flops(s, n), 2.0 * 6304 * 768 * 768 * 12 * 3, 1.0, 1e-12, "linear FLOPs");
    int n2 = vt_tune_shapes(&cfg, 2, s);
    CHECK(n2 == 15 && s[0].M == 197 * 16, "a rank's share of the batch: M %d", s[0].M);
}

/* A made-up CPU: seconds = sum over the timed products of a cost that is lowest at
 * avx512.kc = 768, mc = 392 and tile 12x32; `bias` scales the time of any blocking with
 * kc_t = 384 (the margin's test); final_penalty makes every changed blocking slower on
 * the mask of every product (the final rounds' test). */
typedef struct {
    const vt_tune_shape *s;
    int n;
    double kc_t_gain;
    int final_penalty;
    unsigned masks_seen[64];
    int calls;
    const vt_gemm_context *start;
} fake_cpu;

static double fake_measure(void *user, const vt_gemm_context *c, unsigned mask) {
    fake_cpu *f = user;
    if (f->calls < 64) f->masks_seen[f->calls] = mask;
    f->calls++;
    const vt_gemm_blocking_f32 *b = &c->avx512;
    double t = 0.0;
    for (int i = 0; i < f->n; i++) {
        if (!(mask >> i & 1)) continue;
        double x = 1.0 + abs(b->kc - 768) / 2048.0 + abs(b->mc - 392) / 512.0;
        if (b->mr != 12) x *= 1.2;
        if (b->kc_t == 384) x *= f->kc_t_gain;
        t += x;
    }
    unsigned all = (1u << f->n) - 1;
    if (f->final_penalty && mask == all && memcmp(b, &f->start->avx512, sizeof *b)) t *= 10.0;
    return t;
}

static void test_search_rule(void) {
    vt_config cfg = vit_b(32);
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(&cfg, 1, s);
    /* a start of the test's own, whatever the table's entries hold */
    vt_gemm_context start;
    char err[256];
    CHECK(vt_gemm_context_parse("default,avx512.mr=14,avx512.nr=32,avx512.kc=384,avx512.kc_t=256,avx512.mc=280,"
                                "avx512.m_one_pass=784,avx512.nc_one_pass=256,avx512.one_pass_min_n=384",
                                vt_gemm_context_at(0), &start, err, sizeof err) == 0,
          "the start (14x32, kc 384, kc_t 256, mc 280, m_one_pass 784): %s", err);
    const vt_tune_target avx512 = {VT_ISA_AVX512, 0, -1}, avx2 = {VT_ISA_AVX2, 0, -1};
    fake_cpu f = {s, n, 0.99, 0, {0}, 0, &start};
    vt_tune_result r;
    vt_tune_search(&start, &avx512, s, n, fake_measure, &f, &r);
    CHECK(r.changed && r.best.avx512.kc == 768 && r.best.avx512.mr == 12 && r.best.avx512.nr == 32,
          "the fastest kc and tile: kc %d, tile %dx%d (%s)", r.best.avx512.kc, r.best.avx512.mr, r.best.avx512.nr,
          r.changes);
    CHECK(r.best.avx512.mc % 12 == 0 && abs(r.best.avx512.mc - 392) <= 12, "mc near 392, a multiple of 12: %d",
          r.best.avx512.mc);
    CHECK(r.best.avx512.kc_t == start.avx512.kc_t, "a 1%% gain is within the margin: kc_t stays %d (got %d)",
          start.avx512.kc_t, r.best.avx512.kc_t);
    CHECK(r.t_best < r.t_start && r.timed == f.calls, "faster than the start: %.3f < %.3f, %d timings", r.t_best,
          r.t_start, r.timed);
    CHECK(strstr(r.changes, "avx512.kc 384 -> 768") != NULL, "the changes are named: %s", r.changes);
    char items[1024], why[256];
    vt_gemm_context back;
    vt_gemm_context_format(&r.best, items, sizeof items);
    CHECK(vt_gemm_blocking_parse(items, &back, why, sizeof why) == 0, "the result keeps every rule: %s", why);

    /* a 5% gain is taken; the same figures give the same result */
    fake_cpu g = {s, n, 0.95, 0, {0}, 0, &start};
    vt_tune_result r2;
    vt_tune_search(&start, &avx512, s, n, fake_measure, &g, &r2);
    CHECK(r2.best.avx512.kc_t == 384, "a 5%% gain beats the margin: kc_t %d", r2.best.avx512.kc_t);
    CHECK(r2.best.avx512.kc == r.best.avx512.kc && r2.best.avx512.mc == r.best.avx512.mc, "deterministic");
    /* every knob is timed only on the products it affects: kc (ta = 0) never on a weight gradient */
    unsigned dw = 0;
    for (int i = 0; i < n; i++)
        if (s[i].ta && !s[i].batch) dw |= 1u << i;
    int kc_masks = 0;
    for (int i = 0; i < 64 && i < g.calls; i++) kc_masks += (g.masks_seen[i] & dw) == 0 && g.masks_seen[i] != 0;
    CHECK(kc_masks > 0, "some knobs are timed without the weight gradients");

    /* the final rounds find the result slower: the start is kept */
    fake_cpu h = {s, n, 0.99, 1, {0}, 0, &start};
    vt_tune_result r3;
    vt_tune_search(&start, &avx512, s, n, fake_measure, &h, &r3);
    CHECK(!r3.changed && same_blocking(&r3.best, &start) && r3.changes[0] == '\0',
          "a result slower over every product is dropped (%s)", r3.changes);

    /* avx2: no tile choice; its own fields only */
    fake_cpu k = {s, n, 1.0, 0, {0}, 0, &start};
    vt_tune_result r4;
    vt_tune_search(&start, &avx2, s, n, fake_measure, &k, &r4);
    CHECK(!memcmp(&r4.best.avx512, &start.avx512, sizeof start.avx512), "avx2 tuning leaves avx512's fields");
}

/* A made-up CPU for a bf16 blocking: seconds lowest at kc 1536, mc near 384 (amx) / 378
 * (avx512bf16) and nc 3072, nc's gain `nc_gain` (the margin's test). Every context
 * timed is checked against the rules and the path's multiples, and nothing but the
 * tuned blocking may differ from the start. */
typedef struct {
    const vt_tune_shape *s;
    int n;
    const vt_gemm_context *start;
    int amx; /* the amx blocking is tuned (else avx512bf16's) */
    double nc_gain;
    int bad_candidates, other_fields_changed, calls;
    unsigned masks[64]; /* the masks timed, in order */
} fake_bf16;

static double fake_bf16_measure(void *user, const vt_gemm_context *c, unsigned mask) {
    fake_bf16 *f = user;
    f->calls++;
    const vt_gemm_blocking_bf16 *b = f->amx ? &c->amx : &c->avx512bf16, *b0 = f->amx ? &f->start->amx
                                                                                    : &f->start->avx512bf16;
    const vt_gemm_blocking_bf16 *other = f->amx ? &c->avx512bf16 : &c->amx,
                                *other0 = f->amx ? &f->start->avx512bf16 : &f->start->amx;
    char items[1024], why[256];
    vt_gemm_context back;
    int mr = f->amx ? 32 : 14;
    if (vt_gemm_context_format(c, items, sizeof items) || vt_gemm_blocking_parse(items, &back, why, sizeof why) ||
        b->kc % (f->amx ? 32 : 2) || b->mc % mr || b->nc % 32)
        f->bad_candidates++;
    if (memcmp(&c->avx2, &f->start->avx2, sizeof c->avx2) || memcmp(&c->avx512, &f->start->avx512, sizeof c->avx512) ||
        memcmp(other, other0, sizeof *other))
        f->other_fields_changed++;
    (void)b0;
    if (f->calls <= 64) f->masks[f->calls - 1] = mask;
    double t = 0.0;
    for (int i = 0; i < f->n; i++) {
        if (!(mask >> i & 1)) continue;
        double x = 1.0 + abs(b->kc - 1536) / 4096.0 + abs(b->mc - 384) / 1024.0;
        if (b->nc == 3072) x *= f->nc_gain;
        t += x;
    }
    return t;
}

static void test_bf16_search(void) {
    vt_config cfg = vit_b(32);
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(&cfg, 1, s);
    const vt_gemm_context start = *vt_gemm_context_at(0); /* amx and avx512bf16: kc 1024, nc 1536 */
    CHECK(start.amx.kc == 1024 && start.amx.nc == 1536 && start.avx512bf16.nc == 1536,
          "the default entry's bf16 blockings (the test's start) are what the test expects");
    const vt_tune_target amx = {VT_ISA_AMX, 1, VT_BF16_AMX}, dpbf16 = {VT_ISA_AMX, 1, VT_BF16_DPBF16};
    CHECK(!strcmp(vt_tune_blocking_name(&amx), "amx") && !strcmp(vt_tune_blocking_name(&dpbf16), "avx512bf16") &&
              !strcmp(vt_tune_target_name(&amx), "bf16-amx") && !strcmp(vt_tune_target_name(&dpbf16), "bf16-dpbf16"),
          "names: %s %s", vt_tune_blocking_name(&amx), vt_tune_target_name(&dpbf16));

    fake_bf16 f = {s, n, &start, 1, 0.90, 0, 0, 0, {0}};
    vt_tune_result r;
    vt_tune_search(&start, &amx, s, n, fake_bf16_measure, &f, &r);
    CHECK(r.changed && r.best.amx.kc == 1536 && r.best.amx.mc == 384 && r.best.amx.nc == 3072,
          "amx: the fastest kc, mc, nc: %d %d %d (%s)", r.best.amx.kc, r.best.amx.mc, r.best.amx.nc, r.changes);
    CHECK(strstr(r.changes, "amx.kc 1024 -> 1536") && strstr(r.changes, "amx.nc 1536 -> 3072"), "changes named: %s",
          r.changes);
    CHECK(!memcmp(&r.best.avx512, &start.avx512, sizeof start.avx512) &&
              !memcmp(&r.best.avx512bf16, &start.avx512bf16, sizeof start.avx512bf16),
          "tuning amx leaves every other blocking");
    CHECK(f.bad_candidates == 0 && f.other_fields_changed == 0,
          "every context timed keeps the rules and amx's multiples (%d bad), and only amx's fields (%d)",
          f.bad_candidates, f.other_fields_changed);
    /* the knobs in order kc, mc, nc, each on one mask between the warm-up's and the final
     * rounds' (every product): kc not on attention's products (K <= 197), mc on them
     * (M = 197 rows), nc only on products wider than 768 columns */
    unsigned all = (1u << n) - 1, attention = 0, wide = 0, knob_masks[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        if (s[i].batch) attention |= 1u << i;
        if (s[i].N > 768) wide |= 1u << i;
    }
    int nk = 0; /* the runs of one mask after the warm-up (call 0): kc's, mc's, nc's, the final rounds' */
    for (int i = 1; i < f.calls && i < 64; i++)
        if ((nk == 0 || f.masks[i] != knob_masks[nk - 1]) && nk < 3) knob_masks[nk++] = f.masks[i];
    CHECK(nk == 3 && f.masks[0] == all && !(knob_masks[0] & attention) && (knob_masks[1] & attention) == attention &&
              (knob_masks[2] & ~wide) == 0 && knob_masks[2],
          "kc timed without attention's products (%x), mc with them (%x), nc on the wide products (%x of %x)",
          knob_masks[0], knob_masks[1], knob_masks[2], wide);
    CHECK(r.timed == f.calls && r.t_best < r.t_start, "faster than the start, %d timings", r.timed);

    /* nc 3072 1% faster: inside the margin, kept at 1536 */
    fake_bf16 g = {s, n, &start, 1, 0.99, 0, 0, 0, {0}};
    vt_tune_search(&start, &amx, s, n, fake_bf16_measure, &g, &r);
    CHECK(r.best.amx.nc == 1536 && r.best.amx.kc == 1536, "a 1%% gain is within the margin: nc %d", r.best.amx.nc);

    /* avx512bf16: mc in multiples of 14 (VDPBF16PS's 14-row tile) */
    fake_bf16 h = {s, n, &start, 0, 0.90, 0, 0, 0, {0}};
    vt_tune_search(&start, &dpbf16, s, n, fake_bf16_measure, &h, &r);
    CHECK(r.best.avx512bf16.kc == 1536 && r.best.avx512bf16.mc == 378 && r.best.avx512bf16.nc == 3072,
          "avx512bf16: kc %d, mc %d (384 rounded to a multiple of 14), nc %d", r.best.avx512bf16.kc,
          r.best.avx512bf16.mc, r.best.avx512bf16.nc);
    CHECK(!memcmp(&r.best.amx, &start.amx, sizeof start.amx) && h.bad_candidates == 0 && h.other_fields_changed == 0,
          "tuning avx512bf16 keeps its rules (%d bad) and leaves amx's and the fp32 fields (%d)", h.bad_candidates,
          h.other_fields_changed);

    /* the field accessor the candidates are rounded with: the rule's multiple, the fp32 tile's */
    int v = 0, m = 0;
    CHECK(vt_gemm_context_field(&start, "amx.mc", &v, &m) == 0 && v == start.amx.mc && m == 32, "amx.mc: %d, x%d", v,
          m);
    CHECK(vt_gemm_context_field(&start, "avx512bf16.mc", &v, &m) == 0 && m == 14, "avx512bf16.mc x%d", m);
    CHECK(vt_gemm_context_field(&start, "avx512.nc", &v, &m) == 0 && m == start.avx512.nr, "avx512.nc x%d (nr)", m);
    CHECK(vt_gemm_context_field(&start, "avx512.kc", &v, &m) == 0 && m == 16, "avx512.kc x%d", m);
    CHECK(vt_gemm_context_field(&start, "amx.mr", &v, &m) == -1, "no such field");
}

static void test_cache(void) {
    char dir[256];
    if (test_tmpdir(dir, sizeof dir, "gemm_cache")) return;
    char cdir[512];
    snprintf(cdir, sizeof cdir, "%s/sub/vitrain", dir); /* parents created */
    vt_config cfg = vit_b(32);
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(&cfg, 1, s);
    const vt_tune_target fp32 = {vt_k.isa, 0, -1};
    vt_gemm_cache_key k1, k2, k3;
    vt_gemm_cache_key_make(&k1, &fp32, s, n, 1);
    vt_gemm_cache_key_make(&k2, &fp32, s, n, 2);
    cfg = vit_b(64);
    vt_tune_shape s64[VT_TUNE_MAX_SHAPES];
    vt_gemm_cache_key_make(&k3, &fp32, s64, vt_tune_shapes(&cfg, 1, s64), 1);
    CHECK(strcmp(k1.file, k2.file) && strcmp(k1.file, k3.file), "threads and shapes are in the key: %s %s %s",
          k1.file, k2.file, k3.file);
    vt_gemm_context c = *vt_gemm_context_at(0), got;
    c.avx512.kc = 768;
    char note[256], why[4400], path[4200];
    CHECK(vt_gemm_cache_load(cdir, &k1, &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_MISS, "a miss");
    CHECK(vt_gemm_cache_store(cdir, &k1, &c, "a note", path, sizeof path) == VT_OK, "store: %s", vt_last_error());
    memset(&got, 0, sizeof got);
    CHECK(vt_gemm_cache_load(cdir, &k1, &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_HIT &&
              same_blocking(&got, &c) && !strcmp(note, "a note"),
          "a round trip: %s", why);
    /* another key's file under this key's name (copied from another machine) */
    char other[4200];
    snprintf(other, sizeof other, "%s/%s", cdir, k2.file);
    CHECK(vt_gemm_cache_store(cdir, &k2, &c, "n", other, sizeof other) == VT_OK, "store k2");
    CHECK(rename(other, path) == 0, "rename");
    CHECK(vt_gemm_cache_load(cdir, &k1, &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_IGNORED &&
              strstr(why, k1.file) && strstr(why, "key differs"),
          "a foreign file is ignored naming it: %s", why);
    /* corrupt: garbage, a truncated file, a broken blocking */
    const char *bad[] = {"\x01\x02garbage", "vitrain-gemm-cache 1\nkey ", NULL};
    for (int i = 0; bad[i]; i++) {
        FILE *fp = fopen(path, "w");
        fputs(bad[i], fp);
        fclose(fp);
        CHECK(vt_gemm_cache_load(cdir, &k1, &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_IGNORED &&
                  strstr(why, k1.file),
              "corrupt file %d ignored: %s", i, why);
    }
    FILE *fp = fopen(path, "w");
    fprintf(fp, "vitrain-gemm-cache 1\nkey %s\nblocking avx512.kc=768\nnote x\n", k1.text);
    fclose(fp);
    CHECK(vt_gemm_cache_load(cdir, &k1, &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_IGNORED &&
              strstr(why, "corrupt blocking"),
          "a partial blocking is ignored: %s", why);
    /* a directory in the file's place */
    remove(path);
    mkdir(path, 0777);
    CHECK(vt_gemm_cache_load(cdir, &k1, &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_IGNORED,
          "a directory is ignored: %s", why);
    test_rm_rf(dir);

    /* the directory: XDG_CACHE_HOME when absolute, else HOME/.cache */
    char *old_x = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    char *old_h = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    char d[512];
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    setenv("HOME", "/h", 1);
    CHECK(vt_gemm_cache_dir(d, sizeof d) == 0 && !strcmp(d, "/x/cache/vitrain"), "XDG_CACHE_HOME: %s", d);
    setenv("XDG_CACHE_HOME", "relative", 1);
    CHECK(vt_gemm_cache_dir(d, sizeof d) == 0 && !strcmp(d, "/h/.cache/vitrain"), "a relative one is ignored: %s", d);
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    CHECK(vt_gemm_cache_dir(d, sizeof d) == -1, "neither: no cache");
    if (old_x) setenv("XDG_CACHE_HOME", old_x, 1);
    if (old_h) setenv("HOME", old_h, 1);
    free(old_x);
    free(old_h);
}

/* The cache key apart per precision and path: an entry of one is a miss for the others. */
static void test_cache_targets(void) {
    char dir[256];
    if (test_tmpdir(dir, sizeof dir, "gemm_cache_targets")) return;
    vt_config cfg = vit_b(32);
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(&cfg, 1, s);
    const vt_tune_target t[4] = {{VT_ISA_AMX, 0, -1}, {VT_ISA_AMX, 1, VT_BF16_FMA}, {VT_ISA_AMX, 1, VT_BF16_AMX},
                                 {VT_ISA_AMX, 1, VT_BF16_DPBF16}};
    vt_gemm_cache_key k[4];
    for (int i = 0; i < 4; i++) {
        vt_gemm_cache_key_make(&k[i], &t[i], s, n, 1);
        char want[64];
        snprintf(want, sizeof want, "products=%s ", vt_tune_target_name(&t[i]));
        CHECK(strstr(k[i].text, want) && strstr(k[i].file, vt_tune_target_name(&t[i])), "key %d names %s: %s", i,
              want, k[i].file);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(k[i].file, k[j].file) && strcmp(k[i].text, k[j].text), "keys %d and %d differ", i, j);
    }
    vt_gemm_context c = *vt_gemm_context_at(0), got;
    c.amx.kc = 512;
    char note[256], why[4400], path[4200];
    CHECK(vt_gemm_cache_store(dir, &k[2], &c, "amx", path, sizeof path) == VT_OK, "store the bf16-amx entry");
    for (int i = 0; i < 4; i++) {
        vt_gemm_cache_found f = vt_gemm_cache_load(dir, &k[i], &got, note, sizeof note, why, sizeof why);
        CHECK(i == 2 ? f == VT_GEMM_CACHE_HIT && got.amx.kc == 512 : f == VT_GEMM_CACHE_MISS,
              "the bf16-amx entry serves %s only (%d)", vt_tune_target_name(&t[i]), (int)f);
    }
    /* the bf16-amx file copied under the dpbf16 key's name: foreign, ignored */
    char other[4400];
    snprintf(other, sizeof other, "%s/%s", dir, k[3].file);
    CHECK(rename(path, other) == 0, "rename");
    CHECK(vt_gemm_cache_load(dir, &k[3], &got, note, sizeof note, why, sizeof why) == VT_GEMM_CACHE_IGNORED &&
              strstr(why, "key differs"),
          "an amx entry under the dpbf16 name is ignored: %s", why);
    test_rm_rf(dir);
}

/* The blocking record's blocking (DIR/gemm_blocking.txt) into *c; 0 when it parses. */
static int read_record(const char *dir, vt_gemm_context *c, char *source, size_t len) {
    char path[640], why[256];
    snprintf(path, sizeof path, "%s/" VT_BLOCKING_RECORD, dir);
    char *text = test_read_file(path, NULL);
    const char *b = text ? strstr(text, "\nblocking ") : NULL, *src = text ? strstr(text, "\nsource ") : NULL;
    int rc = -1;
    if (b && src) {
        char items[1024];
        snprintf(items, sizeof items, "%.*s", (int)strcspn(b + 10, "\n"), b + 10);
        snprintf(source, len, "%.*s", (int)strcspn(src + 8, "\n"), src + 8);
        rc = vt_gemm_blocking_parse(items, c, why, sizeof why);
    }
    free(text);
    return rc;
}

/* Whether a new run of cfg in dir/sub computes with the table's entry (every blocking). */
static int new_run_takes_table(const vt_config *cfg, const char *dir, const char *sub, const vt_gemm_context *table) {
    char run[320];
    snprintf(run, sizeof run, "%s/%s", dir, sub);
    mkdir(run, 0777);
    vt_gemm_context_set(table);
    return vt_blocking_for_run(cfg, run, 0) == VT_OK && !strcmp(vt_gemm_ctx.name, table->name) &&
           !memcmp(&vt_gemm_ctx.avx512, &table->avx512, sizeof table->avx512) &&
           !memcmp(&vt_gemm_ctx.avx512bf16, &table->avx512bf16, sizeof table->avx512bf16) &&
           !memcmp(&vt_gemm_ctx.amx, &table->amx, sizeof table->amx);
}

/* blocking.c's choice for a bf16 run from the cache: its own path's entry only. The
 * tiny model is below the on-the-fly tuning's size, so a miss takes the table's entry. */
static void test_bf16_run_choice(void) {
    char dir[256], cdir[320], run[320], path[4200];
    if (test_tmpdir(dir, sizeof dir, "bf16_choice")) return;
    char *old_x = getenv("XDG_CACHE_HOME") ? strdup(getenv("XDG_CACHE_HOME")) : NULL;
    setenv("XDG_CACHE_HOME", dir, 1);
    snprintf(cdir, sizeof cdir, "%s/vitrain", dir);
    vt_config cfg;
    const char *sets[] = {"train.precision=bf16"};
    CHECK(vt_resolve_file(&cfg, "configs/synthetic_tiny.json", sets, 1) == VT_OK, "config: %s", vt_last_error());
    const vt_gemm_context table = vt_gemm_ctx;
    const vt_tune_target own = vt_tune_target_of(&cfg);
    CHECK(own.bf16 && own.path == vt_kernels_bf16_path() && own.level == vt_k.isa, "the run's target: %s",
          vt_tune_target_name(&own));
    vt_tune_shape s[VT_TUNE_MAX_SHAPES];
    int n = vt_tune_shapes(&cfg, 1, s);
    vt_gemm_cache_key k;
    vt_gemm_cache_key_make(&k, &own, s, n, omp_get_max_threads());
    vt_gemm_context c = table, got;
    c.amx.kc = c.avx512bf16.kc = c.avx512.kc = c.avx2.kc = 64;
    CHECK(vt_gemm_cache_store(cdir, &k, &c, "test", path, sizeof path) == VT_OK, "store: %s", vt_last_error());
    char source[64] = "";

    snprintf(run, sizeof run, "%s/run", dir);
    mkdir(run, 0777);
    CHECK(vt_blocking_for_run(&cfg, run, 0) == VT_OK, "a new bf16 run: %s", vt_last_error());
    CHECK(vt_gemm_ctx.amx.kc == 64 && vt_gemm_ctx.avx512bf16.kc == 64 && strstr(vt_gemm_ctx.name, "/cache"),
          "it computes with its path's cache entry (%s)", vt_gemm_ctx.name);
    CHECK(read_record(run, &got, source, sizeof source) == 0 && got.amx.kc == 64 && !strcmp(source, "cache"),
          "and records it: amx.kc %d, source %s", got.amx.kc, source);

    /* the cache changes: the resumed run keeps its record */
    c.amx.kc = c.avx512bf16.kc = c.avx512.kc = c.avx2.kc = 128;
    CHECK(vt_gemm_cache_store(cdir, &k, &c, "test", path, sizeof path) == VT_OK, "store again");
    vt_gemm_context_set(&table);
    CHECK(vt_blocking_for_run(&cfg, run, 1) == VT_OK && vt_gemm_ctx.amx.kc == 64 && vt_gemm_ctx.avx512bf16.kc == 64,
          "a resumed bf16 run computes with its record whatever the cache holds: amx.kc %d", vt_gemm_ctx.amx.kc);

    /* an fp32 run of the same config does not take the bf16 entry */
    vt_config fp32 = cfg;
    fp32.train.precision = VT_PRECISION_FP32;
    CHECK(new_run_takes_table(&fp32, dir, "fp32", &table), "an fp32 run takes the table's entry, not the bf16 one: %s",
          vt_gemm_ctx.name);

    /* another path (dpbf16 where the level is amx): a miss for the amx entry */
    char why[256];
    const int path0 = vt_kernels_bf16_path();
    if (own.path == VT_BF16_AMX && vt_kernels_set_bf16_path(VT_BF16_DPBF16, why, sizeof why) == 0) {
        CHECK(new_run_takes_table(&cfg, dir, "dpbf16", &table), "a dpbf16 run does not take the amx entry: %s",
              vt_gemm_ctx.name);
        vt_kernels_set_bf16_path((vt_bf16_path)path0, why, sizeof why);
    }
    vt_gemm_context_set(&table);
    if (old_x) setenv("XDG_CACHE_HOME", old_x, 1);
    else unsetenv("XDG_CACHE_HOME");
    free(old_x);
    test_rm_rf(dir);
}

int main(void) {
    if (test_kernels_init()) return 1;
    test_text_round_trip();
    test_shapes();
    test_search_rule();
    test_bf16_search();
    test_cache();
    test_cache_targets();
    test_bf16_run_choice();
    return test_summary();
}
