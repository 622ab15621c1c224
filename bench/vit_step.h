/* vit_step.h - a ViT training (or inference) step on synthetic data, as the benchmarks
 * time it (bench only, not part of vitrain; header-only, included by bench_train.c and
 * bench_step.c). A training step is: zero grad, forward, cross-entropy, backward,
 * gradient clipping, AdamW and, in bf16 on the amx and dpbf16 paths, the weights' bf16
 * copies (the optimizer step rounds them; src/precision.h); an inference step the forward alone. The model has no drop path, the
 * data are uniform in [-1, 1) with random labels (seeded: the same every run). */
#ifndef VT_BENCH_VIT_STEP_H
#define VT_BENCH_VIT_STEP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "ops/ops.h"
#include "optim.h"
#include "precision.h"
#include "resolve.h"
#include "rng.h"
#include "tape.h"
#include "vit.h"

static void fill_uniform(float *x, size_t n, vt_rng *r, float amp) {
    for (size_t i = 0; i < n; i++) x[i] = amp * (2.0f * (float)vt_rng_uniform(r) - 1.0f);
}

/* A benchmark's model: its row name, model.preset, image size, patch size, batch size
 * and classes. */
typedef struct {
    const char *name, *preset;
    int img, patch, batch, classes;
} vit_model;

/* A model (preset at img x img, patch, classes), its optimizer when training, a batch of
 * B images and labels, the step arena and the tape. */
typedef struct {
    vt_vit m;
    vt_optim opt;
    uint16_t *w16; /* bf16: the weights' copies, as training keeps them */
    float *img;
    int *labels;
    vt_arena arena;
    vt_tape tape;
    vt_rng r;
    int B, C, S, train, bf16;
} vit_step;

/* Builds the step; 0, or 1 after printing what failed. */
static int vit_step_init(vit_step *s, const char *preset, int img, int patch, int batch, int classes, int train,
                         int bf16) {
    vt_config cfg;
    vt_config_defaults(&cfg);
    char a[7][96];
    snprintf(a[0], sizeof a[0], "model.preset=%s", preset);
    snprintf(a[1], sizeof a[1], "model.img_size=%d", img);
    snprintf(a[2], sizeof a[2], "model.patch_size=%d", patch);
    snprintf(a[3], sizeof a[3], "model.num_classes=%d", classes);
    snprintf(a[4], sizeof a[4], "model.drop_path=0");
    snprintf(a[5], sizeof a[5], "data.kind=synthetic");
    snprintf(a[6], sizeof a[6], "train.precision=%s", bf16 ? "bf16" : "fp32");
    for (int i = 0; i < 7; i++)
        if (vt_config_set(&cfg, a[i]) != VT_OK) { fprintf(stderr, "%s\n", vt_last_error()); return 1; }
    if (vt_resolve(&cfg) != VT_OK) { fprintf(stderr, "%s\n", vt_last_error()); return 1; }
    vt_model_spec ms;
    if (vt_vit_init(&s->m, vt_resolve_model_spec(&cfg, &ms), 1) != VT_OK) {
        fprintf(stderr, "%s\n", vt_last_error());
        return 1;
    }
    /* training only: an inference step's RSS holds no AdamW moments */
    if (train && vt_optim_init(&s->opt, &cfg.optim, s->m.n_params) != VT_OK) {
        fprintf(stderr, "%s\n", vt_last_error());
        return 1;
    }
    s->w16 = NULL;
    if (bf16 && (vt_precision_select(VT_PRECISION_BF16) != VT_OK || vt_bf16_weights_attach(&s->m, &s->w16) != VT_OK)) {
        fprintf(stderr, "%s\n", vt_last_error());
        return 1;
    }
    s->B = batch;
    s->C = s->m.in_chans;
    s->S = img;
    s->train = train;
    s->bf16 = bf16;
    size_t ni = (size_t)batch * s->C * img * img;
    s->img = vt_xmalloc(ni * sizeof(float));
    s->labels = vt_xmalloc((size_t)batch * sizeof(int));
    vt_rng_seed(&s->r, 2);
    fill_uniform(s->img, ni, &s->r, 1.0f);
    for (int i = 0; i < batch; i++) s->labels[i] = (int)vt_rng_below(&s->r, (uint64_t)classes);
    vt_arena_init(&s->arena, (size_t)1 << 20);
    vt_tape_init(&s->tape, &s->arena);
    s->tape.grad_enabled = train;
    s->tape.training = train;
    s->tape.rng = &s->r;
    s->tape.bf16 = bf16;
    return 0;
}

/* One step; returns its loss (inference: the first logit, a sanity value). */
static double vit_step_run(vit_step *s) {
    if (s->train) vt_vit_zero_grad(&s->m);
    vt_arena_reset(&s->arena);
    vt_tape_clear(&s->tape);
    int64_t shape[4] = {s->B, s->C, s->S, s->S};
    vt_tensor *x = vt_tensor_wrap(&s->arena, s->img, 4, shape);
    vt_tensor *logits = vt_vit_forward(&s->m, &s->tape, x);
    if (!s->train) return logits->data[0];
    vt_tensor *l = vt_op_cross_entropy(&s->tape, logits, s->labels, NULL, 0.0f);
    double loss = l->data[0];
    vt_tape_backward(&s->tape, l);
    vt_clip_grad_norm(&s->m, 1.0);
    vt_optim_step(&s->opt, &s->m, 1e-4f);
    return loss;
}

/* The analytic FLOPs of one image's step (vt_vit_flops, x3 for training). */
static double vit_step_flops(const vit_step *s) { return vt_vit_flops(&s->m, s->S) * (s->train ? 3.0 : 1.0); }

static void vit_step_free(vit_step *s) {
    vt_tape_free(&s->tape);
    vt_arena_free(&s->arena);
    if (s->train) vt_optim_free(&s->opt);
    if (s->w16) vt_bf16_weights_detach(&s->m, s->w16);
    vt_vit_free(&s->m);
    free(s->img);
    free(s->labels);
}

#endif
