/* test_augment.c - augmentation and evaluation transforms against hand-computed results.
 *
 * Covers: RandomResizedCrop boxes (a fixed seed replayed by hand, both center-crop
 * fallbacks, bounds over many seeds), u8 flips, PIL-style resampling (identity, a
 * hand-computed antialiased 2x bilinear shrink, the eval crop window equals cropping the
 * full resize), eval resize + center crop geometry, RandAugment parsing and the geometry
 * or values of each op on tiny images (rotate, shear, translate, posterize, solarize,
 * solarize-add, invert, autocontrast, equalize, the enhance blends), mixup / cutmix pixels
 * and target rows, random erasing regions, normalisation values, the Beta sampler's moments,
 * the new data.* config rows (defaults, parsing, validation messages).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "data/augment.h"
#include "data/transform.h"
#include "harness.h"
#include "resolve.h"
#include "rng.h"

static int round_even(double v) { return (int)nearbyint(v); }

static void test_rrc(void) {
    const double scale[2] = { 0.08, 1.0 }, ratio[2] = { 3.0 / 4.0, 4.0 / 3.0 };
    /* replay the first attempt for a seed whose first attempt fits (checked below) */
    int H = 375, W = 500;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        vt_rng r, q;
        vt_rng_seed(&r, seed);
        q = r;
        double u_area = vt_rng_uniform(&q), u_ar = vt_rng_uniform(&q);
        double area = H * W * (0.08 + 0.92 * u_area);
        double ar = exp(log(0.75) + (log(4.0 / 3.0) - log(0.75)) * u_ar);
        int cw = round_even(sqrt(area * ar)), ch = round_even(sqrt(area / ar));
        CHECK(cw <= W && ch <= H, "seed %llu: first attempt %dx%d does not fit", (unsigned long long)seed, ch, cw);
        int top = (int)vt_rng_below(&q, (uint64_t)(H - ch + 1));
        int left = (int)vt_rng_below(&q, (uint64_t)(W - cw + 1));
        vt_box b = vt_aug_rrc_box(&r, H, W, scale, ratio);
        CHECK(b.h == ch && b.w == cw && b.top == top && b.left == left,
              "seed %llu: box %d,%d %dx%d, hand %d,%d %dx%d", (unsigned long long)seed, b.top,
              b.left, b.h, b.w, top, left, ch, cw);
        CHECK(memcmp(&r, &q, sizeof r) == 0, "rrc consumed a different number of draws");
    }
    /* scale > 1 never fits: torchvision's fallback center crop clamped to the ratio range */
    const double big[2] = { 2.0, 3.0 };
    vt_rng r;
    vt_rng_seed(&r, 9);
    vt_box b = vt_aug_rrc_box(&r, 100, 300, big, ratio); /* too wide: h = 100, w = round(133.3) */
    CHECK(b.top == 0 && b.left == 83 && b.h == 100 && b.w == 133, "wide fallback %d,%d %dx%d",
          b.top, b.left, b.h, b.w);
    b = vt_aug_rrc_box(&r, 300, 100, big, ratio); /* too tall: w = 100, h = round(133.3) */
    CHECK(b.top == 83 && b.left == 0 && b.h == 133 && b.w == 100, "tall fallback %d,%d %dx%d",
          b.top, b.left, b.h, b.w);
    b = vt_aug_rrc_box(&r, 100, 110, big, ratio); /* ratio in range: the whole image */
    CHECK(b.top == 0 && b.left == 0 && b.h == 100 && b.w == 110, "whole fallback %d,%d %dx%d",
          b.top, b.left, b.h, b.w);
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        b = vt_aug_rrc_box(&r, 37, 53, scale, ratio);
        if (b.h < 1 || b.w < 1 || b.top < 0 || b.left < 0 || b.top + b.h > 37 || b.left + b.w > 53)
            bad++;
    }
    CHECK(bad == 0, "%d boxes outside the image", bad);
}

static void test_flip_and_resample(void) {
    uint8_t img[2 * 3 * 2] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 };
    const uint8_t want[12] = { 5, 6, 3, 4, 1, 2, 11, 12, 9, 10, 7, 8 };
    vt_tf_hflip_u8(img, 2, 3, 2);
    CHECK(memcmp(img, want, 12) == 0, "hflip of a 2x3x2 image");

    /* equal sizes: exact copy for both filters */
    uint8_t src[5 * 7 * 3], dst[5 * 7 * 3];
    for (int i = 0; i < 5 * 7 * 3; i++) src[i] = (uint8_t)(i * 37 % 251);
    static _Alignas(16) unsigned char ws[1 << 16];
    vt_resample_geom g = { 0, 0, 5, 7, 5, 7, 0, 0, 5, 7 };
    CHECK(vt_tf_resample_ws_bytes(&g, 3) <= sizeof ws, "scratch size");
    for (int f = 0; f < 2; f++) {
        vt_tf_resample_u8(src, 5, 7, 3, &g, (vt_interp)f, ws, dst);
        CHECK(memcmp(src, dst, sizeof src) == 0, "identity resample, filter %d", f);
    }
    /* 4x4 -> 2x2 bilinear, rows 0 10 20 30: antialiased triangle of width 2, taps
     * (0.75, 0.75, 0.25) / 1.75 and (0.25, 0.75, 0.75) / 1.75 -> 7.14 and 22.86 */
    uint8_t ramp[16], out[4];
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++) ramp[y * 4 + x] = (uint8_t)(10 * x);
    vt_resample_geom h = { 0, 0, 4, 4, 2, 2, 0, 0, 2, 2 };
    vt_tf_resample_u8(ramp, 4, 4, 1, &h, VT_INTERP_BILINEAR, ws, out);
    CHECK(out[0] == 7 && out[1] == 23 && out[2] == 7 && out[3] == 23, "2x shrink %d %d %d %d",
          out[0], out[1], out[2], out[3]);
    /* a crop box: columns 1..2 of the ramp stretched to 4 -> bilinear taps at 0.5 px steps */
    uint8_t up[4];
    vt_resample_geom u = { 0, 1, 1, 2, 1, 4, 0, 0, 1, 4 };
    vt_tf_resample_u8(ramp, 4, 4, 1, &u, VT_INTERP_BILINEAR, ws, up);
    /* centres 0.25, 0.75, 1.25, 1.75 of [10, 20]: 10, 12.5, 17.5, 20 (clamped taps) */
    CHECK(up[0] == 10 && up[1] == 13 && up[2] == 18 && up[3] == 20, "box upsample %d %d %d %d",
          up[0], up[1], up[2], up[3]);
}

static void test_eval_geometry(void) {
    vt_resample_geom g;
    vt_tf_eval_geometry(375, 500, 224, 0.875, &g); /* short side 256, long int(341.3) */
    CHECK(g.rh == 256 && g.rw == 341 && g.oy == 16 && g.ox == 58 && g.oh == 224 && g.ow == 224,
          "landscape: %dx%d crop at %d,%d", g.rh, g.rw, g.oy, g.ox); /* round(58.5) = 58 */
    vt_tf_eval_geometry(500, 375, 224, 0.875, &g);
    CHECK(g.rh == 341 && g.rw == 256 && g.oy == 58 && g.ox == 16, "portrait: %dx%d at %d,%d",
          g.rh, g.rw, g.oy, g.ox);
    vt_tf_eval_geometry(32, 32, 32, 1.0, &g);
    CHECK(g.rh == 32 && g.rw == 32 && g.oy == 0 && g.ox == 0, "crop_pct 1 at native size");
    /* the window equals the crop of the full resize, bitwise */
    enum { H = 23, W = 31, C = 3, S = 12 };
    uint8_t src[H * W * C];
    for (int i = 0; i < H * W * C; i++) src[i] = (uint8_t)((i * 7919) % 256);
    vt_tf_eval_geometry(H, W, S, 0.8, &g);
    vt_resample_geom full = g;
    full.oy = full.ox = 0;
    full.oh = g.rh;
    full.ow = g.rw;
    static _Alignas(16) unsigned char ws[1 << 18];
    static uint8_t big[64 * 64 * C], crop[S * S * C];
    CHECK(g.rh * g.rw <= 64 * 64 && vt_tf_resample_ws_bytes(&full, C) <= sizeof ws, "sizes");
    for (int f = 0; f < 2; f++) {
        vt_tf_resample_u8(src, H, W, C, &full, (vt_interp)f, ws, big);
        vt_tf_resample_u8(src, H, W, C, &g, (vt_interp)f, ws, crop);
        int same = 1;
        for (int y = 0; y < S; y++)
            same &= memcmp(crop + y * S * C, big + ((y + g.oy) * g.rw + g.ox) * C, S * C) == 0;
        CHECK(same, "window resample equals the crop of the full resize (filter %d)", f);
    }
}

static void test_randaug_parse(void) {
    vt_randaug ra;
    CHECK(vt_randaug_parse("", &ra) == VT_OK && !ra.enabled, "\"\" is off");
    CHECK(vt_randaug_parse("rand-m9-mstd0.5-inc1", &ra) == VT_OK && ra.enabled && ra.m == 9 &&
          ra.mstd == 0.5 && ra.increasing && ra.n == 2 && ra.prob == 0.5 && ra.mmax == 10,
          "DeiT string");
    CHECK(vt_randaug_parse("rand-m7-n3-mstd101-p0.8-mmax12", &ra) == VT_OK && ra.n == 3 &&
          ra.m == 7 && isinf(ra.mstd) && ra.prob == 0.8 && ra.mmax == 12 && !ra.increasing,
          "all sections");
    CHECK(vt_randaug_parse("rand-m9-x3", &ra) == VT_ERR_USAGE &&
          strstr(vt_last_error(), "unknown section \"x3\""), "bad section: %s", vt_last_error());
    CHECK(vt_randaug_parse("augmix-m5", &ra) == VT_ERR_USAGE, "not rand");
    CHECK(vt_randaug_parse("rand-mfoo", &ra) == VT_ERR_USAGE, "bad number");
    CHECK(vt_randaug_parse("rand-n0", &ra) == VT_ERR_USAGE, "zero ops");
}

static void test_lut_ops(void) {
    uint8_t v[6] = { 0, 63, 64, 100, 200, 255 }, t[6];
    memcpy(t, v, 6);
    vt_aug_invert(t, 1, 6, 1);
    CHECK(t[0] == 255 && t[1] == 192 && t[3] == 155 && t[5] == 0, "invert");
    memcpy(t, v, 6);
    vt_aug_posterize(t, 1, 6, 1, 2); /* keep 2 MSB: mask 0xC0 */
    CHECK(t[0] == 0 && t[1] == 0 && t[2] == 64 && t[3] == 64 && t[4] == 192 && t[5] == 192,
          "posterize 2: %d %d %d %d %d %d", t[0], t[1], t[2], t[3], t[4], t[5]);
    memcpy(t, v, 6);
    vt_aug_posterize(t, 1, 6, 1, 0);
    CHECK(t[5] == 0 && t[4] == 0, "posterize 0 clears");
    memcpy(t, v, 6);
    vt_aug_solarize(t, 1, 6, 1, 128);
    CHECK(t[3] == 100 && t[4] == 55 && t[5] == 0 && t[1] == 63, "solarize 128");
    memcpy(t, v, 6);
    vt_aug_solarize_add(t, 1, 6, 1, 50, 128);
    CHECK(t[0] == 50 && t[3] == 150 && t[4] == 200 && t[5] == 255, "solarize add");
    /* autocontrast: 50..150 -> 0..255, lut = int(v * 2.55 - 127.5) */
    uint8_t a[3] = { 50, 100, 150 };
    vt_aug_autocontrast(a, 1, 3, 1);
    CHECK(a[0] == 0 && a[1] == 127 && a[2] == 255, "autocontrast %d %d %d", a[0], a[1], a[2]);
    uint8_t flat[4] = { 9, 9, 9, 9 };
    vt_aug_autocontrast(flat, 2, 2, 1);
    CHECK(flat[0] == 9 && flat[3] == 9, "autocontrast of a flat image");
    /* per-channel autocontrast on RGB: channel 1 is 0..255 already */
    uint8_t rgb[6] = { 10, 0, 7, 20, 255, 7 };
    vt_aug_autocontrast(rgb, 1, 2, 3);
    CHECK(rgb[0] == 0 && rgb[3] == 255 && rgb[1] == 0 && rgb[4] == 255 && rgb[2] == 7 && rgb[5] == 7,
          "per-channel autocontrast");
    /* equalize: 1024 pixels, 512 at 10, 256 at 20, 256 at 30: step = (1024 - 256) / 256 = 3,
     * lut(10) = 1 / 3 = 0, lut(20) = (1 + 512) / 3 = 171, lut(30) = (513 + 256) / 3 = 256 -> 255 */
    static uint8_t e[1024];
    for (int i = 0; i < 1024; i++) e[i] = i < 512 ? 10 : i < 768 ? 20 : 30;
    vt_aug_equalize(e, 32, 32, 1);
    CHECK(e[0] == 0 && e[600] == 171 && e[900] == 255, "equalize %d %d %d", e[0], e[600], e[900]);
}

static void test_enhance(void) {
    uint8_t tmp[64];
    uint8_t b[3] = { 100, 200, 3 };
    vt_aug_enhance(VT_RA_BRIGHTNESS, 0.5, b, 1, 1, 3, tmp);
    CHECK(b[0] == 50 && b[1] == 100 && b[2] == 1, "brightness 0.5: %d %d %d", b[0], b[1], b[2]);
    b[0] = 200;
    vt_aug_enhance(VT_RA_BRIGHTNESS, 1.9, b, 1, 1, 3, tmp);
    CHECK(b[0] == 255, "brightness clamps");
    uint8_t c[3] = { 255, 0, 0 }; /* luma (19595 * 255 + 32768) >> 16 = 76 */
    vt_aug_enhance(VT_RA_COLOR, 0.0, c, 1, 1, 3, tmp);
    CHECK(c[0] == 76 && c[1] == 76 && c[2] == 76, "color 0 = gray %d %d %d", c[0], c[1], c[2]);
    uint8_t k[2] = { 0, 100 }; /* gray mean 50 */
    vt_aug_enhance(VT_RA_CONTRAST, 0.0, k, 1, 2, 1, tmp);
    CHECK(k[0] == 50 && k[1] == 50, "contrast 0 = mean");
    k[0] = 0; k[1] = 100;
    vt_aug_enhance(VT_RA_CONTRAST, 2.0, k, 1, 2, 1, tmp);
    CHECK(k[0] == 0 && k[1] == 150, "contrast 2: %d %d", k[0], k[1]);
    /* sharpness 0 = the smoothed image: centre of a 3x3 impulse 130 -> 130 * 5 / 13 = 50 */
    uint8_t s[9] = { 0, 0, 0, 0, 130, 0, 0, 0, 0 };
    vt_aug_enhance(VT_RA_SHARPNESS, 0.0, s, 3, 3, 1, tmp);
    CHECK(s[4] == 50 && s[0] == 0 && s[1] == 0, "sharpness 0: centre %d", s[4]);
}

static void test_geometric_ops(void) {
    const uint8_t fill[3] = { 7, 7, 7 };
    uint8_t tmp[64];
    for (int f = 0; f < 2; f++) {
        vt_interp ip = (vt_interp)f;
        /* rotate 90 degrees counter-clockwise: dst[y][x] = src[x][n - 1 - y] */
        for (int n = 3; n <= 4; n++) {
            uint8_t a[16], b[16];
            for (int i = 0; i < n * n; i++) a[i] = b[i] = (uint8_t)(10 + i);
            vt_ra_op_apply(VT_RA_ROTATE, 90.0, b, n, n, 1, ip, fill, tmp);
            int ok = 1;
            for (int y = 0; y < n; y++)
                for (int x = 0; x < n; x++) ok &= b[y * n + x] == a[x * n + (n - 1 - y)];
            CHECK(ok, "rotate 90 of %dx%d (filter %d): %d %d %d", n, n, f, b[0], b[1], b[2]);
        }
        /* shear x by 2 on 2x5: dst(x, y) = src(x + 2y + 1, y), fill past the right edge */
        uint8_t s[10];
        for (int i = 0; i < 10; i++) s[i] = (uint8_t)(100 + i);
        vt_ra_op_apply(VT_RA_SHEAR_X, 2.0, s, 2, 5, 1, ip, fill, tmp);
        const uint8_t ws_[10] = { 101, 102, 103, 104, 7, 108, 109, 7, 7, 7 };
        CHECK(memcmp(s, ws_, 10) == 0, "shear x 2 (filter %d): %d %d %d %d %d / %d %d %d", f,
              s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
        /* shear y by 2 on 5x2 (the transpose) */
        uint8_t t[10];
        for (int i = 0; i < 10; i++) t[i] = (uint8_t)(100 + (i % 2) * 5 + i / 2);
        vt_ra_op_apply(VT_RA_SHEAR_Y, 2.0, t, 5, 2, 1, ip, fill, tmp);
        int ok = 1;
        for (int y = 0; y < 5; y++)
            for (int x = 0; x < 2; x++) ok &= t[y * 2 + x] == ws_[x * 5 + y];
        CHECK(ok, "shear y 2 (filter %d)", f);
        /* translate by +2 / -1 pixels: dst(x) = src(x + 2) */
        uint8_t r[6] = { 1, 2, 3, 4, 5, 6 };
        vt_ra_op_apply(VT_RA_TRANSLATE_X, 2.0, r, 1, 6, 1, ip, fill, tmp);
        CHECK(r[0] == 3 && r[3] == 6 && r[4] == 7 && r[5] == 7, "translate x +2 (filter %d)", f);
        uint8_t q[6] = { 1, 2, 3, 4, 5, 6 };
        vt_ra_op_apply(VT_RA_TRANSLATE_Y, -1.0, q, 3, 2, 1, ip, fill, tmp);
        CHECK(q[0] == 7 && q[1] == 7 && q[2] == 1 && q[3] == 2 && q[4] == 3 && q[5] == 4,
              "translate y -1 (filter %d)", f);
    }
    /* a half-pixel translation interpolates: bilinear (a + b) / 2 truncated */
    uint8_t h[4] = { 10, 21, 40, 40 };
    vt_ra_op_apply(VT_RA_TRANSLATE_X, 0.5, h, 1, 4, 1, VT_INTERP_BILINEAR, fill, tmp);
    CHECK(h[0] == 15 && h[1] == 30 && h[2] == 40, "half-pixel bilinear %d %d %d", h[0], h[1], h[2]);
}

static void test_randaug_apply(void) {
    enum { H = 16, W = 12, C = 3 };
    uint8_t a[H * W * C], b[H * W * C], orig[H * W * C], tmp[H * W * C];
    for (int i = 0; i < H * W * C; i++) orig[i] = (uint8_t)((i * 131) % 256);
    const uint8_t fill[3] = { 124, 116, 104 };
    vt_randaug ra;
    vt_randaug_parse("rand-m9-mstd0.5-inc1", &ra);
    vt_rng r1, r2;
    vt_rng_seed(&r1, 5);
    vt_rng_seed(&r2, 5);
    memcpy(a, orig, sizeof a);
    memcpy(b, orig, sizeof b);
    vt_randaug_apply(&ra, &r1, a, H, W, C, VT_INTERP_BICUBIC, fill, tmp);
    vt_randaug_apply(&ra, &r2, b, H, W, C, VT_INTERP_BICUBIC, fill, tmp);
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same result");
    int changed = 0;
    for (uint64_t s = 0; s < 20; s++) {
        vt_rng_seed(&r1, s);
        memcpy(a, orig, sizeof a);
        vt_randaug_apply(&ra, &r1, a, H, W, C, VT_INTERP_BICUBIC, fill, tmp);
        changed += memcmp(a, orig, sizeof a) != 0;
    }
    CHECK(changed >= 10, "only %d of 20 seeds changed the image", changed);
    vt_randaug_parse("rand-m9-n4-p0", &ra);
    vt_rng_seed(&r1, 5);
    memcpy(a, orig, sizeof a);
    vt_randaug_apply(&ra, &r1, a, H, W, C, VT_INTERP_BICUBIC, fill, tmp);
    CHECK(memcmp(a, orig, sizeof a) == 0, "p0 applies nothing");
}

static void test_mixup(void) {
    enum { B = 4, C = 2, S = 8, K = 3 };
    static float x[B * C * S * S], x0[B * C * S * S], soft[B * K];
    for (int i = 0; i < B * C * S * S; i++) x0[i] = (float)(i % 97) * 0.25f - 3.0f;
    const int labels[B] = { 0, 1, 2, 1 };
    const int per = C * S * S;
    vt_mixup mx = { .mixup = 1.0, .cutmix = 0, .prob = 1, .switch_prob = 0.5, .smoothing = 0.1,
                    .num_classes = K };
    vt_rng r;
    vt_rng_seed(&r, 11);
    vt_box cut;
    memcpy(x, x0, sizeof x);
    double lam = vt_mixup_apply(&mx, &r, x, B, C, S, labels, soft, &cut);
    CHECK(lam > 0 && lam < 1 && cut.h == 0, "mixup lambda %g", lam);
    float want[B * C * S * S];
    for (int i = 0; i < B; i++)
        for (int o = 0; o < per; o++)
            want[i * per + o] = x0[i * per + o] * (float)lam + x0[(B - 1 - i) * per + o] * (float)(1 - lam);
    CHECK_ARRAY_CLOSE(x, want, B * per, 1e-6, 1e-6, "mixed pixels");
    double off = 0.1 / K, on = 1 - 0.1 + off;
    for (int i = 0; i < B; i++) {
        double sum = 0;
        for (int k = 0; k < K; k++) {
            double w = off + (k == labels[i] ? lam * (on - off) : 0) +
                       (k == labels[B - 1 - i] ? (1 - lam) * (on - off) : 0);
            CHECK_CLOSE(soft[i * K + k], w, 1e-6, 0, "soft[%d][%d]", i, k);
            sum += soft[i * K + k];
        }
        CHECK_CLOSE(sum, 1.0, 1e-6, 0, "row %d sums to 1", i);
    }
    /* cutmix: the box of sample i comes from sample B - 1 - i; lam = 1 - area / S^2 */
    mx = (vt_mixup){ .mixup = 0, .cutmix = 1.0, .prob = 1, .switch_prob = 0.5, .smoothing = 0,
                     .num_classes = K };
    int boxes = 0;
    for (uint64_t seed = 1; seed <= 8; seed++) {
        vt_rng_seed(&r, seed);
        memcpy(x, x0, sizeof x);
        lam = vt_mixup_apply(&mx, &r, x, B, C, S, labels, soft, &cut);
        CHECK_CLOSE(lam, 1.0 - (double)cut.h * cut.w / (S * S), 1e-12, 0, "cutmix lambda from the box");
        boxes += cut.h * cut.w > 0;
        int ok = 1;
        for (int i = 0; i < B; i++)
            for (int ch = 0; ch < C; ch++)
                for (int y = 0; y < S; y++)
                    for (int xx = 0; xx < S; xx++) {
                        int in = y >= cut.top && y < cut.top + cut.h && xx >= cut.left &&
                                 xx < cut.left + cut.w;
                        int src = in ? B - 1 - i : i, o = (ch * S + y) * S + xx;
                        ok &= x[i * per + o] == x0[src * per + o];
                    }
        CHECK(ok, "cutmix pixels, seed %llu (box %d,%d %dx%d)", (unsigned long long)seed,
              cut.top, cut.left, cut.h, cut.w);
        CHECK_CLOSE(soft[0 * K + 0], lam, 1e-6, 0, "cutmix target of sample 0");
        CHECK_CLOSE(soft[0 * K + 1], 1 - lam, 1e-6, 0, "cutmix partner target of sample 0");
    }
    CHECK(boxes >= 4, "only %d of 8 cutmix boxes were non-empty", boxes);
    /* prob 0: untouched images, smoothed one-hot targets */
    mx = (vt_mixup){ .mixup = 0.8, .cutmix = 1.0, .prob = 0, .switch_prob = 0.5, .smoothing = 0.1,
                     .num_classes = K };
    memcpy(x, x0, sizeof x);
    lam = vt_mixup_apply(&mx, &r, x, B, C, S, labels, soft, &cut);
    CHECK(lam == 1.0 && memcmp(x, x0, sizeof x) == 0, "prob 0 leaves the batch");
    CHECK_CLOSE(soft[1 * K + 1], on, 1e-6, 0, "smoothed on value");
    CHECK_CLOSE(soft[1 * K + 0], off, 1e-6, 0, "smoothed off value");
}

static void test_beta(void) {
    vt_rng r;
    vt_rng_seed(&r, 3);
    const double as[2] = { 0.8, 2.0 };
    for (int k = 0; k < 2; k++) {
        double a = as[k], s = 0, s2 = 0;
        int n = 4000, inside = 1;
        for (int i = 0; i < n; i++) {
            double v = vt_aug_beta(&r, a);
            inside &= v >= 0 && v <= 1;
            s += v;
            s2 += v * v;
        }
        double mean = s / n, var = s2 / n - mean * mean, want_var = 1.0 / (4 * (2 * a + 1));
        CHECK(inside, "beta samples in [0, 1]");
        CHECK_CLOSE(mean, 0.5, 0.02, 0, "Beta(%g) mean", a);
        CHECK_CLOSE(var, want_var, 0.012, 0, "Beta(%g) variance", a);
    }
}

static void test_erase_and_normalize(void) {
    enum { C = 2, H = 20, W = 24 };
    static float x[C * H * W];
    vt_rng r;
    int erased = 0;
    for (uint64_t seed = 0; seed < 10; seed++) {
        for (int i = 0; i < C * H * W; i++) x[i] = 1.0f;
        vt_rng_seed(&r, seed);
        vt_box b;
        int e = vt_aug_erase(&r, x, C, H, W, 1.0, seed % 2 ? VT_REMODE_CONST : VT_REMODE_PIXEL, &b);
        if (!e) continue;
        erased++;
        int ok = b.top >= 0 && b.left >= 0 && b.top + b.h <= H && b.left + b.w <= W && b.h < H &&
                 b.w < W;
        int changed_out = 0, zeros_in = 0, ones_in = 0;
        for (int ch = 0; ch < C; ch++)
            for (int y = 0; y < H; y++)
                for (int xx = 0; xx < W; xx++) {
                    float v = x[(ch * H + y) * W + xx];
                    int in = y >= b.top && y < b.top + b.h && xx >= b.left && xx < b.left + b.w;
                    if (!in) changed_out += v != 1.0f;
                    else { zeros_in += v == 0.0f; ones_in += v == 1.0f; }
                }
        double frac = (double)b.h * b.w / (H * W);
        CHECK(ok && changed_out == 0, "seed %llu: box %d,%d %dx%d, %d changed outside",
              (unsigned long long)seed, b.top, b.left, b.h, b.w, changed_out);
        CHECK(frac > 0.01 && frac < 0.42, "erased area fraction %g", frac);
        if (seed % 2) CHECK(zeros_in == C * b.h * b.w, "const fills zeros");
        else CHECK(ones_in == 0, "pixel mode replaced %d values with noise", C * b.h * b.w - ones_in);
    }
    CHECK(erased >= 8, "prob 1 erased only %d of 10", erased);
    for (int i = 0; i < C * H * W; i++) x[i] = 1.0f;
    vt_box b;
    vt_rng_seed(&r, 1);
    CHECK(vt_aug_erase(&r, x, C, H, W, 0.0, VT_REMODE_CONST, &b) == 0 && x[0] == 1.0f, "prob 0");

    /* normalisation: (x - mean) / std on RGB; a depth plane stays */
    float px[4 * 2] = { 0.5f, 1.0f, 0.25f, 0.0f, 1.0f, 1.0f, 0.3f, 0.7f };
    const float mean[3] = { 0.485f, 0.456f, 0.406f }, sd[3] = { 0.229f, 0.224f, 0.225f };
    vt_tf_normalize(px, 4, 2, mean, sd);
    CHECK_CLOSE(px[0], (0.5 - 0.485) / 0.229, 1e-6, 1e-6, "R");
    CHECK_CLOSE(px[3], (0.0 - 0.456) / 0.224, 1e-6, 1e-6, "G");
    CHECK_CLOSE(px[5], (1.0 - 0.406) / 0.225, 1e-6, 1e-6, "B");
    CHECK(px[6] == 0.3f && px[7] == 0.7f, "depth unnormalised");
}

/* The config rows: defaults off, validation of auto_augment, scale and ratio. */
static void test_config_keys(void) {
    vt_config c;
    vt_config_defaults(&c);
    CHECK(c.data.train_transform == VT_TT_AUTO && c.data.interpolation == VT_INTERP_BICUBIC &&
          c.data.auto_augment[0] == '\0' && c.data.mixup == 0 && c.data.cutmix == 0 &&
          c.data.reprob == 0 && c.data.mixup_prob == 1 && c.data.mixup_switch_prob == 0.5 &&
          c.data.scale[0] == 0.08 && c.data.scale[1] == 1 && c.data.ratio[0] == 0.75 &&
          fabs(c.data.ratio[1] - 4.0 / 3.0) < 1e-15 && c.data.remode == VT_REMODE_PIXEL,
          "augmentation defaults (timm train.py: all off)");
    const char *good = "{\"data\": {\"kind\": \"synthetic\", \"auto_augment\": \"rand-m9-mstd0.5-inc1\","
                       " \"train_transform\": \"rrc\", \"interpolation\": \"bilinear\","
                       " \"mixup\": 0.8, \"cutmix\": 1.0, \"reprob\": 0.25, \"remode\": \"const\"}}";
    CHECK(vt_resolve_json(&c, good, "good.json") == VT_OK, "DeiT keys parse: %s", vt_last_error());
    CHECK(c.data.train_transform == VT_TT_RRC && c.data.interpolation == VT_INTERP_BILINEAR &&
          c.data.mixup == 0.8 && c.data.remode == VT_REMODE_CONST, "parsed values");
    vt_config_defaults(&c);
    CHECK(vt_resolve_json(&c, "{\"data\": {\"kind\": \"synthetic\", \"auto_augment\": \"rand-m9-q1\"}}",
                          "bad.json") == VT_ERR_USAGE &&
          strstr(vt_last_error(), "bad.json: data.auto_augment") &&
          strstr(vt_last_error(), "unknown section \"q1\""), "bad auto_augment: %s", vt_last_error());
    vt_config_defaults(&c);
    CHECK(vt_resolve_json(&c, "{\"data\": {\"kind\": \"synthetic\", \"scale\": [0.5, 0.2]}}",
                          "s.json") == VT_ERR_USAGE && strstr(vt_last_error(), "data.scale"),
          "scale min > max: %s", vt_last_error());
}

int main(void) {
    test_config_keys();
    test_rrc();
    test_flip_and_resample();
    test_eval_geometry();
    test_randaug_parse();
    test_lut_ops();
    test_enhance();
    test_geometric_ops();
    test_randaug_apply();
    test_mixup();
    test_beta();
    test_erase_and_normalize();
    return test_summary();
}
