/* vit.c - the Vision Transformer (timm VisionTransformer semantics): parameter layout
 * in one flat buffer, initialisation, the forward through ops, FLOPs, checkpoints.
 *
 * Parameter order = timm's named_parameters(): cls_token, the PE's parameters
 * (pos_embed when learned; "pe.*" of rotary kinds), patch_embed.proj.{weight,bias},
 * per block i: norm1.{weight,bias}, attn.qkv.weight, attn.qkv.bias (model.qkv_bias),
 * attn.proj.{weight,bias}, ls1.gamma (layer_scale > 0), norm2.{weight,bias},
 * mlp.fc1.{weight,bias}, mlp.fc2.{weight,bias}, ls2.gamma; then norm.{weight,bias}
 * (pool token) or fc_norm.{weight,bias} (pool avg); head.{weight,bias}.
 *
 * Initialisation = timm's default ('' mode, init_weights_vit_timm):
 *   - every nn.Linear weight (qkv, proj, fc1, fc2, head): trunc_normal std 0.02 with
 *     ABSOLUTE bounds [-2, 2] (vt_rng_trunc_normal); Linear biases 0;
 *   - patch_embed.proj (Conv2d) keeps PyTorch's default: kaiming_uniform(a = sqrt(5)),
 *     i.e. weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C P P;
 *   - pos_embed trunc_normal std 0.02 (the PE's init); cls_token normal std 1e-6;
 *   - LayerNorm weight 1, bias 0; LayerScale gamma = model.layer_scale.
 * All draws come from one vt_rng stream seeded by `seed`, in parameter order (PE first).
 * Weight decay (decay = 1) applies to linear and conv weights only.
 *
 * Forward (B, C, S, S) -> (B, K):
 *   x = patch_embed(img) (B, Np, D); x = cat(cls, x) (B, N, D); x = x + APE; dropout;
 *   per block: x += drop_path(ls1(proj_drop(proj(attn(rope(split(qkv(norm1(x)))))))))
 *              x += drop_path(ls2(drop(fc2(drop(gelu(fc1(norm2(x))))))))
 *   pool token: norm on the CLS row; pool avg: mean over patch tokens then fc_norm;
 *   head_drop; head. LayerNorm eps 1e-6, attention scale hd^-0.5, drop_path rate of
 *   block i = drop_path * i / (L - 1) (torch.linspace(0, drop_path, L)).
 *   rope(split(qkv(.))) runs as the PE's fused form (pe.h): vt_pe_fold_qkv on the qkv
 *   weights, the projection, then vt_pe_split_qkv (the split with the PE's transform);
 *   with a PE that leaves q and k alone (none, ape) and softmax attention, attn(split(.))
 *   runs as vt_op_attention_qkv on qkv in place (bitwise the same, no q, k, v tensors).
 *   fc2(drop(gelu(.))) runs as vt_op_gelu_linear (bitwise the same values, gelu(.) not
 *   kept for backward) unless that dropout is active.
 *   qkv(norm1(.)) and fc1(norm2(.)) run as vt_op_layernorm_linear (likewise, norm not kept).
 *   Where ls and both drops are identities (residual_plain), x += drop_path(proj(.)) and
 *   x += drop_path(fc2(gelu(.))) run as vt_op_linear_add and vt_op_gelu_linear_add
 *   (bitwise the same, the sums made in place: no proj, fc2 or drop path output tensor).
 * attn is softmax attention, or with model.attention = performer vt_op_performer with this
 * layer's fixed random features (m->performer_w; drawn at init as draw 0 of
 * vt_performer_draw(seed), redrawn only by vt_vit_performer_step from the training loop,
 * saved and loaded as the checkpoint tensor "pe.performer_w" (L, H, m, hd)).
 * With in_chans 4 and !depth_as_channel only channels 0..2 enter the patch embedding
 * (the depth channel is for the PE).
 */
#include "vit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "ops/ops.h"
#include "pe/kinds.h"
#include "pe/pe.h"
#include "performer_features.h"

#define LN_EPS 1e-6f
#define PERFORMER_W "pe.performer_w" /* checkpoint name of the features */

typedef enum { INIT_ZERO, INIT_ONE, INIT_LAYER_SCALE, INIT_TRUNC, INIT_CLS, INIT_CONV, INIT_PE } init_kind;

/* The parameter list as declare_params builds it: each parameter's name, shape, place in
 * the flat buffer, initialisation and the named field (vt_vit, vt_vit_block or the PE's
 * vt_pe_param) that becomes its view once the buffers exist. */
typedef struct {
    vt_param *p;
    init_kind *init;
    vt_tensor ***field;
    int n, cap;
    int64_t total;
} layout;

static void add_param(layout *l, vt_tensor **field, const char *name, int ndim, const int64_t *shape,
                      int decay, init_kind init) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->p = vt_xrealloc(l->p, (size_t)l->cap * sizeof *l->p);
        l->init = vt_xrealloc(l->init, (size_t)l->cap * sizeof *l->init);
        l->field = vt_xrealloc(l->field, (size_t)l->cap * sizeof *l->field);
    }
    vt_param *p = &l->p[l->n];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    VT_ASSERT(ndim >= 1 && ndim <= 8, "parameter %s: bad ndim %d", name, ndim);
    p->ckpt_ndim = ndim;
    int64_t size = 1;
    for (int i = 0; i < ndim; i++) {
        p->ckpt_shape[i] = shape[i];
        size *= shape[i];
    }
    /* The view keeps the checkpoint shape up to 4 dims, else merges the leading dims. */
    int lead = ndim > VT_MAX_DIMS ? ndim - VT_MAX_DIMS + 1 : 1;
    p->t.ndim = ndim > VT_MAX_DIMS ? VT_MAX_DIMS : ndim;
    p->t.shape[0] = 1;
    for (int i = 0; i < lead; i++) p->t.shape[0] *= shape[i];
    for (int i = 1; i < p->t.ndim; i++) p->t.shape[i] = shape[lead + i - 1];
    p->t.size = size;
    p->decay = decay;
    p->offset = l->total;
    l->init[l->n] = init;
    l->field[l->n] = field;
    l->total += size;
    l->n++;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static void declare_block(layout *l, const vt_vit *m, int i, vt_vit_block *b) {
    char nm[96];
    int64_t D = m->D, Hd = m->mlp_hidden;
    int ls = m->spec.model.layer_scale > 0;
#define NAME(s) (snprintf(nm, sizeof nm, "blocks.%d.%s", i, s), nm)
    add_param(l, &b->norm1_w, NAME("norm1.weight"), 1, SHAPE(D), 0, INIT_ONE);
    add_param(l, &b->norm1_b, NAME("norm1.bias"), 1, SHAPE(D), 0, INIT_ZERO);
    add_param(l, &b->qkv_w, NAME("attn.qkv.weight"), 2, SHAPE(3 * D, D), 1, INIT_TRUNC);
    if (m->spec.model.qkv_bias) add_param(l, &b->qkv_b, NAME("attn.qkv.bias"), 1, SHAPE(3 * D), 0, INIT_ZERO);
    add_param(l, &b->proj_w, NAME("attn.proj.weight"), 2, SHAPE(D, D), 1, INIT_TRUNC);
    add_param(l, &b->proj_b, NAME("attn.proj.bias"), 1, SHAPE(D), 0, INIT_ZERO);
    if (ls) add_param(l, &b->ls1, NAME("ls1.gamma"), 1, SHAPE(D), 0, INIT_LAYER_SCALE);
    add_param(l, &b->norm2_w, NAME("norm2.weight"), 1, SHAPE(D), 0, INIT_ONE);
    add_param(l, &b->norm2_b, NAME("norm2.bias"), 1, SHAPE(D), 0, INIT_ZERO);
    add_param(l, &b->fc1_w, NAME("mlp.fc1.weight"), 2, SHAPE(Hd, D), 1, INIT_TRUNC);
    add_param(l, &b->fc1_b, NAME("mlp.fc1.bias"), 1, SHAPE(Hd), 0, INIT_ZERO);
    add_param(l, &b->fc2_w, NAME("mlp.fc2.weight"), 2, SHAPE(D, Hd), 1, INIT_TRUNC);
    add_param(l, &b->fc2_b, NAME("mlp.fc2.bias"), 1, SHAPE(D), 0, INIT_ZERO);
    if (ls) add_param(l, &b->ls2, NAME("ls2.gamma"), 1, SHAPE(D), 0, INIT_LAYER_SCALE);
#undef NAME
}

/* Every parameter in the order of the flat buffer (= timm's named_parameters(), see the
 * file header), each with the named field it binds to: the one place that says the
 * order, so checkpoints, the optimizer state and the parity fixtures follow from it. */
static void declare_params(layout *l, vt_vit *m) {
    int64_t D = m->D;
    add_param(l, &m->cls_token, "cls_token", 3, SHAPE(1, 1, D), 0, INIT_CLS);
    for (int i = 0; i < m->pe->n_params; i++) {
        vt_pe_param *pp = &m->pe->params[i];
        add_param(l, &pp->t, pp->name, pp->ndim, pp->shape, 0, INIT_PE);
    }
    add_param(l, &m->patch_w, "patch_embed.proj.weight", 4, SHAPE(D, m->embed_chans, m->P, m->P), 1, INIT_CONV);
    add_param(l, &m->patch_b, "patch_embed.proj.bias", 1, SHAPE(D), 0, INIT_CONV);
    for (int i = 0; i < m->L; i++) declare_block(l, m, i, &m->blocks[i]);
    int avg = m->spec.model.pool == VT_POOL_AVG;
    add_param(l, &m->norm_w, avg ? "fc_norm.weight" : "norm.weight", 1, SHAPE(D), 0, INIT_ONE);
    add_param(l, &m->norm_b, avg ? "fc_norm.bias" : "norm.bias", 1, SHAPE(D), 0, INIT_ZERO);
    add_param(l, &m->head_w, "head.weight", 2, SHAPE(m->num_classes, D), 1, INIT_TRUNC);
    add_param(l, &m->head_b, "head.bias", 1, SHAPE(m->num_classes), 0, INIT_ZERO);
}

/* The model's rules are resolve's (resolve.c): a spec reaching here satisfies them. */
static void assert_model_spec(const vt_model_spec *spec) {
    const vt_model_config *mc = &spec->model;
    VT_ASSERT(mc->width > 0 && mc->depth > 0 && mc->heads > 0 && mc->width % mc->heads == 0,
              "model width %d, depth %d, heads %d", mc->width, mc->depth, mc->heads);
    VT_ASSERT(mc->patch_size > 0 && mc->img_size > 0 && mc->img_size % mc->patch_size == 0,
              "model.img_size %d is not a multiple of model.patch_size %d", mc->img_size,
              mc->patch_size);
    VT_ASSERT(mc->in_chans == 1 || mc->in_chans == 3 || mc->in_chans == 4, "model.in_chans %d",
              mc->in_chans);
    VT_ASSERT(mc->num_classes > 0 && vt_model_mlp_hidden(mc) > 0,
              "model.num_classes %d, hidden width %g x %d", mc->num_classes, mc->mlp_ratio, mc->width);
    VT_ASSERT(mc->attention != VT_ATTN_PERFORMER || spec->performer.features > 0,
              "performer.features %d", spec->performer.features);
}

/* Dimensions, position encoding and parameter layout of spec's model (m->p, n_params,
 * the Performer sizes), without parameter memory; *init receives each parameter's
 * initialisation (malloc'd). */
static vt_status plan(vt_vit *m, const vt_model_spec *spec, init_kind **init) {
    memset(m, 0, sizeof *m);
    *init = NULL;
    assert_model_spec(spec);
    m->spec = *spec;
    const vt_model_config *mc = &spec->model;
    m->D = mc->width;
    m->L = mc->depth;
    m->H = mc->heads;
    m->hd = m->D / m->H;
    m->P = mc->patch_size;
    m->in_chans = mc->in_chans;
    m->embed_chans = (mc->in_chans == 4 && !mc->depth_as_channel) ? 3 : mc->in_chans;
    m->num_classes = mc->num_classes;
    m->img_size = mc->img_size;
    m->mlp_hidden = vt_model_mlp_hidden(mc);

    m->pe = vt_pe_create(&spec->pe, mc);

    layout l = {0};
    m->blocks = vt_xcalloc((size_t)m->L, sizeof *m->blocks);
    declare_params(&l, m);
    for (int i = 0; i < l.n; i++) *l.field[i] = &l.p[i].t; /* l.p is complete: views stay put */
    free(l.field);
    m->p = l.p;
    m->n_p = l.n;
    m->n_params = l.total;
    if (mc->attention == VT_ATTN_PERFORMER) {
        m->performer_m = spec->performer.features;
        m->performer_kernel = strcmp(spec->performer.kernel, "relu") == 0 ? VT_PERFORMER_RELU
                                                                          : VT_PERFORMER_POSITIVE;
    }
    *init = l.init;
    return VT_OK;
}

vt_status vt_vit_plan(vt_vit *m, const vt_model_spec *spec) {
    init_kind *init;
    vt_status st = plan(m, spec, &init);
    free(init);
    return st;
}

vt_status vt_vit_init(vt_vit *m, const vt_model_spec *spec, uint64_t seed) {
    layout l = {0};
    vt_status st = plan(m, spec, &l.init);
    if (st != VT_OK) return st;
    const vt_model_config *mc = &spec->model;
    size_t bytes = (size_t)m->n_params * sizeof(float);
    m->params = vt_aligned_alloc(bytes);
    /* calloc: zero without touching the pages (large blocks are fresh mappings), so a
     * model that only evaluates keeps no gradient memory resident. */
    m->grads = calloc((size_t)m->n_params, sizeof(float));
    if (!m->params || !m->grads) {
        free(l.init);
        vt_vit_free(m);
        return vt_fail(VT_ERR_RUNTIME, "out of memory: model parameters and gradients need 2 x %zu bytes",
                       bytes);
    }
    for (int i = 0; i < m->n_p; i++) {
        m->p[i].t.data = m->params + m->p[i].offset;
        m->p[i].t.grad = m->grads + m->p[i].offset;
    }

    m->seed = seed;
    if (m->performer_m > 0) {
        size_t fb = (size_t)m->L * m->H * m->performer_m * m->hd * sizeof(float);
        m->performer_w = vt_aligned_alloc(fb);
        if (!m->performer_w) {
            free(l.init);
            vt_vit_free(m);
            return vt_fail(VT_ERR_RUNTIME, "out of memory: performer features need %zu bytes", fb);
        }
        vt_performer_draw(m->performer_w, m->L, m->H, m->performer_m, m->hd, seed, 0);
    }

    vt_rng rng;
    vt_rng_seed(&rng, seed);
    vt_pe_init_params(m->pe, &rng);
    double conv_bound = 1.0 / sqrt((double)m->embed_chans * m->P * m->P);
    for (int i = 0; i < m->n_p; i++) {
        vt_tensor *t = &m->p[i].t;
        if (l.init[i] == INIT_PE) continue; /* drawn by vt_pe_init_params */
        for (int64_t j = 0; j < t->size; j++) {
            double v = 0.0;
            switch (l.init[i]) {
            case INIT_PE:
            case INIT_ZERO: v = 0.0; break;
            case INIT_ONE: v = 1.0; break;
            case INIT_LAYER_SCALE: v = mc->layer_scale; break;
            case INIT_TRUNC: v = vt_rng_trunc_normal(&rng, 0.02, -2.0, 2.0); break;
            case INIT_CLS: v = 1e-6 * vt_rng_normal(&rng); break;
            case INIT_CONV: v = conv_bound * (2.0 * vt_rng_uniform(&rng) - 1.0); break;
            }
            t->data[j] = (float)v;
        }
    }
    free(l.init);
    return VT_OK;
}

void vt_vit_free(vt_vit *m) {
    vt_pe_free(m->pe);
    free(m->blocks);
    free(m->p);
    free(m->params);
    free(m->grads);
    free(m->performer_w);
    memset(m, 0, sizeof *m);
}

/* Whether the MLP's dropout is active, so that gelu(fc1) is an activation of its own
 * (vt_op_gelu, then dropout, then fc2) instead of living inside vt_op_gelu_linear. */
static int mlp_dropout_active(const vt_vit *m, const vt_tape *t) {
    return t->training && m->spec.model.drop_rate > 0;
}

/* The drop path rate of block i (stochastic depth rising linearly over the blocks). */
static float block_drop_path(const vt_vit *m, int i) {
    return m->L > 1 ? (float)(m->spec.model.drop_path * i / (m->L - 1)) : 0.0f;
}

/* Whether the residual branches end in their products (proj, fc2) with at most a drop
 * path between them and the residual adds: no LayerScale, and dropout the identity (not
 * training, or a rate of 0). */
static int residual_plain(const vt_vit *m, int training) {
    return m->spec.model.layer_scale <= 0 && (!training || m->spec.model.drop_rate <= 0);
}

/* Whether block_forward splits qkv into q, k, v tensors (Performer, or a position
 * encoding that transforms q and k); else attention reads qkv in place. */
static int splits_qkv(const vt_vit *m) { return m->performer_m > 0 || vt_pe_transforms_qk(m->pe); }

/* Per image, the floats of the tensors one block creates inside its grad scope (their
 * gradients share the grad region; see below): qkv 3 N D, the split q/k/v 3 N D (with a
 * PE that transforms q and k, or Performer), the attention output N D (Performer: and
 * its merged copy), the residual sum N D, fc1's output N Dh (with MLP dropout also
 * gelu's and its dropout's); unless the residual branches are plain (residual_plain:
 * their products add in place, through the drop path), also proj's and fc2's outputs N D
 * each and after each one N D for each active dropout, LayerScale and DropPath.
 * `training`: dropout and DropPath run (the block with the most, the last). */
static double block_scope_grad_floats(const vt_vit *m, double N, int training) {
    const vt_model_config *mc = &m->spec.model;
    int drop = training && mc->drop_rate > 0, ls = mc->layer_scale > 0;
    int dp = training && mc->drop_path > 0 && m->L > 1;
    int plain = residual_plain(m, training);
    double nd = 3.0 + (splits_qkv(m) ? 3.0 : 0.0) + 1.0 + (m->performer_m > 0 ? 1.0 : 0.0) + 1.0 +
                (plain ? 0.0 : 2.0 + 2.0 * (drop + ls + dp));
    return nd * N * m->D + (drop ? 3.0 : 1.0) * N * m->mlp_hidden;
}

size_t vt_vit_grad_region_bytes(const vt_vit *m, int64_t B, int S, int training) {
    double N = 1.0 + (double)(S / m->P) * (S / m->P);
    double floats = (double)B * block_scope_grad_floats(m, N, training);
    return (size_t)(floats * sizeof(float)) + 16 * 64; /* + each tensor's rounding to 64 bytes */
}

/* One pre-norm block (see the file header). Everything but the block's output is
 * created inside a scope (tape.h): with gradients, those gradients live only during
 * this block's backward and share one region with every other block's; without, the
 * block's intermediate activations are given back once its output is computed. */
static vt_tensor *block_forward(vt_vit *m, vt_tape *t, int i, vt_tensor *x) {
    const vt_model_config *mc = &m->spec.model;
    const vt_vit_block *b = &m->blocks[i];
    float drop = (float)mc->drop_rate;
    float dpr = block_drop_path(m, i);

    /* the parameters are laid out in forward order: once the replay is back here, block
     * i's gradients and every later parameter's are final */
    vt_tape_mark_grads_final(t, b->norm1_w->data - m->params);
    vt_tape_scope_begin(t);
    vt_tensor *qkvw = b->qkv_w, *qkvb = b->qkv_b;
    vt_pe_fold_qkv(m->pe, t, i, &qkvw, &qkvb);
    vt_tensor *qkv = vt_op_layernorm_linear(t, x, b->norm1_w, b->norm1_b, LN_EPS, qkvw, qkvb);
    vt_tensor *a, *q, *k, *v;
    float scale = 1.0f / sqrtf((float)m->hd), attn_drop = (float)mc->attn_drop_rate;
    int keep = vt_attention_keep_probs((int)qkv->shape[1], m->hd, t->bf16);
    if (m->performer_w) {
        vt_pe_split_qkv(m->pe, t, i, qkv, &q, &k, &v);
        vt_performer_opts po = {(vt_performer_kernel)m->performer_kernel, VT_PERFORMER_EPS, 0.0f, 0.0f};
        a = vt_op_performer(t, q, k, v, m->performer_w + (size_t)i * m->H * m->performer_m * m->hd,
                            m->performer_m, &po);
        a = vt_op_merge_heads(t, a);
    } else if (vt_pe_transforms_qk(m->pe)) { /* writes the heads merged */
        vt_pe_split_qkv(m->pe, t, i, qkv, &q, &k, &v);
        a = vt_op_attention(t, q, k, v, scale, attn_drop, keep);
    } else { /* q and k as projected: straight from qkv, no split (bitwise the same) */
        a = vt_op_attention_qkv(t, qkv, m->H, scale, attn_drop, keep);
    }
    /* at most a drop path between a branch's last product and its residual add: the
     * fused ops add in place (bitwise the same, with one or two N D tensors and passes
     * fewer each) */
    int plain = residual_plain(m, t->training);
    if (plain) {
        x = vt_op_linear_add(t, a, b->proj_w, b->proj_b, dpr, x);
    } else {
        a = vt_op_linear(t, a, b->proj_w, b->proj_b);
        a = vt_op_dropout(t, a, drop);
        if (b->ls1) a = vt_op_mul_channels(t, a, b->ls1);
        a = vt_op_drop_path(t, a, dpr);
        x = vt_op_add(t, x, a);
    }

    vt_tensor *h = vt_op_layernorm_linear(t, x, b->norm2_w, b->norm2_b, LN_EPS, b->fc1_w, b->fc1_b);
    if (plain) { /* no MLP dropout either */
        vt_tape_scope_end(t);
        return vt_tape_scope_result(t, vt_op_gelu_linear_add(t, h, b->fc2_w, b->fc2_b, dpr, x));
    }
    if (mlp_dropout_active(m, t)) {
        h = vt_op_gelu(t, h);
        h = vt_op_dropout(t, h, drop);
        h = vt_op_linear(t, h, b->fc2_w, b->fc2_b);
    } else { /* no dropout between them: the fused op, which does not keep gelu(h) */
        h = vt_op_gelu_linear(t, h, b->fc2_w, b->fc2_b);
    }
    h = vt_op_dropout(t, h, drop);
    if (b->ls2) h = vt_op_mul_channels(t, h, b->ls2);
    h = vt_op_drop_path(t, h, dpr);
    vt_tape_scope_end(t);
    return vt_tape_scope_result(t, vt_op_add(t, x, h));
}

vt_tensor *vt_vit_forward(vt_vit *m, vt_tape *t, vt_tensor *images) {
    char sb[64];
    VT_ASSERT(images->ndim == 4 && images->shape[1] == m->in_chans && images->shape[2] == images->shape[3] &&
                  images->shape[2] > 0 && images->shape[2] % m->P == 0,
              "vit forward: images %s, expected (B, %d, S, S) with S a multiple of %d",
              vt_shape_str(images, sb, sizeof sb), m->in_chans, m->P);
    int64_t B = images->shape[0], S = images->shape[2];
    vt_tensor *img = images;
    if (m->embed_chans != m->in_chans) {
        int64_t shape[4] = {B, m->embed_chans, S, S};
        img = vt_tape_new(t, 0, 4, shape);
        size_t plane = (size_t)(S * S), per_in = plane * m->in_chans, per_out = plane * m->embed_chans;
        for (int64_t b = 0; b < B; b++)
            memcpy(img->data + b * per_out, images->data + b * per_in, per_out * sizeof(float));
    }
    vt_tensor *x = vt_op_patch_embed(t, img, m->patch_w, m->patch_b, m->P);
    x = vt_op_cat_cls(t, m->cls_token, x);
    int grid = (int)(S / m->P);
    vt_pe_prepare(m->pe, t, grid, grid, images);
    x = vt_pe_add_ape(m->pe, t, x);
    x = vt_op_dropout(t, x, (float)m->spec.model.drop_rate);
    if (t->grad_enabled) vt_tape_scope_reserve(t, vt_vit_grad_region_bytes(m, B, (int)S, t->training));
    for (int i = 0; i < m->L; i++) x = block_forward(m, t, i, x);

    vt_tape_mark_grads_final(t, m->norm_w->data - m->params);
    vt_tensor *feat = m->spec.model.pool == VT_POOL_AVG ? vt_op_mean_tokens(t, x, 1) : vt_op_select_token(t, x, 0);
    feat = vt_op_layernorm(t, feat, m->norm_w, m->norm_b, LN_EPS);
    feat = vt_op_dropout(t, feat, (float)m->spec.model.drop_rate);
    return vt_op_linear(t, feat, m->head_w, m->head_b);
}

/* Training memory per image in floats (analytic estimate), as block_forward keeps it:
 * activations kept for backward, per block the outputs of qkv (3), the split q/k/v (3;
 * none when attention reads qkv in place), attention (written merged; Performer's output
 * and its merge copy: 2), proj, residual, fc2 and the block output = 11 N D (8 without
 * the split, 12 with Performer; norm1 and norm2 are fused into qkv and fc1,
 * vt_op_layernorm_linear, and not kept), fc1 (N Dh; with MLP dropout
 * active also gelu's, 2 N Dh) and the attention state: softmax keeps the probabilities
 * H N N (and with attention dropout a byte mask, H N N / 4 in floats) when
 * vt_attention_keep_probs says so, else nothing N x N; Performer keeps phi(Q) and phi(K),
 * (H, N, m) each, and per head KV (m, hd), z (m) and den (N). Plus patch embedding, CLS
 * concat and position add (3 N D), the image's columns and the head (pooled features and
 * their norm, 2 D, and the logits, K). Gradient buffers: a block's internal ones live only
 * during its backward in the grad region (grad scopes, tape.h): one block's worth (the
 * block's activations but its output and the attention state), returned in
 * *region_floats; the others (the block outputs, L N D, the first 3 N D and the head's
 * 2 D + K) are in the arena with the activations and counted in the result. The dataset
 * and the evaluation buffers are not included (footprint.c adds them;
 * tests/e2e_info_memory.c checks the sum against real runs). */
double vt_vit_activation_floats(const vt_vit *m, int S, int bf16, double *region_floats) {
    const vt_model_config *mc = &m->spec.model;
    double N = 1.0 + (double)(S / m->P) * (S / m->P), D = m->D, H = m->H, K = m->num_classes;
    int performer = m->performer_m > 0;
    double pm = m->performer_m;
    double attn = performer ? H * (2.0 * N * pm + pm * m->hd + pm + N) /* Qf, Kf, KV, z, den */
                  : vt_attention_keep_probs((int)N, m->hd, bf16) ? H * N * N * (mc->attn_drop_rate > 0 ? 1.25 : 1.0)
                  : 0.0;
    double scoped = block_scope_grad_floats(m, N, 1); /* a training step's */
    /* dropout's byte masks: per block after proj, gelu and fc2; once after the position add */
    double masks = mc->drop_rate > 0 ? (m->L * (2.0 * N * D + N * m->mlp_hidden) + N * D) / 4.0 : 0.0;
    *region_floats = scoped;
    double grads = m->L * N * D + 3.0 * N * D + 2.0 * D + K; /* outside the scopes */
    double pre = (mc->drop_rate > 0 ? 4.0 : 3.0) * N * D; /* patch embedding, CLS, position add, dropout */
    return m->L * (scoped + N * D + attn) + pre + (double)m->in_chans * S * S + 2.0 * D + K + masks +
           grads;
}

/* Evaluation memory per image (no gradients), in floats: block_forward's scopes give each
 * block's intermediates back once its output exists, so the arena holds the patch
 * embedding's input columns and output, the CLS concat and position add (3 N D), every
 * block's output (L N D), the intermediates of the block being computed (its scoped
 * floats and its output; Performer's feature maps are per-thread scratch without
 * gradients) and the head (pooled features, norm, logits). */
double vt_vit_eval_floats(const vt_vit *m, int S) {
    double N = 1.0 + (double)(S / m->P) * (S / m->P), D = m->D;
    double span = block_scope_grad_floats(m, N, 0) + N * D;
    return (double)m->in_chans * S * S + 3.0 * N * D + m->L * N * D + span + 2.0 * D + m->num_classes;
}

double vt_vit_flops(const vt_vit *m, int S) {
    double D = m->D, Np = (double)(S / m->P) * (S / m->P), N = Np + 1;
    double f = 2.0 * Np * D * m->embed_chans * m->P * m->P;       /* patch embedding */
    double block = 2.0 * N * D * 3 * D                             /* qkv */
                   + (m->performer_m > 0 ? 2.0 * 4.0 * N * m->performer_m * D /* phi(q), phi(k), KV, out */
                                     : 2.0 * 2.0 * N * N * D)      /* q k^T and attn v */
                   + 2.0 * N * D * D                               /* proj */
                   + 2.0 * 2.0 * N * D * m->mlp_hidden;            /* fc1, fc2 */
    f += m->L * block;
    f += 2.0 * D * m->num_classes;                                 /* head */
    return f;
}

int vt_vit_performer_step(vt_vit *m, int64_t step) {
    int64_t R = m->spec.performer.redraw_every;
    if (!m->performer_w || R <= 0 || step <= 0 || step % R != 0) return 0;
    vt_performer_draw(m->performer_w, m->L, m->H, m->performer_m, m->hd, m->seed, step / R);
    return 1;
}

size_t vt_vit_largest_param(const vt_vit *m) {
    size_t n = 0;
    for (int i = 0; i < m->n_p; i++)
        if ((size_t)m->p[i].t.size > n) n = (size_t)m->p[i].t.size;
    return n;
}

vt_param *vt_vit_find(vt_vit *m, const char *name) {
    for (int i = 0; i < m->n_p; i++)
        if (strcmp(m->p[i].name, name) == 0) return &m->p[i];
    return NULL;
}

void vt_vit_zero_grad(vt_vit *m) { memset(m->grads, 0, (size_t)m->n_params * sizeof(float)); }

vt_status vt_vit_save(const vt_vit *m, const char *path, const char *config_json) {
    VT_ASSERT(config_json != NULL, "vt_vit_save: no config JSON for %s", path);
    int n = m->n_p + (m->performer_w ? 1 : 0);
    vt_st_tensor *ts = vt_xcalloc((size_t)n, sizeof *ts);
    for (int i = 0; i < m->n_p; i++) {
        snprintf(ts[i].name, sizeof ts[i].name, "%s", m->p[i].name);
        ts[i].ndim = m->p[i].ckpt_ndim;
        for (int d = 0; d < ts[i].ndim; d++) ts[i].shape[d] = m->p[i].ckpt_shape[d];
        ts[i].size = m->p[i].t.size;
        ts[i].data = m->p[i].t.data;
    }
    if (m->performer_w) {
        vt_st_tensor *f = &ts[m->n_p];
        snprintf(f->name, sizeof f->name, "%s", PERFORMER_W);
        f->ndim = 4;
        int64_t shape[4] = {m->L, m->H, m->performer_m, m->hd};
        memcpy(f->shape, shape, sizeof shape);
        f->size = shape[0] * shape[1] * shape[2] * shape[3];
        f->data = m->performer_w;
    }
    const char *keys[1] = {"config"};
    const char *vals[1] = {config_json};
    vt_status st = vt_st_write(path, ts, n, keys, vals, 1);
    free(ts);
    return st;
}

void vt_vit_batch_memory(const vt_vit *m, int S, double B, double floats_per_image, double *arena_bytes,
                         double *scratch_floats) {
    const double N = 1.0 + (double)(S / m->P) * (S / m->P);
    const double wide = m->mlp_hidden > m->D ? m->mlp_hidden : m->D;
    *arena_bytes = B * (floats_per_image + 2.0 * m->num_classes) * sizeof(float) * 1.125 + 1048576.0;
    *scratch_floats = B * N * wide;
}
