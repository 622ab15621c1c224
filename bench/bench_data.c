/* bench_data.c - data pipeline throughput (`make bench`). Not a test: prints figures only.
 *
 * Writes 64 synthetic photos (500 x 375 RGB JPEG, quality 90, smooth gradients plus
 * texture and noise, made with stb_image_write) into a fresh directory under /tmp, then
 * measures images per second (wall clock) of:
 *   decode        vt_image_load alone, one thread
 *   train_rrc_ra  the DeiT training transform at 224 x 224: decode, RandomResizedCrop
 *                 (bicubic), flip, RandAugment rand-m9-mstd0.5-inc1, normalise, through
 *                 the prefetching loader with 1 and 2 worker threads
 *   train_deit    the same plus random erasing 0.25 and mixup 0.8 / cutmix 1.0
 *   eval_crop     decode, resize shorter side to 256 (bicubic), center crop 224
 * Each loader figure reads 256 samples (8 batches of 32) after one warm-up batch.
 * images_per_s is wall clock; images_per_cpu_s divides by the process CPU time (all
 * threads, including the consumer's copy out of the prefetch ring), which stays
 * meaningful when other processes share the cores.
 * stdout: one JSON object per line; stderr: a readable table. The machine may be shared:
 * other processes lower the figures, so compare runs on an idle machine.
 * Usage: bench_data [samples]  (32 to 1000000, default 256; anything else is an error).
 */
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "config.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "image.h"
#include "resolve.h"
#include "rng.h"

#define NFILES 64
#define IMG_W 500
#define IMG_H 375

static char dir[256];

static void file_path(char *out, size_t len, int64_t i) {
    snprintf(out, len, "%s/img%02d.jpg", dir, (int)(i % NFILES));
}

static int write_images(void) {
    uint8_t *px = malloc((size_t)IMG_W * IMG_H * 3);
    if (!px) return 1;
    vt_rng r;
    vt_rng_seed(&r, 7);
    for (int i = 0; i < NFILES; i++) {
        double fx = 0.01 + 0.02 * vt_rng_uniform(&r), fy = 0.01 + 0.02 * vt_rng_uniform(&r);
        for (int y = 0; y < IMG_H; y++)
            for (int x = 0; x < IMG_W; x++)
                for (int c = 0; c < 3; c++) {
                    double v = 128 + 60 * sin(fx * x * (c + 1) + i) * cos(fy * y + c) +
                               30 * sin(0.3 * x + 0.2 * y) + 12 * (vt_rng_uniform(&r) - 0.5);
                    px[((size_t)y * IMG_W + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
                }
        char p[512];
        file_path(p, sizeof p, i);
        if (!stbi_write_jpg(p, IMG_W, IMG_H, 3, px, 90)) {
            free(px);
            return 1;
        }
    }
    free(px);
    return 0;
}

/* vt_image_load's pixel limit: no limit that matters for the files written here. */
#define BENCH_MAX_PIXELS ((int64_t)1 << 32)

/* A dataset of the generated files, sample i = file i % 64, label i % 10. */
static vt_status jpeg_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    char p[512];
    file_path(p, sizeof p, index);
    *label = (int)(index % ds->num_classes);
    return vt_image_load(p, BENCH_MAX_PIXELS, &s->pixels, &s->cap, &s->h, &s->w, &s->c);
}

static void jpeg_close(vt_dataset *ds) { free(ds); }

static const vt_dataset_ops jpeg_ops = { .kind = "bench-jpeg", .read = jpeg_read, .close = jpeg_close };

static vt_dataset *jpeg_open(int64_t n) {
    vt_dataset *ds = vt_xcalloc(1, sizeof *ds);
    ds->ops = &jpeg_ops;
    ds->size = n;
    ds->num_classes = 10;
    ds->channels = 3;
    return ds;
}

/* The spec of the resolved defaults (imagefolder geometry: rrc, center_crop) with the
 * DeiT RandAugment, 224 px, 10 classes, batch bs. */
static void base_cfg(vt_data_spec *c, int bs) {
    vt_config cfg;
    vt_config_defaults(&cfg);
    VT_ASSERT(vt_config_set(&cfg, "data.auto_augment=rand-m9-mstd0.5-inc1") == VT_OK &&
              vt_resolve(&cfg) == VT_OK, "bench_data config: %s", vt_last_error());
    vt_resolve_data_spec(&cfg, c);
    c->img_size = 224;
    c->num_classes = 10;
    c->train_batch = bs;
    c->eval_batch = bs;
    c->seed = 1;
}

static void report(const char *name, int workers, int64_t n, double sec, double cpu) {
    double ips = (double)n / sec, ipc = (double)n / cpu;
    printf("{\"bench\":\"data\",\"name\":\"%s\",\"workers\":%d,\"samples\":%lld,\"seconds\":%.4f,"
           "\"cpu_seconds\":%.4f,\"images_per_s\":%.2f,\"images_per_cpu_s\":%.2f,\"img_size\":224,"
           "\"source\":\"%dx%d jpeg\"}\n", name, workers, (long long)n, sec, cpu, ips, ipc, IMG_W, IMG_H);
    fprintf(stderr, "%-14s %8d %9lld %9.3f %9.3f %12.1f %14.1f\n", name, workers, (long long)n, sec,
            cpu, ips, ipc);
}

/* Images/s through the loader: one warm-up batch, then `n` samples. */
static int run_loader(const char *name, const vt_data_spec *cfg, vt_split split, int workers, int64_t n) {
    int bs = cfg->train_batch;
    vt_loader *L;
    if (vt_loader_open_dataset(&L, jpeg_open(n + bs), cfg, split, 224) != VT_OK) {
        fprintf(stderr, "bench_data: %s\n", vt_last_error());
        return 1;
    }
    vt_loader_set_workers(L, workers);
    float *img = vt_aligned_alloc(sizeof(float) * (size_t)bs * 3 * 224 * 224);
    float *soft = vt_xmalloc(sizeof(float) * (size_t)bs * 10);
    int *lab = vt_xmalloc(sizeof(int) * (size_t)bs);
    int su, cnt, rc = 0;
    if (vt_loader_next(L, img, lab, soft, &su, &cnt) != VT_OK) rc = 1;
    double t0 = bench_now(), c0 = bench_cpu_now();
    int64_t done = 0;
    while (!rc && done < n) {
        if (vt_loader_next(L, img, lab, soft, &su, &cnt) != VT_OK) rc = 1;
        if (cnt == 0) break;
        done += cnt;
    }
    double t = bench_now() - t0, cpu = bench_cpu_now() - c0;
    if (rc) fprintf(stderr, "bench_data: %s\n", vt_last_error());
    else report(name, workers, done, t, cpu);
    free(img);
    free(soft);
    free(lab);
    vt_loader_close(L);
    return rc;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(path);
}

int main(int argc, char **argv) {
    long samples = 256;
    if (!bench_count_arg(argc, argv, "bench_data [samples: 32 to 1000000]", 32, 1000000, &samples)) return 2;
    int64_t n = samples;
    snprintf(dir, sizeof dir, "/tmp/vt_bench_data_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("bench_data: mkdtemp");
        return 1;
    }
    int rc = write_images();
    if (rc) fprintf(stderr, "bench_data: cannot write JPEGs to %s\n", dir);
    fprintf(stderr, "%-14s %8s %9s %9s %9s %12s %14s\n", "pipeline", "workers", "samples", "seconds",
            "cpu_s", "images/s", "images/cpu_s");
    if (!rc) {
        uint8_t *buf = NULL;
        size_t cap = 0;
        int h, w, c;
        double t0 = bench_now(), c0 = bench_cpu_now();
        for (int64_t i = 0; i < n && !rc; i++) {
            char p[512];
            file_path(p, sizeof p, i);
            if (vt_image_load(p, BENCH_MAX_PIXELS, &buf, &cap, &h, &w, &c) != VT_OK) rc = 1;
        }
        if (rc) fprintf(stderr, "bench_data: %s\n", vt_last_error());
        else report("decode", 0, n, bench_now() - t0, bench_cpu_now() - c0);
        free(buf);
    }
    vt_data_spec cfg;
    for (int workers = 1; workers <= 2 && !rc; workers++) {
        base_cfg(&cfg, 32);
        rc = run_loader("train_rrc_ra", &cfg, VT_SPLIT_TRAIN, workers, n);
        if (rc) break;
        cfg.data.reprob = 0.25;
        cfg.data.mixup = 0.8;
        cfg.data.cutmix = 1.0;
        rc = run_loader("train_deit", &cfg, VT_SPLIT_TRAIN, workers, n);
        if (rc) break;
        base_cfg(&cfg, 32);
        rc = run_loader("eval_crop", &cfg, VT_SPLIT_VAL, workers, n);
    }
    nftw(dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    return rc;
}
