/* fuzz_image.c - libFuzzer harness: the image decoder (JPEG through the patched stb_image,
 * PNG through libpng) on arbitrary bytes.
 *
 * vt_image_decode either fails with a message naming the input, or returns an image of
 * 1 or 3 channels that fits the buffer, within data.max_image_pixels's default and within
 * the work bound of image.c: at most 1032 x 8 pixels per input byte (a 1-bit PNG at
 * deflate's largest expansion; JPEG allows 1024).
 */
#include "fuzz_util.h"
#include "image.h"

#define FUZZ_MAX_PIXELS ((int64_t)178956970)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t *buf;
    static size_t cap;
    int h, w, c;
    vt_status s = vt_image_decode(data, size, "fuzz-input", FUZZ_MAX_PIXELS, &buf, &cap, &h, &w, &c);
    if (s != VT_OK) {
        FUZZ_CHECK(strstr(vt_last_error(), "fuzz-input") != NULL, "message without the name: %s",
                   vt_last_error());
        FUZZ_CHECK(h == 0 && w == 0 && c == 0, "a failed decode set a size");
    } else {
        uint64_t px = (uint64_t)h * (uint64_t)w;
        FUZZ_CHECK(h > 0 && w > 0 && (c == 1 || c == 3) && px * (uint64_t)c <= cap,
                   "decoded %d x %d x %d into %zu bytes", w, h, c, cap);
        FUZZ_CHECK(px <= (uint64_t)FUZZ_MAX_PIXELS && px <= (uint64_t)size * 1032 * 8,
                   "%d x %d pixels from %zu bytes", w, h, size);
    }
    if (cap > ((size_t)64 << 20)) { /* keep the fuzzer's resident set small */
        free(buf);
        buf = NULL;
        cap = 0;
    }
    return 0;
}
