/* scalar/gelu.c - exact (erf) GELU, as torch.nn.GELU(approximate='none'). */
#include <math.h>

#include "scalar.h"

void vt_scalar_gelu_fwd(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * (float)M_SQRT1_2));
}

void vt_scalar_gelu_bwd(const float *x, const float *dy, float *dx, size_t n) {
    const float inv_sqrt_2pi = 0.3989422804014327f;
    for (size_t i = 0; i < n; i++) {
        float cdf = 0.5f * (1.0f + erff(x[i] * (float)M_SQRT1_2));
        float pdf = inv_sqrt_2pi * expf(-0.5f * x[i] * x[i]);
        dx[i] += dy[i] * (cdf + x[i] * pdf);
    }
}
