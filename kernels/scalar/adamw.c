/* scalar/adamw.c - one AdamW step over a flat buffer (torch.optim.AdamW order). */
#include <math.h>

#include "scalar.h"

void vt_scalar_adamw(float *p, const float *g, float *m, float *v, size_t n,
                     float lr, float b1, float b2, float eps, float wd, float bc1, float bc2) {
    for (size_t i = 0; i < n; i++) {
        p[i] -= lr * wd * p[i];
        m[i] = b1 * m[i] + (1.0f - b1) * g[i];
        v[i] = b2 * v[i] + (1.0f - b2) * g[i] * g[i];
        float mhat = m[i] / bc1;
        float denom = sqrtf(v[i] / bc2) + eps;
        p[i] -= lr * mhat / denom;
    }
}
