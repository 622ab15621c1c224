/* rot_rows.h - the pair rotation of one token row (position-encodings.md section 1), its
 * backward to the row and to the cos/sin row. Private to src/pe: vt_op_rot_pairs
 * (rotary.c) and vt_op_rot_split_heads (qkv_fused.c) both use these, which is what makes
 * their outputs bitwise equal. r: the row's cos/sin pairs (c, s) of npr rotated pairs;
 * channels >= 2 npr pass through. */
#ifndef VT_PE_ROT_ROWS_H
#define VT_PE_ROT_ROWS_H

#include <stdint.h>

/* y = pair rotation of x by the cos/sin row r (npr pairs); channels >= 2 npr copied. */
static inline void rot_row(const float *x, const float *r, int64_t npr, int64_t hd, float *y) {
    for (int64_t q = 0; q < npr; q++) {
        float co = r[2 * q], si = r[2 * q + 1], u = x[2 * q], w = x[2 * q + 1];
        y[2 * q] = u * co - w * si;
        y[2 * q + 1] = u * si + w * co;
    }
    for (int64_t i = 2 * npr; i < hd; i++) y[i] = x[i];
}

/* dx += the inverse rotation of dy. */
static inline void rot_row_bwd_x(const float *dy, const float *r, int64_t npr, int64_t hd, float *dx) {
    for (int64_t q = 0; q < npr; q++) {
        float co = r[2 * q], si = r[2 * q + 1], g0 = dy[2 * q], g1 = dy[2 * q + 1];
        dx[2 * q] += g0 * co + g1 * si;
        dx[2 * q + 1] += g1 * co - g0 * si;
    }
    for (int64_t i = 2 * npr; i < hd; i++) dx[i] += dy[i];
}

/* dcs row += d(rotation)/d(cos, sin) of one token. */
static inline void rot_row_bwd_cs(const float *x, const float *dy, int64_t npr, float *dc) {
    for (int64_t q = 0; q < npr; q++) {
        float u = x[2 * q], w = x[2 * q + 1], g0 = dy[2 * q], g1 = dy[2 * q + 1];
        dc[2 * q] += u * g0 + w * g1;
        dc[2 * q + 1] += u * g1 - w * g0;
    }
}

#endif
