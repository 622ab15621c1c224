/* bench_performer.c - Performer vs softmax attention per training step (`make bench`).
 * Not a test: prints figures. stdout: one JSON object per line; stderr: a table.
 *
 * Model: the ViT-S shape (width 384, 6 heads, hd 64, MLP 1536) cut to `depth` blocks
 * (default 1) at 224 px with patch 16, 8 and 4, i.e. N = 197, 785 and 3137 tokens,
 * batch 1, no PE, performer.features 256 (positive kernel). One training step = arena
 * reset, forward, cross-entropy, backward (no optimizer update: it does not depend on
 * the attention). Reported per configuration: wall ms per step (the fastest of 5 timed
 * steps after one warm-up: the least disturbed by other load on a shared machine) and
 * the step's arena bytes (activations kept for backward plus op scratch: where the
 * N x N attention matrices of softmax show up).
 * Timing is wall-clock on whatever threads OMP_NUM_THREADS gives; a shared machine's
 * load inflates every figure, so compare rows of the same run.
 * VT_BENCH_QUICK=1: one timed step, and the softmax row at 3137 tokens is skipped (its
 * backward keeps 6 x 3137^2 floats = 236 MB per block and dominates the run time).
 * Usage: bench_performer [depth]  (blocks, 1 to 12; anything else is an error)
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
#include "resolve.h"
#include "rng.h"
#include "tape.h"
#include "vit.h"

typedef struct {
    double ms;
    size_t arena_bytes;
    int ok;
} result;

static result run_one(const char *attention, int patch, int depth, int timed) {
    result res = {0, 0, 0};
    char json[1024];
    snprintf(json, sizeof json,
             "{\"model\": {\"width\": 384, \"depth\": %d, \"heads\": 6, \"mlp_ratio\": 4, \"patch_size\": %d, "
             "\"img_size\": 224, \"in_chans\": 3, \"num_classes\": 10, \"attention\": \"%s\"},"
             " \"pe\": {\"kind\": \"none\"}, \"performer\": {\"features\": 256},"
             " \"data\": {\"kind\": \"synthetic\"}}",
             depth, patch, attention);
    vt_config cfg;
    vt_model_spec ms;
    vt_vit m;
    if (vt_resolve_json(&cfg, json, "bench_performer") != VT_OK || vt_resolve(&cfg) != VT_OK ||
        vt_vit_init(&m, vt_resolve_model_spec(&cfg, &ms), 1) != VT_OK) {
        fprintf(stderr, "bench_performer: %s\n", vt_last_error());
        return res;
    }
    const int B = 1, S = 224;
    vt_arena arena;
    vt_arena_init(&arena, 1 << 20);
    vt_tape tape;
    vt_tape_init(&tape, &arena);
    tape.grad_enabled = 1;
    tape.training = 1;
    vt_rng rng;
    vt_rng_seed(&rng, 2);
    tape.rng = &rng;
    float *img = vt_xmalloc((size_t)B * 3 * S * S * sizeof(float));
    for (size_t i = 0; i < (size_t)B * 3 * S * S; i++) img[i] = (float)vt_rng_normal(&rng);
    int labels[1] = {3};
    double t[8];
    for (int s = 0; s <= timed; s++) {
        double t0 = bench_now();
        vt_arena_reset(&arena);
        vt_tape_clear(&tape);
        vt_vit_zero_grad(&m);
        int64_t shape[4] = {B, 3, S, S};
        vt_tensor *x = vt_tensor_wrap(&arena, img, 4, shape);
        vt_tensor *logits = vt_vit_forward(&m, &tape, x);
        vt_tensor *loss = vt_op_cross_entropy(&tape, logits, labels, NULL, 0.0f);
        vt_tape_backward(&tape, loss);
        if (s > 0) t[s - 1] = bench_now() - t0; /* step 0 is the warm-up */
        res.arena_bytes = arena.total_used;
    }
    bench_sort(t, timed);
    res.ms = 1e3 * t[0];
    res.ok = 1;
    free(img);
    vt_tape_free(&tape);
    vt_arena_free(&arena);
    vt_vit_free(&m);
    return res;
}

int main(int argc, char **argv) {
    char err[256];
    if (vt_kernels_init(err, sizeof err) != 0) {
        fprintf(stderr, "bench_performer: %s\n", err);
        return 1;
    }
    const char *q = getenv("VT_BENCH_QUICK");
    int quick = q && q[0] && strcmp(q, "0") != 0;
    long blocks = 1;
    if (!bench_count_arg(argc, argv, "bench_performer [depth: blocks, 1 to 12]", 1, 12, &blocks)) return 2;
    int depth = (int)blocks;
    int timed = quick ? 1 : 5;
    const int patches[3] = {16, 8, 4};
    int threads = omp_get_max_threads();
    fprintf(stderr, "Performer (m 256) vs softmax, ViT-S shape, %d block(s), batch 1, %d thread(s), train step "
                    "(fwd + bwd)\n", depth, threads);
    fprintf(stderr, "%7s %8s %12s %14s %12s %14s %9s %9s\n", "tokens", "patch", "softmax ms", "softmax MB",
            "performer ms", "performer MB", "speedup", "mem ratio");
    for (int i = 0; i < 3; i++) {
        int N = (224 / patches[i]) * (224 / patches[i]) + 1;
        result sm = {0, 0, 0}, pf;
        if (!(quick && patches[i] == 4)) sm = run_one("softmax", patches[i], depth, timed);
        pf = run_one("performer", patches[i], depth, timed);
        if (!pf.ok) return 1;
        if (sm.ok)
            printf("{\"bench\":\"performer\",\"attention\":\"softmax\",\"tokens\":%d,\"patch\":%d,\"depth\":%d,"
                   "\"batch\":1,\"threads\":%d,\"ms_per_step\":%.2f,\"arena_bytes\":%zu}\n",
                   N, patches[i], depth, threads, sm.ms, sm.arena_bytes);
        printf("{\"bench\":\"performer\",\"attention\":\"performer\",\"features\":256,\"tokens\":%d,\"patch\":%d,"
               "\"depth\":%d,\"batch\":1,\"threads\":%d,\"ms_per_step\":%.2f,\"arena_bytes\":%zu}\n",
               N, patches[i], depth, threads, pf.ms, pf.arena_bytes);
        fflush(stdout);
        if (sm.ok)
            fprintf(stderr, "%7d %8d %12.1f %14.1f %12.1f %14.1f %8.2fx %8.2fx\n", N, patches[i], sm.ms,
                    sm.arena_bytes / 1048576.0, pf.ms, pf.arena_bytes / 1048576.0, sm.ms / pf.ms,
                    (double)sm.arena_bytes / (double)pf.arena_bytes);
        else
            fprintf(stderr, "%7d %8d %12s %14s %12.1f %14.1f %9s %9s\n", N, patches[i], "-", "-", pf.ms,
                    pf.arena_bytes / 1048576.0, "-", "-");
    }
    fprintf(stderr, "speedup and mem ratio = softmax / performer (> 1: performer wins).\n");
    return 0;
}
