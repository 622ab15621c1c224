/* bench_passes.c - the training step's FLOP-free passes, kernel by kernel, on every SIMD
 * level this CPU runs (`make bench`). Not a test: prints figures only.
 *
 * The passes besides the products and attention that bench_step's "other_s" holds: GELU
 * forward and its fused backward (gelu_fwd, gelu_bwd_fwd) on the MLP's hidden
 * activations, LayerNorm forward and backward (with gamma and beta gradients) on the
 * residual stream, and the attention scores' softmax forward and backward (its rows of N),
 * at the training shapes of ViT-Ti/4 at 32 (batch 128) and ViT-S/16 at 224 (batch 64),
 * 1 thread (the ops split these calls over threads by rows). Each level's table
 * (vt_kernels_table, scalar up to the CPU's best) is timed on the same inputs; a round
 * times every level once in turn, 5 rounds, each level keeping its median, so load that
 * comes and goes hits every level alike. A timing repeats the call until it has run 20 ms.
 * stdout: one JSON object per (model, pass, level): "ns_per_value" (per element of the
 * pass's main array), "gb_per_s" (the bytes its arrays move, each read or written once,
 * per second) and "vs_scalar" (the scalar level's time / this level's, same process);
 * stderr: a readable table.
 * Usage: bench_passes [substring] - only the passes whose "model/pass" name contains it
 * (e.g. "gelu", "vit_ti"); one that matches none is an error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "kernels.h"
#include "rng.h"
#include "status.h"

#define ROUNDS 5
#define MIN_SECONDS 0.02

typedef enum { GELU_FWD, GELU_BWD_FWD, LN_FWD, LN_BWD, SOFTMAX_FWD, SOFTMAX_BWD, N_PASSES } pass_kind;
static const char *const pass_names[N_PASSES] = {"gelu_fwd", "gelu_bwd_fwd", "layernorm_fwd", "layernorm_bwd",
                                                 "softmax_fwd", "softmax_bwd"};

typedef struct {
    const char *name;
    int tokens, batch, D, hidden, heads;
} model_shape;

static const model_shape models[] = {
    {"vit_ti4_32", 65, 128, 192, 768, 3},
    {"vit_s16_224", 197, 64, 384, 1536, 6},
};

/* The arrays of one pass: rows x cols values in x (and y, dy, dx), per-row mean / rstd,
 * per-column g, b, dg, db. */
typedef struct {
    pass_kind kind;
    int rows, cols;
    float *x, *y, *dy, *dx, *mean, *rstd, *g, *b, *dg, *db;
} pass_data;

static float *falloc(size_t n) {
    float *p = vt_aligned_alloc(n * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_passes: out of memory (%zu floats)\n", n);
        exit(1);
    }
    return p;
}

/* p[0..n) ~ N(offset, scale^2): pre-activations N(0, 1.5^2) (GELU's inputs), residual
 * rows with an offset, scores. */
static void fill(float *p, size_t n, vt_rng *r, float scale, float offset) {
    for (size_t i = 0; i < n; i++) p[i] = offset + scale * (float)vt_rng_normal(r);
}

static pass_data make_pass(pass_kind k, const model_shape *m) {
    int rows = m->tokens * m->batch;
    pass_data d = {.kind = k, .rows = rows, .cols = m->D};
    if (k == GELU_FWD || k == GELU_BWD_FWD) d.cols = m->hidden;
    if (k == SOFTMAX_FWD || k == SOFTMAX_BWD) d.rows = m->batch * m->heads * m->tokens, d.cols = m->tokens;
    size_t n = (size_t)d.rows * d.cols;
    vt_rng s;
    vt_rng_seed(&s, 0x5eed0000u + (uint64_t)k);
    d.x = falloc(n), d.y = falloc(n), d.dy = falloc(n), d.dx = falloc(n);
    d.mean = falloc((size_t)d.rows), d.rstd = falloc((size_t)d.rows);
    d.g = falloc((size_t)d.cols), d.b = falloc((size_t)d.cols), d.dg = falloc((size_t)d.cols),
    d.db = falloc((size_t)d.cols);
    fill(d.x, n, &s, k == SOFTMAX_FWD || k == SOFTMAX_BWD ? 3.0f : 1.5f, k == LN_FWD || k == LN_BWD ? 0.5f : 0.0f);
    fill(d.dy, n, &s, 1e-3f, 0.0f);
    fill(d.g, (size_t)d.cols, &s, 0.1f, 1.0f);
    fill(d.b, (size_t)d.cols, &s, 0.1f, 0.0f);
    memset(d.dx, 0, n * sizeof(float));
    memset(d.dg, 0, (size_t)d.cols * sizeof(float));
    memset(d.db, 0, (size_t)d.cols * sizeof(float));
    vt_kernels s0;
    vt_kernels_table(VT_ISA_SCALAR, &s0);
    if (k == LN_BWD) s0.layernorm_fwd(d.x, d.g, d.b, d.y, d.mean, d.rstd, d.rows, d.cols, 1e-6f); /* the statistics */
    if (k == SOFTMAX_BWD) s0.softmax_rows(d.x, d.y, d.rows, d.cols, d.cols, 1.0f); /* the probabilities */
    /* The fused GELU backward's g: the output gradient on the first call; it holds
     * gelu(x) after it, the next calls' gradient (the vector levels' work does not depend on values) */
    if (k == GELU_BWD_FWD) memcpy(d.y, d.dy, n * sizeof(float));
    return d;
}

static void free_pass(pass_data *d) {
    float *p[] = {d->x, d->y, d->dy, d->dx, d->mean, d->rstd, d->g, d->b, d->dg, d->db};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
}

/* Bytes a call moves: each array read or written once (read-modify-write twice). */
static double pass_bytes(const pass_data *d) {
    double n = (double)d->rows * d->cols * sizeof(float), c = (double)d->cols * sizeof(float);
    switch (d->kind) {
    case GELU_FWD: return 2 * n;                  /* x in, y out */
    case GELU_BWD_FWD: return 4 * n;              /* x, g in, g, dx out (dx written: add 0) */
    case LN_FWD: return 2 * n;                    /* x in, y out */
    case LN_BWD: return 4 * n + 4 * c;            /* dy, x in, dx updated; dg, db updated */
    case SOFTMAX_FWD: return 2 * n;               /* scores in, probabilities out */
    default: return 3 * n;                        /* y, dy in, dx out */
    }
}

static void run_pass(const vt_kernels *t, pass_data *d) {
    size_t n = (size_t)d->rows * d->cols;
    switch (d->kind) {
    case GELU_FWD: t->gelu_fwd(d->x, d->y, n); break;
    case GELU_BWD_FWD: t->gelu_bwd_fwd(d->x, d->y, d->dx, n, 0); break; /* see make_pass */
    case LN_FWD: t->layernorm_fwd(d->x, d->g, d->b, d->y, d->mean, d->rstd, d->rows, d->cols, 1e-6f); break;
    case LN_BWD: t->layernorm_bwd(d->dy, d->x, d->g, d->mean, d->rstd, d->dx, d->dg, d->db, d->rows, d->cols); break;
    case SOFTMAX_FWD: t->softmax_rows(d->x, d->y, d->rows, d->cols, d->cols, 0.125f); break;
    default: t->softmax_bwd_rows(d->y, d->dy, d->dx, d->rows, d->cols, d->cols); break;
    }
}

/* Whether the pass "model/pass" (into name) is one the filter asks for. */
static int pass_selected(const char *filter, size_t m, int k, char *name, size_t len) {
    snprintf(name, len, "%s/%s", models[m].name, pass_names[k]);
    return !filter || strstr(name, filter) != NULL;
}

/* Seconds per call of table t on d: repeated until MIN_SECONDS have passed. */
static double time_pass(const vt_kernels *t, pass_data *d) {
    int reps = 0;
    double t0 = bench_now(), el;
    do {
        run_pass(t, d);
        reps++;
    } while ((el = bench_now() - t0) < MIN_SECONDS);
    return el / reps;
}

int main(int argc, char **argv) {
    const char *filter = argc > 1 ? argv[1] : NULL;
    if (argc > 2) {
        fprintf(stderr, "usage: bench_passes [substring of model/pass]\n");
        return 2;
    }
    char err[256], cpu[200];
    if (vt_kernels_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench_passes: %s\n", err);
        return 1;
    }
    bench_cpu(cpu, sizeof cpu);
    vt_kernels tables[VT_ISA_COUNT];
    int nl = 0;
    for (int l = VT_ISA_SCALAR; l <= (int)vt_kernels_best_isa(); l++)
        if (vt_kernels_table((vt_isa)l, &tables[nl]) == 0) nl++;
    const size_t n_models = sizeof models / sizeof *models;
    char name[96];
    int matched = 0;
    for (size_t m = 0; m < n_models; m++)
        for (int k = 0; k < N_PASSES; k++) matched += pass_selected(filter, m, k, name, sizeof name);
    if (!matched) {
        fprintf(stderr, "bench_passes: no pass matches \"%s\" (names: <model>/<pass>, models", filter);
        for (size_t m = 0; m < n_models; m++) fprintf(stderr, " %s", models[m].name);
        fprintf(stderr, ", passes");
        for (int k = 0; k < N_PASSES; k++) fprintf(stderr, " %s", pass_names[k]);
        fprintf(stderr, ")\n");
        return 2;
    }
    fprintf(stderr, "%-28s %-16s %12s %9s %10s\n", "model/pass", "level", "ns/value", "GB/s", "vs scalar");
    for (size_t m = 0; m < n_models; m++) {
        for (int k = 0; k < N_PASSES; k++) {
            if (!pass_selected(filter, m, k, name, sizeof name)) continue;
            pass_data d = make_pass((pass_kind)k, &models[m]);
            double t[VT_ISA_COUNT][ROUNDS];
            for (int r = 0; r < ROUNDS; r++)
                for (int i = 0; i < nl; i++) {
                    int l = (i + r) % nl; /* each round starts one level further on */
                    t[l][r] = time_pass(&tables[l], &d);
                }
            double scalar = bench_median(t[0], ROUNDS), values = (double)d.rows * d.cols;
            for (int l = 0; l < nl; l++) {
                double s = bench_median(t[l], ROUNDS);
                printf("{\"bench\":\"pass\",\"cpu\":\"%s\",\"isa\":\"%s\",\"best_isa\":\"%s\",\"model\":\"%s\","
                       "\"pass\":\"%s\",\"rows\":%d,\"cols\":%d,\"threads\":1,\"ns_per_value\":%.4f,"
                       "\"gb_per_s\":%.2f,\"vs_scalar\":%.3f}\n",
                       cpu, tables[l].name, vt_kernels_isa_name(vt_kernels_best_isa()), models[m].name,
                       pass_names[k], d.rows, d.cols, s / values * 1e9, pass_bytes(&d) / s * 1e-9, scalar / s);
                fprintf(stderr, "%-28s %-16s %12.4f %9.2f %10.2f\n", name, tables[l].name, s / values * 1e9,
                        pass_bytes(&d) / s * 1e-9, scalar / s);
            }
            fflush(stdout);
            free_pass(&d);
        }
    }
    return 0;
}
