/* e2e_dist.c - data-parallel training under mpirun (dist.h), end to end through the
 * built binary ($VT_BIN, default ./vitrain; run from the repository root) on
 * configs/synthetic_tiny.json with every random element of the recipe on (dropout,
 * attention dropout, drop-path, mixup + cutmix, random erasing, flips, label smoothing):
 *   - 2 ranks x 1 thread equal 1 process x 1 thread over 24 steps: per-step losses within
 *     1e-5 relative, gradient norms within 1e-4, final weights within 2e-4 (float summation
 *     order only); the same with the TCP transport alone (--mca btl tcp,self);
 *   - the same with gradient accumulation (batch 16 x 2 micro-batches);
 *   - 1 rank under mpirun equals no mpirun bit for bit (losses, weights);
 *   - `vitrain eval` sharded over 2 and 3 ranks (and over 3 with eval.max_samples 101, not a
 *     multiple of 3): top-1, top-5, n and the patch-shuffled
 *     top-1 equal one process's, and the gathered --logits file is the same bytes; the
 *     same on 2 ranks for an image folder (paths and class names in the archive);
 *   - resume across rank counts (2 -> 1 and 1 -> 2, stopped mid-epoch) continues the
 *     uninterrupted run within the same tolerances;
 *   - only rank 0 writes the run directory, on --resume too: repeated resumes of 4 ranks
 *     on one shared directory succeed, and so do a run and its resume where the other
 *     ranks see the directory read-only (a read-only bind mount of their own);
 *   - a rank killed with SIGKILL ends the job: mpirun exits non-zero within 30 s naming
 *     the rank; a rank stopped with SIGSTOP (hung) the same, through the watchdog
 *     (runtime.comm_timeout 3 s), whose message names rank 0, its host and what it waited
 *     for; in both cases the last checkpoint evaluates and --resume continues from it;
 *   - bad inputs: a batch the ranks do not divide, ranks given different configs or
 *     running different builds, a config error, a corrupt image read by one rank: one
 *     clear message, every rank exits non-zero, no hang, nothing written for the errors
 *     found before any work;
 *   - dist.h's collectives themselves, run as `mpirun -np 3 e2e_dist --ranks` (and 2 ranks
 *     over TCP): error agreement with the failing rank's message, check_same naming the
 *     differing rank, sums, the strided gather, the gradient buckets (many small
 *     buckets started out of order by ready() marks, exact integer sums, re-armed twice),
 *     and the watchdog's limit growing with the work between exchanges.
 * mpirun gets --oversubscribe (2 cores here) and --allow-run-as-root when run as root. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "safetensors.h"
#include "dist.h"
#include "dist_runs.h"
#include "e2e_util.h"
#include "kernels.h"
#include "harness.h"
#include "image_fixtures.h"
#include "mpi_launch.h"
#include "npz_read.h"

#define CFG "configs/synthetic_tiny.json"
/* 256 samples / 32 = 8 steps per epoch, 3 epochs; every random element on */
#define RECIPE                                                                                    \
    "--set data.train_size=256 --set train.epochs=3 --set model.drop_rate=0.1 "                   \
    "--set model.attn_drop_rate=0.1 --set model.drop_path=0.2 --set data.mixup=0.8 "              \
    "--set data.cutmix=1.0 --set data.reprob=0.25 --set train.label_smoothing=0.1 "               \
    "--set data.hflip=0.5 --set train.log_every=1 --set train.eval_every=1"

static char bin[1024], self_exe[1024], tmp[256];

/* ---- training parity ------------------------------------------------------------------ */

static char ref_dir[512];

/* Whether run directories a and b logged the same `steps` train records, bit for bit. */
static int same_steps(const char *a, const char *b, int steps) {
    train_log x, y;
    double ex, ey;
    read_log(a, &x, &ex);
    read_log(b, &y, &ey);
    int same = x.n == steps && x.n == y.n;
    for (int i = 0; same && i < x.n; i++) same = !strcmp(x.raw[i], y.raw[i]);
    return same;
}

static void test_parity(void) {
    snprintf(ref_dir, sizeof ref_dir, "%s/one", tmp);
    int rc = run("%s " CFG " " RECIPE " --threads 1 --run-dir %s 2>%s.log", bin, ref_dir, ref_dir);
    CHECK(rc == 0, "single-process run exit %d", rc);

    char d[512];
    snprintf(d, sizeof d, "%s/np1", tmp);
    rc = run("%s %s " CFG " " RECIPE " --threads 1 --run-dir %s 2>%s.log", mpirun(1, NULL), bin, d, d);
    CHECK(rc == 0, "mpirun -np 1 exit %d", rc);
    CHECK(same_steps(ref_dir, d, 24), "mpirun -np 1: every step's loss and gradient norm equal no mpirun bit for bit");
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", ref_dir);
    snprintf(pb, sizeof pb, "%s/last.safetensors", d);
    int bw = 0;
    weights_diff(pa, pb, &bw);
    CHECK(bw, "mpirun -np 1: final weights equal no mpirun bit for bit");

    static const struct { const char *name, *extra; } transports[] = {
        {"np2", NULL}, {"np2_tcp", "--mca btl tcp,self"}};
    for (int k = 0; k < 2; k++) {
        snprintf(d, sizeof d, "%s/%s", tmp, transports[k].name);
        rc = run("%s %s " CFG " " RECIPE " --threads 1 --run-dir %s 2>%s.log", mpirun(2, transports[k].extra),
                 bin, d, d);
        CHECK(rc == 0, "mpirun -np 2 %s exit %d", transports[k].extra ? transports[k].extra : "", rc);
        check_same_run(ref_dir, d, 24, transports[k].name);
        char log[600];
        snprintf(log, sizeof log, "%s.log", d);
        CHECK(count_in_file(log, "final: top-1") == 1, "%s: rank 0 alone prints the final line",
              transports[k].name);
        char m[600];
        snprintf(m, sizeof m, "%s/metrics.jsonl", d);
        CHECK(count_in_file(m, "\"ranks\":2,\"comm_s\":") == 24, "%s: train records name the ranks and "
              "the time in communication", transports[k].name);
    }

    /* gradient accumulation: the exchange runs on the last micro-batch only */
    char acc1[512];
    snprintf(acc1, sizeof acc1, "%s/accum1", tmp);
    snprintf(d, sizeof d, "%s/accum2", tmp);
    rc = run("%s " CFG " " RECIPE " --set train.batch_size=16 --set train.accum_steps=2 --threads 1 "
             "--run-dir %s 2>%s.log", bin, acc1, acc1);
    CHECK(rc == 0, "accumulating single-process run exit %d", rc);
    rc = run("%s %s " CFG " " RECIPE " --set train.batch_size=16 --set train.accum_steps=2 --threads 1 "
             "--run-dir %s 2>%s.log", mpirun(2, NULL), bin, d, d);
    CHECK(rc == 0, "accumulating 2-rank run exit %d", rc);
    check_same_run(acc1, d, 24, "np2 accum_steps=2");
}

/* ---- the bf16 product path: rank 0's on every rank ------------------------------------ */

/* Ranks told different bf16 paths (VT_BF16_PATH per rank, mpirun's MPMD form) all run
 * rank 0's: the run equals bit for bit (every step's loss and gradient norm, the final
 * weights) one whose ranks are all told rank 0's path, and says the path once; a run
 * whose ranks all take the other path differs (the paths sum in other orders), so the
 * comparison can fail. Needs a path besides fma on this CPU. */
static void test_bf16_path_of_rank0(void) {
    char err[256], why[256];
    int other = -1;
    if (vt_kernels_init(err, sizeof err) == 0)
        for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
            vt_kernels t = vt_k;
            if (p != VT_BF16_FMA && vt_bf16_path_entries((vt_bf16_path)p, vt_k.isa, &t, why, sizeof why) == 0)
                other = p;
        }
    if (other < 0) {
        fprintf(stderr, "e2e_dist: this CPU offers no bf16 path but fma; rank 0's path on every rank is not tested\n");
        return;
    }
    const char *o = vt_bf16_path_name((vt_bf16_path)other);
#define BF16_RUN CFG " --set train.precision=bf16 --set train.steps=4 --set train.log_every=1 --threads 1"
    char same[512], mixed[512], others[512];
    snprintf(same, sizeof same, "%s/bf16_fma", tmp);
    snprintf(mixed, sizeof mixed, "%s/bf16_mixed", tmp);
    snprintf(others, sizeof others, "%s/bf16_%s", tmp, o);
    int rc = run("%s env VT_BF16_PATH=fma %s " BF16_RUN " --run-dir %s 2>%s.log", mpirun(2, NULL), bin, same, same);
    CHECK(rc == 0, "2 ranks told VT_BF16_PATH=fma: exit %d", rc);
    rc = run("%s env VT_BF16_PATH=fma %s " BF16_RUN " --run-dir %s : -np 1 env VT_BF16_PATH=%s %s " BF16_RUN
             " --run-dir %s 2>%s.log", mpirun(1, NULL), bin, mixed, o, bin, mixed, mixed);
    CHECK(rc == 0, "rank 0 told VT_BF16_PATH=fma, rank 1 %s: exit %d", o, rc);
    rc = run("%s env VT_BF16_PATH=%s %s " BF16_RUN " --run-dir %s 2>%s.log", mpirun(2, NULL), o, bin, others, others);
    CHECK(rc == 0, "2 ranks told VT_BF16_PATH=%s: exit %d", o, rc);
#undef BF16_RUN
    CHECK(same_steps(same, mixed, 4), "ranks told fma and %s: every step's loss and gradient norm those of all ranks "
          "on fma", o);
    char pa[600], pb[600], pc[600], log[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", same);
    snprintf(pb, sizeof pb, "%s/last.safetensors", mixed);
    snprintf(pc, sizeof pc, "%s/last.safetensors", others);
    int bw = 0, bo = 1;
    weights_diff(pa, pb, &bw);
    CHECK(bw, "ranks told fma and %s: final weights those of all ranks on fma, bit for bit", o);
    CHECK(weights_diff(pa, pc, &bo) > 0 && !bo, "all ranks on %s: other weights than all on fma (the test can fail)",
          o);
    snprintf(log, sizeof log, "%s.log", mixed);
    CHECK(count_in_file(log, "bf16 products on the fma path") == 1 && count_in_file(log, "every rank on this path") == 1,
          "ranks told fma and %s: rank 0's path said once, as every rank's", o);
}

/* ---- sharded evaluation ---------------------------------------------------------------- */

static void test_eval(void) {
    char out[512], npy[512];
    snprintf(out, sizeof out, "%s/eval1", tmp);
    int rc = run("%s eval " CFG " --checkpoint %s/last.safetensors --threads 1 --logits %s.npz --patch-shuffle "
                 "--seed 3 >%s.json 2>/dev/null", bin, ref_dir, out, out);
    CHECK(rc == 0, "eval exit %d", rc);
    char *one = NULL;
    {
        char p[600];
        snprintf(p, sizeof p, "%s.json", out);
        one = test_read_file(p, NULL);
    }
    for (int np = 2; np <= 3; np++) {
        snprintf(npy, sizeof npy, "%s/eval%d", tmp, np);
        rc = run("%s %s eval " CFG " --checkpoint %s/last.safetensors --threads 1 --logits %s.npz "
                 "--patch-shuffle --seed 3 >%s.json 2>%s.err", mpirun(np, NULL), bin, ref_dir, npy, npy, npy);
        CHECK(rc == 0, "eval on %d ranks exit %d", np, rc);
        char p[600];
        snprintf(p, sizeof p, "%s.json", npy);
        char *got = test_read_file(p, NULL);
        char f1[32] = "", f5[32] = "", n1[32] = "", g1[32] = "", g5[32] = "", gn[32] = "", fs[32] = "",
             gs[32] = "";
        if (one && got) {
            json_num(one, "top1", f1, sizeof f1);
            json_num(one, "top5", f5, sizeof f5);
            json_num(one, "n", n1, sizeof n1);
            json_num(one, "shuffled_top1", fs, sizeof fs);
            json_num(got, "top1", g1, sizeof g1);
            json_num(got, "top5", g5, sizeof g5);
            json_num(got, "n", gn, sizeof gn);
            json_num(got, "shuffled_top1", gs, sizeof gs);
        }
        CHECK(*fs && !strcmp(fs, gs), "%d ranks: patch-shuffled top-1 %s, one process %s", np, gs, fs);
        CHECK(got && one && *f1 && !strcmp(f1, g1) && !strcmp(f5, g5) && !strcmp(n1, gn) && !strcmp(n1, "256"),
              "%d ranks: top-1 %s top-5 %s n %s, one process %s %s %s", np, g1, g5, gn, f1, f5, n1);
        CHECK(got && !strchr(strchr(got, '\n') ? strchr(got, '\n') + 1 : "", '{'), "%d ranks: one JSON line "
              "(rank 0's)", np);
        free(got);
        char a[600], b[600];
        snprintf(a, sizeof a, "%s.npz", out);
        snprintf(b, sizeof b, "%s.npz", npy);
        size_t la, lb;
        char *x = test_read_file(a, &la), *y = test_read_file(b, &lb);
        CHECK(x && y && la == lb && !memcmp(x, y, la), "%d ranks: the gathered logits equal one process's "
              "bit for bit", np);
        free(x);
        free(y);
    }
    free(one);
    /* eval.max_samples: the first 101 samples of the split, sharded 34 / 34 / 33 over 3 ranks */
    snprintf(out, sizeof out, "%s/evalmax", tmp);
    rc = run("%s eval " CFG " --checkpoint %s/last.safetensors --threads 1 --set eval.max_samples=101 --logits "
             "%s1.npz >%s1.json 2>/dev/null && %s %s eval " CFG " --checkpoint %s/last.safetensors --threads 1 "
             "--set eval.max_samples=101 --logits %s3.npz >%s3.json 2>/dev/null",
             bin, ref_dir, out, out, mpirun(3, NULL), bin, ref_dir, out, out);
    char p1[600], p3[600], t1[32] = "", t3[32] = "", m1[32] = "", m3[32] = "";
    snprintf(p1, sizeof p1, "%s1.json", out);
    snprintf(p3, sizeof p3, "%s3.json", out);
    char *j1 = test_read_file(p1, NULL), *j3 = test_read_file(p3, NULL);
    if (j1 && j3) {
        json_num(j1, "top1", t1, sizeof t1);
        json_num(j3, "top1", t3, sizeof t3);
        json_num(j1, "n", m1, sizeof m1);
        json_num(j3, "n", m3, sizeof m3);
    }
    CHECK(rc == 0 && !strcmp(m1, "101") && !strcmp(m3, "101") && *t1 && !strcmp(t1, t3),
          "eval.max_samples 101: exit %d, n %s / %s, top-1 one process %s, 3 ranks %s", rc, m1, m3, t1, t3);
    free(j1);
    free(j3);
    snprintf(p1, sizeof p1, "%s1.npz", out);
    snprintf(p3, sizeof p3, "%s3.npz", out);
    CHECK(same_bytes(p1, p3), "eval.max_samples 101: the logits of 3 ranks equal one process's bit for bit");

    /* an image folder: the archive also holds the file paths and class names (3 classes,
     * fewer than the model's 4; 7 images each, so the shards differ in size) */
    char ck[512], root[512], p[700];
    snprintf(ck, sizeof ck, "%s/rgb", tmp);
    rc = run("%s " CFG " --set model.in_chans=3 --set data.train_size=64 --set train.epochs=1 --threads 1 "
             "--run-dir %s >/dev/null 2>&1", bin, ck);
    CHECK(rc == 0, "3-channel checkpoint for the image-folder eval: exit %d", rc);
    snprintf(root, sizeof root, "%s/evalfolder", tmp);
    static const char *classes[] = {"ant", "bee", "cat"};
    snprintf(p, sizeof p, "%s", root);
    mkdir(p, 0777);
    for (int s = 0; s < 2; s++) {
        snprintf(p, sizeof p, "%s/%s", root, s ? "val" : "train");
        mkdir(p, 0777);
        for (int c = 0; c < 3; c++) {
            snprintf(p, sizeof p, "%s/%s/%s", root, s ? "val" : "train", classes[c]);
            mkdir(p, 0777);
        }
    }
    for (int i = 0; i < 21; i++) {
        snprintf(p, sizeof p, "%s/val/%s/%02d.png", root, classes[i % 3], i);
        fx_png_pattern(p, 10 + i, 12 + i % 5, 3);
    }
    char f1[600], f2[600];
    snprintf(f1, sizeof f1, "%s/folder1.npz", tmp);
    snprintf(f2, sizeof f2, "%s/folder2.npz", tmp);
    for (int np = 1; np <= 2; np++) {
        rc = run("%s %s eval --checkpoint %s/last.safetensors --set data.kind=imagefolder --set data.root=%s "
                 "--threads 1 --logits %s >/dev/null 2>%s.err", np > 1 ? mpirun(np, NULL) : "", bin, ck, root,
                 np == 1 ? f1 : f2, np == 1 ? f1 : f2);
        CHECK(rc == 0, "image-folder eval on %d rank%s: exit %d", np, np > 1 ? "s" : "", rc);
    }
    snprintf(p, sizeof p, "%s.err", f2);
    CHECK(count_in_file(p, "21 images in 3 classes") == 1, "2 ranks: the dataset line once (rank 0's)");
    size_t la, lb;
    char *x = test_read_file(f1, &la), *y = test_read_file(f2, &lb);
    CHECK(x && y && la == lb && !memcmp(x, y, la), "image folder on 2 ranks: the archive (logits, labels, "
          "paths, class names) equals one process's bit for bit");
    npz_array paths = {0}, names = {0};
    int have = x && npz_find((const unsigned char *)x, la, "paths", &paths) &&
               npz_find((const unsigned char *)x, la, "class_names", &names);
    CHECK(have && paths.ndim == 1 && paths.shape[0] == 21 && names.ndim == 1 && names.shape[0] == 3,
          "the archive holds 21 paths and 3 class names");
    free(x);
    free(y);
}

/* ---- resume across rank counts --------------------------------------------------------- */

static void test_resume(void) {
    static const struct { int first, second, stop; } cases[] = {{2, 1, 11}, {1, 2, 13}};
    for (int k = 0; k < 2; k++) {
        char d[512], what[64];
        snprintf(d, sizeof d, "%s/resume%d%d", tmp, cases[k].first, cases[k].second);
        snprintf(what, sizeof what, "resume %d -> %d ranks", cases[k].first, cases[k].second);
        int rc = run("%s %s " CFG " " RECIPE " --threads 1 --run-dir %s --stop-after %d 2>%s.log1",
                     cases[k].first > 1 ? mpirun(cases[k].first, NULL) : "", bin, d, cases[k].stop, d);
        CHECK(rc == 0, "%s: first part exit %d", what, rc);
        rc = run("%s %s " CFG " " RECIPE " --threads 1 --resume %s 2>%s.log2",
                 cases[k].second > 1 ? mpirun(cases[k].second, NULL) : "", bin, d, d);
        CHECK(rc == 0, "%s: resumed part exit %d", what, rc);
        check_same_run(ref_dir, d, 24, what);
    }
}

/* Only rank 0 writes the run directory, on --resume too: resumes of 4 ranks on one
 * shared directory, one after another (each finishes the previous save's tidy), all
 * succeed; where the other ranks see the directory read-only (a read-only bind mount in
 * their own mount namespace, as NFS with root_squash would give them), a new run and its
 * resume succeed and leave a whole pair. */
static void test_rank0_writes(void) {
    const char *sets = "--set data.train_size=256 --set train.epochs=2 "
                       "--set train.keep_checkpoints=1 --threads 1";
    char d[512];
    snprintf(d, sizeof d, "%s/shared", tmp);
    int rc = run("%s %s " CFG " %s --stop-after 2 --run-dir %s 2>%s.log", mpirun(4, NULL), bin, sets,
                 d, d);
    CHECK(rc == 0, "4 ranks to step 2: exit %d", rc);
    /* The fault-injection build traces every file operation (durable.h): each rank into
     * its own trace, where only rank 0's may have any. */
    char fault[600], trace[600];
    const char *build = getenv("BUILD");
    snprintf(fault, sizeof fault, "%s/tests/vitrain_fault", build && *build ? build : "build");
    snprintf(trace, sizeof trace, "%s/shared-trace", d);
    int traced = access(fault, X_OK) == 0, ok = 0, others = 0;
    if (!traced) printf("note: %s not found: the shared-directory resumes run untraced\n", fault);
    for (int i = 0; i < 6; i++) {
        rc = run("%s sh -c 'VT_FAULT_TRACE=%s.$OMPI_COMM_WORLD_RANK exec \"$0\" \"$@\"' %s " CFG
                 " %s --stop-after %d --resume %s 2>%s.log", mpirun(4, NULL), trace,
                 traced ? fault : bin, sets, 3 + i, d, d);
        ok += rc == 0;
        if (rc != 0) fprintf(stderr, "shared resume %d: exit %d (log %s.log)\n", i, rc, d);
    }
    for (int r = 1; r < 4; r++) {
        char p[700];
        snprintf(p, sizeof p, "%s.%d", trace, r);
        others += access(p, F_OK) == 0;
    }
    snprintf(trace + strlen(trace), sizeof trace - strlen(trace), ".0");
    CHECK(ok == 6, "%d of 6 resumes of 4 ranks on a shared directory succeeded", ok);
    CHECK(!traced || (others == 0 && file_contains(trace, "link")),
          "only rank 0 wrote, linked or removed anything (%d other ranks did)", others);

    char ro[512], wrap[600];
    snprintf(ro, sizeof ro, "%s/rank0-only", tmp);
    snprintf(wrap, sizeof wrap, "%s/read_only_beyond_rank0.sh", tmp);
    FILE *f = fopen(wrap, "w");
    CHECK(f != NULL, "write %s", wrap);
    if (!f) return;
    fputs("#!/bin/sh\n# DIR CMD...: ranks other than 0 run CMD seeing DIR read-only\n"
          "d=$1; shift\n[ \"${OMPI_COMM_WORLD_RANK:-0}\" = 0 ] && exec \"$@\"\n"
          "exec unshare -m sh -c 'mount --bind \"$0\" \"$0\" && mount -o remount,bind,ro \"$0\" "
          "&& exec \"$@\"' \"$d\" \"$@\"\n", f);
    fclose(f);
    mkdir(ro, 0777);
    if (run("unshare -m sh -c 'mount --bind %s %s && mount -o remount,bind,ro %s && "
            "! touch %s/probe' 2>/dev/null", ro, ro, ro, ro) != 0) {
        printf("note: the rank-0-only directory test skipped: unshare -m cannot bind-mount a "
               "directory read-only here (needs root)\n");
        return;
    }
    rc = run("%s sh %s %s %s " CFG " %s --stop-after 4 --run-dir %s 2>%s.log", mpirun(2, NULL), wrap,
             ro, bin, sets, ro, ro);
    CHECK(rc == 0, "2 ranks, rank 1 seeing the run directory read-only: new run exit %d", rc);
    rc = run("%s sh %s %s %s " CFG " %s --stop-after 8 --resume %s 2>%s.log", mpirun(2, NULL), wrap,
             ro, bin, sets, ro, ro);
    CHECK(rc == 0, "the same: --resume exit %d", rc);
    vt_ckpt_pair p;
    vt_safetensors w;
    int whole = vt_ckpt_current(ro, &p) == VT_OK && p.step == 8 && vt_st_read(p.weights, &w) == VT_OK;
    if (whole) vt_st_free(&w);
    CHECK(whole, "latest names step 8's pair, whole");
}

/* ---- a killed rank ---------------------------------------------------------------------- */

static double mtime_of(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    return (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
}

/* Rank 1 sent sig (SIGKILL: dead, mpirun notices; SIGSTOP: hung, only the watchdog
 * notices, here after runtime.comm_timeout 3 s) right after a checkpoint. */
static void test_dead_peer(int sig) {
    const int hung = sig == SIGSTOP;
    char d[512], log[600], state[600], last[600];
    snprintf(d, sizeof d, "%s/%s", tmp, hung ? "hung" : "kill");
    snprintf(log, sizeof log, "%s.log", d);
    snprintf(state, sizeof state, "%s/latest", d); /* moves at each checkpoint (checkpoint.h) */
    snprintf(last, sizeof last, "%s/last.safetensors", d);
    /* epochs of 4096 steps (seconds), a checkpoint after each: the kill comes right after
     * one, so rank 0 is not writing the next */
    const char *sets = hung ? "--set data.train_size=131072 --set train.epochs=1000 --set train.eval_every=0 "
                              "--set train.log_every=64 --set runtime.comm_timeout=3"
                            : "--set data.train_size=131072 --set train.epochs=1000 --set train.eval_every=0 "
                              "--set train.log_every=64";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec %s %s " CFG " %s --threads 1 --run-dir %s 2>%s", mpirun(2, NULL), bin, sets,
             d, log);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    double t0 = now_s(), first = -1;
    pid_t victim = -1;
    int status = 0, exited = 0;
    while (now_s() - t0 < 120 && !exited) { /* the second checkpoint, then kill at once */
        double m = mtime_of(state);
        if (m > 0 && first < 0) first = m;
        if (first > 0 && m > first && victim < 0) {
            victim = rank_pid(pid, 1);
            if (victim > 0) kill(victim, sig);
            break;
        }
        exited = waitpid(pid, &status, WNOHANG) == pid;
        usleep(5000);
    }
    CHECK(victim > 0, "found rank 1 (pid %d) after two checkpoints", (int)victim);
    const char *what = hung ? "stopped" : "killed";
    double t_kill = now_s();
    while (!exited && now_s() - t_kill < 30) {
        exited = waitpid(pid, &status, WNOHANG) == pid;
        if (!exited) usleep(20000);
    }
    double took = now_s() - t_kill;
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    CHECK(exited, "the job ended within 30 s after rank 1 was %s (%.1f s)", what, took);
    CHECK(exited && WIFEXITED(status) && WEXITSTATUS(status) != 0, "mpirun exits non-zero (status %d)",
          WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    CHECK(count_in_file(log, "rank 1") >= 1, "the message names rank 1");
    if (hung) {
        char host[256] = "?", want[400];
        gethostname(host, sizeof host);
        snprintf(want, sizeof want, "rank 0 of 2 (host %s", host);
        CHECK(count_in_file(log, want) == 1 && count_in_file(log, "with no answer from the other ranks") >= 1,
              "the watchdog names rank 0, its host and what it waited for");
    }
    printf("note: the job ended %.2f s after rank 1 was %s\n", took, what);

    char e[600];
    snprintf(e, sizeof e, "%s.eval", d);
    int rc = run("%s eval " CFG " --checkpoint %s --threads 1 >%s 2>&1", bin, last, e);
    CHECK(rc == 0, "the last checkpoint evaluates (exit %d)", rc);
    vt_safetensors s;
    vt_ckpt_pair p;
    long long step = -1;
    if (vt_ckpt_current(d, &p) == VT_OK && vt_st_read(p.state, &s) == VT_OK) {
        const char *v = vt_st_meta(&s, "step");
        if (v) step = atoll(v);
        vt_st_free(&s);
    }
    CHECK(step > 0, "the resume state names its step (%lld)", step);
    rc = run("%s %s " CFG " %s --threads 1 --resume %s --stop-after %lld 2>%s.resume", mpirun(2, NULL), bin, sets,
             d, step + 8, d);
    CHECK(rc == 0, "--resume continues after the kill (exit %d)", rc);
    train_log t;
    double top1;
    read_log(d, &t, &top1);
    CHECK(t.last_step == step + 8, "the resumed run logged up to step %lld (last %d)", step + 8, t.last_step);
}

/* ---- bad inputs ------------------------------------------------------------------------ */

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

static void test_bad_inputs(void) {
    char d[512], log[600];
    struct { int np; const char *args; const char *needle; int code; } cases[] = {
        {2, CFG " --set train.batch_size=31", "train.batch_size 31 is not divisible by the 2 ranks", 2},
        {3, CFG, "train.batch_size 32 is not divisible by the 3 ranks", 2},
        {2, CFG " --set model.heads=3", "heads", 2},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        snprintf(d, sizeof d, "%s/bad%zu", tmp, k);
        snprintf(log, sizeof log, "%s.log", d);
        int rc = run("timeout 60 %s %s %s --threads 1 --run-dir %s >/dev/null 2>%s", mpirun(cases[k].np, NULL),
                     bin, cases[k].args, d, log);
        CHECK(rc == cases[k].code, "'%s' on %d ranks exits %d, got %d", cases[k].args, cases[k].np,
              cases[k].code, rc);
        CHECK(count_in_file(log, cases[k].needle) == 1, "'%s' on %d ranks: one message naming '%s'",
              cases[k].args, cases[k].np, cases[k].needle);
        CHECK(access(d, F_OK) != 0, "'%s' on %d ranks: no run directory written", cases[k].args, cases[k].np);
    }

    /* ranks given different configs (mpirun's MPMD form) */
    snprintf(d, sizeof d, "%s/mismatch", tmp);
    snprintf(log, sizeof log, "%s.log", d);
    int rc = run("timeout 60 %s %s " CFG " --set train.seed=1 --threads 1 --run-dir %s : -np 1 %s " CFG
                 " --set train.seed=2 --threads 1 --run-dir %s >/dev/null 2>%s", mpirun(1, NULL), bin, d, bin, d,
                 log);
    CHECK(rc != 0 && rc != 124, "ranks with different configs exit non-zero without hanging, got %d", rc);
    CHECK(count_in_file(log, "rank 1 of 2 runs a different config or options") == 1,
          "the mismatch is named once, with the rank");
    CHECK(access(d, F_OK) != 0, "mismatch: no run directory written");

    /* ranks running different builds: a copy of the binary whose build id (the sources'
     * hash, sent from the binary's bytes) differs in one digit */
    size_t blen = 0;
    char *image = test_read_file(bin, &blen);
    const char *id = vt_dist_build_id();
    int patched = 0;
    for (size_t o = 0; image && o + 17 <= blen; o++)
        if (!memcmp(image + o, id, 17)) {
            image[o + 15] = image[o + 15] == '0' ? '1' : '0';
            patched++;
        }
    CHECK(patched == 1, "the build id %s appears once in %s (%d)", id, bin, patched);
    char other[600];
    snprintf(other, sizeof other, "%s/vitrain_other_build", tmp);
    write_bytes(other, image, blen);
    chmod(other, 0755);
    free(image);
    snprintf(d, sizeof d, "%s/otherbuild", tmp);
    snprintf(log, sizeof log, "%s.log", d);
    rc = run("timeout 60 %s %s " CFG " --threads 1 --run-dir %s : -np 1 %s " CFG " --threads 1 --run-dir %s "
             ">/dev/null 2>%s", mpirun(1, NULL), bin, d, other, d, log);
    CHECK(rc == 2, "ranks running different builds exit 2 without hanging, got %d", rc);
    CHECK(count_in_file(log, "rank 1 of 2 runs a different build of vitrain") == 1,
          "the build mismatch is named once, with the rank");
    CHECK(access(d, F_OK) != 0, "build mismatch: no run directory written");

    /* a corrupt image in the train split: the rank that reads it stops every rank */
    char root[512], p[700];
    snprintf(root, sizeof root, "%s/folder", tmp);
    static const char *dirs[] = {"", "/train", "/train/a", "/train/b", "/val", "/val/a", "/val/b"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s%s", root, dirs[i]);
        mkdir(p, 0777);
    }
    for (int i = 0; i < 16; i++) {
        snprintf(p, sizeof p, "%s/train/%c/%02d.png", root, i % 2 ? 'b' : 'a', i);
        if (i == 9) write_bytes(p, "not a png at all", 16);
        else fx_png_pattern(p, 12 + i, 12, 3);
        snprintf(p, sizeof p, "%s/val/%c/%02d.png", root, i % 2 ? 'b' : 'a', i);
        fx_png_pattern(p, 12, 12, 3);
    }
    snprintf(d, sizeof d, "%s/corrupt", tmp);
    snprintf(log, sizeof log, "%s.log", d);
    rc = run("timeout 60 %s %s " CFG " --set data.kind=imagefolder --set data.root=%s --set model.in_chans=3 "
             "--set model.num_classes=2 --set train.batch_size=4 --set train.epochs=2 --threads 1 --run-dir %s "
             ">/dev/null 2>%s",
             mpirun(2, NULL), bin, root, d, log);
    CHECK(rc == 1, "a corrupt image on one rank: exit 1, got %d", rc);
    CHECK(count_in_file(log, "09.png") == 1, "the corrupt file is named once");
}

/* ---- dist.h's collectives, inside mpirun ----------------------------------------------- */

static int rank_checks(int expect) {
    vt_dist_init(NULL, NULL);
    const int R = vt_dist_size(), me = vt_dist_rank();
    CHECK(R == expect && me >= 0 && me < R, "rank %d of %d, expected %d ranks", me, R, expect);
    CHECK(vt_dist_start(0, "the same job") == 0, "start-up agreement");

    CHECK(vt_dist_agree(VT_OK) == VT_OK, "agree on success");
    vt_status st = vt_dist_agree(me == 1 ? vt_fail(VT_ERR_RUNTIME, "boom on %d", me) : VT_OK);
    CHECK(st == VT_ERR_RUNTIME && !strcmp(vt_last_error(), "rank 1: boom on 1"),
          "rank %d: agree gives rank 1's failure: %d '%s'", me, (int)st, vt_last_error());

    int same[4] = {1, 2, 3, 4};
    CHECK(vt_dist_check_same("the test buffer", same, sizeof same) == VT_OK, "identical buffers");
    if (me == R - 1) same[2] = 9;
    st = vt_dist_check_same("the test buffer", same, sizeof same);
    char want[128];
    snprintf(want, sizeof want, "the test buffer differs between rank 0 and rank %d (of %d)", R - 1, R);
    CHECK(st == VT_ERR_RUNTIME && !strcmp(vt_last_error(), want), "check_same names rank %d: '%s'", R - 1,
          vt_last_error());

    double f[2] = {me + 0.5, 1.0};
    int64_t i64[1] = {me};
    vt_dist_sum_f64(f, 2);
    vt_dist_sum_i64(i64, 1);
    CHECK(f[0] == R * (R - 1) / 2.0 + 0.5 * R && f[1] == R && i64[0] == R * (R - 1) / 2, "sums");

    enum { ROWS = 7, COLS = 3 };
    float mine[ROWS * COLS], full[ROWS * COLS];
    int n = 0;
    for (int r = me; r < ROWS; r += R, n++)
        for (int c = 0; c < COLS; c++) mine[n * COLS + c] = (float)(r * 10 + c);
    memset(full, 0, sizeof full);
    vt_dist_gather_strided(mine, ROWS, COLS * sizeof(float), full);
    int ok = 1;
    for (int r = 0; me == 0 && r < ROWS; r++)
        for (int c = 0; c < COLS; c++) ok &= full[r * COLS + c] == (float)(r * 10 + c);
    CHECK(ok, "strided rows gathered in order on rank 0");

    /* buckets of 64 floats over 1000: ready() marks out of bucket alignment, progress
     * calls between them, finish; twice, and once ready() without begin does nothing */
    enum { NG = 1000 };
    float *g = malloc(sizeof(float) * NG);
    vt_dist_grads *dg = vt_dist_grads_new(g, NG, 64);
    CHECK(dg != NULL, "buckets with %d ranks", R);
    for (int round = 0; round < 2 && dg; round++) {
        for (int i = 0; i < NG; i++) g[i] = (float)((me + 1) * (i % 7 + round));
        vt_dist_grads_ready(dg, 0); /* not armed: nothing */
        ok = 1;
        for (int i = 0; i < NG; i++) ok &= g[i] == (float)((me + 1) * (i % 7 + round));
        CHECK(ok, "ready() before begin leaves the gradients alone");
        vt_dist_grads_begin(dg);
        static const int64_t marks[] = {900, 640, 500, 300, 129, 0};
        for (int k = 0; k < 6; k++) {
            vt_dist_grads_ready(dg, -1);
            vt_dist_grads_ready(dg, marks[k]);
        }
        vt_dist_grads_finish(dg);
        ok = 1;
        for (int i = 0; i < NG; i++) ok &= g[i] == (float)((i % 7 + round) * R * (R + 1) / 2);
        CHECK(ok, "round %d: every bucket summed over the ranks", round);
    }
    vt_dist_grads_free(dg);
    free(g);
    CHECK(vt_dist_comm_seconds() > 0, "time in MPI counted");

    /* the watchdog scales with the work between exchanges: with a floor of 0.3 s, ranks
     * that worked 1 s wait up to 4 s, so the last rank arriving 1 s later (it worked 2 s)
     * does not trip it (if it did, MPI_Abort would end the job: test_collectives fails) */
    vt_dist_set_timeout(0.3);
    usleep(me == R - 1 ? 2000000 : 1000000);
    double one = 1.0;
    vt_dist_sum_f64(&one, 1);
    CHECK(one == R, "a peer 1 s late after 1 s of work does not trip the watchdog");
    vt_dist_set_timeout(VT_DIST_DEFAULT_TIMEOUT_S);

    int64_t fails[2] = {test_failed_count, test_passed_count};
    vt_dist_sum_i64(fails, 2);
    if (me == 0) printf("%lld passed, %lld failed\n", (long long)fails[1], (long long)fails[0]);
    fflush(stdout);
    return vt_dist_exit(fails[0] ? 1 : 0);
}

static void test_collectives(void) {
    static const struct { int np; const char *extra; } cases[] = {{3, NULL}, {2, "--mca btl tcp,self"}};
    for (int k = 0; k < 2; k++) {
        char out[512];
        snprintf(out, sizeof out, "%s/ranks%d.txt", tmp, k);
        int rc = run("timeout 120 %s %s --ranks %d >%s 2>&1", mpirun(cases[k].np, cases[k].extra), self_exe,
                     cases[k].np, out);
        char *s = test_read_file(out, NULL);
        int p = -1, f = -1;
        const char *line = s ? strstr(s, " passed, ") : NULL;
        while (line && line > s && line[-1] >= '0' && line[-1] <= '9') line--;
        if (line) sscanf(line, "%d passed, %d failed", &p, &f);
        CHECK(rc == 0 && p > 0 && f == 0, "collectives on %d ranks%s%s: exit %d, %d passed, %d failed:\n%s",
              cases[k].np, cases[k].extra ? " " : "", cases[k].extra ? cases[k].extra : "", rc, p, f, s ? s : "");
        if (p > 0) test_passed_count += p;
        free(s);
    }
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--ranks")) return rank_checks(atoi(argv[2]));
    e2e_bin(bin, sizeof bin);
    ssize_t n = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    self_exe[n > 0 ? n : 0] = '\0';
    if (run("mpirun --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "mpirun not found: install openmpi-bin (scripts/deps.sh)\n");
        return 1;
    }
    if (test_tmpdir(tmp, sizeof tmp, "e2e_dist")) return 1;
    test_collectives();
    test_parity();
    test_bf16_path_of_rank0();
    test_eval();
    test_resume();
    test_rank0_writes();
    test_bad_inputs();
    test_dead_peer(SIGKILL);
    test_dead_peer(SIGSTOP);
    return e2e_finish(tmp);
}
