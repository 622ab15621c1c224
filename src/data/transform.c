/* transform.c - per-sample pixel transforms (see transform.h for the contracts).
 * Owns: u8 -> float conversion with flip, bilinear resize, channel expansion,
 * normalisation, PIL-style u8 resampling of crop boxes, the evaluation resize + crop
 * geometry, u8 flips. Does not own: sample order, randomness, threads (loader.c). */
#include "data/transform.h"

#include <math.h>
#include <string.h>

#include "status.h"

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

/* ---- PIL-style resampling ----------------------------------------------------------- */

static double filter_eval(vt_interp interp, double x) {
    if (x < 0) x = -x;
    if (interp == VT_INTERP_BILINEAR) return x < 1.0 ? 1.0 - x : 0.0;
    const double a = -0.5;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* Filter support (in input pixels) of an axis resampled from `in` to `out` samples; sets
 * *scale = in / out and *fs = max(scale, 1), the filter's stretch when downscaling. */
static double axis_support(vt_interp interp, int in, int out, double *scale, double *fs) {
    *scale = (double)in / out;
    *fs = *scale > 1.0 ? *scale : 1.0;
    return (interp == VT_INTERP_BILINEAR ? 1.0 : 2.0) * *fs;
}

/* Taps of one axis: input length `in` (the box side), output length `out`; taps per output. */
static int axis_taps(vt_interp interp, int in, int out) {
    double scale, fs;
    return (int)ceil(axis_support(interp, in, out, &scale, &fs)) * 2 + 1;
}

#define VT_RS_PRECISION 22 /* PIL's PRECISION_BITS for 8-bit images */

/* Coefficients of outputs [o0, o0 + n) of an axis: first tap index (relative to the box),
 * tap count and weights (k per output), normalised to sum 1 in double, then converted to
 * fixed point with 22 fractional bits rounding half away from zero (PIL's
 * normalize_coeffs_8bpc). */
static void axis_coeffs(vt_interp interp, int in, int out, int o0, int n, int k, int *first,
                        int *count, int32_t *wt) {
    double scale, fs;
    double support = axis_support(interp, in, out, &scale, &fs), ss = 1.0 / fs;
    for (int i = 0; i < n; i++) {
        double center = (o0 + i + 0.5) * scale;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > in) hi = in;
        int cnt = hi - lo;
        VT_ASSERT(cnt >= 1 && cnt <= k, "resample: %d taps for a %d-tap window", cnt, k);
        int32_t *row = wt + (int64_t)i * k;
        double wsum = 0;
        for (int t = 0; t < cnt; t++) wsum += filter_eval(interp, (t + lo - center + 0.5) * ss);
        for (int t = 0; t < cnt; t++) {
            double v = filter_eval(interp, (t + lo - center + 0.5) * ss);
            v = wsum != 0.0 ? v / wsum : 0.0;
            row[t] = v < 0 ? (int32_t)(-0.5 + v * (1 << VT_RS_PRECISION))
                           : (int32_t)(0.5 + v * (1 << VT_RS_PRECISION));
        }
        first[i] = lo;
        count[i] = cnt;
    }
}

/* PIL's clip8: a fixed-point sum to a byte. */
static uint8_t clip8(int32_t v) {
    return v >= (1 << VT_RS_PRECISION << 8) ? 255 : v <= 0 ? 0 : (uint8_t)(v >> VT_RS_PRECISION);
}

/* Rows of the box the window's output rows read: [*r0, *r1). */
static void window_rows(const vt_resample_geom *g, vt_interp interp, int *r0, int *r1) {
    double scale, fs;
    double support = axis_support(interp, g->h, g->rh, &scale, &fs);
    int lo = (int)((g->oy + 0.5) * scale - support + 0.5);
    int hi = (int)((g->oy + g->oh - 0.5) * scale + support + 0.5);
    *r0 = lo < 0 ? 0 : lo;
    *r1 = hi > g->h ? g->h : hi;
}

size_t vt_tf_resample_ws_bytes(const vt_resample_geom *g, int c) {
    int kx = axis_taps(VT_INTERP_BICUBIC, g->w, g->rw), ky = axis_taps(VT_INTERP_BICUBIC, g->h, g->rh);
    size_t b = 0;
    b += sizeof(int) * 2 * ((size_t)g->ow + g->oh);
    b += sizeof(int32_t) * ((size_t)g->ow * kx + (size_t)g->oh * ky);
    b += (size_t)g->h * g->ow * c;
    b = (b + 15) & ~(size_t)15;
    return b + sizeof(int32_t) * (size_t)g->ow * c;
}

void vt_tf_resample_u8(const uint8_t *src, int sh, int sw, int c, const vt_resample_geom *g,
                       vt_interp interp, void *ws, uint8_t *dst) {
    VT_ASSERT(g->y >= 0 && g->x >= 0 && g->h > 0 && g->w > 0 && g->y + g->h <= sh &&
              g->x + g->w <= sw, "resample box %d,%d %dx%d outside %dx%d", g->y, g->x, g->h,
              g->w, sh, sw);
    VT_ASSERT(g->oy >= 0 && g->ox >= 0 && g->oy + g->oh <= g->rh && g->ox + g->ow <= g->rw,
              "resample window outside %dx%d", g->rh, g->rw);
    int kx = axis_taps(interp, g->w, g->rw), ky = axis_taps(interp, g->h, g->rh);
    int *xf = ws, *xc = xf + g->ow, *yf = xc + g->ow, *yc = yf + g->oh;
    int32_t *xw = (int32_t *)(yc + g->oh), *yw = xw + (size_t)g->ow * kx;
    uint8_t *mid = (uint8_t *)(yw + (size_t)g->oh * ky);
    axis_coeffs(interp, g->w, g->rw, g->ox, g->ow, kx, xf, xc, xw);
    axis_coeffs(interp, g->h, g->rh, g->oy, g->oh, ky, yf, yc, yw);
    int r0, r1;
    window_rows(g, interp, &r0, &r1);
    size_t acc_off = (size_t)(mid - (uint8_t *)ws) + (size_t)g->h * g->ow * c;
    int32_t *acc = (int32_t *)((uint8_t *)ws + ((acc_off + 15) & ~(size_t)15));
    const int32_t half = 1 << (VT_RS_PRECISION - 1);
    for (int y = r0; y < r1; y++) {
        const uint8_t *in = src + ((int64_t)(g->y + y) * sw + g->x) * c;
        uint8_t *out = mid + (int64_t)(y - r0) * g->ow * c;
        for (int x = 0; x < g->ow; x++) {
            const int32_t *wt = xw + (int64_t)x * kx;
            const uint8_t *p = in + (int64_t)xf[x] * c;
            if (c == 3) {
                int32_t a0 = half, a1 = half, a2 = half;
                for (int t = 0; t < xc[x]; t++, p += 3) {
                    a0 += wt[t] * p[0];
                    a1 += wt[t] * p[1];
                    a2 += wt[t] * p[2];
                }
                out[x * 3] = clip8(a0);
                out[x * 3 + 1] = clip8(a1);
                out[x * 3 + 2] = clip8(a2);
            } else {
                for (int ch = 0; ch < c; ch++) {
                    int32_t a = half;
                    for (int t = 0; t < xc[x]; t++) a += wt[t] * p[t * c + ch];
                    out[x * c + ch] = clip8(a);
                }
            }
        }
    }
    int64_t stride = (int64_t)g->ow * c;
    for (int y = 0; y < g->oh; y++) {
        const int32_t *wt = yw + (int64_t)y * ky;
        uint8_t *out = dst + (int64_t)y * stride;
        VT_ASSERT(yf[y] >= r0 && yf[y] + yc[y] <= r1, "resample rows %d+%d outside [%d, %d)",
                  yf[y], yc[y], r0, r1);
        const uint8_t *base = mid + (int64_t)(yf[y] - r0) * stride;
        for (int64_t x = 0; x < stride; x++) acc[x] = half;
        for (int t = 0; t < yc[y]; t++) {
            const uint8_t *row = base + t * stride;
            const int32_t k = wt[t];
            for (int64_t x = 0; x < stride; x++) acc[x] += k * row[x];
        }
        for (int64_t x = 0; x < stride; x++) out[x] = clip8(acc[x]);
    }
}

void vt_tf_eval_geometry(int h, int w, int S, double crop_pct, vt_resample_geom *g) {
    int size = (int)floor(S / crop_pct);
    int rh, rw;
    if (h <= w) {
        rh = size;
        rw = (int)((double)size * w / h);
    } else {
        rw = size;
        rh = (int)((double)size * h / w);
    }
    g->y = 0; g->x = 0; g->h = h; g->w = w;
    g->rh = rh; g->rw = rw;
    g->oh = S < rh ? S : rh;
    g->ow = S < rw ? S : rw;
    g->oy = (int)nearbyint((rh - g->oh) / 2.0);
    g->ox = (int)nearbyint((rw - g->ow) / 2.0);
}

void vt_tf_hflip_u8(uint8_t *img, int h, int w, int c) {
    for (int y = 0; y < h; y++) {
        uint8_t *row = img + (int64_t)y * w * c;
        for (int a = 0, b = w - 1; a < b; a++, b--)
            for (int ch = 0; ch < c; ch++) {
                uint8_t t = row[a * c + ch];
                row[a * c + ch] = row[b * c + ch];
                row[b * c + ch] = t;
            }
    }
}
