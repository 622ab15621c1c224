/* transform.h - per-sample pixel transforms shared by every dataset kind.
 *
 * A sample goes from 8-bit HWC pixels to model-ready float32 CHW:
 *   vt_tf_to_float   u8 HWC -> float CHW in [0, 1] (x / 255), optional horizontal flip
 *   vt_tf_resize     bilinear resize per channel (torch interpolate, mode="bilinear",
 *                    align_corners=False, antialias=False)
 *   vt_tf_expand     channel conversion (gray -> 3 channels by replication)
 *   vt_tf_normalize  (x - mean[c]) / std[c] for the colour channels
 *   vt_tf_resample_u8  PIL-style antialiased resize of a crop box of u8 HWC pixels
 *                    (RandomResizedCrop, the evaluation resize + center crop)
 *   vt_tf_eval_geometry  torchvision Resize(int(S / crop_pct)) + CenterCrop(S) boxes
 *   vt_tf_hflip_u8   in-place horizontal flip of u8 HWC pixels
 * These functions never allocate, print or start threads: loader.c calls them from
 * OpenMP threads on per-thread buffers. Augmentations that need randomness take it
 * from the caller (a decision or an rng), so they stay deterministic per sample.
 */
#ifndef VT_TRANSFORM_H
#define VT_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "data/data_config.h"

/* src: h x w x c bytes (HWC). dst: c x h x w floats, dst[ch][y][x] = src[y][x'][ch] / 255
 * with x' = w - 1 - x if hflip else x. Exact up to float rounding of the division. */
void vt_tf_to_float(const uint8_t *src, int h, int w, int c, int hflip, float *dst);

/* Bilinear resize of c planes (c x ih x iw -> c x oh x ow), half-pixel centres:
 * source coordinate s = (d + 0.5) * (in / out) - 0.5, clamped below at 0; the two taps
 * floor(s) and min(floor(s) + 1, in - 1) weighted by the fraction. Matches
 * torch.nn.functional.interpolate(align_corners=False, antialias=False) to float
 * rounding (|err| <= ~1e-6 relative); equal sizes copy exactly. src and dst must not
 * overlap. */
void vt_tf_resize(const float *src, int c, int ih, int iw, float *dst, int oh, int ow);

/* Channel conversion in place on a buffer holding cout planes of hw floats whose first
 * cin planes are filled: cin == cout is a no-op; cin = 1, cout = 3 replicates plane 0
 * into planes 1 and 2. Other pairs are rejected by vt_tf_channels_supported. */
void vt_tf_expand(float *x, int cin, int cout, int64_t hw);
/* 1 if vt_tf_expand can turn cin channels into cout, else 0. */
int vt_tf_channels_supported(int cin, int cout);

/* x: c planes of hw floats; plane ch < 3 becomes (x - mean[ch]) / std[ch] (std > 0).
 * A 4th plane (depth) is left in [0, 1]: the RGB-D position encoding reads it
 * unnormalised (position-encodings.md section 1). */
void vt_tf_normalize(float *x, int c, int64_t hw, const float *mean, const float *std);

/* Resampling geometry: the source box (rows [y, y + h), cols [x, x + w)) is resized to
 * rh x rw, of which the window rows [oy, oy + oh), cols [ox, ox + ow) is written out. */
typedef struct {
    int y, x, h, w;
    int rh, rw;
    int oy, ox, oh, ow;
} vt_resample_geom;

/* Scratch bytes vt_tf_resample_u8 needs for geometry g and c channels. */
size_t vt_tf_resample_ws_bytes(const vt_resample_geom *g, int c);

/* PIL Image.resize on the crop (torchvision resized_crop: taps are clipped to the box),
 * reproducing Pillow's 8-bit resampler: separable, horizontal pass first into an 8-bit
 * intermediate; output pixel d of an axis with scale s = in / out samples the filter
 * (triangle for bilinear, Keys cubic a = -0.5 for bicubic) widened by max(s, 1)
 * (antialiasing when shrinking) around centre (d + 0.5) * s; weights normalised to sum 1,
 * then 22-bit fixed point; sums rounded and clamped to [0, 255]. Bitwise equal to Pillow
 * 9.4 on the shapes checked (shrink and enlarge, both filters). Equal sizes copy exactly.
 * src: sh x sw x c, dst: oh x ow x c (HWC); ws: vt_tf_resample_ws_bytes bytes. */
void vt_tf_resample_u8(const uint8_t *src, int sh, int sw, int c, const vt_resample_geom *g,
                       vt_interp interp, void *ws, uint8_t *dst);

/* Evaluation geometry for an h x w image and output side S (timm/torchvision): the shorter
 * side is resized to int(S / crop_pct) and the longer one to int(size * long / short),
 * then the S x S center crop starts at round((rh - S) / 2), round((rw - S) / 2) (round half
 * to even, as Python). Fills g with the whole image as source box. */
void vt_tf_eval_geometry(int h, int w, int S, double crop_pct, vt_resample_geom *g);

/* Mirror h x w x c bytes left-right in place. */
void vt_tf_hflip_u8(uint8_t *img, int h, int w, int c);

#endif
