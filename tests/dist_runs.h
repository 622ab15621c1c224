/* dist_runs.h - reading and comparing the run directories of data-parallel runs, for
 * the end-to-end tests that launch ranks (e2e_dist, e2e_netns, e2e_slurm; header-only,
 * after harness.h and e2e_util.h): the train records of metrics.jsonl, the largest
 * weight difference of two checkpoints, and one run checked against another.
 */
#ifndef VT_DIST_RUNS_H
#define VT_DIST_RUNS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "e2e_util.h"
#include "harness.h"

/* ---- metrics and weights ------------------------------------------------------------ */

static inline int count_in_file(const char *path, const char *needle) {
    char *s = test_read_file(path, NULL);
    int n = 0;
    for (const char *p = s; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
    if (!n && s) fprintf(stderr, "--- %s does not contain '%s'; it reads:\n%s\n", path, needle, s);
    free(s);
    return n;
}

typedef struct {
    int n;
    int last_step;       /* of the last train record, also past the first 256 */
    int step[256];
    double loss[256], gn[256];
    char raw[256][96];   /* "step loss grad_norm" as printed */
} train_log;

static inline double json_num(const char *line, const char *key, char *raw, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p) return NAN;
    p += strlen(pat);
    size_t n = strcspn(p, ",}\n");
    if (raw) snprintf(raw, len, "%.*s", (int)n, p);
    return atof(p);
}

static inline void read_log(const char *dir, train_log *t, double *last_top1) {
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    memset(t, 0, sizeof *t);
    *last_top1 = -1;
    for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        if (strstr(line, "\"kind\":\"eval\"")) *last_top1 = json_num(line, "top1", NULL, 0);
        if (!strstr(line, "\"kind\":\"train\"")) continue;
        t->last_step = (int)json_num(line, "step", NULL, 0);
        if (t->n == 256) continue;
        char a[32], b[32], c[32];
        t->step[t->n] = (int)json_num(line, "step", a, sizeof a);
        t->loss[t->n] = json_num(line, "loss", b, sizeof b);
        t->gn[t->n] = json_num(line, "grad_norm", c, sizeof c);
        snprintf(t->raw[t->n], sizeof t->raw[0], "%s %s %s", a, b, c);
        t->n++;
    }
    free(s);
}

/* Largest |a - b| over every tensor of two checkpoints (-1: unreadable or different
 * tensors); *bitwise = 1 if all bytes agree. */
static inline double weights_diff(const char *a, const char *b, int *bitwise) {
    vt_safetensors x, y;
    *bitwise = 0;
    if (vt_st_read(a, &x) != VT_OK) return -1;
    if (vt_st_read(b, &y) != VT_OK) {
        vt_st_free(&x);
        return -1;
    }
    double worst = x.n == y.n ? 0 : -1;
    int same = x.n == y.n;
    for (int i = 0; i < x.n && worst >= 0; i++) {
        const vt_st_tensor *u = &x.tensors[i], *v = vt_st_find(&y, u->name);
        if (!v || v->size != u->size) { worst = -1; break; }
        same &= !memcmp(u->data, v->data, sizeof(float) * (size_t)u->size);
        for (int64_t j = 0; j < u->size; j++) {
            double d = fabs((double)u->data[j] - v->data[j]);
            if (d > worst) worst = d;
        }
    }
    *bitwise = same && worst == 0;
    vt_st_free(&x);
    vt_st_free(&y);
    return worst;
}

/* Run dir b equals the reference a (a run with other ranks or none): `steps` records
 * (steps 1..steps, one per step: train.log_every 1), losses within 1e-5 relative,
 * gradient norms within 1e-4, final weights within 2e-4: float summation order only. */
static inline void check_same_run(const char *a, const char *b, int steps, const char *what) {
    train_log ta, tb;
    double ea, eb;
    read_log(a, &ta, &ea);
    read_log(b, &tb, &eb);
    CHECK(ta.n == steps && tb.n == steps, "%s: %d steps logged (%d, %d)", what, steps, ta.n, tb.n);
    double wl = 0, wg = 0;
    int steps_ok = 1;
    for (int i = 0; i < ta.n && i < tb.n; i++) {
        steps_ok &= ta.step[i] == i + 1 && tb.step[i] == i + 1;
        double dl = fabs(ta.loss[i] - tb.loss[i]) / fabs(ta.loss[i]);
        double dg = fabs(ta.gn[i] - tb.gn[i]) / fabs(ta.gn[i]);
        if (!(dl <= wl)) wl = dl;
        if (!(dg <= wg)) wg = dg;
    }
    CHECK(steps_ok, "%s: steps 1..%d in order", what, steps);
    CHECK(wl <= 1e-5, "%s: per-step loss within 1e-5 relative (worst %.3g)", what, wl);
    CHECK(wg <= 1e-4, "%s: per-step gradient norm within 1e-4 relative (worst %.3g)", what, wg);
    char pa[600], pb[600];
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    int bw;
    double dw = weights_diff(pa, pb, &bw);
    CHECK(dw >= 0 && dw <= 2e-4, "%s: final weights within 2e-4 (worst %.3g)", what, dw);
    printf("note: %s: worst relative loss %.2g, grad norm %.2g, worst weight %.2g\n", what, wl, wg, dw);
}

#endif
