/* model_spec.h - what defines a model: the config sections model, pe and performer, their
 * enumerations, and vt_model_spec, the three together.
 *
 * The layers below train / eval (vit.h, pe/) receive a vt_model_spec or one of its
 * sections, never the whole vt_config: the recipe, data, evaluation and runtime sections
 * are not theirs to read. config.h embeds these sections in vt_config and owns their
 * schema rows (config.c parses and checks them); resolve.h's vt_resolve_model_spec takes the spec out of a
 * resolved config, as vt_resolve_data_spec makes the data pipeline's view.
 *
 * Why a header of its own: the types alone, with no function of the config module, let
 * vit.h and pe/ name the sections without including config.h, so a layer below train /
 * eval cannot come to read the recipe, data or runtime keys, nor whether a key was given.
 */
#ifndef VT_MODEL_SPEC_H
#define VT_MODEL_SPEC_H

typedef enum { VT_POOL_TOKEN = 0, VT_POOL_AVG } vt_pool;
typedef enum { VT_ATTN_SOFTMAX = 0, VT_ATTN_PERFORMER } vt_attention_kind;
/* Position-encoding kinds, one X(enum value, id) each: id is its pe.kind name and names
 * its entry vt_pe_<id>_ops (src/pe/kinds.h generates the externs and the registry's rows
 * from this list; "Adding a kind" is there). */
#define VT_PE_KINDS(X)                                                                \
    X(VT_PE_NONE, none) X(VT_PE_APE, ape) X(VT_PE_ROPE_AXIAL, rope_axial)             \
    X(VT_PE_ROPE_MIXED, rope_mixed) X(VT_PE_CAYLEY, cayley)                           \
    X(VT_PE_CIRCULANT, circulant) X(VT_PE_LIERE, liere)                               \
    X(VT_PE_LIERE_COMMUTE, liere_commute)
#define VT_KIND_ENUM_(e, id) e,
typedef enum { VT_PE_KINDS(VT_KIND_ENUM_) VT_PE_KIND_COUNT } vt_pe_kind;
typedef enum { VT_APE_NONE = 0, VT_APE_LEARNED, VT_APE_SINCOS } vt_ape_kind;
typedef enum { VT_POS_INDEX = 0, VT_POS_NORMALIZED, VT_POS_INTERPOLATE } vt_pos_mode;
typedef enum { VT_SHARE_NONE = 0, VT_SHARE_LAYERS, VT_SHARE_HEADS, VT_SHARE_ALL } vt_share;
typedef enum { VT_INNER_MIXED = 0, VT_INNER_AXIAL } vt_inner;
typedef enum { VT_PEINIT_ROPE_MIXED = 0, VT_PEINIT_NORMAL } vt_pe_init;

typedef struct {
    char preset[64];        /* "" (custom) | vit_tiny | vit_small | vit_base | vit_large */
    int width, depth, heads;
    double mlp_ratio;
    int patch_size, img_size, in_chans, num_classes;
    vt_pool pool;
    double drop_rate, attn_drop_rate, drop_path;
    double layer_scale;     /* LayerScale init value; 0 = off */
    int qkv_bias;
    vt_attention_kind attention;
    int depth_as_channel;
} vt_model_config;

typedef struct {
    vt_pe_kind kind;
    vt_ape_kind ape;        /* resolved: the kind's default unless given */
    vt_pos_mode positions;
    vt_share share;
    double theta;           /* resolved: the kind's default when 0 (0 if the kind has none) */
    vt_inner inner;
    int block_size;         /* resolved: the kind's default when 0 (0 if the kind has none) */
    vt_pe_init init;
    double init_std, init_scale;
    int coord_dim;
    int train_img_size;     /* training resolution the grid is relative to (resolved) */
} vt_pe_config;

typedef struct {
    int features;
    int redraw_every;
    char kernel[32];        /* positive | relu */
} vt_performer_config;

/* The model a checkpoint's tensors depend on, plus the model section's training-time
 * rates (dropout, drop_path) the forward applies. Resolved: every value explicit. */
typedef struct vt_model_spec {
    vt_model_config model;
    vt_pe_config pe;
    vt_performer_config performer;
} vt_model_spec;

/* The MLP hidden width: int(width * mlp_ratio), truncated as timm does. resolve.c
 * rejects a config where it is below 1. */
static inline int vt_model_mlp_hidden(const vt_model_config *m) {
    return (int)(m->width * m->mlp_ratio);
}

#endif
