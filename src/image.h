/* image.h - image decoding: the only user of stb_image, libpng and zlib for images.
 *
 * Owns: recognising a file's format by its magic bytes (never by its name), decoding
 * JPEG (stb_image) and PNG (libpng) held in memory or in a file to 8-bit HWC pixels with
 * 1 (gray) or 3 (RGB) channels, and the reasons a file is not a usable image.
 * Does not own: resizing, cropping, channel conversion for the model, normalisation
 * (src/data/transform.*), which files make up a dataset (src/data/imagefolder.c).
 *
 * Output channels:
 *  - JPEG: 1-channel (grayscale) files decode to c = 1; YCbCr/RGB files to c = 3; Adobe
 *    CMYK/YCCK files (4 components, as in a few ImageNet images) are converted to RGB by
 *    stb_image (c = 3).
 *  - PNG: gray and gray+alpha to c = 1; RGB, RGBA and palette to c = 3. Alpha (an alpha
 *    channel or a palette/colour-key tRNS chunk) is dropped: colour values are kept as
 *    stored, not composited. 16-bit samples are scaled to 8 bits with rounding
 *    (round(v * 255 / 65535)); 1/2/4-bit gray is expanded to 0..255. Gamma chunks
 *    (gAMA, sRGB, iCCP) are not applied: pixels are the stored values.
 * Errors (VT_ERR_RUNTIME) name the file and the reason: "empty file (0 bytes)", "not an
 * image" with the first bytes found, "truncated JPEG"/"truncated PNG" with the offset,
 * "corrupt JPEG/PNG" with the decoder's reason (for PNG with libpng's warnings, which
 * hold the reason behind errors like "Invalid IHDR data"), a declared size the file's
 * bytes cannot hold, a side over 65536 pixels, more pixels than max_pixels
 * (data.max_image_pixels). A JPEG counts as truncated when its marker structure ends
 * before the end-of-image marker (FF D9).
 * Bounded work: the size checks come before any pixel buffer is allocated, and the
 * plausibility bound (image.c) keeps a file's decoded size within a constant times its
 * byte count, so no small file costs gigabytes or seconds.
 *
 * Memory: the caller owns the pixel buffer (*buf, *cap bytes), which grows with realloc
 * only when an image needs more room, so a caller that reuses its buffer stops
 * allocating after the largest image. libpng decodes straight into that buffer (row by
 * row); stb_image allocates its own output and work buffers per JPEG (copied, then
 * freed). Files are mapped (mmap), not copied. Thread-safe: no shared mutable state
 * (stb_image's failure reason is thread-local in C11 builds).
 */
#ifndef VT_IMAGE_H
#define VT_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum { VT_IMAGE_UNKNOWN = 0, VT_IMAGE_JPEG, VT_IMAGE_PNG } vt_image_format;

/* Format by magic bytes: JPEG FF D8 FF, PNG 89 50 4E 47 0D 0A 1A 0A; else UNKNOWN. */
vt_image_format vt_image_sniff(const uint8_t *data, size_t len);

/* Short name of a format: "JPEG", "PNG", "unknown". */
const char *vt_image_format_name(vt_image_format f);

/* Decode len bytes of an encoded image of at most max_pixels (> 0) pixels into *buf
 * (h x w x c bytes, HWC, row-major, c in {1, 3}), growing *buf / *cap with realloc when
 * needed. `name` (a path) prefixes every error message. On error *buf and *cap stay
 * valid (possibly grown), *h, *w, *c are 0. */
vt_status vt_image_decode(const uint8_t *data, size_t len, const char *name, int64_t max_pixels,
                          uint8_t **buf, size_t *cap, int *h, int *w, int *c);

/* vt_image_decode of a file's contents (mapped read-only). Adds "cannot open", "not a
 * regular file" and "empty file (0 bytes)" to the errors above. */
vt_status vt_image_load(const char *path, int64_t max_pixels, uint8_t **buf, size_t *cap, int *h,
                        int *w, int *c);

#endif
