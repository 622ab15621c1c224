/* checkpoint_dtype.c - exact widening of BF16 / F16 safetensors data to float32
 * (contract in checkpoint_dtype.h). */
#include "checkpoint_dtype.h"

#include <string.h>

int vt_st_dtype_size(const char *dtype) {
    if (strcmp(dtype, "F32") == 0) return 4;
    if (strcmp(dtype, "BF16") == 0 || strcmp(dtype, "F16") == 0) return 2;
    return 0;
}

static float bits_to_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE half -> float: sign, 5-bit exponent (bias 15), 10-bit mantissa. */
static float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13)); /* inf, NaN */
    if (exp == 0) {
        /* zero or subnormal: mant * 2^-24, exact in float32 */
        float v = (float)mant * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_to_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

void vt_st_widen(const char *dtype, const void *src, float *dst, int64_t n) {
    const unsigned char *b = src;
    if (strcmp(dtype, "F32") == 0) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (strcmp(dtype, "BF16") == 0) {
        for (int64_t i = 0; i < n; i++)
            dst[i] = bits_to_float((uint32_t)b[2 * i] << 16 | (uint32_t)b[2 * i + 1] << 24);
    } else {
        VT_ASSERT(strcmp(dtype, "F16") == 0, "vt_st_widen: unsupported dtype %s", dtype);
        for (int64_t i = 0; i < n; i++)
            dst[i] = half_to_float((uint16_t)(b[2 * i] | b[2 * i + 1] << 8));
    }
}
