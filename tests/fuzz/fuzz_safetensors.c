/* fuzz_safetensors.c - libFuzzer harness: the safetensors reader, then the model load.
 *
 * The input is a file. vt_st_read either fails with a message naming the file, or returns
 * tensors whose data lies inside its own buffer, with finite values (the integrity check),
 * and which vt_st_write writes back to a file that reads the same tensors and metadata.
 * A file that reads is then loaded into a tiny ViT (FUZZ_MODEL_JSON) with vt_vit_load,
 * which either fails with a message naming the file or fills every parameter.
 */
#include <math.h>

#include "safetensors.h"
#include "config.h"
#include "fuzz_util.h"
#include "resolve.h"
#include "vit.h"
#include "weights.h"
#include "vit_fixture.h"

static void st_round_trip(const char *path, const vt_safetensors *st) {
    char out[128];
    snprintf(out, sizeof out, "%s/round_trip.safetensors", fuzz_dir());
    vt_status s = vt_st_write(out, st->tensors, st->n, (const char *const *)st->meta_keys,
                              (const char *const *)st->meta_values, st->n_meta);
    FUZZ_CHECK(s == VT_OK, "rewrite of a file that read: %s", vt_last_error());
    vt_safetensors back;
    s = vt_st_read(out, &back);
    FUZZ_CHECK(s == VT_OK, "read of the rewritten file: %s", vt_last_error());
    FUZZ_CHECK(back.n == st->n && back.n_meta == st->n_meta, "%s: %d tensors / %d metadata back, "
               "%d / %d written", path, back.n, back.n_meta, st->n, st->n_meta);
    for (int i = 0; i < st->n; i++) {
        const vt_st_tensor *a = &st->tensors[i], *b = vt_st_find(&back, a->name);
        FUZZ_CHECK(b && b->ndim == a->ndim && b->size == a->size &&
                       memcmp(b->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim) == 0 &&
                       memcmp(b->data, a->data, (size_t)a->size * sizeof(float)) == 0,
                   "tensor %s differs after the round trip", a->name);
    }
    for (int i = 0; i < st->n_meta; i++) {
        const char *v = vt_st_meta(&back, st->meta_keys[i]);
        FUZZ_CHECK(v && strcmp(v, st->meta_values[i]) == 0, "metadata %s differs after the round trip",
                   st->meta_keys[i]);
    }
    vt_st_free(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static vt_vit model;
    static int model_ok;
    if (!model_ok) {
        vt_config cfg;
        FUZZ_CHECK(vt_resolve_json(&cfg, FUZZ_MODEL_JSON, "fuzz") == VT_OK, "%s", vt_last_error());
        FUZZ_CHECK(vit_init_config(&model, &cfg, 1) == VT_OK, "%s", vt_last_error());
        model_ok = 1;
    }
    const char *path = fuzz_memfile(data, size);
    vt_safetensors st;
    vt_status s = vt_st_read(path, &st);
    if (s != VT_OK) {
        FUZZ_CHECK(strstr(vt_last_error(), path) != NULL, "message without the file: %s",
                   vt_last_error());
        FUZZ_CHECK(st.n == 0 && st.tensors == NULL && st.buffer == NULL, "failed read left data");
        return 0;
    }
    for (int i = 0; i < st.n; i++) {
        const vt_st_tensor *t = &st.tensors[i];
        FUZZ_CHECK(t->size == 0 || ((const char *)t->data >= (const char *)st.buffer &&
                                    (size_t)((const char *)(t->data + t->size) - (const char *)st.buffer) <= 2 * size),
                   "tensor %s lies outside the file's data", t->name);
        for (int64_t k = 0; k < t->size; k++)
            FUZZ_CHECK(isfinite(t->data[k]), "tensor %s element %lld is not finite", t->name, (long long)k);
    }
    st_round_trip(path, &st);
    vt_st_free(&st);
    s = vt_vit_load(&model, path);
    if (s != VT_OK)
        FUZZ_CHECK(strstr(vt_last_error(), path) != NULL, "load message without the file: %s",
                   vt_last_error());
    return 0;
}
