/* augment.c - training-time random augmentation (augment.h has the contracts).
 * Owns: RRC box sampling, RandAugment parsing and ops, random erasing, Mixup / CutMix.
 * Does not own: seeding (callers), resampling to the output size (transform.c). */
#include "data/augment.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Python's round(): half to even (the default rounding mode of nearbyint). */
static int round_even(double v) { return (int)nearbyint(v); }

static double uniform_in(vt_rng *r, double lo, double hi) { return lo + (hi - lo) * vt_rng_uniform(r); }

/* Uniform integer in [lo, hi] inclusive (hi >= lo). */
static int randint(vt_rng *r, int lo, int hi) { return lo + (int)vt_rng_below(r, (uint64_t)(hi - lo) + 1); }

vt_box vt_aug_rrc_box(vt_rng *r, int h, int w, const double scale[2], const double ratio[2]) {
    double area = (double)h * w;
    double lr0 = log(ratio[0]), lr1 = log(ratio[1]);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = area * uniform_in(r, scale[0], scale[1]);
        double aspect = exp(uniform_in(r, lr0, lr1));
        int cw = round_even(sqrt(target * aspect));
        int ch = round_even(sqrt(target / aspect));
        if (cw > 0 && cw <= w && ch > 0 && ch <= h) {
            vt_box b = { .h = ch, .w = cw };
            b.top = randint(r, 0, h - ch);
            b.left = randint(r, 0, w - cw);
            return b;
        }
    }
    double in_ratio = (double)w / h;
    int cw = w, ch = h;
    if (in_ratio < ratio[0]) {
        ch = round_even(cw / ratio[0]);
    } else if (in_ratio > ratio[1]) {
        cw = round_even(ch * ratio[1]);
    }
    vt_box b = { .top = (h - ch) / 2, .left = (w - cw) / 2, .h = ch, .w = cw };
    return b;
}

/* ---- RandAugment parsing ----------------------------------------------------------- */

vt_status vt_randaug_parse(const char *s, vt_randaug *out) {
    vt_randaug ra = { .enabled = 0, .n = 2, .m = 10, .mstd = 0, .mmax = 10, .prob = 0.5 };
    *out = ra;
    if (!s[0]) return VT_OK;
    if (strncmp(s, "rand", 4) != 0 || (s[4] != '\0' && s[4] != '-'))
        return vt_fail(VT_ERR_USAGE, "\"%s\": expected a RandAugment string starting with "
                       "\"rand\" (e.g. rand-m9-mstd0.5-inc1)", s);
    const char *p = s + 4;
    while (*p == '-') {
        p++;
        const char *end = strchr(p, '-');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char sec[64];
        if (len == 0 || len >= sizeof sec)
            return vt_fail(VT_ERR_USAGE, "\"%s\": empty or overlong section", s);
        memcpy(sec, p, len);
        sec[len] = '\0';
        const char *num;
        double *dst = NULL;
        if (strncmp(sec, "mstd", 4) == 0) { num = sec + 4; dst = &ra.mstd; }
        else if (strncmp(sec, "mmax", 4) == 0) { num = sec + 4; dst = &ra.mmax; }
        else if (strncmp(sec, "inc", 3) == 0) num = sec + 3;
        else if (sec[0] == 'm' || sec[0] == 'n' || sec[0] == 'p') num = sec + 1;
        else
            return vt_fail(VT_ERR_USAGE, "\"%s\": unknown section \"%s\"; expected m<magnitude>, "
                           "n<ops>, mstd<std>, mmax<max>, inc<0|1> or p<prob>", s, sec);
        char *e;
        double v = strtod(num, &e);
        if (num[0] == '\0' || *e != '\0' || !isfinite(v) || v < 0)
            return vt_fail(VT_ERR_USAGE, "\"%s\": section \"%s\" needs a non-negative number", s, sec);
        if (dst) *dst = v;
        else if (strncmp(sec, "inc", 3) == 0) ra.increasing = v != 0;
        else if (sec[0] == 'm') ra.m = v;
        else if (sec[0] == 'p') {
            if (v > 1) return vt_fail(VT_ERR_USAGE, "\"%s\": probability %g exceeds 1", s, v);
            ra.prob = v;
        } else {
            if (v != floor(v) || v < 1 || v > 16)
                return vt_fail(VT_ERR_USAGE, "\"%s\": n%g: expected an integer op count 1-16", s, v);
            ra.n = (int)v;
        }
        p += len;
    }
    if (ra.mstd > 100) ra.mstd = INFINITY;
    ra.enabled = 1;
    *out = ra;
    return VT_OK;
}

/* ---- lookup-table and histogram ops ------------------------------------------------- */

static void apply_lut(uint8_t *img, int64_t n, int c, int ch, const uint8_t *lut) {
    for (int64_t i = ch; i < n; i += c) img[i] = lut[img[i]];
}

static void apply_lut_all(uint8_t *img, int h, int w, int c, const uint8_t *lut) {
    int64_t n = (int64_t)h * w * c;
    for (int64_t i = 0; i < n; i++) img[i] = lut[img[i]];
}

static void histogram(const uint8_t *img, int64_t n, int c, int ch, int64_t hist[256]) {
    memset(hist, 0, sizeof(int64_t) * 256);
    for (int64_t i = ch; i < n; i += c) hist[img[i]]++;
}

void vt_aug_autocontrast(uint8_t *img, int h, int w, int c) {
    int64_t n = (int64_t)h * w * c, hist[256];
    for (int ch = 0; ch < c; ch++) {
        histogram(img, n, c, ch, hist);
        int lo = 0, hi = 255;
        while (lo < 256 && !hist[lo]) lo++;
        while (hi >= 0 && !hist[hi]) hi--;
        if (hi <= lo) continue;
        double scale = 255.0 / (hi - lo), offset = -lo * scale;
        uint8_t lut[256];
        for (int v = 0; v < 256; v++) {
            int m = (int)(v * scale + offset);
            lut[v] = (uint8_t)(m < 0 ? 0 : m > 255 ? 255 : m);
        }
        apply_lut(img, n, c, ch, lut);
    }
}

void vt_aug_equalize(uint8_t *img, int h, int w, int c) {
    int64_t n = (int64_t)h * w * c, hist[256];
    for (int ch = 0; ch < c; ch++) {
        histogram(img, n, c, ch, hist);
        int used = 0, last = 0;
        int64_t total = 0;
        for (int v = 0; v < 256; v++)
            if (hist[v]) { used++; last = v; total += hist[v]; }
        if (used <= 1) continue;
        int64_t step = (total - hist[last]) / 256;
        if (!step) continue;
        uint8_t lut[256];
        int64_t acc = step / 2;
        for (int v = 0; v < 256; v++) {
            int64_t m = acc / step;
            lut[v] = (uint8_t)(m > 255 ? 255 : m);
            acc += hist[v];
        }
        apply_lut(img, n, c, ch, lut);
    }
}

void vt_aug_invert(uint8_t *img, int h, int w, int c) {
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)(255 - v);
    apply_lut_all(img, h, w, c, lut);
}

void vt_aug_posterize(uint8_t *img, int h, int w, int c, int bits) {
    if (bits >= 8) return;
    if (bits < 0) bits = 0;
    uint8_t lut[256], mask = (uint8_t)~((1u << (8 - bits)) - 1);
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)(v & mask);
    apply_lut_all(img, h, w, c, lut);
}

void vt_aug_solarize(uint8_t *img, int h, int w, int c, int thresh) {
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)(v < thresh ? v : 255 - v);
    apply_lut_all(img, h, w, c, lut);
}

void vt_aug_solarize_add(uint8_t *img, int h, int w, int c, int add, int thresh) {
    uint8_t lut[256];
    for (int v = 0; v < 256; v++) lut[v] = (uint8_t)(v < thresh ? (v + add > 255 ? 255 : v + add) : v);
    apply_lut_all(img, h, w, c, lut);
}

/* ---- enhance ops (blend with a degenerate image) ------------------------------------ */

static uint8_t blend(int d, int v, float f) {
    float t = (float)d + f * (float)(v - d);
    return t <= 0.0f ? 0 : t >= 255.0f ? 255 : (uint8_t)t;
}

static int luma(const uint8_t *p) {
    return (int)(((uint32_t)p[0] * 19595u + (uint32_t)p[1] * 38470u + (uint32_t)p[2] * 7471u +
                  0x8000u) >> 16);
}

void vt_aug_enhance(vt_ra_op op, double factor, uint8_t *img, int h, int w, int c, uint8_t *tmp) {
    float f = (float)factor;
    int64_t px = (int64_t)h * w;
    if (op == VT_RA_BRIGHTNESS) {
        for (int64_t i = 0; i < px * c; i++) img[i] = blend(0, img[i], f);
    } else if (op == VT_RA_COLOR) {
        if (c != 3) return;
        for (int64_t i = 0; i < px; i++) {
            uint8_t *p = img + i * 3;
            int l = luma(p);
            for (int ch = 0; ch < 3; ch++) p[ch] = blend(l, p[ch], f);
        }
    } else if (op == VT_RA_CONTRAST) {
        double sum = 0;
        for (int64_t i = 0; i < px; i++) sum += c == 3 ? luma(img + i * 3) : img[i * c];
        int mean = (int)(sum / (double)px + 0.5);
        for (int64_t i = 0; i < px * c; i++) img[i] = blend(mean, img[i], f);
    } else {
        VT_ASSERT(op == VT_RA_SHARPNESS, "vt_aug_enhance: op %d is not an enhance op", (int)op);
        memcpy(tmp, img, (size_t)(px * c));
        for (int y = 1; y < h - 1; y++)
            for (int x = 1; x < w - 1; x++)
                for (int ch = 0; ch < c; ch++) {
                    int s = 0;
                    for (int dy = -1; dy <= 1; dy++)
                        for (int dx = -1; dx <= 1; dx++)
                            s += img[((int64_t)(y + dy) * w + x + dx) * c + ch] * (dx || dy ? 1 : 5);
                    int v = (int)((float)s / 13.0f + 0.5f);
                    tmp[((int64_t)y * w + x) * c + ch] = (uint8_t)(v > 255 ? 255 : v);
                }
        for (int64_t i = 0; i < px * c; i++) img[i] = blend(tmp[i], img[i], f);
    }
}

/* ---- affine ops --------------------------------------------------------------------- */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* PIL's transform cubic through 4 samples at offset d in [0, 1). */
static double cubic4(double v1, double v2, double v3, double v4, double d) {
    double p1 = v2, p2 = -v1 + v3, p3 = 2 * (v1 - v2) + v3 - v4, p4 = -v1 + v2 - v3 + v4;
    return p1 + d * (p2 + d * (p3 + d * p4));
}

void vt_aug_affine(const uint8_t *src, uint8_t *dst, int h, int w, int c, const double m[6],
                   vt_interp interp, const uint8_t *fill) {
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            uint8_t *o = dst + ((int64_t)y * w + x) * c;
            double xs = m[0] * (x + 0.5) + m[1] * (y + 0.5) + m[2];
            double ys = m[3] * (x + 0.5) + m[4] * (y + 0.5) + m[5];
            if (xs < 0 || xs >= w || ys < 0 || ys >= h) {
                memcpy(o, fill, (size_t)c);
                continue;
            }
            xs -= 0.5;
            ys -= 0.5;
            int xi = (int)floor(xs), yi = (int)floor(ys);
            double dx = xs - xi, dy = ys - yi;
            /* edge-clamped tap offsets, shared by the channels */
            int64_t xo[4], yo[4];
            for (int k = 0; k < 4; k++) {
                xo[k] = (int64_t)clampi(xi - 1 + k, 0, w - 1) * c;
                yo[k] = (int64_t)clampi(yi - 1 + k, 0, h - 1) * w * c;
            }
            for (int ch = 0; ch < c; ch++) {
                const uint8_t *sc = src + ch;
                double v;
                if (interp == VT_INTERP_BILINEAR) {
                    double row[2];
                    for (int k = 0; k < 2; k++) {
                        const uint8_t *in = sc + yo[k + 1];
                        double a = in[xo[1]], b = in[xo[2]];
                        row[k] = a + (b - a) * dx;
                    }
                    v = row[0] + (row[1] - row[0]) * dy;
                } else {
                    double row[4];
                    for (int k = 0; k < 4; k++) {
                        const uint8_t *in = sc + yo[k];
                        row[k] = cubic4(in[xo[0]], in[xo[1]], in[xo[2]], in[xo[3]], dx);
                    }
                    v = cubic4(row[0], row[1], row[2], row[3], dy);
                }
                o[ch] = v <= 0.0 ? 0 : v >= 255.0 ? 255 : (uint8_t)v;
            }
        }
    }
}

static double round15(double v) { return nearbyint(v * 1e15) / 1e15; }

void vt_aug_rotate_matrix(double degrees, int h, int w, double m[6]) {
    double a = -fmod(degrees, 360.0) * M_PI / 180.0;
    double cx = w / 2.0, cy = h / 2.0;
    m[0] = round15(cos(a)); m[1] = round15(sin(a));
    m[3] = round15(-sin(a)); m[4] = round15(cos(a));
    m[2] = m[0] * -cx + m[1] * -cy + cx;
    m[5] = m[3] * -cx + m[4] * -cy + cy;
}

void vt_ra_op_apply(vt_ra_op op, double arg, uint8_t *img, int h, int w, int c,
                    vt_interp interp, const uint8_t *fill, uint8_t *tmp) {
    double m[6] = { 1, 0, 0, 0, 1, 0 };
    switch (op) {
    case VT_RA_AUTOCONTRAST: vt_aug_autocontrast(img, h, w, c); return;
    case VT_RA_EQUALIZE: vt_aug_equalize(img, h, w, c); return;
    case VT_RA_INVERT: vt_aug_invert(img, h, w, c); return;
    case VT_RA_POSTERIZE: vt_aug_posterize(img, h, w, c, (int)arg); return;
    case VT_RA_SOLARIZE: vt_aug_solarize(img, h, w, c, (int)arg); return;
    case VT_RA_SOLARIZE_ADD: vt_aug_solarize_add(img, h, w, c, (int)arg, 128); return;
    case VT_RA_COLOR: case VT_RA_CONTRAST: case VT_RA_BRIGHTNESS: case VT_RA_SHARPNESS:
        vt_aug_enhance(op, arg, img, h, w, c, tmp);
        return;
    case VT_RA_ROTATE: vt_aug_rotate_matrix(arg, h, w, m); break;
    case VT_RA_SHEAR_X: m[1] = arg; break;
    case VT_RA_SHEAR_Y: m[3] = arg; break;
    case VT_RA_TRANSLATE_X: m[2] = arg; break;
    case VT_RA_TRANSLATE_Y: m[5] = arg; break;
    case VT_RA_NUM_OPS: VT_ASSERT(0, "vt_ra_op_apply: op %d", (int)op);
    }
    vt_aug_affine(img, tmp, h, w, c, m, interp, fill);
    memcpy(img, tmp, (size_t)h * w * c);
}

/* timm's level functions: magnitude (0..mmax) -> the op's argument. */
static double level_to_arg(vt_ra_op op, double mag, int increasing, vt_rng *r, int h, int w) {
    double sign = vt_rng_uniform(r) > 0.5 ? -1.0 : 1.0; /* timm _randomly_negate */
    switch (op) {
    case VT_RA_ROTATE: return sign * mag / 10.0 * 30.0;
    case VT_RA_SHEAR_X: case VT_RA_SHEAR_Y: return sign * mag / 10.0 * 0.3;
    case VT_RA_TRANSLATE_X: return sign * mag / 10.0 * 0.45 * w;
    case VT_RA_TRANSLATE_Y: return sign * mag / 10.0 * 0.45 * h;
    case VT_RA_POSTERIZE: {
        int bits = (int)(mag / 10.0 * 4);
        return increasing ? 4 - bits : bits;
    }
    case VT_RA_SOLARIZE: {
        int t = (int)(mag / 10.0 * 256);
        return increasing ? 256 - t : t;
    }
    case VT_RA_SOLARIZE_ADD: return (int)(mag / 10.0 * 110);
    case VT_RA_COLOR: case VT_RA_CONTRAST: case VT_RA_BRIGHTNESS: case VT_RA_SHARPNESS:
        return increasing ? 1.0 + sign * mag / 10.0 * 0.9 : mag / 10.0 * 1.8 + 0.1;
    default: return 0;
    }
}

void vt_randaug_apply(const vt_randaug *ra, vt_rng *r, uint8_t *img, int h, int w, int c,
                      vt_interp interp, const uint8_t *fill, uint8_t *tmp) {
    if (!ra->enabled) return;
    int ops[16];
    VT_ASSERT(ra->n >= 1 && ra->n <= 16, "RandAugment with %d ops (vt_randaug_parse allows 1-16)", ra->n);
    for (int i = 0; i < ra->n; i++) ops[i] = (int)vt_rng_below(r, VT_RA_NUM_OPS);
    for (int i = 0; i < ra->n; i++) {
        if (ra->prob < 1.0 && vt_rng_uniform(r) > ra->prob) continue;
        double mag = ra->m;
        if (isinf(ra->mstd)) mag = uniform_in(r, 0, ra->m);
        else if (ra->mstd > 0) mag = ra->m + ra->mstd * vt_rng_normal(r);
        double hi = ra->mmax > 0 ? ra->mmax : 10.0;
        mag = mag < 0 ? 0 : mag > hi ? hi : mag;
        vt_ra_op op = (vt_ra_op)ops[i];
        double arg = level_to_arg(op, mag, ra->increasing, r, h, w);
        vt_ra_op_apply(op, arg, img, h, w, c, interp, fill, tmp);
    }
}

/* ---- random erasing ----------------------------------------------------------------- */

int vt_aug_erase(vt_rng *r, float *x, int c, int h, int w, double prob, vt_remode mode,
                 vt_box *box) {
    if (vt_rng_uniform(r) > prob || prob <= 0) return 0;
    double area = (double)h * w, la0 = log(0.3), la1 = log(1.0 / 0.3);
    for (int attempt = 0; attempt < 10; attempt++) {
        double target = uniform_in(r, 0.02, 1.0 / 3.0) * area;
        double aspect = exp(uniform_in(r, la0, la1));
        int eh = round_even(sqrt(target * aspect));
        int ew = round_even(sqrt(target / aspect));
        if (ew < w && eh < h) {
            int top = randint(r, 0, h - eh), left = randint(r, 0, w - ew);
            for (int ch = 0; ch < c; ch++)
                for (int y = top; y < top + eh; y++) {
                    float *row = x + ((int64_t)ch * h + y) * w;
                    for (int xx = left; xx < left + ew; xx++)
                        row[xx] = mode == VT_REMODE_PIXEL ? (float)vt_rng_normal(r) : 0.0f;
                }
            box->top = top; box->left = left; box->h = eh; box->w = ew;
            return 1;
        }
    }
    return 0;
}

/* ---- mixup / cutmix ----------------------------------------------------------------- */

/* Gamma(a, 1), a >= 1 (Marsaglia-Tsang). */
static double gamma_ge1(vt_rng *r, double a) {
    double d = a - 1.0 / 3.0, cc = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = vt_rng_normal(r);
            v = 1.0 + cc * x;
        } while (v <= 0);
        v = v * v * v;
        double u = vt_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (u > 0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

static double gamma_any(vt_rng *r, double a) {
    if (a >= 1) return gamma_ge1(r, a);
    double u = vt_rng_uniform(r);
    return gamma_ge1(r, a + 1.0) * pow(u > 0 ? u : 1e-300, 1.0 / a);
}

double vt_aug_beta(vt_rng *r, double a) {
    VT_ASSERT(a > 0, "beta parameter %g", a);
    double x = gamma_any(r, a), y = gamma_any(r, a);
    return x + y > 0 ? x / (x + y) : 0.5;
}

void vt_mixup_draw(const vt_mixup *mx, vt_rng *r, int S, vt_mix_draw *d) {
    memset(d, 0, sizeof *d);
    double lam = 1.0;
    int use_cutmix = 0;
    if ((mx->mixup > 0 || mx->cutmix > 0) && vt_rng_uniform(r) < mx->prob) {
        if (mx->mixup > 0 && mx->cutmix > 0) {
            use_cutmix = vt_rng_uniform(r) < mx->switch_prob;
            lam = vt_aug_beta(r, use_cutmix ? mx->cutmix : mx->mixup);
        } else if (mx->mixup > 0) {
            lam = vt_aug_beta(r, mx->mixup);
        } else {
            use_cutmix = 1;
            lam = vt_aug_beta(r, mx->cutmix);
        }
    }
    if (lam != 1.0 && use_cutmix) {
        int cs = (int)(S * sqrt(1.0 - lam));
        int cy = randint(r, 0, S - 1), cx = randint(r, 0, S - 1);
        int yl = clampi(cy - cs / 2, 0, S), yh = clampi(cy + cs / 2, 0, S);
        int xl = clampi(cx - cs / 2, 0, S), xh = clampi(cx + cs / 2, 0, S);
        d->box.top = yl; d->box.left = xl; d->box.h = yh - yl; d->box.w = xh - xl;
        d->cutmix = 1;
        lam = 1.0 - (double)(yh - yl) * (xh - xl) / ((double)S * S);
    }
    d->lam = lam;
}

void vt_mixup_pair(const vt_mix_draw *d, float *a, float *b, int C, int S) {
    int64_t plane = (int64_t)S * S, per = plane * C;
    if (d->cutmix) {
        const vt_box *x = &d->box;
        for (int ch = 0; ch < C; ch++)
            for (int y = x->top; y < x->top + x->h; y++)
                for (int xx = x->left; xx < x->left + x->w; xx++) {
                    int64_t o = ch * plane + (int64_t)y * S + xx;
                    float t = a[o];
                    a[o] = b[o];
                    b[o] = t;
                }
    } else if (d->lam != 1.0) {
        float l = (float)d->lam, m = (float)(1.0 - d->lam);
        for (int64_t o = 0; o < per; o++) {
            float va = a[o], vb = b[o];
            a[o] = va * l + vb * m;
            b[o] = vb * l + va * m;
        }
    }
}

void vt_mixup_soft_row(const vt_mixup *mx, double lam, int own, int partner, float *row) {
    int K = mx->num_classes;
    double off = mx->smoothing / K, on = 1.0 - mx->smoothing + off;
    for (int k = 0; k < K; k++) row[k] = (float)off;
    row[own] += (float)(lam * (on - off));
    row[partner] += (float)((1.0 - lam) * (on - off));
}

double vt_mixup_apply(const vt_mixup *mx, vt_rng *r, float *images, int B, int C, int S,
                      const int *labels, float *soft, vt_box *cut) {
    vt_mix_draw d;
    vt_mixup_draw(mx, r, S, &d);
    *cut = d.box;
    int64_t per = (int64_t)S * S * C;
    if (d.cutmix || d.lam != 1.0)
        for (int i = 0; i < B / 2; i++)
            vt_mixup_pair(&d, images + i * per, images + (int64_t)(B - 1 - i) * per, C, S);
    for (int i = 0; i < B; i++)
        vt_mixup_soft_row(mx, d.lam, labels[i], labels[B - 1 - i], soft + (int64_t)i * mx->num_classes);
    return d.lam;
}
