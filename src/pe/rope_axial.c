/* rope_axial.c - RoPE-Axial (position-encodings.md 2.2), pe.kind = rope_axial.
 * Each of the C axes owns k = floor(hd / (2C)) consecutive interleaved pairs (axis 0
 * first), pair a k + i of a head rotates by w_i r_a with w_i = theta^(-i / k)
 * (pe.theta, default 100); trailing hd/2 - C k pairs are not rotated. Fixed: no
 * parameters; one cos/sin table per forward shared by all layers, heads, q and k (per
 * sample only with RGB-D depth positions, whose scale pe.depth_scale is learnable). */
#include <stdlib.h>

#include "kinds.h"
#include "rotary.h"

typedef struct {
    float *freqs;       /* (npr, C), fixed */
    int npr;
    vt_tensor *cs;      /* (Ba, 1, Np, 2 npr) of the current forward (arena) */
} axial_state;

static void axial_resolve(const vt_pe_config *pe, int hd, vt_pe_config *def) {
    (void)pe;
    (void)hd;
    def->theta = VT_ROT_AXIAL_THETA;
}

static vt_status axial_check(const vt_pe_config *pe, int hd, const char *src) {
    vt_status st = vt_rot_check_pairs(pe, hd, src);
    return st ? st : vt_rot_check_axial(pe, hd, "", src);
}

static void axial_create(vt_pe *pe) {
    int C = pe->cfg.coord_dim;
    VT_ASSERT(pe->hd % 2 == 0 && pe->hd >= 2 * C && pe->cfg.theta > 0,
              "rope_axial: head dim %d, coord_dim %d, theta %g", pe->hd, C, pe->cfg.theta);
    axial_state *s = vt_xcalloc(1, sizeof *s);
    s->freqs = vt_xmalloc((size_t)(pe->hd / 2) * C * sizeof(float));
    s->npr = vt_rot_axial_freqs(pe->hd, C, pe->cfg.theta, s->freqs);
    pe->state = s;
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
    .kind = VT_PE_ROPE_AXIAL,
    .rotary = 1,
    .resolve = axial_resolve,
    .check = axial_check,
    .defaults_doc = "theta 100",
    .rules_doc = "an even head dim >= 2 coord_dim",
    .create = axial_create,
    .init = NULL,
    .prepare = axial_prepare,
    .apply_qk = axial_apply,
    .split_qkv = axial_split,
    .destroy = axial_destroy,
};
