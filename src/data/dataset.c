/* dataset.c - the parts of the dataset interface (dataset.h) every format shares: the
 * sample buffer and the optional operations (skipped files, sample paths, class names). */
#include "data/dataset.h"

#include <stdlib.h>

vt_status vt_sample_reserve(vt_sample *s, size_t bytes) {
    if (bytes <= s->cap) return VT_OK;
    uint8_t *p = realloc(s->pixels, bytes);
    if (!p) return vt_fail(VT_ERR_RUNTIME, "out of memory allocating a %zu-byte sample buffer", bytes);
    s->pixels = p;
    s->cap = bytes;
    return VT_OK;
}

void vt_sample_free(vt_sample *s) {
    free(s->pixels);
    s->pixels = NULL;
    s->cap = 0;
}

int64_t vt_dataset_skipped(const vt_dataset *ds) {
    return ds->ops->skipped ? ds->ops->skipped(ds) : 0;
}

const char *vt_dataset_sample_path(const vt_dataset *ds, int64_t index, char *buf, size_t len) {
    VT_ASSERT(index >= 0 && index < ds->size, "sample path of %lld", (long long)index);
    return ds->ops->sample_path ? ds->ops->sample_path(ds, index, buf, len) : NULL;
}

const char *vt_dataset_class_name(const vt_dataset *ds, int k) {
    VT_ASSERT(k >= 0 && k < ds->num_classes, "class %d of %d", k, ds->num_classes);
    return ds->ops->class_name ? ds->ops->class_name(ds, k) : NULL;
}
