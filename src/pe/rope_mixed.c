/* rope_mixed.c - RoPE-Mixed (position-encodings.md 2.3), pe.kind = rope_mixed.
 * Pair p of head h in layer l rotates by f_p . r with a learnable frequency vector per
 * pair: pe.freqs (L', H', hd/2, C), leading dims by pe.share (default none). Init per
 * (layer, head) set, in order l' then h', by vt_rot_mixed_init (theta = pe.theta,
 * default 10): C = 2 RoPE-ViT's (m_p (cos a, sin a) / m (-sin a, cos a), one alpha per
 * set), C != 2 random unit directions. Per forward, one cos/sin table per parameter
 * layer l' ((Ba, H', Np, hd)) shared by the batch, q and k; gradients reach pe.freqs
 * (and pe.depth_scale with RGB-D) through the angle op. */
#include <stdlib.h>

#include "kinds.h"
#include "rotary.h"

typedef struct {
    int Lp, Hp, fi;     /* sharing dims, index of pe.freqs in pe->params */
    vt_tensor **cs;     /* Lp tables of the current forward (arena) */
} mixed_state;

static void mixed_resolve(const vt_pe_config *pe, int hd, vt_pe_config *def) {
    (void)pe;
    (void)hd;
    def->theta = VT_ROT_MIXED_THETA;
}

static vt_status mixed_check(const vt_pe_config *pe, int hd, const char *src) {
    vt_status st = vt_rot_check_pairs(pe, hd, src);
    return st ? st : vt_rot_check_mixed_init(pe, hd, src);
}

static void mixed_create(vt_pe *pe) {
    int C = pe->cfg.coord_dim;
    VT_ASSERT(pe->hd % 2 == 0 && pe->hd >= 4 && (C != 2 || pe->hd % 4 == 0),
              "rope_mixed: head dim %d with coord_dim %d", pe->hd, C);
    mixed_state *s = vt_xcalloc(1, sizeof *s);
    vt_rot_share_dims(pe, &s->Lp, &s->Hp);
    int64_t shape[4] = {s->Lp, s->Hp, pe->hd / 2, C};
    s->fi = vt_pe_declare(pe, "pe.freqs", 4, shape);
    s->cs = vt_xcalloc((size_t)s->Lp, sizeof *s->cs);
    pe->state = s;
}

static void mixed_init(vt_pe *pe, vt_rng *rng) {
    mixed_state *s = pe->state;
    int C = pe->cfg.coord_dim, set = (pe->hd / 2) * C;
    VT_ASSERT(pe->cfg.theta > 0, "rope_mixed: theta %g", pe->cfg.theta);
    float *f = pe->params[s->fi].t->data;
    for (int i = 0; i < s->Lp * s->Hp; i++)
        vt_rot_mixed_init(pe->hd, C, pe->cfg.theta, rng, f + (size_t)i * set);
}

static void mixed_prepare(vt_pe *pe, vt_tape *t, const vt_tensor *images) {
    mixed_state *s = pe->state;
    int C = pe->cfg.coord_dim;
    vt_tensor *coords = vt_rot_coords(pe, t, images);
    int64_t per = (int64_t)s->Hp * (pe->hd / 2) * C, fshape[3] = {s->Hp, pe->hd / 2, C};
    for (int l = 0; l < s->Lp; l++) {
        vt_tensor *f = vt_rot_param_view(t, pe->params[s->fi].t, l * per, 3, fshape);
        s->cs[l] = vt_op_rot_cossin(t, vt_op_rot_angles(t, coords, f));
    }
}

static void mixed_apply(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k) {
    mixed_state *s = pe->state;
    vt_tensor *cs = s->cs[vt_rot_layer(pe, layer)];
    *q = vt_op_rot_pairs(t, *q, cs);
    *k = vt_op_rot_pairs(t, *k, cs);
}

static void mixed_split(vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q, vt_tensor **k,
                        vt_tensor **v) {
    mixed_state *s = pe->state;
    vt_op_rot_split_heads(t, qkv, pe->H, s->cs[vt_rot_layer(pe, layer)], NULL, q, k, v);
}

static void mixed_destroy(vt_pe *pe) {
    mixed_state *s = pe->state;
    if (s) free(s->cs);
    free(s);
    pe->state = NULL;
}

const vt_pe_kind_ops vt_pe_rope_mixed_ops = {
    .kind = VT_PE_ROPE_MIXED,
    .rotary = 1,
    .resolve = mixed_resolve,
    .check = mixed_check,
    .defaults_doc = "theta 10",
    .rules_doc = "an even head dim >= 4, divisible by 4 when coord_dim = 2",
    .create = mixed_create,
    .init = mixed_init,
    .prepare = mixed_prepare,
    .apply_qk = mixed_apply,
    .split_qkv = mixed_split,
    .destroy = mixed_destroy,
};
