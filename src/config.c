/* config.c - the configuration schema and everything that walks it.
 *
 * Owns: the ONE schema table (a row per "section.key": type, default, range or
 * choices, help text, whether the key defines the model, offset of the field in
 * vt_config); JSON parsing (this is the project's only cJSON user); "--set
 * section.key=value" overrides; the per-key checks; the JSON dump; the comparison of two
 * configs on the model keys; the generated documentation (`vitrain --help` text and the
 * key reference of configs/README.md).
 * Does not own: presets, defaults that depend on other keys and the rules between keys
 * (resolve.c), what the values mean at run time (vit.c, pe/, train.c, data/), exit codes
 * (main.c).
 *
 * Explicitly given keys (config file or --set) are recorded in vt_config.set, for
 * resolve.c.
 *
 * Numbers in the JSON dump are printed in the shortest form that strtod reads back to
 * the same double, so reading vt_config_to_json's output reproduces the config exactly
 * (run directories and checkpoints store it).
 *
 * Adding a key: a field in config.h, one row below (K_* macro; the model-defining keys
 * use the *_M variants), and, if its default depends on another key or a rule ties it
 * to another key, its auto_doc here and its code in resolve.c or in the kind's entry
 * (resolve.h says where).
 */
#include "config.h"
#include "input_file.h"
#include "json_nul.h"

#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h" /* the watchdog's default, runtime.comm_timeout */

/* ---------------------------------------------------------------- schema table */

typedef enum {
    KT_INT,     /* int */
    KT_I64,     /* long long, |value| < 2^53 so a JSON number holds it exactly */
    KT_FLOAT,   /* double, finite */
    KT_BOOL,    /* int 0/1 from true/false */
    KT_STRING,  /* char[size], free text */
    KT_CHOICE,  /* char[size], one of choices */
    KT_ENUM,    /* C enum (int-sized) holding the index into choices */
    KT_FARRAY,  /* double[n], exactly n numbers */
    KT_ILIST    /* int[n] plus an int count at count_offset, up to n integers */
} key_type;

enum { LO_OPEN = 1, HI_OPEN = 2 }; /* exclusive bounds */

typedef struct {
    const char *path;           /* "section.key" */
    key_type type;
    size_t offset, size;        /* field in vt_config: offsetof, sizeof */
    int n;                      /* KT_FARRAY length, KT_ILIST capacity */
    int broadcast;              /* KT_FARRAY: a 1-element array fills all n entries */
    size_t count_offset;        /* KT_ILIST: offset of the element count */
    double lo, hi;              /* numeric range (per element for arrays) */
    int open;                   /* LO_OPEN | HI_OPEN */
    const char *const *choices; /* KT_ENUM / KT_CHOICE */
    int n_choices;
    double def;                 /* numeric and bool default; KT_ENUM: choice index */
    const char *def_str;        /* KT_STRING / KT_CHOICE default */
    const double *def_arr;      /* KT_FARRAY default */
    const char *auto_doc;       /* non-NULL: resolved from other keys when unset (doc text) */
    const char *help;
    int model;                  /* 1: defines the model or its PE (vt_config_model_key) */
    int run_only;               /* 1: changes how a run goes, not what it computes */
} key_row;

#define OFF(f) offsetof(vt_config, f)
#define SZ(f) sizeof(((vt_config *)0)->f)
#define NCH(ch) ((int)(sizeof(ch) / sizeof((ch)[0])))

/* Row macros; extra designators may follow the help text: MODEL_KEY marks a key that
 * defines the model or its PE. */
#define MODEL_KEY .model = 1
/* RUN_ONLY marks a key that changes how a run goes (threads, logging, checkpoint cadence,
 * where it is written) but not what it computes (vt_config_changes). */
#define RUN_ONLY .run_only = 1
#define K_INT(p, f, d, l, h, a, hp, ...) \
    { .path = p, .type = KT_INT, .offset = OFF(f), .size = SZ(f), .lo = l, .hi = h, \
      .def = d, .auto_doc = a, .help = hp, __VA_ARGS__ }
#define K_I64(p, f, d, l, h, hp, ...) \
    { .path = p, .type = KT_I64, .offset = OFF(f), .size = SZ(f), .lo = l, .hi = h, \
      .def = d, .help = hp, __VA_ARGS__ }
#define K_FLT(p, f, d, l, h, o, a, hp, ...) \
    { .path = p, .type = KT_FLOAT, .offset = OFF(f), .size = SZ(f), .lo = l, .hi = h, \
      .open = o, .def = d, .auto_doc = a, .help = hp, __VA_ARGS__ }
#define K_BOOL(p, f, d, hp, ...) \
    { .path = p, .type = KT_BOOL, .offset = OFF(f), .size = SZ(f), .lo = 0, .hi = 1, \
      .def = d, .help = hp, __VA_ARGS__ }
#define K_STR(p, f, d, hp, ...) \
    { .path = p, .type = KT_STRING, .offset = OFF(f), .size = SZ(f), .def_str = d, .help = hp, \
      __VA_ARGS__ }
#define K_CHOICE(p, f, ch, d, hp, ...) \
    { .path = p, .type = KT_CHOICE, .offset = OFF(f), .size = SZ(f), .choices = ch, \
      .n_choices = NCH(ch), .def_str = d, .help = hp, __VA_ARGS__ }
#define K_ENUM(p, f, ch, d, a, hp, ...) \
    { .path = p, .type = KT_ENUM, .offset = OFF(f), .size = SZ(f), .choices = ch, \
      .n_choices = NCH(ch), .def = d, .auto_doc = a, .help = hp, __VA_ARGS__ }
#define K_FARR(p, f, d, l, h, o, hp, ...) \
    { .path = p, .type = KT_FARRAY, .offset = OFF(f), .size = SZ(f), \
      .n = (int)(SZ(f) / sizeof(double)), .lo = l, .hi = h, .open = o, .def_arr = d, .help = hp, \
      __VA_ARGS__ }
#define K_FARR_B(p, f, d, l, h, o, hp, ...) \
    { .path = p, .type = KT_FARRAY, .offset = OFF(f), .size = SZ(f), \
      .n = (int)(SZ(f) / sizeof(double)), .broadcast = 1, .lo = l, .hi = h, .open = o, \
      .def_arr = d, .help = hp, __VA_ARGS__ }
#define K_ILIST(p, f, cnt, l, h, hp, ...) \
    { .path = p, .type = KT_ILIST, .offset = OFF(f), .size = SZ(f), \
      .n = (int)(SZ(f) / sizeof(int)), .count_offset = OFF(cnt), .lo = l, .hi = h, .help = hp, \
      __VA_ARGS__ }

/* Choice lists: the index is the C enum value (order matters). */
#define PRESET_NAME(n, w, d, h) n,
#define KIND_NAME(e, id) #id,
static const char *const ch_preset[] = { "", VT_MODEL_PRESETS(PRESET_NAME) };
static const char *const ch_pool[] = { "token", "avg" };
static const char *const ch_attention[] = { "softmax", "performer" };
static const char *const ch_pe_kind[] = { VT_PE_KINDS(KIND_NAME) };
static const char *const ch_ape[] = { "none", "learned", "sincos" };
static const char *const ch_positions[] = { "index", "normalized", "interpolate" };
static const char *const ch_share[] = { "none", "layers", "heads", "all" };
static const char *const ch_inner[] = { "mixed", "axial" };
static const char *const ch_pe_init[] = { "rope_mixed", "normal" };
static const char *const ch_performer_kernel[] = { "positive", "relu" };
static const char *const ch_data_kind[] = { VT_DATA_KINDS(KIND_NAME) };
static const char *const ch_on_error[] = { "fail", "skip" };
static const char *const ch_label[] = { "fine", "coarse" };
static const char *const ch_train_transform[] = { "auto", "simple", "rrc" };
static const char *const ch_eval_transform[] = { "auto", "resize", "center_crop" };
static const char *const ch_interp[] = { "bilinear", "bicubic" };
static const char *const ch_remode[] = { "pixel", "const" };
static const char *const ch_optim[] = { "adamw", "sgd" };
static const char *const ch_schedule[] = { "cosine", "constant" };
static const char *const ch_progress[] = { "auto", "always", "never" };
static const char *const ch_gemm_tune[] = { "on", "off" };
static const char *const ch_precision[] = { "fp32", "bf16" };

static const double def_mean[3] = { 0.485, 0.456, 0.406 };
static const double def_std[3] = { 0.229, 0.224, 0.225 };
static const double def_betas[2] = { 0.9, 0.999 };
static const double def_scale[2] = { 0.08, 1.0 };
static const double def_ratio[2] = { 0.75, 4.0 / 3.0 };

#define BIG 1e9
#define SEED_MAX 9007199254740991.0 /* 2^53 - 1 */

static const key_row schema[] = {
    /* model */
    K_CHOICE("model.preset", model.preset, ch_preset, "",
             "Named shape setting width/depth/heads: vit_tiny 192/12/3, vit_small 384/12/6, "
             "vit_base 768/12/12, vit_large 1024/24/16. An explicitly given width, depth or "
             "heads overrides the preset's. \"\" = no preset."),
    K_INT("model.width", model.width, 768, 1, 65536, "768, or the preset's",
          "Embedding width D.", MODEL_KEY),
    K_INT("model.depth", model.depth, 12, 1, 1024, "12, or the preset's",
          "Number of transformer blocks L.", MODEL_KEY),
    K_INT("model.heads", model.heads, 12, 1, 1024, "12, or the preset's",
          "Attention heads H; must divide width (head dim hd = width / heads).", MODEL_KEY),
    K_FLT("model.mlp_ratio", model.mlp_ratio, 4, 0, 64, LO_OPEN, NULL,
          "MLP hidden width = int(width * mlp_ratio) (timm), at least 1.", MODEL_KEY),
    K_INT("model.patch_size", model.patch_size, 16, 1, 1024, NULL,
          "Patch side P in pixels; must divide img_size and pe.train_img_size.", MODEL_KEY),
    K_INT("model.img_size", model.img_size, 224, 1, 16384, NULL,
          "Input image side in pixels (square images)."),
    K_INT("model.in_chans", model.in_chans, 3, 1, 4, NULL,
          "Input channels: 1 (grayscale), 3 (RGB) or 4 (RGB-D: depth positions tokens through "
          "a rotary PE with pe.coord_dim = 3).", MODEL_KEY),
    K_INT("model.num_classes", model.num_classes, 1000, 1, 1000000,
          "the classes data.kind defines (see Dataset formats: an image folder's class folders), "
          "else 1000",
          "Classifier outputs K.", MODEL_KEY),
    K_ENUM("model.pool", model.pool, ch_pool, VT_POOL_TOKEN, NULL,
           "Classifier input: the CLS token after the final norm (token), or the mean of the "
           "patch tokens followed by fc_norm (avg, timm global_pool='avg').", MODEL_KEY),
    K_FLT("model.drop_rate", model.drop_rate, 0, 0, 1, HI_OPEN, NULL,
          "Dropout probability after the position embedding, the attention projection and "
          "the MLP layers, and before the head (timm's single drop_rate)."),
    K_FLT("model.attn_drop_rate", model.attn_drop_rate, 0, 0, 1, HI_OPEN, NULL,
          "Dropout on the attention probabilities (softmax attention only)."),
    K_FLT("model.drop_path", model.drop_path, 0, 0, 1, HI_OPEN, NULL,
          "Stochastic depth: block i drops its residual branches with probability "
          "drop_path * i / (depth - 1) (timm's linear rule)."),
    K_FLT("model.layer_scale", model.layer_scale, 0, 0, 10, 0, NULL,
          "LayerScale init value (ls1.gamma, ls2.gamma); 0 = off.", MODEL_KEY),
    K_BOOL("model.qkv_bias", model.qkv_bias, 1, "Bias in the qkv projection.", MODEL_KEY),
    K_ENUM("model.attention", model.attention, ch_attention, VT_ATTN_SOFTMAX, NULL,
           "Exact softmax attention, or Performer FAVOR+ (linear in tokens; see performer.*).",
           MODEL_KEY),
    K_BOOL("model.depth_as_channel", model.depth_as_channel, 0,
           "RGB-D (in_chans = 4): also feed depth to the patch embedding as a 4th channel; "
           "otherwise depth only positions tokens.", MODEL_KEY),

    /* pe */
    K_ENUM("pe.kind", pe.kind, ch_pe_kind, VT_PE_APE, NULL,
           "Position encoding: none, ape (an absolute table only) or a rotary kind (`vitrain kinds "
           "--rotary` lists them); each kind's defaults and rules: PE kinds.",
           MODEL_KEY),
    K_ENUM("pe.ape", pe.ape, ch_ape, VT_APE_NONE, "the pe.kind's (see PE kinds), else none",
           "Absolute table added after the CLS token is prepended: learned (timm pos_embed) "
           "or fixed 2-D sincos; rotary kinds may add one too.", MODEL_KEY),
    K_ENUM("pe.positions", pe.positions, ch_positions, VT_POS_INDEX,
           "the pe.kind's (see PE kinds), else index",
           "Rotary coordinates at another resolution: index (extrapolate), normalized (the "
           "training grid spans [0, 1]) or interpolate (index * n_train / n_eval); x and y "
           "only, never depth. With coord_dim = 1 the raster index r scales by token counts: "
           "r / max(N_train - 1, 1) or r * N_train / N_eval. An evaluation may set another "
           "mode than the checkpoint's (the positions study)."),
    K_ENUM("pe.share", pe.share, ch_share, VT_SHARE_NONE,
           "the pe.kind's (see PE kinds), else none",
           "Rotary parameter sharing: none (per layer and head), layers (per head), heads "
           "(per layer), all (one set).", MODEL_KEY),
    K_FLT("pe.theta", pe.theta, 0, 0, BIG, 0,
          "the pe.kind's (see PE kinds), else 0 (unused)",
          "RoPE frequency base; 0 = the kind's default.", MODEL_KEY),
    K_ENUM("pe.inner", pe.inner, ch_inner, VT_INNER_MIXED, NULL,
           "Cayley-STRING's inner RoPE: mixed (learnable frequencies) or axial (fixed).",
           MODEL_KEY),
    K_INT("pe.block_size", pe.block_size, 0, 0, 65536,
          "the pe.kind's (see PE kinds), else 0 (unused)",
          "Generator block size of circulant and liere kinds (rules under PE kinds). 0 = the "
          "kind's default.", MODEL_KEY),
    K_ENUM("pe.init", pe.init, ch_pe_init, VT_PEINIT_ROPE_MIXED, NULL,
           "Circulant-STRING init: from RoPE-Mixed's initial frequencies (rope_mixed) or "
           "c ~ N(0, init_std^2) (normal)."),
    K_FLT("pe.init_std", pe.init_std, 0.01, 0, 10, 0, NULL,
          "Standard deviation of the normal circulant init."),
    K_FLT("pe.init_scale", pe.init_scale, 1, 0, 1000, 0, NULL,
          "LieRE generator init: U(0, 2 pi) * init_scale."),
    K_INT("pe.coord_dim", pe.coord_dim, 2, 1, 3, "3 if model.in_chans = 4, else 2",
          "Coordinate dimension C of rotary PEs: 1 (raster index), 2 (x, y), 3 (x, y, depth: "
          "with RGB-D input the patch's mean raw depth times the learnable pe.depth_scale "
          "(init 1, also with depth_as_channel), else 0).", MODEL_KEY),
    K_INT("pe.train_img_size", pe.train_img_size, 0, 0, 16384, "model.img_size",
          "Training resolution the position grid is relative to (positions, APE resampling); "
          "0 = model.img_size. An evaluation may set another (normalized to the evaluated "
          "grid)."),

    /* performer */
    K_INT("performer.features", performer.features, 256, 1, 65536, NULL,
          "Random features m per head.", MODEL_KEY),
    K_INT("performer.redraw_every", performer.redraw_every, 1000, 0, BIG, NULL,
          "Redraw the features every this many training steps; 0 = never."),
    K_CHOICE("performer.kernel", performer.kernel, ch_performer_kernel, "positive",
             "Feature map: positive (FAVOR+ exp features) or relu.", MODEL_KEY),

    /* data */
    K_ENUM("data.kind", data.kind, ch_data_kind, VT_DATA_IMAGEFOLDER, NULL,
           "Dataset format; what each defines and needs: Dataset formats; where its files go: "
           "data/README.md."),
    K_STR("data.root", data.root, "data/imagenet",
          "Dataset directory, for the formats that read one (Dataset formats)."),
    K_STR("data.train_split", data.train_split, "train",
          "Training split (subdirectory or file prefix)."),
    K_STR("data.val_split", data.val_split, "val", "Evaluation split."),
    K_FARR_B("data.mean", data.mean, def_mean, 0, 1, 0,
             "Per-channel mean subtracted from [0, 1] pixels (ImageNet's RGB); one number "
             "applies to every channel (e.g. grayscale)."),
    K_FARR_B("data.std", data.std, def_std, 0, 10, LO_OPEN,
             "Per-channel standard deviation pixels are divided by; one number applies to "
             "every channel."),
    K_INT("data.workers", data.workers, 0, 0, 256, NULL,
          "Loader threads that decode and augment batches ahead of the training step "
          "(3 batches prefetched; batches are identical for any count); 0 = auto (online "
          "CPUs, at most 8).", RUN_ONLY),
    K_ENUM("data.on_error", data.on_error, ch_on_error, VT_ONERR_FAIL, NULL,
           "A corrupt or unreadable sample: fail the run, or skip it (and count it)."),
    K_I64("data.max_image_pixels", data.max_image_pixels, 178956970, 1, 4294967296.0,
          "imagefolder: largest image accepted, width x height pixels (Pillow's decompression-"
          "bomb limit); a larger one, or one whose declared size its file's bytes cannot hold, "
          "is a bad sample (data.on_error)."),
    K_STR("data.class_list", data.class_list, "",
          "imagefolder: text file with one class folder name per line, giving the class "
          "indices in line order (folders not listed are ignored); empty = every train "
          "folder, sorted by name."),
    K_CHOICE("data.label", data.label, ch_label, "fine",
             "cifar100 labels: fine (100) or coarse (20)."),
    K_INT("data.train_size", data.train_size, 1024, 1, BIG, NULL, "synthetic: training samples."),
    K_INT("data.val_size", data.val_size, 256, 1, BIG, NULL, "synthetic: evaluation samples."),
    K_INT("data.synthetic_seed", data.synthetic_seed, 0, 0, INT_MAX, NULL,
          "synthetic: seed of the generated dataset."),
    K_BOOL("data.synthetic_depth_label", data.synthetic_depth_label, 0,
           "synthetic with model.in_chans = 4: make the label depend on depth (classes 2j and "
           "2j + 1 share RGB pattern j; the depth map has a bump for odd and a dent for even labels)."),
    K_FLT("data.crop_pct", data.crop_pct, 0.875, 0, 1, LO_OPEN, NULL,
          "Evaluation with data.eval_transform = center_crop: the fraction of the resized "
          "image kept (timm crop_pct). Giving it makes center_crop the eval_transform default "
          "on every format."),
    K_ENUM("data.eval_transform", data.eval_transform, ch_eval_transform, VT_ET_AUTO,
           "the data.kind's (see Dataset formats)",
           "Evaluation geometry: resize (the whole image bilinearly to S x S), center_crop "
           "(resize the shorter side to int(S / crop_pct) with data.interpolation, "
           "antialiased, then the centre S x S; timm's eval transform), auto (the default "
           "before it). S is the evaluated image size. The resolved config states the choice."),
    K_FLT("data.hflip", data.hflip, 0.5, 0, 1, 0, NULL, "Training: horizontal flip probability."),
    K_ENUM("data.train_transform", data.train_transform, ch_train_transform, VT_TT_AUTO,
           "the data.kind's (see Dataset formats)",
           "Training geometry: simple (flip, then bilinear resize of the whole image to S: the "
           "Fashion-MNIST/CIFAR recipe), rrc (DeiT: RandomResizedCrop with data.scale, "
           "data.ratio and data.interpolation, then flip), auto (the default before it). "
           "Either is followed by auto_augment, normalisation, random erasing and "
           "mixup/cutmix when enabled. The resolved config states the choice."),
    K_ENUM("data.interpolation", data.interpolation, ch_interp, VT_INTERP_BICUBIC, NULL,
           "Resampling of rrc, the evaluation resize + crop and RandAugment's geometric ops "
           "(PIL-style: antialiased when shrinking). The simple transform always resizes "
           "bilinearly."),
    K_FARR("data.scale", data.scale, def_scale, 0, 1, LO_OPEN,
           "RandomResizedCrop area fraction range [min, max] (min <= max)."),
    K_FARR("data.ratio", data.ratio, def_ratio, 0, 100, LO_OPEN,
           "RandomResizedCrop aspect ratio (w / h) range [min, max], sampled log-uniformly "
           "(min <= max)."),
    K_STR("data.auto_augment", data.auto_augment, "",
          "RandAugment in timm syntax, e.g. rand-m9-mstd0.5-inc1 (DeiT): m magnitude (0-10), "
          "n ops per image (default 2), mstd magnitude noise std (> 100 = uniform in [0, m]), "
          "mmax magnitude cap (default 10), inc1 the increasing op variants, p op probability "
          "(default 0.5). \"\" = off."),
    K_FLT("data.mixup", data.mixup, 0, 0, 100, 0, NULL,
          "Mixup Beta(alpha, alpha) parameter; 0 = off (DeiT 0.8). With mixup or cutmix on, "
          "train.label_smoothing is folded into the soft targets (timm Mixup, batch mode: the "
          "batch is mixed with its reverse)."),
    K_FLT("data.cutmix", data.cutmix, 0, 0, 100, 0, NULL,
          "CutMix Beta(alpha, alpha) parameter; 0 = off (DeiT 1.0). Lambda is corrected to "
          "the clipped box area."),
    K_FLT("data.mixup_prob", data.mixup_prob, 1, 0, 1, 0, NULL,
          "Probability that a batch is mixed (mixup or cutmix)."),
    K_FLT("data.mixup_switch_prob", data.mixup_switch_prob, 0.5, 0, 1, 0, NULL,
          "With both mixup and cutmix on: probability a mixed batch uses cutmix."),
    K_FLT("data.reprob", data.reprob, 0, 0, 1, 0, NULL,
          "Random erasing probability per training image (after normalisation; timm "
          "RandomErasing: area 0.02-1/3, aspect 0.3-3.3, one box); 0 = off (DeiT 0.25)."),
    K_ENUM("data.remode", data.remode, ch_remode, VT_REMODE_PIXEL, NULL,
           "Random erasing fill: pixel (per-pixel N(0, 1) values) or const (zeros)."),

    /* optim */
    K_ENUM("optim.name", optim.name, ch_optim, VT_OPT_ADAMW, NULL,
           "Optimizer: adamw (decoupled weight decay) or sgd (with momentum)."),
    K_FLT("optim.lr", optim.lr, 5e-4, 0, 10, LO_OPEN, NULL,
          "Peak learning rate (not scaled by batch size)."),
    K_FLT("optim.min_lr", optim.min_lr, 1e-5, 0, 10, 0, NULL,
          "Learning rate at the end of the cosine schedule; <= lr."),
    K_FLT("optim.weight_decay", optim.weight_decay, 0.05, 0, 10, 0, NULL,
          "Weight decay (not applied to biases, norms, tokens and PE parameters)."),
    K_FARR("optim.betas", optim.betas, def_betas, 0, 1, HI_OPEN, "AdamW beta1, beta2."),
    K_FLT("optim.eps", optim.eps, 1e-8, 0, 1, LO_OPEN, NULL, "AdamW epsilon."),
    K_FLT("optim.momentum", optim.momentum, 0.9, 0, 1, HI_OPEN, NULL, "SGD momentum."),
    K_FLT("optim.warmup_epochs", optim.warmup_epochs, 5, 0, 1e6, 0, NULL,
          "Linear warmup length in epochs (fractions allowed)."),
    K_INT("optim.warmup_steps", optim.warmup_steps, 0, 0, INT_MAX, NULL,
          "Warmup length in optimizer steps; > 0 overrides warmup_epochs."),
    K_FLT("optim.warmup_lr", optim.warmup_lr, 1e-6, 0, 10, 0, NULL,
          "Learning rate at the start of warmup."),
    K_ENUM("optim.schedule", optim.schedule, ch_schedule, VT_SCHED_COSINE, NULL,
           "After warmup: cosine decay to min_lr, or constant lr."),
    K_FLT("optim.clip_grad", optim.clip_grad, 0, 0, BIG, 0, NULL,
          "Clip the global gradient L2 norm to this value; 0 = off."),

    /* train */
    K_INT("train.epochs", train.epochs, 300, 0, 1000000, NULL, "Training epochs."),
    K_INT("train.steps", train.steps, 0, 0, INT_MAX, NULL,
          "Optimizer steps; > 0 overrides epochs."),
    K_INT("train.batch_size", train.batch_size, 128, 1, 1048576, NULL,
          "Samples per forward/backward pass."),
    K_INT("train.accum_steps", train.accum_steps, 1, 1, 65536, NULL,
          "Gradient accumulation: passes per optimizer step."),
    K_FLT("train.label_smoothing", train.label_smoothing, 0.1, 0, 1, HI_OPEN, NULL,
          "Label smoothing of the cross-entropy targets."),
    K_I64("train.seed", train.seed, 0, 0, SEED_MAX,
          "Seed of initialisation, data order and augmentation."),
    K_INT("train.threads", train.threads, 0, 0, 4096, NULL, "OpenMP threads; 0 = all cores.", RUN_ONLY),
    K_INT("train.eval_every", train.eval_every, 1, 0, 1000000, NULL,
          "Evaluate every this many epochs; 0 = only at the end."),
    K_INT("train.eval_every_steps", train.eval_every_steps, 0, 0, INT_MAX, NULL,
          "Also evaluate every this many optimizer steps; 0 = off."),
    K_INT("train.ckpt_every", train.ckpt_every, 1, 0, 1000000, NULL,
          "Checkpoint every this many epochs; 0 = only at the end.", RUN_ONLY),
    K_INT("train.ckpt_every_steps", train.ckpt_every_steps, 0, 0, INT_MAX, NULL,
          "Also checkpoint every this many optimizer steps (mid-epoch too; a resumed run "
          "continues bit for bit); 0 = off.", RUN_ONLY),
    K_FLT("train.ckpt_every_minutes", train.ckpt_every_minutes, 0, 0, 1e9, 0, NULL,
          "Also checkpoint at the first step boundary this many wall-clock minutes after the "
          "last checkpoint (or the start), as rank 0's clock says; 0 = off. docs/cluster.md states "
          "what a pair costs for ViT-B/16.", RUN_ONLY),
    K_INT("train.keep_checkpoints", train.keep_checkpoints, 1, 1, 1000000, NULL,
          "Checkpoint pairs (step_N.safetensors + step_N.state.safetensors) kept in the run "
          "directory, newest first; a save keeps the previous pair until the new one is "
          "complete, so a kill or a full disk never leaves the run without one.", RUN_ONLY),
    K_ENUM("train.precision", train.precision, ch_precision, VT_PRECISION_FP32, NULL,
           "GEMM precision: fp32, or bf16 (every GEMM's and attention product's operands rounded "
           "to bfloat16, float32 sums; weights, gradients, optimizer state, norms, softmax, GELU "
           "and position encodings float32; on AVX512-BF16 / AMX hardware, faster)."),
    K_INT("train.log_every", train.log_every, 50, 1, INT_MAX, NULL,
          "Optimizer steps between metric lines.", RUN_ONLY),
    K_STR("train.run_dir", train.run_dir, "",
          "Run directory (metrics, checkpoints, resolved config); \"\" = runs/<config file stem>.", RUN_ONLY),
    K_STR("train.init", train.init, "",
          "Start from the weights of this safetensors file (a vitrain or timm checkpoint, F32, "
          "BF16 or F16): tensors whose name and shape match load as stored, pos_embed is "
          "resampled to a new grid, shared PE tensors expand per layer / head, the head "
          "(another num_classes) and PE tensors the file lacks keep their init; anything else "
          "that differs is an error. The log lists each tensor not loaded as stored. Not "
          "applied on --resume. \"\" = train from scratch."),
    K_BOOL("train.init_allow_unexpected", train.init_allow_unexpected, 0,
           "With train.init: ignore (and log) file tensors the model has no parameter for, "
           "instead of failing."),

    /* eval */
    K_INT("eval.batch_size", eval.batch_size, 0, 0, 1048576, "train.batch_size",
          "Evaluation batch size; 0 = train.batch_size."),
    K_ILIST("eval.resolutions", eval.resolutions, eval.n_resolutions, 1, 16384,
            "Extra image sizes to evaluate at (multiples of patch_size), e.g. [160, 320]."),
    K_INT("eval.max_samples", eval.max_samples, 0, 0, INT_MAX, NULL,
          "Evaluate only the first this many samples of the validation split; 0 = all."),

    /* runtime */
    K_ENUM("runtime.progress", runtime.progress, ch_progress, VT_PROGRESS_AUTO, NULL,
           "Live progress line: auto (when stderr is a terminal), always, never.", RUN_ONLY),
    K_ENUM("runtime.gemm_tune", runtime.gemm_tune, ch_gemm_tune, VT_GEMM_TUNE_ON, NULL,
           "GEMM blocking of a new run: on takes this CPU's entry in the tuning cache "
           "($XDG_CACHE_HOME/vitrain, else ~/.cache/vitrain; `vitrain tune CONFIG` fills it) for the "
           "config's products, precision, bf16 path and thread count, else tunes them once (seconds; a single process and "
           "models whose linear products reach 20 GFLOP a step) and caches the result, else keeps the "
           "built-in table's entry for the CPU; off keeps the table's entry. A resumed run keeps the "
           "blocking its run directory records (gemm_blocking.txt); VT_GEMM_CONTEXT overrides both.",
           RUN_ONLY),
    K_FLT("runtime.comm_timeout", runtime.comm_timeout, VT_DIST_DEFAULT_TIMEOUT_S, 0, 1e9, 0, NULL,
          "Under MPI: seconds a rank waits for the others in one exchange before it decides a "
          "peer is dead or cut off, names itself, its host and what it waited for, and ends "
          "every rank (MPI_Abort); the limit is the larger of this and 4 times the longest work "
          "between two exchanges (a step), so a slow but live rank never trips it. 0 = wait "
          "forever.", RUN_ONLY),
};

#define N_KEYS ((int)(sizeof schema / sizeof schema[0]))
_Static_assert(sizeof schema / sizeof schema[0] <= VT_CONFIG_MAX_KEYS,
               "VT_CONFIG_MAX_KEYS too small for the schema");
_Static_assert(sizeof(vt_pool) == sizeof(int) && sizeof(vt_pe_kind) == sizeof(int),
               "enums are stored as int");

typedef struct {
    const char *name, *doc;
} section_doc;

static const section_doc sections[] = {
    { "model", "The Vision Transformer (timm VisionTransformer layout). Defaults are ViT-B/16."
               " Constraints: heads divide width; img_size (and pe.train_img_size, each of"
               " eval.resolutions) is a multiple of patch_size; in_chans is 1, 3 or 4, and 4"
               " (RGB-D) needs a rotary pe.kind with pe.coord_dim = 3; depth_as_channel needs"
               " in_chans = 4; attn_drop_rate must be 0 with performer attention." },
    { "pe", "Position encoding (the position-encodings design note has the exact contract). Keys "
            "with a conditional default take the pe.kind's default when not given (PE kinds, "
            "below); the resolved config shows the final values. Constraints: those of the kind "
            "(PE kinds, below); pe.ape = sincos needs model.width divisible by 4; coord_dim other "
            "than 2 needs a rotary kind." },
    { "performer", "Performer (FAVOR+) attention, used when model.attention = performer." },
    { "data", "Dataset and augmentation. Images are scaled to [0, 1], then normalised with mean"
              " and std. Constraints: root is non-empty for the formats that read it; scale and"
              " ratio are [min, max] with min <= max; auto_augment must parse;"
              " synthetic_depth_label needs model.in_chans = 4; those of the format (Dataset"
              " formats, below). Where to put each format's files: data/README.md. Training order per"
              " image: geometry (train_transform), flip, auto_augment, normalisation, random"
              " erasing; then mixup/cutmix per batch. All randomness is seeded per sample"
              " (train.seed, epoch, index) and per batch." },
    { "optim", "Optimizer and learning-rate schedule (DeiT recipe). Constraint: min_lr <= lr." },
    { "train", "The training loop. Constraint: epochs and steps are not both 0." },
    { "eval", "Evaluation. Constraint: each resolution is a multiple of model.patch_size." },
    { "runtime", "Terminal behaviour." },
};
#define N_SECTIONS ((int)(sizeof sections / sizeof sections[0]))

/* ---------------------------------------------------------------- small helpers */

typedef struct {
    char *p;
    size_t len, cap;
} sbuf;

static void sb_putf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_putf(sbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    VT_ASSERT(need >= 0, "vsnprintf failed for format \"%s\"", fmt);
    if (b->len + (size_t)need + 1 > b->cap) {
        b->cap = (b->len + (size_t)need + 1) * 2;
        b->p = vt_xrealloc(b->p, b->cap);
    }
    vsnprintf(b->p + b->len, (size_t)need + 1, fmt, ap2);
    va_end(ap2);
    b->len += (size_t)need;
}

/* The shortest text that strtod reads back as exactly v: integral values below 1e15
 * without exponent ("1000000"), others in the shortest %g form. */
static void fmt_double(char *buf, size_t n, double v) {
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

/* A JSON string literal of s (quotes, backslash and control characters escaped). */
static void sb_json_string(sbuf *b, const char *s) {
    sb_putf(b, "\"");
    for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
        if (*q == '"' || *q == '\\') sb_putf(b, "\\%c", *q);
        else if (*q == '\n') sb_putf(b, "\\n");
        else if (*q == '\t') sb_putf(b, "\\t");
        else if (*q < 0x20) sb_putf(b, "\\u%04x", *q);
        else sb_putf(b, "%c", *q);
    }
    sb_putf(b, "\"");
}

static void *field(vt_config *c, const key_row *r) { return (char *)c + r->offset; }
static const void *cfield(const vt_config *c, const key_row *r) {
    return (const char *)c + r->offset;
}

static int row_index(const char *path) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(schema[i].path, path) == 0) return i;
    return -1;
}

/* The row of a key the code itself names: a missing one is a bug. */
static int row_of(const char *path) {
    int i = row_index(path);
    VT_ASSERT(i >= 0, "config key \"%s\" is not in the schema", path);
    return i;
}

static int section_index(const char *name, size_t len) {
    for (int s = 0; s < N_SECTIONS; s++)
        if (strlen(sections[s].name) == len && strncmp(sections[s].name, name, len) == 0) return s;
    return -1;
}

static const char *leaf_of(const char *path) {
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* Optimal-string-alignment edit distance (insert, delete, substitute, swap adjacent). */
static int edit_distance(const char *a, const char *b) {
    enum { MAXL = 96 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= MAXL || lb >= MAXL) return INT_MAX / 2;
    int d[MAXL + 1][MAXL + 1];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < best) best = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[la][lb];
}

/* The nearest valid name to an unknown one, or NULL if nothing is close. name is a
 * "section.key" path (want_section = 0) or a top-level name (want_section = 1).
 * Candidates: full paths, leaf names in any section (so "model.theta" finds
 * "pe.theta" and a bare "width" finds "model.width") and, for top-level names,
 * section names (a prefix such as "optimizer" for "optim" counts as close). */
static const char *nearest_name(const char *name, int want_section) {
    const char *leaf = leaf_of(name);
    size_t ll = strlen(leaf);
    int limit = ll <= 4 ? 1 : ll <= 8 ? 2 : 3;
    const char *best = NULL;
    int best_score = INT_MAX;
    const char *dot = strchr(name, '.');
    size_t sec_len = dot ? (size_t)(dot - name) : 0;
    for (int i = 0; i < N_KEYS; i++) {
        const char *p = schema[i].path;
        int d = edit_distance(leaf, leaf_of(p)) + 1;
        if (!want_section) {
            int full = edit_distance(name, p);
            if (full < d) d = full;
        }
        if (d > limit) continue;
        /* same score: prefer the key's own section */
        int same = dot && strncmp(p, name, sec_len) == 0 && p[sec_len] == '.';
        int score = 2 * d + !same;
        if (score < best_score) { best_score = score; best = p; }
    }
    if (want_section) {
        for (int s = 0; s < N_SECTIONS; s++) {
            const char *sn = sections[s].name;
            int d = edit_distance(name, sn);
            size_t ls = strlen(sn), ln = strlen(name);
            if (ln >= 3 && (strncmp(name, sn, ln < ls ? ln : ls) == 0)) d = 1;
            if (d > limit) continue;
            if (2 * d < best_score) { best_score = 2 * d; best = sn; }
        }
    }
    return best;
}

/* Describe a JSON value for "found ..." in messages. */
static void describe(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsString(v)) {
        size_t len = strlen(v->valuestring);
        snprintf(buf, n, "\"%.48s%s\"", v->valuestring, len > 48 ? "..." : "");
    } else if (cJSON_IsNumber(v)) {
        fmt_double(buf, n, v->valuedouble);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        snprintf(buf, n, "null");
    } else if (cJSON_IsArray(v)) {
        snprintf(buf, n, "an array of %d element%s", cJSON_GetArraySize(v),
                 cJSON_GetArraySize(v) == 1 ? "" : "s");
    } else {
        snprintf(buf, n, "an object");
    }
}

static void choices_list(const key_row *r, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < r->n_choices && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s\"%s\"", i ? ", " : "", r->choices[i]);
}

static int choice_index(const key_row *r, const char *s) {
    for (int i = 0; i < r->n_choices; i++)
        if (strcmp(r->choices[i], s) == 0) return i;
    return -1;
}

static vt_status type_error(const char *src, const char *what, const char *expected,
                            const cJSON *v) {
    char found[96];
    describe(v, found, sizeof found);
    return vt_fail(VT_ERR_USAGE, "%s: %s: expected %s, found %s", src, what, expected, found);
}

/* Range check of one number; what names it ("data.std[1]"). */
static vt_status check_range(const char *src, const char *what, const key_row *r, double v) {
    char vs[40], bs[40];
    fmt_double(vs, sizeof vs, v);
    if ((r->open & LO_OPEN) ? !(v > r->lo) : !(v >= r->lo)) {
        fmt_double(bs, sizeof bs, r->lo);
        if (r->open & LO_OPEN)
            return vt_fail(VT_ERR_USAGE, "%s: %s: %s must be greater than %s", src, what, vs, bs);
        return vt_fail(VT_ERR_USAGE, "%s: %s: %s is below the minimum %s", src, what, vs, bs);
    }
    if ((r->open & HI_OPEN) ? !(v < r->hi) : !(v <= r->hi)) {
        fmt_double(bs, sizeof bs, r->hi);
        if (r->open & HI_OPEN)
            return vt_fail(VT_ERR_USAGE, "%s: %s: %s must be less than %s", src, what, vs, bs);
        return vt_fail(VT_ERR_USAGE, "%s: %s: %s is above the maximum %s", src, what, vs, bs);
    }
    return VT_OK;
}

/* A JSON number that is an integer (12 or 12.0, not 12.5, not "12"). */
static int json_integral(const cJSON *v, double *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble))
        return 0;
    *out = v->valuedouble;
    return 1;
}

/* ---------------------------------------------------------------- defaults */

/* Table consistency: each row's field has the size its type stores. */
static void schema_check(void) {
    for (int i = 0; i < N_KEYS; i++) {
        const key_row *r = &schema[i];
        const char *dot = strchr(r->path, '.');
        VT_ASSERT(dot && section_index(r->path, (size_t)(dot - r->path)) >= 0,
                  "schema row %s: unknown section", r->path);
        switch (r->type) {
        case KT_INT: case KT_BOOL:
            VT_ASSERT(r->size == sizeof(int), "schema row %s: not an int field", r->path); break;
        case KT_ENUM:
            VT_ASSERT(r->size == sizeof(int) && r->def >= 0 && r->def < r->n_choices,
                      "schema row %s: bad enum row", r->path); break;
        case KT_I64:
            VT_ASSERT(r->size == sizeof(long long), "schema row %s: not long long", r->path);
            break;
        case KT_FLOAT:
            VT_ASSERT(r->size == sizeof(double), "schema row %s: not a double", r->path); break;
        case KT_STRING: case KT_CHOICE:
            VT_ASSERT(strlen(r->def_str) < r->size, "schema row %s: default too long", r->path);
            VT_ASSERT(r->type == KT_STRING || choice_index(r, r->def_str) >= 0,
                      "schema row %s: default not a choice", r->path); break;
        case KT_FARRAY:
            VT_ASSERT(r->n > 0 && r->size == (size_t)r->n * sizeof(double), "schema row %s",
                      r->path);
            break;
        case KT_ILIST:
            VT_ASSERT(r->n > 0 && r->size == (size_t)r->n * sizeof(int), "schema row %s", r->path);
            break;
        }
    }
}

static void apply_default(vt_config *c, const key_row *r) {
    void *f = field(c, r);
    switch (r->type) {
    case KT_INT: case KT_BOOL: case KT_ENUM: *(int *)f = (int)r->def; break;
    case KT_I64: *(long long *)f = (long long)r->def; break;
    case KT_FLOAT: *(double *)f = r->def; break;
    case KT_STRING: case KT_CHOICE: snprintf((char *)f, r->size, "%s", r->def_str); break;
    case KT_FARRAY: memcpy(f, r->def_arr, r->size); break;
    case KT_ILIST:
        memset(f, 0, r->size);
        *(int *)((char *)c + r->count_offset) = 0;
        break;
    }
}

void vt_config_defaults(vt_config *c) {
    schema_check();
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_KEYS; i++) apply_default(c, &schema[i]);
}

int vt_config_is_set(const vt_config *c, const char *key) {
    int i = row_index(key);
    return i < 0 ? -1 : c->set[i] != 0;
}

int vt_config_origin(const vt_config *c, const char *key) {
    int i = row_index(key);
    return i < 0 ? -1 : c->set[i];
}

void vt_config_restore_default(vt_config *c, const char *key) {
    apply_default(c, &schema[row_of(key)]);
}

/* ---------------------------------------------------------------- parsing */

/* Store JSON value v into row ri of c; src prefixes messages (file or --set). */
static vt_status assign(vt_config *c, int ri, const cJSON *v, const char *src) {
    const key_row *r = &schema[ri];
    void *f = field(c, r);
    double d;
    vt_status st;
    switch (r->type) {
    case KT_INT:
    case KT_I64:
        if (!json_integral(v, &d)) return type_error(src, r->path, "an integer", v);
        if ((st = check_range(src, r->path, r, d)) != VT_OK) return st;
        if (r->type == KT_INT) *(int *)f = (int)d;
        else *(long long *)f = (long long)d;
        break;
    case KT_FLOAT:
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
            return type_error(src, r->path, "a finite number", v);
        if ((st = check_range(src, r->path, r, v->valuedouble)) != VT_OK) return st;
        *(double *)f = v->valuedouble;
        break;
    case KT_BOOL:
        if (!cJSON_IsBool(v)) return type_error(src, r->path, "true or false", v);
        *(int *)f = cJSON_IsTrue(v) ? 1 : 0;
        break;
    case KT_STRING:
        if (!cJSON_IsString(v)) return type_error(src, r->path, "a string", v);
        if (strlen(v->valuestring) >= r->size)
            return vt_fail(VT_ERR_USAGE, "%s: %s: expected at most %zu characters, found %zu",
                           src, r->path, r->size - 1, strlen(v->valuestring));
        snprintf((char *)f, r->size, "%s", v->valuestring);
        break;
    case KT_CHOICE:
    case KT_ENUM: {
        char list[256];
        choices_list(r, list, sizeof list);
        if (!cJSON_IsString(v)) {
            char expected[300];
            snprintf(expected, sizeof expected, "one of %s", list);
            return type_error(src, r->path, expected, v);
        }
        int k = choice_index(r, v->valuestring);
        if (k < 0)
            return vt_fail(VT_ERR_USAGE, "%s: %s: unknown value \"%.64s\"; expected one of %s",
                           src, r->path, v->valuestring, list);
        if (r->type == KT_ENUM) *(int *)f = k;
        else snprintf((char *)f, r->size, "%s", r->choices[k]);
        break;
    }
    case KT_FARRAY: {
        char expected[64], what[96];
        snprintf(expected, sizeof expected, "an array of %d numbers%s", r->n,
                 r->broadcast ? " (or 1 for every entry)" : "");
        int len = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
        if (len != r->n && !(r->broadcast && len == 1))
            return type_error(src, r->path, expected, v);
        double tmp[8];
        VT_ASSERT(r->n <= 8, "schema row %s: array too long", r->path);
        for (int k = 0; k < r->n; k++) {
            const cJSON *e = cJSON_GetArrayItem(v, k);
            snprintf(what, sizeof what, "%s[%d]", r->path, k);
            if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble))
                return type_error(src, what, "a finite number", e);
            if ((st = check_range(src, what, r, e->valuedouble)) != VT_OK) return st;
            tmp[k] = e->valuedouble;
            if (len == 1) break;
        }
        for (int k = 1; len == 1 && k < r->n; k++) tmp[k] = tmp[0];
        memcpy(f, tmp, r->size);
        break;
    }
    case KT_ILIST: {
        char expected[64], what[96];
        snprintf(expected, sizeof expected, "an array of at most %d integers", r->n);
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > r->n)
            return type_error(src, r->path, expected, v);
        int n = cJSON_GetArraySize(v);
        int *dst = (int *)f;
        for (int k = 0; k < n; k++) {
            const cJSON *e = cJSON_GetArrayItem(v, k);
            snprintf(what, sizeof what, "%s[%d]", r->path, k);
            if (!json_integral(e, &d)) return type_error(src, what, "an integer", e);
            if ((st = check_range(src, what, r, d)) != VT_OK) return st;
        }
        memset(dst, 0, r->size);
        for (int k = 0; k < n; k++) dst[k] = (int)cJSON_GetArrayItem(v, k)->valuedouble;
        *(int *)((char *)c + r->count_offset) = n;
        break;
    }
    }
    c->set[ri] = 1;
    return VT_OK;
}

static vt_status unknown_key(const char *src, const char *path) {
    const char *hint = nearest_name(path, 0);
    if (hint)
        return vt_fail(VT_ERR_USAGE, "%s: unknown key \"%s\"; did you mean \"%s\"?", src, path,
                       hint);
    const char *dot = strchr(path, '.');
    int s = dot ? section_index(path, (size_t)(dot - path)) : -1;
    if (s < 0)
        return vt_fail(VT_ERR_USAGE, "%s: unknown key \"%s\"; keys are section.key, see "
                       "configs/README.md", src, path);
    char list[1024];
    size_t used = 0;
    list[0] = '\0';
    for (int i = 0; i < N_KEYS && used < sizeof list; i++) {
        const char *p = schema[i].path;
        if (strncmp(p, path, (size_t)(dot - path) + 1) == 0)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "",
                                     leaf_of(p));
    }
    return vt_fail(VT_ERR_USAGE, "%s: unknown key \"%s\"; valid keys in \"%s\": %s", src, path,
                   sections[s].name, list);
}

static vt_status unknown_section(const char *src, const char *name) {
    const char *hint = nearest_name(name, 1);
    if (hint)
        return vt_fail(VT_ERR_USAGE, "%s: unknown section \"%s\"; did you mean \"%s\"?", src,
                       name, hint);
    char list[256];
    size_t used = 0;
    for (int s = 0; s < N_SECTIONS; s++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", s ? ", " : "",
                                 sections[s].name);
    return vt_fail(VT_ERR_USAGE, "%s: unknown section \"%s\"; valid sections: %s", src, name, list);
}

static int is_space(char ch) { return ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t'; }

/* 1-based line and column of byte offset off in text. */
static void line_col(const char *text, size_t off, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && text[i]; i++) {
        if (text[i] == '\n') { (*line)++; *col = 1; }
        else (*col)++;
    }
}

/* Parse json over c (no validation). */
static vt_status parse_into(vt_config *c, const char *json, const char *src) {
    long nul = vt_json_escaped_nul(json, strlen(json));
    if (nul >= 0) {
        int line, col;
        line_col(json, (size_t)nul, &line, &col);
        return vt_fail(VT_ERR_USAGE, "%s: an escaped NUL (\\u0000) at line %d, column %d; no "
                       "key or value may contain one", src, line, col);
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
    if (!root) {
        size_t off = end && end >= json ? (size_t)(end - json) : 0;
        size_t rest = off;
        while (is_space(json[rest])) rest++;
        size_t last = 0; /* one past the last non-whitespace byte */
        for (size_t i = 0; json[i]; i++)
            if (!is_space(json[i])) last = i + 1;
        if (last == 0)
            return vt_fail(VT_ERR_USAGE, "%s: empty config; expected a JSON object such as {}",
                           src);
        int line, col;
        if (json[rest] == '\0') {
            /* cJSON reports the end for a truncated text and for a trailing comma before
             * the final bracket alike: point at the last character */
            line_col(json, last - 1, &line, &col);
            return vt_fail(VT_ERR_USAGE, "%s: invalid JSON at line %d, column %d, at the end of "
                           "the input (a missing closing bracket or a trailing comma?)", src, line,
                           col);
        }
        /* cJSON may report the whitespace after the culprit: step back to it */
        while (off > 0 && is_space(json[off])) off--;
        line_col(json, off, &line, &col);
        char near[32];
        snprintf(near, sizeof near, "%.20s", json + off);
        for (char *q = near; *q; q++)
            if (is_space(*q)) *q = ' ';
        return vt_fail(VT_ERR_USAGE, "%s: invalid JSON at line %d, column %d, near \"%s\"", src,
                       line, col, near);
    }
    vt_status st = VT_OK;
    if (!cJSON_IsObject(root)) {
        st = type_error(src, "top level", "a JSON object of sections", root);
        goto done;
    }
    for (const cJSON *sec = root->child; sec; sec = sec->next) {
        for (const cJSON *prev = root->child; prev != sec; prev = prev->next)
            if (strcmp(prev->string, sec->string) == 0) {
                st = vt_fail(VT_ERR_USAGE, "%s: section \"%s\" appears twice", src, sec->string);
                goto done;
            }
        int s = section_index(sec->string, strlen(sec->string));
        if (s < 0) { st = unknown_section(src, sec->string); goto done; }
        if (!cJSON_IsObject(sec)) {
            st = type_error(src, sec->string, "an object of keys", sec);
            goto done;
        }
        for (const cJSON *k = sec->child; k; k = k->next) {
            char path[256];
            snprintf(path, sizeof path, "%s.%s", sec->string, k->string);
            for (const cJSON *prev = sec->child; prev != k; prev = prev->next)
                if (strcmp(prev->string, k->string) == 0) {
                    st = vt_fail(VT_ERR_USAGE, "%s: key \"%s\" appears twice", src, path);
                    goto done;
                }
            int ri = row_index(path);
            if (ri < 0) { st = unknown_key(src, path); goto done; }
            if ((st = assign(c, ri, k, src)) != VT_OK) goto done;
        }
    }
done:
    cJSON_Delete(root);
    return st;
}

/* Apply one "section.key=value" to c (no validation). */
static vt_status set_one(vt_config *c, const char *assignment) {
    char src[192];
    snprintf(src, sizeof src, "--set %.160s%s", assignment, strlen(assignment) > 160 ? "..." : "");
    const char *eq = strchr(assignment, '=');
    if (!eq || eq == assignment)
        return vt_fail(VT_ERR_USAGE, "%s: expected section.key=value (e.g. --set model.width=384)",
                       src);
    char path[256];
    size_t plen = (size_t)(eq - assignment);
    if (plen >= sizeof path)
        return vt_fail(VT_ERR_USAGE, "%s: the key is longer than %zu characters", src,
                       sizeof path - 1);
    memcpy(path, assignment, plen);
    path[plen] = '\0';
    int ri = row_index(path);
    if (ri < 0) return unknown_key(src, path);
    const char *text = eq + 1;
    cJSON *v = cJSON_ParseWithOpts(text, NULL, 1);
    key_type t = schema[ri].type;
    int stringlike = t == KT_STRING || t == KT_CHOICE || t == KT_ENUM;
    if (v && vt_json_escaped_nul(text, strlen(text)) >= 0) {
        cJSON_Delete(v);
        return vt_fail(VT_ERR_USAGE, "%s: the JSON value holds an escaped NUL (\\u0000); no "
                       "value may contain one", src);
    }
    /* Unquoted text is a string; for string-valued keys any unquoted text is. */
    if (!v || (stringlike && !cJSON_IsString(v))) {
        cJSON_Delete(v);
        v = cJSON_CreateString(text);
        VT_ASSERT(v != NULL, "out of memory");
    }
    vt_status st = assign(c, ri, v, src);
    cJSON_Delete(v);
    if (st == VT_OK) c->set[ri] = 2;
    return st;
}

vt_status vt_config_set(vt_config *c, const char *assignment) {
    vt_config tmp = *c;
    vt_status st = set_one(&tmp, assignment);
    if (st == VT_OK) *c = tmp;
    return st;
}

vt_status vt_config_read_json(vt_config *c, const char *json, const char *source) {
    vt_config tmp;
    vt_config_defaults(&tmp);
    snprintf(tmp.source, sizeof tmp.source, "%s", source ? source : "");
    vt_status st = parse_into(&tmp, json, source && source[0] ? source : "config");
    if (st == VT_OK) *c = tmp;
    return st;
}

/* A config larger than this is not a config: the bound keeps CONFIG=/dev/zero-like
 * mistakes (a huge or endless file) from being read into memory. */
#define CONFIG_MAX_BYTES ((int64_t)16 << 20)

/* Read a whole config file (malloc'd, NUL-terminated). */
static vt_status read_file(const char *path, char **out) {
    char *buf;
    size_t len;
    vt_status st = vt_input_read(path, "config file", CONFIG_MAX_BYTES, &buf, &len);
    if (st != VT_OK) return st;
    size_t text_len = strlen(buf);
    if (text_len != len) {
        free(buf);
        return vt_fail(VT_ERR_USAGE, "%s: a NUL byte at offset %zu; expected JSON text", path,
                       text_len);
    }
    *out = buf;
    return VT_OK;
}

vt_status vt_config_read_file(vt_config *c, const char *path, const char *const *sets,
                              int n_sets) {
    vt_config tmp;
    vt_config_defaults(&tmp);
    vt_status st = VT_OK;
    if (path) {
        char *text = NULL;
        if ((st = read_file(path, &text)) != VT_OK) return st;
        snprintf(tmp.source, sizeof tmp.source, "%s", path);
        st = parse_into(&tmp, text, path);
        free(text);
    }
    for (int i = 0; i < n_sets && st == VT_OK; i++) st = set_one(&tmp, sets[i]);
    if (st == VT_OK) *c = tmp;
    return st;
}

/* ---------------------------------------------------------------- per-key checks */

/* Row-level check of a value already in c (it may have been set in code). */
static vt_status check_row(const vt_config *c, const key_row *r, const char *src) {
    const void *f = cfield(c, r);
    char what[96];
    vt_status st;
    switch (r->type) {
    case KT_INT: case KT_BOOL: return check_range(src, r->path, r, *(const int *)f);
    case KT_I64: return check_range(src, r->path, r, (double)*(const long long *)f);
    case KT_FLOAT:
        if (!isfinite(*(const double *)f))
            return vt_fail(VT_ERR_USAGE, "%s: %s: expected a finite number, found %g", src, r->path,
                           *(const double *)f);
        return check_range(src, r->path, r, *(const double *)f);
    case KT_ENUM: {
        int k = *(const int *)f;
        if (k < 0 || k >= r->n_choices)
            return vt_fail(VT_ERR_USAGE, "%s: %s: enum value %d out of range [0, %d)", src, r->path,
                           k, r->n_choices);
        return VT_OK;
    }
    case KT_STRING: case KT_CHOICE:
        VT_ASSERT(memchr(f, '\0', r->size) != NULL, "%s is not NUL-terminated", r->path);
        if (r->type == KT_CHOICE && choice_index(r, (const char *)f) < 0) {
            char list[256];
            choices_list(r, list, sizeof list);
            return vt_fail(VT_ERR_USAGE, "%s: %s: unknown value \"%.64s\"; expected one of %s", src,
                           r->path, (const char *)f, list);
        }
        return VT_OK;
    case KT_FARRAY:
        for (int k = 0; k < r->n; k++) {
            double v = ((const double *)f)[k];
            snprintf(what, sizeof what, "%s[%d]", r->path, k);
            if (!isfinite(v))
                return vt_fail(VT_ERR_USAGE, "%s: %s: expected a finite number, found %g", src,
                               what, v);
            if ((st = check_range(src, what, r, v)) != VT_OK) return st;
        }
        return VT_OK;
    case KT_ILIST: {
        int n = *(const int *)((const char *)c + r->count_offset);
        if (n < 0 || n > r->n)
            return vt_fail(VT_ERR_USAGE, "%s: %s: %d entries; expected 0 to %d", src, r->path, n,
                           r->n);
        for (int k = 0; k < n; k++) {
            snprintf(what, sizeof what, "%s[%d]", r->path, k);
            if ((st = check_range(src, what, r, ((const int *)f)[k])) != VT_OK) return st;
        }
        return VT_OK;
    }
    }
    return VT_OK;
}

vt_status vt_config_check_keys(const vt_config *c) {
    const char *src = c->source[0] ? c->source : "config";
    vt_status st;
    for (int i = 0; i < N_KEYS; i++)
        if ((st = check_row(c, &schema[i], src)) != VT_OK) return st;
    return VT_OK;
}

/* ---------------------------------------------------------------- output */

/* The JSON text of row r's value in c. */
static void sb_value(sbuf *b, const vt_config *c, const key_row *r) {
    const void *f = cfield(c, r);
    char num[40];
    switch (r->type) {
    case KT_INT: sb_putf(b, "%d", *(const int *)f); break;
    case KT_I64: sb_putf(b, "%lld", *(const long long *)f); break;
    case KT_FLOAT: fmt_double(num, sizeof num, *(const double *)f); sb_putf(b, "%s", num); break;
    case KT_BOOL: sb_putf(b, "%s", *(const int *)f ? "true" : "false"); break;
    case KT_STRING: case KT_CHOICE: sb_json_string(b, (const char *)f); break;
    case KT_ENUM: sb_json_string(b, r->choices[*(const int *)f]); break;
    case KT_FARRAY:
        sb_putf(b, "[");
        for (int k = 0; k < r->n; k++) {
            fmt_double(num, sizeof num, ((const double *)f)[k]);
            sb_putf(b, "%s%s", k ? ", " : "", num);
        }
        sb_putf(b, "]");
        break;
    case KT_ILIST: {
        int n = *(const int *)((const char *)c + r->count_offset);
        sb_putf(b, "[");
        for (int k = 0; k < n; k++) sb_putf(b, "%s%d", k ? ", " : "", ((const int *)f)[k]);
        sb_putf(b, "]");
        break;
    }
    }
}

static int in_section(const key_row *r, const char *sec) {
    size_t n = strlen(sec);
    return strncmp(r->path, sec, n) == 0 && r->path[n] == '.';
}

char *vt_config_to_json(const vt_config *c) {
    sbuf b = { 0 };
    sb_putf(&b, "{\n");
    for (int s = 0; s < N_SECTIONS; s++) {
        sb_putf(&b, "  \"%s\": {", sections[s].name);
        int first = 1;
        for (int i = 0; i < N_KEYS; i++) {
            if (!in_section(&schema[i], sections[s].name)) continue;
            sb_putf(&b, "%s\n    \"%s\": ", first ? "" : ",", leaf_of(schema[i].path));
            sb_value(&b, c, &schema[i]);
            first = 0;
        }
        sb_putf(&b, "\n  }%s\n", s + 1 < N_SECTIONS ? "," : "");
    }
    sb_putf(&b, "}\n");
    return b.p;
}

int vt_config_model_key(const char *key) {
    int i = row_index(key);
    return i < 0 ? -1 : schema[i].model;
}

/* Values are compared as their JSON text, which is exact (fmt_double round-trips). */
int vt_config_model_keys_differ(const vt_config *a, const vt_config *b, char *report, size_t len) {
    int n = 0;
    size_t used = 0;
    if (report && len) report[0] = '\0';
    for (int i = 0; i < N_KEYS; i++) {
        const key_row *r = &schema[i];
        if (!r->model) continue;
        sbuf va = { 0 }, vb = { 0 };
        sb_value(&va, a, r);
        sb_value(&vb, b, r);
        if (strcmp(va.p, vb.p) != 0) {
            if (report && used < len)
                used += (size_t)snprintf(report + used, len - used, "%s%s: %s vs %s", n ? "; " : "",
                                         r->path, va.p, vb.p);
            n++;
        }
        free(va.p);
        free(vb.p);
    }
    return n;
}

int vt_config_changes(const vt_config *a, const vt_config *b, vt_config_change *out, int max) {
    int n = 0;
    for (int i = 0; i < N_KEYS; i++) {
        const key_row *r = &schema[i];
        sbuf va = { 0 }, vb = { 0 };
        sb_value(&va, a, r);
        sb_value(&vb, b, r);
        if (strcmp(va.p, vb.p) != 0) {
            if (n < max) {
                vt_config_change *c = &out[n];
                c->key = r->path;
                snprintf(c->a, sizeof c->a, "%s", va.p);
                snprintf(c->b, sizeof c->b, "%s", vb.p);
                c->run_only = r->run_only;
            }
            n++;
        }
        free(va.p);
        free(vb.p);
    }
    return n;
}

static const char *type_name(const key_row *r, char *buf, size_t n) {
    switch (r->type) {
    case KT_INT: case KT_I64: return "int";
    case KT_FLOAT: return "float";
    case KT_BOOL: return "bool";
    case KT_STRING: return "string";
    case KT_CHOICE: case KT_ENUM: return "enum";
    case KT_FARRAY: snprintf(buf, n, "float[%d]", r->n); return buf;
    case KT_ILIST: return "int[]";
    }
    return "?";
}

static void sb_interval(sbuf *b, const key_row *r) {
    char lo[40], hi[40];
    fmt_double(lo, sizeof lo, r->lo);
    fmt_double(hi, sizeof hi, r->hi);
    sb_putf(b, "%s%s, %s%s", (r->open & LO_OPEN) ? "(" : "[", lo, hi,
            (r->open & HI_OPEN) ? ")" : "]");
}

/* Range or choices of row r; quote wraps each choice (Markdown: "`"). */
static void sb_range(sbuf *b, const key_row *r, const char *quote) {
    switch (r->type) {
    case KT_INT: case KT_I64: case KT_FLOAT: sb_interval(b, r); break;
    case KT_BOOL: sb_putf(b, "true, false"); break;
    case KT_STRING: sb_putf(b, "up to %zu characters", r->size - 1); break;
    case KT_CHOICE: case KT_ENUM:
        for (int k = 0; k < r->n_choices; k++)
            sb_putf(b, "%s%s%s%s", k ? ", " : "", quote,
                    r->choices[k][0] ? r->choices[k] : "\"\"", quote);
        break;
    case KT_FARRAY:
        sb_putf(b, "%s%d numbers, each in ", r->broadcast ? "1 or " : "", r->n);
        sb_interval(b, r);
        break;
    case KT_ILIST: sb_putf(b, "up to %d integers, each in ", r->n); sb_interval(b, r); break;
    }
}

/* Text for a Markdown table cell: '|' escaped, '<' as an entity (not an HTML tag). */
static void sb_cell(sbuf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '|') sb_putf(b, "\\|");
        else if (*s == '<') sb_putf(b, "&lt;");
        else sb_putf(b, "%c", *s);
    }
}

static const char *doc_intro =
    "# vitrain configuration reference\n"
    "\n"
    "<!-- Generated from the schema table in src/config.c and the kinds' entries\n"
    "     (src/pe/, src/data/) by `./vitrain help-config --markdown > configs/README.md`;\n"
    "     do not edit by hand (tests/test_config.c fails when this file is stale). -->\n"
    "\n"
    "A config file is one JSON object with a sub-object per section (`model`, `pe`,\n"
    "`performer`, `data`, `optim`, `train`, `eval`, `runtime`). Every key is optional: a key\n"
    "you leave out takes the default below, so `{}` is the full default run (ViT-B/16 with the\n"
    "DeiT recipe on an ImageFolder dataset under `data/imagenet`). Unknown sections and keys,\n"
    "values of the wrong type (a quoted `\"12\"` where a number is expected, `12.5` where an\n"
    "integer is) and values out of range are errors that name the file and key; an unknown\n"
    "key gets the nearest valid one suggested.\n"
    "\n"
    "```json\n"
    "{\n"
    "  \"model\": { \"preset\": \"vit_tiny\", \"img_size\": 32, \"patch_size\": 4 },\n"
    "  \"pe\": { \"kind\": \"rope_mixed\" },\n"
    "  \"data\": { \"kind\": \"cifar10\", \"root\": \"data/cifar10\" },\n"
    "  \"optim\": { \"lr\": 1e-3 },\n"
    "  \"train\": { \"epochs\": 100, \"batch_size\": 128 }\n"
    "}\n"
    "```\n"
    "\n"
    "- **Overrides.** `--set section.key=value` (repeatable) changes one key after the file\n"
    "  is read. The value is parsed as JSON when it parses (`--set model.width=384`,\n"
    "  `--set model.qkv_bias=false`, `--set data.mean=[0.5,0.5,0.5]`), otherwise it is taken\n"
    "  as a string (`--set data.root=/data/in1k`); string and enum keys always take the text\n"
    "  as written unless it is a quoted JSON string.\n"
    "- **Presets.** `model.preset` sets width, depth and heads; any of the three given\n"
    "  explicitly (in the file or by `--set`) wins over the preset.\n"
    "- **Conditional defaults.** Keys whose default column reads like \"the pe.kind's\" are\n"
    "  resolved from other keys when you do not give them (the PE kinds and dataset formats\n"
    "  at the end list their defaults); `pe.theta`, `pe.block_size`, `pe.train_img_size` and\n"
    "  `eval.batch_size` also treat an explicit 0, `data.train_transform` and\n"
    "  `data.eval_transform` an explicit `auto`, as \"the default\".\n"
    "- **Resolved config.** The config with every key resolved is printed at start, saved in\n"
    "  the run directory (`config.json`) and stored in checkpoints\n"
    "  (`__metadata__[\"config\"]`); it states every resolved value (the eval geometry\n"
    "  included), so running or evaluating with it gives the same run, bit for bit.\n"
    "- **Model keys.** Keys marked *Model key.* define the model and its position encoding:\n"
    "  a checkpoint's tensors depend on them. The others (training recipe, data, evaluation)\n"
    "  may differ between training a checkpoint and using it.\n"
    "- Intervals: `[a, b]` includes both ends, `(a, b)` excludes them.\n";

char *vt_config_doc_markdown(void) {
    vt_config d;
    vt_config_defaults(&d);
    sbuf b = { 0 };
    sb_putf(&b, "%s", doc_intro);
    for (int s = 0; s < N_SECTIONS; s++) {
        sb_putf(&b, "\n## %s\n\n%s\n\n", sections[s].name, sections[s].doc);
        sb_putf(&b, "| key | type | default | range / choices | description |\n");
        sb_putf(&b, "|---|---|---|---|---|\n");
        for (int i = 0; i < N_KEYS; i++) {
            const key_row *r = &schema[i];
            if (!in_section(r, sections[s].name)) continue;
            char tb[32];
            sb_putf(&b, "| `%s` | %s | ", r->path, type_name(r, tb, sizeof tb));
            if (r->auto_doc) {
                sb_cell(&b, r->auto_doc);
            } else if (r->type == KT_ENUM || r->type == KT_CHOICE) {
                const char *v = r->type == KT_ENUM ? r->choices[*(const int *)cfield(&d, r)]
                                                   : (const char *)cfield(&d, r);
                sb_putf(&b, "`%s`", v[0] ? v : "\"\"");
            } else {
                sbuf v = { 0 };
                sb_value(&v, &d, r);
                sb_putf(&b, "`%s`", v.p);
                free(v.p);
            }
            sb_putf(&b, " | ");
            sbuf rg = { 0 };
            sb_range(&rg, r, "`");
            sb_cell(&b, rg.p);
            free(rg.p);
            sb_putf(&b, " | ");
            sb_cell(&b, r->help);
            sb_putf(&b, "%s |\n", r->model ? " *Model key.*" : "");
        }
    }
    return b.p;
}

/* The text of vt_config_doc_text for every key (only NULL), one section or one key. */
static char *doc_text(const char *only) {
    vt_config d;
    vt_config_defaults(&d);
    sbuf b = { 0 };
    if (!only)
        sb_putf(&b, "Configuration keys (a JSON object with these sections; override any key with\n"
                    "--set section.key=value; configs/README.md has the full reference).\n");
    for (int s = 0; s < N_SECTIONS; s++) {
        int whole = !only || strcmp(only, sections[s].name) == 0;
        if (!whole && (strncmp(only, sections[s].name, strlen(sections[s].name)) != 0 ||
                       only[strlen(sections[s].name)] != '.'))
            continue;
        sb_putf(&b, "%s%s\n", b.p ? "\n" : "", sections[s].name);
        for (int i = 0; i < N_KEYS; i++) {
            const key_row *r = &schema[i];
            if (!in_section(r, sections[s].name) || (!whole && strcmp(r->path, only) != 0)) continue;
            char tb[32];
            sb_putf(&b, "  %-26s %-8s default ", r->path, type_name(r, tb, sizeof tb));
            if (r->auto_doc) sb_putf(&b, "%s", r->auto_doc);
            else sb_value(&b, &d, r);
            sb_putf(&b, "; ");
            sb_range(&b, r, "");
            sb_putf(&b, "\n      %s\n", r->help);
        }
    }
    return b.p;
}

char *vt_config_doc_text(void) { return doc_text(NULL); }

vt_status vt_config_doc_one(const char *name, char **out) {
    *out = NULL;
    if (section_index(name, strlen(name)) < 0 && row_index(name) < 0) {
        if (!strchr(name, '.')) {
            const char *hint = nearest_name(name, 1);
            char list[256] = "";
            for (int s = 0; s < N_SECTIONS; s++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", s ? ", " : "", sections[s].name);
            if (hint) return vt_fail(VT_ERR_USAGE, "help-config: unknown section \"%s\"; did you mean \"%s\"? "
                                     "(sections: %s)", name, hint, list);
            return vt_fail(VT_ERR_USAGE, "help-config: unknown section \"%s\" (sections: %s)", name, list);
        }
        return unknown_key("help-config", name);
    }
    *out = doc_text(name);
    return VT_OK;
}
