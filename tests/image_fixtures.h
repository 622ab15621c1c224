/* image_fixtures.h - test helper: writes the image files test_image.c and
 * test_datasets.c decode (header-only; include from exactly one file per test binary).
 *
 * PNG through libpng's write API (every colour type and bit depth the decoder handles,
 * optional Adam7 interlace), JPEG through a small baseline encoder (1 or 3 components),
 * plus raw byte files (text named .jpg, zero-byte, truncated copies). Test patterns are
 * deterministic functions of (x, y, channel) so expected pixels are recomputed, not
 * stored.
 */
#ifndef VT_TEST_IMAGE_FIXTURES_H
#define VT_TEST_IMAGE_FIXTURES_H

#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"


/* The 8-bit test pattern: a smooth gradient per channel (JPEG-friendly). */
static inline uint8_t fx_pattern(int x, int y, int ch, int w, int h) {
    int v = (x * 200) / (w > 1 ? w - 1 : 1) + (y * 40) / (h > 1 ? h - 1 : 1) + ch * 7;
    return (uint8_t)(ch == 1 ? 255 - v % 256 : v % 256);
}

/* Fill an 8-bit HWC buffer with fx_pattern. */
static inline void fx_fill(uint8_t *px, int w, int h, int c) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int ch = 0; ch < c; ch++) px[((size_t)y * w + x) * c + ch] = fx_pattern(x, y, ch, w, h);
}

/* Write a PNG: rows hold w * channels(color) samples of `depth` bits (16-bit samples as
 * host uint16_t, converted to big-endian here; depth < 8 packed by libpng from one
 * sample per byte). palette/npal for PNG_COLOR_TYPE_PALETTE, trns/ntrns optional.
 * Returns 0 on success. */
static inline int fx_write_png(const char *path, int w, int h, int color, int depth,
                               const void *samples, const png_color *palette, int npal,
                               const uint8_t *trns, int ntrns, int interlace) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        fclose(f);
        return -1;
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, depth, color,
                 interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (palette) png_set_PLTE(png, info, palette, npal);
    if (trns) png_set_tRNS(png, info, trns, ntrns, NULL);
    png_write_info(png, info);
    if (depth == 16) png_set_swap(png);
    if (depth < 8) png_set_packing(png);
    int ch = color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_PALETTE ? 1
             : color == PNG_COLOR_TYPE_GRAY_ALPHA ? 2 : color == PNG_COLOR_TYPE_RGB ? 3 : 4;
    size_t row_bytes = (size_t)w * ch * (depth == 16 ? 2 : 1);
    int passes = png_set_interlace_handling(png);
    for (int p = 0; p < passes; p++)
        for (int y = 0; y < h; y++)
            png_write_row(png, (png_const_bytep)samples + (size_t)y * row_bytes);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return fclose(f) == 0 ? 0 : -1;
}

/* An 8-bit RGB (c = 3) or gray (c = 1) PNG of the fx_pattern. */
static inline int fx_png_pattern(const char *path, int w, int h, int c) {
    uint8_t *px = malloc((size_t)w * h * c);
    fx_fill(px, w, h, c);
    int r = fx_write_png(path, w, h, c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, 8, px, NULL,
                         0, NULL, 0, 0);
    free(px);
    return r;
}

/* ---- a minimal baseline JPEG encoder ----
 * stb_image_write's JPEG writer always writes 3 components and shifts signed ints past
 * their range (UBSan stops `make san` there), so the tests carry their own: baseline
 * sequential, 1 (gray) or 3 (YCbCr, JFIF conversion) components, no subsampling, the
 * standard luminance quantiser scaled by quality (libjpeg's formula; quality 100 = all 1)
 * and the standard luminance Huffman tables for every component, float DCT. Flat 8 x 8
 * blocks at quality 100 carry only a DC term, so a decoder returns them within +-1. */

static const uint8_t fx_zigzag[64] = {0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,
                                      12, 19, 26, 33, 40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28,
                                      35, 42, 49, 56, 57, 50, 43, 36, 29, 22, 15, 23, 30, 37, 44, 51,
                                      58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54, 47, 55, 62, 63};
static const uint8_t fx_yqt[64] = {16, 11, 10, 16, 24,  40,  51,  61,  12, 12, 14, 19, 26,  58,  60,  55,
                                   14, 13, 16, 24, 40,  57,  69,  56,  14, 17, 22, 29, 51,  87,  80,  62,
                                   18, 22, 37, 56, 68,  109, 103, 77,  24, 35, 55, 64, 81,  104, 113, 92,
                                   49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99};
static const uint8_t fx_dc_bits[16] = {0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t fx_ac_bits[16] = {0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d};
static const uint8_t fx_ac_vals[162] = {
    0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12, 0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
    0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08, 0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
    0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
    0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
    0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
    0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79, 0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
    0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
    0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
    0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
    0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea, 0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
    0xf9, 0xfa};

typedef struct {
    FILE *f;
    uint32_t acc;
    int n;
    uint16_t dc_code[12], ac_code[256];
    uint8_t dc_len[12], ac_len[256];
} fx_jpeg_writer;

/* Canonical Huffman codes (JPEG Annex C) of a bits/vals table. */
static inline void fx_huff(const uint8_t *bits, const uint8_t *vals, uint16_t *code, uint8_t *len) {
    unsigned c = 0, k = 0;
    for (int l = 1; l <= 16; l++) {
        for (int i = 0; i < bits[l - 1]; i++, k++) {
            code[vals[k]] = (uint16_t)c++;
            len[vals[k]] = (uint8_t)l;
        }
        c <<= 1;
    }
}

static inline void fx_put(fx_jpeg_writer *w, uint32_t code, int len) {
    w->acc = (w->acc << len) | (code & ((1u << len) - 1));
    w->n += len;
    while (w->n >= 8) {
        uint8_t byte = (uint8_t)(w->acc >> (w->n - 8));
        fputc(byte, w->f);
        if (byte == 0xFF) fputc(0, w->f);
        w->n -= 8;
    }
    w->acc &= (1u << w->n) - 1;
}

/* Size category and extra bits of a coefficient. */
static inline int fx_category(int v, uint32_t *extra) {
    int mag = v < 0 ? -v : v, cat = 0;
    while (mag >> cat) cat++;
    *extra = (uint32_t)(v < 0 ? v + (1 << cat) - 1 : v);
    return cat;
}

/* Write a baseline JPEG of HWC pixels px at quality 1..100: c = 1 gray, 3 RGB (stored
 * as YCbCr), or 4 = an Adobe CMYK file (APP14 with transform 0; the samples are stored
 * as given, i.e. Adobe's inverted CMYK: 255 = no ink). */
static inline int fx_write_jpeg(const char *path, int w, int h, int c, const uint8_t *px, int quality) {
    fx_jpeg_writer jw = {0};
    jw.f = fopen(path, "wb");
    if (!jw.f) return -1;
    uint8_t dc_vals[12];
    for (int i = 0; i < 12; i++) dc_vals[i] = (uint8_t)i;
    fx_huff(fx_dc_bits, dc_vals, jw.dc_code, jw.dc_len);
    fx_huff(fx_ac_bits, fx_ac_vals, jw.ac_code, jw.ac_len);
    int scale = quality < 50 ? 5000 / quality : 200 - 2 * quality, qt[64];
    for (int i = 0; i < 64; i++) {
        int q = (fx_yqt[i] * scale + 50) / 100;
        qt[i] = q < 1 ? 1 : q > 255 ? 255 : q;
    }
    FILE *f = jw.f;
    fputc(0xFF, f); fputc(0xD8, f);
    if (c == 4) {
        const uint8_t app14[] = {0xFF, 0xEE, 0, 14, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 0};
        fwrite(app14, 1, sizeof app14, f);
    }
    fputc(0xFF, f); fputc(0xDB, f); fputc(0, f); fputc(67, f); fputc(0, f);
    for (int k = 0; k < 64; k++) fputc(qt[fx_zigzag[k]], f);
    fputc(0xFF, f); fputc(0xC0, f); fputc(0, f); fputc(8 + 3 * c, f); fputc(8, f);
    fputc(h >> 8, f); fputc(h & 255, f); fputc(w >> 8, f); fputc(w & 255, f); fputc(c, f);
    for (int i = 0; i < c; i++) { fputc(i + 1, f); fputc(0x11, f); fputc(0, f); }
    fputc(0xFF, f); fputc(0xC4, f); fputc(0, f); fputc(3 + 16 + 12, f); fputc(0x00, f);
    fwrite(fx_dc_bits, 1, 16, f);
    fwrite(dc_vals, 1, 12, f);
    fputc(0xFF, f); fputc(0xC4, f); fputc(0, f); fputc(3 + 16 + 162, f); fputc(0x10, f);
    fwrite(fx_ac_bits, 1, 16, f);
    fwrite(fx_ac_vals, 1, 162, f);
    fputc(0xFF, f); fputc(0xDA, f); fputc(0, f); fputc(6 + 2 * c, f); fputc(c, f);
    for (int i = 0; i < c; i++) { fputc(i + 1, f); fputc(0x00, f); }
    fputc(0, f); fputc(63, f); fputc(0, f);
    double cosv[8][8];
    for (int u = 0; u < 8; u++)
        for (int x = 0; x < 8; x++)
            cosv[u][x] = cos((2 * x + 1) * u * M_PI / 16) * (u == 0 ? sqrt(0.5) : 1.0);
    int prev[4] = {0, 0, 0, 0};
    for (int by = 0; by < h; by += 8)
        for (int bx = 0; bx < w; bx += 8)
            for (int ch = 0; ch < c; ch++) {
                double blk[64], tmp[64];
                for (int y = 0; y < 8; y++)
                    for (int x = 0; x < 8; x++) {
                        int sy = by + y < h ? by + y : h - 1, sx = bx + x < w ? bx + x : w - 1;
                        const uint8_t *p = px + ((size_t)sy * w + sx) * c;
                        double v = p[c == 3 ? 0 : ch];
                        if (c == 3) {
                            double r = p[0], g = p[1], b = p[2];
                            v = ch == 0 ? 0.299 * r + 0.587 * g + 0.114 * b
                                : ch == 1 ? 128 - 0.168736 * r - 0.331264 * g + 0.5 * b
                                          : 128 + 0.5 * r - 0.418688 * g - 0.081312 * b;
                        }
                        blk[y * 8 + x] = v - 128;
                    }
                for (int y = 0; y < 8; y++)
                    for (int u = 0; u < 8; u++) {
                        double s = 0;
                        for (int x = 0; x < 8; x++) s += blk[y * 8 + x] * cosv[u][x];
                        tmp[y * 8 + u] = s;
                    }
                int q[64];
                for (int k = 0; k < 64; k++) {
                    int r = fx_zigzag[k], v = r / 8, u = r % 8;
                    double s = 0;
                    for (int y = 0; y < 8; y++) s += tmp[y * 8 + u] * cosv[v][y];
                    q[k] = (int)lround(0.25 * s / qt[r]);
                }
                uint32_t extra;
                int cat = fx_category(q[0] - prev[ch], &extra);
                prev[ch] = q[0];
                fx_put(&jw, jw.dc_code[cat], jw.dc_len[cat]);
                if (cat) fx_put(&jw, extra, cat);
                int run = 0;
                for (int k = 1; k < 64; k++) {
                    if (q[k] == 0) { run++; continue; }
                    for (; run > 15; run -= 16) fx_put(&jw, jw.ac_code[0xF0], jw.ac_len[0xF0]);
                    cat = fx_category(q[k], &extra);
                    int sym = run << 4 | cat;
                    fx_put(&jw, jw.ac_code[sym], jw.ac_len[sym]);
                    fx_put(&jw, extra, cat);
                    run = 0;
                }
                if (run) fx_put(&jw, jw.ac_code[0x00], jw.ac_len[0x00]);
            }
    if (jw.n) fx_put(&jw, (1u << (8 - jw.n)) - 1, 8 - jw.n);
    fputc(0xFF, f); fputc(0xD9, f);
    return fclose(f) == 0 ? 0 : -1;
}

/* A JPEG of the fx_pattern with c = 1 or 3 components at the given quality. */
static inline int fx_jpeg_pattern(const char *path, int w, int h, int c, int quality) {
    uint8_t *px = malloc((size_t)w * h * c);
    fx_fill(px, w, h, c);
    int r = fx_write_jpeg(path, w, h, c, px, quality);
    free(px);
    return r;
}

/* Write len bytes to path. */
static inline int fx_write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = len ? fwrite(data, 1, len, f) : 0;
    return fclose(f) == 0 && n == len ? 0 : -1;
}

/* Copy the first `keep` bytes of src to dst (a truncated file). */
static inline int fx_truncate_copy(const char *src, const char *dst, size_t keep) {
    size_t len;
    uint8_t *b = (uint8_t *)test_read_file(src, &len);
    if (!b) return -1;
    int r = fx_write_bytes(dst, b, keep < len ? keep : len);
    free(b);
    return r;
}

#endif
