/* performer_features.h - the random features of Performer (FAVOR+) attention
 * (position-encodings.md section 3): drawing orthogonal random features with
 * chi-distributed row norms. Owns the draw only; the feature map phi and the
 * attention op are in src/ops/performer.c, holding the features and saving them as
 * `pe.performer_w` is vit.c's, calling the redraw at the right steps is train.c's.
 *
 * For one (layer, head): w (m, hd) is made of ceil(m / hd) stacked blocks of hd rows
 * (the last block keeps its first m mod hd rows). Each block is Q^T from the QR
 * decomposition of an hd x hd matrix of independent N(0, 1) entries, so the rows of a
 * block are orthonormal; then every row is scaled by the norm of its own independent
 * N(0, I_hd) vector, so row norms are chi-distributed with hd degrees of freedom (mean
 * ~ sqrt(hd)) and each row is marginally N(0, I_hd), which makes the positive-feature
 * estimator unbiased (Choromanski et al. 2021, "Rethinking Attention with Performers").
 */
#ifndef VT_PERFORMER_FEATURES_H
#define VT_PERFORMER_FEATURES_H

#include <stdint.h>

/* Draw w (m, hd) of one head from the stream seeded by seed (same seed, same w).
 * QR by modified Gram-Schmidt in double; a (probability-zero) rank-deficient block
 * column is redrawn. */
void vt_performer_draw_head(float *w, int m, int hd, uint64_t seed);

/* Draw the features of a whole model, w (L, H, m, hd), for redraw number `index`
 * (0 = the initial draw): head (l, h) uses the seed
 * vt_rng_derive(vt_rng_derive(seed, VT_PERFORMER_STREAM, index), l, h), so a draw
 * depends only on (seed, index), not on when or how often it is made. */
#define VT_PERFORMER_STREAM 0x50455246ULL /* "PERF" */
void vt_performer_draw(float *w, int L, int H, int m, int hd, uint64_t seed, int64_t index);

#endif
