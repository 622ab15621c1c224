/* test_eval.c - evaluation modes of src/eval.c on a tiny untrained ViT and synthetic data:
 *   - the patch permutation is a permutation, fixed per (seed, sample), different across
 *     samples and seeds; vt_eval_permute_patches moves every P x P block as it says
 *   - patch shuffle leaves the logits of a no-PE model invariant up to float rounding
 *     (CLS and mean pooling), and changes those of learned-APE, sincos-APE and RoPE models
 *   - shuffled evaluation does not depend on the evaluation batch size
 *   - evaluation at other image sizes (smaller and larger grids) runs for every PE kind,
 *     gives finite logits for every val sample, and the own-size evaluation at another
 *     batch size equals the first one
 *   - a size that is not a multiple of the patch is a usage error (resolve.h's rule); a
 *     batch that does not fit in memory an error naming its size
 *   - eval.max_samples N evaluates exactly the first N samples (equal to a split of N,
 *     also when N ends inside a loader batch); 0 or N beyond the split evaluate it all
 * Accuracy at another size on a trained model is covered by tests/e2e_reproduce.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "harness.h"
#include "test_util.h"

#include "config.h"
#include "eval.h"
#include "kernels.h"
#include "pe/kinds.h"
#include "resolve.h"
#include "vit.h"
#include "vit_fixture.h"

static const char *BASE =
    "{\"model\": {\"width\": 32, \"depth\": 2, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4,"
    " \"img_size\": 16, \"in_chans\": 1, \"num_classes\": 4},"
    " \"data\": {\"kind\": \"synthetic\", \"train_size\": 64, \"val_size\": 24, \"synthetic_seed\": 3,"
    " \"mean\": [0.5], \"std\": [0.25], \"hflip\": 0},"
    " \"train\": {\"batch_size\": 8, \"seed\": 5}}";

static int make_model(vt_config *cfg, vt_vit *m, const char *const *sets, int n_sets) {
    vt_status st = vt_resolve_json(cfg, BASE, "test_eval");
    for (int i = 0; st == VT_OK && i < n_sets; i++) st = vt_config_set(cfg, sets[i]);
    if (st == VT_OK) st = vt_resolve(cfg);
    if (st == VT_OK) st = vit_init_config(m, cfg, 11);
    CHECK(st == VT_OK, "config/model: %s", st == VT_OK ? "" : vt_last_error());
    return st == VT_OK;
}

/* Logits (n * K, malloc'd) of m over the val split at size S, shuffled or not. */
static float *eval_logits(const vt_config *cfg, vt_vit *m, int S, int shuffle, uint64_t seed,
                          int batch, vt_eval_result *res) {
    vt_config c = *cfg;
    c.eval.batch_size = batch;
    vt_evaluator ev;
    vt_status st = vt_eval_open(&ev, &c, S);
    CHECK(st == VT_OK, "eval_open at %d: %s", S, st == VT_OK ? "" : vt_last_error());
    if (st != VT_OK) return NULL;
    ev.shuffle = shuffle;
    ev.shuffle_seed = seed;
    float *lg = malloc((size_t)ev.n * ev.num_classes * sizeof(float));
    st = vt_eval_run(&ev, m, lg, res);
    CHECK(st == VT_OK, "eval_run at %d: %s", S, st == VT_OK ? "" : vt_last_error());
    vt_eval_close(&ev);
    if (st != VT_OK) { free(lg); return NULL; }
    return lg;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

static double max_abs(const float *a, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i]));
    return d;
}

static void test_permutation(void) {
    enum { N = 49 };
    int p[N], q[N], r[N], s[N], seen[N];
    vt_eval_patch_permutation(p, N, 7, 3);
    vt_eval_patch_permutation(q, N, 7, 3);
    vt_eval_patch_permutation(r, N, 7, 4);
    vt_eval_patch_permutation(s, N, 8, 3);
    memset(seen, 0, sizeof seen);
    int ok = 1, fixed = 0;
    for (int i = 0; i < N; i++) {
        if (p[i] < 0 || p[i] >= N || seen[p[i]]++) ok = 0;
        fixed += p[i] == i;
    }
    CHECK(ok, "perm is a permutation of 0..%d", N - 1);
    CHECK(fixed < N / 4, "perm moves most cells (%d of %d fixed)", fixed, N);
    CHECK(memcmp(p, q, sizeof p) == 0, "same (seed, index): same permutation");
    CHECK(memcmp(p, r, sizeof p) != 0, "another sample: another permutation");
    CHECK(memcmp(p, s, sizeof p) != 0, "another seed: another permutation");

    /* 2 channels, 12x12, P = 4: pixel value encodes (channel, cell, offset in cell). */
    enum { C = 2, S = 12, P = 4, G = 3 };
    float src[C * S * S], dst[C * S * S];
    for (int c = 0; c < C; c++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++)
                src[(c * S + y) * S + x] = (float)(c * 10000 + ((y / P) * G + x / P) * 100 + (y % P) * P + x % P);
    int perm[G * G];
    vt_eval_patch_permutation(perm, G * G, 1, 0);
    vt_eval_permute_patches(dst, src, perm, C, S, P);
    int bad = 0;
    for (int c = 0; c < C; c++)
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                int g = (y / P) * G + x / P;
                float want = (float)(c * 10000 + perm[g] * 100 + (y % P) * P + x % P);
                bad += dst[(c * S + y) * S + x] != want;
            }
    CHECK(bad == 0, "permute_patches: %d pixels not from the permuted source cell", bad);
}

/* kind: pe.kind; pool; expect_invariant: logits equal under shuffle. */
static void check_shuffle(const char *kind, const char *ape, const char *pool, int expect_invariant) {
    char k[64], a[64], pl[64];
    snprintf(k, sizeof k, "pe.kind=%s", kind);
    snprintf(a, sizeof a, "pe.ape=%s", ape);
    snprintf(pl, sizeof pl, "model.pool=%s", pool);
    const char *sets[3] = {k, a, pl};
    vt_config cfg;
    vt_vit m;
    if (!make_model(&cfg, &m, sets, 3)) return;
    vt_eval_result r0, r1, r2;
    float *plain = eval_logits(&cfg, &m, 16, 0, 0, 8, &r0);
    float *shuf = eval_logits(&cfg, &m, 16, 1, 42, 8, &r1);
    float *shuf5 = eval_logits(&cfg, &m, 16, 1, 42, 5, &r2);
    if (plain && shuf && shuf5) {
        size_t n = (size_t)r0.n * 4;
        double scale = max_abs(plain, n), d = max_abs_diff(plain, shuf, n);
        CHECK(scale > 1e-3, "%s/%s/%s: logits not degenerate (max |logit| %g)", kind, ape, pool, scale);
        if (expect_invariant)
            CHECK(d <= 1e-5 * fmax(scale, 1.0), "%s/%s/%s: shuffle must leave logits invariant, "
                  "max diff %g (max |logit| %g)", kind, ape, pool, d, scale);
        else
            CHECK(d > 1e-3 * scale, "%s/%s/%s: shuffle must change the logits, max diff %g "
                  "(max |logit| %g)", kind, ape, pool, d, scale);
        CHECK(max_abs_diff(shuf, shuf5, n) <= 1e-5 * fmax(scale, 1.0),
              "%s/%s/%s: shuffled logits independent of the batch size", kind, ape, pool);
        CHECK(r0.n == 24 && r1.n == 24, "24 val samples evaluated (%lld, %lld)", (long long)r0.n,
              (long long)r1.n);
    }
    free(plain);
    free(shuf);
    free(shuf5);
    vt_vit_free(&m);
}

static void test_shuffle(void) {
    check_shuffle("none", "none", "token", 1);
    check_shuffle("none", "none", "avg", 1);
    check_shuffle("ape", "learned", "token", 0);
    check_shuffle("ape", "sincos", "token", 0);
    check_shuffle("rope_mixed", "none", "token", 0);
    check_shuffle("liere", "none", "token", 0);
}

static void test_resolutions(void) {
    const char *kinds[VT_PE_KIND_COUNT];
    for (int i = 0; i < VT_PE_KIND_COUNT; i++) kinds[i] = vt_pe_kind_name((vt_pe_kind)i);
    for (size_t i = 0; i < VT_PE_KIND_COUNT; i++) { /* every kind of the registry */
        char k[64];
        snprintf(k, sizeof k, "pe.kind=%s", kinds[i]);
        const char *sets[1] = {k};
        vt_config cfg;
        vt_vit m;
        if (!make_model(&cfg, &m, sets, 1)) continue;
        vt_eval_result own, own5, r;
        float *a = eval_logits(&cfg, &m, 16, 0, 0, 8, &own);
        float *b = eval_logits(&cfg, &m, 16, 0, 0, 5, &own5);
        if (a && b) {
            CHECK(max_abs_diff(a, b, (size_t)own.n * 4) <= 1e-5 * fmax(max_abs(a, (size_t)own.n * 4), 1.0),
                  "%s: own-size logits independent of the batch size", kinds[i]);
            CHECK(own.top1 == own5.top1 && own.img_size == 16, "%s: own-size top-1 %g vs %g", kinds[i],
                  own.top1, own5.top1);
        }
        static const int sizes[] = {8, 12, 24, 32};
        for (int s = 0; s < 4; s++) {
            float *lg = eval_logits(&cfg, &m, sizes[s], 0, 0, 8, &r);
            if (!lg) continue;
            int finite = 1;
            for (int64_t j = 0; j < r.n * 4; j++) finite &= isfinite(lg[j]) != 0;
            CHECK(finite && r.n == 24 && r.img_size == sizes[s] && r.top1 >= 0 && r.top1 <= 100 &&
                  r.top5 == 100.0, "%s at %d: n %lld, top-1 %g, top-5 %g, finite %d", kinds[i], sizes[s],
                  (long long)r.n, r.top1, r.top5, finite);
            if (a) CHECK(max_abs_diff(a, lg, (size_t)r.n * 4) > 0, "%s at %d: logits differ from 16px",
                         kinds[i], sizes[s]);
            free(lg);
        }
        free(a);
        free(b);
        vt_vit_free(&m);
    }
    /* The rule `vitrain eval --resolutions` checks sizes with (vt_eval_open asserts it). */
    vt_status st = vt_resolve_image_size(18, 4, "--resolutions: size");
    CHECK(st == VT_ERR_USAGE &&
              strstr(vt_last_error(), "--resolutions: size = 18 is not a multiple of model.patch_size = 4"),
          "size 18 with patch 4 is a usage error naming both: %s", vt_last_error());
    CHECK(vt_resolve_image_size(16, 4, "size") == VT_OK && vt_resolve_image_size(0, 4, "size") == VT_ERR_USAGE,
          "16 is a size for patch 4, 0 is not");
}

/* An evaluation batch that does not fit in memory (16384 px, 8 images, 8 GiB) is an error
 * naming the batch, the size and the memory; the message was printed from the cleared
 * evaluator ("batch of 0 images"). The address space is limited to 2 GiB above the
 * current size so the allocation fails (not in sanitizer builds, whose allocator reserves
 * more). */
static void test_out_of_memory(void) {
#if !defined(__SANITIZE_ADDRESS__)
    vt_config cfg;
    vt_status st = vt_resolve_json(&cfg, BASE, "test_eval");
    CHECK(st == VT_OK, "config: %s", vt_last_error());
    struct rlimit old;
    CHECK(test_cap_address_space(2ULL << 30, &old) == 0, "address-space limit");
    vt_evaluator ev;
    if (st == VT_OK) st = vt_eval_open(&ev, &cfg, 16384);
    setrlimit(RLIMIT_AS, &old);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "batch of 8 images at 16384x16384") &&
              strstr(vt_last_error(), "8.0 GiB") && strstr(vt_last_error(), "eval.batch_size"),
          "16384 px batch: %s", vt_last_error());
    if (st == VT_OK) vt_eval_close(&ev);
#endif
}

static void test_max_samples(void) {
    static const char *sets[1] = {"pe.kind=rope_mixed"};
    vt_config cfg;
    vt_vit m;
    if (!make_model(&cfg, &m, sets, 1)) return;
    vt_eval_result all, lim, ref;
    float *a = eval_logits(&cfg, &m, 20, 0, 0, 8, &all);
    vt_config c = cfg;
    c.eval.max_samples = 10; /* batches of 8: the second loader batch is cut after 2 */
    float *l = eval_logits(&c, &m, 20, 0, 0, 8, &lim);
    vt_config s = cfg;
    s.data.val_size = 10;    /* synthetic sample i does not depend on the split size */
    float *r = eval_logits(&s, &m, 20, 0, 0, 8, &ref);
    if (a && l && r) {
        CHECK(all.n == 24 && lim.n == 10 && ref.n == 10, "n: all %lld, max_samples 10 -> %lld, split of 10 %lld",
              (long long)all.n, (long long)lim.n, (long long)ref.n);
        CHECK(memcmp(l, r, 10 * 4 * sizeof(float)) == 0 && lim.top1 == ref.top1 && lim.top5 == ref.top5 &&
              lim.loss == ref.loss, "max_samples 10 equals a split of 10: top-1 %g vs %g, loss %.9g vs %.9g",
              lim.top1, ref.top1, lim.loss, ref.loss);
        CHECK(max_abs_diff(a, l, 8 * 4) == 0 && max_abs_diff(a, l, 10 * 4) <= 1e-5 * fmax(max_abs(a, 40), 1.0),
              "and its logits are the first 10 rows of the full evaluation (the first batch bitwise)");
    }
    free(a);
    free(l);
    free(r);
    for (int i = 0; i < 2; i++) {
        c.eval.max_samples = i ? 24 : 100;
        a = eval_logits(&c, &m, 16, 0, 0, 8, &lim);
        CHECK(a && lim.n == 24, "max_samples %d on a split of 24 evaluates %lld", c.eval.max_samples,
              (long long)lim.n);
        free(a);
    }
    vt_vit_free(&m);
}

int main(void) {
    if (test_kernels_init()) return 1;
    test_permutation();
    test_shuffle();
    test_resolutions();
    test_out_of_memory();
    test_max_samples();
    return test_summary();
}
