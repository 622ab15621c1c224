/* bf16_path.c - choosing the bf16 product path (bf16_path.h). */
#include "bf16_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The probe's product: 256 tokens through a 768 x 768 weight (ViT-B's width), forward
 * form (C = X W^T, W from its bf16 copy), as training calls it. */
#define PROBE_M 256
#define PROBE_N 768
#define PROBE_K 768
#define PROBE_ROUNDS 4 /* the first a warm-up */

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

vt_status vt_bf16_path_probe(vt_bf16_probe *pr) {
    vt_kernels t[VT_BF16_PATH_COUNT];
    size_t work = 0;
    char why[256];
    memset(pr, 0, sizeof *pr);
    int offered[VT_BF16_PATH_COUNT];
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
        t[p] = vt_k;
        offered[p] = vt_bf16_path_entries((vt_bf16_path)p, vt_k.isa, &t[p], why, sizeof why) == 0;
        if (offered[p]) {
            size_t w = t[p].gemm_bf16_work_floats(PROBE_M, PROBE_N, PROBE_K);
            if (w > work) work = w;
        }
    }
    const size_t na = (size_t)PROBE_M * PROBE_K, nb = (size_t)PROBE_N * PROBE_K, nc = (size_t)PROBE_M * PROBE_N;
    float *a = vt_aligned_alloc((na + nb + nc + work) * sizeof(float));
    vt_bf16 *b16 = vt_aligned_alloc(nb * sizeof(vt_bf16));
    if (!a || !b16) {
        free(a);
        free(b16);
        return vt_fail(VT_ERR_RUNTIME, "out of memory: the bf16 path probe's %zu floats", na + nb + nc + work);
    }
    float *b = a + na, *c = b + nb, *w = c + nc;
    for (size_t i = 0; i < na + nb; i++) a[i] = (float)((i * 2654435761u) % 1999) / 1999.0f - 0.5f;
    vt_k.bf16_round(b, b16, nb);
    double best[VT_BF16_PATH_COUNT];
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++) best[p] = 1e30;
    for (int r = 0; r < PROBE_ROUNDS; r++)
        for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
            if (!offered[p]) continue;
            double t0 = seconds();
            t[p].gemm_bf16(0, 1, PROBE_M, PROBE_N, PROBE_K, 1.0f, a, PROBE_K, NULL, b16, PROBE_K, 0.0f, NULL, c,
                           PROBE_N, w, NULL);
            double dt = seconds() - t0;
            if (r > 0 && dt < best[p]) best[p] = dt;
        }
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++)
        if (offered[p]) pr->gflops[p] = 2.0 * PROBE_M * PROBE_N * PROBE_K / (best[p] > 1e-9 ? best[p] : 1e-9) * 1e-9;
    free(a);
    free(b16);
    return VT_OK;
}

int vt_bf16_path_pick(const vt_bf16_probe *pr, vt_bf16_path own) {
    int fastest = -1;
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++)
        if (pr->gflops[p] > 0 && (fastest < 0 || pr->gflops[p] > pr->gflops[fastest])) fastest = p;
    if (fastest < 0 || own < 0 || own >= VT_BF16_PATH_COUNT || pr->gflops[own] <= 0) return fastest;
    return pr->gflops[fastest] >= VT_BF16_PATH_MARGIN * pr->gflops[own] ? fastest : (int)own;
}

vt_status vt_bf16_path_env(int *path) {
    char why[256];
    const char *env = getenv("VT_BF16_PATH");
    *path = -1;
    if (!env || !*env) return VT_OK;
    int p = vt_bf16_path_parse(env);
    if (p < 0) return vt_fail(VT_ERR_USAGE, "VT_BF16_PATH=%s is not a bf16 path (use amx, dpbf16 or fma)", env);
    vt_kernels t = vt_k;
    if (vt_bf16_path_entries((vt_bf16_path)p, vt_k.isa, &t, why, sizeof why))
        return vt_fail(VT_ERR_USAGE, "VT_BF16_PATH=%s cannot run here: %s", env, why);
    *path = p;
    return VT_OK;
}

vt_status vt_bf16_path_select(char *line, size_t linelen) {
    char why[256];
    int env;
    vt_status st = vt_bf16_path_env(&env);
    if (st != VT_OK) return st;
    if (env >= 0) {
        if (vt_kernels_set_bf16_path((vt_bf16_path)env, why, sizeof why)) /* a bug: vt_bf16_path_env checked it */
            return vt_fail(VT_ERR_RUNTIME, "VT_BF16_PATH=%s: %s", vt_bf16_path_name((vt_bf16_path)env), why);
        snprintf(line, linelen, "bf16 products on the %s path (%s), as VT_BF16_PATH asks",
                 vt_bf16_path_name((vt_bf16_path)env), vt_bf16_path_unit((vt_bf16_path)env));
        return VT_OK;
    }
    if (vt_k.isa < VT_ISA_AVX2) { /* the scalar level: its gemm_bf16 is the reference, no path */
        snprintf(line, linelen, "bf16 products on the %s level's reference kernel", vt_k.name);
        return VT_OK;
    }
    vt_bf16_probe pr;
    st = vt_bf16_path_probe(&pr);
    if (st != VT_OK) return st;
    vt_bf16_path own = vt_bf16_path_of_level(vt_k.isa);
    int p = vt_bf16_path_pick(&pr, own);
    if (p < 0 || vt_kernels_set_bf16_path((vt_bf16_path)p, why, sizeof why)) /* a bug: own is offered */
        return vt_fail(VT_ERR_RUNTIME, "no bf16 path on the %s level", vt_k.name);
    int n = snprintf(line, linelen, "bf16 products on the %s path (%s); probe GFLOP/s:", vt_bf16_path_name(p),
                     vt_bf16_path_unit((vt_bf16_path)p));
    for (int q = 0; q < VT_BF16_PATH_COUNT && n > 0 && (size_t)n < linelen; q++)
        n += snprintf(line + n, linelen - (size_t)n, pr.gflops[q] > 0 ? " %s %.0f" : " %s -",
                      vt_bf16_path_name((vt_bf16_path)q), pr.gflops[q]);
    if (n > 0 && (size_t)n < linelen && p != (int)own)
        snprintf(line + n, linelen - (size_t)n, " (the %s level's own %s path is %.2fx slower)", vt_k.name,
                 vt_bf16_path_name(own), pr.gflops[p] / pr.gflops[own]);
    else if (n > 0 && (size_t)n < linelen && own == VT_BF16_FMA) /* the only path: say what it costs */
        snprintf(line + n, linelen - (size_t)n,
                 "; the %s level has no bf16 instructions: float32's products plus the rounding, so slower than "
                 "float32 here, in the same memory",
                 vt_k.name);
    return VT_OK;
}
