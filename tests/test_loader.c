/* test_loader.c - the prefetching loader: determinism, seek, shards, errors, eval crop.
 *
 * A small in-memory dataset (variable-size RGB images whose pixels and label derive from
 * the index; optionally failing at one index) is opened through vt_loader_open_dataset
 * with the full DeiT training pipeline on (RandomResizedCrop, flip, RandAugment, random
 * erasing, mixup + cutmix). Checks: batches are bitwise identical for the synchronous path
 * at 1 and 2 OpenMP threads and for 1, 2 and 3 prefetch workers, over two epochs; seek
 * with prefetch (backwards, forwards, to the next epoch) gives the reference batches; rank
 * shards partition the split (eval and train) and follow the global order, and with mixup
 * + cutmix a shard's batches are one process's samples bit for bit; a worker's read
 * error reaches vt_loader_next with its message and position, also on the synchronous
 * path, and a seek recovers; the eval resize + center crop matches the transforms by hand;
 * the config path (data.kind synthetic, default workers) equals the synchronous path;
 * no allocation happens per batch once warmed up (malloc/calloc/realloc counted by
 * interposition; skipped in sanitizer builds); a split of 10^9 samples needs no order
 * memory, and vt_rng_permute is a bijection.
 */
#include <omp.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "data/augment.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/transform.h"
#include "harness.h"
#include "test_util.h"
#include "resolve.h"
#include "rng.h"

/* Allocation counting for the steady-state check: malloc, calloc and realloc are
 * interposed and forwarded to glibc. Sanitizer builds bring their own allocator, so the
 * check is compiled out there. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
static atomic_long alloc_count;
void *malloc(size_t n) {
    atomic_fetch_add(&alloc_count, 1);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
    atomic_fetch_add(&alloc_count, 1);
    return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
    atomic_fetch_add(&alloc_count, 1);
    return __libc_realloc(p, n);
}
#endif

typedef struct {
    int64_t fail_at;   /* index whose read fails; -1 = none */
    int fixed;         /* 1: every image 12 x 12 */
} mem_impl;

static void mem_dims(const mem_impl *m, int64_t i, int *h, int *w) {
    *h = m->fixed ? 12 : 14 + (int)(i % 5) * 3;
    *w = m->fixed ? 12 : 18 + (int)(i % 7) * 2;
}

static uint8_t mem_pixel(int64_t i, int y, int x, int ch) {
    return (uint8_t)((i * 53 + y * 29 + x * 17 + ch * 71 + (x * y) % 13) % 256);
}

static vt_status mem_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    const mem_impl *m = ds->impl;
    if (index == m->fail_at)
        return vt_fail(VT_ERR_RUNTIME, "memtest: sample %lld is corrupt", (long long)index);
    int h, w;
    mem_dims(m, index, &h, &w);
    vt_status st = vt_sample_reserve(s, (size_t)h * w * 3);
    if (st) return st;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < 3; ch++) s->pixels[(y * w + x) * 3 + ch] = mem_pixel(index, y, x, ch);
    s->h = h;
    s->w = w;
    s->c = 3;
    *label = (int)(index % ds->num_classes);
    return VT_OK;
}

static void mem_close(vt_dataset *ds) {
    free(ds->impl);
    free(ds);
}

static const vt_dataset_ops mem_ops = { .kind = "memtest", .read = mem_read, .close = mem_close };

static vt_dataset *mem_open(int64_t n, int classes, int64_t fail_at, int fixed) {
    vt_dataset *ds = calloc(1, sizeof *ds);
    mem_impl *m = calloc(1, sizeof *m);
    m->fail_at = fail_at;
    m->fixed = fixed;
    ds->ops = &mem_ops;
    ds->size = n;
    ds->num_classes = classes;
    ds->channels = 3;
    ds->impl = m;
    return ds;
}

enum { S = 16, C = 3, K = 5, BS = 6, N = 40 };
#define PER (C * S * S)

/* The spec of the resolved defaults (data.kind imagefolder: train rrc, eval center_crop)
 * with the full DeiT augmentation. */
static void aug_cfg(vt_data_spec *c) {
    vt_config cfg;
    vt_config_defaults(&cfg);
    CHECK(vt_resolve(&cfg) == VT_OK, "defaults resolve: %s", vt_last_error());
    vt_resolve_data_spec(&cfg, c);
    CHECK(c->data.kind == VT_DATA_IMAGEFOLDER && c->data.train_transform == VT_TT_RRC &&
          c->data.eval_transform == VT_ET_CENTER_CROP, "imagefolder geometry: rrc, center_crop");
    c->img_size = S;
    c->in_chans = C;
    c->num_classes = K;
    c->seed = 1234;
    c->train_batch = BS;
    c->label_smoothing = 0.1;
    c->eval_batch = BS;
    c->data.hflip = 0.5;
    strcpy(c->data.auto_augment, "rand-m9-mstd0.5-inc1");
    CHECK(vt_randaug_parse(c->data.auto_augment, &c->randaug) == VT_OK, "policy");
    c->data.reprob = 0.5;
    c->data.mixup = 0.8;
    c->data.cutmix = 1.0;
}

/* Every batch of `epochs` epochs (count-0 ends included) into a flat record. */
typedef struct {
    float images[2][N / BS][BS * PER];
    int labels[2][N / BS][BS];
    float soft[2][N / BS][BS * K];
    int soft_used;
} record;

static vt_status read_epochs(vt_loader *L, int epochs, record *rec) {
    int64_t nb = vt_loader_batches(L, BS);
    static float img[BS * PER], soft[BS * K];
    int lab[BS];
    for (int e = 0; e < epochs; e++) {
        for (int64_t b = 0; b <= nb; b++) {
            int su = 0, cnt = -1;
            vt_status st = vt_loader_next(L, img, lab, soft, &su, &cnt);
            if (st) return st;
            if (b == nb) {
                if (cnt != 0) return vt_fail(VT_ERR_RUNTIME, "epoch %d: no end marker", e);
                continue;
            }
            if (cnt != BS) return vt_fail(VT_ERR_RUNTIME, "epoch %d batch %lld: %d samples", e, (long long)b, cnt);
            memcpy(rec->images[e][b], img, sizeof img);
            memcpy(rec->labels[e][b], lab, sizeof lab);
            memcpy(rec->soft[e][b], soft, sizeof soft);
            rec->soft_used = su;
        }
    }
    return VT_OK;
}

static record ref_rec, got_rec;

static void test_determinism(void) {
    vt_data_spec c;
    aug_cfg(&c);
    memset(&ref_rec, 0, sizeof ref_rec);
    vt_loader *L;
    CHECK(vt_loader_open_dataset(&L, mem_open(N, K, -1, 0), &c, VT_SPLIT_TRAIN, S) == VT_OK, "open");
    vt_loader_set_workers(L, 0);
    omp_set_num_threads(1);
    CHECK(read_epochs(L, 2, &ref_rec) == VT_OK, "sync, 1 thread: %s", vt_last_error());
    vt_loader_close(L);
    CHECK(ref_rec.soft_used == 1, "mixup batches carry soft targets");
    CHECK(memcmp(ref_rec.images[0][0], ref_rec.images[1][0], sizeof ref_rec.images[0][0]) != 0,
          "epochs differ");
    /* soft rows sum to 1 */
    double worst = 0;
    for (int b = 0; b < N / BS; b++)
        for (int i = 0; i < BS; i++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += ref_rec.soft[0][b][i * K + k];
            if (fabs(s - 1) > worst) worst = fabs(s - 1);
        }
    CHECK(worst < 1e-5, "soft rows sum to 1 (worst %g)", worst);
    const int modes[4] = { -2, 1, 2, 3 }; /* -2: synchronous with 2 OpenMP threads */
    for (int m = 0; m < 4; m++) {
        memset(&got_rec, 0, sizeof got_rec);
        CHECK(vt_loader_open_dataset(&L, mem_open(N, K, -1, 0), &c, VT_SPLIT_TRAIN, S) == VT_OK, "open");
        omp_set_num_threads(m == 0 ? 2 : 1);
        vt_loader_set_workers(L, modes[m] > 0 ? modes[m] : 0);
        CHECK(read_epochs(L, 2, &got_rec) == VT_OK, "mode %d: %s", modes[m], vt_last_error());
        vt_loader_close(L);
        got_rec.soft_used = ref_rec.soft_used;
        CHECK(memcmp(&got_rec, &ref_rec, sizeof ref_rec) == 0,
              "mode %d (workers, or -threads synchronous) differs from the synchronous 1-thread batches",
              modes[m]);
    }
    omp_set_num_threads(1);
}

static void test_seek(void) {
    vt_data_spec c;
    aug_cfg(&c);
    vt_loader *L;
    CHECK(vt_loader_open_dataset(&L, mem_open(N, K, -1, 0), &c, VT_SPLIT_TRAIN, S) == VT_OK, "open");
    vt_loader_set_workers(L, 2);
    static float img[BS * PER], soft[BS * K];
    int lab[BS], su, cnt;
    for (int b = 0; b < 3; b++) vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(memcmp(img, ref_rec.images[0][2], sizeof img) == 0, "batch 2 with prefetch");
    vt_loader_seek(L, 0, 1, BS); /* backwards: drop the prefetched 3, 4, 5 */
    vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(cnt == BS && memcmp(img, ref_rec.images[0][1], sizeof img) == 0 &&
          memcmp(soft, ref_rec.soft[0][1], sizeof soft) == 0, "seek back to batch 1");
    vt_loader_seek(L, 1, 4, BS); /* forwards into the next epoch */
    vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(memcmp(img, ref_rec.images[1][4], sizeof img) == 0 &&
          memcmp(lab, ref_rec.labels[1][4], sizeof lab) == 0, "seek to epoch 1 batch 4");
    int e;
    int64_t b;
    vt_loader_position(L, &e, &b);
    CHECK(e == 1 && b == 5, "position %d %lld", e, (long long)b);
    vt_loader_seek(L, 0, 5, BS); /* the last batch of epoch 0, then the implicit next epoch */
    vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(memcmp(img, ref_rec.images[0][5], sizeof img) == 0, "seek to epoch 0 batch 5");
    vt_loader_seek(L, 1, 0, BS); /* same position as (0, 6): keeps the prefetched batches */
    vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(cnt == BS && memcmp(img, ref_rec.images[1][0], sizeof img) == 0, "seek to epoch 1 batch 0");
    vt_loader_close(L);
}

static void test_shards(void) {
    vt_data_spec c;
    aug_cfg(&c);
    c.data.mixup = c.data.cutmix = 0;
    enum { NE = 23, NT = 24, W = 3 };
    c.num_classes = NT;
    /* eval: every index exactly once over the ranks, rank r holds r, r + 3, ... */
    int seen[NE] = { 0 }, order_ok = 1;
    static float img[4 * PER];
    int lab[4], su, cnt;
    for (int r = 0; r < W; r++) {
        vt_loader *L;
        vt_loader_open_dataset(&L, mem_open(NE, NE, -1, 0), &c, VT_SPLIT_VAL, S);
        vt_loader_set_workers(L, r == 1 ? 0 : 2);
        vt_loader_set_shard(L, r, W);
        vt_loader_seek(L, 0, 0, 4);
        CHECK(vt_loader_size(L) == (NE - r + W - 1) / W, "shard %d size %lld", r, (long long)vt_loader_size(L));
        int k = 0;
        for (;;) {
            CHECK(vt_loader_next(L, img, lab, NULL, &su, &cnt) == VT_OK, "eval shard next");
            if (cnt == 0) break;
            for (int i = 0; i < cnt; i++, k++) {
                seen[lab[i]]++;
                order_ok &= lab[i] == k * W + r;
            }
        }
        vt_loader_close(L);
    }
    int once = 1;
    for (int i = 0; i < NE; i++) once &= seen[i] == 1;
    CHECK(once, "eval shards partition the split");
    CHECK(order_ok, "eval shard r holds r, r + world, ...");

    /* train: the shards split the epoch permutation position-wise */
    vt_loader *L;
    int global[NT];
    vt_loader_open_dataset(&L, mem_open(NT, NT, -1, 0), &c, VT_SPLIT_TRAIN, S);
    vt_loader_set_workers(L, 0);
    vt_loader_seek(L, 1, 0, 1);
    for (int i = 0; i < NT; i++) {
        vt_loader_next(L, img, lab, NULL, &su, &cnt);
        global[i] = lab[0];
    }
    vt_loader_close(L);
    int tseen[NT] = { 0 }, follow = 1;
    for (int r = 0; r < W; r++) {
        vt_loader_open_dataset(&L, mem_open(NT, NT, -1, 0), &c, VT_SPLIT_TRAIN, S);
        vt_loader_set_workers(L, 2);
        vt_loader_set_shard(L, r, W);
        vt_loader_seek(L, 1, 0, 4);
        CHECK(vt_loader_batches(L, 4) == 2, "train shard batches %lld", (long long)vt_loader_batches(L, 4));
        int k = 0;
        for (int b = 0; b < 2; b++) {
            vt_loader_next(L, img, lab, NULL, &su, &cnt);
            for (int i = 0; i < cnt; i++, k++) {
                tseen[lab[i]]++;
                follow &= lab[i] == global[k * W + r];
            }
        }
        vt_loader_close(L);
    }
    once = 1;
    for (int i = 0; i < NT; i++) once &= tseen[i] == 1;
    CHECK(once, "train shards partition the epoch");
    CHECK(follow, "train shard r reads positions r, r + world, ... of the permutation");
}

/* Every sample of `epochs` epochs in batches of bs (shard rank of world), in order, with
 * labels and soft targets; returns the samples read. */
static int64_t read_shard(int64_t n, int bs, int rank, int world, int workers, int epochs, float *img,
                          int *lab, float *soft) {
    vt_data_spec c;
    aug_cfg(&c);
    vt_loader *L;
    vt_loader_open_dataset(&L, mem_open(n, K, -1, 0), &c, VT_SPLIT_TRAIN, S);
    vt_loader_set_workers(L, workers);
    vt_loader_set_shard(L, rank, world);
    vt_loader_seek(L, 0, 0, bs);
    int64_t got = 0, nb = vt_loader_batches(L, bs);
    for (int e = 0; e < epochs; e++)
        for (int64_t b = 0; b <= nb; b++) {
            int su = 0, cnt = 0;
            if (vt_loader_next(L, img + got * PER, lab + got, soft + got * K, &su, &cnt) != VT_OK) {
                CHECK(0, "shard %d of %d: %s", rank, world, vt_last_error());
                vt_loader_close(L);
                return got;
            }
            got += cnt;
        }
    vt_loader_close(L);
    return got;
}

/* Data parallelism with mixup + cutmix (loader.c): rank r of R reading batches of B / R
 * gets, bit for bit, samples r, r + R, ... of each batch one process reads at B (the
 * images mixed with partners on other ranks, their labels and soft targets); also for
 * an odd global batch, whose middle sample is its own partner. */
static void test_shards_mixup(void) {
    static const struct { int B, R; } cases[] = { { 6, 2 }, { 6, 3 }, { 6, 6 }, { 3, 3 }, { 9, 3 } };
    enum { NS = 36, EP = 2, MAX = NS * EP };
    float *ref = malloc(sizeof(float) * MAX * PER), *got = malloc(sizeof(float) * MAX * PER);
    float *rsoft = malloc(sizeof(float) * MAX * K), *gsoft = malloc(sizeof(float) * MAX * K);
    int rlab[MAX], glab[MAX];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int B = cases[k].B, R = cases[k].R;
        int64_t n = read_shard(NS, B, 0, 1, 0, EP, ref, rlab, rsoft);
        int64_t per_epoch = NS / B * B;
        CHECK(n == EP * per_epoch, "B %d: one process reads %lld samples", B, (long long)n);
        for (int r = 0; r < R; r++) {
            int64_t m = read_shard(NS, B / R, r, R, r % 2 ? 2 : 0, EP, got, glab, gsoft);
            CHECK(m * R == n, "B %d R %d rank %d: %lld samples", B, R, r, (long long)m);
            int same = m * R == n;
            for (int64_t i = 0; same && i < m; i++) {
                int64_t j = i * R + r; /* sample i of the shard: global position i R + r */
                same = memcmp(got + i * PER, ref + j * PER, sizeof(float) * PER) == 0 &&
                       glab[i] == rlab[j] && memcmp(gsoft + i * K, rsoft + j * K, sizeof(float) * K) == 0;
            }
            CHECK(same, "B %d R %d rank %d (workers %d): the shard's samples, soft targets and labels "
                  "equal one process's bit for bit", B, R, r, r % 2 ? 2 : 0);
        }
    }
    free(ref);
    free(got);
    free(rsoft);
    free(gsoft);
}

static void test_errors(void) {
    vt_data_spec c;
    aug_cfg(&c);
    static float img[BS * PER], soft[BS * K];
    int lab[BS], su, cnt;
    for (int workers = 0; workers <= 2; workers++) {
        vt_loader *L;
        vt_loader_open_dataset(&L, mem_open(N, K, 8, 0), &c, VT_SPLIT_VAL, S);
        vt_loader_set_workers(L, workers);
        CHECK(vt_loader_next(L, img, lab, soft, &su, &cnt) == VT_OK && cnt == BS, "batch 0 is fine");
        vt_status st = vt_loader_next(L, img, lab, soft, &su, &cnt);
        CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "memtest: sample 8 is corrupt") &&
              strstr(vt_last_error(), "epoch 1 batch 2"), "workers %d: the second batch of the first epoch, "
              "counted from 1 as progress counts: error %d \"%s\"", workers,
              (int)st, vt_last_error());
        st = vt_loader_next(L, img, lab, soft, &su, &cnt);
        CHECK(st == VT_ERR_RUNTIME && cnt == 0, "the error repeats until a seek");
        vt_loader_seek(L, 0, 2, BS);
        CHECK(vt_loader_next(L, img, lab, soft, &su, &cnt) == VT_OK && cnt == BS,
              "after a seek past the bad batch: %s", vt_last_error());
        vt_loader_close(L);
    }
    /* a label outside model.num_classes cannot make a mixup target */
    c.num_classes = 2;
    vt_loader *L;
    vt_loader_open_dataset(&L, mem_open(N, K, -1, 0), &c, VT_SPLIT_TRAIN, S);
    vt_loader_set_workers(L, 1);
    vt_status st = vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), "model.num_classes 2"), "label check: %s",
          vt_last_error());
    vt_loader_close(L);
}

static void test_eval_transform(void) {
    vt_data_spec c;
    aug_cfg(&c);
    c.data.crop_pct = 0.8;
    for (int ch = 0; ch < 3; ch++) { c.data.mean[ch] = 0.5; c.data.std[ch] = 0.25; }
    vt_loader *L;
    vt_loader_open_dataset(&L, mem_open(N, K, -1, 0), &c, VT_SPLIT_VAL, S);
    vt_loader_set_workers(L, 2);
    static float img[BS * PER], want[PER], soft[BS * K];
    int lab[BS], su, cnt;
    vt_loader_next(L, img, lab, soft, &su, &cnt);
    CHECK(su == 0 && cnt == BS, "eval batches have no soft targets");
    mem_impl m = { -1, 0 };
    int ok = 1;
    for (int i = 0; i < BS; i++) {
        int h, w;
        mem_dims(&m, i, &h, &w);
        static uint8_t src[64 * 64 * 3], out[S * S * 3];
        static _Alignas(16) unsigned char ws[1 << 20];
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < 3; ch++) src[(y * w + x) * 3 + ch] = mem_pixel(i, y, x, ch);
        vt_resample_geom g;
        vt_tf_eval_geometry(h, w, S, 0.8, &g);
        vt_tf_resample_u8(src, h, w, 3, &g, VT_INTERP_BICUBIC, ws, out);
        vt_tf_to_float(out, S, S, 3, 0, want);
        const float mean[3] = { 0.5f, 0.5f, 0.5f }, sd[3] = { 0.25f, 0.25f, 0.25f };
        vt_tf_normalize(want, 3, S * S, mean, sd);
        ok &= memcmp(img + i * PER, want, sizeof want) == 0;
        ok &= g.rh >= S && g.rw >= S && (g.rh == 20 || g.rw == 20); /* int(16 / 0.8) */
    }
    CHECK(ok, "eval = resize shorter side to 20, center crop 16, normalise");
    vt_loader_close(L);

    /* data.eval_transform = resize: the plain bilinear resize (resolve's default for a
     * fixed-size format without an explicit crop_pct) */
    c.data.eval_transform = VT_ET_RESIZE;
    vt_loader_open_dataset(&L, mem_open(N, K, -1, 1), &c, VT_SPLIT_VAL, 8);
    vt_loader_next(L, img, lab, soft, &su, &cnt);
    static float nat[3 * 12 * 12], small[3 * 8 * 8];
    static uint8_t src[12 * 12 * 3];
    for (int y = 0; y < 12; y++)
        for (int x = 0; x < 12; x++)
            for (int ch = 0; ch < 3; ch++) src[(y * 12 + x) * 3 + ch] = mem_pixel(0, y, x, ch);
    vt_tf_to_float(src, 12, 12, 3, 0, nat);
    vt_tf_resize(nat, 3, 12, 12, small, 8, 8);
    const float mean[3] = { 0.5f, 0.5f, 0.5f }, sd[3] = { 0.25f, 0.25f, 0.25f };
    vt_tf_normalize(small, 3, 64, mean, sd);
    CHECK(memcmp(img, small, sizeof small) == 0, "eval_transform resize: bilinear resize to S");
    vt_loader_close(L);
}

static void test_config_path(void) {
    vt_config cfg;
    CHECK(vt_resolve_json(&cfg, "{\"model\": {\"img_size\": 16, \"patch_size\": 4, \"num_classes\": 4},"
                          " \"data\": {\"kind\": \"synthetic\", \"train_size\": 32, \"val_size\": 8,"
                          " \"mixup\": 0.8, \"reprob\": 0.25, \"auto_augment\": \"rand-m9-n1\"},"
                          " \"train\": {\"batch_size\": 8}}", "path.json") == VT_OK,
          "config: %s", vt_last_error());
    vt_data_spec c;
    vt_resolve_data_spec(&cfg, &c);
    CHECK(c.randaug.enabled && c.randaug.n == 1 && c.train_batch == 8 && c.eval_batch == 8 &&
          c.num_classes == 4 && c.data.train_transform == VT_TT_SIMPLE &&
          c.data.eval_transform == VT_ET_RESIZE, "the spec of a resolved config");
    static float a[8 * 3 * 16 * 16], b[8 * 3 * 16 * 16], sa[8 * 4], sb[8 * 4];
    int la[8], lb[8], su, cnt;
    vt_loader *L1, *L2;
    CHECK(vt_loader_open(&L1, &c, VT_SPLIT_TRAIN, 16) == VT_OK, "synthetic open: %s", vt_last_error());
    CHECK(vt_loader_open(&L2, &c, VT_SPLIT_TRAIN, 16) == VT_OK, "synthetic open");
    CHECK(vt_loader_workers(L1) >= 1, "data.workers = 0 means auto (%d)", vt_loader_workers(L1));
    vt_loader_set_workers(L2, 0);
    int same = 1;
    for (int k = 0; k < 5; k++) {
        vt_loader_next(L1, a, la, sa, &su, &cnt);
        vt_loader_next(L2, b, lb, sb, &su, &cnt);
        same &= memcmp(a, b, sizeof a) == 0 && memcmp(la, lb, sizeof la) == 0 &&
                memcmp(sa, sb, sizeof sa) == 0;
    }
    CHECK(same, "default workers equal the synchronous path through vt_loader_open");
    vt_loader_close(L1);
    vt_loader_close(L2);
}

/* After a warm-up epoch, two more epochs of the full pipeline allocate nothing (prefetch
 * workers and the synchronous path). */
static void test_no_alloc(void) {
#ifdef COUNT_ALLOCS
    vt_data_spec c;
    aug_cfg(&c);
    for (int workers = 0; workers <= 2; workers += 2) {
        vt_loader *L;
        vt_dataset *ds = mem_open(N, K, -1, 1); /* one native size: buffers sized up front */
        ds->height = ds->width = 12;
        vt_loader_open_dataset(&L, ds, &c, VT_SPLIT_TRAIN, S);
        vt_loader_set_workers(L, workers);
        memset(&got_rec, 0, sizeof got_rec);
        CHECK(read_epochs(L, 1, &got_rec) == VT_OK, "warm-up epoch");
        long before = atomic_load(&alloc_count);
        CHECK(read_epochs(L, 2, &got_rec) == VT_OK, "steady epochs");
        long after = atomic_load(&alloc_count);
        CHECK(after == before, "workers %d: %ld allocations in two steady-state epochs", workers,
              after - before);
        vt_loader_close(L);
    }
#endif
}

/* Resident set size of this process in bytes (/proc/self/statm), -1 if unknown. */
static long long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = -1, res = -1;
    if (f) {
        if (fscanf(f, "%lld %lld", &pages, &res) != 2) res = -1;
        fclose(f);
    }
    return res < 0 ? -1 : res * 4096;
}

/* The sample order takes no memory per sample: a synthetic split of 10^9 samples (an
 * allowed data.train_size, whose order array took 8 GB and, when that allocation failed,
 * was reported from freed memory) opens, yields batches from two epochs and closes with
 * the resident set grown by less than 256 MB, and (outside sanitizer builds, whose shadow
 * memory needs the address space) under an address-space limit of 2 GB above the current
 * size. The permutation: a bijection of [0, n) for n = 1..300 and 10^6, another per key. */
static void test_order_bounded(void) {
    vt_config cfg;
    CHECK(vt_resolve_json(&cfg, "{\"model\": {\"img_size\": 16, \"patch_size\": 4, \"num_classes\": 4},"
                          " \"data\": {\"kind\": \"synthetic\", \"train_size\": 1000000000,"
                          " \"val_size\": 8, \"workers\": 1}, \"train\": {\"batch_size\": 8}}",
                          "order.json") == VT_OK, "config: %s", vt_last_error());
    vt_data_spec c;
    vt_resolve_data_spec(&cfg, &c);
#ifdef COUNT_ALLOCS
    struct rlimit old;
    CHECK(test_cap_address_space(2ULL << 30, &old) == 0, "address-space limit set");
#endif
    long long before = rss_bytes();
    static float img[8 * 3 * 16 * 16];
    int lab[8], su, cnt = 0;
    vt_loader *L = NULL;
    vt_status st = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, 16);
    CHECK(st == VT_OK, "open a 10^9-sample split: %s", vt_last_error());
    if (st == VT_OK) {
        CHECK(vt_loader_batches(L, 8) == 125000000, "batches %lld", (long long)vt_loader_batches(L, 8));
        st = vt_loader_next(L, img, lab, NULL, &su, &cnt);
        CHECK(st == VT_OK && cnt == 8, "first batch: %s", vt_last_error());
        vt_loader_seek(L, 7, 124999999, 8);
        st = vt_loader_next(L, img, lab, NULL, &su, &cnt);
        CHECK(st == VT_OK && cnt == 8, "last batch of epoch 8: %s", vt_last_error());
        long long grown = rss_bytes() - before;
        CHECK(grown < (256LL << 20), "resident set grew by %lld MB", grown >> 20);
        vt_loader_close(L);
    }
#ifdef COUNT_ALLOCS
    setrlimit(RLIMIT_AS, &old);
#endif

    /* eval.batch_size = 2^20 (its documented maximum) on an 8-sample val split with a
     * worker: the prefetch slots hold the split's 8 samples, not 2^20 (4 slots of 1 GiB
     * each aborted with an internal error under the limit) */
#ifdef COUNT_ALLOCS
    CHECK(test_cap_address_space(2ULL << 30, &old) == 0, "address-space limit set again");
#endif
    c.eval_batch = 1 << 20;
    st = vt_loader_open(&L, &c, VT_SPLIT_VAL, 16);
    CHECK(st == VT_OK, "open the val split: %s", vt_last_error());
    if (st == VT_OK) {
        float *big = malloc(sizeof(float) * 8 * 3 * 16 * 16);
        st = vt_loader_next(L, big, lab, NULL, &su, &cnt);
        CHECK(st == VT_OK && cnt == 8, "a batch of 2^20 from 8 samples: %d (%s)", cnt, vt_last_error());
        free(big);
        vt_loader_close(L);
    }
#ifdef COUNT_ALLOCS
    setrlimit(RLIMIT_AS, &old);
#endif

    static unsigned char hit[1000000];
    int bijective = 1, differ = 0;
    for (int64_t n = 1; n <= 300; n++)
        for (uint64_t key = 1; key <= 2; key++) {
            memset(hit, 0, (size_t)n);
            for (int64_t p = 0; p < n; p++) {
                int64_t v = vt_rng_permute(key, n, p);
                bijective &= v >= 0 && v < n && !hit[v];
                if (v >= 0 && v < n) hit[v] = 1;
            }
        }
    memset(hit, 0, sizeof hit);
    for (int64_t p = 0; p < 1000000; p++) {
        int64_t v = vt_rng_permute(99, 1000000, p);
        bijective &= !hit[v];
        hit[v] = 1;
        differ += v != vt_rng_permute(100, 1000000, p);
    }
    CHECK(bijective, "vt_rng_permute is a bijection of [0, n)");
    CHECK(differ > 990000, "another key gives another order (%d of 10^6 positions differ)", differ);
}

int main(void) {
    test_order_bounded();
    test_no_alloc();
    test_determinism();
    test_seek();
    test_shards();
    test_shards_mixup();
    test_errors();
    test_eval_transform();
    test_config_path();
    return test_summary();
}
