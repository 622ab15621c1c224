/* kinds.c - the registry of position-encoding kinds (kinds.h): one row per vt_pe_kind. */
#include "kinds.h"

#define ROW(e, id) [e] = &vt_pe_##id##_ops,
static const vt_pe_kind_ops *const kind_table[VT_PE_KIND_COUNT] = { VT_PE_KINDS(ROW) };
#undef ROW

#define NAME(e, id) [e] = #id,
static const char *const kind_names[VT_PE_KIND_COUNT] = { VT_PE_KINDS(NAME) };
#undef NAME

const char *vt_pe_kind_name(vt_pe_kind k) {
    VT_ASSERT((int)k >= 0 && (int)k < VT_PE_KIND_COUNT, "bad vt_pe_kind %d", (int)k);
    return kind_names[k];
}

const vt_pe_kind_ops *vt_pe_kind_entry(vt_pe_kind k) {
    VT_ASSERT((int)k >= 0 && (int)k < VT_PE_KIND_COUNT, "pe.kind %d out of range", (int)k);
    const vt_pe_kind_ops *e = kind_table[k];
    VT_ASSERT(e != NULL && e->kind == k, "pe.kind %s has no entry in kinds.c",
              vt_pe_kind_name(k));
    return e;
}

vt_pe *vt_pe_create(const vt_pe_config *pe, const vt_model_config *model) {
    return vt_pe_build(vt_pe_kind_entry(pe->kind), pe, model);
}
