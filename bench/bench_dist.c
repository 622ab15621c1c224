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
 *  (c) "two_hosts": the models of (a) as 2 ranks x 1 thread on one host (mpirun's
 *      default transport between them: shared memory) and on two "hosts", network
 *      namespaces joined by a veth pair (tests/cluster/netns.sh: TCP through the
 *      kernel's network stack between two namespaces of this machine, not a wire),
 *      both with --bind-to none, alternated over 3 rounds (shm, tcp, shm, tcp, ...): per
 *      round images/s and comm_s as in (a); one "two_hosts_ratio" line per model, the
 *      median over rounds of tcp / shm images/s. Then "two_hosts_allreduce": the
 *      exchange alone, in the same two layouts, alternated: the seconds of one sum of S
 *      MB of doubles over the 2 ranks (vt_dist_sum_f64: MPI_Iallreduce), the median of 5
 *      after a warm-up, for S = 23 (ViT-Ti's gradients) and 346 (ViT-B's), and the
 *      median ratio tcp / shm. Needs root, `ip` and `unshare`; otherwise skipped with a
 *      line on stderr. (This binary is its own worker for the exchange: run under
 *      mpirun with VT_BENCH_ALLREDUCE_MB=S it times that sum and rank 0 prints
 *      "allreduce_s <seconds>".)
 * Usage: bench_dist [substring] - only the rows whose "dist_train/<model>",
 * "block_backward/<model>" or "two_hosts/<model>" name contains it (one that matches no
 * row is an error).
 * VT_BIN: the vitrain binary (default ./vitrain). VT_BENCH_QUICK=1: batches divided by 8
 * (ViT-B: batch 2), one timed step. Each row names the CPU model and the kernel level. */
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "config.h"
#include "dist.h"
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

/* Run one layout; medians of img/s and comm_s over steps > warm. launch: the launcher
 * of 2 ranks (NULL: mpirun -np ranks --bind-to core, or none for 1 rank), tag: names the
 * run directory. Returns 0 on success. */
static int run_layout(const char *bin, const model_case *mc, int ranks, int threads, int batch, int steps,
                      int warm, const char *launch, const char *tag, double *img_s, double *comm_s) {
    char cfg[256], dir[256], log[300], cmd[4096];
    snprintf(cfg, sizeof cfg, "%s/%s.json", tmpdir, mc->name);
    snprintf(dir, sizeof dir, "%s/%s_%dx%d%s", tmpdir, mc->name, ranks, threads, tag);
    snprintf(log, sizeof log, "%s.log", dir);
    FILE *f = fopen(cfg, "w");
    if (!f) return 1;
    fprintf(f, "{\"model\": {\"preset\": \"%s\", \"img_size\": %d, \"patch_size\": %d, \"num_classes\": %d, "
            "\"in_chans\": 3, \"drop_path\": 0},\n \"data\": {\"kind\": \"synthetic\", \"train_size\": %d, "
            "\"val_size\": 8},\n \"train\": {\"batch_size\": %d, \"steps\": %d, \"log_every\": 1, "
            "\"eval_every\": 0, \"ckpt_every\": 0},\n \"runtime\": {\"progress\": \"never\"}}\n",
            mc->preset, mc->img, mc->patch, mc->classes, batch * steps, batch, steps);
    fclose(f);
    if (launch)
        snprintf(cmd, sizeof cmd, "rm -rf %s; %s %s %s --threads %d --run-dir %s 2>%s", dir, launch, bin, cfg,
                 threads, dir, log);
    else if (ranks > 1)
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
            if (run_layout(bin, mc, R, T, batch, steps, warm, NULL, "", &img[l], &comm[l])) return 1;
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

/* ---- (c) one host vs two network namespaces ------------------------------------------ */

#define TWO_HOSTS_NET "10.231.19"

static char netns_prefix[32];

static void netns_down(void) {
    char cmd[256];
    if (!netns_prefix[0]) return;
    snprintf(cmd, sizeof cmd, "tests/cluster/netns.sh down %s >/dev/null 2>&1", netns_prefix);
    if (system(cmd) != 0) fprintf(stderr, "bench_dist: could not remove the namespaces %s-*\n", netns_prefix);
    netns_prefix[0] = '\0';
}

static void netns_down_on_signal(int sig) {
    netns_down();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Under mpirun with VT_BENCH_ALLREDUCE_MB=mb: the median seconds of 5 sums of mb MB
 * of doubles over the ranks (after one warm-up), printed by rank 0. */
static int allreduce_worker(int *argc, char ***argv, int mb) {
    if (vt_dist_init(argc, argv) != VT_OK || vt_dist_start(0, "allreduce") != 0) return vt_dist_exit(1);
    int n = (int)((size_t)mb * 1000000 / sizeof(double));
    double *v = malloc(sizeof(double) * (size_t)n), t[5];
    for (int i = 0; i < n; i++) v[i] = 1.0;
    vt_dist_sum_f64(v, n);
    for (int r = 0; r < 5; r++) {
        double t0 = bench_now();
        vt_dist_sum_f64(v, n);
        t[r] = bench_now() - t0;
    }
    if (vt_dist_root()) printf("allreduce_s %.6f\n", bench_median(t, 5));
    free(v);
    return vt_dist_exit(0);
}

/* One layout's seconds per sum (launch: its mpirun command), or -1. */
static double time_allreduce(const char *launch, const char *self, int mb) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s -x VT_BENCH_ALLREDUCE_MB=%d %s 2>&1", launch, mb, self);
    FILE *f = popen(cmd, "r");
    double s = -1;
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "allreduce_s ", 12)) s = atof(line + 12);
    if (f) pclose(f);
    if (s < 0) fprintf(stderr, "bench_dist: '%s' printed no time\n", cmd);
    return s;
}

static int bench_two_hosts(const char *bin, const char *filter, int quick, const char *isa) {
    const int warm = 2, steps = warm + (quick ? 1 : 2), rounds = 3;
    int wanted = 0;
    for (size_t k = 0; k < sizeof models / sizeof models[0]; k++) {
        char name[96];
        snprintf(name, sizeof name, "two_hosts/%s", models[k].name);
        wanted |= !filter || strstr(name, filter);
    }
    wanted |= filter && strstr("two_hosts/allreduce", filter);
    if (!wanted) return 0;
    char cmd[4096], hosts[300], netns_sh[1024], abs_bin[1024];
    if (geteuid() != 0 || !realpath("tests/cluster/netns.sh", netns_sh) || !realpath(bin, abs_bin) ||
        system("{ command -v ip && command -v unshare; } >/dev/null 2>&1") != 0) {
        fprintf(stderr, "bench_dist: two_hosts skipped: needs root, ip, unshare and the repository root as "
                "the working directory\n");
        return 0;
    }
    snprintf(netns_prefix, sizeof netns_prefix, "vtb-%d", (int)getpid() % 10000000);
    atexit(netns_down);
    signal(SIGINT, netns_down_on_signal);
    signal(SIGTERM, netns_down_on_signal);
    signal(SIGHUP, netns_down_on_signal);
    snprintf(cmd, sizeof cmd, "%s up %s " TWO_HOSTS_NET, netns_sh, netns_prefix);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_dist: two_hosts skipped: the network namespaces cannot be made\n");
        netns_prefix[0] = '\0';
        return 0;
    }
    snprintf(hosts, sizeof hosts, "%s/hosts", tmpdir);
    FILE *f = fopen(hosts, "w");
    if (!f) return 1;
    fprintf(f, "%s-a slots=1\n%s-b slots=1\n", netns_prefix, netns_prefix);
    fclose(f);
    const char *root = geteuid() == 0 ? " --allow-run-as-root" : "";
    char shm[256], tcp[4096];
    snprintf(shm, sizeof shm, "mpirun -np 2 --bind-to none%s", root);
    snprintf(tcp, sizeof tcp, "%s on %s-a mpirun -np 2 --bind-to none%s --hostfile %s --mca plm_rsh_agent "
             "'%s rsh' --mca btl tcp,self --mca btl_tcp_if_include " TWO_HOSTS_NET ".0/24 "
             "--mca oob_tcp_if_include " TWO_HOSTS_NET ".0/24", netns_sh, netns_prefix, root, hosts, netns_sh);
    int rc = 0;
    for (size_t k = 0; k < sizeof models / sizeof models[0] && !rc; k++) {
        const model_case *mc = &models[k];
        char name[96];
        snprintf(name, sizeof name, "two_hosts/%s", mc->name);
        if (filter && !strstr(name, filter)) continue;
        int batch = quick ? mc->batch / 8 : mc->batch;
        double ratio[8];
        for (int r = 0; r < rounds && !rc; r++) {
            double img[2], comm[2];
            static const char *layout[2] = {"shm_one_host", "tcp_two_namespaces"};
            for (int l = 0; l < 2 && !rc; l++) {
                rc = run_layout(abs_bin, mc, 2, 1, batch, steps, warm, l ? tcp : shm, layout[l], &img[l], &comm[l]);
                if (rc) break;
                double step_s = batch / img[l];
                printf("{\"bench\":\"two_hosts\",\"model\":\"%s\",\"layout\":\"%s\",\"round\":%d,"
                       "\"ranks\":2,\"threads\":1,\"batch\":%d,\"img_per_s\":%.2f,\"step_s\":%.4f,"
                       "\"comm_s\":%.5f,\"comm_pct\":%.2f,\"cpu\":\"%s\",\"isa\":\"%s\"}\n", mc->name,
                       layout[l], r + 1, batch, img[l], step_s, comm[l], 100.0 * comm[l] / step_s, cpu, isa);
                fflush(stdout);
                fprintf(stderr, "%-12s round %d %-18s %8.2f img/s, step %.3f s, comm %.4f s (%.2f%%)\n",
                        mc->name, r + 1, layout[l], img[l], step_s, comm[l], 100.0 * comm[l] / step_s);
            }
            if (!rc) ratio[r] = img[1] / img[0];
        }
        if (rc) break;
        double med = bench_median(ratio, rounds);
        printf("{\"bench\":\"two_hosts_ratio\",\"model\":\"%s\",\"tcp_over_shm\":%.4f,\"rounds\":%d,"
               "\"cpu\":\"%s\",\"isa\":\"%s\"}\n", mc->name, med, rounds, cpu, isa);
        fprintf(stderr, "%-12s tcp between namespaces / shared memory: %.3f (median of %d rounds)\n", mc->name,
                med, rounds);
        fflush(stdout);
    }
    char self[1024];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = '\0';
    static const int sizes[] = {23, 346};
    for (int k = 0; k < 2 && !rc && (!filter || strstr("two_hosts/allreduce", filter)); k++) {
        int mb = quick ? sizes[k] / 8 : sizes[k];
        double ratio[8];
        for (int r = 0; r < rounds && !rc; r++) {
            double sec[2];
            static const char *layout[2] = {"shm_one_host", "tcp_two_namespaces"};
            for (int l = 0; l < 2 && !rc; l++) {
                sec[l] = time_allreduce(l ? tcp : shm, self, mb);
                if (sec[l] <= 0) {
                    rc = 1;
                    break;
                }
                printf("{\"bench\":\"two_hosts_allreduce\",\"mb\":%d,\"layout\":\"%s\",\"round\":%d,"
                       "\"ranks\":2,\"seconds\":%.6f,\"gb_per_s\":%.3f,\"cpu\":\"%s\",\"isa\":\"%s\"}\n",
                       mb, layout[l], r + 1, sec[l], mb / 1000.0 / sec[l], cpu, isa);
                fflush(stdout);
                fprintf(stderr, "allreduce %4d MB round %d %-18s %.4f s (%.3f GB/s of buffer)\n", mb, r + 1,
                        layout[l], sec[l], mb / 1000.0 / sec[l]);
            }
            if (!rc) ratio[r] = sec[1] / sec[0];
        }
        if (rc) break;
        double med = bench_median(ratio, rounds);
        printf("{\"bench\":\"two_hosts_allreduce_ratio\",\"mb\":%d,\"tcp_over_shm_seconds\":%.4f,"
               "\"rounds\":%d,\"cpu\":\"%s\",\"isa\":\"%s\"}\n", mb, med, rounds, cpu, isa);
        fprintf(stderr, "allreduce %4d MB: tcp between namespaces / shared memory, seconds: %.3f (median of %d)\n",
                mb, med, rounds);
        fflush(stdout);
    }
    netns_down();
    return rc;
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
    const char *worker = getenv("VT_BENCH_ALLREDUCE_MB");
    if (worker && *worker) return allreduce_worker(&argc, &argv, atoi(worker));
    const char *filter = argc > 1 ? argv[1] : NULL;
    if (argc > 2 || (filter && !strstr("dist_train/vit_ti4_32 dist_train/vit_s16_224 block_backward/vit_b16_224 "
                                       "two_hosts/vit_ti4_32 two_hosts/vit_s16_224 two_hosts/allreduce", filter))) {
        fprintf(stderr, "usage: bench_dist [substring of dist_train/vit_ti4_32, dist_train/vit_s16_224, "
                "block_backward/vit_b16_224, two_hosts/vit_ti4_32, two_hosts/vit_s16_224, "
                "two_hosts/allreduce]\n");
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
    if (!rc) rc = bench_two_hosts(bin, filter, quick, vt_k.name);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "bench_dist: could not remove %s\n", tmpdir);
    return rc;
}
