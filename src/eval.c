/* eval.c - validation-split evaluation: top-1 / top-5 and mean cross-entropy
 * (contract in eval.h). */
#include "eval.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dist.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "precision.h"
#include "resolve.h"
#include "rng.h"

vt_status vt_eval_open(vt_evaluator *ev, const vt_config *cfg, int img_size) {
    memset(ev, 0, sizeof *ev);
    VT_ASSERT(img_size > 0 && img_size % cfg->model.patch_size == 0,
              "evaluation image size %d is not a multiple of model.patch_size %d", img_size,
              cfg->model.patch_size);
    VT_ASSERT(cfg->eval.batch_size > 0, "eval.batch_size %d (not resolved?)", cfg->eval.batch_size);
    ev->img_size = img_size;
    ev->batch_size = cfg->eval.batch_size;
    ev->in_chans = cfg->model.in_chans;
    ev->num_classes = cfg->model.num_classes;
    vt_data_spec spec;
    vt_resolve_data_spec(cfg, &spec);
    spec.quiet = !vt_dist_root();
    vt_status st = vt_loader_open(&ev->loader, &spec, VT_SPLIT_VAL, img_size);
    if (st != VT_OK) return st;
    int dk = vt_loader_num_classes(ev->loader);
    if (dk > ev->num_classes) {
        vt_loader_close(ev->loader);
        ev->loader = NULL;
        return vt_fail(VT_ERR_USAGE, "data split '%s' has %d classes but model.num_classes is %d",
                       cfg->data.val_split, dk, ev->num_classes);
    }
    /* data parallel: rank r evaluates samples r, r + R, ... (vt_eval_run sums the counts)
     * in batches of ceil(eval batch / R) */
    ev->rank = vt_dist_rank();
    ev->ranks = vt_dist_size();
    ev->batch_size = (ev->batch_size + ev->ranks - 1) / ev->ranks;
    vt_loader_set_shard(ev->loader, ev->rank, ev->ranks);
    ev->n = vt_loader_split_size(ev->loader);
    ev->n_local = vt_loader_size(ev->loader);
    if (cfg->eval.max_samples > 0 && cfg->eval.max_samples < ev->n) {
        /* the first max_samples of the split: this rank's are rank + k ranks < max_samples */
        ev->n = cfg->eval.max_samples;
        ev->n_local = ev->n > ev->rank ? (ev->n - ev->rank + ev->ranks - 1) / ev->ranks : 0;
    }
    size_t img_floats = (size_t)ev->batch_size * ev->in_chans * img_size * img_size;
    ev->images = vt_aligned_alloc(img_floats * sizeof(float));
    ev->labels = vt_aligned_alloc((size_t)ev->batch_size * sizeof(int));
    ev->soft = vt_aligned_alloc((size_t)ev->batch_size * ev->num_classes * sizeof(float));
    ev->patch_size = cfg->model.patch_size;
    int grid = img_size / ev->patch_size;
    ev->perm = vt_aligned_alloc((size_t)grid * grid * sizeof(int));
    ev->scratch = vt_aligned_alloc((size_t)ev->in_chans * img_size * img_size * sizeof(float));
    if (!ev->images || !ev->labels || !ev->soft || !ev->perm || !ev->scratch) {
        int bs = ev->batch_size, C = ev->in_chans; /* vt_eval_close clears ev */
        vt_eval_close(ev);
        return vt_fail(VT_ERR_RUNTIME, "out of memory: an evaluation batch of %d images at %dx%d "
                       "with %d channels needs %.1f GiB of pixels (lower eval.batch_size or the "
                       "resolution)", bs, img_size, img_size, C,
                       (double)img_floats * sizeof(float) / (1 << 30));
    }
    vt_arena_init(&ev->arena, img_floats * sizeof(float));
    vt_tape_init(&ev->tape, &ev->arena);
    ev->tape.grad_enabled = 0;
    ev->tape.training = 0;
    ev->tape.rng = NULL;
    ev->tape.bf16 = cfg->train.precision == VT_PRECISION_BF16;
    st = vt_precision_select(cfg->train.precision);
    if (st != VT_OK) vt_eval_close(ev);
    return st;
}

vt_status vt_eval_reserve(vt_evaluator *ev, const vt_vit *m) {
    const int S = ev->img_size;
    double arena, scratch;
    vt_vit_batch_memory(m, S, ev->batch_size, vt_vit_eval_floats(m, S), &arena, &scratch);
    vt_status st = arena + scratch * sizeof(float) < 0.5 * (double)SIZE_MAX
                   ? vt_arena_reserve(&ev->arena, (size_t)arena) : VT_ERR_RUNTIME;
    if (st == VT_OK) st = vt_tape_reserve(&ev->tape, 0, (size_t)scratch);
    /* no weight gradients; the forward's op(B) cut over rows: a weight. Its error names the GEMM buffers */
    if (st == VT_OK) return vt_gemm_reserve(0, vt_vit_largest_param(m));
    return vt_fail(VT_ERR_RUNTIME, "out of memory: an evaluation batch of %d images%s at %dpx needs %.2f GiB, "
                   "which this process cannot allocate; lower eval.batch_size", ev->batch_size,
                   ev->ranks > 1 ? " per rank" : "", S, (arena + scratch * sizeof(float)) / 1073741824.0);
}

void vt_eval_close(vt_evaluator *ev) {
    if (ev->loader) vt_loader_close(ev->loader);
    if (ev->arena.head) {
        vt_tape_free(&ev->tape);
        vt_arena_free(&ev->arena);
    }
    free(ev->images);
    free(ev->labels);
    free(ev->soft);
    free(ev->perm);
    free(ev->scratch);
    free(ev->logits_local);
    free(ev->labels_local);
    memset(ev, 0, sizeof *ev);
}

void vt_eval_patch_permutation(int *perm, int n, uint64_t seed, int64_t index) {
    vt_rng r;
    vt_rng_seed(&r, vt_rng_derive(seed, (uint64_t)index, 0x5107));
    for (int i = 0; i < n; i++) perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)vt_rng_below(&r, (uint64_t)i + 1);
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

void vt_eval_permute_patches(float *dst, const float *src, const int *perm, int C, int S, int P) {
    VT_ASSERT(P > 0 && S % P == 0, "image size %d not divisible by patch %d", S, P);
    const int G = S / P;
    for (int g = 0; g < G * G; g++) {
        int gy = g / G, gx = g % G, sy = perm[g] / G, sx = perm[g] % G;
        for (int c = 0; c < C; c++)
            for (int r = 0; r < P; r++)
                memcpy(dst + ((size_t)c * S + gy * P + r) * S + gx * P,
                       src + ((size_t)c * S + sy * P + r) * S + sx * P, (size_t)P * sizeof(float));
    }
}

int vt_eval_rank(const float *row, int K, int y) {
    float ly = row[y];
    if (isnan(ly)) return K;
    int rank = 0;
    for (int j = 0; j < K; j++)
        if (row[j] > ly || (j < y && row[j] == ly)) rank++;
    return rank;
}

/* This rank's running counts of one evaluation. */
typedef struct {
    int64_t seen, c1, c5;
    double loss_sum;
    int ended;           /* the loader had no more samples */
} eval_counts;

/* The next batch of this rank's shard: forward, counts, and its rows and labels when
 * wanted. */
static vt_status eval_batch(vt_evaluator *ev, vt_vit *m, float *rows, int *lab, eval_counts *n) {
    const int K = ev->num_classes, S = ev->img_size;
    int count = 0, soft_used = 0;
    vt_status st = vt_loader_next(ev->loader, ev->images, ev->labels, ev->soft, &soft_used, &count);
    if (st != VT_OK) return st;
    if (count == 0) {
        n->ended = 1;
        return VT_OK;
    }
    if (count > ev->n_local - n->seen) count = (int)(ev->n_local - n->seen); /* eval.max_samples */
    for (int i = 0; i < count; i++)
        if (ev->labels[i] < 0 || ev->labels[i] >= K)
            return vt_fail(VT_ERR_RUNTIME, "validation sample %lld has label %d: expected 0..%d "
                           "(model.num_classes %d)", (long long)((n->seen + i) * ev->ranks + ev->rank),
                           ev->labels[i], K - 1, K);
    if (ev->shuffle) {
        const int G = S / ev->patch_size;
        const size_t img = (size_t)ev->in_chans * S * S;
        for (int i = 0; i < count; i++) {
            vt_eval_patch_permutation(ev->perm, G * G, ev->shuffle_seed, (n->seen + i) * ev->ranks + ev->rank);
            memcpy(ev->scratch, ev->images + i * img, img * sizeof(float));
            vt_eval_permute_patches(ev->images + i * img, ev->scratch, ev->perm, ev->in_chans, S,
                                    ev->patch_size);
        }
    }
    vt_arena_reset(&ev->arena);
    vt_tape_clear(&ev->tape);
    int64_t shape[4] = {count, ev->in_chans, S, S};
    vt_tensor *x = vt_tensor_wrap(&ev->arena, ev->images, 4, shape);
    vt_tensor *out = vt_vit_forward(m, &ev->tape, x);
    VT_ASSERT(out->ndim == 2 && out->shape[0] == count && out->shape[1] == K,
              "model returned logits of the wrong shape");
    vt_tensor *loss = vt_op_cross_entropy(&ev->tape, out, ev->labels, NULL, 0.0f);
    n->loss_sum += (double)loss->data[0] * count;
    for (int i = 0; i < count; i++) {
        int r = vt_eval_rank(out->data + (int64_t)i * K, K, ev->labels[i]);
        n->c1 += r < 1;
        n->c5 += r < 5;
    }
    if (rows || lab) {
        VT_ASSERT(n->seen + count <= ev->n_local, "loader returned more than %lld samples",
                  (long long)ev->n_local);
        if (rows) memcpy(rows + n->seen * K, out->data, (size_t)count * K * sizeof(float));
        if (lab) memcpy(lab + n->seen, ev->labels, (size_t)count * sizeof(int));
    }
    n->seen += count;
    return VT_OK;
}

static vt_status eval_batches(vt_evaluator *ev, vt_vit *m, float *logits, vt_eval_result *res) {
    VT_ASSERT(m->num_classes == ev->num_classes && m->in_chans == ev->in_chans,
              "evaluator built for another model (%d classes, %d channels)",
              ev->num_classes, ev->in_chans);
    const int K = ev->num_classes, S = ev->img_size;
    eval_counts n = {0, 0, 0, 0.0, 0}; /* this rank's shard */
    float *rows = logits;
    int *lab = ev->labels_out;
    vt_status st = VT_OK;
    ev->stopped = 0;
    if (ev->ranks > 1 && (logits || lab)) { /* this rank's rows, gathered in dataset order below */
        if (!ev->logits_local) ev->logits_local = malloc((size_t)(ev->n_local + 1) * K * sizeof(float));
        if (!ev->labels_local) ev->labels_local = malloc((size_t)(ev->n_local + 1) * sizeof(int));
        if (!ev->logits_local || !ev->labels_local)
            st = vt_fail(VT_ERR_RUNTIME, "out of memory: logits of %lld x %d floats",
                         (long long)ev->n_local, K);
        rows = logits ? ev->logits_local : NULL;
        lab = lab ? ev->labels_local : NULL;
    }
    vt_loader_seek(ev->loader, 0, 0, ev->batch_size);
    /* As many rounds on every rank as rank 0, which holds the most samples, needs; with a
     * stop check the ranks agree before each round on a failure so far and a stop request,
     * so they leave the loop together. */
    const int64_t most = ev->n > 0 ? (ev->n + ev->ranks - 1) / ev->ranks : 0;
    const int64_t rounds = (most + ev->batch_size - 1) / ev->batch_size;
    for (int64_t round = 0; round < rounds; round++) {
        if (ev->stop_signal) {
            int v[2] = {st != VT_OK, ev->stop_signal()};
            vt_dist_max_int(v, 2);
            if (v[0]) break;
            if (v[1]) {
                ev->stopped = v[1];
                break;
            }
        } else if (st != VT_OK) {
            break;
        }
        if (st == VT_OK && !n.ended && n.seen < ev->n_local) st = eval_batch(ev, m, rows, lab, &n);
    }
    if (st == VT_OK && !ev->stopped && n.seen != ev->n_local)
        st = vt_fail(VT_ERR_RUNTIME, "validation split: loader produced %lld samples, expected %lld",
                     (long long)n.seen, (long long)ev->n_local);
    if ((st = vt_dist_agree(st)) != VT_OK || ev->stopped) return st;
    int64_t counts[3] = {n.seen, n.c1, n.c5};
    vt_dist_sum_i64(counts, 3);
    double loss_sum = n.loss_sum;
    vt_dist_sum_f64(&loss_sum, 1);
    if (rows && rows != logits) vt_dist_gather_strided(rows, ev->n, K * sizeof(float), logits);
    if (lab && lab != ev->labels_out) vt_dist_gather_strided(lab, ev->n, sizeof(int), ev->labels_out);
    int64_t seen = counts[0];
    res->n = seen;
    res->img_size = S;
    res->top1 = seen ? 100.0 * (double)counts[1] / (double)seen : 0.0;
    res->top5 = seen ? 100.0 * (double)counts[2] / (double)seen : 0.0;
    res->loss = seen ? loss_sum / (double)seen : 0.0;
    return VT_OK;
}

vt_status vt_eval_run(vt_evaluator *ev, vt_vit *m, float *logits, vt_eval_result *res) {
    /* under bf16, a model without weight copies (vitrain eval's) gets them for this run */
    uint16_t *w16 = NULL;
    if (ev->tape.bf16 && !vt_bf16_weights_attached(m)) {
        vt_status st = vt_bf16_weights_attach(m, &w16);
        if (st != VT_OK) return st;
    }
    vt_status st = eval_batches(ev, m, logits, res);
    if (w16) vt_bf16_weights_detach(m, w16);
    return st;
}
