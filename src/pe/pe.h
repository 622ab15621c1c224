/* pe.h - the position-encoding slot of the ViT (position-encodings.md).
 *
 * Owns: the interface between the model and every position encoding (PE), the absolute
 * part (APE: none | learned | sincos; its tables, sincos and the bicubic resampling of a
 * learned one that the checkpoint loader also uses, are src/pe/ape.c's) that any kind
 * may carry and the registry of rotary kinds. Does not own the flat parameter buffers (the model places
 * the PE's parameters in them) nor the attention itself.
 *
 * Life cycle, as vit.c drives it:
 *   vt_pe_create(pe, model)      (kinds.h) the PE declares its parameters (pe->params: names
 *                                "pos_embed" / "pe.*", checkpoint shapes; never decayed)
 *   the model binds each pe->params[i].t to a view into its flat params/grads buffers
 *   vt_pe_init_params(pe, rng)   draws the initial values (after binding)
 *   per forward:
 *     vt_pe_prepare(pe, t, rows, cols, images)   once, for the current patch grid:
 *                                anything that depends only on positions and parameters
 *                                is computed here (arena memory) and shared by the batch;
 *                                its backward, if any, is recorded on the tape here
 *     vt_pe_add_ape(pe, t, x)    after the CLS token is prepended (identity without APE)
 *     per layer l, around the qkv projection:
 *       vt_pe_fold_qkv(pe, t, l, &w, &b)   the projection's weights, possibly with a
 *                                position-independent per-head map folded in
 *       vt_pe_split_qkv(pe, t, l, qkv, &q, &k, &v)   the split into heads with the
 *                                kind's transform of q and k (token 0, CLS, never
 *                                rotated); by default vt_op_split_heads + vt_pe_apply_qk
 *   vt_pe_apply_qk(pe, t, l, &q, &k)   the transform itself on (B, H, N, hd) q and k;
 *                                rotary kinds replace *q / *k; none / ape leave them
 *                                untouched (no copy). The reference form: the tests
 *                                check every kind through it and the fused path against it.
 *   vt_pe_transforms_qk(pe)      0 for kinds that leave q and k as they are (none, ape):
 *                                the model then skips the split and attends straight
 *                                from the packed qkv (vt_op_attention_qkv).
 *
 * Kinds: every pe.kind (none and ape included) is one entry, a vt_pe_kind_ops defined in
 * its own file (none and ape, which have no hooks, in pe.c; rotary kinds in
 * src/pe/<kind>.c) with its
 * defaults (resolve) and rules (check), which resolve.c applies once per config, and the
 * hooks below. src/pe/kinds.h is the registry: it lists the entries, names them and
 * builds a PE of any kind (vt_pe_create); "Adding a kind" is there. The model (vit.c)
 * does not change.
 *
 * Grid: rows = cols = S / P for an S x S image (images are square). The training grid is
 * pe.train_img_size (or model.img_size) / P; a learned APE at another grid is resampled
 * (evaluation only: no gradient flows through the resampling, and a forward with
 * gradients enabled at a grid other than the training grid is a bug, asserted).
 */
#ifndef VT_PE_H
#define VT_PE_H

#include <stdint.h>

#include "model_spec.h"
#include "rng.h"
#include "status.h"
#include "tape.h"
#include "tensor.h"

#define VT_PE_MAX_PARAMS 8
#define VT_PE_MAX_DIMS 8

typedef struct vt_pe_param {
    char name[96];                 /* "pos_embed" or "pe.*" (position-encodings.md 4) */
    int ndim;                      /* checkpoint shape; may exceed VT_MAX_DIMS (the model's
                                      view then merges leading dims) */
    int64_t shape[VT_PE_MAX_DIMS];
    int64_t size;                  /* elements */
    vt_tensor *t;                  /* bound by the model: data/grad in the flat buffers */
} vt_pe_param;

struct vt_pe;

/* A position-encoding kind. Every hook may be NULL (nothing to do). */
typedef struct vt_pe_kind_ops {
    vt_pe_kind kind;    /* its pe.kind; the name is vt_pe_kind_name(kind) */
    int rotary;         /* transforms q and k by token position (section 2.2-2.6): such a
                           kind may carry an APE, take RGB-D depth and pe.coord_dim != 2 */
    /* Resolve time (resolve.c), on the pe section of a config, hd = model.width /
     * model.heads (0 if heads does not divide width):
     * resolve: the kind's defaults for keys a config leaves out. def arrives with the
     *   neutral ones (ape none, positions index, share none, theta 0, block_size 0); the
     *   hook overwrites those the kind has its own for, possibly from other keys of pe
     *   (cayley's theta follows pe.inner). */
    void (*resolve)(const vt_pe_config *pe, int hd, vt_pe_config *def);
    /* check: the kind's rules on the resolved section. A broken rule is VT_ERR_USAGE with
     *   a message that starts with src and names the key; below resolve the hooks that
     *   follow only assert them. */
    vt_status (*check)(const vt_pe_config *pe, int hd, const char *src);
    /* Its defaults and rules in words (the PE kinds table of configs/README.md). */
    const char *defaults_doc, *rules_doc;
    /* Declare parameters (vt_pe_declare), allocate pe->state. */
    void (*create)(struct vt_pe *pe);
    /* Initial values of the kind's (bound) parameters. */
    void (*init)(struct vt_pe *pe, vt_rng *rng);
    /* Per forward, after pe->rows/cols/positions are set; may record backward. */
    void (*prepare)(struct vt_pe *pe, vt_tape *t, const vt_tensor *images);
    /* q, k (B, H, N, hd): replace *q, *k by the transformed tensors for layer `layer`. */
    void (*apply_qk)(struct vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k);
    /* Optional fused form of apply_qk: split_qkv turns the projection's output qkv
     * (B, N, 3D) into q, k, v (B, H, N, hd), q and k transformed as apply_qk does (to
     * float rounding; with pe->dot_only only up to an orthogonal per-head basis shared
     * by all tokens); fold_qkv (only together with split_qkv) first replaces the layer's
     * qkv weights *w (3D, D) and bias *b (3D, or NULL) by ones with a per-head map folded
     * into the q and k rows (vt_op_qkv_fold), which split_qkv then accounts for. */
    void (*fold_qkv)(struct vt_pe *pe, vt_tape *t, int layer, vt_tensor **w, vt_tensor **b);
    void (*split_qkv)(struct vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q,
                      vt_tensor **k, vt_tensor **v);
    /* Zero the parameter entries the kind never reads (position-encodings.md 4: written
     * as 0, ignored on read); called after init and after a checkpoint load. */
    void (*clear_unused)(struct vt_pe *pe);
    void (*destroy)(struct vt_pe *pe);
} vt_pe_kind_ops;

typedef struct vt_pe {
    vt_pe_config cfg;              /* resolved pe section */
    vt_ape_kind ape;               /* absolute part: none | learned | sincos */
    int D, L, H, hd, P;
    int train_rows, train_cols;    /* patch grid at the training resolution */
    int rows, cols;                /* grid of the current forward (set by vt_pe_prepare) */
    int n_params;
    vt_pe_param params[VT_PE_MAX_PARAMS];
    int ape_param;                 /* index of "pos_embed" in params, or -1 */
    int depth_param;               /* index of "pe.depth_scale" (RGB-D: model.in_chans 4 with
                                      a rotary kind; shape (1), init 1), or -1 */
    double coord_offset[3];        /* added to every patch coordinate (x, y, z; after the
                                      position mode) by rotary kinds; 0 unless a caller
                                      places the grid elsewhere (e.g. a shifted crop) */
    int dot_only;                  /* the model uses q and k only through products q_n . k_m
                                      of one head (softmax attention, not Performer): the
                                      fused split may return them in another orthonormal
                                      basis per head, shared by all tokens */
    vt_tensor *ape_table;          /* (1, 1 + rows cols, D) of this forward, or NULL */
    const vt_pe_kind_ops *kind;    /* the entry of cfg.kind (never NULL) */
    void *state;                   /* the kind's private state */
} vt_pe;

/* Build the PE of a resolved pe section with its entry `kind` (of pe->kind; kinds.h's
 * vt_pe_create looks it up) for the model section `model`, of which it reads width D,
 * depth L, heads H, patch_size P, in_chans (RGB-D) and attention (dot_only). The rules
 * are resolve's: here they are asserted. */
vt_pe *vt_pe_build(const vt_pe_kind_ops *kind, const vt_pe_config *pe, const vt_model_config *model);
void vt_pe_free(vt_pe *pe);

/* The rule of the absolute part any kind may carry: pe.ape = sincos needs model.width
 * (D) divisible by 4. VT_ERR_USAGE with src and the key otherwise. */
vt_status vt_ape_check(const vt_pe_config *pe, int D, const char *src);

/* Declare one parameter (for kind create hooks): name, checkpoint shape. Returns its index. */
int vt_pe_declare(vt_pe *pe, const char *name, int ndim, const int64_t *shape);

/* Initialise every bound parameter: learned APE trunc_normal(0.02, [-2, 2]), then the
 * kind's init. */
void vt_pe_init_params(vt_pe *pe, vt_rng *rng);

/* Zero the entries of the kind's parameters that it never reads (the lower triangles
 * and diagonals of pe.cayley_u / pe.liere_u). They get no gradient, so once zero they
 * stay zero: the model calls this after init and after loading a checkpoint, and
 * saved checkpoints carry 0 there. */
void vt_pe_clear_unused(vt_pe *pe);

/* Per forward: set the grid (rows x cols patches), build the APE table of that grid
 * and run the kind's prepare. images (B, C, S, S) is passed for encodings that take
 * positions from the data (may be NULL otherwise). */
void vt_pe_prepare(vt_pe *pe, vt_tape *t, int rows, int cols, const vt_tensor *images);

/* x (B, 1 + rows cols, D) -> x + APE table (broadcast over B); x itself without APE. */
vt_tensor *vt_pe_add_ape(vt_pe *pe, vt_tape *t, vt_tensor *x);

/* Rotary transform of layer `layer` on q, k (B, H, N, hd); no-op for none / ape. */
void vt_pe_apply_qk(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k);
/* Whether the kind transforms q and k (has apply_qk or split_qkv). */
int vt_pe_transforms_qk(const vt_pe *pe);

/* The qkv projection's weights for layer `layer`: *w (3D, D) and *b (3D, or NULL) are
 * replaced by the kind's folded ones (vt_op_qkv_fold) or left as they are. Always pair
 * with vt_pe_split_qkv on the projection's output. */
void vt_pe_fold_qkv(vt_pe *pe, vt_tape *t, int layer, vt_tensor **w, vt_tensor **b);

/* qkv (B, N, 3D) from the projection with vt_pe_fold_qkv's weights -> q, k, v (B, H, N, hd)
 * with the kind's transform of q and k: the kind's fused split, or vt_op_split_heads and
 * vt_pe_apply_qk. */
void vt_pe_split_qkv(vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q, vt_tensor **k,
                     vt_tensor **v);

#endif
