/* test_parity.c - the ViT against the PyTorch reference (scripts/make_fixtures.py).
 *
 * For each committed fixture (tests/fixtures/vit_tiny*.safetensors; directory
 * overridable with VT_FIXTURE_DIR): build the model from __metadata__["config"], copy in
 * the fixture's weights, run forward + cross-entropy (label smoothing from the config)
 * + backward on input.images / input.labels, and compare output.logits, output.loss and
 * grad.<name> for every parameter, each tensor by name. Then run the 10 AdamW steps of
 * the fixture's schedule on the same batch, comparing each step's learning rate
 * (train.lr) and loss before the update (train.losses). Also checks that the model's
 * parameter names are exactly the fixture's (timm) names and that vt_vit_save /
 * vt_vit_load round-trip the weights bitwise.
 *
 * The fixture values are the float64 answer rounded to float32; the model runs in
 * float32. Tolerance for every comparison: |got - want| <= 1e-5 + 1e-4 |want|
 * (torch's own float32 run is within 5e-7 of the fixture, see the script's output).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors.h"
#include "config.h"
#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "optim.h"
#include "parity_util.h"
#include "tape.h"
#include "tensor.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

#define ATOL 1e-5
#define RTOL 1e-4

static const vt_st_tensor *need(const vt_safetensors *st, const char *path, const char *name,
                                int64_t size) {
    const vt_st_tensor *t = vt_st_find(st, name);
    CHECK(t != NULL, "%s: tensor %s missing", path, name);
    if (t) CHECK(t->size == size, "%s: tensor %s has %lld elements, expected %lld", path, name,
                 (long long)t->size, (long long)size);
    return t && t->size == size ? t : NULL;
}

/* Copy every parameter from the fixture; 1 if all were present with the right size. */
static int copy_weights(vt_vit *m, const vt_safetensors *st, const char *path) {
    int ok = 1;
    for (int i = 0; i < m->n_p; i++) {
        const vt_st_tensor *t = need(st, path, m->p[i].name, m->p[i].t.size);
        if (!t) {
            ok = 0;
            continue;
        }
        memcpy(m->p[i].t.data, t->data, (size_t)t->size * sizeof(float));
    }
    return ok;
}

static void check_fixture(const char *path) {
    vt_safetensors st;
    vt_config cfg;
    vt_vit m;
    if (!parity_open(path, &st, &cfg, &m)) return;

    /* Names: every model parameter is in the fixture and vice versa. */
    parity_check_names(&m, &st, path);
    for (int i = 0; i < m.n_p; i++) {
        const vt_st_tensor *t = vt_st_find(&st, m.p[i].name);
        if (!t) continue;
        int same = t->size == m.p[i].t.size && t->ndim == m.p[i].t.ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == m.p[i].t.shape[d];
        CHECK(same, "%s: parameter %s shape differs from the fixture's", path, m.p[i].name);
    }

    const vt_st_tensor *images = need(&st, path, "input.images",
                                      (int64_t)3 * m.in_chans * m.img_size * m.img_size);
    const vt_st_tensor *labels_f = vt_st_find(&st, "input.labels");
    const vt_st_tensor *want_logits = vt_st_find(&st, "output.logits");
    const vt_st_tensor *want_loss = need(&st, path, "output.loss", 1);
    const vt_st_tensor *want_lr = vt_st_find(&st, "train.lr");
    const vt_st_tensor *want_losses = vt_st_find(&st, "train.losses");
    int B = labels_f ? (int)labels_f->size : 0;
    int ok = copy_weights(&m, &st, path) && images && labels_f && want_logits && want_loss &&
             want_lr && want_losses && B == 3 &&
             want_logits->size == (int64_t)B * m.num_classes &&
             want_losses->size == cfg.train.steps && want_lr->size == cfg.train.steps;
    CHECK(ok, "%s: fixture incomplete or inconsistent with its config", path);
    if (!ok) {
        vt_vit_free(&m);
        vt_st_free(&st);
        return;
    }
    int labels[3];
    for (int i = 0; i < B; i++) labels[i] = (int)labels_f->data[i];

    vt_arena arena;
    vt_tape tape;
    parity_session_init(&arena, &tape);
    const int64_t shape[4] = {B, m.in_chans, m.img_size, m.img_size};
    float smoothing = (float)cfg.train.label_smoothing;
    CHECK(smoothing == 0.1f, "%s: label_smoothing %g, fixture made with 0.1", path, smoothing);

    /* Forward and backward. */
    vt_tensor *logits = NULL;
    float loss = parity_forward_backward(&m, &tape, &arena, images->data, shape, labels, smoothing,
                                         &logits);
    parity_check_outputs(path, logits, loss, want_logits, want_loss, B, m.num_classes, ATOL, RTOL);
    for (int i = 0; i < m.n_p; i++) {
        char gname[128];
        snprintf(gname, sizeof gname, "grad.%s", m.p[i].name);
        const vt_st_tensor *g = need(&st, path, gname, m.p[i].t.size);
        if (g)
            CHECK_ARRAY_CLOSE(m.p[i].t.grad, g->data, g->size, ATOL, RTOL, "%s: %s", path, gname);
    }

    /* Save / load round trip of the weights under their timm names. */
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/vt_parity_%ld.safetensors", (long)getpid());
    vt_status s = vit_save_config(&m, &cfg, tmp);
    CHECK(s == VT_OK, "save: %s", vt_last_error());
    vt_vit m2;
    if (s == VT_OK && vit_init_config(&m2, &cfg, 2) == VT_OK) {
        s = vt_vit_load(&m2, tmp);
        CHECK(s == VT_OK, "load: %s", vt_last_error());
        CHECK(m2.n_params == m.n_params && s == VT_OK &&
                  memcmp(m2.params, m.params, (size_t)m.n_params * sizeof(float)) == 0,
              "%s: weights differ after vt_vit_save + vt_vit_load", path);
        vt_vit_free(&m2);
    }
    unlink(tmp);

    /* 10 AdamW steps with the schedule, loss before each update. */
    copy_weights(&m, &st, path);
    vt_optim opt;
    s = vt_optim_init(&opt, &cfg.optim, m.n_params);
    CHECK(s == VT_OK, "optim init: %s", vt_last_error());
    if (s == VT_OK) {
        const int64_t T = cfg.train.steps, W = cfg.optim.warmup_steps;
        float losses[64];
        for (int64_t step = 0; step < T && step < 64; step++) {
            double lr = vt_lr_at(&cfg.optim, step, T, W);
            CHECK_CLOSE(lr, want_lr->data[step], 1e-9, 1e-6, "%s: train.lr[%lld]", path,
                        (long long)step);
            losses[step] = parity_forward_backward(&m, &tape, &arena, images->data, shape, labels,
                                                   smoothing, NULL);
            vt_optim_step(&opt, &m, (float)lr);
        }
        CHECK_ARRAY_CLOSE(losses, want_losses->data, T, ATOL, RTOL, "%s: train.losses", path);
        vt_optim_free(&opt);
    }

    vt_tape_free(&tape);
    vt_arena_free(&arena);
    vt_vit_free(&m);
    vt_st_free(&st);
}

int main(void) {
    static const char *const files[2] = {"vit_tiny", "vit_tiny_avg"};
    return parity_main("", files, 2, check_fixture, NULL);
}
