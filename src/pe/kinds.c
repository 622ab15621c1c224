/* kinds.c - the registry of position-encoding kinds (kinds.h): one row per vt_pe_kind. */
#include "kinds.h"

static const vt_pe_kind_ops *const kind_table[VT_PE_KIND_COUNT] = {
    [VT_PE_NONE] = &vt_pe_none_ops,
    [VT_PE_APE] = &vt_pe_ape_ops,
    [VT_PE_ROPE_AXIAL] = &vt_pe_rope_axial_ops,
    [VT_PE_ROPE_MIXED] = &vt_pe_rope_mixed_ops,
    [VT_PE_CAYLEY] = &vt_pe_cayley_ops,
    [VT_PE_CIRCULANT] = &vt_pe_circulant_ops,
    [VT_PE_LIERE] = &vt_pe_liere_ops,
    [VT_PE_LIERE_COMMUTE] = &vt_pe_liere_commute_ops,
};

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
