/* bench_pe.c - training-step cost of each position encoding relative to none (`make bench`).
 * Not a test: prints figures.
 *
 * For ViT-S/16 at 224 (batch 32) and a ViT-Ti-sized model with patch 4 at 32 (batch 128),
 * builds one model per PE kind of the registry (src/pe/kinds.h: every pe.kind, with its
 * defaults; liere's is one dense generator for the model, share all, block hd) and
 * times full training steps (zero grad, forward, cross-entropy, backward, AdamW) on the
 * same synthetic batch. Kinds are timed round-robin, 5 rounds in alternating order, and
 * each kind keeps its fastest step, so load on a shared machine hits every kind alike; "ratio" = step time /
 * step time of none, measured in this process.
 * All models share one step arena, so peak memory is one step's activations plus the
 * parameters and optimizer state of every kind.
 * stdout: one JSON object per (model, kind); stderr: a readable table.
 * VT_BENCH_QUICK=1: batch sizes divided by 8 and 2 rounds.
 * Usage: bench_pe [substring]  - only the kinds whose name contains it (e.g. "liere",
 * "rope"), with none always timed as the reference of the ratios.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "config.h"
#include "kernels.h"
#include "ops/ops.h"
#include "optim.h"
#include "pe/kinds.h"
#include "resolve.h"
#include "rng.h"
#include "tape.h"
#include "vit.h"

/* The kinds are the registry's, k in [0, N_KINDS); none is the reference of the ratios. */
#define N_KINDS VT_PE_KIND_COUNT
#define REF VT_PE_NONE

static const char *kind_name(int k) { return vt_pe_kind_name((vt_pe_kind)k); }

typedef struct {
    const char *name;
    const char *sets[6];
    int batch;
} model_case;

static const model_case models[] = {
    {"vit_small_p16_224", {"model.preset=vit_small", "model.patch_size=16", "model.img_size=224",
                           "model.num_classes=1000"}, 32},
    {"vit_tiny_p4_32", {"model.preset=vit_tiny", "model.patch_size=4", "model.img_size=32",
                        "model.num_classes=10"}, 128},
};

/* One model per kind; the step arena and tape are shared by all of them (each step
 * resets them), so memory holds one step's activations, not one per kind. */
static vt_arena arena;
static vt_tape tape;
static vt_rng dropout_rng;

typedef struct {
    vt_config cfg;
    vt_vit m;
    vt_optim o;
    double best;
} pe_run;

static int setup(pe_run *r, const model_case *mc, int k) {
    vt_model_spec ms;
    const char *sets[16];
    char kind[64];
    int n = 0;
    for (int i = 0; i < 6 && mc->sets[i]; i++) sets[n++] = mc->sets[i];
    snprintf(kind, sizeof kind, "pe.kind=%s", kind_name(k));
    sets[n++] = kind;
    sets[n++] = "model.in_chans=3";
    sets[n++] = "data.kind=synthetic";
    if (vt_resolve_file(&r->cfg, NULL, sets, n) != VT_OK ||
        vt_vit_init(&r->m, vt_resolve_model_spec(&r->cfg, &ms), 1) != VT_OK || vt_optim_init(&r->o, &r->cfg.optim, r->m.n_params) != VT_OK) {
        fprintf(stderr, "bench_pe: %s/%s: %s\n", mc->name, kind_name(k), vt_last_error());
        return 0;
    }
    r->best = 1e30;
    return 1;
}

static void teardown(pe_run *r) {
    vt_optim_free(&r->o);
    vt_vit_free(&r->m);
}

/* One training step on the given batch; returns its wall time. */
static double step(pe_run *r, const float *images, const int *labels, int B) {
    double t0 = bench_now();
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    vt_vit_zero_grad(&r->m);
    int64_t shape[4] = {B, r->m.in_chans, r->m.img_size, r->m.img_size};
    vt_tensor *x = vt_tensor_wrap(&arena, (float *)images, 4, shape);
    vt_tensor *logits = vt_vit_forward(&r->m, &tape, x);
    vt_tensor *loss = vt_op_cross_entropy(&tape, logits, labels, NULL, 0.1f);
    vt_tape_backward(&tape, loss);
    vt_optim_step(&r->o, &r->m, 1e-4f);
    return bench_now() - t0;
}

/* Whether kind k runs under the command-line filter (NULL: all); none always does. */
static int selected(const char *filter, int k) { return k == REF || !filter || strstr(kind_name(k), filter); }

static void bench_model(const model_case *mc, int quick, const char *filter) {
    int B = quick ? mc->batch / 8 : mc->batch, rounds = quick ? 2 : 5;
    pe_run *runs = calloc(N_KINDS, sizeof *runs);
    int ok[N_KINDS];
    for (int k = 0; k < N_KINDS; k++) ok[k] = selected(filter, k) && setup(&runs[k], mc, k);
    if (!ok[REF]) exit(1);
    int S = runs[REF].m.img_size;
    size_t n_img = (size_t)B * 3 * S * S;
    float *images = malloc(n_img * sizeof *images);
    int *labels = malloc((size_t)B * sizeof *labels);
    vt_rng g;
    vt_rng_seed(&g, 3);
    for (size_t i = 0; i < n_img; i++) images[i] = (float)(2.0 * vt_rng_uniform(&g) - 1.0);
    for (int b = 0; b < B; b++) labels[b] = (int)vt_rng_below(&g, (uint64_t)runs[REF].m.num_classes);
    for (int k = 0; k < N_KINDS; k++)
        if (ok[k]) step(&runs[k], images, labels, B); /* warm-up: the arena settles */
    for (int round = 0; round < rounds; round++)
        for (int i = 0; i < N_KINDS; i++) {
            int k = round % 2 ? N_KINDS - 1 - i : i; /* alternate the order: no kind always follows the same one */
            if (!ok[k]) continue;
            double t = step(&runs[k], images, labels, B);
            if (t < runs[k].best) runs[k].best = t;
        }
    fprintf(stderr, "%-20s %-14s %10s %8s\n", "model", "pe", "step ms", "ratio");
    for (int k = 0; k < N_KINDS; k++) {
        if (!ok[k]) continue;
        double ratio = runs[k].best / runs[REF].best;
        printf("{\"bench\":\"pe_step\",\"model\":\"%s\",\"pe\":\"%s\",\"batch\":%d,\"threads\":%d,"
               "\"step_ms\":%.2f,\"ratio_vs_none\":%.4f,\"rounds\":%d}\n",
               mc->name, kind_name(k), B, omp_get_max_threads(), 1e3 * runs[k].best, ratio, rounds);
        fprintf(stderr, "%-20s %-14s %10.1f %8.3f\n", mc->name, kind_name(k), 1e3 * runs[k].best, ratio);
        teardown(&runs[k]);
    }
    fflush(stdout);
    free(images);
    free(labels);
    free(runs);
}

int main(int argc, char **argv) {
    char err[256];
    const char *filter = argc > 1 ? argv[1] : NULL;
    int any = 0;
    for (int k = 0; k < N_KINDS; k++) any |= k != REF && selected(filter, k);
    if (argc > 2 || (filter && !any)) {
        fprintf(stderr, "usage: bench_pe [substring of a PE kind:");
        for (int k = 0, shown = 0; k < N_KINDS; k++)
            if (k != REF) fprintf(stderr, "%s %s", shown++ ? "," : "", kind_name(k));
        fprintf(stderr, "]\n");
        return 2;
    }
    if (vt_kernels_init(err, sizeof err)) {
        fprintf(stderr, "bench_pe: %s\n", err);
        return 1;
    }
    vt_arena_init(&arena, 1 << 20);
    vt_tape_init(&tape, &arena);
    vt_rng_seed(&dropout_rng, 7);
    tape.rng = &dropout_rng;
    const char *q = getenv("VT_BENCH_QUICK");
    int quick = q && *q && strcmp(q, "0") != 0;
    fprintf(stderr, "bench_pe: kernels %s, %d threads%s\n", vt_k.name, omp_get_max_threads(),
            quick ? " (quick)" : "");
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) bench_model(&models[i], quick, filter);
    return 0;
}
