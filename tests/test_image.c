/* test_image.c - image decoding (src/image.c).
 *
 * Writes PNGs with libpng (8-bit RGB, Adam7-interlaced RGB, 16-bit RGB and gray, 8-bit
 * and 1-bit gray, gray+alpha, palette with and without tRNS, RGBA) and JPEGs with the
 * fixture's baseline encoder (quality 100, color and 1-component gray) into a temporary
 * directory and checks the decoded pixels against the pattern they were written from: exact for PNG (16-bit
 * scaled with rounding), within a JPEG tolerance for JPEG. Also: format sniffing by
 * magic bytes (PNG data under a .JPEG name decodes as PNG), the caller's buffer being
 * reused, and every error with its message (missing file, directory, zero-byte file,
 * text named .jpg, truncated JPEG and PNG, corrupt PNG), an Adobe CMYK JPEG converted
 * to RGB, and 300 randomly mutated files that must fail cleanly or decode to a sane size.
 * Bounds: declared sizes the file's bytes cannot hold (JPEG, PNG), the 65536 side limit,
 * data.max_image_pixels, libpng's warnings behind "Invalid IHDR data", and a crafted
 * CMYK JPEG whose scan ends inside a code, cut at every byte (undefined behaviour in
 * stb_image 2.27 that the patched header removes; caught under `make san`).
 */
#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "harness.h"
#include "test_util.h"
#include "image.h"
#include "image_fixtures.h"

static char tmpdir[256];

/* data.max_image_pixels's default (Pillow's decompression-bomb limit). */
#define MAXPX ((int64_t)178956970)

static char *path_of(char *buf, const char *name) {
    snprintf(buf, 1024, "%s/%s", tmpdir, name);
    return buf;
}

static int has(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* Decoder state reused across a test (as a loader thread would). */
static uint8_t *buf;
static size_t cap;

static vt_status load(const char *name, int *h, int *w, int *c) {
    char p[1024];
    return vt_image_load(path_of(p, name), MAXPX, &buf, &cap, h, w, c);
}

/* Count of pixels differing from want (c channels, n pixels). */
static long count_diff(const uint8_t *got, const uint8_t *want, size_t n) {
    long bad = 0;
    for (size_t i = 0; i < n; i++) bad += got[i] != want[i];
    return bad;
}

static void test_sniff(void) {
    const uint8_t jpg[] = {0xFF, 0xD8, 0xFF, 0xE0}, png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const uint8_t txt[] = "hello world";
    CHECK(vt_image_sniff(jpg, sizeof jpg) == VT_IMAGE_JPEG, "JPEG magic");
    CHECK(vt_image_sniff(png, sizeof png) == VT_IMAGE_PNG, "PNG magic");
    CHECK(vt_image_sniff(png, 7) == VT_IMAGE_UNKNOWN, "7 bytes of the PNG magic are not PNG");
    CHECK(vt_image_sniff(txt, sizeof txt) == VT_IMAGE_UNKNOWN, "text");
    CHECK(strcmp(vt_image_format_name(VT_IMAGE_PNG), "PNG") == 0, "format name");
}

static void test_png_8bit(void) {
    char p[1024];
    const int w = 13, h = 7;
    uint8_t want[13 * 7 * 3];
    fx_fill(want, w, h, 3);
    for (int interlace = 0; interlace < 2; interlace++) {
        const char *name = interlace ? "rgb_adam7.png" : "rgb.png";
        CHECK(fx_write_png(path_of(p, name), w, h, PNG_COLOR_TYPE_RGB, 8, want, NULL, 0, NULL, 0,
                           interlace) == 0, "write %s", name);
        int gh, gw, gc;
        vt_status s = load(name, &gh, &gw, &gc);
        CHECK(s == VT_OK, "%s: %s", name, vt_last_error());
        if (s) continue;
        CHECK(gh == h && gw == w && gc == 3, "%s: got %d x %d x %d", name, gw, gh, gc);
        CHECK(count_diff(buf, want, sizeof want) == 0, "%s: pixels differ", name);
    }
    /* 8-bit gray: c = 1. */
    uint8_t gray[13 * 7];
    fx_fill(gray, w, h, 1);
    CHECK(fx_write_png(path_of(p, "gray.png"), w, h, PNG_COLOR_TYPE_GRAY, 8, gray, NULL, 0, NULL, 0, 0) == 0, "write");
    int gh, gw, gc;
    CHECK(load("gray.png", &gh, &gw, &gc) == VT_OK, "gray: %s", vt_last_error());
    CHECK(gh == h && gw == w && gc == 1, "gray: got %d x %d x %d", gw, gh, gc);
    CHECK(count_diff(buf, gray, sizeof gray) == 0, "gray pixels differ");
}

static void test_png_16bit(void) {
    char p[1024];
    const int w = 5, h = 3;
    uint16_t rgb[5 * 3 * 3], g16[5 * 3];
    uint8_t want_rgb[5 * 3 * 3], want_g[5 * 3];
    for (int i = 0; i < w * h * 3; i++) {
        rgb[i] = (uint16_t)((i * 4099u + 17u) % 65536u);
        want_rgb[i] = (uint8_t)floor(rgb[i] * 255.0 / 65535.0 + 0.5);
    }
    for (int i = 0; i < w * h; i++) {
        g16[i] = (uint16_t)(65535u - (unsigned)i * 3001u);
        want_g[i] = (uint8_t)floor(g16[i] * 255.0 / 65535.0 + 0.5);
    }
    CHECK(fx_write_png(path_of(p, "rgb16.png"), w, h, PNG_COLOR_TYPE_RGB, 16, rgb, NULL, 0, NULL, 0, 0) == 0, "write");
    CHECK(fx_write_png(path_of(p, "gray16.png"), w, h, PNG_COLOR_TYPE_GRAY, 16, g16, NULL, 0, NULL, 0, 0) == 0, "write");
    int gh, gw, gc;
    CHECK(load("rgb16.png", &gh, &gw, &gc) == VT_OK, "rgb16: %s", vt_last_error());
    CHECK(gh == h && gw == w && gc == 3, "rgb16: got %d x %d x %d", gw, gh, gc);
    CHECK_ARRAY_CLOSE(buf, want_rgb, w * h * 3, 0, 0, "16-bit RGB scaled to 8 bits with rounding");
    CHECK(load("gray16.png", &gh, &gw, &gc) == VT_OK, "gray16: %s", vt_last_error());
    CHECK(gh == h && gw == w && gc == 1, "gray16: got %d x %d x %d", gw, gh, gc);
    CHECK_ARRAY_CLOSE(buf, want_g, w * h, 0, 0, "16-bit gray scaled to 8 bits with rounding");
}

static void test_png_low_depth_and_alpha(void) {
    char p[1024];
    int gh, gw, gc;
    /* 1-bit gray: samples 0/1 expand to 0/255. */
    const int w = 11, h = 2;
    uint8_t bits[22], want_bits[22];
    for (int i = 0; i < w * h; i++) {
        bits[i] = (uint8_t)((i * 7 / 3) & 1);
        want_bits[i] = bits[i] ? 255 : 0;
    }
    CHECK(fx_write_png(path_of(p, "gray1.png"), w, h, PNG_COLOR_TYPE_GRAY, 1, bits, NULL, 0, NULL, 0, 0) == 0, "write");
    CHECK(load("gray1.png", &gh, &gw, &gc) == VT_OK, "gray1: %s", vt_last_error());
    CHECK(gh == h && gw == w && gc == 1, "gray1: got %d x %d x %d", gw, gh, gc);
    CHECK(count_diff(buf, want_bits, sizeof want_bits) == 0, "1-bit gray expands to 0/255");

    /* gray + alpha: gray kept as stored, alpha dropped. */
    uint8_t ga[4 * 3 * 2], want_ga[4 * 3];
    for (int i = 0; i < 12; i++) {
        ga[2 * i] = (uint8_t)(i * 21);
        ga[2 * i + 1] = (uint8_t)(255 - i * 20);
        want_ga[i] = (uint8_t)(i * 21);
    }
    CHECK(fx_write_png(path_of(p, "ga.png"), 4, 3, PNG_COLOR_TYPE_GRAY_ALPHA, 8, ga, NULL, 0, NULL, 0, 0) == 0, "write");
    CHECK(load("ga.png", &gh, &gw, &gc) == VT_OK, "ga: %s", vt_last_error());
    CHECK(gh == 3 && gw == 4 && gc == 1, "gray+alpha: got %d x %d x %d", gw, gh, gc);
    CHECK(count_diff(buf, want_ga, sizeof want_ga) == 0, "gray+alpha: gray values as stored");

    /* RGBA: RGB kept as stored (not composited), alpha dropped. */
    uint8_t rgba[3 * 2 * 4], want_rgba[3 * 2 * 3];
    for (int i = 0; i < 6; i++) {
        for (int ch = 0; ch < 3; ch++) want_rgba[3 * i + ch] = rgba[4 * i + ch] = (uint8_t)(i * 40 + ch * 5);
        rgba[4 * i + 3] = (uint8_t)(i * 50);
    }
    CHECK(fx_write_png(path_of(p, "rgba.png"), 3, 2, PNG_COLOR_TYPE_RGB_ALPHA, 8, rgba, NULL, 0, NULL, 0, 0) == 0, "write");
    CHECK(load("rgba.png", &gh, &gw, &gc) == VT_OK, "rgba: %s", vt_last_error());
    CHECK(gh == 2 && gw == 3 && gc == 3, "rgba: got %d x %d x %d", gw, gh, gc);
    CHECK(count_diff(buf, want_rgba, sizeof want_rgba) == 0, "RGBA: colour as stored, alpha dropped");

    /* Palette (8-bit indices), with and without a tRNS chunk. */
    const png_color pal[4] = {{255, 0, 0}, {0, 128, 0}, {10, 20, 30}, {200, 201, 202}};
    const uint8_t trns[4] = {255, 0, 128, 7};
    uint8_t idx[6 * 5], want_pal[6 * 5 * 3];
    for (int i = 0; i < 30; i++) {
        idx[i] = (uint8_t)((i * 5 + i / 6) % 4);
        want_pal[3 * i] = pal[idx[i]].red;
        want_pal[3 * i + 1] = pal[idx[i]].green;
        want_pal[3 * i + 2] = pal[idx[i]].blue;
    }
    CHECK(fx_write_png(path_of(p, "pal.png"), 6, 5, PNG_COLOR_TYPE_PALETTE, 8, idx, pal, 4, NULL, 0, 0) == 0, "write");
    CHECK(fx_write_png(path_of(p, "pal_trns.png"), 6, 5, PNG_COLOR_TYPE_PALETTE, 8, idx, pal, 4, trns, 4, 0) == 0, "write");
    const char *names[2] = {"pal.png", "pal_trns.png"};
    for (int k = 0; k < 2; k++) {
        CHECK(load(names[k], &gh, &gw, &gc) == VT_OK, "%s: %s", names[k], vt_last_error());
        CHECK(gh == 5 && gw == 6 && gc == 3, "%s: got %d x %d x %d", names[k], gw, gh, gc);
        CHECK(count_diff(buf, want_pal, sizeof want_pal) == 0, "%s: palette colours", names[k]);
    }
}

/* JPEG error of the decode vs the pattern: max and mean absolute difference. */
static void jpeg_error(int w, int h, int c, int *maxd, double *meand) {
    uint8_t *want = malloc((size_t)w * h * c);
    fx_fill(want, w, h, c);
    long sum = 0;
    *maxd = 0;
    for (size_t i = 0; i < (size_t)w * h * c; i++) {
        int d = abs((int)buf[i] - (int)want[i]);
        sum += d;
        if (d > *maxd) *maxd = d;
    }
    *meand = (double)sum / ((double)w * h * c);
    free(want);
}

static void test_jpeg(void) {
    char p[1024];
    int gh, gw, gc, maxd;
    double meand;
    /* Quality 100 (quantiser 1): the round trip is within a few levels; 37 x 21
     * exercises partial blocks on both axes. */
    CHECK(fx_jpeg_pattern(path_of(p, "color.jpg"), 37, 21, 3, 100) == 0, "write color.jpg");
    CHECK(load("color.jpg", &gh, &gw, &gc) == VT_OK, "color.jpg: %s", vt_last_error());
    CHECK(gh == 21 && gw == 37 && gc == 3, "color.jpg: got %d x %d x %d", gw, gh, gc);
    jpeg_error(37, 21, 3, &maxd, &meand);
    CHECK(maxd <= 6 && meand <= 1.5, "color JPEG q100: max |diff| %d, mean %.3f", maxd, meand);

    CHECK(fx_jpeg_pattern(path_of(p, "gray_pattern.jpg"), 19, 9, 1, 100) == 0, "write gray_pattern.jpg");
    CHECK(load("gray_pattern.jpg", &gh, &gw, &gc) == VT_OK, "gray_pattern.jpg: %s", vt_last_error());
    CHECK(gh == 9 && gw == 19 && gc == 1, "gray JPEG stays 1 channel: got %d x %d x %d", gw, gh, gc);
    jpeg_error(19, 9, 1, &maxd, &meand);
    CHECK(maxd <= 3 && meand <= 1.0, "gray JPEG q100: max |diff| %d, mean %.3f", maxd, meand);

    /* Flat 8 x 8 blocks (19 x 9: partial blocks on both axes) decode exactly up to the
     * IDCT's rounding. */
    const uint8_t vals[6] = {0, 255, 17, 128, 200, 91};
    uint8_t want_g[19 * 9];
    for (int y = 0; y < 9; y++)
        for (int x = 0; x < 19; x++) want_g[y * 19 + x] = vals[(y / 8) * 3 + x / 8];
    CHECK(fx_write_jpeg(path_of(p, "gray.jpeg"), 19, 9, 1, want_g, 100) == 0, "write gray.jpeg");
    CHECK(load("gray.jpeg", &gh, &gw, &gc) == VT_OK, "gray.jpeg: %s", vt_last_error());
    CHECK(gh == 9 && gw == 19 && gc == 1, "gray.jpeg: got %d x %d x %d", gw, gh, gc);
    CHECK_ARRAY_CLOSE(buf, want_g, 19 * 9, 1, 0, "flat gray JPEG blocks within IDCT rounding");

    /* Adobe CMYK (4 components, as in a few ImageNet files): stb_image converts to RGB
     * as R = C * K / 255 (inverted CMYK; its rounding is within 1). */
    uint8_t cmyk[16 * 8 * 4], want_rgb[16 * 8 * 3];
    for (int i = 0; i < 16 * 8; i++) {
        const uint8_t c4[4] = {(uint8_t)(i < 64 ? 250 : 40), 128, (uint8_t)(i < 64 ? 10 : 200), (uint8_t)(i < 64 ? 255 : 160)};
        memcpy(cmyk + 4 * i, c4, 4);
        for (int ch = 0; ch < 3; ch++) want_rgb[3 * i + ch] = (uint8_t)((c4[ch] * c4[3] + 127) / 255);
    }
    CHECK(fx_write_jpeg(path_of(p, "cmyk.jpg"), 8, 16, 4, cmyk, 100) == 0, "write cmyk.jpg");
    CHECK(load("cmyk.jpg", &gh, &gw, &gc) == VT_OK, "cmyk.jpg: %s", vt_last_error());
    CHECK(gh == 16 && gw == 8 && gc == 3, "CMYK JPEG decodes to RGB: got %d x %d x %d", gw, gh, gc);
    CHECK_ARRAY_CLOSE(buf, want_rgb, 16 * 8 * 3, 2, 0, "CMYK -> RGB");

    /* From memory, same result as from the file. */
    size_t len;
    uint8_t *enc = (uint8_t *)test_read_file(path_of(p, "color.jpg"), &len);
    uint8_t *b2 = NULL;
    size_t c2 = 0;
    CHECK(vt_image_decode(enc, len, "mem", MAXPX, &b2, &c2, &gh, &gw, &gc) == VT_OK, "decode: %s", vt_last_error());
    CHECK(gh == 21 && gw == 37 && gc == 3 && c2 >= 37 * 21 * 3, "memory decode size");
    CHECK(vt_image_load(path_of(p, "color.jpg"), MAXPX, &buf, &cap, &gh, &gw, &gc) == VT_OK, "reload");
    CHECK(b2 && memcmp(b2, buf, 37 * 21 * 3) == 0, "memory and file decodes agree");
    free(b2);
    free(enc);
}

static void test_png_named_jpeg(void) {
    char p[1024];
    int gh, gw, gc;
    CHECK(fx_png_pattern(path_of(p, "really_png.JPEG"), 9, 4, 3) == 0, "write");
    CHECK(load("really_png.JPEG", &gh, &gw, &gc) == VT_OK, "PNG under .JPEG: %s", vt_last_error());
    uint8_t want[9 * 4 * 3];
    fx_fill(want, 9, 4, 3);
    CHECK(gh == 4 && gw == 9 && gc == 3 && count_diff(buf, want, sizeof want) == 0,
          "PNG data under a .JPEG name decodes as PNG, exactly");
}

static void test_buffer_reuse(void) {
    char p[1024];
    int gh, gw, gc;
    CHECK(fx_png_pattern(path_of(p, "big.png"), 40, 30, 3) == 0, "write");
    CHECK(fx_png_pattern(path_of(p, "small.png"), 4, 3, 1) == 0, "write");
    CHECK(load("big.png", &gh, &gw, &gc) == VT_OK, "big: %s", vt_last_error());
    uint8_t *before = buf;
    size_t cap_before = cap;
    CHECK(cap >= 40 * 30 * 3, "buffer grew to %zu", cap);
    CHECK(load("small.png", &gh, &gw, &gc) == VT_OK, "small: %s", vt_last_error());
    CHECK(buf == before && cap == cap_before, "a smaller image reuses the buffer");
    CHECK(gh == 3 && gw == 4 && gc == 1, "small: got %d x %d x %d", gw, gh, gc);
}

/* Expect load(name) to fail with a message containing every needle. */
static void expect_error(const char *name, const char *n1, const char *n2) {
    int gh = -1, gw = -1, gc = -1;
    vt_status s = load(name, &gh, &gw, &gc);
    const char *msg = vt_last_error();
    CHECK(s == VT_ERR_RUNTIME, "%s: expected a runtime error, got status %d", name, (int)s);
    CHECK(has(msg, name) && has(msg, n1) && (!n2 || has(msg, n2)),
          "%s: message \"%s\" should name the file and contain \"%s\"%s%s", name, msg, n1,
          n2 ? " and " : "", n2 ? n2 : "");
    CHECK(gh == 0 && gw == 0 && gc == 0, "%s: size zeroed on error", name);
}

static void test_errors(void) {
    char p[1024];
    expect_error("missing.jpg", "cannot open", "No such file");
    mkdir(path_of(p, "adir.jpg"), 0755);
    expect_error("adir.jpg", "the image is a directory, not a regular file", NULL);
    CHECK(mkfifo(path_of(p, "fifo.jpg"), 0600) == 0, "mkfifo %s", p);
    expect_error("fifo.jpg", "the image is a FIFO (named pipe), not a regular file", NULL);
    fx_write_bytes(path_of(p, "empty.jpg"), "", 0);
    expect_error("empty.jpg", "empty file (0 bytes)", NULL);
    const char text[] = "this is a text file, not a JPEG\n";
    fx_write_bytes(path_of(p, "notes.jpg"), text, sizeof text - 1);
    expect_error("notes.jpg", "not an image", "\"this is \"");

    /* Truncated JPEG: half the file, and only the first 20 bytes (inside the header). */
    fx_jpeg_pattern(path_of(p, "full.jpg"), 32, 32, 3, 90);
    size_t len;
    free(test_read_file(path_of(p, "full.jpg"), &len));
    char src[1024];
    path_of(src, "full.jpg");
    fx_truncate_copy(src, path_of(p, "half.jpg"), len / 2);
    expect_error("half.jpg", "truncated JPEG", "end-of-image marker");
    fx_truncate_copy(src, path_of(p, "head.jpg"), 20);
    expect_error("head.jpg", "truncated JPEG", NULL);
    fx_truncate_copy(src, path_of(p, "noeoi.jpg"), len - 2);
    expect_error("noeoi.jpg", "truncated JPEG", NULL);

    /* Truncated PNG. */
    fx_png_pattern(path_of(p, "full.png"), 32, 32, 3);
    free(test_read_file(path_of(p, "full.png"), &len));
    path_of(src, "full.png");
    fx_truncate_copy(src, path_of(p, "half.png"), len / 2);
    expect_error("half.png", "truncated PNG", "at offset");
    fx_truncate_copy(src, path_of(p, "sig.png"), 12);
    expect_error("sig.png", "truncated PNG", NULL);

    /* Corrupt PNG: a flipped byte inside the IHDR chunk fails its CRC. */
    uint8_t *b = (uint8_t *)test_read_file(src, &len);
    b[18] ^= 0x40;
    fx_write_bytes(path_of(p, "crc.png"), b, len);
    free(b);
    expect_error("crc.png", "corrupt PNG", NULL);

    /* The decoder keeps working after errors. */
    int gh, gw, gc;
    CHECK(load("full.png", &gh, &gw, &gc) == VT_OK && gh == 32, "decode after errors: %s", vt_last_error());
}

/* Mutated JPEG and PNG files (random bytes overwritten, deterministic) never crash or
 * return nonsense: each decode fails with a message naming the input or succeeds with
 * the original size. */
static void test_mutations(void) {
    char p[1024];
    const char *srcs[2] = {"mut.jpg", "mut.png"};
    fx_jpeg_pattern(path_of(p, srcs[0]), 21, 14, 3, 80);
    fx_png_pattern(path_of(p, srcs[1]), 21, 14, 3);
    uint64_t state = 12345;
    int failed = 0, ok = 0, bad_msg = 0, bad_size = 0;
    for (int k = 0; k < 2; k++) {
        size_t len = 0;
        uint8_t *orig = (uint8_t *)test_read_file(path_of(p, srcs[k]), &len);
        CHECK(orig && len > 16, "read %s", srcs[k]);
        if (!orig || len <= 16) { free(orig); continue; }
        uint8_t *m = malloc(len);
        for (int trial = 0; trial < 150; trial++) {
            memcpy(m, orig, len);
            int flips = 1 + trial % 4;
            for (int f = 0; f < flips; f++) {
                state = state * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = 2 + (size_t)(state >> 33) % (len - 2);
                m[at] = (uint8_t)(state >> 13);
            }
            int gh, gw, gc;
            vt_status s = vt_image_decode(m, len, "mutant", MAXPX, &buf, &cap, &gh, &gw, &gc);
            if (s) {
                failed++;
                bad_msg += !has(vt_last_error(), "mutant");
            } else {
                ok++;
                bad_size += !(gh > 0 && gw > 0 && (gc == 1 || gc == 3) && (size_t)gh * gw * gc <= cap);
            }
        }
        free(m);
        free(orig);
    }
    CHECK(failed + ok == 300 && bad_msg == 0 && bad_size == 0,
          "mutations: %d failed (%d without the name), %d decoded (%d with a bad size)", failed,
          bad_msg, ok, bad_size);
    CHECK(failed > 0, "some mutations are detected (%d)", failed);
}

/* A PNG from raw chunk payloads: the signature, then each (type, data, len) chunk with
 * its length and CRC. Returns the byte count written to out. */
static size_t png_bytes(uint8_t *out, const char *const *types, const uint8_t *const *data,
                        const size_t *lens, int n) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    size_t o = 8;
    memcpy(out, sig, 8);
    for (int i = 0; i < n; i++) {
        uint32_t l = (uint32_t)lens[i];
        uint8_t be[4] = {(uint8_t)(l >> 24), (uint8_t)(l >> 16), (uint8_t)(l >> 8), (uint8_t)l};
        memcpy(out + o, be, 4);
        memcpy(out + o + 4, types[i], 4);
        if (l) memcpy(out + o + 8, data[i], l);
        uint32_t crc = (uint32_t)crc32(0, out + o + 4, 4 + l);
        uint8_t cb[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
        memcpy(out + o + 8 + l, cb, 4);
        o += 12 + l;
    }
    return o;
}

/* A PNG with this IHDR (w, h, bit depth, color type), a tiny IDAT and IEND. */
static size_t png_with_ihdr(uint8_t *out, uint32_t w, uint32_t h, int depth, int color) {
    uint8_t ihdr[13] = {(uint8_t)(w >> 24), (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w,
                        (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h,
                        (uint8_t)depth, (uint8_t)color, 0, 0, 0};
    static const uint8_t idat[11] = {0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0};
    const char *types[3] = {"IHDR", "IDAT", "IEND"};
    const uint8_t *data[3] = {ihdr, idat, NULL};
    size_t lens[3] = {13, 10, 0};
    return png_bytes(out, types, data, lens, 3);
}

static void expect_decode_error(const uint8_t *d, size_t len, int64_t max_px, const char *w1,
                                const char *w2, const char *what) {
    int gh, gw, gc;
    vt_status s = vt_image_decode(d, len, "crafted", max_px, &buf, &cap, &gh, &gw, &gc);
    const char *msg = vt_last_error();
    CHECK(s == VT_ERR_RUNTIME && has(msg, "crafted") && has(msg, w1) && (!w2 || has(msg, w2)),
          "%s: status %d, message: %s", what, s, msg);
}

/* Declared sizes a file cannot hold, the side and pixel limits, libpng's reasons behind
 * "Invalid IHDR data", and a crafted CMYK JPEG whose scan ends inside a code (stb_image
 * 2.27 then shifts by 32 or more: undefined behaviour, which `make san` stops on). */
static void test_bounds(void) {
    char p[1024];
    size_t len;

    /* A small JPEG whose frame header claims 18000 x 18000 (972 MB of pixels). */
    fx_jpeg_pattern(path_of(p, "small.jpg"), 16, 16, 3, 50);
    uint8_t *j = (uint8_t *)test_read_file(p, &len);
    size_t sof = 2;
    while (sof + 9 < len && !(j[sof] == 0xFF && j[sof + 1] == 0xC0)) sof++;
    CHECK(sof + 9 < len, "SOF0 found");
    int gh, gw, gc;
    CHECK(vt_image_decode(j, len, "small", 256, &buf, &cap, &gh, &gw, &gc) == VT_OK && gh == 16,
          "the 16 x 16 JPEG decodes within 256 pixels: %s", vt_last_error());
    expect_decode_error(j, len, 255, "16 x 16 = 256 pixels exceeds data.max_image_pixels = 255",
                        NULL, "JPEG over the pixel limit");
    j[sof + 5] = j[sof + 7] = 0x46;
    j[sof + 6] = j[sof + 8] = 0x50; /* 0x4650 = 18000 */
    expect_decode_error(j, len, MAXPX, "corrupt JPEG: declares 18000 x 18000", "bytes can hold",
                        "JPEG claiming 18000 x 18000");
    free(j);

    /* PNGs: a claim the file cannot hold, a side over 65536, the pixel limit. */
    uint8_t png[256];
    len = png_with_ihdr(png, 20000, 20000, 8, 0);
    expect_decode_error(png, len, MAXPX, "corrupt PNG: declares 20000 x 20000", "deflate",
                        "PNG claiming 20000 x 20000");
    len = png_with_ihdr(png, 70000, 1, 8, 0);
    expect_decode_error(png, len, MAXPX, "70000 x 1", "longer than 65536",
                        "PNG wider than libpng's limit");
    fx_png_pattern(path_of(p, "px.png"), 40, 30, 3);
    uint8_t *q = (uint8_t *)test_read_file(p, &len);
    expect_decode_error(q, len, 1199, "40 x 30 = 1200 pixels exceeds data.max_image_pixels = 1199",
                        NULL, "PNG over the pixel limit");
    free(q);
    /* libpng's reason for "Invalid IHDR data" comes only as a warning before the error. */
    len = png_with_ihdr(png, 4, 4, 3, 0);
    expect_decode_error(png, len, MAXPX, "Invalid IHDR data", "libpng: Invalid bit depth",
                        "PNG with bit depth 3");

    /* An Adobe CMYK JPEG of noise at quality 100, its scan cut after k bytes and closed
     * with EOI, for every k: each decode fails with a message or decodes at 16 x 16. */
    uint8_t noise[16 * 16 * 4];
    unsigned r = 1;
    for (int i = 0; i < 16 * 16 * 4; i++) {
        r = r * 1103515245u + 12345u;
        noise[i] = (r >> 16) & 1 ? 255 : 0;
    }
    CHECK(fx_write_jpeg(path_of(p, "noise.jpg"), 16, 16, 4, noise, 100) == 0, "write noise.jpg");
    uint8_t *n = (uint8_t *)test_read_file(p, &len);
    size_t sos = 2;
    while (sos + 4 < len && !(n[sos] == 0xFF && n[sos + 1] == 0xDA)) sos++;
    size_t start = sos + 2 + ((size_t)n[sos + 2] << 8 | n[sos + 3]), end = len - 2;
    CHECK(start < end && n[end] == 0xFF && n[end + 1] == 0xD9, "scan found");
    uint8_t *cut = malloc(len);
    int ok = 0, failed = 0, bad = 0;
    for (size_t k = 1; start < end && k < end - start; k++) {
        memcpy(cut, n, start + k);
        cut[start + k] = 0xFF;
        cut[start + k + 1] = 0xD9;
        vt_status s = vt_image_decode(cut, start + k + 2, "cut", MAXPX, &buf, &cap, &gh, &gw, &gc);
        if (s) {
            failed++;
            bad += !has(vt_last_error(), "cut");
        } else {
            ok++;
            bad += !(gh == 16 && gw == 16 && gc == 3);
        }
    }
    CHECK(ok + failed > 1000 && bad == 0, "cut CMYK scans: %d decoded, %d failed, %d bad", ok,
          failed, bad);
    free(cut);
    free(n);
}

/* A scan naming a Huffman table no DHT segment defined: stb_image 2.27 decodes it with
 * its table memory as found (uninitialised; UBSan "shift exponent 32" in
 * stbi__jpeg_huff_decode), so the marker walk rejects it. Baseline: a component's
 * selectors changed to the undefined tables DC 2 / AC 2. Progressive: the fuzzer's
 * reproducer, whose AC scan uses AC table 1 of a file that defines only DC 0 and AC 0. */
static void test_undefined_huffman_table(void) {
    char p[1024];
    size_t len;
    fx_jpeg_pattern(path_of(p, "tables.jpg"), 16, 16, 3, 90);
    uint8_t *j = (uint8_t *)test_read_file(p, &len);
    size_t sos = 2;
    while (sos + 6 < len && !(j[sos] == 0xFF && j[sos + 1] == 0xDA)) sos++;
    CHECK(sos + 6 < len && j[sos + 4] == 3, "SOS with 3 components found");
    int gh, gw, gc;
    CHECK(vt_image_decode(j, len, "crafted", MAXPX, &buf, &cap, &gh, &gw, &gc) == VT_OK,
          "the unmodified JPEG decodes: %s", vt_last_error());
    uint8_t tables1 = j[sos + 6]; /* component 1's selectors, both defined */
    j[sos + 8] = 0x20 | (tables1 & 15); /* component 2: DC table 2 */
    expect_decode_error(j, len, MAXPX, "decodes component 2 with DC Huffman table 2",
                        "no DHT segment before it defines", "baseline scan, undefined DC table");
    j[sos + 8] = (tables1 & 0xF0) | 2; /* component 2: AC table 2 */
    expect_decode_error(j, len, MAXPX, "with AC Huffman table 2", "no DHT", "undefined AC table");
    free(j);
    uint8_t *r = (uint8_t *)test_read_file("tests/fuzz/regressions/image/"
                              "crash-4b020b681018f7bf29724bd352b5ef75f52bbe72", &len);
    CHECK(r != NULL, "fuzz reproducer present (run from the repository root)");
    if (r) {
        expect_decode_error(r, len, MAXPX, "with AC Huffman table 1", "no DHT",
                            "progressive AC scan, undefined AC table");
        free(r);
    }
}

/* A component whose quantisation table no DQT segment defined: stb_image 2.27 decodes it
 * with a table of zeros (a flat grey image, no error); libjpeg calls the file corrupt, and
 * so does the marker walk. Two ways in: the frame points a component at table 3, and the
 * file's DQT segment removed altogether. */
static void test_undefined_quant_table(void) {
    char p[1024];
    size_t len;
    fx_jpeg_pattern(path_of(p, "quant.jpg"), 16, 16, 3, 90);
    uint8_t *j = (uint8_t *)test_read_file(p, &len);
    size_t sof = 2, dqt = 2;
    while (sof + 10 < len && !(j[sof] == 0xFF && j[sof + 1] == 0xC0)) sof++;
    while (dqt + 4 < len && !(j[dqt] == 0xFF && j[dqt + 1] == 0xDB)) dqt++;
    CHECK(sof + 10 < len && j[sof + 9] == 3 && dqt + 4 < len, "SOF0 with 3 components and a DQT found");
    int gh, gw, gc;
    CHECK(vt_image_decode(j, len, "crafted", MAXPX, &buf, &cap, &gh, &gw, &gc) == VT_OK,
          "the unmodified JPEG decodes: %s", vt_last_error());
    uint8_t tq = j[sof + 15]; /* component 2's table */
    j[sof + 15] = 3;
    expect_decode_error(j, len, MAXPX, "decodes component 2 with quantisation table 3",
                        "no DQT segment before it defines", "frame names undefined table 3");
    j[sof + 15] = tq;
    size_t seg = 2 + ((size_t)j[dqt + 2] << 8 | j[dqt + 3]);
    memmove(j + dqt, j + dqt + seg, len - dqt - seg);
    expect_decode_error(j, len - seg, MAXPX, "with quantisation table 0", "no DQT segment",
                        "DQT segment removed");
    free(j);
}

/* Scan data holding FF FF ... FF 00: decoders read it as a stuffed FF and the scan goes
 * on, so the marker walk must too. The fuzzer's reproducer hides, behind such bytes, a
 * DHT segment whose length runs past the end of the file (stb_image 2.27 then builds a
 * table of more than 256 codes: UBSan "index 257 out of bounds"); the walk, which used
 * to end the scan at FF FF and skip that DHT, now reaches it and calls the file
 * truncated. */
static void test_fill_bytes_in_scan(void) {
    size_t len;
    uint8_t *r = (uint8_t *)test_read_file("tests/fuzz/regressions/image/"
                              "crash-33ffed1a16d0669171bbb3f8b7020760e7f7f188", &len);
    CHECK(r != NULL, "fuzz reproducer present (run from the repository root)");
    if (r) {
        expect_decode_error(r, len, MAXPX, "truncated JPEG", "before the end-of-image marker",
                            "DHT behind FF FF 00 in a scan");
        free(r);
    }
}

int main(void) {
    if (test_tmpdir(tmpdir, sizeof tmpdir, "test_image")) return 1;
    test_sniff();
    test_png_8bit();
    test_png_16bit();
    test_png_low_depth_and_alpha();
    test_jpeg();
    test_png_named_jpeg();
    test_buffer_reuse();
    test_errors();
    test_mutations();
    test_bounds();
    test_undefined_huffman_table();
    test_undefined_quant_table();
    test_fill_bytes_in_scan();
    free(buf);
    test_rm_rf(tmpdir);
    return test_summary();
}
