/* bf16.h - private to kernels/: the scalar bf16 conversions every level's rounding is
 * defined by (kernels.h: bf16 numerics). vt_bf16_round is VCVTNEPS2BF16 element by
 * element; vt_bf16_float widens exactly; vt_bf16_ftz is how the bf16 product
 * instructions (VDPBF16PS, TDPBF16PS) treat denormals, for their emulations. */
#ifndef VT_KERNELS_BF16_H
#define VT_KERNELS_BF16_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels.h"

static inline vt_bf16 vt_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0) return (vt_bf16)((u >> 16) & 0x8000u);           /* zero, denormal */
    if ((u & 0x7fffffffu) > 0x7f800000u) return (vt_bf16)((u >> 16) | 0x0040u);   /* NaN, quieted */
    return (vt_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); /* nearest even; overflow -> inf */
}

static inline float vt_bf16_float(vt_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x, or a zero of its sign when x is denormal: the bf16 product instructions read
 * denormal inputs as zero and flush denormal results to zero. */
static inline float vt_bf16_ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

#endif
