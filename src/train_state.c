/* train_state.c - the resume state file (contract in train_state.h). */
#include "train_state.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

#define STATE_FORMAT "vitrain-train-state-1"

uint64_t vt_train_params_hash(const float *params, int64_t n) {
    const unsigned char *p = (const unsigned char *)params;
    size_t bytes = (size_t)n * sizeof(float);
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < bytes; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The timings (wall_s, epoch_stats' seconds) at one width: 17 significant digits (a double
 * round trip) in 22 characters for 0 and any time from 1e-99 s to 1e100 s, so the file's size
 * (its header's padding) depends on the run's state, not on how long the run took. */
#define TIME_FMT "%.16e"

vt_status vt_train_state_write(const char *path, const vt_train_state *s, const float *m,
                               const float *v, int64_t n, const char *config_json) {
    char step[32], epoch[32], batch[32], ot[32], rng[80], best[40], wl[40], hash[24];
    snprintf(step, sizeof step, "%" PRId64, s->step);
    snprintf(epoch, sizeof epoch, "%" PRId64, s->epoch);
    snprintf(batch, sizeof batch, "%" PRId64, s->batch);
    snprintf(ot, sizeof ot, "%" PRId64, s->optim_t);
    snprintf(rng, sizeof rng, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64,
             s->rng[0], s->rng[1], s->rng[2], s->rng[3]);
    snprintf(best, sizeof best, "%.17g", s->best_top1);
    snprintf(wl, sizeof wl, TIME_FMT, s->wall_s);
    snprintf(hash, sizeof hash, "%016" PRIx64, s->params_hash);
    char best_step[32], es[160];
    const vt_epoch_stats *e = &s->epoch_stats;
    snprintf(best_step, sizeof best_step, "%" PRId64, s->best_step);
    snprintf(es, sizeof es, "%.17g %" PRId64 " %" PRId64 " %" PRId64 " " TIME_FMT " %" PRId64, e->loss_sum,
             e->steps, e->correct, e->counted, e->seconds, e->images);
    const char *keys[] = {"format", "step", "epoch", "batch", "optim_t", "rng", "best_top1",
                          "wall_s", "params_hash", "best_step", "epoch_stats", "eval_pending", "config"};
    const char *vals[] = {STATE_FORMAT, step, epoch, batch, ot, rng, best, wl, hash, best_step, es,
                          s->eval_pending ? "1" : "0", config_json ? config_json : "{}"};
    vt_st_tensor t[2];
    int nt = 0;
    const float *bufs[2] = {m, v};
    const char *names[2] = {"optim.m", "optim.v"};
    for (int i = 0; i < 2; i++) {
        if (!bufs[i]) continue;
        memset(&t[nt], 0, sizeof t[nt]);
        snprintf(t[nt].name, sizeof t[nt].name, "%s", names[i]);
        t[nt].ndim = 1;
        t[nt].shape[0] = n;
        t[nt].size = n;
        t[nt].data = (float *)bufs[i];
        nt++;
    }
    return vt_st_write(path, t, nt, keys, vals, (int)(sizeof keys / sizeof keys[0]));
}

static vt_status meta_str(const vt_safetensors *f, const char *path, const char *key,
                          const char **out) {
    *out = vt_st_meta(f, key);
    if (!*out)
        return vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ has no \"%s\" (not a vitrain resume "
                       "state, or a damaged one)", path, key);
    return VT_OK;
}

static vt_status meta_i64(const vt_safetensors *f, const char *path, const char *key,
                          int64_t *out) {
    const char *v;
    vt_status s = meta_str(f, path, key, &v);
    if (s) return s;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < 0 || v[0] < '0' || v[0] > '9')
        return vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"%s\" = \"%.40s\": expected a "
                       "non-negative integer", path, key, v);
    *out = x;
    return VT_OK;
}

static vt_status meta_f64(const vt_safetensors *f, const char *path, const char *key,
                          double lo, double *out) {
    const char *v;
    vt_status s = meta_str(f, path, key, &v);
    if (s) return s;
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo)
        return vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"%s\" = \"%.40s\": expected a finite "
                       "number >= %g", path, key, v, lo);
    *out = x;
    return VT_OK;
}

/* Exactly `count` space-separated words of 16 hex digits. */
static int parse_hex_words(const char *v, uint64_t *out, int count) {
    for (int w = 0; w < count; w++) {
        if (w > 0 && *v++ != ' ') return 0;
        uint64_t x = 0;
        for (int k = 0; k < 16; k++, v++) {
            char c = *v;
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0) return 0;
            x = x << 4 | (uint64_t)d;
        }
        out[w] = x;
    }
    return *v == '\0';
}

/* The optional keys of newer builds (train_state.h): best_step, epoch_stats and
 * eval_pending. */
static vt_status optional_keys(const vt_safetensors *f, const char *path, vt_train_state *s) {
    s->best_step = -1;
    s->eval_pending = 0;
    memset(&s->epoch_stats, 0, sizeof s->epoch_stats);
    const char *bs = vt_st_meta(f, "best_step"), *es = vt_st_meta(f, "epoch_stats");
    const char *ep = vt_st_meta(f, "eval_pending");
    if (ep) {
        if (strcmp(ep, "0") != 0 && strcmp(ep, "1") != 0)
            return vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"eval_pending\" = \"%.40s\": expected "
                           "\"0\" or \"1\"", path, ep);
        s->eval_pending = ep[0] == '1';
    }
    if (bs) {
        char *end;
        long long x = strtoll(bs, &end, 10);
        if (end == bs || *end || x < -1 || x > s->step)
            return vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"best_step\" = \"%.40s\": expected an "
                           "integer -1..%lld (the step)", path, bs, (long long)s->step);
        s->best_step = x;
    }
    if (es) {
        vt_epoch_stats *e = &s->epoch_stats;
        long long steps, correct, counted, images;
        int used = 0;
        if (sscanf(es, "%lf %lld %lld %lld %lf %lld%n", &e->loss_sum, &steps, &correct, &counted,
                   &e->seconds, &images, &used) != 6 || es[used] || !isfinite(e->loss_sum) ||
            !isfinite(e->seconds) || e->seconds < 0 || steps < 0 || steps > s->step || correct < 0 ||
            counted < correct || images < 0)
            return vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"epoch_stats\" = \"%.80s\": expected "
                           "\"loss_sum steps correct counted seconds images\" (finite numbers, "
                           "counts >= 0, correct <= counted, steps <= step)", path, es);
        e->steps = steps;
        e->correct = correct;
        e->counted = counted;
        e->images = images;
    }
    return VT_OK;
}

/* Tensor `name` of n floats, or an error naming what was found. */
static vt_status moment(const vt_safetensors *f, const char *path, const char *name, int64_t n,
                        const vt_st_tensor **out) {
    const vt_st_tensor *t = vt_st_find(f, name);
    *out = t;
    if (!t)
        return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\" is missing (expected %lld floats)", path,
                       name, (long long)n);
    if (t->ndim != 1 || t->size != n)
        return vt_fail(VT_ERR_RUNTIME, "%s: tensor \"%s\": expected shape (%lld), found %d "
                       "dimensions and %lld floats (a state of another model?)", path, name,
                       (long long)n, t->ndim, (long long)t->size);
    return VT_OK;
}

vt_status vt_train_state_read(const char *path, int64_t n, float *m, float *v, vt_train_state *s) {
    memset(s, 0, sizeof *s);
    vt_safetensors f;
    vt_status st = vt_st_read(path, &f);
    if (st != VT_OK) return st;
    const char *fmt = NULL, *rng = NULL, *hash = NULL, *cfg = NULL;
    const vt_st_tensor *tm = NULL, *tv = NULL;
    if ((st = meta_str(&f, path, "format", &fmt)) != VT_OK) goto out;
    if (strcmp(fmt, STATE_FORMAT) != 0) {
        st = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ format is \"%.40s\", expected \"%s\"", path,
                     fmt, STATE_FORMAT);
        goto out;
    }
    if ((st = meta_i64(&f, path, "step", &s->step)) != VT_OK) goto out;
    if ((st = meta_i64(&f, path, "epoch", &s->epoch)) != VT_OK) goto out;
    if ((st = meta_i64(&f, path, "batch", &s->batch)) != VT_OK) goto out;
    if ((st = meta_i64(&f, path, "optim_t", &s->optim_t)) != VT_OK) goto out;
    if ((st = meta_f64(&f, path, "best_top1", -1.0, &s->best_top1)) != VT_OK) goto out;
    if ((st = meta_f64(&f, path, "wall_s", 0.0, &s->wall_s)) != VT_OK) goto out;
    if ((st = meta_str(&f, path, "rng", &rng)) != VT_OK) goto out;
    if (!parse_hex_words(rng, s->rng, 4) || (s->rng[0] | s->rng[1] | s->rng[2] | s->rng[3]) == 0) {
        st = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"rng\" = \"%.80s\": expected four words of "
                     "16 lowercase hex digits, not all zero", path, rng);
        goto out;
    }
    if ((st = meta_str(&f, path, "params_hash", &hash)) != VT_OK) goto out;
    if (!parse_hex_words(hash, &s->params_hash, 1)) {
        st = vt_fail(VT_ERR_RUNTIME, "%s: __metadata__ \"params_hash\" = \"%.40s\": expected 16 "
                     "lowercase hex digits", path, hash);
        goto out;
    }
    if ((st = optional_keys(&f, path, s)) != VT_OK) goto out;
    if ((st = moment(&f, path, "optim.m", n, &tm)) != VT_OK) goto out;
    if (v && (st = moment(&f, path, "optim.v", n, &tv)) != VT_OK) goto out;
    for (int i = 0; i < f.n; i++) {
        const char *name = f.tensors[i].name;
        if (strcmp(name, "optim.m") == 0 || (v && strcmp(name, "optim.v") == 0)) continue;
        st = vt_fail(VT_ERR_RUNTIME, "%s: unexpected tensor \"%s\"%s", path, name,
                     strcmp(name, "optim.v") == 0
                         ? ": the state was written with AdamW, this run's optim.name keeps one "
                           "moment (did optim.name change?)"
                         : "");
        goto out;
    }
    for (int64_t i = 0; tv && i < n; i++)
        if (tv->data[i] < 0) {
            st = vt_fail(VT_ERR_RUNTIME, "%s: tensor \"optim.v\" element %lld is %g: AdamW's second "
                         "moment is never negative (a corrupt file)", path, (long long)i,
                         (double)tv->data[i]);
            goto out;
        }
    cfg = vt_st_meta(&f, "config");
    s->config = cfg ? strdup(cfg) : NULL;
    VT_ASSERT(!cfg || s->config, "out of memory");
    memcpy(m, tm->data, (size_t)n * sizeof(float));
    if (v) memcpy(v, tv->data, (size_t)n * sizeof(float));
out:
    vt_st_free(&f);
    return st;
}
