/* ape.c - the tables of absolute position embeddings (position-encodings.md 2.1): the
 * fixed 2-D sin-cos table of timm's build_sincos2d_pos_embed, and the bicubic resampling
 * of a learned table "pos_embed" (1, 1 + N, D), CLS slot first (timm layout), to another
 * grid (torch interpolate, align_corners=False, antialias=False; the CLS slot kept).
 * Plain arrays only: the slot (pe.c) builds a forward's table from them, the checkpoint
 * loader (weights.c) resamples a stored table.
 */
#include "ape.h"

#include <math.h>
#include <string.h>

void vt_pe_sincos_table(float *out, int rows, int cols, int D) {
    VT_ASSERT(D % 4 == 0, "sincos table needs D %% 4 == 0, got %d", D);
    int pd = D / 4;
    memset(out, 0, (size_t)D * sizeof(float));
    for (int i = 0; i < rows; i++) {
        for (int j = 0; j < cols; j++) {
            float *r = out + (size_t)(1 + i * cols + j) * D;
            for (int k = 0; k < pd; k++) {
                float w = 1.0f / powf(10000.0f, (float)k / (float)pd);
                float ai = (float)i * w, aj = (float)j * w;
                r[k] = sinf(ai);
                r[pd + k] = sinf(aj);
                r[2 * pd + k] = cosf(ai);
                r[3 * pd + k] = cosf(aj);
            }
        }
    }
}

/* Keys cubic convolution weights for fractional offset t in [0, 1], a = -0.75,
 * as torch's get_cubic_upsample_coefficients (float). */
static void cubic_coeffs(float c[4], float t) {
    const float A = -0.75f;
    float x1 = t + 1.0f, x2 = 1.0f - t, x3 = x2 + 1.0f;
    c[0] = ((A * x1 - 5.0f * A) * x1 + 8.0f * A) * x1 - 4.0f * A;
    c[1] = ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    c[2] = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    c[3] = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
}

/* torch area_pixel_compute_source_index (cubic: no clamp at 0) and
 * guard_index_and_lambda: the integer tap base and the clamped fraction. */
static void source_index(int o, int in, int out, int *base, float *frac) {
    float scale = (float)in / (float)out;
    float real = scale * ((float)o + 0.5f) - 0.5f;
    int idx = (int)floorf(real);
    if (idx > in - 1) idx = in - 1;
    float f = real - (float)idx;
    *base = idx;
    *frac = f < 0.0f ? 0.0f : (f > 1.0f ? 1.0f : f);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

void vt_pe_resample_bicubic(const float *src, int hi, int wi, float *dst, int ho, int wo, int D) {
    for (int oy = 0; oy < ho; oy++) {
        int by;
        float fy, cy[4];
        source_index(oy, hi, ho, &by, &fy);
        cubic_coeffs(cy, fy);
        for (int ox = 0; ox < wo; ox++) {
            int bx;
            float fx, cx[4];
            source_index(ox, wi, wo, &bx, &fx);
            cubic_coeffs(cx, fx);
            float *o = dst + ((size_t)oy * wo + ox) * D;
            for (int d = 0; d < D; d++) {
                float acc = 0.0f;
                for (int j = 0; j < 4; j++) {
                    const float *row = src + (size_t)clampi(by - 1 + j, 0, hi - 1) * wi * D;
                    float t = row[(size_t)clampi(bx - 1, 0, wi - 1) * D + d] * cx[0];
                    for (int i = 1; i < 4; i++)
                        t += row[(size_t)clampi(bx - 1 + i, 0, wi - 1) * D + d] * cx[i];
                    acc = j == 0 ? t * cy[0] : acc + t * cy[j];
                }
                o[d] = acc;
            }
        }
    }
}

static int square_side(int64_t n) {
    int64_t s = (int64_t)llround(sqrt((double)n));
    return s * s == n ? (int)s : -1;
}

vt_status vt_pe_resample_pos_embed(const float *src, int64_t ni, float *dst, int64_t no, int D,
                                   const char *name) {
    int si = square_side(ni), so = square_side(no);
    if (si <= 0)
        return vt_fail(VT_ERR_RUNTIME,
                       "tensor '%s': expected 1 + a square number of patch tokens, found %lld patch tokens",
                       name, (long long)ni);
    if (so <= 0)
        return vt_fail(VT_ERR_RUNTIME, "tensor '%s': target grid of %lld patch tokens is not square", name,
                       (long long)no);
    memcpy(dst, src, (size_t)D * sizeof(float));
    vt_pe_resample_bicubic(src + D, si, si, dst + D, so, so, D);
    return VT_OK;
}
