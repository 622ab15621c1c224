/* vit_fixture.h - test helpers around a vt_vit (header-only): a model from a resolved
 * config as train and eval build one (the config's model spec, vt_resolve_model_spec, to
 * vt_vit_init; its JSON to vt_vit_save as the checkpoint's __metadata__ config), and the
 * logits of an evaluation forward. */
#ifndef VT_TEST_VIT_FIXTURE_H
#define VT_TEST_VIT_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "resolve.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"

static inline vt_status vit_init_config(vt_vit *m, const vt_config *c, uint64_t seed) {
    vt_model_spec s;
    return vt_vit_init(m, vt_resolve_model_spec(c, &s), seed);
}

/* A checkpoint of m, built from c, as training writes it. */
static inline vt_status vit_save_config(const vt_vit *m, const vt_config *c, const char *path) {
    char *json = vt_config_to_json(c);
    vt_status st = vt_vit_save(m, path, json);
    free(json);
    return st;
}

/* Logits of one evaluation forward (no gradients, no dropout) of images of shape
 * (B, C, S, S): malloc'd; their count into *n_out when n_out is not NULL. */
static inline float *vit_infer(vt_vit *m, const float *images, const int64_t *shape, int64_t *n_out) {
    vt_arena arena;
    vt_arena_init(&arena, 1 << 20);
    vt_tape t;
    vt_tape_init(&t, &arena);
    t.grad_enabled = 0;
    t.training = 0;
    vt_tensor *x = vt_tensor_wrap(&arena, (float *)images, 4, shape);
    vt_tensor *y = vt_vit_forward(m, &t, x);
    float *out = malloc((size_t)y->size * sizeof(float));
    memcpy(out, y->data, (size_t)y->size * sizeof(float));
    if (n_out) *n_out = y->size;
    vt_tape_free(&t);
    vt_arena_free(&arena);
    return out;
}

#endif
