/* pe.c - the position-encoding slot: construction, parameter declaration and the
 * per-forward dispatch (APE part, then the kind's hooks), plus the entry of pe.kind =
 * none (no position information; pe.ape must stay none). With RGB-D input
 * (model.in_chans 4, also with depth_as_channel) every rotary kind gets the learnable
 * scalar pe.depth_scale (1), init 1, used by rotary.c's depth coordinate. The APE itself
 * (tables, resampling, sincos) lives in ape.c; the other kinds in their own files and the
 * registry in kinds.c (pe.h explains how to add one). */
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
    vt_ape_declare(pe);
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
    vt_ape_init(pe, rng);
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
    vt_ape_prepare(pe, t);
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
