/* loader.c - the shared batching pipeline over every dataset kind (loader.h contract).
 *
 * Owns: opening the dataset of cfg->data.kind, the sample order (train: a Fisher-Yates
 * permutation per epoch from vt_rng_derive(train.seed, epoch, VT_LOADER_TAG_PERM); eval:
 * dataset order), batching (train drops the last partial batch, eval keeps it), the
 * per-sample transforms of transform.h, train-time augmentation and the OpenMP fill.
 * Does not own: decoding (the dataset kinds), the training loop's epoch bookkeeping.
 *
 * Per sample, in this order: read native u8 HWC -> horizontal flip (train split only,
 * probability data.hflip, decided by vt_rng_derive(train.seed, epoch, dataset index) so
 * it is independent of thread count and timing) -> float x / 255 -> bilinear resize to
 * S x S when the native size differs -> gray -> 3 channels when model.in_chans = 3 ->
 * (x - mean[c]) / std[c] on the colour channels (a depth channel stays in [0, 1]).
 *
 * Batch size: vt_loader_seek sets it; until then it is train.batch_size for the train
 * split and eval.batch_size (train.batch_size if 0) for the eval split.
 * End of epoch: vt_loader_next returns *count = 0 once and moves to batch 0 of the next
 * epoch, so a loop may simply call next until count is 0, then go on calling it.
 * on_error: IDX and synthetic reads cannot fail after open (IDX is validated at open),
 * so data.on_error only matters for kinds that decode files per sample.
 * Per-thread buffers grow during the first batches only; after that next() does not
 * allocate.
 */
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "data/dataset.h"
#include "data/loader.h"
#include "data/transform.h"
#include "rng.h"

#define VT_LOADER_TAG_PERM 0x5045524D55544533ull /* > any sample index: a separate stream */

typedef struct {
    vt_sample sample;
    float *tmp;      /* native-size float CHW before resizing */
    size_t tmp_cap;  /* floats */
} loader_ws;

struct vt_loader {
    vt_dataset *ds;
    vt_split split;
    int out_size, out_c;
    float mean[3], std[3];
    double hflip;        /* 0 on the eval split */
    uint64_t seed;       /* train.seed */
    int64_t *order;      /* train: permutation of `epoch`; NULL on the eval split */
    int epoch;
    int64_t batch;       /* next batch of the epoch */
    int batch_size;
    loader_ws *ws;       /* one per OpenMP thread */
    int nws;
};

vt_status vt_sample_reserve(vt_sample *s, size_t bytes) {
    if (bytes <= s->cap) return VT_OK;
    uint8_t *p = realloc(s->pixels, bytes);
    if (!p) return vt_fail(VT_ERR_RUNTIME, "out of memory allocating a %zu-byte sample buffer", bytes);
    s->pixels = p;
    s->cap = bytes;
    return VT_OK;
}

void vt_sample_free(vt_sample *s) {
    free(s->pixels);
    s->pixels = NULL;
    s->cap = 0;
}

static void build_order(vt_loader *L) {
    if (!L->order) return;
    int64_t n = L->ds->size;
    for (int64_t i = 0; i < n; i++) L->order[i] = i;
    vt_rng r;
    vt_rng_seed(&r, vt_rng_derive(L->seed, (uint64_t)L->epoch, VT_LOADER_TAG_PERM));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)vt_rng_below(&r, (uint64_t)i + 1);
        int64_t t = L->order[i];
        L->order[i] = L->order[j];
        L->order[j] = t;
    }
}

static const char *kind_name(vt_data_kind k) {
    switch (k) {
    case VT_DATA_IDX: return "idx";
    case VT_DATA_SYNTHETIC: return "synthetic";
    case VT_DATA_IMAGEFOLDER: return "imagefolder";
    case VT_DATA_CIFAR10: return "cifar10";
    case VT_DATA_CIFAR100: return "cifar100";
    }
    return "?";
}

vt_status vt_loader_open(vt_loader **out, const vt_config *cfg, vt_split split, int img_size) {
    *out = NULL;
    if (img_size < 1) return vt_fail(VT_ERR_USAGE, "image size %d: expected >= 1", img_size);
    vt_dataset *ds = NULL;
    vt_status s;
    switch (cfg->data.kind) {
    case VT_DATA_IDX: s = vt_dataset_open_idx(&ds, cfg, split); break;
    case VT_DATA_SYNTHETIC: s = vt_dataset_open_synthetic(&ds, cfg, split); break;
    default:
        return vt_fail(VT_ERR_USAGE, "data.kind=%s: this build reads only idx and synthetic data",
                       kind_name(cfg->data.kind));
    }
    if (s) return s;
    int c = cfg->model.in_chans;
    if (!vt_tf_channels_supported(ds->channels, c)) {
        int have = ds->channels;
        ds->ops->close(ds);
        return vt_fail(VT_ERR_USAGE, "model.in_chans = %d: data.kind=%s gives %d-channel images, "
                       "which convert only to %d%s channels", c, kind_name(cfg->data.kind), have,
                       have, have == 1 ? " or 3" : "");
    }
    for (int ch = 0; ch < c && ch < 3; ch++) {
        if (!(cfg->data.std[ch] > 0)) {
            ds->ops->close(ds);
            return vt_fail(VT_ERR_USAGE, "data.std[%d] = %g: expected > 0", ch, cfg->data.std[ch]);
        }
    }
    if (ds->size < 1) {
        ds->ops->close(ds);
        return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: the %s split is empty",
                       kind_name(cfg->data.kind), split == VT_SPLIT_TRAIN ? "train" : "val");
    }
    vt_loader *L = vt_xcalloc(1, sizeof *L);
    L->ds = ds;
    L->split = split;
    L->out_size = img_size;
    L->out_c = c;
    for (int ch = 0; ch < 3; ch++) {
        L->mean[ch] = (float)cfg->data.mean[ch];
        L->std[ch] = (float)cfg->data.std[ch];
    }
    L->hflip = split == VT_SPLIT_TRAIN && cfg->data.hflip > 0 ? cfg->data.hflip : 0;
    L->seed = (uint64_t)cfg->train.seed;
    int bs = split == VT_SPLIT_TRAIN ? cfg->train.batch_size
             : (cfg->eval.batch_size > 0 ? cfg->eval.batch_size : cfg->train.batch_size);
    L->batch_size = bs > 0 ? bs : 1;
    if (split == VT_SPLIT_TRAIN) {
        L->order = malloc(sizeof(int64_t) * (size_t)ds->size);
        if (!L->order) {
            vt_loader_close(L);
            return vt_fail(VT_ERR_RUNTIME, "out of memory for the order of %lld samples",
                           (long long)ds->size);
        }
    }
    build_order(L);
    *out = L;
    return VT_OK;
}

void vt_loader_close(vt_loader *L) {
    if (!L) return;
    for (int i = 0; i < L->nws; i++) {
        vt_sample_free(&L->ws[i].sample);
        free(L->ws[i].tmp);
    }
    free(L->ws);
    free(L->order);
    if (L->ds) L->ds->ops->close(L->ds);
    free(L);
}

int64_t vt_loader_size(const vt_loader *L) { return L->ds->size; }

int vt_loader_num_classes(const vt_loader *L) { return L->ds->num_classes; }

int64_t vt_loader_batches(const vt_loader *L, int batch_size) {
    VT_ASSERT(batch_size > 0, "batch size %d", batch_size);
    int64_t n = L->ds->size;
    return L->split == VT_SPLIT_TRAIN ? n / batch_size : (n + batch_size - 1) / batch_size;
}

void vt_loader_seek(vt_loader *L, int epoch, int64_t batch, int batch_size) {
    VT_ASSERT(epoch >= 0 && batch >= 0, "seek to epoch %d batch %lld", epoch, (long long)batch);
    VT_ASSERT(batch <= vt_loader_batches(L, batch_size), "seek to batch %lld of %lld",
              (long long)batch, (long long)vt_loader_batches(L, batch_size));
    L->batch_size = batch_size;
    if (epoch != L->epoch) {
        L->epoch = epoch;
        build_order(L);
    }
    L->batch = batch;
}

void vt_loader_position(const vt_loader *L, int *epoch, int64_t *batch) {
    *epoch = L->epoch;
    *batch = L->batch;
}

/* Transform dataset sample `index` into out (out_c x S x S floats) and its label. */
static vt_status fill_one(const vt_loader *L, loader_ws *w, int64_t index, float *out, int *label) {
    vt_status s = L->ds->ops->read(L->ds, index, &w->sample, label);
    if (s) return s;
    const vt_sample *sm = &w->sample;
    int flip = 0;
    if (L->hflip > 0) {
        vt_rng r;
        vt_rng_seed(&r, vt_rng_derive(L->seed, (uint64_t)L->epoch, (uint64_t)index));
        flip = vt_rng_uniform(&r) < L->hflip;
    }
    int S = L->out_size;
    if (sm->h == S && sm->w == S) {
        vt_tf_to_float(sm->pixels, sm->h, sm->w, sm->c, flip, out);
    } else {
        size_t need = (size_t)sm->c * sm->h * sm->w;
        if (need > w->tmp_cap) {
            float *t = realloc(w->tmp, sizeof(float) * need);
            if (!t) return vt_fail(VT_ERR_RUNTIME, "out of memory for a %zu-float sample buffer", need);
            w->tmp = t;
            w->tmp_cap = need;
        }
        vt_tf_to_float(sm->pixels, sm->h, sm->w, sm->c, flip, w->tmp);
        vt_tf_resize(w->tmp, sm->c, sm->h, sm->w, out, S, S);
    }
    int64_t hw = (int64_t)S * S;
    vt_tf_expand(out, sm->c, L->out_c, hw);
    vt_tf_normalize(out, L->out_c, hw, L->mean, L->std);
    return VT_OK;
}

vt_status vt_loader_next(vt_loader *L, float *images, int *labels, float *soft, int *soft_used,
                         int *count) {
    (void)soft;
    *soft_used = 0;
    *count = 0;
    int bs = L->batch_size;
    if (L->batch >= vt_loader_batches(L, bs)) {
        L->epoch++;
        L->batch = 0;
        build_order(L);
        return VT_OK;
    }
    int64_t start = L->batch * bs, n = L->ds->size;
    int cnt = (int)(n - start < bs ? n - start : bs);
    int threads = omp_get_max_threads();
    if (threads > L->nws) {
        L->ws = vt_xrealloc(L->ws, sizeof(loader_ws) * (size_t)threads);
        memset(L->ws + L->nws, 0, sizeof(loader_ws) * (size_t)(threads - L->nws));
        L->nws = threads;
    }
    int64_t per = (int64_t)L->out_c * L->out_size * L->out_size;
    int err_at = cnt;
    vt_status err_code = VT_OK;
    char err_msg[1024] = "";
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < cnt; i++) {
        int64_t pos = start + i;
        int64_t index = L->order ? L->order[pos] : pos;
        vt_status s = fill_one(L, &L->ws[omp_get_thread_num()], index, images + i * per, &labels[i]);
        if (s) {
            #pragma omp critical(vt_loader_error)
            if (i < err_at) {
                err_at = i;
                err_code = s;
                snprintf(err_msg, sizeof err_msg, "%s", vt_last_error());
            }
        }
    }
    if (err_code)
        return vt_fail(err_code, "epoch %d batch %lld: %s", L->epoch, (long long)L->batch, err_msg);
    L->batch++;
    *count = cnt;
    return VT_OK;
}
