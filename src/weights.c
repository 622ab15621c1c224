/* weights.c - weights files into models: strict loading and fine-tuning starts
 * (contract in weights.h). vt_vit_load (vit.h) is the strict mode. */
#include "weights.h"

#include <stdio.h>
#include <string.h>

#include "safetensors.h"
#include "checkpoint_timm.h"
#include "pe/ape.h"
#include "pe/pe.h"

#define PERFORMER_W "pe.performer_w"

typedef enum { ACT_COPY, ACT_RESAMPLE, ACT_EXPAND, ACT_KEEP } action;

/* What happens to one model tensor (parameter i < n_p, or the Performer features). */
typedef struct {
    action act;
    const vt_wtensor *src;
    char why[160];          /* ACT_KEEP: the reason, for the log */
} plan;

/* One model tensor's name and checkpoint shape, whatever holds it. */
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[8];
    int64_t size;
    float *data;
} target;

static int is_pe(const char *name) { return strcmp(name, "pos_embed") == 0 || strncmp(name, "pe.", 3) == 0; }
static int is_head(const char *name) { return strcmp(name, "head.weight") == 0 || strcmp(name, "head.bias") == 0; }

static int same_shape(const target *t, const vt_wtensor *f) {
    if (t->ndim != f->ndim) return 0;
    for (int d = 0; d < f->ndim; d++)
        if (t->shape[d] != f->shape[d]) return 0;
    return 1;
}

/* A shared PE tensor (leading (L', H')) the model keeps per layer or head: the file's
 * L' and H' are each 1 or the model's, the rest equal, and not all equal. */
static int expandable(const target *t, const vt_wtensor *f) {
    if (strncmp(t->name, "pe.", 3) != 0 || strcmp(t->name, PERFORMER_W) == 0 || t->ndim < 3 ||
        f->ndim != t->ndim)
        return 0;
    for (int d = 2; d < t->ndim; d++)
        if (t->shape[d] != f->shape[d]) return 0;
    return (f->shape[0] == 1 || f->shape[0] == t->shape[0]) &&
           (f->shape[1] == 1 || f->shape[1] == t->shape[1]);
}

static void expand(const target *t, const vt_wtensor *f, float *dst) {
    int64_t inner = t->size / (t->shape[0] * t->shape[1]);
    for (int64_t l = 0; l < t->shape[0]; l++)
        for (int64_t h = 0; h < t->shape[1]; h++) {
            int64_t fl = f->shape[0] == 1 ? 0 : l, fh = f->shape[1] == 1 ? 0 : h;
            memcpy(dst + (l * t->shape[1] + h) * inner, f->data + (fl * f->shape[1] + fh) * inner,
                   (size_t)inner * sizeof(float));
        }
}

/* "'rope.freqs' (read as 'pe.freqs')" or "'head.weight'". */
static void file_name_of(const vt_wtensor *f, char *buf, size_t len) {
    if (strcmp(f->name, f->file_name) == 0) snprintf(buf, len, "'%s'", f->name);
    else snprintf(buf, len, "'%s' (read as '%s')", f->file_name, f->name);
}

static vt_status shape_error(const char *path, const target *t, const vt_wtensor *f, const char *hint) {
    char want[96], got[96], fname[400];
    vt_shape_format(t->ndim, t->shape, want, sizeof want);
    vt_shape_format(f->ndim, f->shape, got, sizeof got);
    file_name_of(f, fname, sizeof fname);
    return vt_fail(VT_ERR_RUNTIME, "%s: tensor %s: expected shape %s, found %s%s", path, fname, want,
                   got, hint);
}

/* Decide what happens to model tensor t; errors name the file and the tensor. */
static vt_status plan_one(const vt_vit *m, const char *path, const vt_weights_opts *o,
                          const vt_wfile *wf, const target *t, plan *pl) {
    const vt_wtensor *f = vt_wfile_find(wf, t->name);
    pl->src = f;
    pl->why[0] = '\0';
    int perf = strcmp(t->name, PERFORMER_W) == 0;
    if (!f) {
        if (o->init && (is_pe(t->name) || is_head(t->name))) {
            pl->act = ACT_KEEP;
            snprintf(pl->why, sizeof pl->why, "not in the file (%s)",
                     perf ? "the features drawn at init" : is_head(t->name) ? "timm's init" : "the kind's init");
            return VT_OK;
        }
        if (perf)
            return vt_fail(VT_ERR_RUNTIME, "%s: missing tensor '%s' (model.attention = performer keeps its "
                           "random features in the checkpoint)", path, PERFORMER_W);
        const char *hint = "";
        if (!strncmp(t->name, "fc_norm.", 8) && vt_wfile_find(wf, "norm.weight"))
            hint = "; the file has norm.*: its model pools the class token (model.pool = token)";
        else if (!strncmp(t->name, "norm.", 5) && vt_wfile_find(wf, "fc_norm.weight"))
            hint = "; the file has fc_norm.*: its model averages the patch tokens (model.pool = avg)";
        else if (strstr(t->name, ".ls1.gamma") || strstr(t->name, ".ls2.gamma"))
            hint = "; the file has no layer scale (model.layer_scale = 0)";
        return vt_fail(VT_ERR_RUNTIME, "%s: missing tensor '%s' (the model needs it%s)", path, t->name, hint);
    }
    if (same_shape(t, f)) {
        pl->act = ACT_COPY;
        return VT_OK;
    }
    if (strcmp(t->name, "pos_embed") == 0 && f->ndim == 3 && f->shape[0] == 1 && f->shape[2] == m->D &&
        f->shape[1] >= 2) {
        pl->act = ACT_RESAMPLE;
        return VT_OK;
    }
    if (o->init && expandable(t, f)) {
        pl->act = ACT_EXPAND;
        return VT_OK;
    }
    if (o->init && is_head(t->name)) {
        char got[96];
        vt_shape_format(f->ndim, f->shape, got, sizeof got);
        pl->act = ACT_KEEP;
        snprintf(pl->why, sizeof pl->why, "the file has %s (timm's init)", got);
        return VT_OK;
    }
    const char *hint = "";
    if (perf) hint = " (L, H, performer.features, hd)";
    else if (is_head(t->name) && !o->init)
        hint = " (model.num_classes differs; to fine-tune with a new head, start training with "
               "train.init)";
    else if (strncmp(t->name, "pe.", 3) == 0)
        hint = " (the PE settings differ: pe.share, pe.coord_dim, pe.block_size or model.heads)";
    return shape_error(path, t, f, hint);
}

/* Append "what F here, M in the config (key)" to a "; "-joined list when F != M. */
static void note_diff(char *buf, size_t len, int *n, const char *what, int64_t file, int64_t model,
                      const char *key) {
    if (file < 0 || file == model) return;
    size_t u = strlen(buf);
    snprintf(buf + u, len - u, "%s%s %lld here, %lld in the config (%s)", *n ? "; " : "", what,
             (long long)file, (long long)model, key);
    (*n)++;
}

/* The file's model against the config's on what the tensors tell: width, depth, patch
 * size, input channels and MLP width. Every difference is named at once, before any
 * tensor-by-tensor message (which would name a consequence: an unexpected block, a
 * shape). */
static vt_status check_model_shape(const vt_vit *m, const vt_wfile *wf, const char *path) {
    const vt_wtensor *pw = vt_wfile_find(wf, "patch_embed.proj.weight");
    const vt_wtensor *cls = vt_wfile_find(wf, "cls_token");
    const vt_wtensor *fc1 = vt_wfile_find(wf, "blocks.0.mlp.fc1.weight");
    int64_t D = pw && pw->ndim == 4 ? pw->shape[0] : cls && cls->ndim == 3 ? cls->shape[2] : -1;
    int64_t L = 0;
    for (int k = 0; k < wf->n; k++) {
        int b;
        if (sscanf(wf->t[k].name, "blocks.%d.", &b) == 1 && b + 1 > L) L = b + 1;
    }
    char diff[512] = "";
    int n = 0;
    note_diff(diff, sizeof diff, &n, "width", D, m->D, "model.width");
    note_diff(diff, sizeof diff, &n, "depth", L > 0 ? L : -1, m->L, "model.depth");
    if (pw && pw->ndim == 4 && pw->shape[2] == pw->shape[3])
        note_diff(diff, sizeof diff, &n, "patch size", pw->shape[2], m->P, "model.patch_size");
    if (pw && pw->ndim == 4 && m->embed_chans == m->in_chans)
        note_diff(diff, sizeof diff, &n, "input channels", pw->shape[1], m->in_chans, "model.in_chans");
    if (fc1 && fc1->ndim == 2 && D == m->D)
        note_diff(diff, sizeof diff, &n, "MLP hidden width", fc1->shape[0], m->mlp_hidden, "model.mlp_ratio");
    if (!n) return VT_OK;
    return vt_fail(VT_ERR_RUNTIME, "%s holds another model than the config's: %s. Set %s to the file's "
                   "value%s", path, diff, n == 1 ? "that key" : "those keys", n == 1 ? "" : "s");
}

static target target_of(vt_vit *m, int i) {
    target t;
    memset(&t, 0, sizeof t);
    if (i < m->n_p) {
        vt_param *p = &m->p[i];
        t.name = p->name;
        t.ndim = p->ckpt_ndim;
        memcpy(t.shape, p->ckpt_shape, sizeof t.shape);
        t.size = p->t.size;
        t.data = p->t.data;
    } else {
        int64_t shape[4] = {m->L, m->H, m->performer_m, m->hd};
        t.name = PERFORMER_W;
        t.ndim = 4;
        memcpy(t.shape, shape, sizeof shape);
        t.size = shape[0] * shape[1] * shape[2] * shape[3];
        t.data = m->performer_w;
    }
    return t;
}

static void log_line(FILE *log, const char *path, const char *what, const target *t, const char *rest) {
    if (!log) return;
    char s[96];
    vt_shape_format(t->ndim, t->shape, s, sizeof s);
    fprintf(log, "vitrain: train.init %s: %s %s %s%s\n", path, what, t->name, s, rest);
}

vt_status vt_weights_load(vt_vit *m, const char *path, const vt_weights_opts *opts,
                          vt_weights_report *rep, FILE *log) {
    vt_safetensors st;
    vt_status s = vt_st_read(path, &st);
    if (s != VT_OK) return s;
    s = vt_weights_apply(m, &st, path, opts, rep, log);
    vt_st_free(&st);
    return s;
}

/* Model tensors: the parameters, and the Performer features when the model has them
 * (a planned model has no memory for them yet, but they are in its checkpoints). */
static int model_tensors(const vt_vit *m) { return m->n_p + (m->performer_m > 0 ? 1 : 0); }

/* Every rule of the policy (opts) for model m against the file's tensors wf, without
 * touching the model's data: unknown file tensors first (in file order; ignored ones
 * counted in *ignored and logged), then each model tensor's plan into pl[0..nt). */
static vt_status check_all(vt_vit *m, const vt_wfile *wf, const char *path,
                           const vt_weights_opts *opts, plan *pl, int *ignored, FILE *log) {
    const int nt = model_tensors(m);
    vt_status s = check_model_shape(m, wf, path);
    if (s != VT_OK) return s;
    /* each model tensor marks the file's tensor of its name (a binary search) */
    char *known = vt_xcalloc((size_t)wf->n + 1, 1);
    for (int i = 0; i < nt; i++) {
        const vt_wtensor *f = vt_wfile_find(wf, target_of(m, i).name);
        if (f) known[f - wf->t] = 1;
    }
    for (int k = 0; k < wf->n && s == VT_OK; k++) {
        const vt_wtensor *f = &wf->t[k];
        if (known[k]) continue;
        char fname[400], sh[96];
        file_name_of(f, fname, sizeof fname);
        vt_shape_format(f->ndim, f->shape, sh, sizeof sh);
        if (!opts->init)
            s = vt_fail(VT_ERR_RUNTIME, "%s: unknown tensor %s %s (the model built from the config has no "
                        "such parameter)", path, fname, sh);
        else if (!opts->allow_unexpected)
            s = vt_fail(VT_ERR_RUNTIME, "%s: unexpected tensor %s %s: the model built from the config has no "
                        "such parameter (set train.init_allow_unexpected = true to ignore it)", path, fname, sh);
        else {
            (*ignored)++;
            if (log) fprintf(log, "vitrain: train.init %s: ignored %s %s (no such model parameter; "
                             "train.init_allow_unexpected)\n", path, fname, sh);
        }
    }
    free(known);
    for (int i = 0; i < nt && s == VT_OK; i++) {
        target t = target_of(m, i);
        s = plan_one(m, path, opts, wf, &t, &pl[i]);
    }
    return s;
}

vt_status vt_weights_check(vt_vit *planned, const vt_safetensors *st, const char *path,
                           const vt_weights_opts *opts, int exact) {
    const int nt = model_tensors(planned);
    int64_t model_floats = 0, file_floats = 0;
    for (int i = 0; i < nt; i++) model_floats += target_of(planned, i).size;
    for (int i = 0; i < st->n; i++) file_floats += st->tensors[i].size;
    if (exact && model_floats > file_floats)
        return vt_fail(VT_ERR_RUNTIME, "%s: the model its config describes has %lld values in %d "
                       "tensors, more than the %lld values of the file's %d tensors can fill (a "
                       "config that does not describe these weights)", path,
                       (long long)model_floats, nt, (long long)file_floats, st->n);
    vt_wfile wf;
    vt_status s = vt_wfile_from_st(st, path, &wf);
    if (s != VT_OK) return s;
    plan *pl = vt_xcalloc((size_t)nt + 1, sizeof *pl);
    int ignored = 0;
    s = check_all(planned, &wf, path, opts, pl, &ignored, NULL);
    for (int i = 0; i < nt && s == VT_OK && exact; i++)
        if (pl[i].act != ACT_COPY) {
            target t = target_of(planned, i);
            s = shape_error(path, &t, pl[i].src, " (the file's own config describes another "
                            "grid than its tensor holds)");
        }
    free(pl);
    vt_wfile_free(&wf);
    return s;
}

vt_status vt_weights_apply(vt_vit *m, const vt_safetensors *st, const char *path,
                           const vt_weights_opts *opts, vt_weights_report *rep, FILE *log) {
    vt_weights_report r;
    memset(&r, 0, sizeof r);
    vt_wfile wf;
    vt_status s = vt_wfile_from_st(st, path, &wf);
    if (s != VT_OK) return s;
    const int nt = model_tensors(m);
    plan *pl = vt_xcalloc((size_t)nt + 1, sizeof *pl);
    float **staged = vt_xcalloc((size_t)nt + 1, sizeof *staged);

    /* Validate everything before writing anything; resampled and expanded data is staged. */
    s = check_all(m, &wf, path, opts, pl, &r.ignored, log);
    for (int i = 0; i < nt && s == VT_OK; i++) {
        target t = target_of(m, i);
        if (pl[i].act == ACT_RESAMPLE) {
            staged[i] = vt_xmalloc((size_t)t.size * sizeof(float));
            s = vt_pe_resample_pos_embed(pl[i].src->data, pl[i].src->shape[1] - 1, staged[i], t.shape[1] - 1,
                                         m->D, t.name);
            if (s != VT_OK) s = vt_fail_context(s, "%s", path);
        } else if (pl[i].act == ACT_EXPAND) {
            staged[i] = vt_xmalloc((size_t)t.size * sizeof(float));
            expand(&t, pl[i].src, staged[i]);
        }
    }
    if (s == VT_OK) {
        for (int i = 0; i < nt; i++) {
            target t = target_of(m, i);
            const vt_wtensor *f = pl[i].src;
            char sh[128] = "";
            if (f) vt_shape_format(f->ndim, f->shape, sh, sizeof sh);
            switch (pl[i].act) {
            case ACT_COPY:
                memcpy(t.data, f->data, (size_t)t.size * sizeof(float));
                r.loaded++;
                r.converted += f->layout != NULL;
                r.widened += strcmp(f->dtype, "F32") != 0;
                break;
            case ACT_RESAMPLE:
            case ACT_EXPAND: {
                memcpy(t.data, staged[i], (size_t)t.size * sizeof(float));
                /* the shape as stored, and as converted when a timm layout changed it */
                char stored[96], rest[400];
                vt_shape_format(f->file_ndim, f->file_shape, stored, sizeof stored);
                int changed = strcmp(stored, sh) != 0;
                snprintf(rest, sizeof rest, " from %s%s%s%s%s%s", stored,
                         changed ? " as stored (read as " : "", changed ? sh : "",
                         changed ? ": " : "", changed ? f->layout : "",
                         pl[i].act == ACT_RESAMPLE
                             ? (changed ? "), bicubic, class-token row kept"
                                        : " (bicubic, class-token row kept)")
                             : " (the file's shared set copied to every layer / head)");
                if (opts->init) log_line(log, path, pl[i].act == ACT_RESAMPLE ? "resampled" : "expanded", &t, rest);
                if (pl[i].act == ACT_RESAMPLE) r.resampled++;
                else r.expanded++;
                break;
            }
            case ACT_KEEP: {
                char rest[200];
                snprintf(rest, sizeof rest, ": %s", pl[i].why);
                log_line(log, path, "re-initialised", &t, rest);
                r.reinit++;
                break;
            }
            }
        }
        vt_pe_clear_unused(m->pe);
        if (opts->init && log)
            fprintf(log, "vitrain: train.init %s: %d of %d model tensors loaded as stored (%d from timm "
                    "layouts, %d widened from BF16/F16), %d resampled, %d expanded, %d re-initialised, "
                    "%d file tensors ignored\n", path, r.loaded, nt, r.converted, r.widened, r.resampled,
                    r.expanded, r.reinit, r.ignored);
    }
    for (int i = 0; i < nt; i++) free(staged[i]);
    free(staged);
    free(pl);
    vt_wfile_free(&wf);
    if (rep) *rep = r;
    return s;
}

vt_status vt_vit_load(vt_vit *m, const char *path) {
    vt_weights_opts strict = {0, 0};
    return vt_weights_load(m, path, &strict, NULL, NULL);
}
