/* bench_step.c - a training step's products against the same products run alone, in one
 * process, in alternating rounds (issue 40 item 3: where the step's MFU loses against the
 * GEMM's % of peak). Not a test: prints figures.
 *
 * stdout: one JSON object per line, each naming the CPU ("cpu": /proc/cpuinfo's model
 * name, family and model), the kernel level ("isa") and the GEMM context; stderr: a
 * readable table.
 * Per round and thread count (the thread counts' order alternating from round to round):
 *  (a) "fma_peak" (bench/fma_peak.h; in bf16 "bf16_peak", VDPBF16PS), measured again
 *      before each round; every % below refers to the best this run has seen on that
 *      thread count, as bench_train's do.
 *  (b) one training step as bench_train times it (bench/vit_step.h; 2 warm-up steps
 *      before the first round, 1 more on the second thread count), with the trace on
 *      (src/ops/trace.h): every vt_gemm_prec call and every attention forward and
 *      backward, timed where they run. The step's time splits into those and the rest
 *      (LayerNorm, GELU, residual adds, AdamW, clipping; the softmax is inside
 *      attention's time; a weight gradient's call, vt_gemm_prec_wgrad, also sums its
 *      layer's bias gradient, inside its time: "sums" 1).
 *  (c) attention alone: its forward and backward on a fresh (B, N, 3 H hd) qkv, as the
 *      model calls it, the third of three runs.
 *  (d) one paired step: the trace on again, and right after each GEMM call of the step
 *      (inside it, so within a fraction of a second of it, in the same phase of a host
 *      whose speed moves over seconds) the same product alone three ways, in an order
 *      that rotates from call to call:
 *      "warm":  the same call (the step's pointers, leading dimensions, alpha, beta,
 *               bias and column sums, those into scratch) into a copy of its C: its
 *               operands as warm as the step's call left them;
 *      "cold":  the same after writing a buffer of twice the last-level cache size (at
 *               least 64 MiB, at most 1 GiB): its operands in memory;
 *      "fresh": the shape as bench_kernels times it: alpha 1, beta 0, no bias or sums, fresh
 *               operands in bench_kernels' fill with their own leading dimensions,
 *               once untimed and again timed.
 *      The copies write only scratch memory, so the step computes what a plain step
 *      computes.
 *  (e) "step_gemm": per GEMM shape (ta, tb, M, N, K, whether beta is 0, whether a bias is
 *      fused, whether it sums columns), the calls, flops and seconds in the traced step (b) and its GFLOP/s there,
 *      and from the paired step (d) its GFLOP/s in the step and alone (warm, cold,
 *      fresh); "step_attention": attention's forward and backward in the step (b) and
 *      alone (c); "step_summary": the step's seconds and MFU (vt_vit_flops x 3 x images /
 *      seconds / peak, bench_train's definition), its time in GEMMs, attention and the
 *      rest, the GEMMs' % of peak in the step, the GEMM seconds of the step (b) had each
 *      shape run at its alone rate (d) ("gemm_s_at_*": its seconds in (b) times its
 *      alone / in-step time ratio in (d)), and the mean % of peak of the 12 block
 *      products (qkv, proj, fc1, fc2 x fwd, dX, dW; unweighted: bench_kernels'
 *      "mean_pct_peak") in the step (b), fresh (d), and fresh in the phase of the host
 *      the step (b) ran in (each product's rate in (b) times its fresh / in-step ratio
 *      in (d)), and "gap_points": that last mean minus the MFU, item 3's gap with both
 *      figures from one step.
 * Usage: bench_step [model [rounds [threads]]]: model vit_s16_224 (default; batch 64),
 * vit_b16_224 (batch 32; issue 40's model, the slowest) or vit_ti4_32 (batch 128);
 * rounds 1-20 (default 1); threads 1, 2 or 1,2 (default 1,2). VT_BENCH_PRECISION=bf16: train.precision = bf16 (default fp32).
 * Wall-clock timing: run it on an otherwise idle machine (the quiet lock).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fma_peak.h"
#include "kernels.h"
#include "ops/par.h"
#include "ops/trace.h"
#include "vit_step.h"

#define MAX_CALLS 4096
#define MAX_SHAPES 64

static const vit_model cases[] = {
    {"vit_s16_224", "vit_small", 224, 16, 64, 1000},
    {"vit_b16_224", "vit_base", 224, 16, 32, 1000},
    {"vit_ti4_32", "vit_tiny", 32, 4, 128, 10},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

enum { WARM, COLD, FRESH, N_VARIANTS };

/* One GEMM shape of the step: its calls in the traced step, and in the paired step with
 * its copies alone. */
typedef struct {
    int ta, tb, M, N, K, beta0, bias, sums;
    char name[32];
    int calls;
    double flops, seconds;              /* in the traced step */
    double paired_flops, paired_s;      /* its calls in the paired step */
    double alone_s[N_VARIANTS];         /* their copies alone, per variant */
} shape;

/* The name of a product of the model: "<layer>/<pass>" (layer qkv, proj, fc1, fc2, patch,
 * head; pass fwd, dX, dW), from its sizes; "other" when none matches. */
static void shape_name(const vit_step *st, const vt_trace_call *c, char *out, size_t len) {
    const vt_vit *m = &st->m;
    int D = m->D, Dh = m->mlp_hidden, np = (st->S / m->P) * (st->S / m->P);
    struct { const char *name; int out, in, rows; } layers[] = {
        {"qkv", 3 * D, D, st->B * (np + 1)},   {"proj", D, D, st->B * (np + 1)},
        {"fc1", Dh, D, st->B * (np + 1)},      {"fc2", D, Dh, st->B * (np + 1)},
        {"patch", D, m->in_chans * m->P * m->P, st->B * np}, {"head", m->num_classes, D, st->B}};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
        int o = layers[i].out, in = layers[i].in, r = layers[i].rows;
        const char *pass = !c->ta && c->tb && c->M == r && c->N == o && c->K == in    ? "fwd"
                           : !c->ta && !c->tb && c->M == r && c->N == in && c->K == o ? "dX"
                           : c->ta && !c->tb && c->M == o && c->N == in && c->K == r  ? "dW"
                                                                                      : NULL;
        if (pass) {
            snprintf(out, len, "%s/%s", layers[i].name, pass);
            return;
        }
    }
    snprintf(out, len, "other");
}

static int same_shape(const shape *s, const vt_trace_call *c) {
    return s->ta == c->ta && s->tb == c->tb && s->M == c->M && s->N == c->N && s->K == c->K &&
           s->beta0 == (c->beta == 0.0f) && s->bias == (c->bias != NULL) && s->sums == c->sums;
}

/* The shape of c among shapes[0..*ns), added when new (NULL: no room). */
static shape *shape_of(const vit_step *st, shape *shapes, int *ns, const vt_trace_call *c) {
    for (int j = 0; j < *ns; j++)
        if (same_shape(&shapes[j], c)) return &shapes[j];
    if (*ns == MAX_SHAPES) return NULL;
    shape *s = &shapes[(*ns)++];
    *s = (shape){.ta = c->ta, .tb = c->tb, .M = c->M, .N = c->N, .K = c->K, .beta0 = c->beta == 0.0f,
                 .bias = c->bias != NULL, .sums = c->sums};
    shape_name(st, c, s->name, sizeof s->name);
    return s;
}

/* Operands for the fresh variant: the largest A, B (and its bf16 copy) and C of the step's
 * shapes, in bench_kernels' fill. */
typedef struct {
    float *A, *B, *C;
    uint16_t *B16;
    size_t a, b, c;
    float *Cs; /* the warm and cold copies' C: M rows of ldc floats */
    size_t cs;
} fresh_pool;

static float *pool_floats(size_t n) {
    float *p = vt_aligned_alloc((n ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "bench_step: out of memory (%zu floats)\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

static void pool_fit(fresh_pool *p, const shape *shapes, int ns, const vt_trace_call *calls, int n) {
    size_t cs = 0;
    for (int i = 0; i < n; i++)
        if (calls[i].kind == VT_TRACE_GEMM && (size_t)calls[i].M * calls[i].ldc > cs) cs = (size_t)calls[i].M * calls[i].ldc;
    if (cs > p->cs) {
        free(p->Cs);
        p->Cs = pool_floats(cs);
        p->cs = cs;
    }
    size_t a = 0, b = 0, c = 0;
    for (int j = 0; j < ns; j++) {
        size_t mk = (size_t)shapes[j].M * shapes[j].K, kn = (size_t)shapes[j].K * shapes[j].N,
               mn = (size_t)shapes[j].M * shapes[j].N;
        if (mk > a) a = mk;
        if (kn > b) b = kn;
        if (mn > c) c = mn;
    }
    if (a <= p->a && b <= p->b && c <= p->c) return;
    free(p->A); free(p->B); free(p->C); free(p->B16);
    p->A = pool_floats(a);
    p->B = pool_floats(b);
    p->C = pool_floats(c);
    p->B16 = vt_aligned_alloc((b ? b : 1) * sizeof(uint16_t));
    if (!p->B16) {
        fprintf(stderr, "bench_step: out of memory (%zu bf16)\n", b);
        exit(1);
    }
    vt_k.bf16_round(p->B, p->B16, b);
    p->a = a, p->b = b, p->c = c;
}

/* Seconds of the call c (a trace entry: the step's arguments; a call that made column
 * sums makes them again, into scratch from sums_arena). */
static double run_call(const vt_trace_call *c) {
    static vt_arena sums_arena;
    static int sums_ready;
    float *sums = NULL;
    if (c->sums) {
        if (!sums_ready) vt_arena_init(&sums_arena, 1 << 20);
        sums_ready = 1;
        vt_arena_reset(&sums_arena);
        sums = vt_arena_calloc(&sums_arena, (size_t)c->M * sizeof(float));
    }
    double t0 = bench_now();
    if (sums)
        vt_gemm_prec_wgrad(&sums_arena, c->bf16, c->M, c->N, c->K, c->A, c->lda, c->B, c->ldb, c->C, c->ldc, sums);
    else
        vt_gemm_prec(c->bf16, c->ta, c->tb, c->M, c->N, c->K, c->alpha, c->A, c->lda, c->B, c->B16, c->ldb, c->beta,
                     c->bias, c->C, c->ldc);
    return bench_now() - t0;
}

/* Writes every byte of the eviction buffer, on all threads. */
static void evict(unsigned char *buf, size_t bytes) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < bytes; i += 4096) memset(buf + i, (int)(i >> 12), bytes - i < 4096 ? bytes - i : 4096);
}

/* What the paired step's after function works with. */
typedef struct {
    const vit_step *st;
    shape *shapes;
    int ns, turn;
    fresh_pool *pool;
    unsigned char *ev;
    size_t ev_bytes;
} pair_ctx;

/* Seconds of call c alone in variant v. */
static double run_alone(const vt_trace_call *c, int v, pair_ctx *p) {
    vt_trace_call g = *c;
    if (v == FRESH) {
        g.alpha = 1.0f, g.beta = 0.0f, g.bias = NULL, g.sums = 0;
        g.A = p->pool->A, g.B = p->pool->B, g.B16 = c->B16 ? p->pool->B16 : NULL, g.C = p->pool->C;
        g.lda = c->ta ? c->M : c->K, g.ldb = c->tb ? c->K : c->N, g.ldc = c->N;
        run_call(&g);
        return run_call(&g);
    }
    g.C = p->pool->Cs; /* the step's C stays as the step left it */
    if (c->beta != 0.0f)
        for (int i = 0; i < c->M; i++) memcpy(g.C + (size_t)i * c->ldc, c->C + (size_t)i * c->ldc, (size_t)c->N * sizeof(float));
    if (v == COLD) evict(p->ev, p->ev_bytes);
    return run_call(&g);
}

/* The paired step's after function: each GEMM call's copies alone. */
static void pair_after(const vt_trace_call *c, void *ctx) {
    pair_ctx *p = ctx;
    if (c->kind != VT_TRACE_GEMM) return;
    shape *s = shape_of(p->st, p->shapes, &p->ns, c);
    if (!s) return;
    s->paired_flops += c->flops;
    s->paired_s += c->seconds;
    for (int k = 0; k < N_VARIANTS; k++) {
        int v = (k + p->turn) % N_VARIANTS;
        s->alone_s[v] += run_alone(c, v, p);
    }
    p->turn++;
}

/* Attention forward and backward alone on a fresh qkv (B, N, 3 H hd), as the model calls
 * it: seconds of each into fwd_s, bwd_s, of the third of three runs (the first two grow
 * the arena into one block and fault its pages in). */
static void attention_alone(const vit_step *st, double *fwd_s, double *bwd_s) {
    const vt_vit *m = &st->m;
    int N = (st->S / m->P) * (st->S / m->P) + 1, D = m->D;
    vt_arena arena;
    vt_arena_init(&arena, (size_t)1 << 20);
    vt_tape tape;
    vt_tape_init(&tape, &arena);
    tape.bf16 = st->bf16;
    vt_rng r;
    vt_rng_seed(&r, 3);
    size_t n = (size_t)st->B * N * 3 * D;
    float *x = vt_xmalloc(n * sizeof(float));
    fill_uniform(x, n, &r, 1.0f);
    for (int it = 0; it < 3; it++) {
        vt_arena_reset(&arena);
        vt_tape_clear(&tape);
        int64_t shape[3] = {st->B, N, 3 * D};
        vt_tensor *qkv = vt_tensor_new(&arena, 1, 3, shape);
        memcpy(qkv->data, x, n * sizeof(float));
        double t0 = bench_now();
        vt_tensor *o = vt_op_attention_qkv(&tape, qkv, m->H, 1.0f / sqrtf((float)m->hd), 0.0f,
                                           vt_attention_keep_probs(N, m->hd, st->bf16));
        *fwd_s = bench_now() - t0;
        memcpy(o->grad, x, (size_t)o->size * sizeof(float)); /* the upstream gradient: not attention's work */
        t0 = bench_now();
        vt_tape_replay(&tape);
        *bwd_s = bench_now() - t0;
    }
    free(x);
    vt_tape_free(&tape);
    vt_arena_free(&arena);
}

/* One round on nt threads: a traced step, attention alone, a paired step. */
static void round_at(vit_step *st, const vit_model *mc, int round, int nt, double peak, vt_trace_call *calls,
                     fresh_pool *pool, unsigned char *ev, size_t ev_bytes, const char *cpu) {
    omp_set_num_threads(nt);
    vt_trace_start(calls, MAX_CALLS, NULL, NULL);
    double t0 = bench_now();
    double loss = vit_step_run(st);
    double step_s = bench_now() - t0;
    int n = vt_trace_stop();
    if (n > MAX_CALLS) {
        fprintf(stderr, "bench_step: the step made %d traced calls, more than the %d kept\n", n, MAX_CALLS);
        exit(1);
    }
    static shape shapes[MAX_SHAPES];
    int ns = 0;
    double attn_s[2] = {0}, attn_flops[2] = {0};
    int attn_calls[2] = {0};
    for (int i = 0; i < n; i++) {
        const vt_trace_call *c = &calls[i];
        if (c->kind == VT_TRACE_GEMM) {
            shape *s = shape_of(st, shapes, &ns, c);
            if (s) s->calls++, s->flops += c->flops, s->seconds += c->seconds;
            continue;
        }
        int b = c->kind == VT_TRACE_ATTENTION_BWD;
        attn_s[b] += c->seconds, attn_flops[b] += c->flops, attn_calls[b]++;
    }
    pool_fit(pool, shapes, ns, calls, n);
    double attn_alone[2];
    attention_alone(st, &attn_alone[0], &attn_alone[1]);
    pair_ctx pc = {st, shapes, ns, round, pool, ev, ev_bytes};
    vt_trace_start(calls, MAX_CALLS, pair_after, &pc);
    vit_step_run(st);
    vt_trace_stop();
    ns = pc.ns;

    const char *prec = st->bf16 ? "bf16" : "fp32";
    char head[512];
    snprintf(head, sizeof head,
             "\"cpu\":\"%s\",\"isa\":\"%s\",\"gemm_ctx\":\"%s\",\"model\":\"%s\",\"precision\":\"%s\",\"batch\":%d,"
             "\"threads\":%d,\"round\":%d",
             cpu, vt_k.name, vt_gemm_ctx.name, mc->name, prec, st->B, nt, round);
    fprintf(stderr, "\nround %d, %d thread%s, peak %.1f GFLOP/s; GFLOP/s in the step, in the paired step, alone\n"
            "  %-10s %2s %2s %5s %5s %5s %4s %4s %4s %5s %8s %7s %7s %7s %7s %7s\n",
            round, nt, nt > 1 ? "s" : "", peak, "shape", "ta", "tb", "M", "N", "K", "b=0", "bias", "sums", "calls",
            "step s",
            "step", "paired", "warm", "cold", "fresh");
    double gemm_s = 0, gemm_flops = 0, at[N_VARIANTS] = {0};
    /* bench_kernels' 12 block products, each named once: a name's shapes with beta 0
     * and beta 1 together */
    struct { const char *name; double flops, s, fresh_flops, fresh_s, paired_s; } names[MAX_SHAPES];
    int n_names = 0;
    for (int j = 0; j < ns; j++) {
        const shape *s = &shapes[j];
        if (!s->calls || !s->paired_s) continue;
        double g_step = s->flops / s->seconds * 1e-9, g_paired = s->paired_flops / s->paired_s * 1e-9, g[N_VARIANTS];
        for (int v = 0; v < N_VARIANTS; v++) {
            g[v] = s->paired_flops / s->alone_s[v] * 1e-9;
            at[v] += s->seconds * s->alone_s[v] / s->paired_s;
        }
        gemm_s += s->seconds;
        gemm_flops += s->flops;
        printf("{\"bench\":\"step_gemm\",%s,\"shape\":\"%s\",\"ta\":%d,\"tb\":%d,\"M\":%d,\"N\":%d,\"K\":%d,"
               "\"beta0\":%d,\"bias\":%d,\"sums\":%d,\"calls\":%d,\"step_s\":%.4f,\"step_gflops\":%.1f,"
               "\"paired_step_gflops\":%.1f,\"warm_gflops\":%.1f,\"cold_gflops\":%.1f,\"fresh_gflops\":%.1f,"
               "\"peak_gflops\":%.1f}\n",
               head, s->name, s->ta, s->tb, s->M, s->N, s->K, s->beta0, s->bias, s->sums, s->calls, s->seconds,
               g_step, g_paired, g[WARM], g[COLD], g[FRESH], peak);
        fprintf(stderr, "  %-10s %2d %2d %5d %5d %5d %4d %4d %4d %5d %8.3f %7.1f %7.1f %7.1f %7.1f %7.1f\n", s->name,
                s->ta, s->tb, s->M, s->N, s->K, s->beta0, s->bias, s->sums, s->calls, s->seconds, g_step, g_paired,
                g[WARM], g[COLD], g[FRESH]);
        if (!strncmp(s->name, "patch", 5) || !strncmp(s->name, "head", 4) || !strcmp(s->name, "other")) continue;
        int k = 0;
        while (k < n_names && strcmp(names[k].name, s->name)) k++;
        if (k == n_names) names[n_names++] = (__typeof__(names[0])){s->name, 0, 0, 0, 0, 0};
        names[k].flops += s->flops, names[k].s += s->seconds;
        names[k].fresh_flops += s->paired_flops, names[k].fresh_s += s->alone_s[FRESH];
        names[k].paired_s += s->paired_s;
    }
    /* pct_same: the fresh rate of the traced step's phase of the host, the step's rate
     * times the paired fresh / in-step ratio, so MFU and it come from the same step */
    double pct_step = 0, pct_fresh = 0, pct_same = 0;
    for (int k = 0; k < n_names; k++) {
        double step_pct = 100.0 * names[k].flops / names[k].s * 1e-9 / peak;
        pct_step += step_pct;
        pct_fresh += 100.0 * names[k].fresh_flops / names[k].fresh_s * 1e-9 / peak;
        pct_same += step_pct * names[k].paired_s / names[k].fresh_s;
    }
    int n_block = n_names;
    double a_flops = attn_flops[0] + attn_flops[1], a_s = attn_s[0] + attn_s[1];
    for (int b = 0; b < 2; b++) {
        double per_call = attn_calls[b] ? attn_flops[b] / attn_calls[b] : 0;
        printf("{\"bench\":\"step_attention\",%s,\"pass\":\"%s\",\"calls\":%d,\"step_s\":%.4f,\"step_gflops\":%.1f,"
               "\"alone_s\":%.4f,\"alone_gflops\":%.1f,\"peak_gflops\":%.1f}\n",
               head, b ? "bwd" : "fwd", attn_calls[b], attn_s[b], attn_flops[b] / attn_s[b] * 1e-9, attn_alone[b],
               per_call / attn_alone[b] * 1e-9, peak);
        fprintf(stderr, "  attention %s: %d calls, %.3f s in the step, %.1f GFLOP/s; alone %.1f GFLOP/s\n",
                b ? "bwd" : "fwd", attn_calls[b], attn_s[b], attn_flops[b] / attn_s[b] * 1e-9,
                per_call / attn_alone[b] * 1e-9);
    }
    double flops = vit_step_flops(st) * st->B, mfu = flops / step_s * 1e-9 / peak;
    double other_s = step_s - gemm_s - a_s;
    printf("{\"bench\":\"step_summary\",%s,\"loss\":%.4f,\"step_s\":%.4f,\"img_per_s\":%.3f,\"mfu\":%.4f,"
           "\"peak_gflops\":%.1f,\"gemm_s\":%.4f,\"gemm_gflops\":%.1f,\"gemm_pct_peak\":%.1f,\"attention_s\":%.4f,"
           "\"attention_gflops\":%.1f,\"other_s\":%.4f,\"gemm_s_at_warm\":%.4f,\"gemm_s_at_cold\":%.4f,"
           "\"gemm_s_at_fresh\":%.4f,\"block_shapes\":%d,\"block_mean_pct_peak_step\":%.1f,"
           "\"block_mean_pct_peak_fresh\":%.1f,\"block_mean_pct_peak_fresh_step_phase\":%.1f,\"gap_points\":%.1f}\n",
           head, loss, step_s, st->B / step_s, mfu, peak, gemm_s, gemm_flops / gemm_s * 1e-9,
           100.0 * gemm_flops / gemm_s * 1e-9 / peak, a_s, a_flops / a_s * 1e-9, other_s, at[WARM], at[COLD],
           at[FRESH], n_block, n_block ? pct_step / n_block : 0.0, n_block ? pct_fresh / n_block : 0.0,
           n_block ? pct_same / n_block : 0.0, n_block ? pct_same / n_block - 100.0 * mfu : 0.0);
    fprintf(stderr,
            "  step %.3f s (%.3f img/s, MFU %.1f%%): GEMMs %.3f s (%.1f%% of peak), attention %.3f s, the rest %.3f s\n"
            "  the GEMMs at their alone rates (paired): warm %.3f s, cold %.3f s, fresh %.3f s\n"
            "  mean %% of peak of the %d block shapes (bench_kernels' summary): in the step %.1f%%, fresh %.1f%%,\n"
            "  fresh in the step's phase %.1f%%: MFU %.1f points below it\n",
            step_s, st->B / step_s, 100.0 * mfu, gemm_s, 100.0 * gemm_flops / gemm_s * 1e-9 / peak, a_s, other_s,
            at[WARM], at[COLD], at[FRESH], n_block, n_block ? pct_step / n_block : 0.0,
            n_block ? pct_fresh / n_block : 0.0, n_block ? pct_same / n_block : 0.0,
            n_block ? pct_same / n_block - 100.0 * mfu : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *usage = "usage: bench_step [model: vit_s16_224 (default), vit_b16_224, vit_ti4_32 [rounds 1-20 "
                        "(default 1) [threads: 1, 2 or 1,2 (default)]]]";
    int ci = 0, rounds = 1, nthr = 2, thr[2] = {1, 2};
    vt_alloc_policy(); /* the vitrain command's */
    if (argc > 4) { fprintf(stderr, "%s\n", usage); return 2; }
    if (argc > 1) {
        for (ci = 0; ci < N_CASES && strcmp(argv[1], cases[ci].name); ci++) {}
        if (ci == N_CASES) { fprintf(stderr, "%s (got model \"%s\")\n", usage, argv[1]); return 2; }
    }
    if (argc > 2) {
        char *end;
        long v = strtol(argv[2], &end, 10);
        if (*end || end == argv[2] || v < 1 || v > 20) { fprintf(stderr, "%s (got rounds \"%s\")\n", usage, argv[2]); return 2; }
        rounds = (int)v;
    }
    if (argc > 3) {
        if (!strcmp(argv[3], "1") || !strcmp(argv[3], "2")) nthr = 1, thr[0] = atoi(argv[3]);
        else if (strcmp(argv[3], "1,2")) { fprintf(stderr, "%s (got threads \"%s\")\n", usage, argv[3]); return 2; }
    }
    const char *pe = getenv("VT_BENCH_PRECISION");
    if (pe && *pe && strcmp(pe, "fp32") && strcmp(pe, "bf16")) {
        fprintf(stderr, "bench_step: VT_BENCH_PRECISION=%s: expected fp32 or bf16\n", pe);
        return 2;
    }
    int bf16 = pe && !strcmp(pe, "bf16");
    char err[256];
    if (vt_kernels_init(err, sizeof err) != 0) { fprintf(stderr, "%s\n", err); return 1; }
    if (bf16 && vt_k.isa < VT_ISA_AVX512BF16) {
        fprintf(stderr, "bench_step: the %s level has no bf16 instructions\n", vt_k.name);
        return 2;
    }
    const int avx512 = vt_k.isa >= VT_ISA_AVX512;
    char cpu[192];
    bench_cpu(cpu, sizeof cpu);
    const vit_model *mc = &cases[ci];
    vit_step st;
    if (vit_step_init(&st, mc->preset, mc->img, mc->patch, mc->batch, mc->classes, 1, bf16)) return 1;
    fprintf(stderr, "bench_step, %s (%s kernels, GEMM context %s), %s %s batch %d\n", cpu, vt_k.name,
            vt_gemm_ctx.name, mc->name, bf16 ? "bf16" : "fp32", mc->batch);
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    size_t ev_bytes = l3 > 0 ? 2 * (size_t)l3 : 0;
    if (ev_bytes < ((size_t)64 << 20)) ev_bytes = (size_t)64 << 20;
    if (ev_bytes > ((size_t)1 << 30)) ev_bytes = (size_t)1 << 30;
    unsigned char *ev = vt_aligned_alloc(ev_bytes);
    vt_trace_call *calls = malloc(MAX_CALLS * sizeof *calls);
    if (!ev || !calls) { fprintf(stderr, "bench_step: out of memory\n"); return 1; }
    fresh_pool pool = {0};
    double peak[3] = {0};
    for (int ti = 0; ti < nthr; ti++) { /* warm-up: the arena settles, each thread's buffers grow */
        omp_set_num_threads(thr[ti]);
        for (int w = ti; w < 2; w++) vit_step_run(&st);
    }
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nthr; k++) {
            int nt = thr[(k + r) % nthr];
            double pk = bf16 ? bf16_peak_gflops(nt) : fma_peak_gflops(avx512, nt);
            if (pk > peak[nt]) peak[nt] = pk;
            printf("{\"bench\":\"%s\",\"cpu\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"round\":%d,\"gflops\":%.2f}\n",
                   bf16 ? "bf16_peak" : "fma_peak", cpu, bf16 ? "avx512bf16" : avx512 ? "avx512" : "avx2", nt, r, pk);
            round_at(&st, mc, r, nt, peak[nt], calls, &pool, ev, ev_bytes, cpu);
        }
    free(calls);
    free(ev);
    free(pool.A); free(pool.B); free(pool.C); free(pool.B16); free(pool.Cs);
    vit_step_free(&st);
    return 0;
}
