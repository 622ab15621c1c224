/* eval_checkpoint.c - the `vitrain eval` command (eval_checkpoint.h). */
#include "eval_checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocking.h"
#include "dist.h"
#include "eval.h"
#include "npz.h"
#include "resolve.h"
#include "vit.h"
#include "weights.h"

/* One evaluation of m at image size S (plain, then patch-shuffled when asked). */
typedef struct {
    vt_eval_result plain, shuf;
} eval_row;

/* What --logits collects: the archive and whether the per-sample arrays (labels,
 * paths) are in it yet. */
typedef struct {
    vt_npz *z;
    int have_samples;
} logits_out;

/* The labels (int64) and, for image folders, paths and class names of the split. */
static vt_status add_samples(logits_out *lo, vt_evaluator *ev, const int *labels) {
    int64_t n = ev->n, K = ev->num_classes;
    int64_t *l64 = malloc((size_t)n * sizeof *l64 + 1);
    if (!l64) return vt_fail(VT_ERR_RUNTIME, "out of memory: %lld labels", (long long)n);
    for (int64_t i = 0; i < n; i++) l64[i] = labels[i];
    vt_status st = vt_npz_add_i64(lo->z, "labels", l64, 1, &n);
    free(l64);
    char buf[4096];
    if (st == VT_OK && n > 0 && vt_loader_sample_path(ev->loader, 0, buf, sizeof buf)) {
        char **paths = vt_xcalloc((size_t)n, sizeof *paths);
        for (int64_t i = 0; i < n; i++) paths[i] = strdup(vt_loader_sample_path(ev->loader, i, buf, sizeof buf));
        st = vt_npz_add_str(lo->z, "paths", (const char *const *)paths, n);
        for (int64_t i = 0; i < n; i++) free(paths[i]);
        free(paths);
        const char **names = vt_xcalloc((size_t)K, sizeof *names);
        int k = 0, dk = vt_loader_num_classes(ev->loader); /* dk <= K (vt_eval_open) */
        for (; k < dk && (names[k] = vt_loader_class_name(ev->loader, k)); k++) {}
        if (st == VT_OK) st = vt_npz_add_str(lo->z, "class_names", names, k);
        free(names);
    }
    lo->have_samples = st == VT_OK;
    return st;
}

static vt_status eval_at(const vt_config *cfg, vt_vit *m, int S, const vt_eval_opts *o, logits_out *lo,
                         eval_row *row) {
    vt_evaluator ev;
    vt_status st = vt_eval_open(&ev, cfg, S);
    if ((st = vt_dist_agree(st == VT_OK ? vt_eval_reserve(&ev, m) : st)) != VT_OK) {
        vt_eval_close(&ev);
        return st;
    }
    float *logits = NULL;
    int *labels = NULL;
    if (lo) { /* every rank asks for them; rank 0's buffers receive all rows (eval.h) */
        size_t rows = vt_dist_root() ? (size_t)ev.n : 0;
        logits = malloc(rows * ev.num_classes * sizeof(float) + 1);
        labels = malloc(rows * sizeof(int) + 1);
        if (!logits || !labels) st = vt_fail(VT_ERR_RUNTIME, "out of memory: logits of %lld x %d floats",
                                             (long long)ev.n, ev.num_classes);
        ev.labels_out = labels;
    }
    char name[64];
    int64_t shape[2] = {ev.n, ev.num_classes};
    if ((st = vt_dist_agree(st)) == VT_OK) st = vt_eval_run(&ev, m, logits, &row->plain);
    if (st == VT_OK && lo && vt_dist_root()) {
        snprintf(name, sizeof name, "logits_%d", S);
        st = vt_npz_add_f32(lo->z, name, logits, 2, shape);
        if (st == VT_OK && !lo->have_samples) st = add_samples(lo, &ev, labels);
    }
    if (lo) st = vt_dist_agree(st);
    if (st == VT_OK && o->patch_shuffle) {
        ev.shuffle = 1;
        ev.shuffle_seed = o->seed;
        st = vt_eval_run(&ev, m, logits, &row->shuf);
        if (st == VT_OK && lo && vt_dist_root()) {
            snprintf(name, sizeof name, "shuffled_logits_%d", S);
            st = vt_npz_add_f32(lo->z, name, logits, 2, shape);
        }
        if (lo) st = vt_dist_agree(st);
    }
    free(logits);
    free(labels);
    vt_eval_close(&ev);
    return st;
}

/* Relative top-1 drop of the shuffled evaluation (0 when the plain top-1 is 0). */
static double shuffle_drop(const eval_row *r) {
    return r->plain.top1 > 0 ? (r->plain.top1 - r->shuf.top1) / r->plain.top1 : 0.0;
}

/* The config of `vitrain eval`: CONFIG and --set, or without CONFIG the checkpoint's own
 * (its __metadata__["config"], the resolved config it was trained with) and --set. Keys
 * that define the model or its PE must agree with the checkpoint's; data and eval keys
 * may differ. */
static vt_status eval_config(vt_config *cfg, const vt_safetensors *st, const vt_eval_opts *o,
                             vt_eval_failure *failed) {
    const char *meta = vt_st_meta(st, "config");
    vt_config ck;
    *failed = VT_EVAL_FAILED_CONFIG;
    if (meta) {
        char src[VT_STR + 64];
        snprintf(src, sizeof src, "%s __metadata__[\"config\"]", o->checkpoint);
        if (vt_resolve_json(&ck, meta, src) != VT_OK) return VT_ERR_USAGE;
    }
    if (o->config) {
        /* The file, then every --set, then one resolution: an override may repair a file
         * that is invalid on its own. */
        if (vt_resolve_file(cfg, o->config, o->sets, o->n_sets) != VT_OK) return VT_ERR_USAGE;
    } else if (meta) {
        *cfg = ck;
        vt_status st_ = VT_OK;
        for (int i = 0; i < o->n_sets && st_ == VT_OK; i++) st_ = vt_config_set(cfg, o->sets[i]);
        if (st_ == VT_OK) st_ = vt_resolve(cfg);
        if (st_ != VT_OK) return VT_ERR_USAGE;
    } else {
        *failed = VT_EVAL_FAILED_ARGS;
        return vt_fail(VT_ERR_USAGE, "%s has no __metadata__[\"config\"] (not written by vitrain, e.g. a "
                       "timm file): give the CONFIG of its model, or convert it with "
                       "scripts/timm_convert.py from-timm", o->checkpoint);
    }
    char report[2048];
    int n = meta ? vt_config_model_keys_differ(cfg, &ck, report, sizeof report) : 0;
    if (n > 0)
        return vt_fail(VT_ERR_USAGE, "%s: %d key%s that define%s the model differ%s from the checkpoint's "
                       "config (%s value vs checkpoint value): %s. Data and eval keys may differ; "
                       "without CONFIG eval takes the checkpoint's own config",
                       o->config ? o->config : "--set", n, n == 1 ? "" : "s", n == 1 ? "s" : "",
                       n == 1 ? "s" : "", o->config ? "config" : "--set", report);
    return VT_OK;
}

vt_status vt_eval_checkpoint_open(vt_eval_checkpoint *ec, const vt_eval_opts *o, vt_eval_failure *failed) {
    memset(ec, 0, sizeof *ec);
    ec->opts = o;
    *failed = VT_EVAL_FAILED_FILE;
    vt_status st = vt_st_read(o->checkpoint, &ec->ckpt);
    if (st != VT_OK) return st;
    ec->ckpt_open = 1;
    if ((st = eval_config(&ec->cfg, &ec->ckpt, o, failed)) != VT_OK) return st;
    const vt_config *cfg = &ec->cfg;
    /* The file's tensors against the model's layout before the model is allocated:
     * without CONFIG the model is the file's own config's and must be exactly what the
     * tensors fill, so a small file declaring a huge model costs only its reading. */
    *failed = VT_EVAL_FAILED_FILE;
    vt_vit planned;
    vt_model_spec ms;
    if ((st = vt_vit_plan(&planned, vt_resolve_model_spec(cfg, &ms))) != VT_OK) return st;
    vt_weights_opts strict = {0, 0};
    st = vt_weights_check(&planned, &ec->ckpt, o->checkpoint, &strict, !o->config);
    vt_vit_free(&planned);
    if (st != VT_OK) return st;
    if (o->n_resolutions) {
        for (int i = 0; i < o->n_resolutions; i++) ec->sizes[ec->n_sizes++] = o->resolutions[i];
    } else {
        ec->sizes[ec->n_sizes++] = cfg->model.img_size;
        for (int i = 0; i < cfg->eval.n_resolutions; i++)
            if (cfg->eval.resolutions[i] != cfg->model.img_size) ec->sizes[ec->n_sizes++] = cfg->eval.resolutions[i];
    }
    *failed = VT_EVAL_FAILED_ARGS;
    for (int i = 0; i < ec->n_sizes; i++)
        if ((st = vt_resolve_image_size(ec->sizes[i], cfg->model.patch_size, "--resolutions: size")) != VT_OK)
            return st;
    return VT_OK;
}

void vt_eval_checkpoint_close(vt_eval_checkpoint *ec) {
    if (ec->ckpt_open) vt_st_free(&ec->ckpt);
    ec->ckpt_open = 0;
}

/* The closing table of every size on stderr. */
static void print_table(const eval_row *rows, int n, int patch_shuffle) {
    fprintf(stderr, "\n%-10s %8s %8s %9s", "resolution", "top-1", "top-5", "loss");
    if (patch_shuffle) fprintf(stderr, " %10s %10s %9s", "shuf top-1", "shuf top-5", "drop");
    fputc('\n', stderr);
    for (int i = 0; i < n; i++) {
        const eval_row *r = &rows[i];
        fprintf(stderr, "%-10d %7.2f%% %7.2f%% %9.4f", r->plain.img_size, r->plain.top1,
                r->plain.top5, r->plain.loss);
        if (patch_shuffle)
            fprintf(stderr, " %9.2f%% %9.2f%% %8.1f%%", r->shuf.top1, r->shuf.top5,
                    100.0 * shuffle_drop(r));
        fputc('\n', stderr);
    }
}

/* The JSON line of one size on stdout and its readable line on stderr (rank 0). */
static void print_row(const vt_eval_checkpoint *ec, const eval_row *r) {
    const vt_eval_opts *o = ec->opts;
    const vt_config *cfg = &ec->cfg;
    printf("{\"checkpoint\":\"%s\",\"split\":\"%s\",\"n\":%lld,\"resolution\":%d,\"top1\":%.4f,"
           "\"top5\":%.4f,\"loss\":%.9g", o->checkpoint, cfg->data.val_split, (long long)r->plain.n,
           r->plain.img_size, r->plain.top1, r->plain.top5, r->plain.loss);
    if (o->patch_shuffle)
        printf(",\"shuffle_seed\":%llu,\"shuffled_top1\":%.4f,\"shuffled_top5\":%.4f,"
               "\"shuffled_loss\":%.9g,\"top1_drop_rel\":%.6f", (unsigned long long)o->seed, r->shuf.top1,
               r->shuf.top5, r->shuf.loss, shuffle_drop(r));
    printf("}\n");
    fflush(stdout);
    if (vt_dist_root())
        fprintf(stderr, "eval: top-1 %.2f%% top-5 %.2f%% loss %.4f (%s, %lld images, %dpx)\n",
                r->plain.top1, r->plain.top5, r->plain.loss, cfg->data.val_split, (long long)r->plain.n,
                r->plain.img_size);
}

vt_status vt_eval_checkpoint_run(vt_eval_checkpoint *ec) {
    const vt_eval_opts *o = ec->opts;
    const vt_config *cfg = &ec->cfg;
    vt_vit m;
    vt_model_spec ms;
    vt_status st = vt_blocking_for_eval(o->checkpoint, cfg->train.precision == VT_PRECISION_BF16); /* agreed */
    if (st != VT_OK) {
        vt_eval_checkpoint_close(ec);
        return st;
    }
    st = vt_vit_init(&m, vt_resolve_model_spec(cfg, &ms), (uint64_t)cfg->train.seed);
    if (st != VT_OK) {
        vt_eval_checkpoint_close(ec);
        return vt_dist_everywhere(st);
    }
    vt_weights_opts strict = {0, 0};
    st = vt_dist_agree(vt_weights_apply(&m, &ec->ckpt, o->checkpoint, &strict, NULL, NULL));
    vt_eval_checkpoint_close(ec); /* the weights are in the model: the file's memory goes */
    logits_out lo = {NULL, 0};
    int want_logits = st == VT_OK && o->logits; /* rank 0 writes the archive */
    if (want_logits && vt_dist_root()) st = vt_npz_open(&lo.z, o->logits);
    if (want_logits) st = vt_dist_agree(st);
    eval_row rows[VT_MAX_RES + 1];
    for (int done = 0; st == VT_OK && done < ec->n_sizes; done++) {
        eval_row *r = &rows[done];
        st = eval_at(cfg, &m, ec->sizes[done], o, want_logits ? &lo : NULL, r);
        if (st != VT_OK) break;
        print_row(ec, r);
    }
    if (st == VT_OK && vt_dist_root()) print_table(rows, ec->n_sizes, o->patch_shuffle);
    if (lo.z && st == VT_OK) {
        int64_t res[VT_MAX_RES + 1], nr = ec->n_sizes;
        for (int i = 0; i < ec->n_sizes; i++) res[i] = ec->sizes[i];
        st = vt_npz_add_i64(lo.z, "resolutions", res, 1, &nr);
        vt_status cs = vt_npz_close(lo.z);
        if (st == VT_OK) st = cs;
        if (st == VT_OK) fprintf(stderr, "eval: logits of %d size%s written to %s\n", ec->n_sizes,
                                 ec->n_sizes == 1 ? "" : "s", o->logits);
    } else {
        vt_npz_abort(lo.z);
    }
    if (want_logits) st = vt_dist_agree(st);
    vt_vit_free(&m);
    return st;
}
