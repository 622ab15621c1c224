/* scalar/layernorm.c - LayerNorm over the last dim, forward and backward.
 * Forward: two-pass mean/variance (biased), rstd = 1/sqrt(var + eps).
 * Backward (xhat = (x - mean) rstd, dxhat = dy g):
 *   dx += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat));  dg += dy xhat;  db += dy. */
#include <math.h>

#include "scalar.h"

void vt_scalar_layernorm_fwd(const float *x, const float *g, const float *b, float *y,
                             float *mean, float *rstd, int rows, int D, float eps) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * D;
        float *yr = y + (size_t)r * D;
        float m = 0.0f;
        for (int i = 0; i < D; i++) m += xr[i];
        m /= (float)D;
        float v = 0.0f;
        for (int i = 0; i < D; i++) v += (xr[i] - m) * (xr[i] - m);
        v /= (float)D;
        float rs = 1.0f / sqrtf(v + eps);
        for (int i = 0; i < D; i++) yr[i] = (xr[i] - m) * rs * g[i] + b[i];
        mean[r] = m;
        rstd[r] = rs;
    }
}

void vt_scalar_layernorm_bwd(const float *dy, const float *x, const float *g,
                             const float *mean, const float *rstd,
                             float *dx, float *dg, float *db, int rows, int D) {
    for (int r = 0; r < rows; r++) {
        const float *dyr = dy + (size_t)r * D, *xr = x + (size_t)r * D;
        float *dxr = dx + (size_t)r * D;
        float m = mean[r], rs = rstd[r];
        float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
        for (int i = 0; i < D; i++) {
            float xhat = (xr[i] - m) * rs;
            float dxhat = dyr[i] * g[i];
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * xhat;
            if (dg) dg[i] += dyr[i] * xhat;
            if (db) db[i] += dyr[i];
        }
        sum_dxhat /= (float)D;
        sum_dxhat_xhat /= (float)D;
        for (int i = 0; i < D; i++) {
            float xhat = (xr[i] - m) * rs;
            dxr[i] += rs * (dyr[i] * g[i] - sum_dxhat - xhat * sum_dxhat_xhat);
        }
    }
}
