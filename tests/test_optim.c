/* test_optim.c - the LR schedule against its formula, AdamW and SGD updates against
 * hand-computed double-precision references (decay on and off), and global-norm
 * gradient clipping. Uses a hand-built two-parameter model (no ops needed). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_util.h"
#include "kernels.h"
#include "optim.h"

#define NW 7 /* "w": decayed weight, 7 elements (odd: exercises kernel tails) */
#define NB 3 /* "b": bias, no decay */

/* A fake model: params/grads of NW + NB floats, two named views. */
static void fake_model(vt_vit *m, vt_param *p, float *params, float *grads) {
    memset(m, 0, sizeof *m);
    memset(p, 0, 2 * sizeof *p);
    m->params = params;
    m->grads = grads;
    m->n_params = NW + NB;
    m->p = p;
    m->n_p = 2;
    strcpy(p[0].name, "w");
    p[0].t = vt_shape(1, (int64_t)NW);
    p[0].t.data = params;
    p[0].t.grad = grads;
    p[0].decay = 1;
    p[0].offset = 0;
    strcpy(p[1].name, "b");
    p[1].t = vt_shape(1, (int64_t)NB);
    p[1].t.data = params + NW;
    p[1].t.grad = grads + NW;
    p[1].decay = 0;
    p[1].offset = NW;
}

static double grad_at(int step, int i) { return sin(0.7 * i + 1.3 * step) * (1.0 + 0.5 * step); }

static void test_schedule(void) {
    vt_optim_config c;
    memset(&c, 0, sizeof c);
    c.lr = 1e-3;
    c.min_lr = 1e-5;
    c.schedule = VT_SCHED_COSINE;
    int64_t T = 100, W = 10;
    CHECK_CLOSE(vt_lr_at(&c, 0, T, W), 1e-4, 1e-15, 1e-12, "first warmup step lr/W");
    CHECK_CLOSE(vt_lr_at(&c, 4, T, W), 5e-4, 1e-15, 1e-12, "warmup step 4");
    CHECK_CLOSE(vt_lr_at(&c, 9, T, W), 1e-3, 1e-15, 1e-12, "last warmup step reaches lr");
    CHECK_CLOSE(vt_lr_at(&c, 10, T, W), 1e-3, 1e-15, 1e-12, "peak after warmup");
    double want = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1.0 + cos(M_PI * 45.0 / 90.0));
    CHECK_CLOSE(vt_lr_at(&c, 55, T, W), want, 1e-15, 1e-12, "cosine midpoint");
    want = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1.0 + cos(M_PI * 77.0 / 90.0));
    CHECK_CLOSE(vt_lr_at(&c, 87, T, W), want, 1e-15, 1e-12, "cosine step 87");
    CHECK_CLOSE(vt_lr_at(&c, 100, T, W), 1e-5, 1e-15, 1e-12, "end = min_lr");
    CHECK_CLOSE(vt_lr_at(&c, 150, T, W), 1e-5, 1e-15, 1e-12, "past the end stays at min_lr");
    CHECK_CLOSE(vt_lr_at(&c, 0, T, 0), 1e-3, 1e-15, 1e-12, "no warmup: starts at peak");

    c.warmup_lr = 1e-6;
    CHECK_CLOSE(vt_lr_at(&c, 0, T, W), 1e-6, 1e-15, 1e-12, "warmup_lr start");
    CHECK_CLOSE(vt_lr_at(&c, 5, T, W), 1e-6 + (1e-3 - 1e-6) * 0.5, 1e-15, 1e-12, "warmup_lr halfway");
    CHECK_CLOSE(vt_lr_at(&c, 10, T, W), 1e-3, 1e-15, 1e-12, "warmup_lr peak");

    c.warmup_lr = 0;
    c.schedule = VT_SCHED_CONSTANT;
    CHECK_CLOSE(vt_lr_at(&c, 3, T, W), 4e-4, 1e-15, 1e-12, "constant: warmup still applies");
    CHECK_CLOSE(vt_lr_at(&c, 60, T, W), 1e-3, 1e-15, 1e-12, "constant after warmup");
    CHECK_CLOSE(vt_lr_at(&c, 100, T, W), 1e-3, 1e-15, 1e-12, "constant at the end");
}

static void test_adamw(void) {
    float params[NW + NB], grads[NW + NB];
    vt_param p[2];
    vt_vit m;
    fake_model(&m, p, params, grads);
    double ref[NW + NB], rm[NW + NB], rv[NW + NB];
    for (int i = 0; i < NW + NB; i++) {
        params[i] = (float)(0.3 * cos(1.1 * i) + 0.05);
        ref[i] = params[i];
        rm[i] = rv[i] = 0.0;
    }
    vt_optim_config c;
    memset(&c, 0, sizeof c);
    c.name = VT_OPT_ADAMW;
    c.lr = 1e-2;
    c.weight_decay = 0.05;
    c.betas[0] = 0.9;
    c.betas[1] = 0.999;
    c.eps = 1e-8;
    vt_optim o;
    CHECK(vt_optim_init(&o, &c, m.n_params) == VT_OK, "init: %s", vt_last_error());
    CHECK(o.m && o.v && o.m[0] == 0.0f && o.v[NW + NB - 1] == 0.0f, "moments allocated and zero");
    const float lrs[3] = {1e-2f, 5e-3f, 2e-3f};
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < NW + NB; i++) grads[i] = (float)grad_at(s, i);
        vt_optim_step(&o, &m, lrs[s]);
        double t = s + 1, lr = lrs[s];
        double bc1 = 1.0 - pow(0.9, t), bc2 = 1.0 - pow(0.999, t);
        /* The kernel takes b1, b2 as float and forms 1 - b in float (kernels.h). */
        double b1 = (float)0.9, b2 = (float)0.999, wdf = (float)0.05;
        for (int i = 0; i < NW + NB; i++) {
            double g = (float)grad_at(s, i), wd = i < NW ? wdf : 0.0;
            ref[i] -= lr * wd * ref[i];
            rm[i] = b1 * rm[i] + (double)(1.0f - (float)b1) * g;
            rv[i] = b2 * rv[i] + (double)(1.0f - (float)b2) * g * g;
            ref[i] -= lr * (rm[i] / bc1) / (sqrt(rv[i] / bc2) + 1e-8);
        }
        CHECK(o.t == s + 1, "t counts updates: %lld", (long long)o.t);
        CHECK_ARRAY_CLOSE(params, ref, NW + NB, 1e-6, 1e-5, "AdamW params after step %d", s + 1);
        CHECK_ARRAY_CLOSE(o.m, rm, NW + NB, 1e-7, 1e-5, "AdamW first moment after step %d", s + 1);
        CHECK_ARRAY_CLOSE(o.v, rv, NW + NB, 1e-9, 1e-5, "AdamW second moment after step %d", s + 1);
    }
    /* Decay really differs: the same run without weight decay changes the weight only. */
    float p2[NW + NB], g2[NW + NB];
    vt_param pp[2];
    vt_vit m2;
    fake_model(&m2, pp, p2, g2);
    c.weight_decay = 0.0;
    vt_optim o2;
    CHECK(vt_optim_init(&o2, &c, m2.n_params) == VT_OK, "init 2");
    for (int i = 0; i < NW + NB; i++) p2[i] = (float)(0.3 * cos(1.1 * i) + 0.05);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < NW + NB; i++) g2[i] = (float)grad_at(s, i);
        vt_optim_step(&o2, &m2, lrs[s]);
    }
    double dw = 0, db = 0;
    for (int i = 0; i < NW; i++) dw += fabs(p2[i] - params[i]);
    for (int i = NW; i < NW + NB; i++) db += fabs(p2[i] - params[i]);
    CHECK(dw > 1e-6, "weight decay changes decayed params (diff %g)", dw);
    CHECK(db == 0.0, "weight decay leaves non-decay params alone (diff %g)", db);
    vt_optim_free(&o);
    vt_optim_free(&o2);
}

static void test_sgd(void) {
    float params[NW + NB], grads[NW + NB];
    vt_param p[2];
    vt_vit m;
    fake_model(&m, p, params, grads);
    double ref[NW + NB], buf[NW + NB];
    for (int i = 0; i < NW + NB; i++) {
        params[i] = (float)(0.2 * sin(0.9 * i) - 0.1);
        ref[i] = params[i];
        buf[i] = 0.0;
    }
    vt_optim_config c;
    memset(&c, 0, sizeof c);
    c.name = VT_OPT_SGD;
    c.momentum = 0.9;
    c.weight_decay = 0.1;
    vt_optim o;
    CHECK(vt_optim_init(&o, &c, m.n_params) == VT_OK, "sgd init: %s", vt_last_error());
    CHECK(o.m != NULL && o.v == NULL, "SGD keeps one momentum buffer");
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < NW + NB; i++) grads[i] = (float)grad_at(s, i);
        float lr = 0.05f;
        vt_optim_step(&o, &m, lr);
        for (int i = 0; i < NW + NB; i++) {
            double g = (float)grad_at(s, i) + (i < NW ? 0.1 * ref[i] : 0.0);
            buf[i] = 0.9 * buf[i] + g;
            ref[i] -= (double)lr * buf[i];
        }
        CHECK_ARRAY_CLOSE(params, ref, NW + NB, 1e-6, 1e-5, "SGD params after step %d", s + 1);
        CHECK_ARRAY_CLOSE(o.m, buf, NW + NB, 1e-6, 1e-5, "SGD momentum after step %d", s + 1);
    }
    vt_optim_free(&o);
}

static void test_clip(void) {
    float params[NW + NB], grads[NW + NB], saved[NW + NB];
    vt_param p[2];
    vt_vit m;
    fake_model(&m, p, params, grads);
    double sq = 0;
    for (int i = 0; i < NW + NB; i++) {
        grads[i] = (float)(i % 3 - 1) * (1.0f + 0.25f * i);
        sq += (double)grads[i] * grads[i];
        saved[i] = grads[i];
    }
    double norm = sqrt(sq);
    CHECK_CLOSE(vt_clip_grad_norm(&m, 0.0), norm, 0, 1e-12, "norm without clipping");
    CHECK(memcmp(grads, saved, sizeof grads) == 0, "max_norm 0 leaves grads alone");
    CHECK_CLOSE(vt_clip_grad_norm(&m, norm * 2), norm, 0, 1e-12, "norm below max");
    CHECK(memcmp(grads, saved, sizeof grads) == 0, "norm below max leaves grads alone");
    double got = vt_clip_grad_norm(&m, 1.0);
    CHECK_CLOSE(got, norm, 0, 1e-12, "reported norm is the norm before clipping");
    double sq2 = 0;
    for (int i = 0; i < NW + NB; i++) sq2 += (double)grads[i] * grads[i];
    CHECK_CLOSE(sqrt(sq2), 1.0, 1e-5, 1e-5, "clipped norm equals max_norm");
    double coef = 1.0 / (norm + 1e-6);
    int dir_ok = 1;
    for (int i = 0; i < NW + NB; i++) dir_ok &= fabs(grads[i] - saved[i] * coef) <= 1e-6;
    CHECK(dir_ok, "clipping scales every gradient by max/(norm + 1e-6)");
}

int main(void) {
    if (test_kernels_init()) return 1;
    test_schedule();
    test_adamw();
    test_sgd();
    test_clip();
    return test_summary();
}
