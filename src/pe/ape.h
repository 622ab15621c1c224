/* ape.h - the tables of absolute position embeddings (ape.c): timm's 2-D sin-cos table
 * and the bicubic resampling of a learned one to another grid, on plain arrays. The
 * slot (pe.c) builds a forward's table with them, weights.c loads a table of another
 * grid. The absolute part of a PE and the APE kind's entry are the slot's (pe.h).
 */
#ifndef VT_PE_APE_H
#define VT_PE_APE_H

#include <stdint.h>

#include "status.h"

/* Bicubic resampling of a grid table exactly as torch.nn.functional.interpolate(
 * mode='bicubic', align_corners=False, antialias=False) on a (1, D, h, w) tensor:
 * Keys cubic with a = -0.75, source coordinate (o + 0.5) * in / out - 0.5, the 4 x 4
 * taps clamped to the border, computed in float32 in torch's order (rows first along
 * x, then the column along y). src (hi, wi, D) row-major, dst (ho, wo, D). Agrees with
 * torch's CPU kernel to float rounding (a few ulp). */
void vt_pe_resample_bicubic(const float *src, int hi, int wi, float *dst, int ho, int wo, int D);

/* A learned pos_embed (1, 1 + ni, D) stored for a square grid of ni patches resampled
 * to (1, 1 + no, D) for a square grid of no patches; the CLS slot is copied. Errors
 * (VT_ERR_RUNTIME) when ni or no is not a perfect square; `name` is used in messages. */
vt_status vt_pe_resample_pos_embed(const float *src, int64_t ni, float *dst, int64_t no, int D,
                                   const char *name);

/* timm build_sincos2d_pos_embed(feat_shape=(rows, cols), dim=D, temperature=1e4)
 * with a leading zero CLS row: out (1 + rows cols, D). Token n = (i, j) = (n / cols,
 * n % cols); with pd = D / 4 and w_k = 1 / 1e4^(k / pd), k < pd, the row is
 * [sin(i w_k), sin(j w_k), cos(i w_k), cos(j w_k)] (each block pd wide). float32 math
 * as torch does it (error a few ulp of the angle). */
void vt_pe_sincos_table(float *out, int rows, int cols, int D);

#endif
