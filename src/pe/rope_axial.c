/* rope_axial.c - RoPE-Axial (position-encodings.md 2.2), pe.kind = rope_axial.
 * Each of the C axes owns k = floor(hd / (2C)) consecutive interleaved pairs (axis 0
 * first), pair a k + i of a head rotates by w_i r_a with w_i = theta^(-i / k)
 * (pe.theta, default 100); trailing hd/2 - C k pairs are not rotated. Fixed: no
 * parameters; one cos/sin table per forward shared by all layers, heads, q and k (per
 * sample only with RGB-D depth positions, whose scale pe.depth_scale is learnable). */
#include <stdlib.h>

#include "rotary.h"

typedef struct {
    float *freqs;       /* (npr, C), fixed */
    int npr;
    vt_tensor *cs;      /* (Ba, 1, Np, 2 npr) of the current forward (arena) */
} axial_state;

static vt_status axial_create(vt_pe *pe) {
    int C = pe->cfg.coord_dim;
    if (pe->hd % 2 != 0 || pe->hd < 2 * C)
        return vt_fail(VT_ERR_USAGE,
                       "pe.kind: rope_axial with pe.coord_dim = %d needs an even head dim >= %d, found %d",
                       C, 2 * C, pe->hd);
    axial_state *s = vt_xcalloc(1, sizeof *s);
    double theta = pe->cfg.theta > 0 ? pe->cfg.theta : 100.0;
    s->freqs = vt_xmalloc((size_t)(pe->hd / 2) * C * sizeof(float));
    s->npr = vt_rot_axial_freqs(pe->hd, C, theta, s->freqs);
    pe->state = s;
    return VT_OK;
}

static void axial_prepare(vt_pe *pe, vt_tape *t, const vt_tensor *images) {
    axial_state *s = pe->state;
    vt_tensor *coords = vt_rot_coords(pe, t, images);
    int64_t fshape[3] = {1, s->npr, pe->cfg.coord_dim};
    vt_tensor *f = vt_tensor_wrap(t->arena, s->freqs, 3, fshape);
    s->cs = vt_op_rot_cossin(t, vt_op_rot_angles(t, coords, f));
}

static void axial_apply(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k) {
    (void)layer;
    axial_state *s = pe->state;
    *q = vt_op_rot_pairs(t, *q, s->cs);
    *k = vt_op_rot_pairs(t, *k, s->cs);
}

static void axial_split(vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q, vt_tensor **k,
                        vt_tensor **v) {
    (void)layer;
    axial_state *s = pe->state;
    vt_op_rot_split_heads(t, qkv, pe->H, s->cs, NULL, q, k, v);
}

static void axial_destroy(vt_pe *pe) {
    axial_state *s = pe->state;
    if (s) free(s->freqs);
    free(s);
    pe->state = NULL;
}

const vt_pe_kind_ops vt_pe_rope_axial_ops = {
    .name = "rope_axial",
    .create = axial_create,
    .init = NULL,
    .prepare = axial_prepare,
    .apply_qk = axial_apply,
    .split_qkv = axial_split,
    .destroy = axial_destroy,
};
