/* vit_config.h - test helper: a model from a resolved config, as train and eval build
 * one: the config's model spec (vt_resolve_model_spec) goes to vt_vit_init, its JSON to
 * vt_vit_save as the checkpoint's __metadata__ config. Header-only. */
#ifndef VT_TEST_VIT_CONFIG_H
#define VT_TEST_VIT_CONFIG_H

#include <stdint.h>
#include <stdlib.h>

#include "config.h"
#include "resolve.h"
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

#endif
