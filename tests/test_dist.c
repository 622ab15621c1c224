/* test_dist.c - what data parallelism (dist.h) relies on, checked in one process:
 *   - the ViT's gradient marks (vt_tape_mark_grads_final): when the replay reaches a mark,
 *     every parameter gradient at or above its offset already has its final bits (the
 *     gradient buckets start on that promise), the marks come in falling order, one per
 *     block and one before the final norm, for every PE kind, Performer, layer scale,
 *     average pooling and every dropout on;
 *   - a sample's logits do not depend on which samples share its batch: eval-mode logits
 *     of the rank shards (samples r, r + R, ... in batches of ceil(B / R)) and of single
 *     samples equal the full batch's rows bit for bit (so sharded top-1 equals one
 *     process's), at batch sizes where the head's GEMM changes its thread split;
 *   - with the tape's sample keys (sample0 = r, stride R) a shard's training forward draws
 *     the full batch's dropout, attention-dropout and drop-path masks: its logits equal the
 *     full batch's rows bit for bit;
 *   - without mpirun dist.h is the identity: rank 0 of 1, collectives do nothing.
 * The exchange itself runs under mpirun in e2e_dist.c. */
#include <stdlib.h>
#include <string.h>

#include "config_overrides.h"
#include "dist.h"
#include "harness.h"
#include "test_util.h"
#include "kernels.h"
#include "ops/ops.h"
#include "vit.h"
#include "vit_fixture.h"

static vt_arena arena;

/* ---- gradient marks --------------------------------------------------------------- */

typedef struct {
    const vt_vit *m;
    int n;                /* marks seen */
    int64_t from[64];
    float *snap[64];      /* grads[from, n_params) when the mark ran */
    int order_ok;
} marks;

static void on_mark(void *ctx, int64_t from) {
    marks *k = ctx;
    if (from < 0) return;
    if (k->n == 64) return;
    if (k->n > 0 && from >= k->from[k->n - 1]) k->order_ok = 0;
    int64_t len = k->m->n_params - from;
    k->snap[k->n] = malloc(sizeof(float) * (size_t)(len > 0 ? len : 1));
    memcpy(k->snap[k->n], k->m->grads + from, sizeof(float) * (size_t)len);
    k->from[k->n++] = from;
}

static vt_config model_cfg(const char *sets) {
    return config_with_sets("{\"model\": {\"width\": 16, \"depth\": 3, \"heads\": 2, \"mlp_ratio\": 2, "
                            "\"patch_size\": 4, \"img_size\": 8, \"num_classes\": 5, \"in_chans\": 3}}",
                            sets);
}

static void fill(float *x, int64_t n, uint64_t seed) {
    vt_rng r;
    vt_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(2.0 * vt_rng_uniform(&r) - 1.0);
}

static void test_grad_marks(void) {
    static const char *sets[] = {
        "pe.kind=none",
        "model.layer_scale=0.3;model.drop_rate=0.2;model.attn_drop_rate=0.2;model.drop_path=0.3",
        "pe.kind=ape;pe.ape=sincos;model.pool=avg",
        "pe.kind=rope_axial;model.qkv_bias=false",
        "pe.kind=rope_mixed;pe.share=heads;model.attention=performer",
        "pe.kind=cayley;model.drop_path=0.2",
        "pe.kind=cayley;pe.share=all",
        "pe.kind=circulant;pe.block_size=4;pe.share=layers;model.attention=performer",
        "pe.kind=liere;model.drop_rate=0.1",
        "pe.kind=liere_commute",
    };
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        vt_config c = model_cfg(sets[s]);
        vt_vit m;
        if (vit_init_config(&m, &c, 3) != VT_OK) {
            CHECK(0, "init '%s': %s", sets[s], vt_last_error());
            continue;
        }
        marks k = {.m = &m, .order_ok = 1};
        vt_arena_reset(&arena);
        vt_tape t;
        vt_tape_init(&t, &arena);
        vt_rng rng;
        vt_rng_seed(&rng, 9);
        t.rng = &rng;
        t.hook = on_mark;
        t.hook_ctx = &k;
        int64_t shape[4] = {4, 3, 8, 8};
        vt_tensor *x = vt_tape_new(&t, 0, 4, shape);
        fill(x->data, x->size, 5);
        vt_vit_zero_grad(&m);
        vt_tensor *logits = vt_vit_forward(&m, &t, x);
        int labels[4] = {0, 1, 2, 3};
        vt_tape_backward(&t, vt_op_cross_entropy(&t, logits, labels, NULL, 0.0f));
        int64_t norm = m.norm_w->data - m.params;
        CHECK(k.n == m.L + 1 && k.from[0] == norm && k.order_ok,
              "'%s': %d marks in falling order, the first at the final norm (%lld), expected %d",
              sets[s], k.n, (long long)(k.n ? k.from[0] : -1), m.L + 1);
        int64_t bad = -1;
        for (int i = 0; i < k.n && bad < 0; i++)
            if (memcmp(k.snap[i], m.grads + k.from[i], sizeof(float) * (size_t)(m.n_params - k.from[i])))
                bad = k.from[i];
        CHECK(bad < 0, "'%s': the gradients from offset %lld changed after their mark", sets[s],
              (long long)bad);
        double mag = 0;
        for (int64_t i = 0; i < m.n_params; i++) mag += m.grads[i] * (double)m.grads[i];
        CHECK(mag > 0, "'%s': backward produced gradients", sets[s]);
        for (int i = 0; i < k.n; i++) free(k.snap[i]);
        vt_tape_free(&t);
        vt_vit_free(&m);
    }
}

/* ---- per-sample logits -------------------------------------------------------------- */

/* Logits of `count` images (rows of imgs picked by idx) in one forward. training: with
 * gradients, dropout on, the mask stream seeded by `seed` and keys sample0 + b stride. */
static void forward_rows(vt_vit *m, const float *imgs, const int *idx, int count, int training,
                         uint64_t seed, int64_t sample0, int64_t stride, float *out) {
    const int S = m->img_size, C = m->in_chans, K = m->num_classes;
    size_t per = (size_t)C * S * S;
    vt_arena_reset(&arena);
    vt_tape t;
    vt_tape_init(&t, &arena);
    vt_rng rng;
    vt_rng_seed(&rng, seed);
    t.rng = &rng;
    t.training = training;
    t.grad_enabled = training;
    t.sample0 = sample0;
    t.sample_stride = stride;
    int64_t shape[4] = {count, C, S, S};
    vt_tensor *x = vt_tape_new(&t, 0, 4, shape);
    for (int i = 0; i < count; i++) memcpy(x->data + i * per, imgs + (size_t)idx[i] * per, per * sizeof(float));
    vt_tensor *y = vt_vit_forward(m, &t, x);
    memcpy(out, y->data, sizeof(float) * (size_t)count * K);
    vt_tape_free(&t);
}

static void test_sample_independence(void) {
    /* width 192: with 10 classes the head's GEMM (B x 10 x 192) would be cut over K on 2
     * threads for B = 48 but not for the shards' 24, 16 and 12; with 4 classes (and 100's
     * last 4) it runs the narrow AVX-512 microkernel beside the short-row and in-place ones */
    static const char *sets[] = {
        "pe.kind=none",
        "pe.kind=rope_mixed;model.pool=avg;model.num_classes=4",
        "pe.kind=cayley;model.attention=performer;model.attn_drop_rate=0;model.num_classes=100",
    };
    enum { B = 48 };
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        char all[256];
        snprintf(all, sizeof all, "model.width=192;model.heads=3;model.depth=1;model.img_size=16;"
                 "model.num_classes=10;model.drop_rate=0.1;model.attn_drop_rate=0.1;"
                 "model.drop_path=0.2;%s", sets[s]);
        vt_config c = model_cfg(all);
        vt_vit m;
        if (vit_init_config(&m, &c, 4) != VT_OK) {
            CHECK(0, "init '%s': %s", all, vt_last_error());
            continue;
        }
        const int K = m.num_classes;
        size_t per = (size_t)m.in_chans * m.img_size * m.img_size;
        float *imgs = malloc(sizeof(float) * per * B);
        fill(imgs, (int64_t)(per * B), 17);
        float *full = malloc(sizeof(float) * B * K), *part = malloc(sizeof(float) * B * K);
        int idx[B];
        for (int training = 0; training <= 1; training++) {
            for (int i = 0; i < B; i++) idx[i] = i;
            forward_rows(&m, imgs, idx, B, training, 77, 0, 1, full);
            static const int ranks[] = {2, 3, 4};
            for (int q = 0; q < 3; q++) {
                int R = ranks[q], same = 1;
                for (int r = 0; r < R && same; r++) {
                    /* rank r's shard r, r + R, ...; eval in batches of ceil(B / R) / 2 too */
                    int n = 0;
                    for (int i = r; i < B; i += R) idx[n++] = i;
                    int bs = training ? n : (n + 1) / 2;
                    for (int b0 = 0; b0 < n && same; b0 += bs) {
                        int cnt = n - b0 < bs ? n - b0 : bs;
                        forward_rows(&m, imgs, idx + b0, cnt, training, 77, r + (int64_t)b0 * R, R, part);
                        for (int i = 0; i < cnt && same; i++)
                            same = !memcmp(part + (size_t)i * K, full + (size_t)idx[b0 + i] * K,
                                           sizeof(float) * K);
                    }
                }
                CHECK(same, "'%s' %s: logits of the %d rank shards equal the batch of %d's rows bit "
                      "for bit", sets[s], training ? "training (masks keyed by sample)" : "eval", R, B);
            }
            if (!training) {
                int same = 1;
                for (int i = 0; i < B && same; i += 7) {
                    forward_rows(&m, imgs, &i, 1, 0, 77, 0, 1, part);
                    same = !memcmp(part, full + (size_t)i * K, sizeof(float) * K);
                }
                CHECK(same, "'%s' eval: a sample alone gets its logits in the batch bit for bit", sets[s]);
            }
        }
        free(imgs);
        free(full);
        free(part);
        vt_vit_free(&m);
    }
}

/* ---- without mpirun ----------------------------------------------------------------- */

static void test_single_process(void) {
    vt_dist_init(NULL, NULL);
    CHECK(vt_dist_rank() == 0 && vt_dist_size() == 1 && vt_dist_root(), "rank 0 of 1 without mpirun");
    CHECK(vt_dist_start(0, "job") == 0 && vt_dist_start(3, "job") == 3, "start-up passes rc through");
    CHECK(vt_dist_agree(VT_OK) == VT_OK && vt_dist_agree(vt_fail(VT_ERR_RUNTIME, "x")) == VT_ERR_RUNTIME &&
              !strcmp(vt_last_error(), "x"), "agree keeps the status and message");
    CHECK(vt_dist_reports_error() && !strcmp(vt_dist_who(), ""), "the one process reports its errors");
    double v[2] = {1.5, -2};
    int64_t w[1] = {7};
    vt_dist_sum_f64(v, 2);
    vt_dist_sum_i64(w, 1);
    CHECK(v[0] == 1.5 && v[1] == -2 && w[0] == 7, "sums of one rank");
    float rows[6] = {1, 2, 3, 4, 5, 6}, outr[6];
    vt_dist_gather_strided(rows, 3, 2 * sizeof(float), outr);
    CHECK(!memcmp(rows, outr, sizeof rows), "gather of one rank copies");
    CHECK(vt_dist_check_same("x", rows, sizeof rows) == VT_OK, "check_same of one rank");
    float g[4] = {0};
    CHECK(vt_dist_grads_new(g, 4, 0) == NULL, "no gradient exchange with one rank");
    CHECK(vt_dist_comm_seconds() == 0.0, "no time in MPI");
    CHECK(vt_dist_exit(0) == 0 && vt_dist_exit(2) == 2, "exit code passes through");
}

int main(void) {
    if (test_kernels_init()) return 1;
    vt_arena_init(&arena, 1 << 20);
    test_single_process();
    test_grad_marks();
    test_sample_independence();
    vt_arena_free(&arena);
    return test_summary();
}
