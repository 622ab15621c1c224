/* scalar/rotary.c - the pair rotation of one token row (position-encodings.md section
 * 1) and its two backward passes (contracts in ../entries.def): rot_pairs, rot_pairs_bwd,
 * rot_pairs_bwd_cs. r holds the row's (cos, sin) pairs. */
#include "scalar.h"

void vt_scalar_rot_pairs(const float *x, const float *r, size_t npr, size_t n, float *y) {
    for (size_t q = 0; q < npr; q++) {
        float co = r[2 * q], si = r[2 * q + 1], u = x[2 * q], w = x[2 * q + 1];
        y[2 * q] = u * co - w * si;
        y[2 * q + 1] = u * si + w * co;
    }
    for (size_t i = 2 * npr; i < n; i++) y[i] = x[i];
}

void vt_scalar_rot_pairs_bwd(const float *dy, const float *r, size_t npr, size_t n, float *dx) {
    for (size_t q = 0; q < npr; q++) {
        float co = r[2 * q], si = r[2 * q + 1], g0 = dy[2 * q], g1 = dy[2 * q + 1];
        dx[2 * q] += g0 * co + g1 * si;
        dx[2 * q + 1] += g1 * co - g0 * si;
    }
    for (size_t i = 2 * npr; i < n; i++) dx[i] += dy[i];
}

void vt_scalar_rot_pairs_bwd_cs(const float *x, const float *dy, size_t npr, float *dcs) {
    for (size_t q = 0; q < npr; q++) {
        float u = x[2 * q], w = x[2 * q + 1], g0 = dy[2 * q], g1 = dy[2 * q + 1];
        dcs[2 * q] += u * g0 + w * g1;
        dcs[2 * q + 1] += u * g1 - w * g0;
    }
}
