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
 * Adding a kind: its enum value and name in model_spec.h's VT_PE_KINDS, its file
 * src/pe/<kind>.c defining its entry, its extern below and its row in kinds.c, its tests.
 */
#ifndef VT_PE_KINDS_H
#define VT_PE_KINDS_H

#include "model_spec.h"
#include "pe.h"
#include "status.h"

extern const vt_pe_kind_ops vt_pe_none_ops;           /* pe.c */
extern const vt_pe_kind_ops vt_pe_ape_ops;            /* ape.c */
extern const vt_pe_kind_ops vt_pe_rope_axial_ops;     /* rope_axial.c */
extern const vt_pe_kind_ops vt_pe_rope_mixed_ops;     /* rope_mixed.c */
extern const vt_pe_kind_ops vt_pe_cayley_ops;         /* cayley.c */
extern const vt_pe_kind_ops vt_pe_circulant_ops;      /* circulant.c */
extern const vt_pe_kind_ops vt_pe_liere_ops;          /* liere.c */
extern const vt_pe_kind_ops vt_pe_liere_commute_ops;  /* liere.c */

/* The entry of kind k (0 <= k < VT_PE_KIND_COUNT, asserted). */
const vt_pe_kind_ops *vt_pe_kind_entry(vt_pe_kind k);

/* Build the PE of a resolved pe section (its pe.kind's entry, vt_pe_build) for the model
 * section `model`. Infallible for a resolved config: the rules were resolve's. */
vt_pe *vt_pe_create(const vt_pe_config *pe, const vt_model_config *model);

/* The rule of the absolute part any kind may carry (ape.c): pe.ape = sincos needs
 * model.width (D) divisible by 4. VT_ERR_USAGE with src and the key otherwise. */
vt_status vt_ape_check(const vt_pe_config *pe, int D, const char *src);

#endif
