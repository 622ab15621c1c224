/* bench_kernels.c - kernel benchmarks (`make bench`). Not a test: prints figures only.
 *
 * stdout: one JSON object per line, one per measurement; stderr: a readable table.
 *  (a) fma_peak: single-thread FMA throughput of this machine, measured with 16
 *      independent AVX-512 FMA chains (and 12 AVX2 chains for the avx2 level), so it
 *      is bound by the FMA pipes, not by latency.
 *  (b) gemm: single-thread vt gemm GFLOP/s (2 M N K / time, best of a few runs) and %
 *      of the measured AVX-512 peak (of the AVX2 peak on a CPU without AVX-512), for
 *      the ViT-Ti/S/B linear layers (qkv, proj, fc1, fc2) in
 *      the three training products: fwd Y = X W^T (ta 0, tb 1), dX = dY W (0, 0),
 *      dW = dY^T X (1, 0); tokens x batch: Ti 65 x 128, S 197 x 64, B 197 x 32; at
 *      each SIMD level this CPU has (the scalar reference is too slow for these sizes).
 * Usage: bench_kernels [substring]  - only the gemm rows whose "model/layer/pass" name
 * contains the substring (e.g. "vit_ti", "fc1/fwd"). The peak is always measured.
 * Times are this thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so time slices lost to
 * other processes do not count; "gflops_wall" is the same from wall-clock time. Cache
 * and memory contention from other processes still lowers the figures: run it on an
 * idle machine for clean numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fma_peak.h"
#include "kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of this thread: unaffected by time slices lost to other processes. */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define PEAK_ITERS 20000000L


/* GFLOP/s of the best of 5 timed runs of the peak loop. */
static double measure_peak(int avx512) {
    double best = 0;
    volatile float sink = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = cpu_now();
        sink += avx512 ? peak_loop_avx512(PEAK_ITERS / 4) : peak_loop_avx2(PEAK_ITERS / 4);
        double dt = cpu_now() - t0;
        double gf = (double)(PEAK_ITERS / 4) * (avx512 ? 512.0 : 192.0) / dt * 1e-9;
        if (gf > best) best = gf;
    }
    (void)sink;
    return best;
}

typedef struct {
    const char *model;
    int tokens, batch, D;
} vit_shape;

static const vit_shape models[] = {
    {"vit_ti", 65, 128, 192},
    {"vit_s", 197, 64, 384},
    {"vit_b", 197, 32, 768},
};

static float *falloc(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

/* Times one GEMM: best of up to 6 runs (at least 3, stopping after 0.6 s of CPU time).
 * Returns GFLOP/s from thread CPU time; *wall gets the same from wall-clock time. */
static double time_gemm(const vt_kernels *t, int ta, int tb, int M, int N, int K, double *wall) {
    float *A = falloc((size_t)M * K), *B = falloc((size_t)K * N), *C = falloc((size_t)M * N);
    float *W = falloc(t->gemm_work_floats(M, N, K) + 16);
    int lda = ta ? M : K, ldb = tb ? K : N;
    t->gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, W); /* warm-up */
    double best = 1e30, best_wall = 1e30, spent = 0;
    for (int r = 0; r < 6 && (r < 3 || spent < 0.6); r++) {
        double w0 = now(), t0 = cpu_now();
        t->gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, W);
        double dt = cpu_now() - t0, dw = now() - w0;
        spent += dt;
        if (dt < best) best = dt;
        if (dw < best_wall) best_wall = dw;
    }
    free(A); free(B); free(C); free(W);
    *wall = 2.0 * M * N * K / best_wall * 1e-9;
    return 2.0 * M * N * K / best * 1e-9;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    vt_isa best = vt_kernels_best_isa();
    double peak512 = 0, peak_ref;
    if (best >= VT_ISA_AVX512) {
        peak512 = measure_peak(1);
        printf("{\"bench\":\"fma_peak\",\"isa\":\"avx512\",\"threads\":1,\"chains\":16,\"gflops\":%.1f}\n", peak512);
        fprintf(stderr, "FMA peak, 1 thread, AVX-512 (16 chains): %.1f GFLOP/s\n", peak512);
    }
    if (best >= VT_ISA_AVX2) {
        double p2 = measure_peak(0);
        printf("{\"bench\":\"fma_peak\",\"isa\":\"avx2\",\"threads\":1,\"chains\":12,\"gflops\":%.1f}\n", p2);
        fprintf(stderr, "FMA peak, 1 thread, AVX2    (12 chains): %.1f GFLOP/s\n", p2);
        if (peak512 == 0) peak512 = p2;
    }
    peak_ref = peak512 > 0 ? peak512 : 1.0;
    fflush(stdout);

    static const vt_isa levels[] = {VT_ISA_AVX512, VT_ISA_AVX2};
    fprintf(stderr, "\n%-7s %-24s %2s %2s %6s %6s %6s %9s %7s %6s\n", "isa", "shape", "ta", "tb", "M", "N", "K",
            "GFLOP/s", "%peak", "wall");
    for (int l = 0; l < 2; l++) {
        vt_kernels t;
        if (vt_kernels_table(levels[l], &t) != 0) continue;
        for (size_t mi = 0; mi < sizeof models / sizeof *models; mi++) {
            const vit_shape *m = &models[mi];
            int rows = m->tokens * m->batch, D = m->D;
            struct { const char *name; int out, in; } layers[] = {
                {"qkv", 3 * D, D}, {"proj", D, D}, {"fc1", 4 * D, D}, {"fc2", D, 4 * D}};
            for (int li = 0; li < 4; li++) {
                int out = layers[li].out, in = layers[li].in;
                struct { const char *pass; int ta, tb, M, N, K; } passes[] = {
                    {"fwd", 0, 1, rows, out, in},   /* Y = X W^T */
                    {"dX", 0, 0, rows, in, out},    /* dX = dY W */
                    {"dW", 1, 0, out, in, rows}};   /* dW = dY^T X */
                for (int pi = 0; pi < 3; pi++) {
                    char name[64];
                    snprintf(name, sizeof name, "%s/%s/%s", m->model, layers[li].name, passes[pi].pass);
                    if (filter && !strstr(name, filter)) continue;
                    double wall;
                    double gf = time_gemm(&t, passes[pi].ta, passes[pi].tb, passes[pi].M, passes[pi].N,
                                          passes[pi].K, &wall);
                    printf("{\"bench\":\"gemm\",\"isa\":\"%s\",\"shape\":\"%s\",\"ta\":%d,\"tb\":%d,\"M\":%d,"
                           "\"N\":%d,\"K\":%d,\"threads\":1,\"gflops\":%.1f,\"gflops_wall\":%.1f,"
                           "\"pct_peak\":%.1f}\n",
                           t.name, name, passes[pi].ta, passes[pi].tb, passes[pi].M, passes[pi].N,
                           passes[pi].K, gf, wall, 100.0 * gf / peak_ref);
                    fflush(stdout);
                    fprintf(stderr, "%-7s %-24s %2d %2d %6d %6d %6d %9.1f %6.1f%% %6.1f\n", t.name, name,
                            passes[pi].ta, passes[pi].tb, passes[pi].M, passes[pi].N, passes[pi].K, gf,
                            100.0 * gf / peak_ref, wall);
                }
            }
        }
    }
    return 0;
}
