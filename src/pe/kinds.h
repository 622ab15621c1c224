/* kinds.h - the registry of position-encoding kinds: one entry (vt_pe_kind_ops, pe.h)
 * per pe.kind, each defined in the kind's own file, and the constructor that builds a PE
 * of any of them.
 *
 * What a kind knows lives in its entry only: whether it is rotary, its defaults
 * (resolve), its rules (check) and its hooks. resolve.c applies the defaults and rules
 * once per config; vit.c builds the PE through vt_pe_create. The table (kinds.c) has
 * one row per value of vt_pe_kind, so a loop over [0, VT_PE_KIND_COUNT) sees every kind
 * (tests enumerate them that way).
 *
 * Adding a kind: its line X(VT_PE_<ID>, <id>) in model_spec.h's VT_PE_KINDS (the externs
 * below and the rows of kinds.c follow from it), its file src/pe/<id>.c defining its entry
 * vt_pe_<id>_ops (the form of rope_axial.c; rotary.h has the blocks rotary kinds compose),
 * and its tests: every test that loops over [0, VT_PE_KIND_COUNT) takes it up, property
 * tests per position-encodings.md in tests/test_pe_<id>.c. Its defaults and rules reach
 * `vitrain help-config` and configs/README.md (regenerate: help-config --markdown), and
 * its rotary flag the scripts' lists (`vitrain kinds --rotary`), from its entry.
 */
#ifndef VT_PE_KINDS_H
#define VT_PE_KINDS_H

#include "model_spec.h"
#include "pe.h"
#include "status.h"

/* Every kind's entry, vt_pe_<id>_ops, defined in its file (none and ape in pe.c,
 * liere_commute beside liere in liere.c, the others in <id>.c). */
#define VT_PE_KIND_EXTERN_(e, id) extern const vt_pe_kind_ops vt_pe_##id##_ops;
VT_PE_KINDS(VT_PE_KIND_EXTERN_)
#undef VT_PE_KIND_EXTERN_

/* pe.kind's name ("rope_mixed"); k in [0, VT_PE_KIND_COUNT) (asserted). */
const char *vt_pe_kind_name(vt_pe_kind k);

/* The entry of kind k (0 <= k < VT_PE_KIND_COUNT, asserted). */
const vt_pe_kind_ops *vt_pe_kind_entry(vt_pe_kind k);

/* Build the PE of a resolved pe section (its pe.kind's entry, vt_pe_build) for the model
 * section `model`. Infallible for a resolved config: the rules were resolve's. */
vt_pe *vt_pe_create(const vt_pe_config *pe, const vt_model_config *model);

#endif
