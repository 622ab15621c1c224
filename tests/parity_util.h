/* parity_util.h - test helper: the fixture scaffolding shared by test_parity.c and
 * test_pe_parity.c (header-only; include from exactly one file per test binary, after
 * harness.h).
 *
 * Provides parity_open (read a PyTorch-reference safetensors fixture, parse its
 * __metadata__["config"] and build the ViT from it), parity_check_names (every fixture
 * parameter is a model parameter, and the counts agree), parity_session_init (arena +
 * tape recording gradients), parity_forward_backward (forward + cross-entropy + backward
 * on the fixture batch), parity_check_outputs (output.logits shape and values,
 * output.loss) and parity_main (kernel dispatch, then one check per fixture file under
 * VT_FIXTURE_DIR, default tests/fixtures, then the caller's closing checks). Every comparison counts as harness checks in
 * the calling binary.
 */
#ifndef VT_TEST_PARITY_UTIL_H
#define VT_TEST_PARITY_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "config.h"
#include "kernels.h"
#include "ops/ops.h"
#include "resolve.h"
#include "tape.h"
#include "tensor.h"
#include "test_util.h"
#include "vit.h"
#include "vit_fixture.h"

/* Whether name is one of the fixture's non-parameter tensors (input.*, output.*, grad.*,
 * train.*). */
static int parity_is_reference_tensor(const char *name) {
    return strncmp(name, "input.", 6) == 0 || strncmp(name, "output.", 7) == 0 ||
           strncmp(name, "grad.", 5) == 0 || strncmp(name, "train.", 6) == 0;
}

/* Read the fixture at path into st, parse its config into cfg and build m from it (seed
 * 1). Returns 1 when all of that worked (the caller then frees m and st); otherwise
 * everything is freed and 0 returned. Counts 1 to 4 checks. */
static int parity_open(const char *path, vt_safetensors *st, vt_config *cfg, vt_vit *m) {
    vt_status s = vt_st_read(path, st);
    CHECK(s == VT_OK, "cannot read fixture: %s", vt_last_error());
    if (s != VT_OK) return 0;
    const char *json = vt_st_meta(st, "config");
    CHECK(json != NULL, "%s: no __metadata__[\"config\"]", path);
    vt_config_defaults(cfg);
    s = json ? vt_resolve_json(cfg, json, path) : VT_ERR_USAGE;
    CHECK(s == VT_OK, "%s: config does not parse: %s", path, vt_last_error());
    if (s == VT_OK) {
        s = vit_init_config(m, cfg, 1);
        CHECK(s == VT_OK, "%s: model init: %s", path, vt_last_error());
    }
    if (s != VT_OK) {
        vt_st_free(st);
        return 0;
    }
    return 1;
}

/* One check per fixture parameter (it is a model parameter) plus one that the fixture
 * has as many parameters as the model; returns the fixture's parameter count. */
static int parity_check_names(vt_vit *m, const vt_safetensors *st, const char *path) {
    int n_fixture_params = 0;
    for (int i = 0; i < st->n; i++) {
        if (parity_is_reference_tensor(st->tensors[i].name)) continue;
        n_fixture_params++;
        CHECK(vt_vit_find(m, st->tensors[i].name) != NULL,
              "%s: fixture parameter %s is not a model parameter", path, st->tensors[i].name);
    }
    CHECK(n_fixture_params == m->n_p, "%s: fixture has %d parameters, model %d", path,
          n_fixture_params, m->n_p);
    return n_fixture_params;
}

/* A 1 MiB arena and a tape on it recording gradients (not training: no dropout). */
static void parity_session_init(vt_arena *arena, vt_tape *tape) {
    vt_arena_init(arena, (size_t)1 << 20);
    vt_tape_init(tape, arena);
    tape->grad_enabled = 1;
    tape->training = 0;
}

/* Forward + cross-entropy (label smoothing `smoothing`) + backward on images of shape
 * (B, C, S, S) with B labels; returns the loss (grads in m's parameters), the logits
 * (B, num_classes) in *logits_out when it is not NULL. */
static float parity_forward_backward(vt_vit *m, vt_tape *tape, vt_arena *arena, float *images,
                                     const int64_t shape[4], const int *labels, float smoothing,
                                     vt_tensor **logits_out) {
    vt_arena_reset(arena);
    vt_tape_clear(tape);
    vt_vit_zero_grad(m);
    vt_tensor *x = vt_tensor_wrap(arena, images, 4, shape);
    vt_tensor *logits = vt_vit_forward(m, tape, x);
    vt_tensor *loss = vt_op_cross_entropy(tape, logits, labels, NULL, smoothing);
    float lv = loss->data[0];
    vt_tape_backward(tape, loss);
    if (logits_out) *logits_out = logits;
    return lv;
}

/* Three checks: logits shape (B, num_classes), output.logits and output.loss within
 * |got - want| <= atol + rtol |want|. */
static void parity_check_outputs(const char *path, const vt_tensor *logits, float loss,
                                 const vt_st_tensor *want_logits, const vt_st_tensor *want_loss,
                                 int B, int num_classes, double atol, double rtol) {
    CHECK(logits->ndim == 2 && logits->shape[0] == B && logits->shape[1] == num_classes,
          "%s: logits shape", path);
    CHECK_ARRAY_CLOSE(logits->data, want_logits->data, want_logits->size, atol, rtol,
                      "%s: output.logits", path);
    CHECK_CLOSE(loss, want_loss->data[0], atol, rtol, "%s: output.loss", path);
}

/* Initialise the kernels, then run check(path) for each "<dir>/<prefix><name>.safetensors"
 * (dir from VT_FIXTURE_DIR, default tests/fixtures); returns the binary's exit status. */
static int parity_main(const char *prefix, const char *const *names, size_t n,
                       void (*check)(const char *path), void (*after)(void)) {
    if (test_kernels_init()) return 1;
    const char *dir = getenv("VT_FIXTURE_DIR");
    if (!dir) dir = "tests/fixtures";
    for (size_t i = 0; i < n; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s%s.safetensors", dir, prefix, names[i]);
        check(path);
    }
    if (after) after();
    return test_summary();
}

#endif
