/* bench_dist.c - data-parallel speed benchmark (`make bench`). Not a test: prints figures.
 *
 * stdout: one JSON object per line; stderr: a readable table. Measured in this run:
 *  (a) "dist_train": images/s of `vitrain` training on synthetic data (the whole program:
 *      loader, forward, backward, gradient exchange, AdamW) for ViT-Ti/4 at 32 (batch
 *      128) and ViT-S/16 at 224 (batch 64), as 1 rank x 1 thread, 1 rank x 2 threads and
 *      2 ranks x 1 thread (mpirun -np 2, each rank bound to its core). The figure is the
 *      median of the per-step "img_per_s" of metrics.jsonl over the 2 timed steps (2
 *      warm-up steps first); "comm_s" (2 ranks) is the median per step of rank 0's time in MPI
 *      calls: the part of the exchange that backward did not hide, "comm_pct" its share
 *      of the step. One "dist_ratio" line per model: 2 ranks x 1 thread over 1 rank x 2
 *      threads (the target: >= 0.95 on ViT-S/16, comm <= 5% of the step).
 *  (b) "block_backward": ViT-B/16 at 224 in this process, one training step per thread
 *      count (1, 2) after a warm-up: the forward time, and the backward cut at the tape's
 *      gradient-final marks (tape.h): head + final norm, each block (12), and the rest
 *      (patch embedding, CLS, position encoding), in seconds at the given batch per rank.
 *      These are the measured inputs of the scale model (scripts/scale_model.py).
 * Usage: bench_dist [substring] - only the rows whose "dist_train/<model>" or
 * "block_backward/<model>" name contains it (one that matches no row is an error).
 * VT_BIN: the vitrain binary (default ./vitrain). VT_BENCH_QUICK=1: batches divided by 8
 * (ViT-B: batch 2), one timed step. Each row names the CPU model and the kernel level. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "config.h"
#include "kernels.h"
#include "ops/ops.h"
#include "resolve.h"
#include "tape.h"
#include "vit.h"

static char cpu[192] = "unknown", tmpdir[128];

/* ---- (a) vitrain under 1x1, 1x2, 2x1 ------------------------------------------------- */

typedef struct {
    const char *name, *preset;
    int img, patch, batch, classes;
} model_case;

static const model_case models[] = {
    {"vit_ti4_32", "vit_tiny", 32, 4, 128, 10},
    {"vit_s16_224", "vit_small", 224, 16, 64, 1000},
};

/* The value after "key": in a JSON line, or -1. */
static double json_num(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? atof(p + strlen(pat)) : -1;
}

/* Run one layout; medians of img/s and comm_s over steps > warm. Returns 0 on success. */
static int run_layout(const char *bin, const model_case *mc, int ranks, int threads, int batch, int steps,
                      int warm, double *img_s, double *comm_s) {
    char cfg[256], dir[256], log[300], cmd[2048];
    snprintf(cfg, sizeof cfg, "%s/%s.json", tmpdir, mc->name);
    snprintf(dir, sizeof dir, "%s/%s_%dx%d", tmpdir, mc->name, ranks, threads);
    snprintf(log, sizeof log, "%s.log", dir);
    FILE *f = fopen(cfg, "w");
    if (!f) return 1;
    fprintf(f, "{\"model\": {\"preset\": \"%s\", \"img_size\": %d, \"patch_size\": %d, \"num_classes\": %d, "
            "\"in_chans\": 3, \"drop_path\": 0},\n \"data\": {\"kind\": \"synthetic\", \"train_size\": %d, "
            "\"val_size\": 8},\n \"train\": {\"batch_size\": %d, \"steps\": %d, \"log_every\": 1, "
            "\"eval_every\": 0, \"ckpt_every\": 0},\n \"runtime\": {\"progress\": \"never\"}}\n",
            mc->preset, mc->img, mc->patch, mc->classes, batch * steps, batch, steps);
    fclose(f);
    if (ranks > 1)
        snprintf(cmd, sizeof cmd, "mpirun -np %d --bind-to core%s %s %s --threads %d --run-dir %s 2>%s", ranks,
                 geteuid() == 0 ? " --allow-run-as-root" : "", bin, cfg, threads, dir, log);
    else
        snprintf(cmd, sizeof cmd, "%s %s --threads %d --run-dir %s 2>%s", bin, cfg, threads, dir, log);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_dist: '%s' failed; see %s\n", cmd, log);
        return 1;
    }
    char mpath[300];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", dir);
    f = fopen(mpath, "r");
    double imgs[64], comms[64];
    int n = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f) && n < 64) {
        if (!strstr(line, "\"kind\":\"train\"") || json_num(line, "step") <= warm) continue;
        imgs[n] = json_num(line, "img_per_s");
        comms[n] = ranks > 1 ? json_num(line, "comm_s") : 0;
        n++;
    }
    if (f) fclose(f);
    if (n == 0) return 1;
    *img_s = bench_median(imgs, n);
    *comm_s = bench_median(comms, n);
    return 0;
}

static int bench_train_layouts(const char *bin, const char *filter, int quick, const char *isa) {
    const int warm = 2, steps = warm + (quick ? 1 : 2);
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        const model_case *mc = &models[k];
        char name[96];
        snprintf(name, sizeof name, "dist_train/%s", mc->name);
        if (filter && !strstr(name, filter)) continue;
        int batch = quick ? mc->batch / 8 : mc->batch;
        static const int layouts[3][2] = {{1, 1}, {1, 2}, {2, 1}};
        double img[3] = {0}, comm[3] = {0};
        for (int l = 0; l < 3; l++) {
            int R = layouts[l][0], T = layouts[l][1];
            if (run_layout(bin, mc, R, T, batch, steps, warm, &img[l], &comm[l])) return 1;
            double step_s = batch / img[l];
            printf("{\"bench\":\"dist_train\",\"model\":\"%s\",\"ranks\":%d,\"threads\":%d,\"batch\":%d,"
                   "\"img_per_s\":%.2f,\"step_s\":%.4f,\"comm_s\":%.5f,\"comm_pct\":%.2f,\"cpu\":\"%s\","
                   "\"isa\":\"%s\"}\n", mc->name, R, T, batch, img[l], step_s, comm[l],
                   100.0 * comm[l] / step_s, cpu, isa);
            fflush(stdout);
            fprintf(stderr, "%-12s %d rank%s x %d thread%s: %8.2f img/s, step %.3f s, comm %.4f s (%.2f%%)\n",
                    mc->name, R, R > 1 ? "s" : " ", T, T > 1 ? "s" : " ", img[l], step_s, comm[l],
                    100.0 * comm[l] / step_s);
        }
        printf("{\"bench\":\"dist_ratio\",\"model\":\"%s\",\"ratio_2x1_over_1x2\":%.4f,"
               "\"ratio_2x1_over_1x1\":%.4f,\"ratio_1x2_over_1x1\":%.4f,\"cpu\":\"%s\",\"isa\":\"%s\"}\n",
               mc->name, img[2] / img[1], img[2] / img[0], img[1] / img[0], cpu, isa);
        fprintf(stderr, "%-12s 2x1 / 1x2 = %.3f, 2x1 / 1x1 = %.3f, 1x2 / 1x1 = %.3f\n", mc->name,
                img[2] / img[1], img[2] / img[0], img[1] / img[0]);
        fflush(stdout);
    }
    return 0;
}

/* ---- (b) per-block backward of ViT-B/16 ---------------------------------------------- */

typedef struct {
    double t[64];
    int n;
} mark_times;

static void on_mark(void *ctx, int64_t from) {
    mark_times *m = ctx;
    if (from >= 0 && m->n < 64) m->t[m->n++] = bench_now();
}

static int bench_blocks(const char *filter, int quick, const char *isa) {
    if (filter && !strstr("block_backward/vit_b16_224", filter)) return 0;
    vt_config cfg;
    vt_config_defaults(&cfg);
    const char *sets[] = {"model.preset=vit_base", "model.img_size=224", "model.patch_size=16",
                          "model.num_classes=1000", "model.drop_path=0", "data.kind=synthetic"};
    for (int i = 0; i < 6; i++)
        if (vt_config_set(&cfg, sets[i]) != VT_OK) { fprintf(stderr, "%s\n", vt_last_error()); return 1; }
    if (vt_resolve(&cfg) != VT_OK) { fprintf(stderr, "%s\n", vt_last_error()); return 1; }
    vt_vit m;
    vt_model_spec ms;
    if (vt_vit_init(&m, vt_resolve_model_spec(&cfg, &ms), 1) != VT_OK) { fprintf(stderr, "%s\n", vt_last_error()); return 1; }
    const int B = quick ? 2 : 8, S = 224;
    vt_arena arena;
    vt_arena_init(&arena, (size_t)1 << 26);
    vt_tape tape;
    vt_tape_init(&tape, &arena);
    vt_rng rng;
    vt_rng_seed(&rng, 1);
    tape.rng = &rng;
    mark_times mt;
    tape.hook = on_mark;
    tape.hook_ctx = &mt;
    size_t per = (size_t)3 * S * S;
    float *img = malloc(sizeof(float) * per * B);
    for (size_t i = 0; i < per * B; i++) img[i] = (float)(vt_rng_uniform(&rng) - 0.5);
    int labels[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        double fwd = 0, bwd = 0, t_mark[64];
        int nm = 0;
        for (int it = 0; it < 2; it++) { /* warm-up, then the timed step */
            vt_arena_reset(&arena);
            vt_tape_clear(&tape);
            vt_vit_zero_grad(&m);
            int64_t shape[4] = {B, 3, S, S};
            vt_tensor *x = vt_tensor_wrap(&arena, img, 4, shape);
            mt.n = 0;
            double t0 = bench_now();
            vt_tensor *loss = vt_op_cross_entropy(&tape, vt_vit_forward(&m, &tape, x), labels, NULL, 0.0f);
            double t1 = bench_now();
            vt_tape_backward(&tape, loss);
            double t2 = bench_now();
            fwd = t1 - t0;
            bwd = t2 - t1;
            nm = mt.n;
            t_mark[0] = t1;
            for (int i = 0; i < nm && i < 62; i++) t_mark[i + 1] = mt.t[i];
            t_mark[nm + 1] = t2;
        }
        /* segments: head + norm (to the first mark), blocks L-1 .. 0, the rest */
        printf("{\"bench\":\"block_backward\",\"model\":\"vit_b16_224\",\"batch\":%d,\"threads\":%d,"
               "\"params\":%lld,\"forward_s\":%.5f,\"backward_s\":%.5f,\"head_s\":%.5f,\"block_s\":[",
               B, threads, (long long)m.n_params, fwd, bwd, t_mark[1] - t_mark[0]);
        for (int i = 1; i < nm; i++) printf("%s%.5f", i > 1 ? "," : "", t_mark[i + 1] - t_mark[i]);
        printf("],\"rest_s\":%.5f,\"cpu\":\"%s\",\"isa\":\"%s\"}\n", t_mark[nm + 1] - t_mark[nm], cpu, isa);
        fflush(stdout);
        fprintf(stderr, "vit_b16_224 batch %d, %d thread%s: forward %.3f s, backward %.3f s (head %.3f, "
                "block mean %.3f, rest %.3f)\n", B, threads, threads == 1 ? "" : "s", fwd, bwd,
                t_mark[1] - t_mark[0], (t_mark[nm] - t_mark[1]) / (nm > 1 ? nm - 1 : 1),
                t_mark[nm + 1] - t_mark[nm]);
    }
    free(img);
    vt_tape_free(&tape);
    vt_arena_free(&arena);
    vt_vit_free(&m);
    return 0;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    if (argc > 2 || (filter && !strstr("dist_train/vit_ti4_32 dist_train/vit_s16_224 block_backward/vit_b16_224",
                                       filter))) {
        fprintf(stderr, "usage: bench_dist [substring of dist_train/vit_ti4_32, dist_train/vit_s16_224, "
                "block_backward/vit_b16_224]\n");
        return 2;
    }
    char err[256];
    if (vt_kernels_init(err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    bench_cpu(cpu, sizeof cpu);
    const char *b = getenv("VT_BIN");
    char bin[512];
    snprintf(bin, sizeof bin, "%s", b && *b ? b : "./vitrain");
    int quick = getenv("VT_BENCH_QUICK") && atoi(getenv("VT_BENCH_QUICK")) > 0;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vt_bench_dist_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    int rc = bench_train_layouts(bin, filter, quick, vt_k.name);
    if (!rc) rc = bench_blocks(filter, quick, vt_k.name);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_dist: could not remove %s\n", tmpdir);
    return rc;
}
