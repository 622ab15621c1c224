/* performer_features.c - orthogonal random features with chi-distributed row norms
 * for Performer attention (see performer_features.h for the construction). */
#include "performer_features.h"

#include <math.h>
#include <stdlib.h>

#include "rng.h"
#include "status.h"

/* One block: up to hd orthonormal rows (rows of Q^T, Q from Gram-Schmidt on the columns
 * of a Gaussian matrix; equivalently orthonormalising Gaussian rows), written to out
 * (rows x hd), each scaled by an independent chi(hd) norm. g: hd * hd doubles scratch. */
static void draw_block(float *out, int rows, int hd, vt_rng *r, double *g) {
    for (int i = 0; i < hd; i++) {
        double *gi = g + (size_t)i * hd;
        for (;;) {
            for (int j = 0; j < hd; j++) gi[j] = vt_rng_normal(r);
            for (int p = 0; p < i; p++) {
                const double *gp = g + (size_t)p * hd;
                double d = 0.0;
                for (int j = 0; j < hd; j++) d += gi[j] * gp[j];
                for (int j = 0; j < hd; j++) gi[j] -= d * gp[j];
            }
            double n2 = 0.0;
            for (int j = 0; j < hd; j++) n2 += gi[j] * gi[j];
            if (n2 > 1e-20) {
                double inv = 1.0 / sqrt(n2);
                for (int j = 0; j < hd; j++) gi[j] *= inv;
                break;
            }
        }
    }
    for (int i = 0; i < rows; i++) {
        double s2 = 0.0;
        for (int j = 0; j < hd; j++) {
            double z = vt_rng_normal(r);
            s2 += z * z;
        }
        double s = sqrt(s2);
        for (int j = 0; j < hd; j++) out[(size_t)i * hd + j] = (float)(s * g[(size_t)i * hd + j]);
    }
}

/* vt_performer_draw_head with the caller's hd * hd doubles of scratch g. */
static void draw_head(float *w, int m, int hd, uint64_t seed, double *g) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int row = 0; row < m; row += hd) {
        int rows = m - row < hd ? m - row : hd;
        draw_block(w + (size_t)row * hd, rows, hd, &r, g);
    }
}

/* The sizes every draw needs (before its scratch is sized from hd). */
static void check_sizes(int m, int hd) {
    VT_ASSERT(m > 0 && hd > 0, "performer features: m %d, hd %d must be positive", m, hd);
}

void vt_performer_draw_head(float *w, int m, int hd, uint64_t seed) {
    check_sizes(m, hd);
    double *g = vt_xmalloc((size_t)hd * hd * sizeof *g);
    draw_head(w, m, hd, seed, g);
    free(g);
}

/* One scratch for all L * H heads (a redraw during training mallocs once, not per head). */
void vt_performer_draw(float *w, int L, int H, int m, int hd, uint64_t seed, int64_t index) {
    if (L <= 0 || H <= 0) return;
    check_sizes(m, hd);
    uint64_t base = vt_rng_derive(seed, VT_PERFORMER_STREAM, (uint64_t)index);
    double *g = vt_xmalloc((size_t)hd * hd * sizeof *g);
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            draw_head(w + ((size_t)l * H + h) * (size_t)m * hd, m, hd, vt_rng_derive(base, (uint64_t)l, (uint64_t)h),
                      g);
    free(g);
}
