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

vt_status vt_st_bind_float32(vt_safetensors *st, const int64_t *begins, const char *path) {
    int64_t wide = 0;
    int all_f32 = 1;
    for (int i = 0; i < st->n; i++) {
        all_f32 &= st->tensors[i].dtype[0] == '\0' || strcmp(st->tensors[i].dtype, "F32") == 0;
        wide += st->tensors[i].size;
    }
    if (all_f32) {
        for (int i = 0; i < st->n; i++)
            st->tensors[i].data = (float *)((char *)st->buffer + begins[i]);
        return VT_OK;
    }
    float *out = vt_aligned_alloc((size_t)wide * sizeof(float) + 64);
    if (!out)
        return vt_fail(VT_ERR_RUNTIME, "%s: out of memory widening %lld values to float32", path,
                       (long long)wide);
    int64_t at = 0;
    for (int i = 0; i < st->n; i++) {
        vt_st_tensor *t = &st->tensors[i];
        vt_st_widen(t->dtype, (const char *)st->buffer + begins[i], out + at, t->size);
        t->data = out + at;
        at += t->size;
    }
    free(st->buffer);
    st->buffer = out;
    return VT_OK;
}
