/* config.h - the typed, resolved configuration.
 *
 * config.c is the only cJSON user: one schema table (name, type, default, range or
 * choices, help) drives parsing, defaults, validation, --set overrides, the resolved
 * JSON dump, `vitrain help-config` and configs/README.md. Every field below has one
 * row in that table under "section.key". Enumerations are parsed from strings.
 *
 * Sections: model, pe, performer, data, optim, train, eval, runtime.
 */
#ifndef VT_CONFIG_H
#define VT_CONFIG_H

#include "status.h"

#define VT_STR 512
#define VT_MAX_RES 16
#define VT_CONFIG_MAX_KEYS 128 /* capacity of vt_config.set (schema rows) */

typedef enum { VT_POOL_TOKEN = 0, VT_POOL_AVG } vt_pool;
typedef enum { VT_ATTN_SOFTMAX = 0, VT_ATTN_PERFORMER } vt_attention_kind;
typedef enum {
    VT_PE_NONE = 0, VT_PE_APE, VT_PE_ROPE_AXIAL, VT_PE_ROPE_MIXED, VT_PE_CAYLEY,
    VT_PE_CIRCULANT, VT_PE_LIERE, VT_PE_LIERE_COMMUTE
} vt_pe_kind;
typedef enum { VT_APE_NONE = 0, VT_APE_LEARNED, VT_APE_SINCOS } vt_ape_kind;
typedef enum { VT_POS_INDEX = 0, VT_POS_NORMALIZED, VT_POS_INTERPOLATE } vt_pos_mode;
typedef enum { VT_SHARE_NONE = 0, VT_SHARE_LAYERS, VT_SHARE_HEADS, VT_SHARE_ALL } vt_share;
typedef enum { VT_INNER_MIXED = 0, VT_INNER_AXIAL } vt_inner;
typedef enum { VT_PEINIT_ROPE_MIXED = 0, VT_PEINIT_NORMAL } vt_pe_init;
typedef enum { VT_DATA_IDX = 0, VT_DATA_SYNTHETIC, VT_DATA_IMAGEFOLDER, VT_DATA_CIFAR10,
               VT_DATA_CIFAR100 } vt_data_kind;
typedef enum { VT_ONERR_FAIL = 0, VT_ONERR_SKIP } vt_on_error;
typedef enum { VT_TT_AUTO = 0, VT_TT_SIMPLE, VT_TT_RRC } vt_train_transform;
typedef enum { VT_INTERP_BILINEAR = 0, VT_INTERP_BICUBIC } vt_interp;
typedef enum { VT_REMODE_PIXEL = 0, VT_REMODE_CONST } vt_remode;
typedef enum { VT_OPT_ADAMW = 0, VT_OPT_SGD } vt_optim_name;
typedef enum { VT_SCHED_COSINE = 0, VT_SCHED_CONSTANT } vt_schedule;
typedef enum { VT_PROGRESS_AUTO = 0, VT_PROGRESS_ALWAYS, VT_PROGRESS_NEVER } vt_progress;

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
    vt_ape_kind ape;        /* with kind = ape: learned unless set; with rotary kinds: none unless set */
    vt_pos_mode positions;
    vt_share share;
    double theta;           /* 0 = the kind's default (axial 100, mixed 10) */
    vt_inner inner;
    int block_size;         /* 0 = the kind's default (circulant 16, liere hd) */
    vt_pe_init init;
    double init_std, init_scale;
    int coord_dim;
    int train_img_size;     /* training resolution the grid is relative to; 0 = model.img_size */
} vt_pe_config;

typedef struct {
    int features;
    int redraw_every;
    char kernel[32];        /* positive | relu */
} vt_performer_config;

typedef struct {
    vt_data_kind kind;
    char root[VT_STR];
    char train_split[64], val_split[64];
    double mean[3], std[3];
    int workers;
    vt_on_error on_error;
    char class_list[VT_STR]; /* imagefolder: file naming the classes in index order; "" = folders */
    char label[16];         /* cifar100: fine | coarse */
    int train_size, val_size; /* synthetic dataset sizes */
    int synthetic_seed;
    int synthetic_depth_label; /* synthetic RGB-D: label needs the depth map (pairs of classes
                                  share the RGB pattern, depth bump vs dent tells them apart) */
    double crop_pct;
    double hflip;
    vt_train_transform train_transform; /* auto: rrc for imagefolder, simple otherwise */
    vt_interp interpolation;
    double scale[2], ratio[2];  /* RandomResizedCrop area fraction and aspect ranges */
    char auto_augment[64];      /* timm RandAugment string, "" = off */
    double mixup, cutmix, mixup_prob, mixup_switch_prob;
    double reprob;              /* random erasing probability */
    vt_remode remode;
} vt_data_config;

typedef struct {
    vt_optim_name name;
    double lr, min_lr, weight_decay;
    double betas[2];
    double eps, momentum;
    double warmup_epochs;
    int warmup_steps;
    double warmup_lr;
    vt_schedule schedule;
    double clip_grad;       /* 0 = off */
} vt_optim_config;

typedef struct {
    int epochs;
    int steps;              /* > 0 overrides epochs */
    int batch_size, accum_steps;
    double label_smoothing;
    long long seed;
    int threads;            /* 0 = all cores */
    int eval_every;         /* epochs; 0 = only at the end */
    int eval_every_steps;   /* optimizer steps; 0 = off */
    int ckpt_every;         /* epochs */
    int log_every;          /* optimizer steps between metric lines */
    char run_dir[VT_STR];
} vt_train_config;

typedef struct {
    int batch_size;
    int resolutions[VT_MAX_RES]; /* extra evaluation image sizes; n_resolutions used */
    int n_resolutions;
} vt_eval_config;

typedef struct {
    vt_progress progress;
} vt_runtime_config;

typedef struct vt_config {
    vt_model_config model;
    vt_pe_config pe;
    vt_performer_config performer;
    vt_data_config data;
    vt_optim_config optim;
    vt_train_config train;
    vt_eval_config eval;
    vt_runtime_config runtime;
    char source[VT_STR];    /* path the config came from ("" if built in code) */
    /* set[i] != 0: schema row i was given explicitly (config file or --set). Keys left
     * unset get their preset / kind-dependent default in vt_config_validate. */
    unsigned char set[VT_CONFIG_MAX_KEYS];
} vt_config;

/* Defaults for every key (timm ViT-B/16 + DeiT recipe; a valid config on its own:
 * imagefolder data under data/imagenet). Clears the explicitly-set record. */
void vt_config_defaults(vt_config *c);
/* Parse a JSON file over the defaults, then validate. Errors name the file and the
 * JSON path ("model.heads"), what was expected and found, and suggest the nearest
 * valid key for unknown ones. Returns VT_ERR_USAGE on a bad config, VT_ERR_RUNTIME if
 * the file cannot be read. */
vt_status vt_config_load(vt_config *c, const char *path);
/* Same from a JSON string (source names it in messages). */
vt_status vt_config_parse(vt_config *c, const char *json, const char *source);
/* Apply one "--set section.key=value" override (value parsed as JSON if it parses,
 * else as a string). Call vt_config_validate afterwards. */
vt_status vt_config_set(vt_config *c, const char *assignment);
/* Load path (NULL: start from the defaults), apply n_sets "--set" assignments, then
 * validate once, so an override may repair a file that is invalid on its own. */
vt_status vt_config_load_overrides(vt_config *c, const char *path,
                                   const char *const *sets, int n_sets);
/* 1 if the key ("pe.theta") was given explicitly, 0 if not; -1 for an unknown key. */
int vt_config_is_set(const vt_config *c, const char *key);
/* Cross-field validation and preset expansion (heads divide width, patch divides
 * img_size, even head dim, PE constraints...). */
vt_status vt_config_validate(vt_config *c);
/* The resolved config as pretty JSON (malloc'd; caller frees). */
char *vt_config_to_json(const vt_config *c);
/* Markdown documentation of every key (malloc'd): configs/README.md is this text. */
char *vt_config_doc_markdown(void);
/* Plain-text key list for --help (malloc'd). */
char *vt_config_doc_text(void);

/* Enum <-> string for messages and metadata. */
const char *vt_pe_kind_name(vt_pe_kind k);

#endif
