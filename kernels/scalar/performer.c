/* scalar/performer.c - the elementwise passes of Performer's positive (FAVOR+) feature
 * map, src/ops/performer.c (contracts in ../entries.def): feature_exp, feature_grad. */
#include <math.h>

#include "scalar.h"

void vt_scalar_feature_exp(const float *x, float *y, size_t n, float t, float c, float eps) {
    for (size_t i = 0; i < n; i++) y[i] = c * (expf(x[i] - t) + eps);
}

double vt_scalar_feature_grad(float *d, const float *p, float ce, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        d[i] *= p[i] - ce;
        s += d[i];
    }
    return s;
}
