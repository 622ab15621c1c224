/* transform.c - per-sample pixel transforms (see transform.h for the contracts).
 * Owns: u8 -> float conversion with flip, bilinear resize, channel expansion,
 * normalisation. Does not own: sample order, randomness, threads (loader.c). */
#include "data/transform.h"

#include <string.h>

void vt_tf_to_float(const uint8_t *src, int h, int w, int c, int hflip, float *dst) {
    const float inv = 1.0f / 255.0f;
    for (int ch = 0; ch < c; ch++) {
        float *plane = dst + (int64_t)ch * h * w;
        for (int y = 0; y < h; y++) {
            const uint8_t *row = src + (int64_t)y * w * c + ch;
            float *out = plane + (int64_t)y * w;
            if (hflip) {
                for (int x = 0; x < w; x++) out[x] = (float)row[(int64_t)(w - 1 - x) * c] * inv;
            } else {
                for (int x = 0; x < w; x++) out[x] = (float)row[(int64_t)x * c] * inv;
            }
        }
    }
}

/* Source tap for destination index d: lower index, upper index, weight of the upper. */
static void bilinear_tap(int d, int in, int out, int *i0, int *i1, float *frac) {
    float s = ((float)d + 0.5f) * ((float)in / (float)out) - 0.5f;
    if (s < 0.0f) s = 0.0f;
    int lo = (int)s;
    if (lo > in - 1) lo = in - 1;
    *i0 = lo;
    *i1 = lo + 1 < in ? lo + 1 : in - 1;
    *frac = s - (float)lo;
}

void vt_tf_resize(const float *src, int c, int ih, int iw, float *dst, int oh, int ow) {
    if (ih == oh && iw == ow) {
        memcpy(dst, src, sizeof(float) * (size_t)c * ih * iw);
        return;
    }
    for (int y = 0; y < oh; y++) {
        int y0, y1;
        float fy;
        bilinear_tap(y, ih, oh, &y0, &y1, &fy);
        for (int x = 0; x < ow; x++) {
            int x0, x1;
            float fx;
            bilinear_tap(x, iw, ow, &x0, &x1, &fx);
            for (int ch = 0; ch < c; ch++) {
                const float *p = src + (int64_t)ch * ih * iw;
                float top = p[(int64_t)y0 * iw + x0] * (1.0f - fx) + p[(int64_t)y0 * iw + x1] * fx;
                float bot = p[(int64_t)y1 * iw + x0] * (1.0f - fx) + p[(int64_t)y1 * iw + x1] * fx;
                dst[((int64_t)ch * oh + y) * ow + x] = top * (1.0f - fy) + bot * fy;
            }
        }
    }
}

int vt_tf_channels_supported(int cin, int cout) {
    return cin == cout || (cin == 1 && cout == 3);
}

void vt_tf_expand(float *x, int cin, int cout, int64_t hw) {
    if (cin == cout) return;
    for (int ch = 1; ch < cout; ch++) memcpy(x + ch * hw, x, sizeof(float) * (size_t)hw);
}

void vt_tf_normalize(float *x, int c, int64_t hw, const float *mean, const float *std) {
    int n = c < 3 ? c : 3;
    for (int ch = 0; ch < n; ch++) {
        float m = mean[ch], s = std[ch];
        float *p = x + ch * hw;
        for (int64_t i = 0; i < hw; i++) p[i] = (p[i] - m) / s;
    }
}
