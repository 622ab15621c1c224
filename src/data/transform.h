/* transform.h - per-sample pixel transforms shared by every dataset kind.
 *
 * A sample goes from 8-bit HWC pixels to model-ready float32 CHW:
 *   vt_tf_to_float   u8 HWC -> float CHW in [0, 1] (x / 255), optional horizontal flip
 *   vt_tf_resize     bilinear resize per channel (torch interpolate, mode="bilinear",
 *                    align_corners=False, antialias=False)
 *   vt_tf_expand     channel conversion (gray -> 3 channels by replication)
 *   vt_tf_normalize  (x - mean[c]) / std[c] for the colour channels
 * These functions never allocate, print or start threads: loader.c calls them from
 * OpenMP threads on per-thread buffers. Augmentations that need randomness take it
 * from the caller (a decision or an rng), so they stay deterministic per sample.
 */
#ifndef VT_TRANSFORM_H
#define VT_TRANSFORM_H

#include <stdint.h>

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

#endif
