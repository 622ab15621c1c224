/* bench_kernels.c - GEMM benchmark (`make bench`). Not a test: prints figures only.
 *
 * stdout: one JSON object per line, each naming the CPU ("cpu": /proc/cpuinfo's model
 * name, family and model) and the kernel level ("isa"), the GEMM rows also the blocking
 * context ("gemm_ctx": vt_gemm_ctx.name); stderr: a readable table.
 *  (a) "fma_peak": FMA throughput of this machine on 1 and 2 threads (bench/fma_peak.h:
 *      16 AVX-512 chains, or 12 AVX2 chains on a CPU without AVX-512), and "bf16_peak",
 *      VDPBF16PS throughput where the CPU has AVX512-BF16, each measured at the start and
 *      at the end of the GEMM rows; the better of the two is the peak every % refers to
 *      (a VM can lose a core for the length of one measurement). The rows below are
 *      printed after the end measurement; stderr shows GFLOP/s as they come.
 *  (b) "gemm": vitrain's GEMM as the ops run it (vt_gemm: the kernel table's packed GEMM,
 *      C split over the OpenMP threads) at the CPU's best level, on 1 and 2 threads,
 *      for the ViT-Ti/S/B linear layers (qkv, proj, fc1, fc2) in the three training
 *      products: fwd Y = X W^T (ta 0, tb 1), dX = dY W (0, 0), dW = dY^T X (1, 0); tokens
 *      x batch: Ti 65 x 128, S 197 x 64, B 197 x 32. GFLOP/s = 2 M N K / wall time, best
 *      of the rounds; % of the peak of the same thread count. "precision" is "fp32", or
 *      "bf16" for vt_gemm_prec's bf16 products (train.precision = bf16), timed as
 *      training calls them: X and dY float32 (rounded as they are packed), W its bf16 copy;
 *      their % refers to the bf16 peak (null where the CPU has no AVX512-BF16).
 *  (c) "gemm_ref": the same products through the reference libraries that are installed,
 *      loaded at run time with dlopen (benchmark references only, never linked into
 *      vitrain): fp32, oneDNN's dnnl_sgemm (libdnnl.so.2: Debian libdnnl2) and
 *      OpenBLAS's cblas_sgemm (libopenblas.so.0: Debian libopenblas0-openmp); bf16,
 *      oneDNN's matmul primitive on bf16 operands with a float32 result (its 2.x C API;
 *      given operands already converted to bf16, so its time holds no conversion), each
 *      on the same thread count, with "ratio" = our GFLOP/s / theirs (the best round
 *      of each) and "ratio_median" = the median over the rounds of that round's ratio.
 *      A round times every contestant of a precision once in turn (each round starting
 *      one further on), so load that comes and goes hits all of them alike; at least 5
 *      rounds, at most 9. On a host whose speed moves between minutes the best rounds
 *      of two contestants can fall in different phases; the round medians pair each
 *      round's figures. Each library's first result is checked against ours (relative Frobenius
 *      difference, must be < 1e-4: in bf16 both sum the same rounded products), so a
 *      ratio never compares different products; a mismatch is an error (exit 1).
 *  (d) "gemm_summary": per precision and thread count, our lowest and mean % of peak per
 *      model and, per library, the lowest and geometric-mean ratio, the geometric mean
 *      of the round medians and how many shapes we match.
 *  (e) "gemm" rows of the lower SIMD levels (down to avx2), 1 thread, ours only, in each
 *      precision whose GEMM entry differs from the top level's (on an AVX512-BF16 CPU:
 *      fp32 on avx2, bf16 on avx512 and avx2, where it runs the bf16 numerics through the
 *      fp32 kernels); % of the same peak as the top level's rows of that precision.
 * Usage: bench_kernels [substring]  - only the shapes whose "model/layer/pass" name
 * contains the substring (e.g. "vit_ti", "fc1/fwd"; one that matches none is an error).
 * VT_BENCH_PRECISION=fp32 or bf16: that precision only (default both; bf16 only where
 * the CPU has bf16 instructions). The peaks are always measured.
 * VT_BENCH_REFS=onednn,openblas: time only the named reference libraries (default: every
 * one installed), e.g. VT_BENCH_REFS=onednn for a shorter run against oneDNN alone.
 * VT_BF16_PATH=amx|dpbf16|fma: the bf16 rows on that path, as training runs it
 * (src/bf16_path.h; e.g. fma, the float32 kernels on rounded operands, on a CPU with
 * VDPBF16PS); the bf16 rows name the path they ran on ("bf16_path").
 * Wall-clock timing: run it on an idle machine for clean numbers; the ratios, from
 * alternating rounds in one process, are the robust figures. VT_BENCH_CLOCK=cpu times
 * the products in CPU seconds per thread instead (a machine shared with other work).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16_path.h"
#include "fma_peak.h"
#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"

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
#define N_LIBS 3 /* per precision: ours and up to two references */

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

/* oneDNN 2.x C API (oneapi/dnnl/dnnl.h), the few calls of a matmul primitive; the
 * descriptors are opaque buffers larger than the library's structs (696 and 2800 bytes
 * in 2.6). */
typedef int (*dnnl_engine_create_fn)(void **engine, int kind, size_t index);
typedef int (*dnnl_stream_create_fn)(void **stream, void *engine, unsigned flags);
typedef int (*dnnl_md_init_strides_fn)(void *md, int ndims, const int64_t *dims, int dt, const int64_t *strides);
typedef int (*dnnl_matmul_desc_init_fn)(void *desc, const void *src, const void *wei, const void *bias,
                                        const void *dst);
typedef int (*dnnl_pd_create_fn)(void **pd, const void *op_desc, const void *attr, void *engine, const void *hint);
typedef int (*dnnl_prim_create_fn)(void **prim, const void *pd);
typedef int (*dnnl_mem_create_fn)(void **mem, const void *md, void *engine, void *handle);
typedef struct { int arg; void *memory; } dnnl_exec_arg;
typedef int (*dnnl_execute_fn)(const void *prim, void *stream, int nargs, const dnnl_exec_arg *args);
typedef int (*dnnl_handle_fn)(void *handle);
enum { DNNL_CPU = 1, DNNL_STREAM_IN_ORDER = 1, DNNL_BF16 = 2, DNNL_F32 = 3, DNNL_ARG_SRC = 1, DNNL_ARG_DST = 17,
       DNNL_ARG_WEIGHTS = 33 };
#define DNNL_DESC_BYTES 16384

typedef struct {
    dnnl_engine_create_fn engine_create;
    dnnl_stream_create_fn stream_create;
    dnnl_md_init_strides_fn md_init;
    dnnl_matmul_desc_init_fn matmul_init;
    dnnl_pd_create_fn pd_create;
    dnnl_prim_create_fn prim_create;
    dnnl_mem_create_fn mem_create;
    dnnl_execute_fn execute;
    dnnl_handle_fn stream_wait, mem_destroy, prim_destroy, pd_destroy;
    void *engine, *stream;
} dnnl_matmul_api;

typedef enum { LIB_OURS, LIB_DNNL_SGEMM, LIB_OPENBLAS, LIB_DNNL_MATMUL } lib_kind;

typedef struct {
    lib_kind kind;
    const char *lib;     /* "ours", "onednn", "openblas" */
    char detail[64];     /* version, kernel name or level */
    int present;
} gemm_lib;

static dnnl_sgemm_fn dnnl_sgemm;
static dnnl_matmul_api mm;
static cblas_sgemm_fn cblas_sgemm;
static openblas_threads_fn openblas_set_threads;

static void *open_first(const char *const *names) {
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) return h;
    }
    return NULL;
}

/* Fills in the reference libraries found: dnnl (fp32 sgemm), mmlib (bf16 matmul), oblas. */
static void load_refs(gemm_lib *dnnl, gemm_lib *mmlib, gemm_lib *oblas) {
    static const char *const dnnl_names[] = {"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so", NULL};
    /* the OpenMP build first, whatever the alternatives select (installing python3-torch
     * points libopenblas.so.0 at the pthread build): the one the README names, and the
     * one scripts/bench_torch.py gives PyTorch; it shares our OpenMP runtime's threads
     * instead of keeping a second pool of its own */
    static const char *const oblas_names[] = {
        "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0", "libopenblas.so.0",
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", NULL};
    void *h = open_first(dnnl_names);
    if (h && (dnnl_sgemm = (dnnl_sgemm_fn)dlsym(h, "dnnl_sgemm")) != NULL) {
        dnnl_version_fn ver = (dnnl_version_fn)dlsym(h, "dnnl_version");
        const dnnl_version_head *v = ver ? ver() : NULL;
        if (v) snprintf(dnnl->detail, sizeof dnnl->detail, "%d.%d.%d", v->major, v->minor, v->patch);
        dnnl->present = 1;
        snprintf(mmlib->detail, sizeof mmlib->detail, "%.40s matmul", dnnl->detail);
        mm.engine_create = (dnnl_engine_create_fn)dlsym(h, "dnnl_engine_create");
        mm.stream_create = (dnnl_stream_create_fn)dlsym(h, "dnnl_stream_create");
        mm.md_init = (dnnl_md_init_strides_fn)dlsym(h, "dnnl_memory_desc_init_by_strides");
        mm.matmul_init = (dnnl_matmul_desc_init_fn)dlsym(h, "dnnl_matmul_desc_init");
        mm.pd_create = (dnnl_pd_create_fn)dlsym(h, "dnnl_primitive_desc_create");
        mm.prim_create = (dnnl_prim_create_fn)dlsym(h, "dnnl_primitive_create");
        mm.mem_create = (dnnl_mem_create_fn)dlsym(h, "dnnl_memory_create");
        mm.execute = (dnnl_execute_fn)dlsym(h, "dnnl_primitive_execute");
        mm.stream_wait = (dnnl_handle_fn)dlsym(h, "dnnl_stream_wait");
        mm.mem_destroy = (dnnl_handle_fn)dlsym(h, "dnnl_memory_destroy");
        mm.prim_destroy = (dnnl_handle_fn)dlsym(h, "dnnl_primitive_destroy");
        mm.pd_destroy = (dnnl_handle_fn)dlsym(h, "dnnl_primitive_desc_destroy");
        /* the 2.x API (3.x has none of dnnl_memory_desc_init_by_strides, dnnl_matmul_desc_init) */
        mmlib->present = mm.engine_create && mm.stream_create && mm.md_init && mm.matmul_init && mm.pd_create &&
                         mm.prim_create && mm.mem_create && mm.execute && mm.stream_wait && mm.mem_destroy &&
                         mm.prim_destroy && mm.pd_destroy && mm.engine_create(&mm.engine, DNNL_CPU, 0) == 0 &&
                         mm.stream_create(&mm.stream, mm.engine, DNNL_STREAM_IN_ORDER) == 0;
    }
    h = open_first(oblas_names);
    if (h && (cblas_sgemm = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm")) != NULL &&
        (openblas_set_threads = (openblas_threads_fn)dlsym(h, "openblas_set_num_threads")) != NULL) {
        openblas_core_fn core = (openblas_core_fn)dlsym(h, "openblas_get_corename");
        snprintf(oblas->detail, sizeof oblas->detail, "%s", core ? core() : "");
        oblas->present = 1;
    }
}

/* The operands of one shape: float32 A and B, their bf16 copies (vt_k.bf16_round), C. */
typedef struct {
    float *A, *B;
    vt_bf16 *A16, *B16;
    int lda, ldb;
} operands;

/* A oneDNN bf16 matmul primitive for one shape and thread count, writing C. */
typedef struct {
    void *pd, *prim, *src, *wei, *dst;
} dnnl_matmul;

static int matmul_create(dnnl_matmul *p, const gemm_shape *s, const operands *o, float *C) {
    static _Alignas(64) unsigned char md_src[DNNL_DESC_BYTES], md_wei[DNNL_DESC_BYTES], md_dst[DNNL_DESC_BYTES],
        desc[DNNL_DESC_BYTES];
    int64_t ds[2] = {s->M, s->K}, dw[2] = {s->K, s->N}, dd[2] = {s->M, s->N};
    int64_t ss[2] = {s->ta ? 1 : o->lda, s->ta ? o->lda : 1}, sw[2] = {s->tb ? 1 : o->ldb, s->tb ? o->ldb : 1};
    int64_t sd[2] = {s->N, 1};
    memset(p, 0, sizeof *p);
    return mm.md_init(md_src, 2, ds, DNNL_BF16, ss) || mm.md_init(md_wei, 2, dw, DNNL_BF16, sw) ||
           mm.md_init(md_dst, 2, dd, DNNL_F32, sd) || mm.matmul_init(desc, md_src, md_wei, NULL, md_dst) ||
           mm.pd_create(&p->pd, desc, NULL, mm.engine, NULL) || mm.prim_create(&p->prim, p->pd) ||
           mm.mem_create(&p->src, md_src, mm.engine, o->A16) || mm.mem_create(&p->wei, md_wei, mm.engine, o->B16) ||
           mm.mem_create(&p->dst, md_dst, mm.engine, C);
}

static void matmul_free(dnnl_matmul *p) {
    if (p->src) mm.mem_destroy(p->src);
    if (p->wei) mm.mem_destroy(p->wei);
    if (p->dst) mm.mem_destroy(p->dst);
    if (p->prim) mm.prim_destroy(p->prim);
    if (p->pd) mm.pd_destroy(p->pd);
}

/* C = op(A) op(B) through library l on nt threads (the matmul primitive p writes its C). */
static void run_gemm(const gemm_lib *l, int bf16, const gemm_shape *s, int nt, const operands *o, float *C,
                     const dnnl_matmul *p) {
    switch (l->kind) {
    case LIB_DNNL_SGEMM: {
        omp_set_num_threads(nt);
        int st = dnnl_sgemm(s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, 1.0f, o->A, o->lda, o->B, o->ldb,
                            0.0f, C, s->N);
        if (st != 0) {
            fprintf(stderr, "bench_kernels: dnnl_sgemm failed (status %d) on %s\n", st, s->name);
            exit(1);
        }
        break;
    }
    case LIB_DNNL_MATMUL: {
        omp_set_num_threads(nt);
        const dnnl_exec_arg args[3] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->wei}, {DNNL_ARG_DST, p->dst}};
        if (mm.execute(p->prim, mm.stream, 3, args) != 0 || mm.stream_wait(mm.stream) != 0) {
            fprintf(stderr, "bench_kernels: oneDNN bf16 matmul failed on %s\n", s->name);
            exit(1);
        }
        break;
    }
    case LIB_OPENBLAS:
        openblas_set_threads(nt);
        cblas_sgemm(CBLAS_ROW_MAJOR, s->ta ? CBLAS_TRANS : CBLAS_NO_TRANS, s->tb ? CBLAS_TRANS : CBLAS_NO_TRANS, s->M,
                    s->N, s->K, 1.0f, o->A, o->lda, o->B, o->ldb, 0.0f, C, s->N);
        break;
    case LIB_OURS:
        omp_set_num_threads(nt);
        /* as training calls it: the weight (B of the fwd and dX products) from its bf16 copy */
        vt_gemm_prec(bf16, s->ta, s->tb, s->M, s->N, s->K, 1.0f, o->A, o->lda, o->B, bf16 && s->ta == 0 ? o->B16 : NULL,
                     o->ldb, 0.0f, NULL, C, s->N);
        break;
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

static vt_bf16 *bf16_copy(const float *x, size_t n) {
    vt_bf16 *p = aligned_alloc(64, (n * sizeof(vt_bf16) + 63) / 64 * 64);
    if (!p) {
        fprintf(stderr, "bench_kernels: out of memory (%zu bf16)\n", n);
        exit(1);
    }
    vt_k.bf16_round(x, p, n);
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

/* GFLOP/s of shape s on nt threads for each present library of one precision (gf[l], 0
 * when absent): a warm-up and check call each, then alternating rounds, best wall time
 * per library; med[l] (l > 0), the median over the rounds of each round's ratio of our
 * rate to library l's (0 when absent). */
/* VT_BENCH_CLOCK=cpu: the products are timed in the process's CPU seconds per thread
 * instead of wall-clock seconds, so that on a machine shared with other work the figures
 * count the work done while running (the threads' waits at barriers included), not the
 * time others took; the peaks stay wall-clock. */
static int cpu_clock = 0;

/* Rounds per shape: at least MIN_ROUNDS, more while under 1.5 s were spent. */
#define MIN_ROUNDS 5
#define MAX_ROUNDS 9

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void time_shape(const gemm_lib *libs, int bf16, const gemm_shape *s, int nt, double gf[N_LIBS],
                       double med[N_LIBS], double err[N_LIBS]) {
    size_t mk = (size_t)s->M * s->K, kn = (size_t)s->K * s->N, mn = (size_t)s->M * s->N;
    operands o = {falloc(mk), falloc(kn), NULL, NULL, s->ta ? s->M : s->K, s->tb ? s->K : s->N};
    o.A16 = bf16_copy(o.A, mk);
    o.B16 = bf16_copy(o.B, kn);
    float *C = falloc(mn), *ref = falloc(mn);
    dnnl_matmul p = {0};
    double best[N_LIBS];
    for (int l = 0; l < N_LIBS; l++) {
        best[l] = 1e30;
        err[l] = 0;
        if (!libs[l].present) continue;
        if (libs[l].kind == LIB_DNNL_MATMUL) {
            omp_set_num_threads(nt);
            if (matmul_create(&p, s, &o, C) != 0) {
                fprintf(stderr, "bench_kernels: cannot create oneDNN's bf16 matmul for %s\n", s->name);
                exit(1);
            }
        }
        run_gemm(&libs[l], bf16, s, nt, &o, l == 0 ? ref : C, &p);
        if (l > 0) {
            err[l] = rel_diff(C, ref, mn);
            if (!(err[l] < 1e-4)) {
                fprintf(stderr, "bench_kernels: %s's %s result differs from vitrain's on %s (%d threads): "
                        "relative difference %.3g\n", libs[l].lib, bf16 ? "bf16" : "fp32", s->name, nt, err[l]);
                exit(1);
            }
        }
    }
    double spent = 0, t[N_LIBS][MAX_ROUNDS];
    int rounds = 0;
    for (; rounds < MAX_ROUNDS && (rounds < MIN_ROUNDS || spent < 1.5); rounds++) {
        for (int j = 0; j < N_LIBS; j++) {
            int l = (rounds + j) % N_LIBS; /* each round starts with the next library */
            if (!libs[l].present) continue;
            double t0 = cpu_clock ? bench_cpu_now() / nt : bench_now();
            run_gemm(&libs[l], bf16, s, nt, &o, C, &p);
            double dt = (cpu_clock ? bench_cpu_now() / nt : bench_now()) - t0;
            spent += dt;
            t[l][rounds] = dt;
            if (dt < best[l]) best[l] = dt;
        }
    }
    for (int l = 0; l < N_LIBS; l++) {
        gf[l] = libs[l].present ? 2.0 * s->M * s->N * (double)s->K / best[l] * 1e-9 : 0;
        med[l] = 0;
        if (l == 0 || !libs[l].present) continue;
        double r[MAX_ROUNDS];
        for (int i = 0; i < rounds; i++) r[i] = t[l][i] / t[0][i];
        qsort(r, (size_t)rounds, sizeof r[0], cmp_double);
        med[l] = rounds % 2 ? r[rounds / 2] : 0.5 * (r[rounds / 2 - 1] + r[rounds / 2]);
    }
    matmul_free(&p);
    free(o.A); free(o.B); free(o.A16); free(o.B16); free(C); free(ref);
}

/* "%.1f" of x, or null when x <= 0 (no peak to refer to). */
static const char *num_or_null(double x, char *buf, size_t len) {
    if (x > 0) snprintf(buf, len, "%.1f", x);
    else snprintf(buf, len, "null");
    return buf;
}

/* The bf16 path in the kernel table ("reference" on the scalar level). */
static const char *bf16_path_name(void) {
    int p = vt_kernels_bf16_path();
    return p < 0 ? "reference" : vt_bf16_path_name((vt_bf16_path)p);
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
    const char *pe = getenv("VT_BENCH_PRECISION");
    const char *ck = getenv("VT_BENCH_CLOCK");
    if (ck && *ck && strcmp(ck, "cpu") && strcmp(ck, "wall")) {
        fprintf(stderr, "bench_kernels: VT_BENCH_CLOCK=%s: expected cpu or wall\n", ck);
        return 2;
    }
    cpu_clock = ck && !strcmp(ck, "cpu");
    if (pe && *pe && strcmp(pe, "fp32") && strcmp(pe, "bf16")) {
        fprintf(stderr, "bench_kernels: VT_BENCH_PRECISION=%s: expected fp32 or bf16\n", pe);
        return 2;
    }
    int want_ref[N_LIBS] = {1, 1, 1}; /* ours, onednn, openblas */
    const char *refs = getenv("VT_BENCH_REFS");
    if (refs && *refs) {
        static const char *const ref_names[N_LIBS] = {"", "onednn", "openblas"};
        char list[128];
        snprintf(list, sizeof list, "%s", refs);
        want_ref[1] = want_ref[2] = 0;
        for (char *save = NULL, *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
            int found = 0;
            for (int l = 1; l < N_LIBS; l++)
                if (!strcmp(w, ref_names[l])) want_ref[l] = found = 1;
            if (!found) {
                fprintf(stderr, "bench_kernels: VT_BENCH_REFS=%s: \"%s\" is not a reference (onednn, openblas)\n",
                        refs, w);
                return 2;
            }
        }
    }
    char err[256];
    if (vt_kernels_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench_kernels: %s\n", err);
        return 1;
    }
    const char *path_env = getenv("VT_BF16_PATH");
    if (path_env && *path_env) {
        char line[512];
        if (vt_bf16_path_select(line, sizeof line) != VT_OK) {
            fprintf(stderr, "bench_kernels: %s\n", vt_last_error());
            return 2;
        }
        fprintf(stderr, "%s\n", line);
    }
    vt_isa best_isa = vt_kernels_best_isa();
    if (best_isa < VT_ISA_AVX2) {
        fprintf(stderr, "bench_kernels: this CPU has no AVX2+FMA; the scalar GEMM is not benchmarked\n");
        return 0;
    }
    char cpu[192];
    bench_cpu(cpu, sizeof cpu);
    const int avx512 = best_isa >= VT_ISA_AVX512, has_bf16 = vt_k.isa >= VT_ISA_AVX512BF16;
    /* which precisions: fp32 always, bf16 where the level has bf16 instructions */
    int run_prec[2] = {!pe || !*pe || !strcmp(pe, "fp32"), has_bf16 && (!pe || !*pe || !strcmp(pe, "bf16"))};
    if (pe && !strcmp(pe, "bf16") && !has_bf16)
        fprintf(stderr, "bench_kernels: the %s level has no bf16 instructions; no bf16 rows\n", vt_k.name);
    static const int threads[2] = {1, 2};
    double peak_start[2][2] = {{0}};
    for (int ti = 0; ti < 2; ti++) {
        peak_start[0][ti] = fma_peak_gflops(avx512, threads[ti]);
        if (has_bf16) peak_start[1][ti] = bf16_peak_gflops(threads[ti]);
    }
    fprintf(stderr, "%s, kernels %s, GEMM context %s\nFMA peak at the start: %.1f GFLOP/s on 1 thread, %.1f on 2",
            cpu, vt_k.name, vt_gemm_ctx.name, peak_start[0][0], peak_start[0][1]);
    if (has_bf16) fprintf(stderr, "; bf16 (VDPBF16PS) peak %.1f and %.1f", peak_start[1][0], peak_start[1][1]);
    fputc('\n', stderr);

    gemm_lib libs[2][N_LIBS] = {
        {{LIB_OURS, "ours", "", 1}, {LIB_DNNL_SGEMM, "onednn", "", 0}, {LIB_OPENBLAS, "openblas", "", 0}},
        {{LIB_OURS, "ours", "", 1}, {LIB_DNNL_MATMUL, "onednn", "", 0}, {LIB_OPENBLAS, "openblas", "", 0}}};
    snprintf(libs[0][0].detail, sizeof libs[0][0].detail, "%s", vt_k.name);
    snprintf(libs[1][0].detail, sizeof libs[1][0].detail, "%s", vt_k.name);
    load_refs(&libs[0][1], &libs[1][1], &libs[0][2]);
    /* VT_BENCH_REFS: only the named references are timed (a shorter run) */
    int skipped[N_LIBS] = {0};
    for (int pr = 0; pr < 2; pr++)
        for (int l = 1; l < N_LIBS; l++)
            if (!want_ref[l] && libs[pr][l].present) libs[pr][l].present = 0, skipped[l] = 1;
    for (int pr = 0; pr < 2; pr++)
        for (int l = 1; l < N_LIBS; l++) {
            if (pr == 1 && l == 2) continue; /* OpenBLAS has no bf16 GEMM */
            printf("{\"bench\":\"gemm_lib\",\"cpu\":\"%s\",\"precision\":\"%s\",\"lib\":\"%s\",\"present\":%s,"
                   "\"detail\":\"%s\"}\n", cpu, pr ? "bf16" : "fp32", libs[pr][l].lib,
                   libs[pr][l].present ? "true" : "false", libs[pr][l].detail);
            fprintf(stderr, "reference %s %-9s %s\n", pr ? "bf16" : "fp32", libs[pr][l].lib,
                    libs[pr][l].present ? libs[pr][l].detail
                    : skipped[l] ? "installed, not timed (VT_BENCH_REFS)"
                    : l == 1 ? (pr ? "not available (needs libdnnl2's 2.x C API)" : "not installed (apt-get install libdnnl2)")
                             : "not installed (apt-get install libopenblas0-openmp)");
        }
    fflush(stdout);

    static double gf[2][N_SHAPES][2][N_LIBS], med[2][N_SHAPES][2][N_LIBS], diff[2][N_SHAPES][2][N_LIBS];
    int run[N_SHAPES] = {0};
    for (int pr = 0; pr < 2; pr++) {
        if (!run_prec[pr]) continue;
        fprintf(stderr, "\n%s GFLOP/s  %2s %2s %6s %6s %6s %2s %8s %8s %6s %6s %8s %6s %6s\n",
                pr ? "bf16" : "fp32", "ta", "tb", "M", "N", "K", "th", "ours", "oneDNN", "ratio", "median", "OpenBLAS",
                "ratio", "median");
        for (int si = 0; si < ns; si++) {
            const gemm_shape *s = &shapes[si];
            if (filter && !strstr(s->name, filter)) continue;
            run[si] = 1;
            for (int ti = 0; ti < 2; ti++) {
                double *g = gf[pr][si][ti];
                time_shape(libs[pr], pr, s, threads[ti], g, med[pr][si][ti], diff[pr][si][ti]);
                fprintf(stderr, "%-16s %2d %2d %6d %6d %6d %2d %8.1f", s->name, s->ta, s->tb, s->M, s->N, s->K,
                        threads[ti], g[0]);
                for (int l = 1; l < N_LIBS; l++) {
                    if (libs[pr][l].present)
                        fprintf(stderr, " %8.1f %6.2f %6.2f", g[l], g[0] / g[l], med[pr][si][ti][l]);
                    else
                        fprintf(stderr, " %8s %6s %6s", "-", "-", "-");
                }
                fprintf(stderr, "\n");
            }
        }
    }

    /* The peaks again at the end; a stretch of host load during one measurement (a VM
     * can lose a core for a while) would otherwise inflate every % below. */
    double peak[2][3] = {{0}};
    for (int pr = 0; pr < 2; pr++)
        for (int ti = 0; ti < 2; ti++) {
            int nt = threads[ti];
            if (pr == 1 && !has_bf16) continue;
            double end_gf = pr ? bf16_peak_gflops(nt) : fma_peak_gflops(avx512, nt);
            peak[pr][nt] = end_gf > peak_start[pr][ti] ? end_gf : peak_start[pr][ti];
            printf("{\"bench\":\"%s\",\"cpu\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"gflops\":%.1f,\"start\":%.1f,"
                   "\"end\":%.1f}\n", pr ? "bf16_peak" : "fma_peak", cpu,
                   pr ? "avx512bf16" : vt_kernels_isa_name(avx512 ? VT_ISA_AVX512 : VT_ISA_AVX2), nt, peak[pr][nt],
                   peak_start[pr][ti], end_gf);
            fprintf(stderr, "\n%s peak, %d thread%s: %.1f GFLOP/s (the better of %.1f at the start, %.1f at the end)",
                    pr ? "bf16" : "FMA", nt, nt > 1 ? "s" : " ", peak[pr][nt], peak_start[pr][ti], end_gf);
        }
    fprintf(stderr, "\n");

    for (int pr = 0; pr < 2; pr++) {
        if (!run_prec[pr]) continue;
        const char *pn = pr ? "bf16" : "fp32";
        fprintf(stderr, "\n%s %% of peak   1 thread  2 threads\n", pn);
        /* ratio sums per (threads, lib) and % peak per (threads, model) for the summary */
        double log_ratio[2][N_LIBS] = {{0}}, log_med[2][N_LIBS] = {{0}}, min_ratio[2][N_LIBS], pct_min[2][N_MODELS],
               pct_sum[2][N_MODELS];
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
                const double *g = gf[pr][si][ti];
                double pct = peak[pr][nt] > 0 ? 100.0 * g[0] / peak[pr][nt] : 0;
                char pb[32];
                printf("{\"bench\":\"gemm\",\"cpu\":\"%s\",\"isa\":\"%s\",\"gemm_ctx\":\"%s\",\"precision\":\"%s\",%s%s%s\"shape\":\"%s\","
                       "\"ta\":%d,\"tb\":%d,\"M\":%d,\"N\":%d,\"K\":%d,\"threads\":%d,\"gflops\":%.1f,"
                       "\"pct_peak\":%s}\n", cpu, vt_k.name, vt_gemm_ctx.name, pn, pr ? "\"bf16_path\":\"" : "",
                       pr ? bf16_path_name() : "", pr ? "\"," : "", s->name, s->ta, s->tb, s->M, s->N, s->K, nt, g[0],
                       num_or_null(pct, pb, sizeof pb));
                fprintf(stderr, " %8.1f%%", pct);
                if (pct < pct_min[ti][s->model]) pct_min[ti][s->model] = pct;
                pct_sum[ti][s->model] += pct;
                n_pct[ti][s->model]++;
                for (int l = 1; l < N_LIBS; l++) {
                    if (!libs[pr][l].present) continue;
                    double ratio = g[0] / g[l], ratio_med = med[pr][si][ti][l];
                    printf("{\"bench\":\"gemm_ref\",\"cpu\":\"%s\",\"precision\":\"%s\",\"lib\":\"%s\",\"shape\":\"%s\","
                           "\"threads\":%d,\"gflops\":%.1f,\"pct_peak\":%s,\"ours_isa\":\"%s\",\"ours_gflops\":%.1f,"
                           "\"ratio\":%.3f,\"ratio_median\":%.3f,\"rel_diff\":%.2g}\n",
                           cpu, pn, libs[pr][l].lib, s->name, nt, g[l],
                           num_or_null(peak[pr][nt] > 0 ? 100.0 * g[l] / peak[pr][nt] : 0, pb, sizeof pb), vt_k.name,
                           g[0], ratio, ratio_med, diff[pr][si][ti][l]);
                    log_ratio[ti][l] += log(ratio);
                    log_med[ti][l] += log(ratio_med);
                    n_ratio[ti][l]++;
                    n_match[ti][l] += ratio >= 1.0;
                    if (ratio < min_ratio[ti][l]) min_ratio[ti][l] = ratio, min_shape[ti][l] = s->name;
                }
            }
            fprintf(stderr, "\n");
        }

        fprintf(stderr, "\nsummary %s (%s)\n", pn, vt_k.name);
        for (int ti = 0; ti < 2; ti++) {
            int nt = threads[ti];
            for (int m = 0; m < N_MODELS; m++) {
                if (!n_pct[ti][m]) continue;
                double mean = pct_sum[ti][m] / n_pct[ti][m];
                char a[32], b[32];
                printf("{\"bench\":\"gemm_summary\",\"cpu\":\"%s\",\"isa\":\"%s\",\"gemm_ctx\":\"%s\",\"precision\":\"%s\",\"lib\":\"ours\","
                       "\"threads\":%d,\"model\":\"%s\",\"shapes\":%d,\"min_pct_peak\":%s,\"mean_pct_peak\":%s}\n",
                       cpu, vt_k.name, vt_gemm_ctx.name, pn, nt, models[m].model, n_pct[ti][m],
                       num_or_null(pct_min[ti][m], a, sizeof a), num_or_null(mean, b, sizeof b));
                fprintf(stderr, "  %d thread%s %-7s ours %% of peak: min %.1f%%, mean %.1f%% (%d shapes)\n", nt,
                        nt > 1 ? "s" : " ", models[m].model, pct_min[ti][m], mean, n_pct[ti][m]);
            }
            for (int l = 1; l < N_LIBS; l++) {
                if (!n_ratio[ti][l]) continue;
                double geo = exp(log_ratio[ti][l] / n_ratio[ti][l]), geo_med = exp(log_med[ti][l] / n_ratio[ti][l]);
                printf("{\"bench\":\"gemm_summary\",\"cpu\":\"%s\",\"isa\":\"%s\",\"gemm_ctx\":\"%s\",\"precision\":\"%s\",\"lib\":\"%s\","
                       "\"threads\":%d,\"shapes\":%d,\"ours_at_least\":%d,\"min_ratio\":%.3f,\"min_ratio_shape\":\"%s\","
                       "\"geomean_ratio\":%.3f,\"geomean_ratio_median\":%.3f}\n",
                       cpu, vt_k.name, vt_gemm_ctx.name, pn, libs[pr][l].lib, nt, n_ratio[ti][l], n_match[ti][l], min_ratio[ti][l],
                       min_shape[ti][l], geo, geo_med);
                fprintf(stderr, "  %d thread%s ours / %-8s: min %.2f (%s), geomean %.2f (of the round medians %.2f), "
                        "ours >= theirs on %d of %d\n", nt, nt > 1 ? "s" : " ", libs[pr][l].lib, min_ratio[ti][l],
                        min_shape[ti][l], geo, geo_med, n_match[ti][l], n_ratio[ti][l]);
            }
        }
        fflush(stdout);
    }

    /* the lower levels, each precision where the level's GEMM entry differs from the top's */
    vt_kernels top = vt_k;
    for (int lv = (int)top.isa - 1; lv >= VT_ISA_AVX2; lv--) {
        vt_kernels lower;
        vt_kernels_table((vt_isa)lv, &lower);
        for (int pr = 0; pr < 2; pr++) {
            if (!run_prec[pr] || (pr ? (void *)lower.gemm_bf16 == (void *)top.gemm_bf16
                                      : (void *)lower.gemm == (void *)top.gemm))
                continue;
            const char *pn = pr ? "bf16" : "fp32";
            fprintf(stderr, "\nlevel %s, %s, 1 thread, ours only (%% of the %s peak)\n", lower.name, pn,
                    pr ? "bf16" : "FMA");
            vt_k = lower;
            gemm_lib only_ours[N_LIBS] = {{LIB_OURS, "ours", "", 1}, {LIB_DNNL_SGEMM, "onednn", "", 0},
                                          {LIB_OPENBLAS, "openblas", "", 0}};
            for (int si = 0; si < ns; si++) {
                const gemm_shape *s = &shapes[si];
                if (filter && !strstr(s->name, filter)) continue;
                double g1[N_LIBS], m1[N_LIBS], d1[N_LIBS];
                time_shape(only_ours, pr, s, 1, g1, m1, d1);
                double pct = peak[pr][1] > 0 ? 100.0 * g1[0] / peak[pr][1] : 0;
                char pb[32];
                printf("{\"bench\":\"gemm\",\"cpu\":\"%s\",\"isa\":\"%s\",\"gemm_ctx\":\"%s\",\"precision\":\"%s\",\"shape\":\"%s\","
                       "\"ta\":%d,\"tb\":%d,\"M\":%d,\"N\":%d,\"K\":%d,\"threads\":1,\"gflops\":%.1f,"
                       "\"pct_peak\":%s}\n", cpu, vt_k.name, vt_gemm_ctx.name, pn, s->name, s->ta, s->tb, s->M, s->N, s->K, g1[0],
                       num_or_null(pct, pb, sizeof pb));
                fprintf(stderr, "%-7s %-16s %8.1f %5.1f%%\n", vt_k.name, s->name, g1[0], pct);
            }
            vt_k = top;
        }
    }
    return 0;
}
