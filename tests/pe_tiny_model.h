/* pe_tiny_model.h - test helper: the scaffolding shared by test_pe_model.c and
 * test_pe_rope.c (header-only; include from exactly one file per test binary).
 *
 * Provides the binary's arena and tape (file-scope statics, set up by
 * pe_tiny_init / freed by pe_tiny_done), cfg_of (the tiny ViT config plus
 * ';'-separated "--set" overrides; aborts with the config error on a bad override),
 * logit (one patch-patch attention logit of rotated q, k) and box (a PE of such a config
 * with its parameters bound to test buffers).
 */
#ifndef VT_TEST_PE_TINY_MODEL_H
#define VT_TEST_PE_TINY_MODEL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_overrides.h"
#include "pe/kinds.h"
#include "pe/pe.h"
#include "pe_bind.h"
#include "rng.h"
#include "tape.h"
#include "tensor.h"
#include "test_runtime.h"

static vt_arena arena;
static vt_tape tape;

/* Kernel dispatch, a 1 MiB arena and the tape on it; 0 on success, 1 (message printed)
 * when the kernels cannot be initialised. */
static int pe_tiny_init(void) { return test_runtime_init(&arena, 1 << 20, &tape); }

/* Frees what pe_tiny_init set up. */
static void pe_tiny_done(void) { test_runtime_done(&arena, &tape); }

/* Model: width 16, 2 heads (hd 8), depth 2, patch 4, 12 x 12 training images (3 x 3
 * grid), 3 classes, RGB, plus ';'-separated overrides. */
static vt_config cfg_of(const char *sets) {
    return config_with_sets("{\"model\": {\"width\": 16, \"depth\": 2, \"heads\": 2, \"patch_size\": 4, "
                            "\"img_size\": 12, \"num_classes\": 3, \"in_chans\": 3}}", sets);
}

/* Patch-patch logit q'_n . k'_m of (b, h) for q, k of shape (B, H, N, hd), in double. */
static double logit(const vt_tensor *q, const vt_tensor *k, int b, int h, int n, int m) {
    int64_t H = q->shape[1], N = q->shape[2], hd = q->shape[3];
    const float *x = q->data + ((b * H + h) * N + n) * hd, *y = k->data + ((b * H + h) * N + m) * hd;
    double s = 0;
    for (int64_t i = 0; i < hd; i++) s += (double)x[i] * y[i];
    return s;
}

/* A PE built from cfg_of(sets) through vt_pe_create, its parameters bound to one
 * test-owned data / grad buffer pair and initialised with `seed`. */
typedef struct {
    vt_pe *pe;
    float *data, *grad;
    int64_t n;
    vt_tensor t[VT_PE_MAX_PARAMS];
} box;

static inline void box_make(box *b, const char *sets, uint64_t seed) {
    memset(b, 0, sizeof *b);
    vt_config c = cfg_of(sets);
    b->pe = vt_pe_create(&c.pe, &c.model);
    b->n = pe_bind_init(b->pe, b->t, &b->data, &b->grad, seed);
}

static inline void box_free(box *b) {
    vt_pe_free(b->pe);
    free(b->data);
    free(b->grad);
}

static inline vt_pe_param *box_param(box *b, const char *name) {
    for (int i = 0; i < b->pe->n_params; i++)
        if (strcmp(b->pe->params[i].name, name) == 0) return &b->pe->params[i];
    return NULL;
}

#endif
