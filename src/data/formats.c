/* formats.c - the registry of dataset formats (formats.h): one row per vt_data_kind. */
#include "data/formats.h"

#define ROW(e, id) [e] = &vt_dataset_##id,
static const vt_dataset_kind *const kind_table[VT_DATA_KIND_COUNT] = { VT_DATA_KINDS(ROW) };
#undef ROW

#define NAME(e, id) [e] = #id,
static const char *const kind_names[VT_DATA_KIND_COUNT] = { VT_DATA_KINDS(NAME) };
#undef NAME

const char *vt_data_kind_name(vt_data_kind k) {
    VT_ASSERT((int)k >= 0 && (int)k < VT_DATA_KIND_COUNT, "bad vt_data_kind %d", (int)k);
    return kind_names[k];
}

const vt_dataset_kind *vt_dataset_kind_of(vt_data_kind k) {
    VT_ASSERT((int)k >= 0 && (int)k < VT_DATA_KIND_COUNT, "data.kind %d out of range", (int)k);
    const vt_dataset_kind *e = kind_table[k];
    VT_ASSERT(e != NULL && e->kind == k, "data.kind %s has no row in formats.c", vt_data_kind_name(k));
    return e;
}
