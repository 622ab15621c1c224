/* vit.h - the Vision Transformer: parameter layout, initialisation, forward through
 * ops, checkpoint names. timm VisionTransformer semantics (position-encodings.md
 * section 4 for names and layouts).
 *
 * All parameters live in ONE flat buffer (and their gradients in one more), in a
 * fixed order; each vt_param is a named view. The optimizer, zero-grad, clipping and
 * checkpoints are single loops over that list. The position encoding (src/pe/) owns
 * its parameters, which are views into the same buffer under names "pe.*" (and
 * "pos_embed" for a learned APE).
 */
#ifndef VT_VIT_H
#define VT_VIT_H

#include <stdint.h>

#include "model_spec.h"
#include "status.h"
#include "tape.h"
#include "tensor.h"

struct vt_pe;

typedef struct vt_param {
    char name[96];       /* timm name, e.g. "blocks.3.attn.qkv.weight" */
    vt_tensor t;         /* data -> params buffer, grad -> grads buffer */
    int decay;           /* 1: weight decay applies (linear/conv weights only) */
    int64_t offset;      /* element offset of t.data in the flat buffer */
    int ckpt_ndim;       /* shape in checkpoints: t's shape, except PE parameters of more
                            than 4 dims, whose view t merges the leading dims */
    int64_t ckpt_shape[8];
} vt_param;

/* One block's parameters, named views into the flat buffers (optional ones NULL). */
typedef struct vt_vit_block {
    vt_tensor *norm1_w, *norm1_b;   /* norm1 (D) */
    vt_tensor *qkv_w, *qkv_b;       /* attn.qkv (3D, D), (3D); qkv_b NULL without qkv_bias */
    vt_tensor *proj_w, *proj_b;     /* attn.proj (D, D), (D) */
    vt_tensor *ls1;                 /* ls1.gamma (D); NULL without layer_scale */
    vt_tensor *norm2_w, *norm2_b;   /* norm2 (D) */
    vt_tensor *fc1_w, *fc1_b;       /* mlp.fc1 (mlp_hidden, D), (mlp_hidden) */
    vt_tensor *fc2_w, *fc2_b;       /* mlp.fc2 (D, mlp_hidden), (D) */
    vt_tensor *ls2;                 /* ls2.gamma (D); NULL without layer_scale */
} vt_vit_block;

typedef struct vt_vit {
    vt_model_spec spec;  /* the resolved model, PE and Performer sections it was built from */
    int D, L, H, hd, P;  /* width, depth, heads, head dim, patch */
    int in_chans, embed_chans, num_classes;
    int img_size;        /* training resolution */
    float *params, *grads;
    int64_t n_params;    /* elements in params/grads */
    vt_param *p;         /* every parameter, in flat-buffer order */
    int n_p;
    /* The same parameters by name (vit.c's declare_params is the one place that gives
     * their order); the position encoding's are in pe->params. */
    vt_tensor *cls_token;              /* (1, 1, D) */
    vt_tensor *patch_w, *patch_b;      /* patch_embed.proj (D, embed_chans, P, P), (D) */
    vt_vit_block *blocks;              /* L */
    vt_tensor *norm_w, *norm_b;        /* final norm (D): "norm" (pool token) or "fc_norm" (pool avg) */
    vt_tensor *head_w, *head_b;        /* head (num_classes, D), (num_classes) */
    struct vt_pe *pe;
    int mlp_hidden;      /* int(mlp_ratio * D), as timm */
    /* Performer attention (model.attention = performer): the fixed random features
     * w (L, H, m, hd) (src/performer_features.h), saved in checkpoints as
     * "pe.performer_w". Not a parameter: outside the flat buffers, no gradient, no decay,
     * never touched by the optimizer. NULL with softmax attention. */
    float *performer_w;
    int performer_m;      /* performer.features; 0 with softmax attention */
    int performer_kernel; /* vt_performer_kernel (ops.h) */
    uint64_t seed;        /* the init seed; feature redraws derive from (seed, redraw index) */
} vt_vit;

/* Build the model of spec (resolved: resolve.h's vt_resolve_model_spec of a config) and
 * initialise it as timm does (truncated normal 0.02 for linear/conv weights and APE, zero
 * biases, LayerNorm ones/zeros, CLS std 1e-6, PE inits per position-encodings.md), drawing
 * from a stream seeded by seed. */
vt_status vt_vit_init(vt_vit *m, const vt_model_spec *spec, uint64_t seed);
void vt_vit_free(vt_vit *m);
/* The model of spec without its memory: dimensions, position encoding, the parameter
 * layout (m->p names and shapes, no data) and n_params, all vt_vit_flops and
 * vt_vit_activation_floats need; for `vitrain info` on models too large to allocate.
 * Errors as vt_vit_init's; release with vt_vit_free. */
vt_status vt_vit_plan(vt_vit *m, const vt_model_spec *spec);

/* Forward: images (B, in_chans, S, S) with S % P == 0 (S may differ from the training
 * size: positions/APE follow pe.positions and APE resampling). Returns logits
 * (B, num_classes). With t->grad_enabled the step is recorded for backward, and
 * parameter gradients accumulate into m->grads on vt_tape_backward. */
vt_tensor *vt_vit_forward(vt_vit *m, vt_tape *t, vt_tensor *images);

/* Forward FLOPs per image at image size S (multiply-add = 2 FLOPs; GEMMs and attention
 * products only). Training step FLOPs are taken as 3x this. */
double vt_vit_flops(const vt_vit *m, int S);
/* Training memory per image at image size S, in floats (analytic, vit.c): the step's
 * arena (activations kept for backward and the gradients outside grad scopes; returned)
 * and its grad region (*region_floats). bf16: the step runs with train.precision = bf16,
 * which decides whether attention keeps its probabilities (vt_attention_keep_probs). For
 * `vitrain info`, and for the training loop's arena, sized before the first step. */
double vt_vit_activation_floats(const vt_vit *m, int S, int bf16, double *region_floats);
/* The grad region (tape.h grad scopes) a forward with gradients of B images at size S
 * reserves, in bytes; training: dropout and DropPath run. */
size_t vt_vit_grad_region_bytes(const vt_vit *m, int64_t B, int S, int training);
/* Evaluation memory per image at image size S, in floats (analytic, vit.c): what a
 * forward without gradients holds at its peak. For `vitrain info`, and for the evaluator's
 * arena, sized before the first evaluation. */
double vt_vit_eval_floats(const vt_vit *m, int S);
/* The memory a batch of B images at S x S needs beyond the weights, given the floats one
 * image's forward keeps (vt_vit_activation_floats or vt_vit_eval_floats): *arena_bytes
 * for those floats and the loss's 2 K per image, with 1/8 and 1 MiB more for what the
 * estimate leaves out (tensor headers, op records); *scratch_floats for the fused ops'
 * one (B N, max(D, Dh)) buffer (layernorm_linear, gelu_linear). */
void vt_vit_batch_memory(const vt_vit *m, int S, double B, double floats_per_image, double *arena_bytes,
                         double *scratch_floats);

/* Performer feature redraw hook, called by the training loop before optimizer step
 * `step` (0-based) runs: when performer.redraw_every = R > 0, step > 0 and R | step, the
 * features become draw number step / R of vt_performer_draw(seed). Returns 1 if it
 * redrew, else 0 (always 0 with softmax attention). Evaluation never calls it: the
 * features of a loaded checkpoint are used as saved. */
int vt_vit_performer_step(vt_vit *m, int64_t step);

/* Parameter by name, or NULL. */
vt_param *vt_vit_find(vt_vit *m, const char *name);
/* The largest parameter's size in floats: that of the largest weight, and weight gradient
 * (the GEMM buffers, ops/par.h vt_gemm_reserve). */
size_t vt_vit_largest_param(const vt_vit *m);
void vt_vit_zero_grad(vt_vit *m);

/* Checkpoint: every parameter under its name as float32 safetensors (and the Performer
 * features as "pe.performer_w"), with __metadata__["config"] = config_json, the resolved
 * config's JSON (vt_config_to_json) from the caller that owns the config (not NULL).
 * Atomic (tmp + rename). */
vt_status vt_vit_save(const vt_vit *m, const char *path, const char *config_json);

#endif
