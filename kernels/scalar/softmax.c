/* scalar/softmax.c - row softmax forward (max-subtracted, the row sum accumulated in
 * double) and backward. */
#include <math.h>

#include "scalar.h"

void vt_scalar_softmax_rows(const float *x, float *y, int rows, int cols, int ld, float scale) {
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * ld;
        float *yr = y + (size_t)r * ld;
        float mx = -INFINITY;
        for (int c = 0; c < cols; c++) mx = fmaxf(mx, scale * xr[c]);
        double s = 0.0; /* in double: the reference's sum must not be the least accurate */
        for (int c = 0; c < cols; c++) {
            yr[c] = expf(scale * xr[c] - mx);
            s += yr[c];
        }
        float inv = (float)(1.0 / s);
        for (int c = 0; c < cols; c++) yr[c] *= inv;
    }
}

void vt_scalar_softmax_bwd_rows(const float *y, const float *dy, float *dx, int rows, int cols, int ld) {
    for (int r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * ld, *dyr = dy + (size_t)r * ld;
        float *dxr = dx + (size_t)r * ld;
        float s = 0.0f;
        for (int c = 0; c < cols; c++) s += dyr[c] * yr[c];
        for (int c = 0; c < cols; c++) dxr[c] = yr[c] * (dyr[c] - s);
    }
}
