/* scalar/elementwise.c - add, scale, zero_stream (memset), copy_stream (memcpy), axpy,
 * double-accumulated sum/dot, and max. */
#include <string.h>

#include "scalar.h"

void vt_scalar_add(const float *a, const float *b, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void vt_scalar_scale(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

void vt_scalar_zero_stream(float *x, size_t n) { memset(x, 0, n * sizeof(float)); }

void vt_scalar_copy_stream(const float *x, float *y, size_t n) { memcpy(y, x, n * sizeof(float)); }

void vt_scalar_axpy(float a, const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

double vt_scalar_sum(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

double vt_scalar_dot(const float *x, const float *y, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * y[i];
    return s;
}

float vt_scalar_max(const float *x, size_t n) {
    float m = x[0];
    for (size_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}
