/* synthetic.c - the synthetic dataset kind: a learnable image task generated on the fly.
 *
 * Split sizes are data.train_size / data.val_size (2048 / 512 when <= 0), classes
 * model.num_classes, native size model.img_size (S x S), native channels model.in_chans
 * (1 gray, 3 RGB, or 4 = RGB + depth). Nothing is stored: sample `index` of a split is a
 * pure function of (data.synthetic_seed, split, index), so reads are thread-safe and any
 * order or thread count gives the same pixels.
 *
 * The task needs spatial structure: each class k owns a fixed random smooth pattern per
 * colour channel (a 6 x 6 grid of normals, 3 x 3 box-smoothed, normalised to zero mean and
 * unit standard deviation, rendered bilinearly at p x p with p = max(2, 3S / 4)). A sample
 * is a grey background with a random brightness shift, the class pattern at a random
 * offset with a random contrast, and per-pixel noise:
 *   label  = index mod K                      (balanced classes)
 *   pixel  = 128 + shift + [inside patch] * A * pattern_k(y - oy, x - ox) + noise
 *   shift ~ U(-20, 20) per sample, A ~ U(60, 80), noise triangular with std 8, clamped
 *   to 0..255 and rounded. Patterns are zero-mean, so neither the mean colour nor the
 *   position identifies the class: a model must recognise the shape.
 * The patterns are not mirror-symmetric: data.hflip > 0 shows mirrored patterns in
 * training that the eval split never shows (it lowers val accuracy).
 * With in_chans = 4 the 4th channel is a depth map (a random tilted plane plus a
 * Gaussian bump) drawn from its own stream: the label and the RGB pixels depend only on
 * the RGB generator, so the RGB part is identical to the in_chans = 3 sample.
 * With data.synthetic_depth_label (in_chans = 4) the label needs the depth: labels 2j and
 * 2j + 1 show the same RGB pattern j, the depth plane is flat (no tilt) and the bump's
 * height is drawn from U(20, 60) for odd labels and U(-60, -20) (a dent) for even ones,
 * so RGB alone is at chance within each pair (the bump's sign decides).
 */
#include <math.h>
#include <string.h>

#include "data/dataset.h"
#include "data/synthetic.h"
#include "rng.h"

#define SYN_GRID 6
#define SYN_TAG_PATTERN 0x5041545445524E53ull /* class patterns */
#define SYN_TAG_DEPTH 16u                     /* depth stream: split + 16 */

typedef struct {
    uint64_t seed;
    int split;
    int img, rgb, depth, p;
    int depth_label; /* data.synthetic_depth_label */
    float *grids; /* rgb x K x SYN_GRID x SYN_GRID */
} syn_impl;

/* The grids of classes 0..nk-1 for channel ch (nk x SYN_GRID^2): 3 x 3 box-smoothed
 * normals from the class's own stream, normalised to zero mean and unit std. */
static void pattern_grids(uint64_t seed, int nk, int ch, float *out) {
    enum { R = SYN_GRID + 2, G2 = SYN_GRID * SYN_GRID };
    double raw[R * R], g[G2];
    for (int k = 0; k < nk; k++) {
        vt_rng r;
        vt_rng_seed(&r, vt_rng_derive(seed ^ SYN_TAG_PATTERN, (uint64_t)k, (uint64_t)ch));
        for (int i = 0; i < R * R; i++) raw[i] = vt_rng_normal(&r);
        double sum = 0;
        for (int y = 0; y < SYN_GRID; y++)
            for (int x = 0; x < SYN_GRID; x++) {
                double v = 0;
                for (int dy = 0; dy < 3; dy++)
                    for (int dx = 0; dx < 3; dx++) v += raw[(y + dy) * R + x + dx];
                g[y * SYN_GRID + x] = v;
                sum += v;
            }
        for (int i = 0; i < G2; i++) g[i] -= sum / G2;
        double sq = 0;
        for (int i = 0; i < G2; i++) sq += g[i] * g[i];
        double sd = sqrt(sq / G2);
        if (sd < 1e-12) sd = 1;
        for (int i = 0; i < G2; i++) out[(size_t)k * G2 + i] = (float)(g[i] / sd);
    }
}

/* The grid rendered at pixel (y, x) of a p x p patch (bilinear, corners aligned). */
static float pattern_at(const float *g, int p, int y, int x) {
    float sy = p > 1 ? (float)y * (SYN_GRID - 1) / (float)(p - 1) : 0.0f;
    float sx = p > 1 ? (float)x * (SYN_GRID - 1) / (float)(p - 1) : 0.0f;
    int y0 = (int)sy, x0 = (int)sx;
    if (y0 > SYN_GRID - 2) y0 = SYN_GRID - 2;
    if (x0 > SYN_GRID - 2) x0 = SYN_GRID - 2;
    float fy = sy - (float)y0, fx = sx - (float)x0;
    const float *r0 = g + y0 * SYN_GRID, *r1 = r0 + SYN_GRID;
    float top = r0[x0] * (1 - fx) + r0[x0 + 1] * fx;
    float bot = r1[x0] * (1 - fx) + r1[x0 + 1] * fx;
    return top * (1 - fy) + bot * fy;
}

void vt_synthetic_pattern(uint64_t seed, int k, int ch, int p, float *out) {
    float *grids = vt_xmalloc(sizeof(float) * SYN_GRID * SYN_GRID * ((size_t)k + 1));
    pattern_grids(seed, k + 1, ch, grids);
    const float *g = grids + (size_t)k * SYN_GRID * SYN_GRID;
    double sum = 0, sq = 0;
    for (int y = 0; y < p; y++)
        for (int x = 0; x < p; x++) {
            out[y * p + x] = pattern_at(g, p, y, x);
            sum += out[y * p + x];
        }
    double mean = sum / ((double)p * p);
    for (int i = 0; i < p * p; i++) sq += (out[i] - mean) * (out[i] - mean);
    double sd = sqrt(sq / ((double)p * p));
    if (sd < 1e-12) sd = 1;
    for (int i = 0; i < p * p; i++) out[i] = (float)((out[i] - mean) / sd);
    free(grids);
}

/* Triangular noise in (-1, 1), variance 1/6, from one 64-bit draw. */
static float tri_noise(vt_rng *r) {
    uint64_t u = vt_rng_u64(r);
    return (float)((double)(u >> 32) * 0x1.0p-32 + (double)(u & 0xffffffffu) * 0x1.0p-32 - 1.0);
}

static uint8_t clamp_u8(float v) {
    if (v <= 0.0f) return 0;
    if (v >= 255.0f) return 255;
    return (uint8_t)(v + 0.5f);
}

static vt_status syn_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    const syn_impl *im = ds->impl;
    int S = im->img, c = ds->channels, p = im->p;
    vt_status st = vt_sample_reserve(s, (size_t)S * S * c);
    if (st) return st;
    s->h = S;
    s->w = S;
    s->c = c;
    int k = (int)(index % ds->num_classes);
    *label = k;

    vt_rng r;
    vt_rng_seed(&r, vt_rng_derive(im->seed, (uint64_t)im->split + 1, (uint64_t)index));
    int oy = (int)vt_rng_below(&r, (uint64_t)(S - p + 1));
    int ox = (int)vt_rng_below(&r, (uint64_t)(S - p + 1));
    float shift = (float)(40.0 * vt_rng_uniform(&r) - 20.0);
    float amp = (float)(60.0 + 20.0 * vt_rng_uniform(&r));
    const float noise_scale = 8.0f * 2.449489743f; /* sqrt(6): triangular std 1/sqrt(6) */
    const size_t g2 = SYN_GRID * SYN_GRID;
    int rgb_k = im->depth_label ? k / 2 : k; /* RGB pattern shown */
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) {
            int inside = y >= oy && y < oy + p && x >= ox && x < ox + p;
            uint8_t *px = s->pixels + ((size_t)y * S + x) * c;
            for (int ch = 0; ch < im->rgb; ch++) {
                float v = 128.0f + shift + noise_scale * tri_noise(&r);
                if (inside)
                    v += amp * pattern_at(im->grids + ((size_t)ch * ds->num_classes + rgb_k) * g2, p,
                                          y - oy, x - ox);
                px[ch] = clamp_u8(v);
            }
        }
    if (im->depth) {
        vt_rng d;
        vt_rng_seed(&d, vt_rng_derive(im->seed, (uint64_t)im->split + SYN_TAG_DEPTH, (uint64_t)index));
        float gx = (float)(2.0 * vt_rng_uniform(&d) - 1.0), gy = (float)(2.0 * vt_rng_uniform(&d) - 1.0);
        float cy = (float)(S * vt_rng_uniform(&d)), cx = (float)(S * vt_rng_uniform(&d));
        float height = (float)(120.0 * vt_rng_uniform(&d) - 60.0);
        if (im->depth_label) height = (float)((k % 2 ? 1.0 : -1.0) * (20.0 + 40.0 * fabsf(height) / 60.0));
        float radius = (float)S * (float)(0.1 + 0.2 * vt_rng_uniform(&d));
        float half = 0.5f * (float)(S - 1), slope = im->depth_label ? 0.0f : 60.0f / (float)S;
        for (int y = 0; y < S; y++)
            for (int x = 0; x < S; x++) {
                float dy = (float)y - cy, dx = (float)x - cx;
                float v = 128.0f + slope * (gx * ((float)x - half) + gy * ((float)y - half)) +
                          height * expf(-(dx * dx + dy * dy) / (2.0f * radius * radius));
                s->pixels[((size_t)y * S + x) * c + 3] = clamp_u8(v);
            }
    }
    return VT_OK;
}

static void syn_close(vt_dataset *ds) {
    syn_impl *im = ds->impl;
    free(im->grids);
    free(im);
    free(ds);
}

static const vt_dataset_ops syn_ops = {.read = syn_read, .close = syn_close};

/* Rules: a training split that holds one optimizer step; images of at least 2 x 2. */
static vt_status syn_check(const vt_data_spec *s, int64_t step_samples, const char *src) {
    if (s->data.train_size < step_samples)
        return vt_fail(VT_ERR_USAGE, "%s: data.train_size = %d is smaller than one optimizer step "
                       "(train.batch_size * train.accum_steps = %lld)", src, s->data.train_size,
                       (long long)step_samples);
    if (s->img_size < 2)
        return vt_fail(VT_ERR_USAGE, "%s: model.img_size = %d: data.kind = synthetic needs >= 2", src,
                       s->img_size);
    return VT_OK;
}

static vt_status syn_open(vt_dataset **out, const vt_data_spec *spec, vt_split split) {
    *out = NULL;
    int S = spec->img_size, c = spec->in_chans, k = spec->num_classes;
    VT_ASSERT((c == 1 || c == 3 || c == 4) && S >= 2 && k >= 1,
              "synthetic: in_chans %d, img_size %d, num_classes %d", c, S, k);
    int64_t n = split == VT_SPLIT_TRAIN ? spec->data.train_size : spec->data.val_size;
    VT_ASSERT(n > 0, "synthetic: split of %lld samples", (long long)n);

    syn_impl *im = vt_xmalloc(sizeof *im);
    im->seed = (uint64_t)spec->data.synthetic_seed;
    im->split = (int)split;
    im->img = S;
    im->rgb = c == 4 ? 3 : c;
    im->depth = c == 4;
    im->depth_label = im->depth && spec->data.synthetic_depth_label;
    im->p = S * 3 / 4 > 2 ? S * 3 / 4 : 2;
    size_t grid = SYN_GRID * SYN_GRID;
    im->grids = malloc(sizeof(float) * grid * (size_t)k * im->rgb);
    if (!im->grids) {
        free(im);
        return vt_fail(VT_ERR_RUNTIME, "synthetic dataset: out of memory for %d class patterns", k);
    }
    for (int ch = 0; ch < im->rgb; ch++) pattern_grids(im->seed, k, ch, im->grids + (size_t)ch * k * grid);

    vt_dataset *ds = vt_xmalloc(sizeof *ds);
    ds->ops = &syn_ops;
    ds->size = n;
    ds->num_classes = k;
    ds->channels = c;
    ds->height = S;
    ds->width = S;
    ds->impl = im;
    *out = ds;
    return VT_OK;
}

/* The class patterns are all a split holds: their bytes, and its size in *samples. */
static int64_t syn_memory(const vt_data_spec *spec, vt_split split, int64_t *samples) {
    int64_t n = split == VT_SPLIT_TRAIN ? spec->data.train_size : spec->data.val_size;
    *samples = n;
    int c = spec->in_chans, rgb = c == 4 ? 3 : c;
    return (int64_t)sizeof(float) * SYN_GRID * SYN_GRID * spec->num_classes * rgb;
}

const vt_dataset_kind vt_dataset_synthetic = {
    .kind = VT_DATA_SYNTHETIC,
    .fixed_size = 1,
    .check = syn_check,
    .open = syn_open,
    .memory = syn_memory,
    .classes_doc = "model.num_classes",
    .rules_doc = "data.train_size >= train.batch_size * train.accum_steps; model.img_size >= 2",
};
