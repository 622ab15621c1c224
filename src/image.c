/* image.c - JPEG (stb_image) and PNG (libpng) decoding to 8-bit HWC (image.h contract).
 *
 * Owns the stb_image implementation (JPEG only, no stdio; the stbi_ symbols live here) and the libpng
 * read path. The format is chosen from the magic bytes, so PNG data under a .JPEG name
 * decodes as PNG. Before stb_image decodes a JPEG, jpeg_check_markers walks the marker
 * segments to the end-of-image marker: stb_image silently fills a truncated scan with
 * zeros, so truncation is detected here instead; the walk also rejects Huffman tables
 * that would overflow stb_image 2.27's (it does not bound their code count) and scans
 * that use a Huffman table no DHT defined (stb_image reads its memory as is), and scans
 * of a component whose quantisation table no DQT defined (stb_image would decode it as
 * zeros; libjpeg rejects it). stb_image
 * itself is libstb-dev's header with upstream 2.28's entropy-decoder guards added at
 * build time (scripts/stb_image_patch.sh: a scan that ends inside a code otherwise
 * shifts by 32 or more, undefined behaviour).
 *
 * Bounded work: before any pixel buffer exists, the declared size must be one the file's
 * bytes can hold and at most max_pixels (data.max_image_pixels). A JPEG codes each 8 x 8
 * block of its full-resolution component with at least one bit (the DC code), so no
 * conforming file holds more than 512 pixels per byte; we accept up to 1024. A PNG's
 * filtered rows (one filter byte per row, then the packed samples; Adam7 counted per
 * pass) come from deflate, which expands at most 1032:1, so they must fit in 1032 times
 * the file size. Decoding cost is then linear in the file's size.
 */
#include "image.h"
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_JPEG
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS (1 << 16)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmisleading-indentation"
#include "stb_image_fixed.h" /* generated from stb_image.h by scripts/stb_image_patch.sh */
#pragma GCC diagnostic pop

#define JPEG_MAX_PIXELS_PER_BYTE 1024 /* twice the densest conforming JPEG (see above) */
#define DEFLATE_MAX_RATIO 1032        /* deflate's largest expansion: 258 bytes per 2 bits */
#define MAX_SIDE 65536                /* decoders' limit per side (STBI_MAX_DIMENSIONS, libpng) */

static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

vt_image_format vt_image_sniff(const uint8_t *data, size_t len) {
    if (len >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return VT_IMAGE_JPEG;
    if (len >= 8 && memcmp(data, png_magic, 8) == 0) return VT_IMAGE_PNG;
    return VT_IMAGE_UNKNOWN;
}

const char *vt_image_format_name(vt_image_format f) {
    switch (f) {
    case VT_IMAGE_JPEG: return "JPEG";
    case VT_IMAGE_PNG: return "PNG";
    case VT_IMAGE_UNKNOWN: break;
    }
    return "unknown";
}

/* The declared size against the decoders' side limit and data.max_image_pixels. */
static vt_status check_pixels(const char *name, const char *fmt, uint64_t w, uint64_t h,
                              int64_t max_pixels) {
    if (w == 0 || h == 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: corrupt %s: declares %llu x %llu pixels", name, fmt,
                       (unsigned long long)w, (unsigned long long)h);
    if (w > MAX_SIDE || h > MAX_SIDE)
        return vt_fail(VT_ERR_RUNTIME, "%s: %s of %llu x %llu pixels: a side longer than %d pixels "
                       "is not supported", name, fmt, (unsigned long long)w, (unsigned long long)h,
                       MAX_SIDE);
    if (w * h > (uint64_t)max_pixels)
        return vt_fail(VT_ERR_RUNTIME, "%s: %s of %llu x %llu = %llu pixels exceeds "
                       "data.max_image_pixels = %lld (raise it to decode such images)", name, fmt,
                       (unsigned long long)w, (unsigned long long)h,
                       (unsigned long long)(w * h), (long long)max_pixels);
    return VT_OK;
}

/* Make room for h * w * c bytes in *buf (sizes already checked by check_pixels). */
static vt_status reserve(const char *name, uint8_t **buf, size_t *cap, int h, int w, int c) {
    if (h <= 0 || w <= 0) return vt_fail(VT_ERR_RUNTIME, "%s: invalid image size %d x %d", name, w, h);
    size_t bytes = (size_t)h * (size_t)w * (size_t)c;
    if (bytes <= *cap) return VT_OK;
    uint8_t *p = realloc(*buf, bytes);
    if (!p) return vt_fail(VT_ERR_RUNTIME, "%s: out of memory for a %zu-byte image", name, bytes);
    *buf = p;
    *cap = bytes;
    return VT_OK;
}

/* ---- JPEG ---------------------------------------------------------------------------- */

/* Validate the Huffman tables of one DHT segment (payload p, n bytes, at file offset at):
 * class <= 1, id <= 3, at most 256 codes, and the code values inside the segment.
 * stb_image 2.27 does not check the code count and writes past its tables on such a
 * file, so it must never see one. Each table it defines sets bit class * 4 + id of
 * *defined. */
static vt_status jpeg_check_dht(const uint8_t *p, size_t n, size_t at, const char *name,
                                unsigned *defined) {
    size_t i = 0;
    while (i < n) {
        if (n - i < 17 || (p[i] >> 4) > 1 || (p[i] & 15) > 3)
            return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: bad Huffman table header (DHT at "
                           "offset %zu)", name, at);
        size_t codes = 0;
        for (int k = 1; k <= 16; k++) codes += p[i + k];
        if (codes > 256 || n - i - 17 < codes)
            return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: Huffman table with %zu codes (DHT at "
                           "offset %zu; at most 256, within the segment)", name, codes, at);
        *defined |= 1u << ((p[i] >> 4) * 4 + (p[i] & 15));
        i += 17 + codes;
    }
    return VT_OK;
}

/* The scan header of one SOS segment (payload p, n bytes, at file offset at) may only name
 * Huffman tables that a DHT before it defined (bits of defined as in jpeg_check_dht):
 * stb_image 2.27 decodes with whatever its table memory holds otherwise (uninitialised
 * memory; a shift by 32 in its decoder). A baseline scan decodes DC and AC; a progressive
 * one the DC table in a first DC scan (Ss = 0, Ah = 0) and the AC table in an AC scan
 * (Ss > 0). A malformed header is left to stb_image, which rejects it. */
static vt_status jpeg_check_sos(const uint8_t *p, size_t n, size_t at, int progressive,
                                unsigned defined, const char *name) {
    if (n < 1 || n != 4 + 2 * (size_t)p[0]) return VT_OK;
    int ss = p[n - 3], ah = p[n - 1] >> 4;
    int need_dc = !progressive || (ss == 0 && ah == 0), need_ac = !progressive || ss > 0;
    for (int i = 0; i < p[0]; i++) {
        int dc = p[2 + 2 * i] >> 4, ac = p[2 + 2 * i] & 15;
        int miss_dc = need_dc && dc <= 3 && !(defined >> dc & 1);
        int miss_ac = need_ac && ac <= 3 && !(defined >> (4 + ac) & 1);
        if (miss_dc || miss_ac)
            return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: the scan at offset %zu decodes "
                           "component %d with %s Huffman table %d, which no DHT segment before "
                           "it defines", name, at, p[1 + 2 * i], miss_dc ? "DC" : "AC",
                           miss_dc ? dc : ac);
    }
    return VT_OK;
}

/* Record the quantisation tables one DQT segment (payload p, n bytes) defines: bit Tq of
 * *defined per table. A malformed segment stops the walk and is left to stb_image, which
 * rejects it. */
static void jpeg_note_dqt(const uint8_t *p, size_t n, unsigned *defined) {
    size_t i = 0;
    while (i < n) {
        int pq = p[i] >> 4, tq = p[i] & 15;
        size_t size = 1 + 64 * (size_t)(pq + 1);
        if (pq > 1 || tq > 3 || n - i < size) return;
        *defined |= 1u << tq;
        i += size;
    }
}

/* Every component of the scan in one SOS segment (payload p, n bytes, at file offset at)
 * must use a quantisation table that a DQT before it defined; frame (sof, sof_n bytes:
 * precision, height, width, Nf, then Nf x {id, sampling, Tq}) names each component's
 * table. Malformed headers are left to stb_image. */
static vt_status jpeg_check_quant(const uint8_t *p, size_t n, size_t at, const uint8_t *sof,
                                  size_t sof_n, unsigned defined, const char *name) {
    if (!sof || sof_n < 6 || sof_n != 6 + 3 * (size_t)sof[5]) return VT_OK;
    if (n < 1 || n != 4 + 2 * (size_t)p[0]) return VT_OK;
    for (int i = 0; i < p[0]; i++)
        for (int k = 0; k < sof[5]; k++) {
            int tq = sof[6 + 3 * k + 2];
            if (sof[6 + 3 * k] == p[1 + 2 * i] && tq <= 3 && !(defined >> tq & 1))
                return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: the scan at offset %zu decodes "
                               "component %d with quantisation table %d, which no DQT segment "
                               "before it defines", name, at, p[1 + 2 * i], tq);
        }
    return VT_OK;
}

/* Walk the JPEG marker segments from SOI to EOI (FF D9). Fill bytes and stray bytes
 * between segments are tolerated (libjpeg warns and continues on those); a file that
 * ends before EOI is truncated. */
static vt_status jpeg_check_markers(const uint8_t *d, size_t len, const char *name) {
    size_t pos = 2;
    vt_status s;
    unsigned huff_defined = 0, quant_defined = 0;
    int progressive = 0;
    const uint8_t *sof = NULL; /* the frame header's payload, once seen */
    size_t sof_n = 0;
    for (;;) {
        while (pos < len && d[pos] != 0xFF) pos++;
        while (pos < len && d[pos] == 0xFF) pos++;
        if (pos >= len) break;
        uint8_t m = d[pos++];
        if (m == 0xD9) return VT_OK;
        if (m == 0x01 || (m >= 0xD0 && m <= 0xD8)) continue;
        if (pos + 2 > len) break;
        size_t seg = (size_t)d[pos] << 8 | d[pos + 1];
        if (seg < 2)
            return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: segment FF %02X at offset %zu has "
                           "length %zu, expected >= 2", name, m, pos - 2, seg);
        if (pos + seg > len) break;
        if (m == 0xC4 && (s = jpeg_check_dht(d + pos + 2, seg - 2, pos - 2, name, &huff_defined)))
            return s;
        if (m == 0xDB) jpeg_note_dqt(d + pos + 2, seg - 2, &quant_defined);
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC) {
            sof = d + pos + 2;
            sof_n = seg - 2;
        }
        if (m == 0xC2) progressive = 1;
        if (m == 0xDA && ((s = jpeg_check_sos(d + pos + 2, seg - 2, pos - 2, progressive,
                                              huff_defined, name)) ||
                          (s = jpeg_check_quant(d + pos + 2, seg - 2, pos - 2, sof, sof_n,
                                                quant_defined, name))))
            return s;
        pos += seg;
        if (m != 0xDA) continue;
        /* Entropy-coded data: ends at a marker, an FF, after any FF fill bytes, followed by
         * a byte other than 00 (a stuffed FF) or RSTn. Decoders (stb_image, libjpeg) read
         * FF FF ... FF 00 as a stuffed FF too, so the scan goes on past it. */
        while (pos + 1 < len) {
            if (d[pos] != 0xFF) {
                pos++;
                continue;
            }
            size_t q = pos + 1;
            while (q < len && d[q] == 0xFF) q++;
            if (q < len && (d[q] == 0x00 || (d[q] >= 0xD0 && d[q] <= 0xD7))) {
                pos = q + 1;
                continue;
            }
            if (q >= len) pos = len;
            break;
        }
        if (pos + 1 >= len) break;
    }
    return vt_fail(VT_ERR_RUNTIME, "%s: truncated JPEG: the file ends at byte %zu before the "
                   "end-of-image marker (FF D9)", name, len);
}

static vt_status decode_jpeg(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
                             uint8_t **buf, size_t *cap, int *h, int *w, int *c) {
    if (len > INT_MAX)
        return vt_fail(VT_ERR_RUNTIME, "%s: JPEG of %zu bytes: the decoder reads at most %d bytes",
                       name, len, INT_MAX);
    vt_status s = jpeg_check_markers(data, len, name);
    if (s) return s;
    int iw, ih, comp;
    if (!stbi_info_from_memory(data, (int)len, &iw, &ih, &comp))
        return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: %s", name, stbi_failure_reason());
    uint64_t px = (uint64_t)iw * (uint64_t)ih;
    if (px > (uint64_t)len * JPEG_MAX_PIXELS_PER_BYTE)
        return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: declares %d x %d = %llu pixels, more than "
                       "its %zu bytes can hold (a JPEG codes each 8 x 8 block with at least one "
                       "bit): a crafted or truncated file", name, iw, ih, (unsigned long long)px, len);
    if ((s = check_pixels(name, "JPEG", (uint64_t)iw, (uint64_t)ih, max_pixels))) return s;
    int want = comp == 1 ? 1 : 3;
    if ((s = reserve(name, buf, cap, ih, iw, want))) return s;
    int gw, gh, gc;
    stbi_uc *pix = stbi_load_from_memory(data, (int)len, &gw, &gh, &gc, want);
    if (!pix) {
        const char *why = stbi_failure_reason();
        if (why && strcmp(why, "outofmem") == 0)
            return vt_fail(VT_ERR_RUNTIME, "%s: out of memory decoding a %d x %d JPEG", name, iw, ih);
        return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG (%d components): %s", name, comp,
                       why ? why : "unknown decoder error");
    }
    VT_ASSERT(gw == iw && gh == ih, "stb_image info %dx%d vs decode %dx%d", iw, ih, gw, gh);
    memcpy(*buf, pix, (size_t)gw * gh * want);
    stbi_image_free(pix);
    *h = gh;
    *w = gw;
    *c = want;
    return VT_OK;
}

/* ---- PNG ----------------------------------------------------------------------------- */

typedef struct {
    const uint8_t *data;
    size_t len, pos;
    const char *name;
    char msg[512];   /* the libpng error or our truncation message */
    char warn[256];  /* libpng's warnings so far: its reasons behind a generic error */
    jmp_buf jmp;
} png_src;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_src *src = png_get_error_ptr(png);
    if (src->msg[0] == '\0') {
        if (src->warn[0])
            snprintf(src->msg, sizeof src->msg, "corrupt PNG: %s (libpng: %s)", msg, src->warn);
        else
            snprintf(src->msg, sizeof src->msg, "corrupt PNG: %s", msg);
    }
    longjmp(src->jmp, 1);
}

/* Warnings are kept, not printed: libpng states the reason for an error such as "Invalid
 * IHDR data" only as warnings before it. */
static void png_on_warning(png_structp png, png_const_charp msg) {
    png_src *src = png_get_error_ptr(png);
    size_t n = strlen(src->warn);
    if (n + 3 < sizeof src->warn)
        snprintf(src->warn + n, sizeof src->warn - n, "%s%s", n ? "; " : "", msg);
}

static uint32_t be32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Bytes of filtered rows of a w x h PNG of bpp bits per pixel: per row a filter byte
 * and the packed samples; Adam7 (interlace 1) row by row of each pass. */
static uint64_t png_raw_bytes(uint64_t w, uint64_t h, uint64_t bpp, int interlace) {
    static const int pass[7][4] = {{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4},
                                   {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}};
    if (!interlace) return h * (1 + (w * bpp + 7) / 8);
    uint64_t raw = 0;
    for (int p = 0; p < 7; p++) {
        uint64_t x0 = (uint64_t)pass[p][0], y0 = (uint64_t)pass[p][1];
        uint64_t cols = w > x0 ? (w - x0 + (uint64_t)pass[p][2] - 1) / (uint64_t)pass[p][2] : 0;
        uint64_t rows = h > y0 ? (h - y0 + (uint64_t)pass[p][3] - 1) / (uint64_t)pass[p][3] : 0;
        if (cols && rows) raw += rows * (1 + (cols * bpp + 7) / 8);
    }
    return raw;
}

/* The IHDR's declared size against the file's bytes and the limits, before libpng
 * allocates anything. A file without a well-formed IHDR first is left to libpng. */
static vt_status png_check_size(const uint8_t *d, size_t len, const char *name, int64_t max_pixels) {
    if (len < 33 || be32(d + 8) != 13 || memcmp(d + 12, "IHDR", 4) != 0) return VT_OK;
    uint64_t w = be32(d + 16), h = be32(d + 20);
    int depth = d[24], color = d[25], interlace = d[28];
    int ch = color == 0 ? 1 : color == 2 ? 3 : color == 3 ? 1 : color == 4 ? 2 : color == 6 ? 4 : 0;
    if (w == 0 || h == 0 || ch == 0 || depth == 0 || depth > 16 || interlace > 1)
        return VT_OK; /* libpng names these */
    if (w <= MAX_SIDE && h <= MAX_SIDE) {
        uint64_t raw = png_raw_bytes(w, h, (uint64_t)depth * (uint64_t)ch, interlace);
        if (raw > (uint64_t)len * DEFLATE_MAX_RATIO)
            return vt_fail(VT_ERR_RUNTIME, "%s: corrupt PNG: declares %llu x %llu pixels (%llu bytes "
                           "of rows), more than its %zu bytes can hold (deflate expands at most "
                           "%d:1): a crafted or truncated file", name, (unsigned long long)w,
                           (unsigned long long)h, (unsigned long long)raw, len, DEFLATE_MAX_RATIO);
    }
    return check_pixels(name, "PNG", w, h, max_pixels);
}

static void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
    png_src *src = png_get_io_ptr(png);
    if (n > src->len - src->pos) {
        snprintf(src->msg, sizeof src->msg, "truncated PNG: needed %zu bytes at offset %zu but "
                 "the file ends at byte %zu", (size_t)n, src->pos, src->len);
        png_error(png, src->msg);
    }
    memcpy(out, src->data + src->pos, n);
    src->pos += n;
}

static vt_status decode_png(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
                            uint8_t **buf, size_t *cap, int *h, int *w, int *c) {
    vt_status s = png_check_size(data, len, name, max_pixels);
    if (s) return s;
    png_src src = {.data = data, .len = len, .pos = 0, .name = name};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    if (!png) return vt_fail(VT_ERR_RUNTIME, "%s: out of memory creating the PNG decoder", name);
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return vt_fail(VT_ERR_RUNTIME, "%s: out of memory creating the PNG decoder", name);
    }
    /* Everything the error path reads after longjmp lives in src or is re-read from it. */
    if (setjmp(src.jmp)) {
        png_destroy_read_struct(&png, &info, NULL);
        return vt_fail(VT_ERR_RUNTIME, "%s: %s", name, src.msg);
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_set_user_limits(png, 1u << 16, 1u << 16);
    png_read_info(png, info);
    int color = png_get_color_type(png, info);
    int depth = png_get_bit_depth(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_scale_16(png);
    /* palette_to_rgb turns a tRNS chunk into an alpha channel: strip that too. */
    if ((color & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS))
        png_set_strip_alpha(png);
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int iw = (int)png_get_image_width(png, info), ih = (int)png_get_image_height(png, info);
    int ic = png_get_channels(png, info);
    size_t row_bytes = png_get_rowbytes(png, info);
    if ((ic != 1 && ic != 3) || row_bytes != (size_t)iw * ic) {
        png_destroy_read_struct(&png, &info, NULL);
        return vt_fail(VT_ERR_RUNTIME, "%s: unsupported PNG: color type %d, %d-bit gives %d channels "
                       "and %zu-byte rows, expected 8-bit gray or RGB", name, color, depth, ic, row_bytes);
    }
    if (reserve(name, buf, cap, ih, iw, ic)) {
        png_destroy_read_struct(&png, &info, NULL);
        return VT_ERR_RUNTIME;
    }
    uint8_t *out = *buf;
    for (int p = 0; p < passes; p++)
        for (int y = 0; y < ih; y++) png_read_row(png, out + (size_t)y * iw * ic, NULL);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    *h = ih;
    *w = iw;
    *c = ic;
    return VT_OK;
}

/* ---- entry points -------------------------------------------------------------------- */

vt_status vt_image_decode(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
                          uint8_t **buf, size_t *cap, int *h, int *w, int *c) {
    *h = *w = *c = 0;
    VT_ASSERT(max_pixels > 0, "vt_image_decode: max_pixels %lld", (long long)max_pixels);
    if (len == 0) return vt_fail(VT_ERR_RUNTIME, "%s: empty file (0 bytes), expected a JPEG or PNG image", name);
    switch (vt_image_sniff(data, len)) {
    case VT_IMAGE_JPEG: return decode_jpeg(data, len, name, max_pixels, buf, cap, h, w, c);
    case VT_IMAGE_PNG: return decode_png(data, len, name, max_pixels, buf, cap, h, w, c);
    case VT_IMAGE_UNKNOWN: break;
    }
    char shown[64];
    size_t n = len < 8 ? len : 8, k = 0;
    for (size_t i = 0; i < n; i++) k += (size_t)snprintf(shown + k, sizeof shown - k, " %02X", data[i]);
    char text[12];
    size_t t = 0;
    for (size_t i = 0; i < n; i++) text[t++] = data[i] >= 32 && data[i] < 127 ? (char)data[i] : '.';
    text[t] = '\0';
    return vt_fail(VT_ERR_RUNTIME, "%s: not an image: the file (%zu bytes) starts with%s (\"%s\"); "
                   "expected JPEG (FF D8 FF) or PNG (89 50 4E 47 0D 0A 1A 0A)", name, len, shown, text);
}

vt_status vt_image_load(const char *path, int64_t max_pixels, uint8_t **buf, size_t *cap, int *h,
                        int *w, int *c) {
    *h = *w = *c = 0;
    int fd;
    int64_t size;
    vt_status opened = vt_input_open(path, "image", &fd, &size);
    if (opened != VT_OK) return opened;
    size_t len = (size_t)size;
    if (len == 0) {
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: empty file (0 bytes), expected a JPEG or PNG image", path);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return vt_fail(VT_ERR_RUNTIME, "%s: cannot map %zu bytes: %s", path, len, strerror(e));
    vt_status s = vt_image_decode(map, len, path, max_pixels, buf, cap, h, w, c);
    munmap(map, len);
    return s;
}
