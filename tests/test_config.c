/* test_config.c - the config system: defaults, parsing, every error kind, nearest-key
 * hints, presets, kind-dependent defaults, --set, the JSON round trip, and the check
 * that configs/README.md is exactly vt_config_doc_markdown() (run from the repo root).
 *
 * JSON in this file is written with single quotes for readability; q() turns them
 * into double quotes before parsing.
 */
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "data/formats.h"
#include "harness.h"
#include "test_util.h"
#include "pe/kinds.h"
#include "resolve.h"

#define SRC "configs/x.json"

/* The JSON text s with ' replaced by " (static buffer, one at a time). */
static const char *q(const char *s) {
    static char buf[4096];
    size_t n = strlen(s);
    if (n >= sizeof buf) n = sizeof buf - 1;
    for (size_t i = 0; i < n; i++) buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[n] = '\0';
    return buf;
}

static vt_status parse(vt_config *c, const char *json_sq) {
    return vt_resolve_json(c, q(json_sq), SRC);
}

/* Parsing json_sq fails with VT_ERR_USAGE and a message containing every needle. */
static void expect_error(const char *json_sq, const char *n1, const char *n2) {
    vt_config c;
    vt_clear_error();
    vt_status st = parse(&c, json_sq);
    const char *msg = vt_last_error();
    CHECK(st == VT_ERR_USAGE, "%s: status %d (message: %s)", json_sq, st, msg);
    CHECK(strstr(msg, SRC) != NULL, "%s: message lacks the source: %s", json_sq, msg);
    CHECK(strstr(msg, n1) != NULL, "%s: message lacks \"%s\": %s", json_sq, n1, msg);
    if (n2) CHECK(strstr(msg, n2) != NULL, "%s: message lacks \"%s\": %s", json_sq, n2, msg);
}

/* Applying assignment to a valid default config fails with every needle. */
static void expect_set_error(const char *assignment, const char *n1, const char *n2) {
    vt_config c;
    vt_config_defaults(&c);
    vt_config before = c;
    vt_clear_error();
    vt_status st = vt_config_set(&c, assignment);
    const char *msg = vt_last_error();
    CHECK(st == VT_ERR_USAGE, "--set %s: status %d", assignment, st);
    CHECK(strstr(msg, n1) != NULL, "--set %s: message lacks \"%s\": %s", assignment, n1, msg);
    if (n2) CHECK(strstr(msg, n2) != NULL, "--set %s: message lacks \"%s\": %s", assignment, n2, msg);
    CHECK(memcmp(&before, &c, sizeof c) == 0, "--set %s: a failed set changed the config",
          assignment);
}

static void test_defaults(void) {
    vt_config c;
    vt_config_defaults(&c);
    CHECK(vt_resolve(&c) == VT_OK, "defaults invalid: %s", vt_last_error());
    CHECK(c.model.width == 768 && c.model.depth == 12 && c.model.heads == 12, "ViT-B shape %d %d %d",
          c.model.width, c.model.depth, c.model.heads);
    CHECK(c.model.patch_size == 16 && c.model.img_size == 224 && c.model.in_chans == 3 &&
          c.model.num_classes == 1000, "ViT-B/16 input");
    CHECK(c.model.pool == VT_POOL_TOKEN && c.model.qkv_bias == 1 && c.model.layer_scale == 0,
          "pool/qkv_bias/layer_scale");
    CHECK_CLOSE(c.model.mlp_ratio, 4, 0, 0, "mlp_ratio");
    CHECK(c.pe.kind == VT_PE_APE && c.pe.ape == VT_APE_LEARNED, "timm default PE: learned APE");
    CHECK(c.pe.coord_dim == 2 && c.pe.train_img_size == 224, "coord_dim %d train_img_size %d",
          c.pe.coord_dim, c.pe.train_img_size);
    CHECK(c.optim.name == VT_OPT_ADAMW && c.optim.lr == 5e-4 && c.optim.min_lr == 1e-5 &&
          c.optim.weight_decay == 0.05 && c.optim.betas[0] == 0.9 && c.optim.betas[1] == 0.999 &&
          c.optim.eps == 1e-8 && c.optim.warmup_epochs == 5 && c.optim.clip_grad == 0 &&
          c.optim.schedule == VT_SCHED_COSINE, "DeiT optimizer recipe");
    CHECK(c.data.kind == VT_DATA_IMAGEFOLDER && c.data.mean[1] == 0.456 && c.data.std[2] == 0.225 &&
          c.data.crop_pct == 0.875 && c.data.hflip == 0.5 && c.data.on_error == VT_ONERR_FAIL &&
          strcmp(c.data.train_split, "train") == 0 && strcmp(c.data.val_split, "val") == 0 &&
          c.data.workers == 0, "data defaults");
    CHECK(c.train.epochs == 300 && c.train.batch_size == 128 && c.train.accum_steps == 1 &&
          c.train.label_smoothing == 0.1 && c.train.seed == 0 && c.train.threads == 0 &&
          c.train.eval_every == 1 && c.train.ckpt_every == 1 && c.train.log_every == 50 &&
          c.train.run_dir[0] == '\0', "train defaults");
    CHECK(c.eval.batch_size == 128 && c.eval.n_resolutions == 0, "eval.batch_size resolves to %d",
          c.eval.batch_size);
    CHECK(c.performer.features == 256 && c.performer.redraw_every == 1000 &&
          strcmp(c.performer.kernel, "positive") == 0, "performer defaults");
    CHECK(c.runtime.progress == VT_PROGRESS_AUTO, "progress");
    CHECK(vt_config_is_set(&c, "model.width") == 0 && vt_config_is_set(&c, "model.nope") == -1,
          "explicit-set record of defaults");
    CHECK(strcmp(vt_pe_kind_name(VT_PE_LIERE_COMMUTE), "liere_commute") == 0, "pe kind name");
    vt_config e;
    CHECK(parse(&e, "{}") == VT_OK, "{} rejected: %s", vt_last_error());
    CHECK(memcmp(&e.model, &c.model, sizeof c.model) == 0 && strcmp(e.source, SRC) == 0,
          "{} differs from the defaults");
}

static const char *full_example =
    "{\n"
    "  'model': {'preset': 'vit_small', 'mlp_ratio': 2.5, 'patch_size': 4, 'img_size': 32,\n"
    "            'in_chans': 3, 'pool': 'avg', 'drop_rate': 0.1, 'attn_drop_rate': 0.05,\n"
    "            'drop_path': 0.2, 'layer_scale': 1e-5, 'qkv_bias': false, 'depth_as_channel': false},\n"
    "  'pe': {'kind': 'cayley', 'inner': 'axial', 'share': 'layers', 'positions': 'interpolate',\n"
    "         'ape': 'sincos', 'init': 'normal', 'init_std': 0.02, 'init_scale': 0.5},\n"
    "  'performer': {'features': 64, 'redraw_every': 0, 'kernel': 'relu'},\n"
    "  'data': {'kind': 'cifar100', 'root': 'data/cifar-100', 'label': 'coarse',\n"
    "           'mean': [0.5, 0.5, 0.5], 'std': [0.25, 0.25, 0.25], 'workers': 3, 'on_error': 'skip',\n"
    "           'train_split': 'tr', 'val_split': 'te', 'crop_pct': 1, 'hflip': 0},\n"
    "  'optim': {'name': 'sgd', 'lr': 0.1, 'min_lr': 0, 'weight_decay': 1e-4, 'momentum': 0.95,\n"
    "            'betas': [0.8, 0.99], 'eps': 1e-6, 'warmup_epochs': 0.5, 'warmup_steps': 100,\n"
    "            'warmup_lr': 0.001, 'schedule': 'constant', 'clip_grad': 1.0},\n"
    "  'train': {'epochs': 7, 'steps': 1000, 'batch_size': 64, 'accum_steps': 2,\n"
    "            'label_smoothing': 0, 'seed': 9007199254740991, 'threads': 2, 'eval_every': 0,\n"
    "            'eval_every_steps': 250, 'ckpt_every': 3, 'log_every': 10, 'run_dir': 'runs/a b'},\n"
    "  'eval': {'batch_size': 256, 'resolutions': [16, 48, 64]},\n"
    "  'runtime': {'progress': 'never'}\n"
    "}\n";

static void test_full_example(void) {
    vt_config c;
    CHECK(parse(&c, full_example) == VT_OK, "full example: %s", vt_last_error());
    const vt_model_config *m = &c.model;
    CHECK(m->width == 384 && m->depth == 12 && m->heads == 6, "vit_small %d/%d/%d", m->width,
          m->depth, m->heads);
    CHECK(m->mlp_ratio == 2.5 && m->patch_size == 4 && m->img_size == 32 && m->pool == VT_POOL_AVG &&
          m->drop_rate == 0.1 && m->attn_drop_rate == 0.05 && m->drop_path == 0.2 &&
          m->layer_scale == 1e-5 && m->qkv_bias == 0, "model keys");
    CHECK(m->num_classes == 20, "cifar100 coarse resolves num_classes to 20, got %d", m->num_classes);
    const vt_pe_config *pe = &c.pe;
    CHECK(pe->kind == VT_PE_CAYLEY && pe->inner == VT_INNER_AXIAL && pe->share == VT_SHARE_LAYERS &&
          pe->positions == VT_POS_INTERPOLATE && pe->ape == VT_APE_SINCOS &&
          pe->init == VT_PEINIT_NORMAL && pe->init_std == 0.02 && pe->init_scale == 0.5, "pe keys");
    CHECK(pe->theta == 100, "cayley inner axial theta %g", pe->theta);
    CHECK(c.performer.features == 64 && c.performer.redraw_every == 0 &&
          strcmp(c.performer.kernel, "relu") == 0, "performer keys");
    const vt_data_config *d = &c.data;
    CHECK(d->kind == VT_DATA_CIFAR100 && strcmp(d->root, "data/cifar-100") == 0 &&
          strcmp(d->label, "coarse") == 0 && d->mean[2] == 0.5 && d->std[0] == 0.25 &&
          d->workers == 3 && d->on_error == VT_ONERR_SKIP && strcmp(d->train_split, "tr") == 0 &&
          strcmp(d->val_split, "te") == 0 && d->crop_pct == 1 && d->hflip == 0, "data keys");
    const vt_optim_config *o = &c.optim;
    CHECK(o->name == VT_OPT_SGD && o->lr == 0.1 && o->min_lr == 0 && o->weight_decay == 1e-4 &&
          o->momentum == 0.95 && o->betas[0] == 0.8 && o->betas[1] == 0.99 && o->eps == 1e-6 &&
          o->warmup_epochs == 0.5 && o->warmup_steps == 100 && o->warmup_lr == 0.001 &&
          o->schedule == VT_SCHED_CONSTANT && o->clip_grad == 1.0, "optim keys");
    const vt_train_config *t = &c.train;
    CHECK(t->epochs == 7 && t->steps == 1000 && t->batch_size == 64 && t->accum_steps == 2 &&
          t->label_smoothing == 0 && t->seed == 9007199254740991LL && t->threads == 2 &&
          t->eval_every == 0 && t->eval_every_steps == 250 && t->ckpt_every == 3 &&
          t->log_every == 10 && strcmp(t->run_dir, "runs/a b") == 0, "train keys");
    CHECK(c.eval.batch_size == 256 && c.eval.n_resolutions == 3 && c.eval.resolutions[0] == 16 &&
          c.eval.resolutions[2] == 64 && c.eval.resolutions[3] == 0, "eval keys");
    CHECK(c.runtime.progress == VT_PROGRESS_NEVER, "runtime");
    CHECK(vt_config_is_set(&c, "pe.kind") == 1 && vt_config_is_set(&c, "model.width") == 0,
          "explicit-set record after parse");
}

static void test_errors(void) {
    /* unknown keys and sections, with the nearest valid name */
    expect_error("{'model': {'widht': 256}}", "unknown key \"model.widht\"",
                 "did you mean \"model.width\"?");
    expect_error("{'modle': {'width': 256}}", "unknown section \"modle\"", "did you mean \"model\"?");
    expect_error("{'model': {'theta': 10}}", "unknown key \"model.theta\"", "did you mean \"pe.theta\"?");
    expect_error("{'train': {'lr': 0.1}}", "unknown key \"train.lr\"", "did you mean \"optim.lr\"?");
    expect_error("{'optimizer': {'lr': 0.1}}", "unknown section \"optimizer\"", "did you mean \"optim\"?");
    expect_error("{'width': 256}", "unknown section \"width\"", "did you mean \"model.width\"?");
    expect_error("{'pe': {'blocksize': 8}}", "unknown key \"pe.blocksize\"",
                 "did you mean \"pe.block_size\"?");
    expect_error("{'model': {'zzzzzz': 1}}", "unknown key \"model.zzzzzz\"",
                 "valid keys in \"model\": preset, width");
    expect_error("{'qqq': {}}", "unknown section \"qqq\"", "valid sections: model, pe");
    /* wrong types */
    expect_error("{'model': {'depth': '12'}}", "model.depth: expected an integer, found \"12\"", NULL);
    expect_error("{'model': {'depth': 12.5}}", "model.depth: expected an integer, found 12.5", NULL);
    expect_error("{'model': {'depth': null}}", "model.depth: expected an integer, found null", NULL);
    expect_error("{'optim': {'lr': '1e-3'}}", "optim.lr: expected a finite number, found \"1e-3\"", NULL);
    expect_error("{'optim': {'lr': 1e999}}", "optim.lr: expected a finite number", NULL);
    expect_error("{'model': {'qkv_bias': 1}}", "model.qkv_bias: expected true or false, found 1", NULL);
    expect_error("{'data': {'root': 5}}", "data.root: expected a string, found 5", NULL);
    expect_error("{'model': 3}", "model: expected an object of keys, found 3", NULL);
    expect_error("[1, 2]", "top level: expected a JSON object", "an array of 2 elements");
    /* ranges */
    expect_error("{'train': {'batch_size': 0}}", "train.batch_size: 0 is below the minimum 1", NULL);
    expect_error("{'model': {'in_chans': 5}}", "model.in_chans: 5 is above the maximum 4", NULL);
    expect_error("{'optim': {'eps': 0}}", "optim.eps: 0 must be greater than 0", NULL);
    expect_error("{'model': {'drop_path': 1}}", "model.drop_path: 1 must be less than 1", NULL);
    expect_error("{'train': {'seed': -1}}", "train.seed: -1 is below the minimum 0", NULL);
    /* enums */
    expect_error("{'pe': {'kind': 'rope'}}", "pe.kind: unknown value \"rope\"; expected one of",
                 "\"rope_axial\", \"rope_mixed\"");
    expect_error("{'model': {'pool': 1}}", "model.pool: expected one of \"token\", \"avg\", found 1", NULL);
    expect_error("{'data': {'label': 'medium'}}", "data.label: unknown value \"medium\"", "\"coarse\"");
    /* arrays */
    expect_error("{'data': {'mean': [0.5, 0.5]}}",
                 "data.mean: expected an array of 3 numbers (or 1 for every entry), found an array "
                 "of 2 elements", NULL);
    expect_error("{'optim': {'betas': [0.9]}}",
                 "optim.betas: expected an array of 2 numbers, found an array of 1 element", NULL);
    expect_error("{'data': {'std': [0]}}", "data.std[0]: 0 must be greater than 0", NULL);
    expect_error("{'data': {'std': [0.2, 0, 0.2]}}", "data.std[1]: 0 must be greater than 0", NULL);
    expect_error("{'optim': {'betas': [0.9, 1.0]}}", "optim.betas[1]: 1 must be less than 1", NULL);
    expect_error("{'optim': {'betas': 0.9}}", "optim.betas: expected an array of 2 numbers, found 0.9",
                 NULL);
    expect_error("{'eval': {'resolutions': [224, 'x']}}",
                 "eval.resolutions[1]: expected an integer, found \"x\"", NULL);
    expect_error("{'eval': {'resolutions': [16,32,48,64,80,96,112,128,144,160,176,192,208,224,240,256,272]}}",
                 "eval.resolutions: expected an array of at most 16 integers", "17 elements");
    /* strings, duplicates */
    char longroot[700];
    memset(longroot, 'a', sizeof longroot);
    memcpy(longroot, "{'data': {'root': '", 19);
    memcpy(longroot + 600, "'}}", 4);
    expect_error(longroot, "data.root: expected at most 511 characters, found 581", NULL);
    expect_error("{'model': {'width': 256, 'width': 384}}", "key \"model.width\" appears twice", NULL);
    expect_error("{'model': {}, 'model': {}}", "section \"model\" appears twice", NULL);
    /* invalid JSON: position as line and column */
    expect_error("{\n  'model': {\n    'width': 256,\n  }\n}", "invalid JSON at line 4, column 3", NULL);
    expect_error("{'model': {'width': 256}", "invalid JSON at line 1, column 24, at the end of the input",
                 NULL);
    expect_error("{'model': {'width': 256},}", "invalid JSON at line 1, column 26", "trailing comma");
    expect_error("{'model': {'width': 256}} x", "invalid JSON at line 1, column 27", "near \"x\"");
    expect_error("", "empty config", NULL);
    expect_error(" \n ", "empty config", NULL);
    expect_error("{'model': {'width': tru}}", "invalid JSON at line 1, column 21", "near \"tru}}\"");
    expect_error("{\n  'model': 1\n\n  ", "invalid JSON at line 2, column 12, at the end of the input",
                 NULL);
}

static void test_cross_field(void) {
    expect_error("{'model': {'heads': 5}}", "model.heads = 5 does not divide model.width = 768", NULL);
    expect_error("{'model': {'width': 12, 'heads': 4}, 'pe': {'kind': 'rope_axial'}}",
                 "model.width / model.heads = 3 is odd", "even head dim");
    expect_error("{'model': {'patch_size': 15}}",
                 "model.img_size = 224 is not a multiple of model.patch_size = 15", NULL);
    expect_error("{'pe': {'train_img_size': 200}}",
                 "pe.train_img_size = 200 is not a multiple of model.patch_size = 16", NULL);
    expect_error("{'eval': {'resolutions': [160, 250]}}",
                 "eval.resolutions[1] = 250 is not a multiple of model.patch_size = 16", NULL);
    expect_error("{'pe': {'kind': 'circulant', 'block_size': 6}}",
                 "pe.block_size = 6 is invalid for circulant", "even, >= 4 and divide the head dim 64");
    expect_error("{'pe': {'kind': 'circulant', 'block_size': 2}}", "pe.block_size = 2 is invalid for circulant",
                 NULL);
    expect_error("{'pe': {'kind': 'liere', 'block_size': 3}}", "pe.block_size = 3 is invalid for liere",
                 "divide the head dim 64");
    expect_error("{'pe': {'kind': 'liere_commute', 'block_size': 4}}",
                 "pe.block_size = 4 is invalid for liere_commute: must be 2", NULL);
    expect_error("{'model': {'width': 32, 'heads': 2, 'mlp_ratio': 0.01}}",
                 "model.mlp_ratio = 0.01 gives an MLP hidden width of int(32 x 0.01) = 0",
                 "mlp_ratio >= 1/32");
    expect_error("{'model': {'in_chans': 2}}", "model.in_chans = 2 is not supported", "1 (grayscale), 3");
    expect_error("{'model': {'in_chans': 4}}", "model.in_chans = 4 (RGB-D)", "found pe.kind = ape");
    expect_error("{'model': {'in_chans': 4}, 'pe': {'kind': 'rope_mixed', 'coord_dim': 2}}",
                 "model.in_chans = 4 (RGB-D) needs pe.coord_dim = 3", NULL);
    expect_error("{'pe': {'coord_dim': 3}}", "pe.coord_dim = 3 needs a rotary pe.kind", "found pe.kind = ape");
    expect_error("{'model': {'depth_as_channel': true}}", "model.depth_as_channel needs model.in_chans = 4",
                 NULL);
    expect_error("{'pe': {'kind': 'none', 'ape': 'learned'}}", "pe.ape = learned needs pe.kind = ape",
                 "found pe.kind = none");
    expect_error("{'pe': {'kind': 'ape', 'ape': 'none'}}", "pe.kind = ape needs pe.ape = learned or sincos",
                 NULL);
    expect_error("{'model': {'width': 24, 'heads': 4}, 'pe': {'kind': 'rope_mixed'}}",
                 "pe.kind = rope_mixed", "divisible by 4; found 6");
    expect_error("{'model': {'width': 16, 'heads': 4}, 'pe': {'kind': 'rope_axial', 'coord_dim': 3}}",
                 "needs a head dim >= 6", "found 4");
    expect_error("{'optim': {'lr': 1e-4, 'min_lr': 1e-3}}", "optim.min_lr = 0.001 exceeds optim.lr = 0.0001",
                 NULL);
    expect_error("{'data': {'root': ''}}", "data.root is empty", "data.kind = imagefolder");
    expect_error("{'data': {'kind': 'cifar10', 'root': 'd'}, 'model': {'num_classes': 100}}",
                 "model.num_classes = 100 but data.kind = cifar10 has 10 classes", NULL);
    expect_error("{'data': {'kind': 'synthetic', 'train_size': 100}, 'train': {'batch_size': 64, 'accum_steps': 2}}",
                 "data.train_size = 100 is smaller than one optimizer step", "= 128");
    expect_error("{'train': {'epochs': 0}}", "train.epochs and train.steps are both 0", NULL);
    expect_error("{'model': {'attention': 'performer', 'attn_drop_rate': 0.1}}",
                 "model.attn_drop_rate = 0.1 applies to softmax attention only", NULL);

    vt_config c;
    CHECK(parse(&c, "{'data': {'kind': 'synthetic', 'root': ''}, 'train': {'epochs': 0, 'steps': 5}}") == VT_OK,
          "synthetic data needs no root; steps without epochs: %s", vt_last_error());
    CHECK(parse(&c, "{'data': {'mean': [0.286], 'std': [0.353]}, 'model': {'in_chans': 1}}") == VT_OK &&
              c.data.mean[0] == 0.286 && c.data.mean[2] == 0.286 && c.data.std[1] == 0.353,
          "one mean/std number fills every channel: %s", vt_last_error());
    CHECK(parse(&c, "{'model': {'depth': 12.0}}") == VT_OK && c.model.depth == 12,
          "an integral float is an integer: %s", vt_last_error());
    CHECK(parse(&c, "{'model': {'width': 12, 'heads': 4}}") == VT_OK,
          "odd head dim is fine without a rotary PE: %s", vt_last_error());
    /* a config set in code is range-checked by vt_resolve too */
    vt_config_defaults(&c);
    c.model.drop_rate = 2;
    CHECK(vt_resolve(&c) == VT_ERR_USAGE &&
              strstr(vt_last_error(), "config: model.drop_rate: 2 must be less than 1"),
          "resolve range check: %s", vt_last_error());
    vt_config_defaults(&c);
    c.pe.kind = (vt_pe_kind)42;
    CHECK(vt_resolve(&c) == VT_ERR_USAGE && strstr(vt_last_error(), "pe.kind"),
          "resolve enum check: %s", vt_last_error());
}

static void test_presets(void) {
    vt_config c;
    struct { const char *name; int w, d, h; } want[] = {
        { "vit_tiny", 192, 12, 3 }, { "vit_small", 384, 12, 6 }, { "vit_base", 768, 12, 12 },
        { "vit_large", 1024, 24, 16 },
    };
    for (int i = 0; i < 4; i++) {
        char json[128];
        snprintf(json, sizeof json, "{'model': {'preset': '%s'}}", want[i].name);
        CHECK(parse(&c, json) == VT_OK, "%s: %s", want[i].name, vt_last_error());
        CHECK(c.model.width == want[i].w && c.model.depth == want[i].d && c.model.heads == want[i].h,
              "%s gives %d/%d/%d", want[i].name, c.model.width, c.model.depth, c.model.heads);
    }
    CHECK(parse(&c, "{'model': {'preset': 'vit_small', 'heads': 12, 'depth': 4}}") == VT_OK,
          "override: %s", vt_last_error());
    CHECK(c.model.width == 384 && c.model.depth == 4 && c.model.heads == 12,
          "explicit keys beat the preset: %d/%d/%d", c.model.width, c.model.depth, c.model.heads);
    char *j = vt_config_to_json(&c);
    CHECK(strstr(j, "\"width\": 384") && strstr(j, "\"heads\": 12") && strstr(j, "\"depth\": 4"),
          "resolved JSON shows final numbers:\n%s", j);
    free(j);
    /* changing the preset by --set re-resolves the keys not given explicitly */
    CHECK(parse(&c, "{'model': {'preset': 'vit_large', 'depth': 2}}") == VT_OK, "%s", vt_last_error());
    CHECK(vt_config_set(&c, "model.preset=vit_tiny") == VT_OK && vt_resolve(&c) == VT_OK,
          "%s", vt_last_error());
    CHECK(c.model.width == 192 && c.model.heads == 3 && c.model.depth == 2, "re-resolved %d/%d/%d",
          c.model.width, c.model.depth, c.model.heads);
    CHECK(vt_config_set(&c, "model.preset=") == VT_OK && vt_resolve(&c) == VT_OK, "%s",
          vt_last_error());
    CHECK(c.model.width == 768 && c.model.heads == 12 && c.model.depth == 2,
          "no preset: schema defaults again, %d/%d/%d", c.model.width, c.model.depth, c.model.heads);
    expect_error("{'model': {'preset': 'vit_huge'}}", "model.preset: unknown value \"vit_huge\"",
                 "\"vit_large\"");
}

static void test_kind_defaults(void) {
    struct {
        const char *json;
        vt_ape_kind ape;
        vt_pos_mode pos;
        vt_share share;
        double theta;
        int block, coord;
    } cases[] = {
        { "{'pe': {'kind': 'none'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 0, 0, 2 },
        { "{'pe': {'kind': 'ape'}}", VT_APE_LEARNED, VT_POS_INDEX, VT_SHARE_NONE, 0, 0, 2 },
        { "{'pe': {'kind': 'rope_axial'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 100, 0, 2 },
        { "{'pe': {'kind': 'rope_mixed'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 10, 0, 2 },
        { "{'pe': {'kind': 'cayley'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 10, 0, 2 },
        { "{'pe': {'kind': 'cayley', 'inner': 'axial'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 100, 0, 2 },
        { "{'pe': {'kind': 'circulant'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 10, 16, 2 },
        { "{'pe': {'kind': 'circulant', 'init': 'normal'}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 0, 16, 2 },
        { "{'pe': {'kind': 'liere'}}", VT_APE_NONE, VT_POS_NORMALIZED, VT_SHARE_ALL, 0, 64, 2 },
        { "{'pe': {'kind': 'liere'}, 'model': {'preset': 'vit_tiny'}}", VT_APE_NONE, VT_POS_NORMALIZED,
          VT_SHARE_ALL, 0, 64, 2 },
        { "{'pe': {'kind': 'liere'}, 'model': {'width': 256, 'heads': 8}}", VT_APE_NONE, VT_POS_NORMALIZED,
          VT_SHARE_ALL, 0, 32, 2 },
        { "{'pe': {'kind': 'liere_commute'}}", VT_APE_NONE, VT_POS_NORMALIZED, VT_SHARE_ALL, 0, 2, 2 },
        { "{'pe': {'kind': 'rope_mixed'}, 'model': {'in_chans': 4}}", VT_APE_NONE, VT_POS_INDEX,
          VT_SHARE_NONE, 10, 0, 3 },
        /* explicit keys win over kind defaults; explicit 0 means "the kind's default" */
        { "{'pe': {'kind': 'liere', 'positions': 'index', 'share': 'heads', 'block_size': 8}}", VT_APE_NONE,
          VT_POS_INDEX, VT_SHARE_HEADS, 0, 8, 2 },
        { "{'pe': {'kind': 'rope_axial', 'theta': 10000, 'ape': 'learned', 'coord_dim': 1}}",
          VT_APE_LEARNED, VT_POS_INDEX, VT_SHARE_NONE, 10000, 0, 1 },
        { "{'pe': {'kind': 'rope_axial', 'theta': 0}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 100, 0, 2 },
        { "{'pe': {'kind': 'circulant', 'block_size': 0}}", VT_APE_NONE, VT_POS_INDEX, VT_SHARE_NONE, 10, 16, 2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vt_config c;
        vt_status st = parse(&c, cases[i].json);
        CHECK(st == VT_OK, "%s: %s", cases[i].json, vt_last_error());
        CHECK(c.pe.ape == cases[i].ape && c.pe.positions == cases[i].pos && c.pe.share == cases[i].share &&
                  c.pe.theta == cases[i].theta && c.pe.block_size == cases[i].block &&
                  c.pe.coord_dim == cases[i].coord,
              "%s: ape %d positions %d share %d theta %g block %d coord %d", cases[i].json, c.pe.ape,
              c.pe.positions, c.pe.share, c.pe.theta, c.pe.block_size, c.pe.coord_dim);
    }
    vt_config c;
    CHECK(parse(&c, "{'model': {'img_size': 384}}") == VT_OK && c.pe.train_img_size == 384,
          "train_img_size follows img_size: %d", c.pe.train_img_size);
    CHECK(parse(&c, "{'model': {'img_size': 384}, 'pe': {'train_img_size': 224}}") == VT_OK &&
              c.pe.train_img_size == 224, "explicit train_img_size kept: %d", c.pe.train_img_size);
    CHECK(parse(&c, "{'data': {'kind': 'cifar10', 'root': 'd'}}") == VT_OK && c.model.num_classes == 10,
          "cifar10 num_classes %d", c.model.num_classes);
    CHECK(parse(&c, "{'data': {'kind': 'cifar100', 'root': 'd'}}") == VT_OK && c.model.num_classes == 100,
          "cifar100 num_classes %d", c.model.num_classes);
    CHECK(parse(&c, "{'train': {'batch_size': 32}, 'eval': {'batch_size': 0}}") == VT_OK &&
              c.eval.batch_size == 32, "eval.batch_size 0 -> train.batch_size, got %d", c.eval.batch_size);
    /* resolution is repeated when --set changes the kind afterwards */
    CHECK(parse(&c, "{'pe': {'kind': 'ape'}}") == VT_OK && c.pe.ape == VT_APE_LEARNED, "ape");
    CHECK(vt_config_set(&c, "pe.kind=liere_commute") == VT_OK && vt_resolve(&c) == VT_OK,
          "%s", vt_last_error());
    CHECK(c.pe.ape == VT_APE_NONE && c.pe.share == VT_SHARE_ALL && c.pe.block_size == 2 &&
              c.pe.positions == VT_POS_NORMALIZED,
          "after --set pe.kind: ape %d share %d block %d", c.pe.ape, c.pe.share, c.pe.block_size);
    char *a = vt_config_to_json(&c);
    CHECK(vt_resolve(&c) == VT_OK, "second resolve: %s", vt_last_error());
    char *b = vt_config_to_json(&c);
    CHECK(strcmp(a, b) == 0, "resolve is idempotent");
    free(a);
    free(b);
}

static void test_set(void) {
    vt_config c;
    vt_config_defaults(&c);
    CHECK(vt_config_set(&c, "model.width=384") == VT_OK && c.model.width == 384, "number: %s",
          vt_last_error());
    CHECK(vt_config_is_set(&c, "model.width") == 1, "--set records the key as explicit");
    CHECK(vt_config_set(&c, "optim.lr=3e-4") == VT_OK && c.optim.lr == 3e-4, "float: %s", vt_last_error());
    CHECK(vt_config_set(&c, "data.root=/tmp/some dir/x") == VT_OK &&
              strcmp(c.data.root, "/tmp/some dir/x") == 0, "bare string: %s", vt_last_error());
    CHECK(vt_config_set(&c, "data.train_split=\"a=b\"") == VT_OK && strcmp(c.data.train_split, "a=b") == 0,
          "quoted JSON string: %s", c.data.train_split);
    CHECK(vt_config_set(&c, "train.run_dir=2024") == VT_OK && strcmp(c.train.run_dir, "2024") == 0,
          "numeric text for a string key stays text: %s", c.train.run_dir);
    CHECK(vt_config_set(&c, "data.root=") == VT_OK && c.data.root[0] == '\0', "empty value");
    CHECK(vt_config_set(&c, "data.root=d") == VT_OK, "root");
    CHECK(vt_config_set(&c, "data.mean=[0.5, 0.25, 0.125]") == VT_OK && c.data.mean[0] == 0.5 &&
              c.data.mean[1] == 0.25 && c.data.mean[2] == 0.125, "array: %s", vt_last_error());
    CHECK(vt_config_set(&c, "eval.resolutions=[160,320]") == VT_OK && c.eval.n_resolutions == 2 &&
              c.eval.resolutions[1] == 320, "int list: %s", vt_last_error());
    CHECK(vt_config_set(&c, "model.qkv_bias=false") == VT_OK && c.model.qkv_bias == 0, "bool: %s",
          vt_last_error());
    CHECK(vt_config_set(&c, "pe.kind=rope_mixed") == VT_OK && c.pe.kind == VT_PE_ROPE_MIXED, "enum: %s",
          vt_last_error());
    CHECK(vt_config_set(&c, "train.seed=123456789012") == VT_OK && c.train.seed == 123456789012LL,
          "seed: %s", vt_last_error());
    CHECK(vt_resolve(&c) == VT_OK, "after sets: %s", vt_last_error());
    CHECK(c.pe.theta == 10, "rope_mixed theta %g", c.pe.theta);

    expect_set_error("model.widht=3", "--set model.widht=3: unknown key \"model.widht\"",
                     "did you mean \"model.width\"?");
    expect_set_error("width=3", "unknown key \"width\"", "did you mean \"model.width\"?");
    expect_set_error("model.width", "--set model.width: expected section.key=value", NULL);
    expect_set_error("=3", "expected section.key=value", NULL);
    expect_set_error("model.depth=abc", "--set model.depth=abc: model.depth: expected an integer, found \"abc\"",
                     NULL);
    expect_set_error("model.depth=0", "model.depth: 0 is below the minimum 1", NULL);
    expect_set_error("model.qkv_bias=yes", "model.qkv_bias: expected true or false, found \"yes\"", NULL);
    expect_set_error("pe.kind=rope", "pe.kind: unknown value \"rope\"", "\"liere_commute\"");
    expect_set_error("data.std=[1,2]", "data.std: expected an array of 3 numbers", NULL);
}

/* Every field equal (the explicit-set record and source aside). */
static int same_config(const vt_config *a, const vt_config *b) {
    vt_config x = *a, y = *b;
    memset(x.set, 0, sizeof x.set);
    memset(y.set, 0, sizeof y.set);
    memset(x.source, 0, sizeof x.source);
    memset(y.source, 0, sizeof y.source);
    return memcmp(&x.model, &y.model, sizeof x.model) == 0 && memcmp(&x.pe, &y.pe, sizeof x.pe) == 0 &&
           memcmp(&x.performer, &y.performer, sizeof x.performer) == 0 &&
           memcmp(&x.data, &y.data, sizeof x.data) == 0 && memcmp(&x.optim, &y.optim, sizeof x.optim) == 0 &&
           memcmp(&x.train, &y.train, sizeof x.train) == 0 && memcmp(&x.eval, &y.eval, sizeof x.eval) == 0 &&
           memcmp(&x.runtime, &y.runtime, sizeof x.runtime) == 0;
}

static void round_trip(const vt_config *c, const char *what) {
    char *j1 = vt_config_to_json(c);
    vt_config back;
    vt_status st = vt_resolve_json(&back, j1, "checkpoint metadata");
    CHECK(st == VT_OK, "%s: resolved JSON does not parse back: %s\n%s", what, vt_last_error(), j1);
    if (st != VT_OK) { free(j1); return; }
    CHECK(same_config(c, &back), "%s: round trip changed a field", what);
    char *j2 = vt_config_to_json(&back);
    CHECK(strcmp(j1, j2) == 0, "%s: JSON differs after a round trip:\n%s\nvs\n%s", what, j1, j2);
    free(j1);
    free(j2);
}

static void test_round_trip(void) {
    vt_config c;
    vt_config_defaults(&c);
    CHECK(vt_resolve(&c) == VT_OK, "%s", vt_last_error());
    round_trip(&c, "defaults");
    CHECK(parse(&c, full_example) == VT_OK, "%s", vt_last_error());
    round_trip(&c, "full example");
    /* values whose shortest form needs 17 digits, escapes in strings */
    CHECK(parse(&c, "{'pe': {'kind': 'liere'}, 'optim': {'lr': 0.30000000000000004, 'min_lr': 1e-300},"
                    " 'model': {'mlp_ratio': 3.3333333333333335},"
                    " 'data': {'root': 'a\\\\b\\t\\u00e9\\u0001\\'c'}}") == VT_OK,
          "%s", vt_last_error());
    CHECK(c.optim.lr == 0.1 + 0.2 && c.model.mlp_ratio == 10.0 / 3.0, "exact parse %.17g", c.optim.lr);
    CHECK(strcmp(c.data.root, "a\\b\t\xc3\xa9\x01\"c") == 0, "escaped root: %s", c.data.root);
    round_trip(&c, "awkward values");
    char *j = vt_config_to_json(&c);
    CHECK(strstr(j, "\"lr\": 0.30000000000000004") && strstr(j, "\"min_lr\": 1e-300") &&
              strstr(j, "\"weight_decay\": 0.05,") && strstr(j, "\"block_size\": 64"),
          "number formatting:\n%s", j);
    free(j);
}

static void test_files(void) {
    char path[] = "/tmp/vt_test_config_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    const char *text = q("{\n  'model': {'preset': 'vit_tiny'},\n  'pe': {'kind': 'rope_axial'}\n}\n");
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text), "write");
    close(fd);
    vt_config c;
    CHECK(vt_resolve_file(&c, path, NULL, 0) == VT_OK, "load: %s", vt_last_error());
    CHECK(strcmp(c.source, path) == 0 && c.model.width == 192 && c.pe.theta == 100, "loaded %s %d %g",
          c.source, c.model.width, c.pe.theta);
    /* an override repairs a file that is invalid on its own */
    text = q("{'model': {'heads': 5}}");
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "rewrite");
    if (fd >= 0) close(fd);
    CHECK(vt_resolve_file(&c, path, NULL, 0) == VT_ERR_USAGE && strstr(vt_last_error(), path) &&
              strstr(vt_last_error(), "model.heads = 5 does not divide"),
          "error names the file: %s", vt_last_error());
    const char *sets[] = { "model.heads=6", "train.epochs=2" };
    CHECK(vt_resolve_file(&c, path, sets, 2) == VT_OK && c.model.heads == 6 && c.train.epochs == 2,
          "load_overrides: %s", vt_last_error());
    /* a rule broken by a --set value says so, with the valid sizes (issue 39 item 7) */
    text = q("{'model': {'img_size': 28}}");
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "rewrite");
    if (fd >= 0) close(fd);
    const char *patch16[] = { "model.patch_size=16", "model.img_size=28", "model.heads=5" };
    char want_set[512];
    snprintf(want_set, sizeof want_set, "%s: model.img_size = 28 is not a multiple of model.patch_size = 16 "
             "(--set); the nearest valid sizes are 16 and 32", path);
    CHECK(vt_resolve_file(&c, path, patch16, 1) == VT_ERR_USAGE && strcmp(vt_last_error(), want_set) == 0,
          "file size, --set patch: %s", vt_last_error());
    CHECK(vt_resolve_file(&c, NULL, patch16, 2) == VT_ERR_USAGE &&
              strcmp(vt_last_error(), "--set: model.img_size = 28 is not a multiple of model.patch_size = 16; "
                                      "the nearest valid sizes are 16 and 32") == 0,
          "both from --set: %s", vt_last_error());
    CHECK(vt_resolve_file(&c, NULL, patch16 + 2, 1) == VT_ERR_USAGE &&
              strcmp(vt_last_error(), "--set: model.heads = 5 does not divide model.width = 768") == 0,
          "heads from --set: %s", vt_last_error());
    const char *small[] = { "model.img_size=8" };
    CHECK(vt_resolve_file(&c, NULL, small, 1) == VT_ERR_USAGE &&
              strstr(vt_last_error(), "the smallest valid size is 16"), "below one patch: %s", vt_last_error());
    CHECK(vt_resolve_file(&c, NULL, sets, 1) == VT_OK && c.model.heads == 6 && c.source[0] == '\0',
          "overrides without a file: %s", vt_last_error());
    text = q("{'model': {'widht': 5}}");
    fd = open(path, O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "rewrite");
    if (fd >= 0) close(fd);
    char want[128];
    snprintf(want, sizeof want, "%s: unknown key \"model.widht\"; did you mean \"model.width\"?", path);
    CHECK(vt_resolve_file(&c, path, NULL, 0) == VT_ERR_USAGE && strcmp(vt_last_error(), want) == 0,
          "message: %s", vt_last_error());
    unlink(path);
    CHECK(vt_resolve_file(&c, path, NULL, 0) == VT_ERR_RUNTIME && strstr(vt_last_error(), path) &&
              strstr(vt_last_error(), "No such file or directory"),
          "missing file: %s", vt_last_error());
    CHECK(vt_resolve_file(&c, "/tmp", NULL, 0) == VT_ERR_RUNTIME && strstr(vt_last_error(), "/tmp") &&
              strstr(vt_last_error(), "directory"),
          "directory: %s", vt_last_error());
    /* a device and a FIFO are refused before anything reads from (or waits on) them */
    CHECK(vt_resolve_file(&c, "/dev/zero", NULL, 0) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "/dev/zero: the config file is a character device"),
          "/dev/zero: %s", vt_last_error());
    CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    CHECK(vt_resolve_file(&c, path, NULL, 0) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "is a FIFO (named pipe), not a regular file"),
          "FIFO: %s", vt_last_error());
    unlink(path);
}

/* An escaped NUL would end the C string cJSON hands back: in a key, a string value or a
 * --set value it is an error, not a silently shortened name. An escaped backslash
 * followed by "u0000" is no NUL. */
static void test_escaped_nul(void) {
    expect_error("{'train': {'run_dir': 'runs/a\\u0000b'}}", "escaped NUL (\\u0000) at line 1, column 30",
                 NULL);
    expect_error("{'train': {'run_dir\\u0000x': 'a'}}", "escaped NUL", NULL);
    expect_error("{'train\\u0000': {}}", "escaped NUL", NULL);
    expect_set_error("train.run_dir=\"a\\u0000b\"", "escaped NUL", NULL);
    vt_config c;
    CHECK(parse(&c, "{'train': {'run_dir': 'runs/a\\\\u0000b'}}") == VT_OK &&
              strcmp(c.train.run_dir, "runs/a\\u0000b") == 0,
          "an escaped backslash before u0000: %s (%s)", c.train.run_dir, vt_last_error());
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* resolve(read(to_json(c))) == c for a resolved c, and the JSON states every resolved
 * value (no "auto" left but runtime.progress's, a terminal setting). */
static int idempotent(const vt_config *c, const char *what) {
    char *j1 = vt_config_to_json(c);
    vt_config back;
    vt_status st = vt_resolve_json(&back, j1, what);
    int ok = st == VT_OK && same_config(c, &back);
    char *j2 = ok ? vt_config_to_json(&back) : NULL;
    ok = ok && strcmp(j1, j2) == 0 &&
         count_of(j1, "\"auto\"") == (c->runtime.progress == VT_PROGRESS_AUTO);
    if (!ok) fprintf(stderr, "%s: not idempotent (%s):\n%s\n", what, st ? vt_last_error() : "values", j1);
    free(j1);
    free(j2);
    return ok;
}

/* Every config in configs/ and every preset x PE kind x dataset format (with and without an
 * explicit data.crop_pct) resolves to a config whose JSON resolves to itself. */
static void test_resolve_idempotent(void) {
    glob_t g;
    int n = 0, bad = 0;
    if (glob("configs/*.json", 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            vt_config c;
            if (vt_resolve_file(&c, g.gl_pathv[i], NULL, 0) != VT_OK) {
                CHECK(0, "%s: %s", g.gl_pathv[i], vt_last_error());
                continue;
            }
            bad += !idempotent(&c, g.gl_pathv[i]);
            n++;
        }
        globfree(&g);
    }
    CHECK(n >= 20 && bad == 0, "configs/*.json: %d of %d not idempotent", bad, n);
    const char *presets[] = { "", "vit_tiny", "vit_small", "vit_base", "vit_large" };
    n = bad = 0;
    for (size_t p = 0; p < sizeof presets / sizeof presets[0]; p++)
        for (int k = 0; k < VT_PE_KIND_COUNT; k++)
            for (int d = 0; d < VT_DATA_KIND_COUNT; d++)
                for (int crop = 0; crop < 2; crop++) {
                    char sets[4][64];
                    snprintf(sets[0], 64, "model.preset=%s", presets[p]);
                    snprintf(sets[1], 64, "pe.kind=%s", vt_pe_kind_name((vt_pe_kind)k));
                    snprintf(sets[2], 64, "data.kind=%s", vt_data_kind_name((vt_data_kind)d));
                    snprintf(sets[3], 64, "data.crop_pct=0.9");
                    const char *const sv[4] = { sets[0], sets[1], sets[2], sets[3] };
                    vt_config c;
                    if (vt_resolve_file(&c, NULL, sv, 3 + crop) != VT_OK) {
                        CHECK(0, "%s %s %s: %s", sets[0], sets[1], sets[2], vt_last_error());
                        continue;
                    }
                    bad += !idempotent(&c, sets[1]);
                    n++;
                }
    CHECK(n == 5 * VT_PE_KIND_COUNT * VT_DATA_KIND_COUNT * 2 && bad == 0,
          "presets x kinds x formats: %d of %d not idempotent", bad, n);
}

/* The eval and train geometry are resolved per format and stated in the config (issue 26:
 * the loader used to ask whether data.crop_pct was given). */
static void test_data_geometry(void) {
    struct {
        const char *json;
        vt_train_transform tt;
        vt_eval_transform et;
    } cases[] = {
        { "{'data': {'kind': 'imagefolder'}}", VT_TT_RRC, VT_ET_CENTER_CROP },
        { "{'data': {'kind': 'cifar10', 'root': 'd'}}", VT_TT_SIMPLE, VT_ET_RESIZE },
        { "{'data': {'kind': 'idx', 'root': 'd'}}", VT_TT_SIMPLE, VT_ET_RESIZE },
        { "{'data': {'kind': 'synthetic'}}", VT_TT_SIMPLE, VT_ET_RESIZE },
        { "{'data': {'kind': 'cifar100', 'root': 'd', 'crop_pct': 0.875}}", VT_TT_SIMPLE,
          VT_ET_CENTER_CROP },
        { "{'data': {'kind': 'idx', 'root': 'd', 'eval_transform': 'auto', 'train_transform': 'auto'}}",
          VT_TT_SIMPLE, VT_ET_RESIZE },
        { "{'data': {'kind': 'imagefolder', 'eval_transform': 'resize', 'train_transform': 'simple'}}",
          VT_TT_SIMPLE, VT_ET_RESIZE },
        { "{'data': {'kind': 'synthetic', 'crop_pct': 0.9, 'eval_transform': 'resize'}}", VT_TT_SIMPLE,
          VT_ET_RESIZE },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        vt_config c;
        CHECK(parse(&c, cases[i].json) == VT_OK, "%s: %s", cases[i].json, vt_last_error());
        CHECK(c.data.train_transform == cases[i].tt && c.data.eval_transform == cases[i].et,
              "%s: train_transform %d eval_transform %d", cases[i].json, c.data.train_transform,
              c.data.eval_transform);
    }
    /* The resolved config of a fixed-size format, which states data.crop_pct, reads back to
     * the same geometry (the issue-26 bug: it read back as center_crop). */
    vt_config c, back;
    CHECK(parse(&c, "{'data': {'kind': 'cifar10', 'root': 'd'}}") == VT_OK, "%s", vt_last_error());
    char *j = vt_config_to_json(&c);
    CHECK(strstr(j, "\"crop_pct\": 0.875") && strstr(j, "\"eval_transform\": \"resize\"") &&
              strstr(j, "\"train_transform\": \"simple\""), "the JSON states the geometry:\n%s", j);
    CHECK(vt_resolve_json(&back, j, "run/config.json") == VT_OK && back.data.eval_transform == VT_ET_RESIZE,
          "read back: eval_transform %d", back.data.eval_transform);
    free(j);
    /* changing data.kind by --set re-resolves a geometry that was not given */
    CHECK(vt_config_set(&c, "data.kind=imagefolder") == VT_OK && vt_resolve(&c) == VT_OK &&
              c.data.train_transform == VT_TT_RRC && c.data.eval_transform == VT_ET_CENTER_CROP,
          "re-resolved after --set data.kind: %s", vt_last_error());
    expect_error("{'data': {'eval_transform': 'crop'}}", "data.eval_transform: unknown value \"crop\"",
                 "\"center_crop\"");
}

/* Rules that moved from lower layers to resolve (each with its bad input and message). */
static void test_moved_rules(void) {
    expect_error("{'model': {'width': 18, 'heads': 3}, 'pe': {'ape': 'sincos'}}",
                 "pe.ape = sincos needs model.width divisible by 4; found 18", NULL);
    expect_error("{'data': {'kind': 'synthetic'}, 'model': {'img_size': 1, 'patch_size': 1}}",
                 "model.img_size = 1: data.kind = synthetic needs >= 2", NULL);
    expect_error("{'model': {'width': 16, 'heads': 4}, 'pe': {'kind': 'cayley', 'inner': 'axial', "
                 "'coord_dim': 3}}",
                 "pe.kind = cayley (pe.inner = axial) with pe.coord_dim = 3 needs a head dim >= 6", "found 4");
    expect_error("{'model': {'width': 24, 'heads': 4}, 'pe': {'kind': 'circulant', 'block_size': 6}}",
                 "pe.kind = circulant (RoPE-Mixed init, pe.coord_dim = 2) needs a head dim divisible by 4",
                 "found 6");
    expect_error("{'model': {'width': 24, 'heads': 4}, 'pe': {'kind': 'cayley'}}",
                 "pe.kind = cayley (RoPE-Mixed init, pe.coord_dim = 2)", "found 6");
    expect_error("{'model': {'width': 12, 'heads': 4}, 'pe': {'kind': 'liere', 'block_size': 3}}",
                 "model.width / model.heads = 3 is odd; pe.kind = liere", NULL);
    expect_error("{'model': {'width': 12, 'heads': 4}, 'pe': {'kind': 'circulant'}}",
                 "model.width / model.heads = 3 is odd; pe.kind = circulant", NULL);
    expect_error("{'data': {'kind': 'cifar100', 'root': 'd', 'label': 'coarse'}, "
                 "'model': {'num_classes': 100}}",
                 "model.num_classes = 100 but data.kind = cifar100 (coarse) has 20 classes", NULL);
    expect_error("{'data': {'kind': 'cifar10', 'root': ''}}", "data.root is empty; data.kind = cifar10",
                 NULL);
    expect_error("{'data': {'auto_augment': 'rand-m9-q1'}}", "data.auto_augment: ", "q1");
    expect_error("{'data': {'ratio': [2, 1]}}", "data.ratio = [2, 1]: expected min <= max", NULL);
    expect_error("{'performer': {'features': 0}}", "performer.features: 0 is below the minimum 1", NULL);
    expect_error("{'eval': {'batch_size': -1}}", "eval.batch_size: -1 is below the minimum 0", NULL);
    expect_error("{'pe': {'kind': 'liere', 'coord_dim': 4}}", "pe.coord_dim: 4 is above the maximum 3",
                 NULL);
    vt_config c;
    CHECK(parse(&c, "{'data': {'kind': 'synthetic', 'root': ''}, 'model': {'width': 16, 'heads': 2}, "
                    "'pe': {'kind': 'liere_commute'}}") == VT_OK && c.pe.block_size == 2,
          "synthetic needs no root: %s", vt_last_error());
}

/* The schema's model keys and the comparison of two configs on them. */
static void test_model_keys(void) {
    CHECK(vt_config_model_key("model.width") == 1 && vt_config_model_key("pe.theta") == 1 &&
              vt_config_model_key("performer.features") == 1 && vt_config_model_key("pe.kind") == 1,
          "model and PE keys are marked");
    CHECK(vt_config_model_key("model.drop_path") == 0 && vt_config_model_key("model.img_size") == 0 &&
              vt_config_model_key("data.root") == 0 && vt_config_model_key("pe.init_std") == 0 &&
              vt_config_model_key("optim.lr") == 0, "recipe, data and eval keys are not");
    CHECK(vt_config_model_key("model.nope") == -1, "unknown key");
    vt_config a, b;
    CHECK(parse(&a, "{'pe': {'kind': 'rope_axial'}}") == VT_OK, "%s", vt_last_error());
    CHECK(parse(&b, "{'pe': {'kind': 'rope_axial', 'theta': 10}, 'data': {'root': 'elsewhere'}, "
                    "'model': {'drop_path': 0.1}, 'optim': {'lr': 0.001}}") == VT_OK, "%s", vt_last_error());
    char report[256];
    CHECK(vt_config_model_keys_differ(&a, &a, report, sizeof report) == 0 && report[0] == '\0',
          "a config agrees with itself");
    int n = vt_config_model_keys_differ(&a, &b, report, sizeof report);
    CHECK(n == 1 && strcmp(report, "pe.theta: 100 vs 10") == 0, "only pe.theta differs: %d, %s", n, report);
    CHECK(parse(&b, "{'pe': {'kind': 'none'}, 'model': {'width': 384, 'heads': 6}}") == VT_OK, "%s",
          vt_last_error());
    n = vt_config_model_keys_differ(&a, &b, report, sizeof report);
    CHECK(n == 4 && strstr(report, "model.width: 768 vs 384; model.heads: 12 vs 6") &&
              strstr(report, "pe.kind: \"rope_axial\" vs \"none\"") && strstr(report, "pe.theta: 100 vs 0") &&
              strstr(report, "pe.ape: ") == NULL,
          "width, heads, kind, theta (and ape: none both): %d, %s", n, report);
    CHECK(vt_config_model_keys_differ(&a, &b, NULL, 0) == n, "report may be NULL");
}

static void test_docs(void) {
    char *md = vt_resolve_doc_markdown();
    char *txt = vt_config_doc_text();
    const char *keys[] = { "model.preset", "model.depth_as_channel", "pe.train_img_size",
                           "performer.kernel", "data.synthetic_seed", "optim.clip_grad",
                           "train.run_dir", "eval.resolutions", "runtime.progress" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char cell[64];
        snprintf(cell, sizeof cell, "| `%s` |", keys[i]);
        CHECK(strstr(md, cell) != NULL, "markdown lacks a row for %s", keys[i]);
        CHECK(strstr(txt, keys[i]) != NULL, "help text lacks %s", keys[i]);
    }
    CHECK(strstr(md, "| `model.width` | int | 768, or the preset's | [1, 65536] |") != NULL,
          "markdown row format");
    CHECK(strstr(md, "| `pe.kind` | enum | `ape` | `none`, `ape`, `rope_axial`") != NULL, "enum row");
    CHECK(strstr(md, "\n## optim\n") != NULL && strncmp(md, "# vitrain configuration", 23) == 0,
          "markdown sections");

    size_t len = 0;
    char *committed = test_read_file("configs/README.md", &len);
    CHECK(committed && len == strlen(md) && memcmp(committed, md, len) == 0,
          "configs/README.md is stale: run `./vitrain help-config --markdown > configs/README.md`");
    free(committed);
    free(md);
    free(txt);
}

int main(void) {
    test_defaults();
    test_full_example();
    test_errors();
    test_cross_field();
    test_presets();
    test_kind_defaults();
    test_set();
    test_round_trip();
    test_files();
    test_escaped_nul();
    test_resolve_idempotent();
    test_data_geometry();
    test_moved_rules();
    test_model_keys();
    test_docs();
    return test_summary();
}
