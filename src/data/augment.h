/* augment.h - training-time random augmentation (timm/DeiT semantics).
 *
 * Owns: RandomResizedCrop box sampling, RandAugment (parsing timm's config string, the
 * 15 ops of timm's rand set on 8-bit HWC images, op choice and magnitude noise), random
 * erasing on normalised float CHW images, and batch Mixup / CutMix with soft targets.
 * Does not own: where the randomness comes from (the caller passes a vt_rng seeded per
 * sample or per batch, so results never depend on threads or timing), resampling of a
 * crop to the output size (transform.h), sample order and threads (loader.c).
 * Nothing here allocates, prints or starts threads; scratch buffers come from the caller.
 *
 * PIL conventions are followed where timm runs on PIL images: lookup-table ops work per
 * channel; blends (Color, Contrast, Brightness, Sharpness) compute a + f * (b - a) in
 * float and truncate after clamping to [0, 255] (PIL Image.blend); affine ops sample at
 * pixel centres (PIL Image.transform) and fill outside with a given colour.
 */
#ifndef VT_AUGMENT_H
#define VT_AUGMENT_H

#include <stdint.h>

#include "data/data_config.h"
#include "rng.h"
#include "status.h"

/* A crop box: rows [top, top + h), columns [left, left + w). */
typedef struct {
    int top, left, h, w;
} vt_box;

/* torchvision RandomResizedCrop.get_params for an h x w image: up to 10 attempts of
 * target area = h * w * U(scale[0], scale[1]), aspect = exp(U(log ratio[0], log ratio[1])),
 * cw = round(sqrt(area * aspect)), ch = round(sqrt(area / aspect)) (round half to even,
 * as Python), accepted if 0 < cw <= w and 0 < ch <= h with top = U{0..h - ch},
 * left = U{0..w - cw}; otherwise the center crop of the whole image clamped to the ratio
 * range. Draws per attempt: uniform (area), uniform (aspect), then below() twice. */
vt_box vt_aug_rrc_box(vt_rng *r, int h, int w, const double scale[2], const double ratio[2]);

/* ---- RandAugment ------------------------------------------------------------------- */

/* timm's rand op set, in _RAND_TRANSFORMS order. */
typedef enum {
    VT_RA_AUTOCONTRAST = 0, VT_RA_EQUALIZE, VT_RA_INVERT, VT_RA_ROTATE, VT_RA_POSTERIZE,
    VT_RA_SOLARIZE, VT_RA_SOLARIZE_ADD, VT_RA_COLOR, VT_RA_CONTRAST, VT_RA_BRIGHTNESS,
    VT_RA_SHARPNESS, VT_RA_SHEAR_X, VT_RA_SHEAR_Y, VT_RA_TRANSLATE_X, VT_RA_TRANSLATE_Y,
    VT_RA_NUM_OPS
} vt_ra_op;

typedef struct {
    int enabled;        /* 0 for "" */
    int n;              /* ops per image (n, default 2) */
    double m;           /* magnitude (m, default 10) on the 0..10 scale */
    double mstd;        /* magnitude noise std (mstd, default 0; inf if given > 100) */
    double mmax;        /* magnitude upper bound (mmax, default 10) */
    double prob;        /* probability each chosen op is applied (p, default 0.5) */
    int increasing;     /* inc1: PosterizeIncreasing, SolarizeIncreasing, *Increasing enhances */
} vt_randaug;

/* Parse timm's "rand-m9-mstd0.5-inc1" syntax: "rand" followed by "-" separated sections
 * m<float>, n<int>, mstd<float>, mmax<float>, inc<0|1>, p<float>. "" gives enabled = 0.
 * Errors (VT_ERR_USAGE) quote the string and the bad section. */
vt_status vt_randaug_parse(const char *s, vt_randaug *out);

/* Apply RandAugment to an h x w x c image in place (c = 1 or 3): n ops chosen uniformly
 * with replacement; each applied with probability prob at magnitude
 * clamp(N(m, mstd), 0, mmax) (U(0, m) if mstd is inf), mapped to op arguments as timm's
 * level functions do (rotate 30 * m / 10 degrees, shear 0.3 * m / 10, translate
 * 0.45 * m / 10 of the side, each with a random sign; enhance factor 0.1 + 1.8 m / 10,
 * or 1 +- 0.9 m / 10 when increasing; posterize int(4 m / 10) bits, 4 - that when
 * increasing; solarize threshold int(256 m / 10), 256 - that when increasing; solarize-add
 * int(110 m / 10) below 128). fill: colour outside geometric ops (c bytes). tmp: h*w*c
 * bytes of scratch. */
void vt_randaug_apply(const vt_randaug *ra, vt_rng *r, uint8_t *img, int h, int w, int c,
                      vt_interp interp, const uint8_t *fill, uint8_t *tmp);

/* One op at a given argument (the op's own units, see vt_randaug_apply); img in place,
 * tmp h*w*c bytes. Geometric ops use interp and fill; others ignore them. */
void vt_ra_op_apply(vt_ra_op op, double arg, uint8_t *img, int h, int w, int c,
                    vt_interp interp, const uint8_t *fill, uint8_t *tmp);

/* The op behind each: */
/* PIL ImageOps.autocontrast (cutoff 0): per channel, lo..hi of the histogram maps to
 * 0..255 with lut[v] = clamp(int(v * 255 / (hi - lo) - lo * 255 / (hi - lo))); a flat
 * channel is left unchanged. */
void vt_aug_autocontrast(uint8_t *img, int h, int w, int c);
/* PIL ImageOps.equalize: per channel, step = (pixels - count of the last used level) / 256
 * (integer); if step is 0 or a single level is used the channel is unchanged, else
 * lut[v] = (step / 2 + pixels below v) / step. */
void vt_aug_equalize(uint8_t *img, int h, int w, int c);
/* Lookup-table ops on all channels: 255 - v; v & ~(2^(8 - bits) - 1) (bits >= 8: no-op);
 * v < thresh ? v : 255 - v; v < thresh ? min(255, v + add) : v. */
void vt_aug_invert(uint8_t *img, int h, int w, int c);
void vt_aug_posterize(uint8_t *img, int h, int w, int c, int bits);
void vt_aug_solarize(uint8_t *img, int h, int w, int c, int thresh);
void vt_aug_solarize_add(uint8_t *img, int h, int w, int c, int add, int thresh);
/* PIL ImageEnhance: blend of a degenerate image d and img, d + f * (img - d):
 * Color d = luma (L = (19595 R + 38470 G + 7471 B + 32768) >> 16), Contrast d = the mean
 * luma (rounded), Brightness d = 0, Sharpness d = 3x3 smooth [1 1 1; 1 5 1; 1 1 1] / 13
 * rounded, border pixels kept. tmp: h*w*c bytes (Sharpness). Gray images: Color is the
 * identity. */
void vt_aug_enhance(vt_ra_op op, double factor, uint8_t *img, int h, int w, int c, uint8_t *tmp);
/* PIL Image.transform(AFFINE, m) into dst (h x w x c, not overlapping src): the output
 * pixel (x, y) samples src at (m0 (x + .5) + m1 (y + .5) + m2, m3 (x + .5) + m4 (y + .5) + m5);
 * points outside [0, w) x [0, h) get fill; inside, bilinear or bicubic (PIL's
 * transform cubic, a = -1) over edge-clamped neighbours, truncated to [0, 255]. */
void vt_aug_affine(const uint8_t *src, uint8_t *dst, int h, int w, int c, const double m[6],
                   vt_interp interp, const uint8_t *fill);
/* The affine matrix of PIL Image.rotate(degrees) (counter-clockwise about the centre
 * (w / 2, h / 2), cos and sin rounded to 15 decimals as PIL does). */
void vt_aug_rotate_matrix(double degrees, int h, int w, double m[6]);

/* ---- random erasing ---------------------------------------------------------------- */

/* timm RandomErasing (count 1) on c planes of h x w normalised floats: with probability
 * prob, up to 10 attempts of area = h * w * U(0.02, 1/3), aspect = exp(U(log 0.3,
 * log 1/0.3)), eh = round(sqrt(area * aspect)), ew = round(sqrt(area / aspect)); the first
 * with ew < w and eh < h erases rows [top, top + eh) x cols [left, left + ew)
 * (top = U{0..h - eh}, left = U{0..w - ew}) in every plane with N(0, 1) values (pixel,
 * drawn channel by channel, row-major) or zeros (const). Returns 1 and the box if
 * something was erased, else 0. */
int vt_aug_erase(vt_rng *r, float *x, int c, int h, int w, double prob, vt_remode mode,
                 vt_box *box);

/* ---- mixup / cutmix ---------------------------------------------------------------- */

typedef struct {
    double mixup, cutmix;       /* Beta alphas; 0 = off */
    double prob, switch_prob;   /* data.mixup_prob, data.mixup_switch_prob */
    double smoothing;           /* train.label_smoothing */
    int num_classes;
} vt_mixup;

/* Beta(a, a) sample, a > 0 (ratio of Marsaglia-Tsang gammas; a < 1 boosted by U^(1/a)). */
double vt_aug_beta(vt_rng *r, double a);

/* timm Mixup in batch mode on images (B, C, S, S) in place: with probability prob the
 * batch is mixed with its reverse (sample i with B - 1 - i): cutmix (chosen with
 * switch_prob when both are on) pastes the reversed batch into the box
 * rows [yl, yh) x cols [xl, xh) of a cut of side int(S * sqrt(1 - lam)) centred at
 * U{0..S-1} and clipped, then lam = 1 - box area / S^2; mixup blends
 * lam * x_i + (1 - lam) * x_(B-1-i). soft (B, K) receives
 * lam * onehot(y_i) + (1 - lam) * onehot(y_(B-1-i)) with on = 1 - smoothing + smoothing / K,
 * off = smoothing / K, so every row sums to 1. Returns lam (1 when the batch is not
 * mixed); *cut receives the cutmix box (h = w = 0 without cutmix). */
double vt_mixup_apply(const vt_mixup *mx, vt_rng *r, float *images, int B, int C, int S,
                      const int *labels, float *soft, vt_box *cut);

/* vt_mixup_apply in parts, for a batch whose pairs are split across data-parallel ranks
 * (loader.c): the batch's draws (lam, 1 when not mixed; cutmix or blend; the box), the
 * mixing of one pair (a, b) in place from their unmixed values (cutmix swaps the box;
 * blend a = lam a + (1 - lam) b, b = lam b + (1 - lam) a) and one soft target row
 * (lam onehot(own) + (1 - lam) onehot(partner), smoothed as above). vt_mixup_apply is
 * exactly these calls, so a rank holding one image of a pair and an unmixed copy of the
 * other computes the bits one process computes. */
typedef struct {
    double lam;
    int cutmix;
    vt_box box;
} vt_mix_draw;
void vt_mixup_draw(const vt_mixup *mx, vt_rng *r, int S, vt_mix_draw *d);
void vt_mixup_pair(const vt_mix_draw *d, float *a, float *b, int C, int S);
void vt_mixup_soft_row(const vt_mixup *mx, double lam, int own, int partner, float *row);

#endif
