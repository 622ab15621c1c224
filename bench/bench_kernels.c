/* bench_kernels.c - GEMM benchmark (`make bench`). Not a test: prints figures only.
 *
 * stdout: one JSON object per line; stderr: a readable table.
 *  (a) "fma_peak": FMA throughput of this machine on 1 and 2 threads (bench/fma_peak.h:
 *      16 AVX-512 chains, or 12 AVX2 chains on a CPU without AVX-512), measured at the
 *      start and at the end of the GEMM rows; the better of the two is the peak every %
 *      refers to (a VM can lose a core for the length of one measurement). The rows
 *      below are printed after the end measurement; stderr shows GFLOP/s as they come.
 *  (b) "gemm": vitrain's GEMM as the ops run it (vt_gemm: the kernel table's packed GEMM,
 *      C split over the OpenMP threads) at the CPU's best SIMD level, on 1 and 2 threads,
 *      for the ViT-Ti/S/B linear layers (qkv, proj, fc1, fc2) in the three training
 *      products: fwd Y = X W^T (ta 0, tb 1), dX = dY W (0, 0), dW = dY^T X (1, 0); tokens
 *      x batch: Ti 65 x 128, S 197 x 64, B 197 x 32. GFLOP/s = 2 M N K / wall time, best
 *      of the rounds; % of the peak of the same thread count.
 *  (c) "gemm_ref": the same products through the reference libraries that are installed,
 *      loaded at run time with dlopen (benchmark references only, never linked into
 *      vitrain): oneDNN's dnnl_sgemm (libdnnl.so.2: Debian libdnnl2) and OpenBLAS's
 *      cblas_sgemm (libopenblas.so.0: Debian libopenblas0-openmp), each on the same
 *      thread count, with "ratio" = our GFLOP/s / theirs. A round times every library
 *      once in turn (ours, oneDNN, OpenBLAS, each round starting one further on), so
 *      load that comes and goes hits all of them alike; at least 3 rounds, at most 7.
 *      Each library's first result is checked against ours (relative Frobenius
 *      difference, must be < 1e-4), so a ratio never compares different products; a
 *      mismatch is an error (exit 1).
 *  (d) "gemm_summary": per thread count, our lowest and mean % of peak per model and,
 *      per library, the lowest and geometric-mean ratio and how many shapes we match.
 *  (e) "gemm" rows of the lower SIMD levels (avx2 on an AVX-512 CPU), 1 thread, ours only.
 * Usage: bench_kernels [substring]  - only the shapes whose "model/layer/pass" name
 * contains the substring (e.g. "vit_ti", "fc1/fwd"; one that matches none is an error).
 * The peaks are always measured.
 * Wall-clock timing: run it on an idle machine for clean numbers; the ratios, from
 * alternating rounds in one process, are the robust figures.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fma_peak.h"
#include "kernels.h"
#include "ops/ops.h"

typedef struct {
    const char *model;
    int tokens, batch, D;
} vit_shape;

static const vit_shape models[] = {
    {"vit_ti", 65, 128, 192},
    {"vit_s", 197, 64, 384},
    {"vit_b", 197, 32, 768},
};
#define N_MODELS (int)(sizeof models / sizeof models[0])
#define N_SHAPES (N_MODELS * 12)
#define N_LIBS 3 /* ours, oneDNN, OpenBLAS */

typedef struct {
    char name[48];
    int model, ta, tb, M, N, K;
} gemm_shape;

/* The 12 products (4 layers x 3 passes) of every model, in a fixed order. */
static int all_shapes(gemm_shape *s) {
    int n = 0;
    for (int mi = 0; mi < N_MODELS; mi++) {
        int rows = models[mi].tokens * models[mi].batch, D = models[mi].D;
        struct { const char *name; int out, in; } layers[] = {
            {"qkv", 3 * D, D}, {"proj", D, D}, {"fc1", 4 * D, D}, {"fc2", D, 4 * D}};
        for (int li = 0; li < 4; li++) {
            int out = layers[li].out, in = layers[li].in;
            struct { const char *pass; int ta, tb, M, N, K; } passes[] = {
                {"fwd", 0, 1, rows, out, in}, /* Y = X W^T */
                {"dX", 0, 0, rows, in, out},  /* dX = dY W */
                {"dW", 1, 0, out, in, rows}}; /* dW = dY^T X */
            for (int pi = 0; pi < 3; pi++, n++) {
                snprintf(s[n].name, sizeof s[n].name, "%s/%s/%s", models[mi].model, layers[li].name,
                         passes[pi].pass);
                s[n].model = mi;
                s[n].ta = passes[pi].ta;
                s[n].tb = passes[pi].tb;
                s[n].M = passes[pi].M;
                s[n].N = passes[pi].N;
                s[n].K = passes[pi].K;
            }
        }
    }
    return n;
}

/* ---- reference libraries, resolved at run time ---- */

typedef int (*dnnl_sgemm_fn)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                             const float *, int64_t, float, float *, int64_t);
typedef struct { int major, minor, patch; } dnnl_version_head;
typedef const dnnl_version_head *(*dnnl_version_fn)(void);
typedef void (*cblas_sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                               float, float *, int);
typedef void (*openblas_threads_fn)(int);
typedef char *(*openblas_core_fn)(void);

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef struct {
    const char *lib;     /* "ours", "onednn", "openblas" */
    char detail[64];     /* version or kernel name */
    int present;
    dnnl_sgemm_fn dnnl;
    cblas_sgemm_fn cblas;
    openblas_threads_fn set_threads;
} gemm_lib;

static void *open_first(const char *const *names) {
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

static void load_refs(gemm_lib *dnnl, gemm_lib *oblas) {
    static const char *const dnnl_names[] = {"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so", NULL};
    /* the OpenMP build first, whatever the alternatives select (installing python3-torch
     * points libopenblas.so.0 at the pthread build): the one the README names, and the
     * one scripts/bench_torch.py gives PyTorch; it shares our OpenMP runtime's threads
     * instead of keeping a second pool of its own */
    static const char *const oblas_names[] = {
        "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0", "libopenblas.so.0",
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", NULL};
    void *h = open_first(dnnl_names);
    if (h && (dnnl->dnnl = (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm")) != NULL) {
        dnnl_version_fn ver = (dnnl_version_fn)dlsym(h, "dnnl_version");
        const dnnl_version_head *v = ver ? ver() : NULL;
        if (v) snprintf(dnnl->detail, sizeof dnnl->detail, "%d.%d.%d", v->major, v->minor, v->patch);
        dnnl->present = 1;
    }
    h = open_first(oblas_names);
    if (h && (oblas->cblas = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm")) != NULL &&
        (oblas->set_threads = (openblas_threads_fn)dlsym(h, "openblas_set_num_threads")) != NULL) {
        openblas_core_fn core = (openblas_core_fn)dlsym(h, "openblas_get_corename");
        snprintf(oblas->detail, sizeof oblas->detail, "%s", core ? core() : "");
        oblas->present = 1;
    }
}

/* C = op(A) op(B) through library l on nt threads. */
static void run_gemm(const gemm_lib *l, const gemm_shape *s, int nt, const float *A, const float *B, float *C) {
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
    if (l->dnnl) {
        omp_set_num_threads(nt);
        int st = l->dnnl(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C,
                         s->N);
        if (st != 0) {
            fprintf(stderr, "bench_kernels: dnnl_sgemm failed (status %d) on %s\n", st, s->name);
            exit(1);
        }
    } else if (l->cblas) {
        l->set_threads(nt);
        l->cblas(CBLAS_ROW_MAJOR, s->ta ? CBLAS_TRANS : CBLAS_NO_TRANS, s->tb ? CBLAS_TRANS : CBLAS_NO_TRANS, s->M,
                 s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
    } else {
        omp_set_num_threads(nt);
        vt_gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, A, lda, B, ldb, 0.0f, C, s->N);
    }
}

static float *falloc(size_t n) {
    float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

/* ||x - ref||_F / ||ref||_F */
static double rel_diff(const float *x, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)x[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* GFLOP/s of shape s on nt threads for each present library (gf[l], 0 when absent):
 * a warm-up and check call each, then alternating rounds, best wall time per library. */
static void time_shape(const gemm_lib *libs, const gemm_shape *s, int nt, double gf[N_LIBS],
                       double err[N_LIBS]) {
    size_t mk = (size_t)s->M * s->K, kn = (size_t)s->K * s->N, mn = (size_t)s->M * s->N;
    float *A = falloc(mk), *B = falloc(kn), *C = falloc(mn), *ref = falloc(mn);
    double best[N_LIBS];
    for (int l = 0; l < N_LIBS; l++) {
        best[l] = 1e30;
        err[l] = 0;
        if (!libs[l].present) continue;
        run_gemm(&libs[l], s, nt, A, B, l == 0 ? ref : C);
        if (l > 0) {
            err[l] = rel_diff(C, ref, mn);
            if (!(err[l] < 1e-4)) {
                fprintf(stderr, "bench_kernels: %s's result differs from vitrain's on %s (%d threads): "
                        "relative difference %.3g\n", libs[l].lib, s->name, nt, err[l]);
                exit(1);
            }
        }
    }
    double spent = 0;
    for (int r = 0; r < 7 && (r < 3 || spent < 1.5); r++) {
        for (int j = 0; j < N_LIBS; j++) {
            int l = (r + j) % N_LIBS; /* each round starts with the next library */
            if (!libs[l].present) continue;
            double t0 = bench_now();
            run_gemm(&libs[l], s, nt, A, B, C);
            double dt = bench_now() - t0;
            spent += dt;
            if (dt < best[l]) best[l] = dt;
        }
    }
    for (int l = 0; l < N_LIBS; l++) gf[l] = libs[l].present ? 2.0 * s->M * s->N * (double)s->K / best[l] * 1e-9 : 0;
    free(A); free(B); free(C); free(ref);
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    gemm_shape shapes[N_SHAPES];
    int ns = all_shapes(shapes), any = 0;
    for (int si = 0; si < ns; si++) any |= !filter || strstr(shapes[si].name, filter) != NULL;
    if (argc > 2 || !any) {
        fprintf(stderr, "usage: bench_kernels [substring of a shape name \"model/layer/pass\", e.g. vit_b, "
                        "fc1/fwd, dW]%s\n", any ? "" : ": no shape matches");
        return 2;
    }
    char err[256];
    if (vt_kernels_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench_kernels: %s\n", err);
        return 1;
    }
    vt_isa best_isa = vt_kernels_best_isa();
    if (best_isa < VT_ISA_AVX2) {
        fprintf(stderr, "bench_kernels: this CPU has no AVX2+FMA; the scalar GEMM is not benchmarked\n");
        return 0;
    }
    int avx512 = best_isa >= VT_ISA_AVX512;
    static const int threads[2] = {1, 2};
    double peak_start[2];
    for (int ti = 0; ti < 2; ti++) peak_start[ti] = fma_peak_gflops(avx512, threads[ti]);
    fprintf(stderr, "FMA peak at the start, %s: %.1f GFLOP/s on 1 thread, %.1f on 2\n", vt_kernels_isa_name(best_isa),
            peak_start[0], peak_start[1]);

    gemm_lib libs[N_LIBS] = {{.lib = "ours", .present = 1}, {.lib = "onednn"}, {.lib = "openblas"}};
    snprintf(libs[0].detail, sizeof libs[0].detail, "%s", vt_k.name);
    load_refs(&libs[1], &libs[2]);
    for (int l = 1; l < N_LIBS; l++) {
        printf("{\"bench\":\"gemm_lib\",\"lib\":\"%s\",\"present\":%s,\"detail\":\"%s\"}\n", libs[l].lib,
               libs[l].present ? "true" : "false", libs[l].detail);
        fprintf(stderr, "reference %-9s %s\n", libs[l].lib,
                libs[l].present ? libs[l].detail
                                : l == 1 ? "not installed (apt-get install libdnnl2)"
                                         : "not installed (apt-get install libopenblas0-openmp)");
    }
    fflush(stdout);

    static double gf[N_SHAPES][2][N_LIBS], diff[N_SHAPES][2][N_LIBS];
    int run[N_SHAPES] = {0};
    fprintf(stderr, "\nGFLOP/s       %2s %2s %6s %6s %6s %2s %8s %8s %6s %8s %6s\n", "ta", "tb", "M", "N", "K", "th",
            "ours", "oneDNN", "ratio", "OpenBLAS", "ratio");
    for (int si = 0; si < ns; si++) {
        const gemm_shape *s = &shapes[si];
        if (filter && !strstr(s->name, filter)) continue;
        run[si] = 1;
        for (int ti = 0; ti < 2; ti++) {
            double *g = gf[si][ti];
            time_shape(libs, s, threads[ti], g, diff[si][ti]);
            fprintf(stderr, "%-16s %2d %2d %6d %6d %6d %2d %8.1f", s->name, s->ta, s->tb, s->M, s->N, s->K,
                    threads[ti], g[0]);
            for (int l = 1; l < N_LIBS; l++) {
                if (libs[l].present) fprintf(stderr, " %8.1f %6.2f", g[l], g[0] / g[l]);
                else fprintf(stderr, " %8s %6s", "-", "-");
            }
            fprintf(stderr, "\n");
        }
    }

    /* The peak again at the end; a stretch of host load during one measurement (a VM
     * can lose a core for a while) would otherwise inflate every % below. */
    double peak[3] = {0, 0, 0};
    for (int ti = 0; ti < 2; ti++) {
        int nt = threads[ti];
        double end_gf = fma_peak_gflops(avx512, nt);
        peak[nt] = end_gf > peak_start[ti] ? end_gf : peak_start[ti];
        printf("{\"bench\":\"fma_peak\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,\"start\":%.1f,"
               "\"end\":%.1f}\n", vt_kernels_isa_name(best_isa), nt, peak[nt], peak_start[ti], end_gf);
        fprintf(stderr, "\nFMA peak, %d thread%s: %.1f GFLOP/s (the better of %.1f at the start, %.1f at the end)",
                nt, nt > 1 ? "s" : " ", peak[nt], peak_start[ti], end_gf);
    }
    fprintf(stderr, "\n\n%% of peak      1 thread  2 threads\n");

    /* ratio sums per (threads, lib) and % peak per (threads, model) for the summary */
    double log_ratio[2][N_LIBS] = {{0}}, min_ratio[2][N_LIBS], pct_min[2][N_MODELS], pct_sum[2][N_MODELS];
    int n_ratio[2][N_LIBS] = {{0}}, n_match[2][N_LIBS] = {{0}}, n_pct[2][N_MODELS] = {{0}};
    const char *min_shape[2][N_LIBS] = {{0}};
    for (int ti = 0; ti < 2; ti++) {
        for (int l = 0; l < N_LIBS; l++) min_ratio[ti][l] = 1e30;
        for (int m = 0; m < N_MODELS; m++) pct_min[ti][m] = 1e30, pct_sum[ti][m] = 0;
    }
    for (int si = 0; si < ns; si++) {
        const gemm_shape *s = &shapes[si];
        if (!run[si]) continue;
        fprintf(stderr, "%-16s", s->name);
        for (int ti = 0; ti < 2; ti++) {
            int nt = threads[ti];
            const double *g = gf[si][ti];
            double pct = 100.0 * g[0] / peak[nt];
            printf("{\"bench\":\"gemm\",\"isa\":\"%s\",\"shape\":\"%s\",\"ta\":%d,\"tb\":%d,\"M\":%d,\"N\":%d,"
                   "\"K\":%d,\"threads\":%d,\"gflops\":%.1f,\"pct_peak\":%.1f}\n",
                   vt_k.name, s->name, s->ta, s->tb, s->M, s->N, s->K, nt, g[0], pct);
            fprintf(stderr, " %8.1f%%", pct);
            if (pct < pct_min[ti][s->model]) pct_min[ti][s->model] = pct;
            pct_sum[ti][s->model] += pct;
            n_pct[ti][s->model]++;
            for (int l = 1; l < N_LIBS; l++) {
                if (!libs[l].present) continue;
                double ratio = g[0] / g[l];
                printf("{\"bench\":\"gemm_ref\",\"lib\":\"%s\",\"shape\":\"%s\",\"threads\":%d,\"gflops\":%.1f,"
                       "\"pct_peak\":%.1f,\"ours_gflops\":%.1f,\"ratio\":%.3f,\"rel_diff\":%.2g}\n",
                       libs[l].lib, s->name, nt, g[l], 100.0 * g[l] / peak[nt], g[0], ratio, diff[si][ti][l]);
                log_ratio[ti][l] += log(ratio);
                n_ratio[ti][l]++;
                n_match[ti][l] += ratio >= 1.0;
                if (ratio < min_ratio[ti][l]) min_ratio[ti][l] = ratio, min_shape[ti][l] = s->name;
            }
        }
        fprintf(stderr, "\n");
    }

    fprintf(stderr, "\nsummary (%s)\n", vt_k.name);
    for (int ti = 0; ti < 2; ti++) {
        int nt = threads[ti];
        for (int m = 0; m < N_MODELS; m++) {
            if (!n_pct[ti][m]) continue;
            double mean = pct_sum[ti][m] / n_pct[ti][m];
            printf("{\"bench\":\"gemm_summary\",\"lib\":\"ours\",\"threads\":%d,\"model\":\"%s\",\"shapes\":%d,"
                   "\"min_pct_peak\":%.1f,\"mean_pct_peak\":%.1f}\n",
                   nt, models[m].model, n_pct[ti][m], pct_min[ti][m], mean);
            fprintf(stderr, "  %d thread%s %-7s ours %% of peak: min %.1f%%, mean %.1f%% (%d shapes)\n", nt,
                    nt > 1 ? "s" : " ", models[m].model, pct_min[ti][m], mean, n_pct[ti][m]);
        }
        for (int l = 1; l < N_LIBS; l++) {
            if (!n_ratio[ti][l]) continue;
            double geo = exp(log_ratio[ti][l] / n_ratio[ti][l]);
            printf("{\"bench\":\"gemm_summary\",\"lib\":\"%s\",\"threads\":%d,\"shapes\":%d,\"ours_at_least\":%d,"
                   "\"min_ratio\":%.3f,\"min_ratio_shape\":\"%s\",\"geomean_ratio\":%.3f}\n",
                   libs[l].lib, nt, n_ratio[ti][l], n_match[ti][l], min_ratio[ti][l], min_shape[ti][l], geo);
            fprintf(stderr, "  %d thread%s ours / %-8s: min %.2f (%s), geomean %.2f, ours >= theirs on %d of %d\n",
                    nt, nt > 1 ? "s" : " ", libs[l].lib, min_ratio[ti][l], min_shape[ti][l], geo,
                    n_match[ti][l], n_ratio[ti][l]);
        }
    }
    fflush(stdout);

    if (best_isa > VT_ISA_AVX2) {
        fprintf(stderr, "\nlower SIMD levels, 1 thread, ours only\n");
        vt_kernels lower;
        vt_kernels_table(VT_ISA_AVX2, &lower);
        vt_k = lower;
        gemm_lib only_ours[N_LIBS] = {{.lib = "ours", .present = 1}, {.lib = "onednn"}, {.lib = "openblas"}};
        for (int si = 0; si < ns; si++) {
            const gemm_shape *s = &shapes[si];
            if (filter && !strstr(s->name, filter)) continue;
            double gf[N_LIBS], diff[N_LIBS];
            time_shape(only_ours, s, 1, gf, diff);
            printf("{\"bench\":\"gemm\",\"isa\":\"%s\",\"shape\":\"%s\",\"ta\":%d,\"tb\":%d,\"M\":%d,\"N\":%d,"
                   "\"K\":%d,\"threads\":1,\"gflops\":%.1f,\"pct_peak\":%.1f}\n",
                   vt_k.name, s->name, s->ta, s->tb, s->M, s->N, s->K, gf[0], 100.0 * gf[0] / peak[1]);
            fprintf(stderr, "%-7s %-16s %8.1f %5.1f%%\n", vt_k.name, s->name, gf[0], 100.0 * gf[0] / peak[1]);
        }
    }
    return 0;
}
