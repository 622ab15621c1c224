/* rotary.h - shared infrastructure of the rotary position encodings
 * (position-encodings.md sections 1, 2.2-2.6): token coordinates, parameter sharing,
 * and the differentiable building blocks every rotary kind composes in its prepare /
 * apply_qk hooks. Owns no parameters except the RGB-D depth scale (declared by pe.c,
 * used here). The kinds themselves live in rope_axial.c, rope_mixed.c, cayley.c, ...
 *
 * Typical rotary kind (all position-only work once per forward, in prepare):
 *   prepare:  coords = vt_rot_coords(pe, t, images)              (Ba, Np, C)
 *             per parameter layer l' < L':
 *               ang  = vt_op_rot_angles(t, coords, freqs_l')     (Ba, G, Np, npr)
 *               cs   = vt_op_rot_cossin(t, ang)                  (Ba, G, Np, 2 npr)
 *   apply_qk: *q = vt_op_rot_pairs(t, *q, cs[vt_rot_layer(pe, layer)]), same for *k
 * The cos/sin table is computed once per forward and shared by the batch, by q and k
 * and (with share = layers / all) by every layer; gradients from q and k accumulate into
 * its grad and flow back once to the angles, then to the frequencies and depth scale.
 *
 * Shapes: B batch, H heads, N = 1 + Np tokens (token 0 = CLS, never transformed),
 * Np = rows * cols patches, hd head dim, C coordinate dims (pe.coord_dim), npr rotated
 * pairs (pairs p >= npr of a head are left untouched), G angle groups: 1 (shared by all
 * heads) or H (one per head), Ba: 1 (positions shared by the batch) or B (per sample:
 * RGB-D depth).
 */
#ifndef VT_PE_ROTARY_H
#define VT_PE_ROTARY_H

#include <stdint.h>

#include "pe.h"
#include "rng.h"
#include "tape.h"
#include "tensor.h"

/* ---- Parameter sharing (pe.share, position-encodings.md 1 and 4) ---- */

/* Leading dims (L', H') of every per-(layer, head) PE tensor: none (L, H), layers
 * (1, H), heads (L, 1), all (1, 1). */
void vt_rot_share_dims(const vt_pe *pe, int *Lp, int *Hp);
/* The parameter layer index l' used by model layer `layer`: layer, or 0 when shared. */
int vt_rot_layer(const vt_pe *pe, int layer);

/* A view (no copy) of `count` consecutive elements of a parameter starting at element
 * `offset`, shaped `shape` (ndim <= 4, product = count); data and grad (if the parameter
 * has one) point into the parameter's buffers, so gradients of ops on the view
 * accumulate into the parameter. Header in the tape's arena. */
vt_tensor *vt_rot_param_view(vt_tape *t, const vt_tensor *param, int64_t offset, int ndim,
                             const int64_t *shape);

/* Zero the entries of a parameter made of consecutive g x g blocks that a generator
 * U - U^T built from each block's strict upper triangle never reads (lower triangle and
 * diagonal of every block: pe.cayley_u with g = hd, pe.liere_u with g = pe.block_size),
 * so stray values there (e.g. from a checkpoint) are written back as 0
 * (position-encodings.md 4). u->size must be a multiple of g g. */
void vt_rot_clear_unused(vt_tensor *u, int g);

/* ---- Coordinates (position-encodings.md 1) ---- */

/* Batch dim Ba of the coordinates for `images`: B when positions are per sample (RGB-D:
 * the PE has pe.depth_scale and images is given; it must have 4 channels), else 1.
 * images may be NULL (then z = 0). */
int vt_rot_coords_batch(const vt_pe *pe, const vt_tensor *images);

/* Token coordinates of a rows x cols patch grid: out (Ba, Np, C), Np = rows cols, token n
 * = i cols + j (row i, column j, x fastest). C = pe->cfg.coord_dim.
 *   C = 2: (x, y) = (j, i).   C = 3: (x, y, z).   C = 1: the raster index r = i cols + j.
 * Position mode (pe.positions) scales x and y only (never z), with n_train the axis's grid
 * size at the training resolution (pe->train_cols for x, pe->train_rows for y):
 *   index:       unchanged;
 *   normalized:  x / max(train_cols - 1, 1),  y / max(train_rows - 1, 1);
 *   interpolate: x * train_cols / cols,       y * train_rows / rows.
 * C = 1 (our reading of "scale the raster index by the token counts"): the token counts
 * play the role of the axis sizes, Nt = train_rows train_cols and Np = rows cols:
 *   normalized: r / max(Nt - 1, 1);  interpolate: r * Nt / Np.
 * z (C = 3): with depth (the PE has pe.depth_scale and images are given; then the
 * positions are per sample, Ba = B, also for B = 1), the mean of the patch's
 * P x P pixels of image channel 3 (depth, as the loader gives it: unnormalised, after
 * the same spatial transforms as the image), times the current value of pe.depth_scale;
 * otherwise z = 0. Finally pe->coord_offset[c] is added to coordinate c (0 by default).
 * Computed in double, rounded to float once. */
void vt_pe_coords(const vt_pe *pe, int rows, int cols, const vt_tensor *images, float *out);

/* The same for the current grid (pe->rows x pe->cols) as a tensor of the tape: (Ba, Np, C).
 * Differentiable w.r.t. pe.depth_scale when z comes from depth (d depth_scale +=
 * sum over samples and patches of dz * mean depth); otherwise a constant. */
vt_tensor *vt_rot_coords(vt_pe *pe, vt_tape *t, const vt_tensor *images);

/* ---- Differentiable ops ---- */

/* Angles: ang[b, g, n, p] = sum_c coords[b, n, c] freqs[g, p, c].
 * coords (Ba, Np, C), freqs (G, npr, C) -> (Ba, G, Np, npr). Sums in double, the angle
 * rounded to float once (absolute error <= |ang| 2^-24). Backward to both (double sums in
 * a fixed order: deterministic for any thread count). */
vt_tensor *vt_op_rot_angles(vt_tape *t, vt_tensor *coords, vt_tensor *freqs);

/* cos/sin of every angle: ang (Ba, G, Np, npr) -> cs (Ba, G, Np, 2 npr) with
 * cs[..., 2p] = cos(ang[..., p]), cs[..., 2p + 1] = sin(ang[..., p]) (glibc cosf / sinf,
 * < 1 ulp). Backward: dang += cos dsin - sin dcos. */
vt_tensor *vt_op_rot_cossin(vt_tape *t, vt_tensor *ang);

/* Interleaved pair rotation of every patch token: x (B, H, N, hd), cs (Ba, G, N - 1, 2 npr)
 * with Ba in {1, B}, G in {1, H}, 2 npr <= hd. For token n >= 1, pair p < npr of head h of
 * sample b, with (c, s) = cs[b or 0, h or 0, n - 1, (2p, 2p + 1)]:
 *   (u, w) = (x[2p], x[2p + 1])  ->  (u c - w s, u s + w c).
 * Token 0 (CLS) and pairs p >= npr are copied unchanged. Returns a new (B, H, N, hd).
 * Backward: dx = rotation by the negative angle of dy; dc += u dy0 + w dy1,
 * ds += u dy1 - w dy0 (summed over the batch when Ba = 1 and over heads when G = 1,
 * in a fixed order). */
vt_tensor *vt_op_rot_pairs(vt_tape *t, vt_tensor *x, vt_tensor *cs);

/* Per-head matrix on every patch token: x (B, H, N, hd), m (G, hd, hd), G in {1, H}:
 * y[b, h, n] = m[h or 0] x[b, h, n] for n >= 1 (a GEMM X M^T per (b, h)); token 0 copied.
 * Backward: dx += dy M (patch tokens), dm[g] += sum of dy^T x over the
 * samples (and the heads when G = 1) in a fixed order. */
vt_tensor *vt_op_head_matmul(vt_tape *t, vt_tensor *x, vt_tensor *m);

/* ---- Fused q/k preparation (qkv_fused.c) ---- */

/* The q / k / v split with the rotation in the same pass: qkv (B, N, 3D) from the qkv
 * projection (layout of vt_op_split_heads), cs (Ba, G, N - 1, 2 npr) as for
 * vt_op_rot_pairs -> q, k, v (B, H, N, hd). Patch tokens' q and k are exactly
 * vt_op_rot_pairs(split(qkv), cs) (the same float operations, bitwise equal); v is copied.
 * Token 0 (CLS): q and k copied when cls is NULL; otherwise cls (Gc, hd, hd), Gc in
 * {1, H}, maps them to y = cls[h or 0]^T x (sums in float, ascending index): the undoing
 * of an orthogonal per-head map M = cls that vt_op_qkv_fold folded into the projection
 * for every token, so CLS leaves as M^T M x = x to float rounding (~hd ulp).
 * Backward: dqkv += the transposed maps; dcs as vt_op_rot_pairs; dcls[g] += x dy^T;
 * sums over samples, then heads, q before k (fixed order). */
void vt_op_rot_split_heads(vt_tape *t, vt_tensor *qkv, int H, vt_tensor *cs, vt_tensor *cls,
                           vt_tensor **q, vt_tensor **k, vt_tensor **v);

/* A per-head matrix folded into the qkv projection: w (3D, D_in) with rows q, k, v and
 * head h at rows [h hd, (h+1) hd) within each (timm layout), b (3D) or NULL, m (G, hd, hd),
 * G in {1, H}. w_out rows of q and k of head h = m[h or 0] w rows (one GEMM per (part,
 * head)), b_out likewise m b; v rows copied. So x w_out^T + b_out gives every token's q
 * and k already multiplied by m. Backward: dw += m^T dw_out, db += m^T db_out (q, k rows;
 * v rows: +=), dm[g] += dw_out w^T + db_out b^T summed over q then k and the heads of g. */
void vt_op_qkv_fold(vt_tape *t, vt_tensor *w, vt_tensor *b, vt_tensor *m, int H,
                    vt_tensor **w_out, vt_tensor **b_out);

/* Cayley transform (cayley.c): u (G, hd, hd) -> P (G, hd, hd), P = (I - S)(I + S)^(-1)
 * with S = U - U^T from the strict upper triangle of each u[g] (lower triangle and
 * diagonal are not read and get zero gradient). Inversion in double (Gauss-Jordan,
 * partial pivoting), P rounded to float. Backward: B = (I + S)^(-1), G = dP,
 * dS = -2 B^T G B^T, du_ij += dS_ij - dS_ji for i < j. */
vt_tensor *vt_op_cayley(vt_tape *t, vt_tensor *u);

/* ---- Rules (resolve time: the kinds' check hooks call these; messages start with src) ---- */

/* Every rotary kind: an even head dim (it rotates channel pairs). */
vt_status vt_rot_check_pairs(const vt_pe_config *pe, int hd, const char *src);
/* Frequencies from RoPE-Axial (rope_axial, cayley with inner = axial): a head dim of at
 * least 2 * pe.coord_dim (one pair per axis). variant follows the kind's name in the
 * message ("" or e.g. " (pe.inner = axial)"). */
vt_status vt_rot_check_axial(const vt_pe_config *pe, int hd, const char *variant, const char *src);
/* Frequencies from RoPE-Mixed's init (rope_mixed, cayley with inner = mixed, circulant
 * with init = rope_mixed): a head dim >= 4, divisible by 4 when pe.coord_dim = 2. */
vt_status vt_rot_check_mixed_init(const vt_pe_config *pe, int hd, const char *src);

/* ---- Frequencies ---- */

/* Default frequency bases (pe.theta): RoPE-Axial's fixed table (2.2) and RoPE-Mixed's init
 * (2.3); every kind whose frequencies come from one of them defaults to its base. */
#define VT_ROT_AXIAL_THETA 100.0
#define VT_ROT_MIXED_THETA 10.0

/* RoPE-Axial frequencies (2.2) as a vt_op_rot_angles table: out (npr, C), npr = C k,
 * k = floor(hd / (2C)); row a k + i (axis a, i < k) holds w_i = theta^(-i / k) in
 * column a and 0 elsewhere (pairs >= npr are not rotated). Returns npr. */
int vt_rot_axial_freqs(int hd, int C, double theta, float *out);

/* RoPE-Mixed initial frequencies (2.3) of one (layer, head) set: out (hd/2, C).
 * Magnitudes m_i = theta^(-4 i / hd), i < hd/4.
 *   C = 2: alpha ~ U[0, 2 pi) (one vt_rng_uniform draw); pair p < hd/4 gets
 *          m_p (cos alpha, sin alpha), pair p >= hd/4 gets m_{p - hd/4} (-sin alpha, cos alpha).
 *   C != 2: pair p gets m_{p mod (hd/4)} times a unit direction: C normal draws
 *          (vt_rng_normal) normalised, drawn pair by pair; for C = 1 the direction is
 *          a random sign (vt_rng_uniform < 0.5 -> -1, else +1).
 * With hd/2 not a multiple of hd/4 (hd % 4 == 2, only allowed when C != 2) the pair
 * index wraps with p mod floor(hd/4). Returns alpha for C = 2 (0 otherwise). */
double vt_rot_mixed_init(int hd, int C, double theta, vt_rng *rng, float *out);

#endif
