/* pe.c - the position-encoding slot: construction, parameter declaration and the
 * per-forward dispatch (the absolute part, then the kind's hooks), the absolute part any
 * kind may carry (pe.ape: its parameter, initial values, per-grid table and rule), and
 * the entries of the two kinds without hooks of their own: pe.kind = none (no position
 * information; pe.ape must stay none) and ape (the absolute table alone). With RGB-D
 * input (model.in_chans 4, also with depth_as_channel) every rotary kind gets the
 * learnable scalar pe.depth_scale (1), init 1, used by rotary.c's depth coordinate. The
 * APE's tables (sincos, bicubic resampling) are ape.c's, below this file; the other kinds
 * live in their own files and the registry in kinds.c (pe.h explains how to add one). */
#include "pe.h"

#include <stdio.h>
#include <string.h>

#include "ape.h"
#include "ops/ops.h"

static vt_status none_check(const vt_pe_config *pe, int hd, const char *src) {
    (void)hd;
    if (pe->ape != VT_APE_NONE)
        return vt_fail(VT_ERR_USAGE, "%s: pe.ape = %s needs pe.kind = ape or a rotary kind; found "
                       "pe.kind = none", src, pe->ape == VT_APE_LEARNED ? "learned" : "sincos");
    return VT_OK;
}

const vt_pe_kind_ops vt_pe_none_ops = {
    .kind = VT_PE_NONE,
    .check = none_check,
    .defaults_doc = "-",
    .rules_doc = "pe.ape = none",
};

/* pe.kind = ape: the absolute table is the only PE; learned unless pe.ape says sincos
 * (the table's maths is ape.c's). */
static void ape_resolve(const vt_pe_config *pe, int hd, vt_pe_config *def) {
    (void)pe;
    (void)hd;
    def->ape = VT_APE_LEARNED;
}

static vt_status ape_check(const vt_pe_config *pe, int hd, const char *src) {
    (void)hd;
    if (pe->ape == VT_APE_NONE)
        return vt_fail(VT_ERR_USAGE, "%s: pe.kind = ape needs pe.ape = learned or sincos; found none",
                       src);
    return VT_OK;
}

const vt_pe_kind_ops vt_pe_ape_ops = {
    .kind = VT_PE_APE,
    .resolve = ape_resolve,
    .check = ape_check,
    .defaults_doc = "ape learned",
    .rules_doc = "pe.ape = learned or sincos",
};

vt_status vt_ape_check(const vt_pe_config *pe, int D, const char *src) {
    if (pe->ape == VT_APE_SINCOS && D % 4 != 0)
        return vt_fail(VT_ERR_USAGE, "%s: pe.ape = sincos needs model.width divisible by 4; found %d",
                       src, D);
    return VT_OK;
}

/* The absolute part every PE carries (pe.ape, any kind): its parameter, initial values
 * and the table of a forward. At the training grid a learned table is added as the
 * parameter itself (its gradient accumulates into the model's grads); at another grid
 * its patch part is resampled (ape.c), for evaluation only and not differentiable
 * (asserted: gradients enabled at a non-training grid is a bug). The sin-cos table is
 * rebuilt from integer positions on the current grid. Tables of a forward live in the
 * step arena. */
static void ape_declare(vt_pe *pe) {
    VT_ASSERT(pe->ape != VT_APE_SINCOS || pe->D % 4 == 0, "sincos APE with width %d", pe->D);
    if (pe->ape == VT_APE_LEARNED) {
        int64_t shape[3] = {1, 1 + (int64_t)pe->train_rows * pe->train_cols, pe->D};
        pe->ape_param = vt_pe_declare(pe, "pos_embed", 3, shape);
    }
}

static void ape_init(vt_pe *pe, vt_rng *rng) {
    if (pe->ape_param < 0) return;
    vt_tensor *t = pe->params[pe->ape_param].t;
    for (int64_t i = 0; i < t->size; i++) t->data[i] = (float)vt_rng_trunc_normal(rng, 0.02, -2.0, 2.0);
}

static void ape_prepare(vt_pe *pe, vt_tape *t) {
    pe->ape_table = NULL;
    int64_t n = (int64_t)pe->rows * pe->cols;
    int64_t shape[3] = {1, 1 + n, pe->D};
    if (pe->ape == VT_APE_LEARNED) {
        vt_tensor *p = pe->params[pe->ape_param].t;
        if (pe->rows == pe->train_rows && pe->cols == pe->train_cols) {
            pe->ape_table = p;
            return;
        }
        VT_ASSERT(!t->grad_enabled,
                  "learned pos_embed resampled to a %d x %d grid (training grid %d x %d) with "
                  "gradients enabled: resampling is for evaluation only",
                  pe->rows, pe->cols, pe->train_rows, pe->train_cols);
        vt_tensor *y = vt_tape_new(t, 0, 3, shape);
        memcpy(y->data, p->data, (size_t)pe->D * sizeof(float));
        vt_pe_resample_bicubic(p->data + pe->D, pe->train_rows, pe->train_cols, y->data + pe->D,
                               pe->rows, pe->cols, pe->D);
        pe->ape_table = y;
    } else if (pe->ape == VT_APE_SINCOS) {
        vt_tensor *y = vt_tape_new(t, 0, 3, shape);
        vt_pe_sincos_table(y->data, pe->rows, pe->cols, pe->D);
        pe->ape_table = y;
    }
}

vt_pe *vt_pe_build(const vt_pe_kind_ops *kind, const vt_pe_config *pc, const vt_model_config *model) {
    VT_ASSERT(kind != NULL && kind->kind == pc->kind, "PE entry for another pe.kind");
    int D = model->width, L = model->depth, H = model->heads, P = model->patch_size;
    int train_img = pc->train_img_size;
    VT_ASSERT(P > 0 && train_img > 0 && train_img % P == 0,
              "pe.train_img_size %d is not a positive multiple of model.patch_size %d (not resolved?)",
              train_img, P);
    VT_ASSERT(H > 0 && D % H == 0, "width %d not divisible by %d heads", D, H);
    vt_pe *pe = vt_xcalloc(1, sizeof *pe);
    pe->cfg = *pc;
    pe->ape = pc->ape;
    pe->D = D;
    pe->L = L;
    pe->H = H;
    pe->hd = D / H;
    pe->P = P;
    pe->train_rows = pe->train_cols = train_img / P;
    pe->rows = pe->train_rows;
    pe->cols = pe->train_cols;
    pe->ape_param = -1;
    pe->depth_param = -1;
    pe->kind = kind;
    pe->dot_only = model->attention == VT_ATTN_SOFTMAX;
    ape_declare(pe);
    if (kind->create) kind->create(pe);
    if (kind->rotary && model->in_chans == 4) {
        /* RGB-D: depth positions the tokens through z = mean depth * pe.depth_scale. */
        int64_t one = 1;
        pe->depth_param = vt_pe_declare(pe, "pe.depth_scale", 1, &one);
    }
    return pe;
}

void vt_pe_free(vt_pe *pe) {
    if (!pe) return;
    if (pe->kind->destroy) pe->kind->destroy(pe);
    free(pe);
}

int vt_pe_declare(vt_pe *pe, const char *name, int ndim, const int64_t *shape) {
    VT_ASSERT(pe->n_params < VT_PE_MAX_PARAMS, "too many PE parameters (max %d)", VT_PE_MAX_PARAMS);
    VT_ASSERT(ndim >= 1 && ndim <= VT_PE_MAX_DIMS, "PE parameter %s: bad ndim %d", name, ndim);
    vt_pe_param *p = &pe->params[pe->n_params];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->size = 1;
    for (int i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        p->size *= shape[i];
    }
    return pe->n_params++;
}

void vt_pe_init_params(vt_pe *pe, vt_rng *rng) {
    for (int i = 0; i < pe->n_params; i++)
        VT_ASSERT(pe->params[i].t != NULL, "PE parameter %s is not bound", pe->params[i].name);
    ape_init(pe, rng);
    if (pe->kind->init) pe->kind->init(pe, rng);
    if (pe->depth_param >= 0) pe->params[pe->depth_param].t->data[0] = 1.0f;
    vt_pe_clear_unused(pe);
}

void vt_pe_clear_unused(vt_pe *pe) {
    if (pe->kind->clear_unused) pe->kind->clear_unused(pe);
}

void vt_pe_prepare(vt_pe *pe, vt_tape *t, int rows, int cols, const vt_tensor *images) {
    VT_ASSERT(rows > 0 && cols > 0, "bad patch grid %d x %d", rows, cols);
    pe->rows = rows;
    pe->cols = cols;
    ape_prepare(pe, t);
    if (pe->kind->prepare) pe->kind->prepare(pe, t, images);
}

vt_tensor *vt_pe_add_ape(vt_pe *pe, vt_tape *t, vt_tensor *x) {
    if (!pe->ape_table) return x;
    VT_ASSERT(x->ndim == 3 && x->shape[1] == pe->ape_table->shape[1] && x->shape[2] == pe->D,
              "add_ape: x has %lld tokens of width %lld, the APE table %lld of %d",
              (long long)x->shape[1], (long long)x->shape[2], (long long)pe->ape_table->shape[1], pe->D);
    return vt_op_add(t, x, pe->ape_table);
}

void vt_pe_apply_qk(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k) {
    VT_ASSERT(layer >= 0 && layer < pe->L, "layer %d out of range [0, %d)", layer, pe->L);
    if (pe->kind->apply_qk) pe->kind->apply_qk(pe, t, layer, q, k);
}

int vt_pe_transforms_qk(const vt_pe *pe) {
    return pe->kind->apply_qk || pe->kind->split_qkv;
}

void vt_pe_fold_qkv(vt_pe *pe, vt_tape *t, int layer, vt_tensor **w, vt_tensor **b) {
    VT_ASSERT(layer >= 0 && layer < pe->L, "layer %d out of range [0, %d)", layer, pe->L);
    if (pe->kind->fold_qkv) pe->kind->fold_qkv(pe, t, layer, w, b);
}

void vt_pe_split_qkv(vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q, vt_tensor **k,
                     vt_tensor **v) {
    VT_ASSERT(layer >= 0 && layer < pe->L, "layer %d out of range [0, %d)", layer, pe->L);
    if (pe->kind->split_qkv) {
        pe->kind->split_qkv(pe, t, layer, qkv, q, k, v);
        return;
    }
    vt_op_split_heads(t, qkv, pe->H, q, k, v);
    vt_pe_apply_qk(pe, t, layer, q, k);
}
