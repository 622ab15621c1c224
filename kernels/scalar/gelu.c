/* scalar/gelu.c - exact (erf) GELU, as torch.nn.GELU(approximate='none'). Forward,
 * backward and the fused backward-then-forward share gelu_value / gelu_deriv, so the
 * fused entry is bitwise the other two. */
#include <math.h>

#include "scalar.h"

static inline float gelu_erf(float x) { return erff(x * (float)M_SQRT1_2); }
static inline float gelu_value(float x, float e) { return 0.5f * x * (1.0f + e); }
static inline float gelu_deriv(float x, float e) {
    const float inv_sqrt_2pi = 0.3989422804014327f;
    float cdf = 0.5f * (1.0f + e);
    float pdf = inv_sqrt_2pi * expf(-0.5f * x * x);
    return cdf + x * pdf;
}

void vt_scalar_gelu_fwd(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = gelu_value(x[i], gelu_erf(x[i]));
}

void vt_scalar_gelu_bwd(const float *x, const float *dy, float *dx, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] += dy[i] * gelu_deriv(x[i], gelu_erf(x[i]));
}

void vt_scalar_gelu_bwd_fwd(const float *x, float *g, float *dx, size_t n, int add) {
    for (size_t i = 0; i < n; i++) {
        float e = gelu_erf(x[i]), d = g[i] * gelu_deriv(x[i], e);
        dx[i] = add ? dx[i] + d : d;
        g[i] = gelu_value(x[i], e);
    }
}
