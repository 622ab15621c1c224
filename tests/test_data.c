/* test_data.c - the IDX and synthetic data pipeline (src/data/).
 *
 * Writes tiny IDX files (raw and gzipped) into a temporary directory and checks: decoded
 * pixels and labels after normalisation against hand-computed values; bilinear resize
 * against hand-computed cases; gray -> 3 channel replication; the train order is a
 * permutation, differs across epochs, repeats for the same seed, and seek reproduces a
 * full pass; the eval split keeps dataset order and its last partial batch; hflip only on
 * the train split; identical batches under 1, 2 and 3 OpenMP threads; every bad-input
 * error with its message; the synthetic generator (determinism, distinct class patterns,
 * a signal a template matcher finds, RGB-D layout). Uses Fashion-MNIST from
 * /usr/share/datasets/fashion-mnist when present, else reports that check as skipped.
 */
#include <ftw.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/dataset.h"
#include "data/formats.h"
#include "data/loader.h"
#include "data/synthetic.h"
#include "data/transform.h"
#include "harness.h"
#include "test_util.h"
#include "data_fixture.h"

/* ---- writing IDX files --------------------------------------------------------------- */

static void put32(uint8_t *b, uint32_t v) {
    b[0] = (uint8_t)(v >> 24); b[1] = (uint8_t)(v >> 16); b[2] = (uint8_t)(v >> 8); b[3] = (uint8_t)v;
}

/* Write header (magic, dims) + payload; keep only the first `keep` bytes if keep >= 0. */
static void write_idx(const char *path, uint32_t magic, int ndims, const uint32_t *dims,
                      const uint8_t *payload, size_t len, int gz, long keep) {
    size_t hlen = 4 + 4 * (size_t)ndims;
    uint8_t *buf = malloc(hlen + len);
    put32(buf, magic);
    for (int d = 0; d < ndims; d++) put32(buf + 4 + 4 * d, dims[d]);
    memcpy(buf + hlen, payload, len);
    size_t total = keep >= 0 ? (size_t)keep : hlen + len;
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (total) gzwrite(f, buf, (unsigned)total);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        if (total) fwrite(buf, 1, total, f);
        fclose(f);
    }
    free(buf);
}

static char *mkpath(char *buf, const char *dir, const char *name) {
    snprintf(buf, 1024, "%s/%s", dir, name);
    return buf;
}

static void make_dir(char *out, const char *name) {
    snprintf(out, 512, "%s/%s", tmpdir, name);
    mkdir(out, 0700);
}

/* A split `split` in dir: n images h x w (row-major bytes), labels lab[i]; p/q need 1024 bytes. */
static void write_split(const char *dir, const char *split, int n, int h, int w,
                        const uint8_t *images, const uint8_t *labels, int gz) {
    char p[1024], name[128];
    uint32_t idims[3] = {(uint32_t)n, (uint32_t)h, (uint32_t)w}, ldims[1] = {(uint32_t)n};
    snprintf(name, sizeof name, "%s-images-idx3-ubyte%s", split, gz ? ".gz" : "");
    write_idx(mkpath(p, dir, name), 0x803, 3, idims, images, (size_t)n * h * w, gz, -1);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte%s", split, gz ? ".gz" : "");
    write_idx(mkpath(p, dir, name), 0x801, 1, ldims, labels, (size_t)n, gz, -1);
}

/* ---- configs ---------------------------------------------------------------------- */

/* An IDX root with data_cfg's explicit loader fields, train.seed 42, batch size 8. */
static void idx_cfg(vt_data_spec *c, const char *root, int img, int chans, int classes) {
    data_cfg(c, VT_DATA_IDX, root, img, chans, classes, 42, 8);
}

static int contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

/* ---- tests ------------------------------------------------------------------------ */

static uint8_t pix_a(int i, int y, int x) { return (uint8_t)((i * 37 + y * 61 + x * 5) % 256); }

static void test_decode(void) {
    enum { N = 5, H = 4, W = 4 };
    uint8_t img[N * H * W], lab[N];
    for (int i = 0; i < N; i++) {
        lab[i] = (uint8_t)(i % 3);
        for (int y = 0; y < H; y++)
            for (int x = 0; x < W; x++) img[(i * H + y) * W + x] = pix_a(i, y, x);
    }
    img[0] = 0;
    img[1] = 255;
    char raw[512], gz[512];
    make_dir(raw, "raw");
    make_dir(gz, "gz");
    write_split(raw, "t10k", N, H, W, img, lab, 0);
    write_split(gz, "t10k", N, H, W, img, lab, 1);

    float out_raw[N * H * W], out_gz[N * H * W];
    const char *dirs[2] = {raw, gz};
    float *outs[2] = {out_raw, out_gz};
    for (int d = 0; d < 2; d++) {
        vt_data_spec c;
        idx_cfg(&c, dirs[d], 4, 1, 3);
        c.data.mean[0] = 0.25;
        c.data.std[0] = 0.5;
        c.eval_batch = N;
        vt_loader *L;
        vt_status s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 4); /* "val" falls back to t10k */
        CHECK(s == VT_OK, "open %s: %s", dirs[d], vt_last_error());
        if (s) continue;
        CHECK(vt_loader_size(L) == N, "size %lld", (long long)vt_loader_size(L));
        CHECK(vt_loader_num_classes(L) == 3, "classes %d", vt_loader_num_classes(L));
        int labels[N], count = -1, soft_used = -1;
        s = vt_loader_next(L, outs[d], labels, NULL, &soft_used, &count);
        CHECK(s == VT_OK && count == N && soft_used == 0, "next: count %d soft %d", count, soft_used);
        for (int i = 0; i < N; i++) CHECK(labels[i] == i % 3, "label %d = %d", i, labels[i]);
        int bad = 0;
        for (int i = 0; i < N * H * W; i++) {
            float want = ((float)img[i] / 255.0f - 0.25f) / 0.5f;
            if (!test_close(outs[d][i], want, 1e-6, 1e-6)) bad++;
        }
        CHECK(bad == 0, "%s: %d pixels differ from (x/255 - 0.25)/0.5", dirs[d], bad);
        CHECK_CLOSE(outs[d][0], -0.5, 1e-7, 0, "pixel 0 -> (0 - 0.25) / 0.5");
        CHECK_CLOSE(outs[d][1], 1.5, 1e-6, 0, "pixel 255 -> (1 - 0.25) / 0.5");
        s = vt_loader_next(L, outs[d], labels, NULL, &soft_used, &count);
        CHECK(s == VT_OK && count == 0, "end of epoch: count %d", count);
        vt_loader_close(L);
    }
    CHECK(memcmp(out_raw, out_gz, sizeof out_raw) == 0, "raw and gzip files decode alike");
}

static void test_resize(void) {
    /* 2x2 -> 4x4, half-pixel centres: 1-D [a, b] -> [a, .75a+.25b, .25a+.75b, b]. */
    const float src[4] = {0, 100, 200, 40};
    const float want[16] = {0, 25, 75, 100,
                            50, 58.75f, 76.25f, 85,
                            150, 126.25f, 78.75f, 55,
                            200, 160, 80, 40};
    float got[16];
    vt_tf_resize(src, 1, 2, 2, got, 4, 4);
    CHECK_ARRAY_CLOSE(got, want, 16, 1e-4, 1e-6, "bilinear 2x2 -> 4x4");
    /* Downsampling 1x4 -> 1x2: taps at 0.5 and 2.5. 1x3 -> 1x2: taps at 0.25 and 1.75. */
    const float row4[4] = {0, 10, 20, 30}, row3[3] = {0, 40, 80};
    float g2[2];
    vt_tf_resize(row4, 1, 1, 4, g2, 1, 2);
    CHECK_CLOSE(g2[0], 5, 1e-5, 0, "4 -> 2 [0]");
    CHECK_CLOSE(g2[1], 25, 1e-5, 0, "4 -> 2 [1]");
    vt_tf_resize(row3, 1, 1, 3, g2, 1, 2);
    CHECK_CLOSE(g2[0], 10, 1e-5, 0, "3 -> 2 [0]");
    CHECK_CLOSE(g2[1], 70, 1e-5, 0, "3 -> 2 [1]");
    /* Two planes resize independently. */
    float two[8] = {0, 100, 200, 40, 0, 0, 0, 0}, gtwo[32];
    vt_tf_resize(two, 2, 2, 2, gtwo, 4, 4);
    CHECK_ARRAY_CLOSE(gtwo, want, 16, 1e-4, 1e-6, "plane 0 of 2");
    float zeros[16] = {0};
    CHECK_ARRAY_CLOSE(gtwo + 16, zeros, 16, 0, 0, "plane 1 of 2 stays 0");

    /* Through the loader: a 2x2 IDX image at img_size 4, x/255, mean 0, std 1. */
    char dir[512];
    make_dir(dir, "resize");
    const uint8_t img[4] = {0, 100, 200, 40}, lab[1] = {1};
    write_split(dir, "train", 1, 2, 2, img, lab, 0);
    vt_data_spec c;
    idx_cfg(&c, dir, 4, 1, 2);
    c.eval_batch = 1;
    strcpy(c.data.val_split, "train");
    vt_loader *L;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 4);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    float out[16], want255[16];
    int labels[1], count, su;
    s = vt_loader_next(L, out, labels, NULL, &su, &count);
    for (int i = 0; i < 16; i++) want255[i] = want[i] / 255.0f;
    CHECK(s == VT_OK && count == 1 && labels[0] == 1, "count %d label %d", count, labels[0]);
    CHECK_ARRAY_CLOSE(out, want255, 16, 1e-6, 1e-5, "loader resize 2x2 -> 4x4");
    vt_loader_close(L);
}

static void test_gray_to_rgb(void) {
    enum { N = 3, H = 4, W = 4 };
    uint8_t img[N * H * W], lab[N] = {0, 1, 0};
    for (int i = 0; i < N * H * W; i++) img[i] = (uint8_t)(i * 7 % 256);
    char dir[512];
    make_dir(dir, "gray3");
    write_split(dir, "train", N, H, W, img, lab, 1);
    vt_data_spec c;
    idx_cfg(&c, dir, 4, 3, 2);
    const double mean[3] = {0.1, 0.2, 0.3}, std[3] = {0.5, 0.25, 2.0};
    for (int ch = 0; ch < 3; ch++) { c.data.mean[ch] = mean[ch]; c.data.std[ch] = std[ch]; }
    strcpy(c.data.val_split, "train");
    c.eval_batch = N;
    vt_loader *L;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 4);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    float out[N * 3 * H * W];
    int labels[N], count, su;
    s = vt_loader_next(L, out, labels, NULL, &su, &count);
    CHECK(s == VT_OK && count == N, "count %d", count);
    int bad = 0;
    for (int i = 0; i < N; i++)
        for (int ch = 0; ch < 3; ch++)
            for (int p = 0; p < H * W; p++) {
                float want = (float)(((double)img[i * H * W + p] / 255.0 - mean[ch]) / std[ch]);
                if (!test_close(out[(i * 3 + ch) * H * W + p], want, 1e-6, 1e-5)) bad++;
            }
    CHECK(bad == 0, "%d of %d replicated+normalised values wrong", bad, N * 3 * H * W);
    vt_loader_close(L);

    /* Normalisation leaves a depth (4th) plane in [0, 1]. */
    float x[8] = {0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.25f, 0.75f};
    const float m[3] = {0.5f, 0.0f, 1.0f}, sd[3] = {1.0f, 0.5f, 0.5f};
    vt_tf_normalize(x, 4, 2, m, sd);
    const float want[8] = {0, 0, 1, 1, -1, -1, 0.25f, 0.75f};
    CHECK_ARRAY_CLOSE(x, want, 8, 1e-7, 0, "normalize 3 colour planes, depth untouched");
}

/* Dataset "order": 50 images 2x2, [[i, 255 - i], [100, 200]], label i % 10. */
enum { ON = 50 };
static char order_dir[512];

static void make_order_data(void) {
    uint8_t img[ON * 4], lab[ON];
    for (int i = 0; i < ON; i++) {
        img[i * 4 + 0] = (uint8_t)i;
        img[i * 4 + 1] = (uint8_t)(255 - i);
        img[i * 4 + 2] = 100;
        img[i * 4 + 3] = 200;
        lab[i] = (uint8_t)(i % 10);
    }
    make_dir(order_dir, "order");
    write_split(order_dir, "train", ON, 2, 2, img, lab, 0);
    write_split(order_dir, "t10k", ON, 2, 2, img, lab, 1);
}

/* Decode the sample index of a 2x2 output (mean 0, std 1); *flipped set if mirrored. */
static int decode_index(const float *o, int *flipped) {
    int a = (int)lroundf(o[0] * 255.0f), b = (int)lroundf(o[1] * 255.0f);
    *flipped = a > b;
    int lo = a < b ? a : b;
    int row_ok = *flipped ? (lroundf(o[2] * 255) == 200 && lroundf(o[3] * 255) == 100)
                          : (lroundf(o[2] * 255) == 100 && lroundf(o[3] * 255) == 200);
    return (a + b == 255 && row_ok) ? lo : -1;
}

/* Read `nb` batches into idx (-1 where image and label disagree); returns samples read. */
static int read_indices(vt_loader *L, int nb, int *idx, int *flips) {
    float out[64 * 4];
    int labels[64];
    int total = 0;
    for (int b = 0; b < nb; b++) {
        int count, su;
        if (vt_loader_next(L, out, labels, NULL, &su, &count) != VT_OK) return -1;
        for (int i = 0; i < count; i++) {
            int f;
            int k = decode_index(out + 4 * i, &f);
            idx[total] = (k >= 0 && labels[i] == k % 10) ? k : -1;
            if (flips) flips[total] = f;
            total++;
        }
    }
    return total;
}

static int is_permutation_prefix(const int *idx, int n, int range) {
    char seen[ON] = {0};
    for (int i = 0; i < n; i++) {
        if (idx[i] < 0 || idx[i] >= range || seen[idx[i]]) return 0;
        seen[idx[i]] = 1;
    }
    return 1;
}

static void test_order(void) {
    vt_data_spec c;
    idx_cfg(&c, order_dir, 2, 1, 10);
    vt_loader *L, *L2, *L3;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, 2);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    CHECK(vt_loader_batches(L, 7) == 7, "train drops the partial batch: %lld",
          (long long)vt_loader_batches(L, 7));
    CHECK(vt_loader_batches(L, 5) == 10, "50 / 5 = %lld", (long long)vt_loader_batches(L, 5));

    int e0[ON], e1[ON], again[ON], other[ON];
    vt_loader_seek(L, 0, 0, 5);
    CHECK(read_indices(L, 10, e0, NULL) == ON, "epoch 0 read");
    CHECK(is_permutation_prefix(e0, ON, ON), "epoch 0 is a permutation of 0..49 (labels match)");
    int count, su, labels[8];
    float out[8 * 4];
    s = vt_loader_next(L, out, labels, NULL, &su, &count);
    CHECK(s == VT_OK && count == 0, "end of epoch 0: count %d", count);
    int ep;
    int64_t bt;
    vt_loader_position(L, &ep, &bt);
    CHECK(ep == 1 && bt == 0, "after the end: epoch %d batch %lld", ep, (long long)bt);
    CHECK(read_indices(L, 10, e1, NULL) == ON, "epoch 1 read");
    CHECK(is_permutation_prefix(e1, ON, ON), "epoch 1 is a permutation");
    CHECK(memcmp(e0, e1, sizeof e0) != 0, "epochs 0 and 1 differ");
    int identity = 1;
    for (int i = 0; i < ON; i++) identity &= e0[i] == i;
    CHECK(!identity, "epoch 0 is shuffled");

    /* Same seed, fresh loader: same orders. Other seed: different. */
    CHECK(vt_loader_open(&L2, &c, VT_SPLIT_TRAIN, 2) == VT_OK, "open 2");
    vt_loader_seek(L2, 1, 0, 5);
    read_indices(L2, 10, again, NULL);
    CHECK(memcmp(again, e1, sizeof e1) == 0, "same seed, same epoch-1 order");
    c.seed = 43;
    CHECK(vt_loader_open(&L3, &c, VT_SPLIT_TRAIN, 2) == VT_OK, "open 3");
    vt_loader_seek(L3, 1, 0, 5);
    read_indices(L3, 10, other, NULL);
    CHECK(memcmp(other, e1, sizeof e1) != 0, "another seed, another order");

    /* seek(1, 3) reproduces batches 3.. of the full pass of epoch 1. */
    vt_loader_seek(L2, 1, 3, 5);
    int tail[ON];
    CHECK(read_indices(L2, 7, tail, NULL) == 35, "tail read");
    CHECK(memcmp(tail, e1 + 15, 35 * sizeof(int)) == 0, "seek(1, 3) matches the full pass");
    /* Back to epoch 0 mid-way, then the batch size 7 drop rule. */
    vt_loader_seek(L2, 0, 9, 5);
    read_indices(L2, 1, tail, NULL);
    CHECK(memcmp(tail, e0 + 45, 5 * sizeof(int)) == 0, "seek(0, 9) after epoch 1");
    int b7[ON];
    vt_loader_seek(L2, 0, 0, 7);
    CHECK(read_indices(L2, 7, b7, NULL) == 49, "7 full batches of 7");
    CHECK(is_permutation_prefix(b7, 49, ON), "49 distinct samples");
    CHECK(memcmp(b7, e0, 49 * sizeof(int)) == 0, "order does not depend on batch size");
    s = vt_loader_next(L2, out, labels, NULL, &su, &count);
    CHECK(s == VT_OK && count == 0, "sample 50 dropped: count %d", count);
    vt_loader_close(L);
    vt_loader_close(L2);
    vt_loader_close(L3);

    /* Eval split: dataset order (t10k via the val fallback), partial last batch kept. */
    c.seed = 42;
    c.data.hflip = 0.5;
    s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 2);
    CHECK(s == VT_OK, "open val: %s", vt_last_error());
    if (s) return;
    CHECK(vt_loader_batches(L, 16) == 4, "ceil(50 / 16) = %lld", (long long)vt_loader_batches(L, 16));
    vt_loader_seek(L, 3, 0, 16);
    int v[64], vf[64];
    CHECK(read_indices(L, 4, v, vf) == ON, "val keeps the partial batch");
    int in_order = 1, any_flip = 0;
    for (int i = 0; i < ON; i++) { in_order &= v[i] == i; any_flip |= vf[i]; }
    CHECK(in_order, "val keeps dataset order");
    CHECK(!any_flip, "no flip on the val split");
    vt_loader_close(L);
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ull;
    return h;
}

/* Checksum of every batch of epochs 0 and 1 (size 5 images, hflip on, bs 8). */
static uint64_t epoch_checksum(const vt_data_spec *c, int img) {
    vt_loader *L;
    if (vt_loader_open(&L, c, VT_SPLIT_TRAIN, img) != VT_OK) return 0;
    size_t per = (size_t)c->in_chans * img * img;
    float *out = malloc(sizeof(float) * 8 * per);
    int labels[8], count, su;
    uint64_t h = 0xcbf29ce484222325ull;
    for (int e = 0; e < 2; e++) {
        vt_loader_seek(L, e, 0, 8);
        while (vt_loader_next(L, out, labels, NULL, &su, &count) == VT_OK && count > 0) {
            h = fnv(h, out, sizeof(float) * per * count);
            h = fnv(h, labels, sizeof(int) * count);
        }
    }
    free(out);
    vt_loader_close(L);
    return h;
}

static void test_hflip_and_threads(void) {
    vt_data_spec c;
    idx_cfg(&c, order_dir, 2, 1, 10);
    c.data.hflip = 0.5;
    vt_loader *L;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, 2);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    int idx0[ON], f0[ON], idx1[ON], f1[ON];
    vt_loader_seek(L, 0, 0, 5);
    read_indices(L, 10, idx0, f0);
    vt_loader_seek(L, 1, 0, 5);
    read_indices(L, 10, idx1, f1);
    CHECK(is_permutation_prefix(idx0, ON, ON), "flipped samples still decode to a permutation");
    int nflip = 0, per_index0[ON], per_index1[ON], differ = 0;
    for (int i = 0; i < ON; i++) {
        nflip += f0[i];
        per_index0[idx0[i]] = f0[i];
        per_index1[idx1[i]] = f1[i];
    }
    for (int i = 0; i < ON; i++) differ += per_index0[i] != per_index1[i];
    CHECK(nflip >= 10 && nflip <= 40, "hflip 0.5 flipped %d of 50", nflip);
    CHECK(differ > 0, "flip decisions change across epochs");
    vt_loader_close(L);

    c.data.hflip = 0;
    s = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, 2);
    vt_loader_seek(L, 0, 0, 5);
    read_indices(L, 10, idx0, f0);
    nflip = 0;
    for (int i = 0; i < ON; i++) nflip += f0[i];
    CHECK(s == VT_OK && nflip == 0, "hflip 0: %d flipped", nflip);
    vt_loader_close(L);

    /* Thread-count independence: resize 2 -> 5, gray -> 3, hflip; and synthetic RGB-D. */
    c.data.hflip = 0.5;
    c.in_chans = 3;
    vt_data_spec syn;
    spec_of_kind(&syn, VT_DATA_SYNTHETIC);
    for (int i = 0; i < 3; i++) { syn.data.mean[i] = 0.5; syn.data.std[i] = 0.25; }
    syn.data.train_size = 24;
    syn.data.hflip = 0.5;
    syn.data.synthetic_seed = 3;
    syn.img_size = 12;
    syn.in_chans = 4;
    syn.num_classes = 4;
    syn.seed = 9;
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    uint64_t h1 = epoch_checksum(&c, 5), s1 = epoch_checksum(&syn, 10);
    for (int t = 2; t <= 3; t++) {
        omp_set_num_threads(t);
        uint64_t ht = epoch_checksum(&c, 5), st = epoch_checksum(&syn, 10);
        CHECK(ht == h1 && h1 != 0, "idx: %d threads checksum %016llx vs 1 thread %016llx", t,
              (unsigned long long)ht, (unsigned long long)h1);
        CHECK(st == s1 && s1 != 0, "synthetic: %d threads checksum %016llx vs 1 thread %016llx", t,
              (unsigned long long)st, (unsigned long long)s1);
    }
    omp_set_num_threads(saved);
    c.seed = 1;
    CHECK(epoch_checksum(&c, 5) != h1, "the checksum sees the seed (it can fail)");
}

/* Open dir's val split (t10k fallback) or train split and expect an error containing
 * every string in want[] (NULL-terminated). */
static void expect_error(const char *what, vt_data_spec *c, vt_split split, const char *const *want) {
    vt_loader *L = NULL;
    vt_clear_error();
    vt_status s = vt_loader_open(&L, c, split, c->img_size);
    CHECK(s != VT_OK && L == NULL, "%s: open should fail", what);
    if (s == VT_OK) { vt_loader_close(L); return; }
    const char *msg = vt_last_error();
    for (int i = 0; want[i]; i++)
        CHECK(contains(msg, want[i]), "%s: message \"%s\" lacks \"%s\"", what, msg, want[i]);
}

static void test_bad_inputs(void) {
    enum { N = 5, H = 4, W = 4 };
    uint8_t img[N * H * W], lab[N] = {0, 1, 2, 0, 1};
    for (int i = 0; i < N * H * W; i++) img[i] = (uint8_t)i;
    uint32_t idims[3] = {N, H, W}, ldims[1] = {N}, ldims4[1] = {N - 1};
    char dir[512], p[1024], q[1024], msg[2200];
    vt_data_spec c;

    /* missing root */
    snprintf(p, sizeof p, "%s/no-such-dir", tmpdir);
    idx_cfg(&c, p, 4, 1, 3);
    expect_error("missing root", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){"data.root", p, "no such directory", NULL});
    /* an empty root is resolve's rule (the loader asserts it) */
    vt_config rc;
    CHECK(vt_resolve_json(&rc, "{\"data\": {\"kind\": \"idx\", \"root\": \"\"}}", "t.json") == VT_ERR_USAGE &&
              contains(vt_last_error(), "t.json: data.root is empty; data.kind = idx"),
          "empty root: %s", vt_last_error());

    /* missing split files: the hint lists the splits present */
    make_dir(dir, "bad_split");
    write_split(dir, "train", N, H, W, img, lab, 1);
    idx_cfg(&c, dir, 4, 1, 3);
    strcpy(c.data.train_split, "foo");
    expect_error("missing split", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){"data.train_split='foo'", "foo-images-idx3-ubyte",
                                       "splits found", "train", NULL});
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("missing val and t10k", &c, VT_SPLIT_VAL,
                 (const char *const[]){"data.val_split='val'", "val-images-idx3-ubyte", NULL});
    make_dir(dir, "no_labels");
    write_idx(mkpath(p, dir, "train-images-idx3-ubyte"), 0x803, 3, idims, img, sizeof img, 0, -1);
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("missing labels", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){"train-labels-idx1-ubyte", "data.train_split", NULL});

    /* wrong magic */
    make_dir(dir, "magic");
    write_split(dir, "train", N, H, W, img, lab, 0);
    write_idx(mkpath(p, dir, "train-images-idx3-ubyte"), 0x804, 3, idims, img, sizeof img, 0, -1);
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("wrong magic", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){p, "wrong magic", "expected 0x00000803", "found 0x00000804",
                                       NULL});
    write_split(dir, "train", N, H, W, img, lab, 0);
    write_idx(mkpath(q, dir, "train-labels-idx1-ubyte"), 0x803, 1, ldims, lab, N, 0, -1);
    expect_error("labels magic", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){q, "expected 0x00000801", "found 0x00000803", NULL});

    /* truncated images file: 16-byte header + 80 bytes expected, 86 found; raw and gzip */
    for (int gz = 0; gz < 2; gz++) {
        make_dir(dir, gz ? "trunc_gz" : "trunc");
        write_split(dir, "train", N, H, W, img, lab, gz);
        write_idx(mkpath(p, dir, gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte"),
                  0x803, 3, idims, img, sizeof img, gz, 86);
        idx_cfg(&c, dir, 4, 1, 3);
        expect_error(gz ? "truncated gz" : "truncated", &c, VT_SPLIT_TRAIN,
                     (const char *const[]){p, "truncated", "expected 96", "found 86", NULL});
    }
    /* longer than the header says */
    make_dir(dir, "long");
    write_split(dir, "train", N, H, W, img, lab, 0);
    uint32_t fewer[3] = {N, H, W - 1};
    write_idx(mkpath(p, dir, "train-images-idx3-ubyte"), 0x803, 3, fewer, img, sizeof img, 0, -1);
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("too long", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){p, "longer than its header", "expected 76", "found 96", NULL});

    /* A header claiming 50000 images of 256 x 256 (3.3 GB) in a 96-byte file, raw and
     * gzip: rejected from the file size before any allocation (under an address-space
     * limit of 1 GB above the current size outside sanitizer builds, so an allocation of
     * the claimed size would fail with "out of memory" instead). */
    uint32_t huge[3] = {50000, 256, 256};
#if !defined(__SANITIZE_ADDRESS__)
    struct rlimit old_as;
    int capped = test_cap_address_space(1ULL << 30, &old_as) == 0;
#endif
    for (int gz = 0; gz < 2; gz++) {
        make_dir(dir, gz ? "huge_gz" : "huge");
        write_split(dir, "train", N, H, W, img, lab, gz);
        write_idx(mkpath(p, dir, gz ? "train-images-idx3-ubyte.gz" : "train-images-idx3-ubyte"),
                  0x803, 3, huge, img, sizeof img, gz, -1);
        idx_cfg(&c, dir, 4, 1, 3);
        if (gz)
            expect_error("huge header, gzip", &c, VT_SPLIT_TRAIN,
                         (const char *const[]){p, "declares 3276800000 data bytes", "can hold", NULL});
        else
            expect_error("huge header", &c, VT_SPLIT_TRAIN,
                         (const char *const[]){p, "truncated", "expected 3276800016", "found 96", NULL});
    }
#if !defined(__SANITIZE_ADDRESS__)
    if (capped) setrlimit(RLIMIT_AS, &old_as);
#endif
    /* Gzip payloads over the first 1 MB buffer: 2000 images of 28 x 28 noise load whole
     * (the buffer grows), and the same header over 100 images is truncated. */
    {
        enum { BN = 2000, BS = 28 };
        uint8_t *big = malloc((size_t)BN * BS * BS), blab[BN];
        uint64_t r = 7;
        for (size_t i = 0; i < (size_t)BN * BS * BS; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            big[i] = (uint8_t)(r >> 56);
        }
        for (int i = 0; i < BN; i++) blab[i] = (uint8_t)(i % 3);
        make_dir(dir, "big_gz");
        write_split(dir, "train", BN, BS, BS, big, blab, 1);
        idx_cfg(&c, dir, BS, 1, 3);
        vt_loader *L = NULL;
        vt_status bs = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, BS);
        CHECK(bs == VT_OK && vt_loader_size(L) == BN, "1.5 MB gzip payload: %s", vt_last_error());
        if (bs == VT_OK) vt_loader_close(L);
        uint32_t bdims[3] = {BN, BS, BS};
        write_idx(mkpath(p, dir, "train-images-idx3-ubyte.gz"), 0x803, 3, bdims, big,
                  (size_t)100 * BS * BS, 1, -1);
        expect_error("truncated big gzip", &c, VT_SPLIT_TRAIN,
                     (const char *const[]){p, "truncated", "expected 1568016", "found 78416", NULL});
        free(big);
    }

    /* count mismatch */
    make_dir(dir, "count");
    write_split(dir, "train", N, H, W, img, lab, 0);
    write_idx(mkpath(q, dir, "train-labels-idx1-ubyte"), 0x801, 1, ldims4, lab, N - 1, 0, -1);
    mkpath(p, dir, "train-images-idx3-ubyte");
    snprintf(msg, sizeof msg, "%s has 5 images but %s has 4 labels", p, q);
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("count mismatch", &c, VT_SPLIT_TRAIN, (const char *const[]){msg, NULL});

    /* label out of range */
    make_dir(dir, "label");
    uint8_t badlab[N] = {0, 1, 2, 7, 1};
    write_split(dir, "train", N, H, W, img, badlab, 1);
    mkpath(q, dir, "train-labels-idx1-ubyte.gz");
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("label range", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){q, "label 7 of sample 3", "model.num_classes = 3", NULL});

    /* zero-byte file */
    make_dir(dir, "empty");
    write_split(dir, "train", N, H, W, img, lab, 0);
    write_idx(mkpath(p, dir, "train-images-idx3-ubyte"), 0x803, 3, idims, img, 0, 0, 0);
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("zero bytes", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){p, "empty (0 bytes)", NULL});

    /* channel counts IDX cannot give */
    make_dir(dir, "chans");
    write_split(dir, "train", N, H, W, img, lab, 0);
    idx_cfg(&c, dir, 4, 4, 3);
    expect_error("in_chans 4", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){"model.in_chans = 4", "1-channel", NULL});

    /* a FIFO in a file's place is named as what it is, without waiting for a writer */
    make_dir(dir, "fifo");
    write_split(dir, "train", N, H, W, img, lab, 0);
    unlink(mkpath(p, dir, "train-images-idx3-ubyte"));
    CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
    idx_cfg(&c, dir, 4, 1, 3);
    expect_error("images FIFO", &c, VT_SPLIT_TRAIN,
                 (const char *const[]){p, "the IDX images file is a FIFO (named pipe), not a regular "
                                       "file", NULL});
    CHECK(!contains(vt_last_error(), "neither"), "FIFO reported as missing: %s", vt_last_error());
}

static void syn_cfg(vt_data_spec *c, int chans) {
    spec_of_kind(c, VT_DATA_SYNTHETIC);
    c->data.hflip = 0;
    for (int i = 0; i < 3; i++) { c->data.mean[i] = 0.5; c->data.std[i] = 0.25; }
    c->data.train_size = 40;
    c->data.val_size = 20;
    c->data.synthetic_seed = 7;
    c->img_size = 16;
    c->in_chans = chans;
    c->num_classes = 5;
    c->seed = 1;
    c->train_batch = 8;
}

static void test_synthetic(void) {
    enum { S = 16, P = 12, K = 5 }; /* P = 3S / 4, the pattern size */
    vt_data_spec c;
    syn_cfg(&c, 3);
    vt_dataset *tr, *tr2, *va, *d4;
    CHECK(vt_dataset_synthetic.open(&tr, &c, VT_SPLIT_TRAIN) == VT_OK, "open train");
    CHECK(vt_dataset_synthetic.open(&tr2, &c, VT_SPLIT_TRAIN) == VT_OK, "open train again");
    CHECK(vt_dataset_synthetic.open(&va, &c, VT_SPLIT_VAL) == VT_OK, "open val");
    CHECK(tr->size == 40 && va->size == 20 && tr->num_classes == K && tr->channels == 3 &&
          tr->height == S && tr->width == S, "sizes %lld %lld classes %d", (long long)tr->size,
          (long long)va->size, tr->num_classes);
    vt_sample a = {0}, b = {0};
    int la, lb;
    tr->ops->read(tr, 3, &a, &la);
    tr2->ops->read(tr2, 3, &b, &lb);
    CHECK(la == lb && memcmp(a.pixels, b.pixels, S * S * 3) == 0, "same index, same sample");
    va->ops->read(va, 3, &b, &lb);
    CHECK(memcmp(a.pixels, b.pixels, S * S * 3) != 0, "train and val sample 3 differ");

    /* Class patterns: zero mean, unit std, pairwise distinct. */
    float pat[K][3 * P * P];
    for (int k = 0; k < K; k++)
        for (int ch = 0; ch < 3; ch++) vt_synthetic_pattern(7, k, ch, P, pat[k] + ch * P * P);
    double mean = 0, sq = 0;
    for (int i = 0; i < P * P; i++) { mean += pat[0][i]; sq += pat[0][i] * pat[0][i]; }
    CHECK_CLOSE(mean / (P * P), 0, 1e-5, 0, "pattern mean");
    CHECK_CLOSE(sq / (P * P), 1, 1e-4, 0, "pattern variance");
    double max_corr = -1;
    for (int i = 0; i < K; i++)
        for (int j = i + 1; j < K; j++) {
            double d = 0;
            for (int t = 0; t < 3 * P * P; t++) d += pat[i][t] * pat[j][t];
            d /= 3 * P * P;
            if (d > max_corr) max_corr = d;
        }
    CHECK(max_corr < 0.8, "class patterns too alike: correlation %.3f", max_corr);

    /* Labels in range and balanced; a template matcher over offsets recovers the class. */
    int hits = 0, counts[K] = {0}, in_range = 1;
    for (int64_t i = 0; i < tr->size; i++) {
        int l;
        tr->ops->read(tr, i, &a, &l);
        in_range &= l >= 0 && l < K;
        if (l < 0 || l >= K) continue;
        counts[l]++;
        int best = -1;
        double best_score = -1e30;
        for (int k = 0; k < K; k++)
            for (int oy = 0; oy <= S - P; oy++)
                for (int ox = 0; ox <= S - P; ox++) {
                    double sc = 0;
                    for (int ch = 0; ch < 3; ch++)
                        for (int y = 0; y < P; y++)
                            for (int x = 0; x < P; x++)
                                sc += pat[k][(ch * P + y) * P + x] *
                                      a.pixels[((oy + y) * S + ox + x) * 3 + ch];
                    if (sc > best_score) { best_score = sc; best = k; }
                }
        hits += best == l;
    }
    CHECK(in_range, "labels in 0..%d", K - 1);
    CHECK(counts[0] == 8 && counts[4] == 8, "balanced classes: %d %d", counts[0], counts[4]);
    CHECK(hits >= 36, "template matching finds the class in %d of 40 samples", hits);

    /* RGB-D: the RGB part and label equal the in_chans = 3 sample; depth varies. */
    vt_data_spec c4;
    syn_cfg(&c4, 4);
    CHECK(vt_dataset_synthetic.open(&d4, &c4, VT_SPLIT_TRAIN) == VT_OK, "open rgbd");
    tr->ops->read(tr, 5, &a, &la);
    d4->ops->read(d4, 5, &b, &lb);
    int rgb_same = 1, dmin = 255, dmax = 0;
    for (int p = 0; p < S * S; p++) {
        for (int ch = 0; ch < 3; ch++) rgb_same &= a.pixels[p * 3 + ch] == b.pixels[p * 4 + ch];
        int d = b.pixels[p * 4 + 3];
        if (d < dmin) dmin = d;
        if (d > dmax) dmax = d;
    }
    CHECK(d4->channels == 4 && b.c == 4 && la == lb && rgb_same, "RGB-D keeps the RGB sample");
    CHECK(dmax - dmin >= 10, "depth map varies: %d..%d", dmin, dmax);
    vt_sample_free(&a);
    vt_sample_free(&b);
    tr->ops->close(tr);
    tr2->ops->close(tr2);
    va->ops->close(va);
    d4->ops->close(d4);

    /* Through the loader at another resolution: shape, labels, normalised range. */
    vt_loader *L;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 8);
    CHECK(s == VT_OK, "open loader: %s", vt_last_error());
    if (s) return;
    CHECK(vt_loader_num_classes(L) == K && vt_loader_size(L) == 20, "loader classes/size");
    float out[8 * 3 * 64];
    int labels[8], count, su, ok = 1;
    vt_loader_seek(L, 0, 2, 8);
    s = vt_loader_next(L, out, labels, NULL, &su, &count);
    CHECK(s == VT_OK && count == 4, "last val batch has 4: %d", count);
    for (int i = 0; i < count; i++) ok &= labels[i] == (16 + i) % K;
    for (int i = 0; i < count * 3 * 64; i++) ok &= out[i] >= -2.0f && out[i] <= 2.0f;
    CHECK(ok, "labels are index mod K and values in [(0-0.5)/0.25, (1-0.5)/0.25]");
    vt_loader_close(L);
}

static void test_fashion_mnist(void) {
    const char *root = "/usr/share/datasets/fashion-mnist";
    char p[1024];
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", root);
    if (access(p, R_OK) != 0) {
        printf("skipped: Fashion-MNIST not found at %s\n", root);
        skipped++;
        return;
    }
    vt_data_spec c;
    idx_cfg(&c, root, 28, 1, 10);
    c.eval_batch = 4;
    vt_loader *L;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 28);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    CHECK(vt_loader_size(L) == 10000, "t10k has %lld", (long long)vt_loader_size(L));
    float out[4 * 28 * 28];
    int labels[4], count, su;
    s = vt_loader_next(L, out, labels, NULL, &su, &count);
    CHECK(s == VT_OK && count == 4 && labels[0] == 9 && labels[1] == 2 && labels[2] == 1 &&
          labels[3] == 1, "first t10k labels %d %d %d %d", labels[0], labels[1], labels[2],
          labels[3]);
    CHECK(out[0] == 0.0f, "corner pixel of the first image is background: %g", out[0]);
    vt_loader_close(L);
}

int main(void) {
    if (data_tmpdir_create("test_data") != 0) return 1;
    test_decode();
    test_resize();
    test_gray_to_rgb();
    make_order_data();
    test_order();
    test_hflip_and_threads();
    test_bad_inputs();
    test_synthetic();
    test_fashion_mnist();
    data_tmpdir_remove();
    return data_summary();
}
