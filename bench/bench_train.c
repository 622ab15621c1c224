/* bench_train.c - end-to-end speed benchmark (`make bench`). Not a test: prints figures.
 *
 * stdout: one JSON object per line, each naming the CPU ("cpu": /proc/cpuinfo's model
 * name, family and model) and the kernel level ("isa"); stderr: a readable table.
 * Measured in this run:
 *  (a) "fma_peak": FMA throughput with 16 independent AVX-512 chains (12 AVX2 chains on a
 *      CPU without AVX-512) on 1 thread and on 2 threads (each thread runs the loop;
 *      GFLOP/s = all threads' flops / wall time). Every utilisation below is relative to
 *      the peak of the same thread count measured here.
 *  (b) "attention": vt_op_attention forward + backward (dq, dk, dv) GFLOP/s for N = 65,
 *      197, 785 tokens, head dim 64, as many (batch, head) blocks as a training step
 *      has: 384 (ViT-Ti/4 at 32, batch 128 x 3 heads; ViT-B/16 at 224, batch 32 x 12
 *      heads) and 48 at 785 tokens (ViT-B/8's 785, batch 4 x 12); the best of 5 timed
 *      calls after one warm-up (a call is 1.2, 11 and 23 GFLOP: calls of a few
 *      milliseconds varied by 10% from run to run); the time is the forward's plus the
 *      backward's, not the copy of the upstream gradient between them (a serial 19 MB
 *      memcpy at 197 tokens: up to 2 ms from memory, against ~7 ms for the call on 2
 *      threads);
 *      flops = 12 N^2 hd per (batch, head) (two products forward, four backward);
 *      "pct_peak" against "peak_gflops", the best of the start measurement and one taken
 *      again before each row, as for the models below; the bf16 rows run on the product
 *      path training would choose (the probe, or VT_BF16_PATH) and name it ("bf16_path").
 *  (c) "train": images/s of a full training step (zero grad, forward, cross-entropy,
 *      backward, clip, AdamW and, in bf16 on the amx and dpbf16 paths, the weights' bf16
 *      copies) on synthetic data for ViT-Ti/4 at 32 (batch 128), ViT-S/16 at 224 (batch
 *      64), ViT-B/16 at 224 (batch 32);
 *      "infer": forward-only images/s of the same models and batches. 1 and 2 threads,
 *      each in "precision" fp32 and bf16 (train.precision, on every level: where the CPU
 *      has no bf16 instructions the bf16 rows run on the fma path, the float32 kernels on
 *      operands rounded to bf16). MFU = analytic FLOPs (vt_vit_flops per image, x3 for
 *      training) x images/s / measured peak ("peak_gflops": the best of the start
 *      measurement and one taken again before each row; the FMA peak for fp32 rows and
 *      bf16 rows on the fma path, the VDPBF16PS peak for bf16 rows on the amx and dpbf16
 *      paths). The bf16 rows' path is chosen once here (the probe, or VT_BF16_PATH) and
 *      set in VT_BF16_PATH for the children, so every row runs on it. Each model runs in a child
 *      (fork + exec of this binary with --child: an OpenMP runtime does not survive a bare
 *      fork), so "rss_mb" (ru_maxrss from wait4) is that model's peak resident set.
 *      Also per row: "page_faults_per_step" (minor faults during the timed steps: 0 once
 *      the arena has settled), "loss" (last step's loss; for infer the first logit),
 *      sanity values only, and where the step's memory goes: "arena_mb" (step arena
 *      bytes the last step used: activations, kept state, the first 3 N D and block
 *      outputs' grads) and "grad_region_mb" (the tape's grad region: one block's
 *      internal gradients, tape.h).
 * Timing is wall-clock (a shared machine's load lowers every figure; the peak is
 * re-measured in the same run so ratios stay meaningful).
 * Usage: bench_train [substring] - only the rows whose name contains it:
 * "attention/<precision>", "train/<model>/<precision>" or "infer/<model>/<precision>"
 * (one that matches no row is an error); the peaks are always measured.
 * Two warm-up steps (the arena settles into one block after the first) then 3 timed
 * steps (2 for ViT-B training).
 * VT_BENCH_CLOCK=cpu: the steps timed in CPU seconds per thread (step_clock).
 * VT_BENCH_QUICK=1: one timed step, batch sizes and attention blocks divided by 8,
 * attention only at 197 tokens.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fma_peak.h"
#include "kernels.h"
#include "vit_step.h"

/* Attention forward + backward GFLOP/s at nt threads, bf16 products or not; best of reps. */
static double bench_attention(int BH, int N, int hd, int nt, int reps, int bf16) {
    omp_set_num_threads(nt);
    vt_arena arena;
    vt_arena_init(&arena, (size_t)1 << 20);
    vt_tape tape;
    vt_tape_init(&tape, &arena);
    tape.bf16 = bf16;
    size_t n = (size_t)BH * N * hd;
    float *buf = vt_xmalloc(6 * n * sizeof(float));
    vt_rng r;
    vt_rng_seed(&r, 1);
    fill_uniform(buf, 3 * n, &r, 1.0f);
    float *dout = buf + 3 * n;
    fill_uniform(dout, n, &r, 1.0f);
    double best = 0;
    for (int it = 0; it < reps + 1; it++) {
        vt_arena_reset(&arena);
        vt_tape_clear(&tape);
        int64_t shape[4] = {BH, 1, N, hd};
        vt_tensor *q = vt_tensor_new(&arena, 1, 4, shape);
        vt_tensor *k = vt_tensor_new(&arena, 1, 4, shape);
        vt_tensor *v = vt_tensor_new(&arena, 1, 4, shape);
        memcpy(q->data, buf, n * sizeof(float));
        memcpy(k->data, buf + n, n * sizeof(float));
        memcpy(v->data, buf + 2 * n, n * sizeof(float));
        double t0 = bench_now();
        vt_tensor *o = vt_op_attention(&tape, q, k, v, 0.125f, 0.0f, vt_attention_keep_probs(N, hd, bf16));
        double t_fwd = bench_now() - t0;
        memcpy(o->grad, dout, n * sizeof(float)); /* the upstream gradient: not attention's work */
        t0 = bench_now();
        vt_tape_replay(&tape);
        double dt = t_fwd + bench_now() - t0;
        double gf = 12.0 * BH * (double)N * N * hd / dt * 1e-9;
        if (it > 0 && gf > best) best = gf;
    }
    free(buf);
    vt_tape_free(&tape);
    vt_arena_free(&arena);
    return best;
}

typedef struct {
    const char *name, *preset;
    int img, patch, batch, classes, train, bf16;
} model_case;

static const model_case cases[] = {
    {"vit_ti4_32", "vit_tiny", 32, 4, 128, 10, 1, 0},    {"vit_ti4_32", "vit_tiny", 32, 4, 128, 10, 1, 1},
    {"vit_s16_224", "vit_small", 224, 16, 64, 1000, 1, 0}, {"vit_s16_224", "vit_small", 224, 16, 64, 1000, 1, 1},
    {"vit_b16_224", "vit_base", 224, 16, 32, 1000, 1, 0}, {"vit_b16_224", "vit_base", 224, 16, 32, 1000, 1, 1},
    {"vit_ti4_32", "vit_tiny", 32, 4, 128, 10, 0, 0},    {"vit_ti4_32", "vit_tiny", 32, 4, 128, 10, 0, 1},
    {"vit_s16_224", "vit_small", 224, 16, 64, 1000, 0, 0}, {"vit_s16_224", "vit_small", 224, 16, 64, 1000, 0, 1},
    {"vit_b16_224", "vit_base", 224, 16, 32, 1000, 0, 0}, {"vit_b16_224", "vit_base", 224, 16, 32, 1000, 0, 1},
};
#define N_CASES (sizeof cases / sizeof cases[0])

/* The training and inference steps' clock: wall-clock seconds, or with VT_BENCH_CLOCK=cpu
 * the process's CPU seconds per thread (nt threads), which count the work done while
 * running (barrier waits included) on a machine shared with other work. */
static double step_clock(int nt) {
    const char *ck = getenv("VT_BENCH_CLOCK");
    return ck && !strcmp(ck, "cpu") ? bench_cpu_now() / nt : bench_now();
}

/* Runs in the child: build the model, time steps, print one JSON line. */
static int run_model(const model_case *mc, int nt, double peak, int quick) {
    omp_set_num_threads(nt);
    int B = quick ? (mc->batch / 8 > 0 ? mc->batch / 8 : 1) : mc->batch;
    vit_step st;
    if (vit_step_init(&st, mc->preset, mc->img, mc->patch, B, mc->classes, mc->train, mc->bf16)) return 1;
    int warm = 2, timed = quick ? 1 : (mc->train && st.m.D >= 768 ? 2 : 3);
    double t_total = 0, loss = 0, arena_mb = 0;
    long faults = 0;
    for (int it = 0; it < warm + timed; it++) {
        struct rusage ru0, ru1;
        getrusage(RUSAGE_SELF, &ru0);
        double t0 = step_clock(nt);
        loss = vit_step_run(&st);
        arena_mb = (double)st.arena.total_used / 1048576.0;
        if (it >= warm) {
            t_total += step_clock(nt) - t0;
            getrusage(RUSAGE_SELF, &ru1);
            faults += ru1.ru_minflt - ru0.ru_minflt;
        }
    }
    double ips = (double)B * timed / t_total;
    double flops = vit_step_flops(&st);
    double mfu = peak > 0 ? flops * ips * 1e-9 / peak : 0.0; /* 0: no peak given (bench_torch --vs) */
    char cpu[192];
    bench_cpu(cpu, sizeof cpu);
    printf("{\"bench\":\"%s\",\"cpu\":\"%s\",\"model\":\"%s\",\"precision\":\"%s\",\"img\":%d,\"batch\":%d,"
           "\"threads\":%d,\"isa\":\"%s\",\"bf16_path\":\"%s\",\"gemm_ctx\":\"%s\",\"img_per_s\":%.3f,\"step_s\":%.4f,\"gflop_per_img\":%.3f,\"mfu\":%.4f,"
           "\"loss\":%.4f,\"page_faults_per_step\":%ld,\"arena_mb\":%.1f,\"grad_region_mb\":%.1f",
           mc->train ? "train" : "infer", cpu, mc->name, mc->bf16 ? "bf16" : "fp32", mc->img, B, nt, vt_k.name,
           mc->bf16 ? vt_bf16_path_name((vt_bf16_path)vt_kernels_bf16_path()) : "-", vt_gemm_ctx.name, ips, t_total / timed, flops * 1e-9, mfu, loss, faults / timed, arena_mb, (double)st.tape.region_cap / 1048576.0);
    fflush(stdout);
    vit_step_free(&st);
    return 0;
}

/* The FMA peak (bf16: the VDPBF16PS peak) on nt threads measured again, kept in *best if
 * higher: the best peak this run has seen, which every row's utilisation divides by (a
 * measurement that lost a core to the host would inflate every figure after it). */
static void refresh_peak(double *best, int avx512, int bf16, int nt) {
    double pk = bf16 ? bf16_peak_gflops(nt) : fma_peak_gflops(avx512, nt);
    if (pk > *best) *best = pk;
}

/* Which peak a row's utilisation refers to (peak[kind][threads]): 0 the FMA peak (fp32 rows,
 * and bf16 rows on the fma path), 1 the VDPBF16PS peak (bf16 rows on the amx and dpbf16
 * paths). */
static int peak_kind(int bf16_row, int bf16_fma) { return bf16_row && !bf16_fma; }

/* The filter name of a model row: "train/<model>/<precision>" or "infer/<model>/<precision>". */
static const char *case_row(const model_case *mc, char *buf, size_t len) {
    snprintf(buf, len, "%s/%s/%s", mc->train ? "train" : "infer", mc->name, mc->bf16 ? "bf16" : "fp32");
    return buf;
}

/* Whether a row named name runs under the command-line filter (NULL: all). */
static int selected(const char *filter, const char *name) { return !filter || strstr(name, filter) != NULL; }

int main(int argc, char **argv) {
    char err[256];
    vt_alloc_policy(); /* the vitrain command's, so the children's resident sets are a run's */
    if (vt_kernels_init(err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    /* child: --child case threads peak quick (see the fork below) */
    if (argc == 6 && strcmp(argv[1], "--child") == 0) {
        size_t c = (size_t)atoi(argv[2]);
        if (c >= N_CASES) return 2;
        return run_model(&cases[c], atoi(argv[3]), atof(argv[4]), atoi(argv[5]));
    }
    const char *filter = argc > 1 ? argv[1] : NULL;
    int any = selected(filter, "attention/fp32") || selected(filter, "attention/bf16");
    char row[64];
    for (size_t c = 0; c < N_CASES; c++) any |= selected(filter, case_row(&cases[c], row, sizeof row));
    if (argc > 2 || !any) {
        fprintf(stderr, "usage: bench_train [substring of a row: attention/fp32, attention/bf16");
        for (size_t c = 0; c < N_CASES; c++) fprintf(stderr, ", %s", case_row(&cases[c], row, sizeof row));
        fprintf(stderr, "]%s\n", any ? "" : ": no row matches");
        return 2;
    }
    const char *qe = getenv("VT_BENCH_QUICK");
    int quick = qe && strcmp(qe, "0") != 0;
    const int avx512 = vt_k.isa >= VT_ISA_AVX512, has_bf16 = vt_k.isa >= VT_ISA_AVX512BF16;
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int threads[2] = {1, 2};
    double peak[2][3] = {{0}}; /* [peak_kind][threads] */
    char cpu[192];
    bench_cpu(cpu, sizeof cpu);
    fprintf(stderr, "bench_train, %s (%s kernels%s)\n", cpu, vt_k.name, quick ? ", quick" : "");
    /* the bf16 rows run on the path training would take (the probe, or VT_BF16_PATH), the
     * children too; on the fma path their peak is the FMA peak */
    int any_bf16 = selected(filter, "attention/bf16");
    for (size_t c = 0; c < N_CASES; c++) any_bf16 |= cases[c].bf16 && selected(filter, case_row(&cases[c], row, sizeof row));
    if (any_bf16 && vt_precision_select(VT_PRECISION_BF16) != VT_OK) {
        fprintf(stderr, "%s\n", vt_last_error());
        return 1;
    }
    const int bf16_fma = vt_kernels_bf16_path() == VT_BF16_FMA;
    if (any_bf16) setenv("VT_BF16_PATH", vt_bf16_path_name((vt_bf16_path)vt_kernels_bf16_path()), 1);
    for (int pr = 0; pr < 1 + has_bf16; pr++)
        for (int ti = 0; ti < 2; ti++) {
            int nt = threads[ti];
            peak[pr][nt] = pr ? bf16_peak_gflops(nt) : fma_peak_gflops(avx512, nt);
            printf("{\"bench\":\"%s\",\"cpu\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.2f}\n",
                   pr ? "bf16_peak" : "fma_peak", cpu, pr ? "avx512bf16" : avx512 ? "avx512" : "avx2", nt, peak[pr][nt]);
            fprintf(stderr, "  %s peak, %d thread%s: %8.1f GFLOP/s%s\n", pr ? "bf16" : "FMA", nt, nt > 1 ? "s" : " ",
                    peak[pr][nt], nt > ncpu ? " (more threads than CPUs)" : "");
        }
    fflush(stdout);

    fprintf(stderr, "\n  attention fwd+bwd (hd 64)   precision threads  GFLOP/s   %% peak\n");
    static const int toks[3] = {65, 197, 785};
    for (int pr = 0; pr < 2; pr++) {
        if (!selected(filter, pr ? "attention/bf16" : "attention/fp32")) continue;
        for (int i = quick ? 1 : 0; i < (quick ? 2 : 3); i++) {
            int N = toks[i];
            for (int ti = 0; ti < 2; ti++) {
                int nt = threads[ti];
                int BH = (N >= 785 ? 48 : 384) / (quick ? 8 : 1);
                double *pk = &peak[peak_kind(pr, bf16_fma)][nt];
                refresh_peak(pk, avx512, peak_kind(pr, bf16_fma), nt);
                double gf = bench_attention(BH, N, 64, nt, quick ? 1 : 5, pr);
                printf("{\"bench\":\"attention\",\"cpu\":\"%s\",\"precision\":\"%s\",\"tokens\":%d,\"hd\":64,"
                       "\"blocks\":%d,\"threads\":%d,\"isa\":\"%s\",\"bf16_path\":\"%s\",\"gemm_ctx\":\"%s\",\"gflops\":%.2f,"
                       "\"pct_peak\":%.1f,\"peak_gflops\":%.1f}\n",
                       cpu, pr ? "bf16" : "fp32", N, BH, nt, vt_k.name,
                       pr ? vt_bf16_path_name((vt_bf16_path)vt_kernels_bf16_path()) : "-", vt_gemm_ctx.name, gf,
                       100.0 * gf / *pk, *pk);
                fprintf(stderr, "  N %4d, %3d blocks            %-9s %d    %8.1f   %5.1f%%\n", N, BH,
                        pr ? "bf16" : "fp32", nt, gf, 100.0 * gf / *pk);
            }
        }
    }
    fflush(stdout);

    fprintf(stderr, "\n  model          mode   precision batch threads   img/s     MFU   RSS MB\n");
    for (size_t c = 0; c < N_CASES; c++) {
        if (!selected(filter, case_row(&cases[c], row, sizeof row))) continue;
        int pr = peak_kind(cases[c].bf16, bf16_fma);
        for (int ti = 0; ti < 2; ti++) {
            int nt = threads[ti];
            refresh_peak(&peak[pr][nt], avx512, pr, nt);
            fflush(stdout);
            fflush(stderr);
            int pfd[2];
            if (pipe(pfd) != 0) { perror("pipe"); return 1; }
            pid_t pid = fork();
            if (pid < 0) { perror("fork"); return 1; }
            if (pid == 0) {
                /* exec a fresh image: libgomp's thread pool does not survive fork */
                close(pfd[0]);
                dup2(pfd[1], STDOUT_FILENO);
                close(pfd[1]);
                char a_case[16], a_nt[16], a_peak[32], a_quick[16];
                snprintf(a_case, sizeof a_case, "%zu", c);
                snprintf(a_nt, sizeof a_nt, "%d", nt);
                snprintf(a_peak, sizeof a_peak, "%.6f", peak[pr][nt]);
                snprintf(a_quick, sizeof a_quick, "%d", quick);
                execl("/proc/self/exe", argv[0], "--child", a_case, a_nt, a_peak, a_quick, (char *)NULL);
                perror("exec /proc/self/exe");
                _exit(127);
            }
            close(pfd[1]);
            char line[1024];
            ssize_t len = 0, got;
            while ((got = read(pfd[0], line + len, sizeof line - 1 - (size_t)len)) > 0) len += got;
            close(pfd[0]);
            line[len] = '\0';
            int status = 0;
            struct rusage ru;
            if (wait4(pid, &status, 0, &ru) < 0) { perror("wait4"); return 1; }
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || len == 0) {
                fprintf(stderr, "  %s (%d threads) failed\n", case_row(&cases[c], row, sizeof row), nt);
                continue;
            }
            double rss_mb = (double)ru.ru_maxrss / 1024.0;
            printf("%s,\"rss_mb\":%.1f,\"peak_gflops\":%.1f}\n", line, rss_mb, peak[pr][nt]);
            fflush(stdout);
            double ips = 0, mfu = 0;
            const char *p = strstr(line, "\"img_per_s\":");
            if (p) ips = atof(p + 12);
            p = strstr(line, "\"mfu\":");
            if (p) mfu = atof(p + 6);
            const char *bp = strstr(line, "\"batch\":");
            fprintf(stderr, "  %-14s %-6s %-9s %5d    %d    %8.2f  %5.1f%%  %7.0f\n", cases[c].name,
                    cases[c].train ? "train" : "infer", cases[c].bf16 ? "bf16" : "fp32", bp ? atoi(bp + 8) : 0, nt, ips,
                    100.0 * mfu, rss_mb);
        }
    }
    return 0;
}
