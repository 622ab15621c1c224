/* config.h - the typed configuration and its schema.
 *
 * config.c is the only cJSON user: one schema table (name, type, default, range or
 * choices, help, whether the key defines the model) drives parsing, defaults, the per-key
 * checks, --set overrides, the JSON dump, `vitrain help-config` and configs/README.md.
 * Every field of the sections (below; model, pe, performer in model_spec.h; data in
 * data/data_config.h) has one row in that table under "section.key". Enumerations are
 * parsed from strings.
 *
 * A config read here is not yet resolved: presets, kind-dependent defaults and the rules
 * between keys are resolve.h's (vt_resolve), which runs once after parsing and --set and
 * writes every resolved value into the config. Code below it reads values only.
 *
 * Sections: model, pe, performer (model_spec.h: what defines a model, the part of a config
 * vit.h and pe/ receive), data (data/data_config.h: the part data/ receives), optim,
 * train, eval, runtime.
 */
#ifndef VT_CONFIG_H
#define VT_CONFIG_H

#include <stddef.h>

#include "data/data_config.h"
#include "model_spec.h"
#include "status.h"

#define VT_MAX_RES 16
#define VT_CONFIG_MAX_KEYS 128 /* capacity of vt_config.set (schema rows) */

/* model.preset: name, width, depth, heads (resolve.c expands them; "" is no preset). */
#define VT_MODEL_PRESETS(X)                                                           \
    X("vit_tiny", 192, 12, 3) X("vit_small", 384, 12, 6) X("vit_base", 768, 12, 12) \
    X("vit_large", 1024, 24, 16)

typedef enum { VT_OPT_ADAMW = 0, VT_OPT_SGD } vt_optim_name;
typedef enum { VT_SCHED_COSINE = 0, VT_SCHED_CONSTANT } vt_schedule;
typedef enum { VT_PROGRESS_AUTO = 0, VT_PROGRESS_ALWAYS, VT_PROGRESS_NEVER } vt_progress;
/* runtime.gemm_tune: how a new run chooses its GEMM blocking (src/blocking.h). */
typedef enum { VT_GEMM_TUNE_ON = 0, VT_GEMM_TUNE_OFF } vt_gemm_tune;
typedef enum { VT_PRECISION_FP32 = 0, VT_PRECISION_BF16 } vt_precision;

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
    int ckpt_every_steps;   /* optimizer steps; 0 = off */
    double ckpt_every_minutes; /* wall-clock minutes since the last pair; 0 = off */
    int keep_checkpoints;   /* checkpoint pairs kept in the run directory (>= 1) */
    int log_every;          /* optimizer steps between metric lines */
    vt_precision precision; /* GEMM and attention-product operands (src/precision.h) */
    char run_dir[VT_STR];
    char init[VT_STR];      /* weights to start from (weights.h); "" = none */
    int init_allow_unexpected;
} vt_train_config;

typedef struct {
    int batch_size;
    int resolutions[VT_MAX_RES]; /* extra evaluation image sizes; n_resolutions used */
    int n_resolutions;
    int max_samples;             /* first samples of the val split evaluated; 0 = all */
} vt_eval_config;

typedef struct {
    vt_progress progress;
    vt_gemm_tune gemm_tune;
    double comm_timeout;    /* seconds; the MPI watchdog's floor (dist.h), 0 = off */
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
    /* set[i] != 0: schema row i was given explicitly (1 config file, 2 --set). Only
     * resolve reads it: keys left unset get their preset / kind-dependent default there. */
    unsigned char set[VT_CONFIG_MAX_KEYS];
} vt_config;

/* Defaults for every key (timm ViT-B/16 + DeiT recipe; once resolved, a valid config on
 * its own: imagefolder data under data/imagenet). Clears the explicitly-set record. */
void vt_config_defaults(vt_config *c);
/* Read a JSON text over the defaults and check every key on its own (type, range,
 * choices). Errors name the source and the JSON path ("model.heads"), what was expected
 * and found, and suggest the nearest valid key for unknown ones (VT_ERR_USAGE). Not
 * resolved: resolve.h's vt_resolve_json does both. */
vt_status vt_config_read_json(vt_config *c, const char *json, const char *source);
/* Read the JSON file path (NULL: start from the defaults), then apply n_sets "--set"
 * assignments in order; per-key checks as above, VT_ERR_RUNTIME if the file cannot be
 * read. Not resolved: resolve.h's vt_resolve_file does both. */
vt_status vt_config_read_file(vt_config *c, const char *path, const char *const *sets,
                              int n_sets);
/* Apply one "--set section.key=value" override (value parsed as JSON if it parses,
 * else as a string); the key is recorded as given. Resolve afterwards. */
vt_status vt_config_set(vt_config *c, const char *assignment);
/* The per-key checks (type range, choices) of every value in c, e.g. after code set
 * fields. Messages name c->source (or "config") and the key. */
vt_status vt_config_check_keys(const vt_config *c);
/* 1 if the key ("pe.theta") was given explicitly, 0 if not; -1 for an unknown key.
 * For resolve (and tests): code below it reads values only. */
int vt_config_is_set(const vt_config *c, const char *key);
/* Where the key's value came from, for messages: 2 a --set, 1 the config file (or JSON
 * text), 0 not given; -1 for an unknown key. */
int vt_config_origin(const vt_config *c, const char *key);
/* Put the schema default of key (which must exist) back into c. */
void vt_config_restore_default(vt_config *c, const char *key);

/* Keys that define the model or its position encoding (the schema marks them): the
 * shapes, layouts and every hyperparameter a checkpoint's tensors depend on (model.width,
 * pe.theta, performer.features, ...), not the training recipe, data or evaluation keys
 * (model.drop_path, data.*, eval.*), which a checkpoint may be used with freely.
 * vt_config_model_key(key) is 1 for such a key, 0 for another, -1 for an unknown one.
 * vt_config_model_keys_differ compares two resolved configs on exactly those keys and
 * returns how many differ; report (may be NULL) receives "key: A vs B" for each, joined
 * by "; " and truncated to len bytes. */
int vt_config_model_key(const char *key);
int vt_config_model_keys_differ(const vt_config *a, const vt_config *b, char *report, size_t len);

/* One key whose value differs between two configs: its value in each (as JSON, cut to
 * the buffer) and whether it only changes how a run goes (threads, logging, progress,
 * checkpoint cadence and count, the run directory, loader threads), not what it computes. */
typedef struct {
    const char *key;
    char a[160], b[160];
    int run_only;
} vt_config_change;
/* Compare every key of a and b (schema order): the number that differ; the first max of
 * them into out. */
int vt_config_changes(const vt_config *a, const vt_config *b, vt_config_change *out, int max);

/* The config as pretty JSON (malloc'd; caller frees): every key, in schema order. Read
 * back with vt_config_read_json it gives the same values (numbers are printed in the
 * shortest form strtod reads back exactly). */
char *vt_config_to_json(const vt_config *c);
/* Markdown documentation of every key (malloc'd); resolve.h's vt_resolve_doc_markdown
 * adds the kinds' defaults and rules: configs/README.md is that text. */
char *vt_config_doc_markdown(void);
/* Plain-text key list for --help (malloc'd). */
char *vt_config_doc_text(void);
/* The same text for one section ("optim") or one key ("optim.lr") into *out (malloc'd);
 * an unknown name is VT_ERR_USAGE with the nearest valid one suggested. */
vt_status vt_config_doc_one(const char *name, char **out);

#endif
