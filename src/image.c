/* image.c - JPEG (stb_image) and PNG (libpng) decoding to 8-bit HWC (image.h contract).
 *
 * Owns the stb_image implementation (JPEG only, no stdio; the stbi_ symbols live here) and the libpng
 * read path. The format is chosen from the magic bytes, so PNG data under a .JPEG name
 * decodes as PNG. Before stb_image decodes a JPEG, jpeg_check_markers walks the marker
 * segments to the end-of-image marker: stb_image silently fills a truncated scan with
 * zeros, so truncation is detected here instead; the walk also rejects Huffman tables
 * that would overflow stb_image 2.27's (it does not bound their code count).
 */
#include "image.h"

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
#include "stb_image.h"
#pragma GCC diagnostic pop

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

/* Make room for h * w * c bytes in *buf; checks the size limit. */
static vt_status reserve(const char *name, uint8_t **buf, size_t *cap, int h, int w, int c) {
    size_t bytes = (size_t)h * (size_t)w * (size_t)c;
    if (h <= 0 || w <= 0) return vt_fail(VT_ERR_RUNTIME, "%s: invalid image size %d x %d", name, w, h);
    if (bytes > VT_IMAGE_MAX_BYTES || bytes / (size_t)h / (size_t)w != (size_t)c)
        return vt_fail(VT_ERR_RUNTIME, "%s: image too large: %d x %d x %d exceeds %zu bytes", name,
                       w, h, c, VT_IMAGE_MAX_BYTES);
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
 * file, so it must never see one. */
static vt_status jpeg_check_dht(const uint8_t *p, size_t n, size_t at, const char *name) {
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
        i += 17 + codes;
    }
    return VT_OK;
}

/* Walk the JPEG marker segments from SOI to EOI (FF D9). Fill bytes and stray bytes
 * between segments are tolerated (libjpeg warns and continues on those); a file that
 * ends before EOI is truncated. */
static vt_status jpeg_check_markers(const uint8_t *d, size_t len, const char *name) {
    size_t pos = 2;
    vt_status s;
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
        if (m == 0xC4 && (s = jpeg_check_dht(d + pos + 2, seg - 2, pos - 2, name))) return s;
        pos += seg;
        if (m != 0xDA) continue;
        /* Entropy-coded data: ends at the first FF not followed by 00 (stuffing) or RSTn. */
        while (pos + 1 < len) {
            if (d[pos] == 0xFF && d[pos + 1] != 0x00 && !(d[pos + 1] >= 0xD0 && d[pos + 1] <= 0xD7))
                break;
            pos++;
        }
        if (pos + 1 >= len) break;
    }
    return vt_fail(VT_ERR_RUNTIME, "%s: truncated JPEG: the file ends at byte %zu before the "
                   "end-of-image marker (FF D9)", name, len);
}

static vt_status decode_jpeg(const uint8_t *data, size_t len, const char *name, uint8_t **buf,
                             size_t *cap, int *h, int *w, int *c) {
    if (len > INT_MAX)
        return vt_fail(VT_ERR_RUNTIME, "%s: JPEG of %zu bytes: the decoder reads at most %d bytes",
                       name, len, INT_MAX);
    vt_status s = jpeg_check_markers(data, len, name);
    if (s) return s;
    int iw, ih, comp;
    if (!stbi_info_from_memory(data, (int)len, &iw, &ih, &comp))
        return vt_fail(VT_ERR_RUNTIME, "%s: corrupt JPEG: %s", name, stbi_failure_reason());
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
    jmp_buf jmp;
} png_src;

static void png_on_error(png_structp png, png_const_charp msg) {
    png_src *src = png_get_error_ptr(png);
    if (src->msg[0] == '\0') snprintf(src->msg, sizeof src->msg, "corrupt PNG: %s", msg);
    longjmp(src->jmp, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
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

static vt_status decode_png(const uint8_t *data, size_t len, const char *name, uint8_t **buf,
                            size_t *cap, int *h, int *w, int *c) {
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

vt_status vt_image_decode(const uint8_t *data, size_t len, const char *name, uint8_t **buf,
                          size_t *cap, int *h, int *w, int *c) {
    *h = *w = *c = 0;
    if (len == 0) return vt_fail(VT_ERR_RUNTIME, "%s: empty file (0 bytes), expected a JPEG or PNG image", name);
    switch (vt_image_sniff(data, len)) {
    case VT_IMAGE_JPEG: return decode_jpeg(data, len, name, buf, cap, h, w, c);
    case VT_IMAGE_PNG: return decode_png(data, len, name, buf, cap, h, w, c);
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

vt_status vt_image_load(const char *path, uint8_t **buf, size_t *cap, int *h, int *w, int *c) {
    *h = *w = *c = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: not a regular file", path);
    }
    size_t len = (size_t)st.st_size;
    if (len == 0) {
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: empty file (0 bytes), expected a JPEG or PNG image", path);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return vt_fail(VT_ERR_RUNTIME, "%s: cannot map %zu bytes: %s", path, len, strerror(e));
    vt_status s = vt_image_decode(map, len, path, buf, cap, h, w, c);
    munmap(map, len);
    return s;
}
