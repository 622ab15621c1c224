/* gemm_tune.c - the GEMM blocking chosen by measurement (contract in gemm_tune.h). */
#include "gemm_tune.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_spec.h"
#include "ops/par.h"

int vt_tune_shapes(const vt_config *cfg, int ranks, vt_tune_shape *out) {
    const vt_model_config *m = &cfg->model;
    const int D = m->width, hidden = vt_model_mlp_hidden(m), g = m->img_size / m->patch_size;
    const int N = g * g + 1; /* the patch tokens and the class token */
    const int B = cfg->train.batch_size / (ranks > 0 ? ranks : 1), rows = N * (B > 0 ? B : 1);
    const struct {
        const char *name;
        int out, in;
    } layers[] = {{"qkv", 3 * D, D}, {"proj", D, D}, {"fc1", hidden, D}, {"fc2", D, hidden}};
    int n = 0;
    for (int l = 0; l < 4; l++) {
        const int o = layers[l].out, i = layers[l].in;
        const vt_tune_shape p[3] = {{"", 0, 1, rows, o, i, 0, 0.0f}, /* Y = X W^T */
                                    {"", 0, 0, rows, i, o, 0, 0.0f}, /* dX = dY W */
                                    {"", 1, 0, o, i, rows, 0, 1.0f}}; /* dW += dY^T X */
        static const char *const pass[3] = {"fwd", "dX", "dW"};
        for (int k = 0; k < 3; k++, n++) {
            out[n] = p[k];
            snprintf(out[n].name, sizeof out[n].name, "%s/%s", layers[l].name, pass[k]);
        }
    }
    if (m->attention == VT_ATTN_SOFTMAX) {
        const int hd = D / m->heads, bh = (B > 0 ? B : 1) * m->heads;
        const vt_tune_shape a[3] = {{"attn/qk", 0, 1, N, N, hd, bh, 0.0f},  /* S = Q K^T */
                                    {"attn/pv", 0, 0, N, hd, N, bh, 0.0f},  /* O = P V */
                                    {"attn/dv", 1, 0, N, hd, N, bh, 1.0f}}; /* dV += P^T dO */
        for (int k = 0; k < 3; k++) out[n++] = a[k];
    }
    return n;
}

void vt_tune_shapes_text(const vt_tune_shape *s, int n, char *buf, size_t len) {
    size_t o = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < n && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%s %d %d %d %d %d %d", i ? ";" : "", s[i].name, s[i].ta, s[i].tb,
                              s[i].M, s[i].N, s[i].K, s[i].batch);
}

double vt_tune_linear_flops(const vt_tune_shape *s, int n) {
    double f = 0.0;
    for (int i = 0; i < n; i++)
        if (!s[i].batch) f += 2.0 * s[i].M * (double)s[i].N * s[i].K;
    return f;
}

/* ---- the search ------------------------------------------------------------------ */

/* The knobs, in the order the search visits them. */
enum { KNOB_TILE, KNOB_KC, KNOB_KC_T, KNOB_MC, KNOB_NC, KNOB_M_ONE_PASS, KNOB_NC_ONE_PASS, KNOB_ONE_PASS_MIN_N,
       N_KNOBS };
static const char *const knob_names[N_KNOBS] = {"tile", "kc", "kc_t", "mc", "nc", "m_one_pass", "nc_one_pass",
                                                "one_pass_min_n"};
#define MAX_CANDS 8

/* The candidate values of each knob (the tile's: gemm_tiles.h's shapes). m_one_pass
 * stays below VT_TUNE_ROWS (gemm_tune.h). */
static const int kc_values[] = {256, 384, 512, 768, 1024};
static const int kc_t_values[] = {128, 192, 256, 384};
static const int mc_values[] = {112, 196, 280, 392, 560};
static const int nc_values[] = {1536, 3072};
static const int m_one_pass_values[] = {392, 784};
static const int nc_one_pass_values[] = {128, 256, 384, 512};
static const int one_pass_min_n_values[] = {256, 384, 768, 1 << 16};
#define COUNT(a) (int)(sizeof(a) / sizeof(a)[0])

static vt_gemm_blocking_f32 *level_blocking(vt_gemm_context *c, vt_isa level) {
    return level >= VT_ISA_AVX512 ? &c->avx512 : &c->avx2;
}

/* Whether c keeps every rule of a context (vt_gemm_context_parse checks them). */
static int valid(const vt_gemm_context *c) {
    char spec[1024], err[256];
    vt_gemm_context back;
    return vt_gemm_context_format(c, spec, sizeof spec) == 0 &&
           vt_gemm_context_parse(spec, c, &back, err, sizeof err) == 0;
}

static int round_to(int v, int m) {
    int r = (v + m / 2) / m * m;
    return r < m ? m : r;
}

/* Whether knob k's value matters to shape s (which products a candidate is timed on). */
static int affects(int k, const vt_tune_shape *s) {
    switch (k) {
    case KNOB_TILE: return 1;
    case KNOB_KC: return !s->batch && !s->ta;
    case KNOB_KC_T: return !s->batch && s->ta;
    case KNOB_MC: return !s->batch && s->M >= VT_TUNE_ROWS; /* more rows than an M block */
    case KNOB_NC: return !s->batch && !s->ta && s->N > 1536; /* more columns than an N block */
    default: return !s->batch && s->M < VT_TUNE_ROWS; /* the one-pass order: M <= m_one_pass */
    }
}

/* The candidates of knob k around inc (inc first); returns their count. */
static int candidates(int k, const vt_gemm_context *inc, vt_isa level, vt_gemm_context *out) {
    int n = 0;
    out[n++] = *inc;
    const vt_gemm_blocking_f32 *b0 = level_blocking((vt_gemm_context *)inc, level);
    const int *vals = NULL;
    int nv = 0, tiles[MAX_CANDS][2];
    switch (k) {
    case KNOB_TILE: nv = vt_gemm_tiles(level, tiles, MAX_CANDS); break;
    case KNOB_KC: vals = kc_values, nv = COUNT(kc_values); break;
    case KNOB_KC_T: vals = kc_t_values, nv = COUNT(kc_t_values); break;
    case KNOB_MC: vals = mc_values, nv = COUNT(mc_values); break;
    case KNOB_NC: vals = nc_values, nv = COUNT(nc_values); break;
    case KNOB_M_ONE_PASS: vals = m_one_pass_values, nv = COUNT(m_one_pass_values); break;
    case KNOB_NC_ONE_PASS: vals = nc_one_pass_values, nv = COUNT(nc_one_pass_values); break;
    default: vals = one_pass_min_n_values, nv = COUNT(one_pass_min_n_values); break;
    }
    for (int i = 0; i < nv && n < MAX_CANDS; i++) {
        vt_gemm_context c = *inc;
        vt_gemm_blocking_f32 *b = level_blocking(&c, level);
        switch (k) {
        case KNOB_TILE: /* the blocks follow the tile: the nearest multiples of it */
            b->mr = tiles[i][0];
            b->nr = tiles[i][1];
            b->mc = round_to(b0->mc, b->mr);
            while (b->mc > b->m_one_pass && b->mc > b->mr) b->mc -= b->mr;
            b->nc = round_to(b0->nc, b->nr);
            b->nc_one_pass = round_to(b0->nc_one_pass, b->nr);
            while (b->nc_one_pass > b->nc && b->nc_one_pass > b->nr) b->nc_one_pass -= b->nr;
            break;
        case KNOB_KC: b->kc = vals[i]; break;
        case KNOB_KC_T: b->kc_t = vals[i]; break;
        case KNOB_MC: b->mc = round_to(vals[i], b->mr); break;
        case KNOB_NC: b->nc = round_to(vals[i], b->nr); break;
        case KNOB_M_ONE_PASS: b->m_one_pass = vals[i]; break;
        case KNOB_NC_ONE_PASS: b->nc_one_pass = round_to(vals[i], b->nr); break;
        default: b->one_pass_min_n = vals[i]; break;
        }
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= !memcmp(level_blocking(&out[j], level), b, sizeof *b);
        if (!dup && valid(&c)) out[n++] = c;
    }
    return n;
}

/* Each of cands[0..n) timed on mask in VT_TUNE_ROUNDS alternating rounds; best of each. */
static void time_rounds(const vt_gemm_context *cands, int n, unsigned mask, vt_tune_measure_fn measure, void *user,
                        double *best, int *timed) {
    for (int i = 0; i < n; i++) best[i] = 1e300;
    for (int r = 0; r < VT_TUNE_ROUNDS; r++)
        for (int j = 0; j < n; j++) {
            int i = (j + r) % n;
            double t = measure(user, &cands[i], mask);
            (*timed)++;
            if (t < best[i]) best[i] = t;
        }
}

/* The value of knob k in b, as text. */
static void knob_value(int k, const vt_gemm_blocking_f32 *b, char *buf, size_t len) {
    const int v[N_KNOBS] = {0, b->kc, b->kc_t, b->mc, b->nc, b->m_one_pass, b->nc_one_pass, b->one_pass_min_n};
    if (k == KNOB_TILE) snprintf(buf, len, "%dx%d", b->mr, b->nr);
    else snprintf(buf, len, "%d", v[k]);
}

void vt_tune_search(const vt_gemm_context *start, vt_isa level, const vt_tune_shape *s, int n,
                    vt_tune_measure_fn measure, void *user, vt_tune_result *r) {
    memset(r, 0, sizeof *r);
    r->best = *start;
    const char *lname = level >= VT_ISA_AVX512 ? "avx512" : "avx2";
    unsigned all = n >= 32 ? ~0u : (1u << n) - 1;
    size_t used = 0;
    measure(user, start, all); /* a warm-up: first touches, thread start-up */
    r->timed++;
    for (int k = 0; k < N_KNOBS; k++) {
        unsigned mask = 0;
        for (int i = 0; i < n && i < 32; i++)
            if (affects(k, &s[i])) mask |= 1u << i;
        vt_gemm_context cands[MAX_CANDS];
        int nc = candidates(k, &r->best, level, cands);
        if (!mask || nc < 2) continue;
        double best[MAX_CANDS];
        time_rounds(cands, nc, mask, measure, user, best, &r->timed);
        int win = 0;
        for (int i = 1; i < nc; i++)
            if (best[i] < best[win]) win = i;
        if (win == 0 || !(best[win] < best[0] * (1.0 - VT_TUNE_MARGIN))) continue;
        char from[32], to[32];
        knob_value(k, level_blocking(&r->best, level), from, sizeof from);
        knob_value(k, level_blocking(&cands[win], level), to, sizeof to);
        if (used < sizeof r->changes)
            used += (size_t)snprintf(r->changes + used, sizeof r->changes - used, "%s%s.%s %s -> %s (%+.1f%%)",
                                     used ? ", " : "", lname, knob_names[k], from, to,
                                     100.0 * (best[win] / best[0] - 1.0));
        r->best = cands[win];
    }
    /* the start and the result on every product: the result only if faster there too */
    vt_gemm_context pair[2] = {*start, r->best};
    double t[2] = {0.0, 0.0};
    if (memcmp(level_blocking(&pair[0], level), level_blocking(&pair[1], level), sizeof(vt_gemm_blocking_f32))) {
        time_rounds(pair, 2, all, measure, user, t, &r->timed);
        if (!(t[1] < t[0])) {
            r->best = *start;
            t[1] = t[0];
            r->changes[0] = '\0';
        }
    } else {
        t[0] = t[1] = measure(user, start, all);
        r->timed++;
    }
    r->t_start = t[0];
    r->t_best = t[1];
    r->changed = memcmp(level_blocking(&r->best, level), level_blocking((vt_gemm_context *)start, level),
                        sizeof(vt_gemm_blocking_f32)) != 0;
}

/* ---- the timing on this CPU -------------------------------------------------------- */

typedef struct {
    const vt_tune_shape *s; /* shortened (gemm_tune.h) */
    int n;
    float *a, *b, *c; /* operands big enough for every shape (batch products side by side) */
} bench;

static double measure_cpu(void *user, const vt_gemm_context *ctx, unsigned mask) {
    bench *bn = user;
    vt_gemm_context_set(ctx);
    double t0 = omp_get_wtime();
    for (int i = 0; i < bn->n; i++) {
        if (!(mask >> i & 1)) continue;
        const vt_tune_shape *s = &bn->s[i];
        const int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N;
        if (!s->batch) {
            vt_gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, bn->a, lda, bn->b, ldb, s->beta, bn->c, s->N);
            continue;
        }
        const size_t sa = (size_t)s->M * s->K, sb = (size_t)s->K * s->N, sc = (size_t)s->M * s->N;
        const size_t wf = vt_k.gemm_work_floats(s->M, s->N, s->K);
        #pragma omp parallel for schedule(static)
        for (int j = 0; j < s->batch; j++)
            vt_k.gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, bn->a + j * sa, lda, bn->b + j * sb, ldb, s->beta,
                      bn->c + j * sc, s->N, vt_gemm_workspace(wf));
    }
    return omp_get_wtime() - t0;
}

vt_status vt_tune_run(const vt_gemm_context *start, const vt_tune_shape *s, int n, vt_tune_result *r) {
    vt_tune_shape sh[VT_TUNE_MAX_SHAPES];
    const int threads = omp_get_max_threads();
    size_t na = 1, nb = 1, ncf = 1;
    for (int i = 0; i < n; i++) {
        sh[i] = s[i];
        if (!sh[i].batch && !sh[i].ta && sh[i].M > VT_TUNE_ROWS) sh[i].M = VT_TUNE_ROWS;
        if (!sh[i].batch && sh[i].ta && sh[i].K > VT_TUNE_ROWS) sh[i].K = VT_TUNE_ROWS;
        if (sh[i].batch > 8 * threads) sh[i].batch = 8 * threads;
        const size_t copies = sh[i].batch ? (size_t)sh[i].batch : 1;
        if ((size_t)sh[i].M * sh[i].K * copies > na) na = (size_t)sh[i].M * sh[i].K * copies;
        if ((size_t)sh[i].K * sh[i].N * copies > nb) nb = (size_t)sh[i].K * sh[i].N * copies;
        if ((size_t)sh[i].M * sh[i].N * copies > ncf) ncf = (size_t)sh[i].M * sh[i].N * copies;
    }
    bench bn = {sh, n, vt_aligned_alloc(na * sizeof(float)), vt_aligned_alloc(nb * sizeof(float)),
                vt_aligned_alloc(ncf * sizeof(float))};
    if (!bn.a || !bn.b || !bn.c) {
        free(bn.a);
        free(bn.b);
        free(bn.c);
        return vt_fail(VT_ERR_RUNTIME, "out of memory: the GEMM tuning's operands (%zu floats)", na + nb + ncf);
    }
    for (size_t i = 0; i < na; i++) bn.a[i] = (float)((i * 2654435761u) % 1999) / 1999.0f - 0.5f;
    for (size_t i = 0; i < nb; i++) bn.b[i] = (float)((i * 40503u) % 997) / 997.0f - 0.5f;
    memset(bn.c, 0, ncf * sizeof(float));
    const vt_gemm_context active = vt_gemm_ctx;
    vt_tune_search(start, vt_k.isa, sh, n, measure_cpu, &bn, r);
    vt_gemm_context_set(&active);
    free(bn.a);
    free(bn.b);
    free(bn.c);
    return VT_OK;
}
