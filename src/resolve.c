/* resolve.c - resolution of a parsed config (contract in resolve.h): presets, dependent
 * defaults and the rules between keys, each applied once; the data pipeline's view of
 * the result; the generated reference with the kinds' defaults and rules. */
#include "resolve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/augment.h"
#include "data/formats.h"
#include "pe/kinds.h"

#define BAD(...) return vt_fail(VT_ERR_USAGE, __VA_ARGS__)

typedef struct {
    const char *name;
    int width, depth, heads;
} preset_shape;

#define PRESET_ROW(n, w, d, h) { n, w, d, h },
static const preset_shape presets[] = { VT_MODEL_PRESETS(PRESET_ROW) };

static int given(const vt_config *c, const char *key) {
    int s = vt_config_is_set(c, key);
    VT_ASSERT(s >= 0, "config key \"%s\" is not in the schema", key);
    return s;
}

/* Head dim, or 0 when heads does not divide width (a rule checked later). */
static int head_dim(const vt_model_config *m) {
    return m->heads > 0 && m->width % m->heads == 0 ? m->width / m->heads : 0;
}

/* ---------------------------------------------------------------- defaults */

static void resolve_model(vt_config *c) {
    vt_model_config *m = &c->model;
    const preset_shape *ps = NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(presets[i].name, m->preset) == 0) ps = &presets[i];
    if (!given(c, "model.width")) {
        vt_config_restore_default(c, "model.width");
        if (ps) m->width = ps->width;
    }
    if (!given(c, "model.depth")) {
        vt_config_restore_default(c, "model.depth");
        if (ps) m->depth = ps->depth;
    }
    if (!given(c, "model.heads")) {
        vt_config_restore_default(c, "model.heads");
        if (ps) m->heads = ps->heads;
    }
}

/* The data format's defaults: classes, and the train / eval geometry of fixed-size
 * formats (simple, resize) versus images of any size (rrc, center_crop). An explicit
 * data.crop_pct asks for the center crop on any format. */
static void resolve_data(vt_config *c) {
    vt_data_config *d = &c->data;
    const vt_dataset_kind *k = vt_dataset_kind_of(d->kind);
    if (!given(c, "model.num_classes")) {
        vt_config_restore_default(c, "model.num_classes");
        int n = k->classes ? k->classes(d) : 0;
        if (n > 0) c->model.num_classes = n;
    }
    if (!given(c, "data.train_transform") || d->train_transform == VT_TT_AUTO)
        d->train_transform = k->fixed_size ? VT_TT_SIMPLE : VT_TT_RRC;
    if (!given(c, "data.eval_transform") || d->eval_transform == VT_ET_AUTO)
        d->eval_transform = k->fixed_size && !given(c, "data.crop_pct") ? VT_ET_RESIZE
                                                                      : VT_ET_CENTER_CROP;
}

const char *vt_resolve_classes_origin(const vt_config *c, char *buf, size_t len) {
    const vt_dataset_kind *k = vt_dataset_kind_of(c->data.kind);
    const char *kind = vt_data_kind_name(c->data.kind);
    if (given(c, "model.num_classes")) snprintf(buf, len, "given: model.num_classes");
    else if (k->classes && k->classes(&c->data) > 0)
        snprintf(buf, len, "from the data: data.kind = %s, %s%s", kind,
                 k->needs_root ? "data.root = " : "", k->needs_root ? c->data.root : "its fixed classes");
    else if (k->classes)
        snprintf(buf, len, "model.num_classes' default: the classes of data.root = %s could not be read",
                 c->data.root);
    else
        snprintf(buf, len, "model.num_classes' default (data.kind = %s takes the model's)", kind);
    return buf;
}

/* The PE kind's defaults (its entry's resolve hook over the neutral schema defaults),
 * then the kind-independent ones. */
static void resolve_pe(vt_config *c) {
    vt_pe_config *pe = &c->pe;
    vt_config neutral;
    vt_config_defaults(&neutral);
    vt_pe_config def = neutral.pe;
    const vt_pe_kind_ops *k = vt_pe_kind_entry(pe->kind);
    if (k->resolve) k->resolve(pe, head_dim(&c->model), &def);
    if (!given(c, "pe.ape")) pe->ape = def.ape;
    if (!given(c, "pe.positions")) pe->positions = def.positions;
    if (!given(c, "pe.share")) pe->share = def.share;
    if (!given(c, "pe.theta") || pe->theta == 0) pe->theta = def.theta;
    if (!given(c, "pe.block_size") || pe->block_size == 0) pe->block_size = def.block_size;
    if (!given(c, "pe.coord_dim")) pe->coord_dim = c->model.in_chans == 4 ? 3 : 2;
    if (!given(c, "pe.train_img_size") || pe->train_img_size == 0)
        pe->train_img_size = c->model.img_size;
}

static void resolve_defaults(vt_config *c) {
    resolve_model(c);
    resolve_data(c);
    resolve_pe(c);
    if (!given(c, "eval.batch_size") || c->eval.batch_size == 0)
        c->eval.batch_size = c->train.batch_size;
}

/* ---------------------------------------------------------------- rules */

/* "the nearest valid sizes are 16 and 32" for an image size S that patch does not divide. */
static void valid_sizes(int S, int patch, char *buf, size_t len) {
    int lo = patch > 0 ? S / patch * patch : 0;
    if (patch < 1) snprintf(buf, len, "model.patch_size must be positive");
    else if (lo < patch) snprintf(buf, len, "the smallest valid size is %d", patch);
    else snprintf(buf, len, "the nearest valid sizes are %d and %d", lo, lo + patch);
}

vt_status vt_resolve_image_size(int S, int patch, const char *what) {
    if (patch >= 1 && S >= 1 && S % patch == 0) return VT_OK;
    char near[96];
    valid_sizes(S, patch, near, sizeof near);
    BAD("%s = %d is not a multiple of model.patch_size = %d; %s", what, S, patch, near);
}

/* " (--set)" after a value a --set gave, when the message names the file. */
static const char *by_set(const vt_config *c, const char *key) {
    return vt_config_origin(c, key) == 2 ? " (--set)" : "";
}

/* The source a message about keys a and b names: "--set" when the --sets gave every one
 * of them that was given, else the config's source (values from --set marked as such). */
static const char *rule_source(const vt_config *c, const char *src, const char *a, const char *b) {
    int oa = vt_config_origin(c, a), ob = vt_config_origin(c, b);
    return (oa == 2 || ob == 2) && oa != 1 && ob != 1 ? "--set" : src;
}

/* The image-size rule for key (schema row row_key) of c, naming where each value came
 * from and the nearest valid sizes. */
static vt_status image_size_rule(const vt_config *c, const char *src, const char *key, const char *row_key,
                                 int S, int patch) {
    if (patch >= 1 && S >= 1 && S % patch == 0) return VT_OK;
    const char *from = rule_source(c, src, row_key, "model.patch_size");
    int set = strcmp(from, "--set") == 0;
    char near[96];
    valid_sizes(S, patch, near, sizeof near);
    BAD("%s: %s = %d%s is not a multiple of model.patch_size = %d%s; %s", from, key, S,
        set ? "" : by_set(c, row_key), patch, set ? "" : by_set(c, "model.patch_size"), near);
}

/* "rope_axial, rope_mixed, ..." from the registry. */
static void rotary_kinds(char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    for (int k = 0; k < VT_PE_KIND_COUNT && used < n; k++)
        if (vt_pe_kind_entry((vt_pe_kind)k)->rotary)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "",
                                     vt_pe_kind_name((vt_pe_kind)k));
}

static vt_status check_model(const vt_config *c, const char *src) {
    const vt_model_config *m = &c->model;
    const vt_pe_config *pe = &c->pe;
    vt_status st;
    if (m->width % m->heads != 0) {
        const char *from = rule_source(c, src, "model.heads", "model.width");
        int set = strcmp(from, "--set") == 0;
        BAD("%s: model.heads = %d%s does not divide model.width = %d%s", from, m->heads,
            set ? "" : by_set(c, "model.heads"), m->width, set ? "" : by_set(c, "model.width"));
    }
    if (vt_model_mlp_hidden(m) < 1)
        BAD("%s: model.mlp_ratio = %g gives an MLP hidden width of int(%d x %g) = 0; expected "
            "a hidden width of at least 1 (mlp_ratio >= 1/%d)", src, m->mlp_ratio, m->width,
            m->mlp_ratio, m->width);
    if ((st = image_size_rule(c, src, "model.img_size", "model.img_size", m->img_size, m->patch_size)))
        return st;
    if ((st = image_size_rule(c, src, "pe.train_img_size", "pe.train_img_size", pe->train_img_size,
                              m->patch_size)))
        return st;
    for (int i = 0; i < c->eval.n_resolutions; i++) {
        char key[48];
        snprintf(key, sizeof key, "eval.resolutions[%d]", i);
        if ((st = image_size_rule(c, src, key, "eval.resolutions", c->eval.resolutions[i], m->patch_size)))
            return st;
    }
    if (m->in_chans != 1 && m->in_chans != 3 && m->in_chans != 4)
        BAD("%s: model.in_chans = %d is not supported; expected 1 (grayscale), 3 (RGB) or 4 "
            "(RGB-D)", src, m->in_chans);
    if (m->attention == VT_ATTN_PERFORMER && m->attn_drop_rate > 0)
        BAD("%s: model.attn_drop_rate = %g applies to softmax attention only; set it to 0 with "
            "model.attention = performer", src, m->attn_drop_rate);
    if (m->depth_as_channel && m->in_chans != 4)
        BAD("%s: model.depth_as_channel needs model.in_chans = 4 (RGB-D); found %d", src,
            m->in_chans);
    return VT_OK;
}

/* The rules between pe and model, then the kind's own (its check hook) and the APE's. */
static vt_status check_pe(const vt_config *c, const char *src) {
    const vt_model_config *m = &c->model;
    const vt_pe_config *pe = &c->pe;
    const vt_pe_kind_ops *k = vt_pe_kind_entry(pe->kind);
    const char *kind = vt_pe_kind_name(pe->kind);
    char rot[256];
    rotary_kinds(rot, sizeof rot);
    if (m->in_chans == 4 && !k->rotary)
        BAD("%s: model.in_chans = 4 (RGB-D) positions tokens by depth and needs a rotary pe.kind "
            "(%s) with pe.coord_dim = 3; found pe.kind = %s", src, rot, kind);
    if (m->in_chans == 4 && pe->coord_dim != 3)
        BAD("%s: model.in_chans = 4 (RGB-D) needs pe.coord_dim = 3 (depth-aware); found %d", src,
            pe->coord_dim);
    if (pe->coord_dim != 2 && !k->rotary)
        BAD("%s: pe.coord_dim = %d needs a rotary pe.kind (%s); found pe.kind = %s", src,
            pe->coord_dim, rot, kind);
    vt_status st;
    if (k->check && (st = k->check(pe, m->width / m->heads, src))) return st;
    return vt_ape_check(pe, m->width, src);
}

/* The rules of the data section, then the format's own (its descriptor's check). */
static vt_status check_data(const vt_config *c, const char *src) {
    const vt_data_config *d = &c->data;
    const vt_dataset_kind *k = vt_dataset_kind_of(d->kind);
    if (k->needs_root && d->root[0] == '\0')
        BAD("%s: data.root is empty; data.kind = %s needs the dataset directory", src,
            vt_data_kind_name(d->kind));
    if (d->scale[0] > d->scale[1])
        BAD("%s: data.scale = [%g, %g]: expected min <= max", src, d->scale[0], d->scale[1]);
    if (d->ratio[0] > d->ratio[1])
        BAD("%s: data.ratio = [%g, %g]: expected min <= max", src, d->ratio[0], d->ratio[1]);
    vt_randaug ra;
    if (vt_randaug_parse(d->auto_augment, &ra) != VT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", vt_last_error());
        BAD("%s: data.auto_augment: %s", src, why);
    }
    if (d->synthetic_depth_label && c->model.in_chans != 4)
        BAD("%s: data.synthetic_depth_label needs model.in_chans = 4 (RGB-D); found %d", src,
            c->model.in_chans);
    if (!k->check) return VT_OK;
    vt_data_spec spec;
    vt_resolve_data_spec(c, &spec);
    return k->check(&spec, (int64_t)c->train.batch_size * c->train.accum_steps, src);
}

static vt_status check_rules(const vt_config *c, const char *src) {
    vt_status st;
    if ((st = check_model(c, src))) return st;
    if ((st = check_pe(c, src))) return st;
    if ((st = check_data(c, src))) return st;
    if (c->optim.min_lr > c->optim.lr)
        BAD("%s: optim.min_lr = %g exceeds optim.lr = %g", src, c->optim.min_lr, c->optim.lr);
    if (c->train.epochs == 0 && c->train.steps == 0)
        BAD("%s: train.epochs and train.steps are both 0; set one of them", src);
    return VT_OK;
}

/* ---------------------------------------------------------------- entry points */

vt_status vt_resolve(vt_config *c) {
    const char *src = c->source[0] ? c->source : "config";
    vt_status st = vt_config_check_keys(c);
    if (st) return st;
    resolve_defaults(c);
    /* a dependent default may leave a row's range (liere's block_size = hd) */
    if ((st = vt_config_check_keys(c))) return st;
    return check_rules(c, src);
}

vt_status vt_resolve_json(vt_config *c, const char *json, const char *source) {
    vt_config tmp;
    vt_status st = vt_config_read_json(&tmp, json, source);
    if (st == VT_OK) st = vt_resolve(&tmp);
    if (st == VT_OK) *c = tmp;
    return st;
}

vt_status vt_resolve_file(vt_config *c, const char *path, const char *const *sets, int n_sets) {
    vt_config tmp;
    vt_status st = vt_config_read_file(&tmp, path, sets, n_sets);
    if (st == VT_OK) st = vt_resolve(&tmp);
    if (st == VT_OK) *c = tmp;
    return st;
}

const vt_model_spec *vt_resolve_model_spec(const vt_config *c, vt_model_spec *out) {
    memset(out, 0, sizeof *out);
    out->model = c->model;
    out->pe = c->pe;
    out->performer = c->performer;
    return out;
}

void vt_resolve_data_spec(const vt_config *c, vt_data_spec *out) {
    memset(out, 0, sizeof *out);
    out->data = c->data;
    vt_status st = vt_randaug_parse(c->data.auto_augment, &out->randaug);
    VT_ASSERT(st == VT_OK, "data.auto_augment \"%s\" does not parse (not resolved?)",
              c->data.auto_augment);
    out->img_size = c->model.img_size;
    out->in_chans = c->model.in_chans;
    out->num_classes = c->model.num_classes;
    out->seed = (uint64_t)c->train.seed;
    out->label_smoothing = c->train.label_smoothing;
    out->train_batch = c->train.batch_size;
    out->eval_batch = c->eval.batch_size;
}

/* ---------------------------------------------------------------- documentation */

char *vt_resolve_doc_markdown(void) {
    char *doc = NULL;
    size_t len = 0;
    FILE *t = open_memstream(&doc, &len);
    VT_ASSERT(t != NULL, "out of memory");
    char *keys = vt_config_doc_markdown();
    fputs(keys, t);
    free(keys);
    fprintf(t, "\n## PE kinds\n\nWhat each `pe.kind` sets for the keys a config leaves out, "
               "and the rules it adds (from the kind's entry in `src/pe/<kind>.c`). Rotary "
               "kinds may also carry an APE, take RGB-D input and a `pe.coord_dim` other than "
               "2.\n\n| kind | rotary | defaults | rules |\n|---|---|---|---|\n");
    for (int k = 0; k < VT_PE_KIND_COUNT; k++) {
        const vt_pe_kind_ops *e = vt_pe_kind_entry((vt_pe_kind)k);
        fprintf(t, "| `%s` | %s | %s | %s |\n", vt_pe_kind_name((vt_pe_kind)k),
                e->rotary ? "yes" : "no", e->defaults_doc, e->rules_doc);
    }
    fprintf(t, "\n## Dataset formats\n\nWhat each `data.kind` is (its descriptor in "
               "`src/data/`): the classes it defines (when the config or the files it names fix "
               "them, as for CIFAR and image folders, they are `model.num_classes`'s default, and "
               "training with another count is an error; otherwise the default is 1000 and the "
               "labels must be below it), its default train and eval geometry, and the "
               "rules it adds. `data/README.md` shows where each format's files go.\n\n"
               "| kind | classes | data.train_transform, data.eval_transform | reads data.root "
               "| rules |\n|---|---|---|---|---|\n");
    for (int k = 0; k < VT_DATA_KIND_COUNT; k++) {
        const vt_dataset_kind *d = vt_dataset_kind_of((vt_data_kind)k);
        fprintf(t, "| `%s` | %s | %s | %s | %s |\n", vt_data_kind_name((vt_data_kind)k),
                d->classes_doc,
                d->fixed_size ? "`simple`, `resize` (`center_crop` when data.crop_pct is given)"
                              : "`rrc`, `center_crop`",
                d->needs_root ? "yes" : "no", d->rules_doc);
    }
    VT_ASSERT(fclose(t) == 0, "out of memory");
    return doc;
}
