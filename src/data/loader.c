/* loader.c - the shared batching pipeline over every dataset kind (loader.h contract).
 *
 * Owns: opening the format of a spec's data.kind (formats.h), the sample order (train: a
 * permutation per epoch keyed by vt_rng_derive(train.seed, epoch, VT_LOADER_TAG_PERM):
 * Fisher-Yates into an array for splits of up to VT_LOADER_MAX_STORED_ORDER samples;
 * beyond that vt_rng_permute, computed per position, so the order of a split of 10^9
 * synthetic samples costs no memory; eval: dataset order), the rank/world shard of that
 * order, batching (train drops the last partial batch, eval keeps it), the per-sample transform pipeline, batch mixup/cutmix,
 * and the worker threads that prefetch batches.
 * Shards (data parallelism): rank r of R reads positions r, r + R, ... of the order, so
 * with batches of batch_size / R per rank, batch b of the ranks together is batch b of
 * one process (its positions [b B, (b + 1) B), B the global batch). Mixup pairs global
 * position g with B - 1 - g, which another rank holds: with R > 1 and mixup/cutmix on,
 * each rank also decodes, unmixed, the partner of each of its samples (the same sample
 * stream, so the same pixels the partner's rank makes) and mixes with the draws of the
 * whole batch (augment.h vt_mixup_pair): the batch bits equal one process's. The cost is
 * one more sample decoded per sample.
 * Does not own: decoding (the dataset kinds), pixel primitives (transform.c), the random
 * augmentations themselves (augment.c), the training loop's epoch bookkeeping.
 *
 * Per sample (dataset index i of epoch e; every random draw comes from one stream seeded
 * vt_rng_derive(train.seed, e, i), so results never depend on threads or timing):
 *   train, simple: flip (probability data.hflip: the stream's first draw) -> RandAugment at
 *     native size -> float x / 255 -> bilinear resize to S x S when the size differs
 *   train, rrc: RandomResizedCrop box -> PIL-style resample of the box to S x S
 *     (data.interpolation) -> flip -> RandAugment
 *   eval: data.eval_transform (resolved: the format's default unless given) resize:
 *     bilinear resize to S x S; center_crop: resize the shorter side to int(S / crop_pct)
 *     and center-crop S x S (transform.h vt_tf_eval_geometry)
 *   then gray -> 3 channels when model.in_chans = 3, (x - mean[c]) / std[c] on the colour
 *   channels (a depth channel stays in [0, 1]) and, train only, random erasing (data.reprob).
 * Per train batch: mixup / cutmix (augment.h vt_mixup_apply) with a stream seeded from
 * (train.seed, epoch, batch); whenever data.mixup or data.cutmix is on, every train batch
 * carries soft targets with train.label_smoothing folded in (*soft_used = 1).
 * RandAugment's fill colour is round(255 * data.mean[c]) (timm img_mean).
 *
 * Threads: with W = data.workers > 0 (0 = auto: online CPUs, at most 8) W pthreads fill a
 * ring of VT_LOADER_DEPTH batch slots ahead of the consumer, claiming samples one at a time
 * from the oldest unfinished slot (so they cooperate on the next batch); the thread that
 * finishes a batch's last sample applies mixup. vt_loader_next copies the oldest finished
 * slot into the caller's buffers; it waits only when the workers are behind. Workers do not
 * use OpenMP: on a machine whose cores also run the training step's OpenMP team they simply
 * time-share the cores, and once the ring is full they sleep until the step takes a batch.
 * vt_loader_set_workers(L, 0) selects the synchronous path instead: next() fills the batch
 * on the calling thread with an OpenMP loop over samples. Both paths give bitwise identical
 * batches. Memory: VT_LOADER_DEPTH slots of one batch each (images, labels, soft targets).
 * A worker's error (the failing sample with the lowest position in its batch) is returned
 * by the vt_loader_next that reaches that batch, with "epoch e batch b:" before the message,
 * and again by every later next() until a seek. vt_loader_seek pauses the workers, waits
 * for samples in flight, drops the prefetched batches and restarts at the new position;
 * a seek to the position the loader already stands at (e.g. epoch e + 1 batch 0 right
 * after the last batch of epoch e) keeps the prefetched batches.
 *
 * Batch size: vt_loader_seek sets it; until then it is the spec's train_batch for the
 * train split and eval_batch for the eval split.
 * End of epoch: vt_loader_next returns *count = 0 once and moves to batch 0 of the next
 * epoch, so a loop may simply call next until count is 0, then go on calling it.
 * on_error: IDX, synthetic and CIFAR reads cannot fail after open (validated at open);
 * imagefolder handles data.on_error in its read() (dataset.h), and the loader logs the
 * skip total at the end of every epoch in which it is non-zero (vt_loader_skipped).
 * Memory: per-thread buffers are sized when the thread's scratch is created for datasets
 * with one native size (idx, cifar, synthetic), otherwise they grow to the largest sample
 * seen (the resampling scratch depends on the image size, not on the random crop box);
 * after that neither path allocates per batch (tests/test_loader.c counts allocations).
 */
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/augment.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "data/loader.h"
#include "data/transform.h"
#include "rng.h"

#define VT_LOADER_TAG_PERM 0x5045524D55544533ull /* > any sample index: a separate stream */
#define VT_LOADER_TAG_MIX 0x4D49585550424154ull  /* the per-batch mixup streams */
#define VT_LOADER_DEPTH 3                        /* prefetched batches */
#define VT_LOADER_MAX_AUTO_WORKERS 8
#define VT_LOADER_MAX_STORED_ORDER ((int64_t)1 << 22) /* 32 MB of order array at most */

/* Per-thread scratch; each buffer grows to the largest sample seen, then stays. */
typedef struct {
    vt_sample sample;
    void *tmp;           /* native-size float CHW before resizing */
    void *img, *aux;     /* u8 HWC working image and RandAugment scratch */
    void *rs;            /* resampling scratch */
    size_t tmp_cap, img_cap, aux_cap, rs_cap; /* bytes */
} loader_ws;

enum { SLOT_EMPTY = 0, SLOT_FILLING, SLOT_READY };

typedef struct {
    int state;
    int epoch;
    int64_t batch;
    int count, claimed, done;
    int units;           /* samples to fill: count, and with partners their partners after */
    int64_t *idx;        /* dataset indices, units used */
    float *images, *soft; /* images and labels: units entries */
    int *labels;
    int err_at;          /* lowest failing position, count if none */
    vt_status err;
    char err_msg[1024];
} slot;

typedef struct {
    vt_loader *L;
    int id;
} worker_arg;

struct vt_loader {
    vt_dataset *ds;
    vt_split split;
    int out_size, out_c;
    float mean[3], std[3];
    uint8_t fill[3];
    double hflip;        /* 0 on the eval split */
    int rrc;             /* train: RandomResizedCrop pipeline (else simple) */
    int eval_crop;       /* eval: resize shorter side + center crop (else plain resize) */
    vt_interp interp;
    double scale[2], ratio[2], crop_pct;
    vt_randaug ra;
    double reprob;
    vt_remode remode;
    vt_mixup mix;
    int mix_on;
    uint64_t seed;       /* train.seed */
    int rank, world;     /* shard: every world-th position of the order, from rank */
    int partners;        /* mixup with world > 1: each sample's partner is decoded too */
    float *pimages;      /* the synchronous path's partner images and labels */
    int *plabels;
    int pcap;
    int64_t *order;      /* train, small splits: permutation of order_epoch; else NULL */
    uint64_t order_key;  /* train, large splits: vt_rng_permute key of order_epoch */
    int order_epoch;
    int epoch;
    int64_t batch;       /* next batch of the epoch (consumer position) */
    int batch_size;
    loader_ws *ws;       /* per OpenMP thread (synchronous) or per worker */
    int nws;
    /* prefetch */
    int workers;         /* 0: synchronous */
    int started;         /* threads running */
    pthread_t *threads;
    worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
    slot slots[VT_LOADER_DEPTH];
    int slot_cap;        /* samples each slot holds */
    int64_t head, tail;  /* sequence numbers: next to consume, next to schedule */
    int sched_epoch;
    int64_t sched_batch;
    int paused, quit, in_flight;
};

static void build_order(vt_loader *L, int epoch) {
    if (L->split != VT_SPLIT_TRAIN || L->order_epoch == epoch) return;
    uint64_t key = vt_rng_derive(L->seed, (uint64_t)epoch, VT_LOADER_TAG_PERM);
    L->order_key = key;
    L->order_epoch = epoch;
    if (!L->order) return;
    int64_t n = L->ds->size;
    for (int64_t i = 0; i < n; i++) L->order[i] = i;
    vt_rng r;
    vt_rng_seed(&r, key);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)vt_rng_below(&r, (uint64_t)i + 1);
        int64_t t = L->order[i];
        L->order[i] = L->order[j];
        L->order[j] = t;
    }
}

/* Samples of this rank's shard. */
static int64_t shard_size(const vt_loader *L) {
    return (L->ds->size - L->rank + L->world - 1) / L->world;
}

static int auto_workers(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > VT_LOADER_MAX_AUTO_WORKERS ? VT_LOADER_MAX_AUTO_WORKERS : (int)n;
}

vt_status vt_loader_open_dataset(vt_loader **out, vt_dataset *ds, const vt_data_spec *spec,
                                 vt_split split, int img_size) {
    *out = NULL;
    const vt_data_config *d = &spec->data;
    int c = spec->in_chans, train = split == VT_SPLIT_TRAIN;
    VT_ASSERT(img_size >= 1, "image size %d", img_size);
    VT_ASSERT(d->train_transform != VT_TT_AUTO && d->eval_transform != VT_ET_AUTO &&
              spec->train_batch > 0 && spec->eval_batch > 0,
              "data spec of an unresolved config (train_transform %d, eval_transform %d, batches %d/%d)",
              (int)d->train_transform, (int)d->eval_transform, spec->train_batch, spec->eval_batch);
    const char *kn = ds->ops->kind ? ds->ops->kind : vt_data_kind_name(d->kind);
    if (!vt_tf_channels_supported(ds->channels, c)) {
        int have = ds->channels;
        ds->ops->close(ds);
        return vt_fail(VT_ERR_USAGE, "model.in_chans = %d: data.kind=%s gives %d-channel images, "
                       "which convert only to %d%s channels", c, kn, have, have,
                       have == 1 ? " or 3" : "");
    }
    if (ds->size < 1) {
        ds->ops->close(ds);
        return vt_fail(VT_ERR_RUNTIME, "data.kind=%s: the %s split is empty", kn,
                       train ? "train" : "val");
    }
    vt_loader *L = vt_xcalloc(1, sizeof *L);
    L->ds = ds;
    L->split = split;
    L->out_size = img_size;
    L->out_c = c;
    for (int ch = 0; ch < 3; ch++) {
        VT_ASSERT(d->std[ch] > 0, "data.std[%d] = %g", ch, d->std[ch]);
        L->mean[ch] = (float)d->mean[ch];
        L->std[ch] = (float)d->std[ch];
        double f = d->mean[ch] * 255.0 + 0.5;
        L->fill[ch] = (uint8_t)(f > 255 ? 255 : f < 0 ? 0 : f);
    }
    L->hflip = train && d->hflip > 0 ? d->hflip : 0;
    L->rrc = train && d->train_transform == VT_TT_RRC;
    L->eval_crop = !train && d->eval_transform == VT_ET_CENTER_CROP;
    L->interp = d->interpolation;
    L->crop_pct = d->crop_pct;
    for (int k = 0; k < 2; k++) {
        VT_ASSERT(d->scale[k] > 0 && d->ratio[k] > 0, "data.scale / data.ratio entries must be > 0");
        L->scale[k] = d->scale[k];
        L->ratio[k] = d->ratio[k];
    }
    L->ra = spec->randaug;
    if (!train) L->ra.enabled = 0;
    L->reprob = train ? d->reprob : 0;
    L->remode = d->remode;
    L->mix = (vt_mixup){ .mixup = d->mixup, .cutmix = d->cutmix, .prob = d->mixup_prob,
                         .switch_prob = d->mixup_switch_prob,
                         .smoothing = spec->label_smoothing,
                         .num_classes = spec->num_classes };
    L->mix_on = train && (d->mixup > 0 || d->cutmix > 0);
    L->seed = spec->seed;
    L->rank = 0;
    L->world = 1;
    L->batch_size = train ? spec->train_batch : spec->eval_batch;
    L->workers = d->workers > 0 ? d->workers : auto_workers();
    L->order_epoch = -1;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv_work, NULL);
    pthread_cond_init(&L->cv_ready, NULL);
    if (train && ds->size <= VT_LOADER_MAX_STORED_ORDER) {
        L->order = malloc(sizeof(int64_t) * (size_t)ds->size);
        if (!L->order) {
            long long n = (long long)ds->size; /* vt_loader_close frees ds */
            vt_loader_close(L);
            return vt_fail(VT_ERR_RUNTIME, "out of memory for the order of %lld samples", n);
        }
    }
    build_order(L, 0);
    *out = L;
    return VT_OK;
}

vt_status vt_loader_open(vt_loader **out, const vt_data_spec *spec, vt_split split, int img_size) {
    *out = NULL;
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_kind_of(spec->data.kind)->open(&ds, spec, split);
    if (s) return s;
    return vt_loader_open_dataset(out, ds, spec, split, img_size);
}

static void stop_workers(vt_loader *L) {
    if (!L->started) return;
    pthread_mutex_lock(&L->mu);
    L->quit = 1;
    pthread_cond_broadcast(&L->cv_work);
    pthread_mutex_unlock(&L->mu);
    for (int i = 0; i < L->started; i++) pthread_join(L->threads[i], NULL);
    free(L->threads);
    free(L->args);
    L->threads = NULL;
    L->args = NULL;
    L->started = 0;
    L->quit = 0;
    L->head = L->tail = 0;
    for (int k = 0; k < VT_LOADER_DEPTH; k++) L->slots[k].state = SLOT_EMPTY;
}

void vt_loader_close(vt_loader *L) {
    if (!L) return;
    stop_workers(L);
    for (int i = 0; i < L->nws; i++) {
        vt_sample_free(&L->ws[i].sample);
        free(L->ws[i].tmp);
        free(L->ws[i].img);
        free(L->ws[i].aux);
        free(L->ws[i].rs);
    }
    free(L->ws);
    for (int k = 0; k < VT_LOADER_DEPTH; k++) {
        free(L->slots[k].idx);
        free(L->slots[k].images);
        free(L->slots[k].soft);
        free(L->slots[k].labels);
    }
    free(L->order);
    free(L->pimages);
    free(L->plabels);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv_work);
    pthread_cond_destroy(&L->cv_ready);
    if (L->ds) L->ds->ops->close(L->ds);
    free(L);
}

int64_t vt_loader_size(const vt_loader *L) { return shard_size(L); }

int64_t vt_loader_split_size(const vt_loader *L) { return L->ds->size; }

int vt_loader_num_classes(const vt_loader *L) { return L->ds->num_classes; }

int64_t vt_loader_skipped(const vt_loader *L) { return vt_dataset_skipped(L->ds); }

int64_t vt_loader_batches(const vt_loader *L, int batch_size) {
    VT_ASSERT(batch_size > 0, "batch size %d", batch_size);
    if (L->split == VT_SPLIT_TRAIN) return L->ds->size / L->world / batch_size;
    return (shard_size(L) + batch_size - 1) / batch_size;
}

/* Make every slot hold bs samples (called with no sample in flight). A batch never holds
 * more than this rank's share of the split, so a batch size larger than a small split
 * (eval.batch_size up to 2^20) costs only the split's samples. Out of memory: an error
 * naming the batch (slot_cap unchanged). */
static vt_status size_slots(vt_loader *L, int bs) {
    int64_t most = shard_size(L);
    if (most >= 1 && bs > most) bs = (int)most;
    if (bs <= L->slot_cap) return VT_OK;
    size_t per = (size_t)L->out_c * L->out_size * L->out_size;
    size_t K = (size_t)(L->mix.num_classes > 0 ? L->mix.num_classes : 1);
    size_t units = (size_t)bs * (L->partners ? 2 : 1);
    for (int k = 0; k < VT_LOADER_DEPTH; k++) {
        slot *s = &L->slots[k];
        free(s->images);
        s->images = vt_aligned_alloc(sizeof(float) * per * units);
        if (!s->images) {
            L->slot_cap = 0; /* the other slots are sized again next time */
            return vt_fail(VT_ERR_RUNTIME, "out of memory: %d data loader prefetch slots of %zu "
                           "images at %dx%d need %.1f GiB (lower the batch size or data.workers)",
                           VT_LOADER_DEPTH, units, L->out_size, L->out_size,
                           (double)VT_LOADER_DEPTH * sizeof(float) * per * units / (1 << 30));
        }
        s->idx = vt_xrealloc(s->idx, sizeof(int64_t) * units);
        s->labels = vt_xrealloc(s->labels, sizeof(int) * units);
        s->soft = vt_xrealloc(s->soft, sizeof(float) * K * (size_t)bs);
    }
    L->slot_cap = bs;
    return VT_OK;
}

/* Drop prefetched batches and restart the schedule at the consumer position. Caller
 * holds mu; returns with no sample in flight. */
static void restart_locked(vt_loader *L) {
    L->paused = 1;
    while (L->in_flight > 0) pthread_cond_wait(&L->cv_ready, &L->mu);
    L->head = L->tail = 0;
    for (int k = 0; k < VT_LOADER_DEPTH; k++) L->slots[k].state = SLOT_EMPTY;
    /* slots were sized when the workers started (start_workers, whose caller reports
     * out of memory); a started loader's batch size does not grow (training seeks with
     * its fixed per-rank batch), so this resize allocates nothing */
    if (L->started) VT_ASSERT(size_slots(L, L->batch_size) == VT_OK, "%s", vt_last_error());
    L->sched_epoch = L->epoch;
    L->sched_batch = L->batch;
    L->paused = 0;
    pthread_cond_broadcast(&L->cv_work);
}

void vt_loader_seek(vt_loader *L, int epoch, int64_t batch, int batch_size) {
    VT_ASSERT(epoch >= 0 && batch >= 0, "seek to epoch %d batch %lld", epoch, (long long)batch);
    int64_t nb = vt_loader_batches(L, batch_size);
    VT_ASSERT(batch <= nb, "seek to batch %lld of %lld", (long long)batch, (long long)nb);
    /* normalise (e, nb) to (e + 1, 0): the same position */
    int ne = epoch, ce = L->epoch;
    int64_t nbat = batch, cb = L->batch;
    if (nbat == nb && nb > 0) { ne++; nbat = 0; }
    if (cb == nb && nb > 0) { ce++; cb = 0; }
    pthread_mutex_lock(&L->mu);
    int same = batch_size == L->batch_size && ne == ce && nbat == cb;
    L->batch_size = batch_size;
    L->epoch = epoch;
    L->batch = batch;
    if (!same) restart_locked(L);
    pthread_mutex_unlock(&L->mu);
}

void vt_loader_set_shard(vt_loader *L, int rank, int world) {
    VT_ASSERT(world >= 1 && rank >= 0 && rank < world, "shard rank %d of world %d", rank, world);
    pthread_mutex_lock(&L->mu);
    L->rank = rank;
    L->world = world;
    L->partners = L->mix_on && world > 1;
    L->slot_cap = 0; /* slots hold partners too now: sized again */
    L->batch = 0;
    restart_locked(L);
    pthread_mutex_unlock(&L->mu);
}

void vt_loader_set_workers(vt_loader *L, int workers) {
    VT_ASSERT(workers >= 0, "workers %d", workers);
    stop_workers(L);
    L->workers = workers;
}

int vt_loader_workers(const vt_loader *L) { return L->workers; }

void vt_loader_position(const vt_loader *L, int *epoch, int64_t *batch) {
    *epoch = L->epoch;
    *batch = L->batch;
}

/* ---- per-sample pipeline ------------------------------------------------------------ */

static vt_status grow(void **p, size_t *cap, size_t need, const char *what) {
    if (need <= *cap) return VT_OK;
    void *q = realloc(*p, need);
    if (!q) return vt_fail(VT_ERR_RUNTIME, "out of memory for a %zu-byte %s buffer", need, what);
    *p = q;
    *cap = need;
    return VT_OK;
}

static vt_status grow_img(loader_ws *w, size_t bytes) {
    vt_status s = grow(&w->img, &w->img_cap, bytes, "image");
    return s ? s : grow(&w->aux, &w->aux_cap, bytes, "augmentation");
}

/* Resampling scratch that fits every geometry fill_one may use on an h x w x c image
 * (RRC boxes are at most the whole image; the eval resize reads the whole image), so the
 * buffer grows only with the image size, not with the random box. */
static size_t rs_bound(const vt_loader *L, int h, int w, int c) {
    int S = L->out_size;
    vt_resample_geom full = { 0, 0, h, w, S, S, 0, 0, S, S }, ev;
    size_t a = vt_tf_resample_ws_bytes(&full, c), b = 0;
    if (L->eval_crop) {
        vt_tf_eval_geometry(h, w, S, L->crop_pct, &ev);
        b = vt_tf_resample_ws_bytes(&ev, c);
    }
    return a > b ? a : b;
}

/* Transform dataset sample `index` of `epoch` into out (out_c x S x S floats) and its label. */
static vt_status fill_one(const vt_loader *L, loader_ws *w, int epoch, int64_t index, float *out,
                          int *label) {
    vt_status s = L->ds->ops->read(L->ds, index, &w->sample, label);
    if (s) return s;
    if (L->mix_on && (*label < 0 || *label >= L->mix.num_classes))
        return vt_fail(VT_ERR_RUNTIME, "sample %lld has label %d: expected 0..%d "
                       "(model.num_classes %d) for mixup/cutmix targets", (long long)index,
                       *label, L->mix.num_classes - 1, L->mix.num_classes);
    const vt_sample *sm = &w->sample;
    int S = L->out_size, c = sm->c;
    size_t native = (size_t)sm->h * sm->w * c, square = (size_t)S * S * c;
    vt_rng r;
    vt_rng_seed(&r, vt_rng_derive(L->seed, (uint64_t)epoch, (uint64_t)index));
    const uint8_t *px = sm->pixels;
    int ph = sm->h, pw = sm->w, flip_at_float = 0;
    vt_resample_geom g;
    int resample = 0;
    if (L->split == VT_SPLIT_TRAIN && L->rrc) {
        vt_box b = vt_aug_rrc_box(&r, sm->h, sm->w, L->scale, L->ratio);
        g = (vt_resample_geom){ .y = b.top, .x = b.left, .h = b.h, .w = b.w, .rh = S, .rw = S,
                                .oy = 0, .ox = 0, .oh = S, .ow = S };
        resample = 1;
    } else if (L->eval_crop) {
        vt_tf_eval_geometry(sm->h, sm->w, S, L->crop_pct, &g);
        resample = 1;
    }
    if (resample) {
        if ((s = grow_img(w, square))) return s;
        if ((s = grow(&w->rs, &w->rs_cap, rs_bound(L, sm->h, sm->w, c), "resample"))) return s;
        vt_tf_resample_u8(sm->pixels, sm->h, sm->w, c, &g, L->interp, w->rs, w->img);
        px = w->img;
        ph = g.oh;
        pw = g.ow;
        if (L->hflip > 0 && vt_rng_uniform(&r) < L->hflip) vt_tf_hflip_u8(w->img, ph, pw, c);
    } else if (L->hflip > 0) {
        flip_at_float = vt_rng_uniform(&r) < L->hflip;
    }
    if (L->ra.enabled) {
        if (px != w->img) {
            if ((s = grow_img(w, native))) return s;
            memcpy(w->img, sm->pixels, native);
            if (flip_at_float) vt_tf_hflip_u8(w->img, ph, pw, c);
            flip_at_float = 0;
            px = w->img;
        }
        vt_randaug_apply(&L->ra, &r, w->img, ph, pw, c, L->interp, L->fill, w->aux);
    }
    if (ph == S && pw == S) {
        vt_tf_to_float(px, ph, pw, c, flip_at_float, out);
    } else {
        if ((s = grow(&w->tmp, &w->tmp_cap, sizeof(float) * (size_t)c * ph * pw, "sample")))
            return s;
        vt_tf_to_float(px, ph, pw, c, flip_at_float, w->tmp);
        vt_tf_resize(w->tmp, c, ph, pw, out, S, S);
    }
    int64_t hw = (int64_t)S * S;
    vt_tf_expand(out, c, L->out_c, hw);
    vt_tf_normalize(out, L->out_c, hw, L->mean, L->std);
    if (L->reprob > 0) {
        vt_box eb;
        vt_aug_erase(&r, out, L->out_c, S, S, L->reprob, L->remode, &eb);
    }
    return VT_OK;
}

/* Mixup / cutmix of a finished train batch; writes soft targets. With partners, pimages
 * and plabels hold the partners of the count samples, unmixed (else unused). */
static void mix_batch(const vt_loader *L, int epoch, int64_t batch, float *images,
                      const int *labels, float *pimages, const int *plabels, float *soft,
                      int count) {
    vt_rng r;
    vt_rng_seed(&r, vt_rng_derive(vt_rng_derive(L->seed, VT_LOADER_TAG_MIX, (uint64_t)epoch),
                                  (uint64_t)batch, 0));
    if (!L->partners) {
        vt_box cut;
        vt_mixup_apply(&L->mix, &r, images, count, L->out_c, L->out_size, labels, soft, &cut);
        return;
    }
    vt_mix_draw d;
    vt_mixup_draw(&L->mix, &r, L->out_size, &d);
    int64_t per = (int64_t)L->out_c * L->out_size * L->out_size, B = (int64_t)count * L->world;
    for (int i = 0; i < count; i++) {
        int64_t g = (int64_t)i * L->world + L->rank, pg = B - 1 - g;
        float *own = images + i * per, *other = pimages + i * per;
        if (pg != g && (d.cutmix || d.lam != 1.0)) {
            if (g < pg) vt_mixup_pair(&d, own, other, L->out_c, L->out_size);
            else vt_mixup_pair(&d, other, own, L->out_c, L->out_size);
        }
        vt_mixup_soft_row(&L->mix, d.lam, labels[i], plabels[i],
                          soft + (int64_t)i * L->mix.num_classes);
    }
}

/* Dataset index at global position pos of the epoch the order was built for. */
static int64_t order_at(const vt_loader *L, int64_t pos) {
    if (L->order) return L->order[pos];
    return L->split == VT_SPLIT_TRAIN ? vt_rng_permute(L->order_key, L->ds->size, pos) : pos;
}

/* Dataset index of shard position p (0-based within this rank's share). */
static int64_t index_at(const vt_loader *L, int64_t p) { return order_at(L, p * L->world + L->rank); }

const char *vt_loader_sample_path(const vt_loader *L, int64_t p, char *buf, size_t len) {
    VT_ASSERT(L->split == VT_SPLIT_VAL && p >= 0 && p < L->ds->size, "sample path %lld", (long long)p);
    return vt_dataset_sample_path(L->ds, p, buf, len); /* the eval split's order is dataset order */
}

const char *vt_loader_class_name(const vt_loader *L, int k) { return vt_dataset_class_name(L->ds, k); }

/* Dataset index of the mixup partner of this shard's sample i of train batch b (global
 * batch position g = i world + rank pairs with B - 1 - g). */
static int64_t partner_index(const vt_loader *L, int64_t b, int i) {
    int64_t B = (int64_t)L->batch_size * L->world, g = (int64_t)i * L->world + L->rank;
    return order_at(L, b * B + B - 1 - g);
}

/* Samples in batch b of this shard. */
static int batch_count(const vt_loader *L, int64_t b) {
    int64_t start = b * L->batch_size, n = shard_size(L);
    return (int)(n - start < L->batch_size ? n - start : L->batch_size);
}

/* ---- workers ------------------------------------------------------------------------ */

/* A slot with an unclaimed sample, scheduling the next batch if the ring has room;
 * NULL if there is nothing to do. Caller holds mu. */
static slot *find_work(vt_loader *L) {
    for (int64_t q = L->head; q < L->tail; q++) {
        slot *s = &L->slots[q % VT_LOADER_DEPTH];
        if (s->state == SLOT_FILLING && s->claimed < s->units) return s;
    }
    if (L->tail - L->head >= VT_LOADER_DEPTH) return NULL;
    int64_t nb = vt_loader_batches(L, L->batch_size);
    if (nb == 0) return NULL;
    if (L->sched_batch >= nb) {
        L->sched_epoch++;
        L->sched_batch = 0;
    }
    build_order(L, L->sched_epoch);
    slot *s = &L->slots[L->tail % VT_LOADER_DEPTH];
    s->epoch = L->sched_epoch;
    s->batch = L->sched_batch;
    s->count = batch_count(L, s->batch);
    s->units = L->partners ? 2 * s->count : s->count;
    for (int i = 0; i < s->count; i++) s->idx[i] = index_at(L, s->batch * L->batch_size + i);
    for (int i = 0; L->partners && i < s->count; i++) s->idx[s->count + i] = partner_index(L, s->batch, i);
    s->claimed = s->done = 0;
    s->err = VT_OK;
    s->err_at = s->units;
    s->err_msg[0] = '\0';
    s->state = SLOT_FILLING;
    L->tail++;
    L->sched_batch++;
    pthread_cond_broadcast(&L->cv_work);
    return s;
}

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    vt_loader *L = wa->L;
    loader_ws *w = &L->ws[wa->id];
    size_t per = (size_t)L->out_c * L->out_size * L->out_size;
    pthread_mutex_lock(&L->mu);
    while (!L->quit) {
        slot *s = L->paused ? NULL : find_work(L);
        if (!s) {
            pthread_cond_wait(&L->cv_work, &L->mu);
            continue;
        }
        int i = s->claimed++;
        L->in_flight++;
        int epoch = s->epoch;
        int64_t index = s->idx[i];
        pthread_mutex_unlock(&L->mu);
        int label = 0;
        vt_status st = fill_one(L, w, epoch, index, s->images + per * (size_t)i, &label);
        pthread_mutex_lock(&L->mu);
        s->labels[i] = label;
        if (st && i < s->err_at) {
            s->err_at = i;
            s->err = st;
            snprintf(s->err_msg, sizeof s->err_msg, "%s", vt_last_error());
        }
        if (++s->done == s->units) {
            if (!s->err && L->mix_on) {
                pthread_mutex_unlock(&L->mu);
                mix_batch(L, s->epoch, s->batch, s->images, s->labels,
                          s->images + per * (size_t)s->count, s->labels + s->count, s->soft, s->count);
                pthread_mutex_lock(&L->mu);
            }
            s->state = SLOT_READY;
            pthread_cond_broadcast(&L->cv_ready);
        }
        if (--L->in_flight == 0) pthread_cond_broadcast(&L->cv_ready);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

/* Per-thread scratch for n threads (grows only). For a dataset whose samples all have one
 * size the buffers are sized up front, so no batch allocates; otherwise they grow to the
 * largest sample during the first batches (a failed reservation here is retried, and
 * reported, by fill_one). */
static void ensure_ws(vt_loader *L, int n) {
    if (n <= L->nws) return;
    L->ws = vt_xrealloc(L->ws, sizeof(loader_ws) * (size_t)n);
    memset(L->ws + L->nws, 0, sizeof(loader_ws) * (size_t)(n - L->nws));
    const vt_dataset *ds = L->ds;
    if (ds->height > 0 && ds->width > 0) {
        int h = ds->height, w = ds->width, c = ds->channels, S = L->out_size;
        size_t px = (size_t)h * w * c, sq = (size_t)S * S * c;
        for (int i = L->nws; i < n; i++) {
            loader_ws *ws = &L->ws[i];
            if (vt_sample_reserve(&ws->sample, px) || grow_img(ws, px > sq ? px : sq) ||
                grow(&ws->tmp, &ws->tmp_cap, sizeof(float) * px, "sample") ||
                grow(&ws->rs, &ws->rs_cap, rs_bound(L, h, w, c), "resample"))
                break;
        }
    }
    L->nws = n;
}

static vt_status start_workers(vt_loader *L) {
    ensure_ws(L, L->workers);
    pthread_mutex_lock(&L->mu);
    vt_status sized = size_slots(L, L->batch_size);
    if (sized != VT_OK) {
        pthread_mutex_unlock(&L->mu);
        return sized;
    }
    L->head = L->tail = 0;
    L->sched_epoch = L->epoch;
    L->sched_batch = L->batch;
    pthread_mutex_unlock(&L->mu);
    L->threads = vt_xcalloc((size_t)L->workers, sizeof(pthread_t));
    L->args = vt_xcalloc((size_t)L->workers, sizeof(worker_arg));
    for (int i = 0; i < L->workers; i++) {
        L->args[i] = (worker_arg){ .L = L, .id = i };
        int rc = pthread_create(&L->threads[i], NULL, worker_main, &L->args[i]);
        if (rc) {
            stop_workers(L);
            return vt_fail(VT_ERR_RUNTIME, "cannot start data loader thread %d of %d (data.workers): "
                           "%s", i + 1, L->workers, strerror(rc));
        }
        L->started = i + 1;
    }
    return VT_OK;
}

/* ---- consumer ----------------------------------------------------------------------- */

static vt_status next_sync(vt_loader *L, float *images, int *labels, float *soft, int cnt) {
    build_order(L, L->epoch);
    ensure_ws(L, omp_get_max_threads());
    int64_t per = (int64_t)L->out_c * L->out_size * L->out_size;
    int64_t first = L->batch * L->batch_size;
    int units = L->partners ? 2 * cnt : cnt;
    if (L->partners && L->pcap < cnt) {
        free(L->pimages);
        L->pimages = vt_aligned_alloc(sizeof(float) * (size_t)per * (size_t)cnt);
        VT_ASSERT(L->pimages, "out of memory for %d mixup partner images", cnt);
        L->plabels = vt_xrealloc(L->plabels, sizeof(int) * (size_t)cnt);
        L->pcap = cnt;
    }
    int err_at = units;
    vt_status err_code = VT_OK;
    char err_msg[1024] = "";
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < units; i++) {
        int own = i < cnt;
        vt_status s = fill_one(L, &L->ws[omp_get_thread_num()], L->epoch,
                               own ? index_at(L, first + i) : partner_index(L, L->batch, i - cnt),
                               own ? images + i * per : L->pimages + (i - cnt) * per,
                               own ? &labels[i] : &L->plabels[i - cnt]);
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
        return vt_fail(err_code, "epoch %d batch %lld: %s", L->epoch + 1, (long long)L->batch + 1, err_msg);
    if (L->mix_on) mix_batch(L, L->epoch, L->batch, images, labels, L->pimages, L->plabels, soft, cnt);
    return VT_OK;
}

static vt_status next_prefetched(vt_loader *L, float *images, int *labels, float *soft, int cnt) {
    vt_status st;
    if (!L->started && (st = start_workers(L)) != VT_OK) return st;
    pthread_mutex_lock(&L->mu);
    slot *s = &L->slots[L->head % VT_LOADER_DEPTH];
    while (!(L->head < L->tail && s->state == SLOT_READY)) {
        pthread_cond_broadcast(&L->cv_work);
        pthread_cond_wait(&L->cv_ready, &L->mu);
    }
    pthread_mutex_unlock(&L->mu);
    VT_ASSERT(s->epoch == L->epoch && s->batch == L->batch && s->count == cnt,
              "prefetched epoch %d batch %lld (%d samples), expected epoch %d batch %lld (%d)",
              s->epoch, (long long)s->batch, s->count, L->epoch, (long long)L->batch, cnt);
    if (s->err)
        return vt_fail(s->err, "epoch %d batch %lld: %s", L->epoch + 1, (long long)L->batch + 1, s->err_msg);
    size_t per = (size_t)L->out_c * L->out_size * L->out_size;
    memcpy(images, s->images, sizeof(float) * per * (size_t)cnt);
    memcpy(labels, s->labels, sizeof(int) * (size_t)cnt);
    if (L->mix_on)
        memcpy(soft, s->soft, sizeof(float) * (size_t)L->mix.num_classes * (size_t)cnt);
    pthread_mutex_lock(&L->mu);
    s->state = SLOT_EMPTY;
    L->head++;
    pthread_cond_broadcast(&L->cv_work);
    pthread_mutex_unlock(&L->mu);
    return VT_OK;
}

vt_status vt_loader_next(vt_loader *L, float *images, int *labels, float *soft, int *soft_used,
                         int *count) {
    *soft_used = 0;
    *count = 0;
    if (L->batch >= vt_loader_batches(L, L->batch_size)) {
        int64_t skipped = vt_dataset_skipped(L->ds);
        if (skipped)
            fprintf(stderr, "vitrain: data: epoch %d done; %lld bad files skipped so far "
                    "(data.on_error=skip)\n", L->epoch + 1, (long long)skipped);
        L->epoch++;
        L->batch = 0;
        return VT_OK;
    }
    VT_ASSERT(!L->mix_on || soft, "vt_loader_next: mixup/cutmix is on but soft is NULL");
    int cnt = batch_count(L, L->batch);
    vt_status st = L->workers > 0 ? next_prefetched(L, images, labels, soft, cnt)
                                  : next_sync(L, images, labels, soft, cnt);
    if (st) return st;
    L->batch++;
    *count = cnt;
    *soft_used = L->mix_on;
    return VT_OK;
}

int64_t vt_loader_memory_estimate(const vt_data_spec *spec, vt_split split, int img_size,
                                  int batch_size, int soft, int64_t *dataset_bytes, int64_t *samples) {
    const vt_data_config *d = &spec->data;
    const vt_dataset_kind *kind = vt_dataset_kind_of(d->kind);
    *samples = -1;
    *dataset_bytes = kind->memory ? kind->memory(spec, split, samples) : 0;
    /* a split smaller than the batch fills only its samples' part of each slot */
    if (*samples >= 0 && *samples < batch_size) batch_size = (int)*samples;
    int64_t S = img_size, C = spec->in_chans, K = spec->num_classes;
    /* the prefetch slots: images (huge pages from 1 MiB, vt_aligned_alloc), indices and
     * labels, and soft targets when they are written */
    int64_t img = C * S * S * batch_size * (int64_t)sizeof(float), page = (int64_t)2 << 20;
    if (img >= page / 2) img = (img + page - 1) / page * page;
    int64_t bytes = VT_LOADER_DEPTH * (img + (int64_t)batch_size *
                    ((soft ? K * (int64_t)sizeof(float) : 0) + (int64_t)(sizeof(int64_t) + sizeof(int))));
    /* per worker: the decoded sample, its float copy, the working and augmentation images
     * and the resampling scratch, for the format's native side (else the output's) */
    int64_t side = kind->native_side > 0 ? kind->native_side : S;
    int64_t native = side * side * C, square = S * S * C, big = native > square ? native : square;
    int64_t per_worker = native * (1 + (int64_t)sizeof(float)) + 2 * big +
                         2 * S * (side > S ? side : S) * C * (int64_t)sizeof(float);
    int workers = d->workers > 0 ? d->workers : auto_workers();
    return bytes + workers * per_worker;
}
