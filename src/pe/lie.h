/* lie.h - entry points of circulant.c and liere.c beyond their kind entries (kinds.h):
 * building a forward's tables from explicit coordinates instead of the patch grid. Used
 * by the property tests (translation invariance at random real positions, gradients
 * w.r.t. coordinates) and by any caller whose tokens are not on a grid.
 *
 * coords (Ba, Np, C) with Ba 1 (shared by the batch) or B (per sample), C =
 * pe.coord_dim; may carry a grad buffer (then the backward accumulates dL/dcoords).
 * Afterwards vt_pe_apply_qk transforms q, k (B, H, 1 + Np, hd) as after vt_pe_prepare.
 * pe->kind must be the matching kind (asserted). */
#ifndef VT_PE_LIE_H
#define VT_PE_LIE_H

#include "pe.h"

void vt_pe_circulant_prepare_coords(vt_pe *pe, vt_tape *t, vt_tensor *coords);
void vt_pe_liere_prepare_coords(vt_pe *pe, vt_tape *t, vt_tensor *coords);

#endif
