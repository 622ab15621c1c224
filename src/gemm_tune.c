/* gemm_tune.c - the GEMM blocking chosen by measurement (contract in gemm_tune.h). */
#include "gemm_tune.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_spec.h"
#include "ops/ops.h"
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

/* ---- the target ------------------------------------------------------------------ */

vt_tune_target vt_tune_target_of(const vt_config *cfg) {
    vt_tune_target t = {vt_k.isa, cfg->train.precision == VT_PRECISION_BF16, -1};
    if (t.bf16) t.path = vt_kernels_bf16_path();
    return t;
}

const char *vt_tune_target_name(const vt_tune_target *t) {
    static const char *const names[VT_BF16_PATH_COUNT] = {[VT_BF16_AMX] = "bf16-amx", [VT_BF16_DPBF16] = "bf16-dpbf16",
                                                          [VT_BF16_FMA] = "bf16-fma"};
    if (!t->bf16) return "fp32";
    return t->path >= 0 && t->path < VT_BF16_PATH_COUNT ? names[t->path] : "bf16";
}

/* Whether t's products run on a bf16 path's own blocking (amx, dpbf16), not the fp32 one. */
static int bf16_blocking(const vt_tune_target *t) {
    return t->bf16 && (t->path == VT_BF16_AMX || t->path == VT_BF16_DPBF16);
}

const char *vt_tune_blocking_name(const vt_tune_target *t) {
    if (bf16_blocking(t)) return t->path == VT_BF16_AMX ? "amx" : "avx512bf16";
    return t->level >= VT_ISA_AVX512 ? "avx512" : "avx2";
}

/* t's blocking in c: where it is and its size (what the search compares). */
static void *blocking_in(const vt_gemm_context *c, const vt_tune_target *t, size_t *size) {
    vt_gemm_context *m = (vt_gemm_context *)c;
    if (bf16_blocking(t)) {
        *size = sizeof(vt_gemm_blocking_bf16);
        return t->path == VT_BF16_AMX ? (void *)&m->amx : (void *)&m->avx512bf16;
    }
    *size = sizeof(vt_gemm_blocking_f32);
    return t->level >= VT_ISA_AVX512 ? (void *)&m->avx512 : (void *)&m->avx2;
}

/* Whether a and b hold the same blocking of t. */
static int same_blocking(const vt_gemm_context *a, const vt_gemm_context *b, const vt_tune_target *t) {
    size_t n;
    const void *x = blocking_in(a, t, &n), *y = blocking_in(b, t, &n);
    return !memcmp(x, y, n);
}

/* ---- the knobs --------------------------------------------------------------------- */

/* The products a knob affects (which products its candidates are timed on). */
typedef int (*affects_fn)(const vt_tune_shape *s);

/* A knob: a field of the blocking (VT_GEMM_CONTEXT's name after the blocking's; "tile":
 * the fp32 register tile, mr x nr), its candidate values (rounded to the field's
 * multiple) and the products it affects. */
typedef struct {
    const char *field;
    const int *values;
    int nv;
    affects_fn affects;
} knob;
#define MAX_CANDS 8
#define COUNT(a) (int)(sizeof(a) / sizeof(a)[0])

/* The fp32 blockings' candidates (the tile's: gemm_tiles.h's shapes). m_one_pass stays
 * below VT_TUNE_ROWS (gemm_tune.h). */
static const int kc_values[] = {256, 384, 512, 768, 1024};
static const int kc_t_values[] = {128, 192, 256, 384};
static const int mc_values[] = {112, 196, 280, 392, 560};
static const int nc_values[] = {1536, 3072};
static const int m_one_pass_values[] = {392, 784};
static const int nc_one_pass_values[] = {128, 256, 384, 512};
static const int one_pass_min_n_values[] = {256, 384, 768, 1 << 16};

static int any_product(const vt_tune_shape *s) { return s != NULL; }
static int rows_as_stored(const vt_tune_shape *s) { return !s->batch && !s->ta; }
static int rows_transposed(const vt_tune_shape *s) { return !s->batch && s->ta; }
static int more_rows_than_a_block(const vt_tune_shape *s) { return !s->batch && s->M >= VT_TUNE_ROWS; }
static int more_columns_than_a_block(const vt_tune_shape *s) { return !s->batch && !s->ta && s->N > 1536; }
static int one_pass_order(const vt_tune_shape *s) { return !s->batch && s->M < VT_TUNE_ROWS; } /* M <= m_one_pass */

static const knob f32_knobs[] = {
    {"tile", NULL, 0, any_product},
    {"kc", kc_values, COUNT(kc_values), rows_as_stored},
    {"kc_t", kc_t_values, COUNT(kc_t_values), rows_transposed},
    {"mc", mc_values, COUNT(mc_values), more_rows_than_a_block},
    {"nc", nc_values, COUNT(nc_values), more_columns_than_a_block},
    {"m_one_pass", m_one_pass_values, COUNT(m_one_pass_values), one_pass_order},
    {"nc_one_pass", nc_one_pass_values, COUNT(nc_one_pass_values), one_pass_order},
    {"one_pass_min_n", one_pass_min_n_values, COUNT(one_pass_min_n_values), one_pass_order},
};

/* The bf16 blockings' candidates (amx and avx512bf16 alike, each rounded to its own
 * multiples); a knob affects the products with a side longer than its shortest
 * candidate (attention's per-head products: only mc). */
static const int bf16_kc_values[] = {512, 768, 1024, 1536, 2048};
static const int bf16_mc_values[] = {128, 192, 256, 384, 512};
static const int bf16_nc_values[] = {768, 1536, 3072};

static int k_beyond_a_block(const vt_tune_shape *s) { return s->K > bf16_kc_values[0]; }
static int m_beyond_a_block(const vt_tune_shape *s) { return s->M > bf16_mc_values[0]; }
static int n_beyond_a_block(const vt_tune_shape *s) { return s->N > bf16_nc_values[0]; }

static const knob bf16_knobs[] = {
    {"kc", bf16_kc_values, COUNT(bf16_kc_values), k_beyond_a_block},
    {"mc", bf16_mc_values, COUNT(bf16_mc_values), m_beyond_a_block},
    {"nc", bf16_nc_values, COUNT(bf16_nc_values), n_beyond_a_block},
};

/* t's knobs, in the order the search visits them; *n their count. */
static const knob *knobs_of(const vt_tune_target *t, int *n) {
    *n = bf16_blocking(t) ? COUNT(bf16_knobs) : COUNT(f32_knobs);
    return bf16_blocking(t) ? bf16_knobs : f32_knobs;
}

/* The K a weight gradient is timed at (gemm_tune.h). */
static int weight_gradient_k(const vt_tune_target *t) {
    return bf16_blocking(t) ? 2 * bf16_kc_values[COUNT(bf16_kc_values) - 1] : VT_TUNE_ROWS;
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

/* The fp32 tile's candidates: each of the level's shapes, the blocks following it (the
 * nearest multiples of it). Appends to out[*n] (up to MAX_CANDS). */
static void tile_candidates(const vt_gemm_context *inc, const vt_tune_target *t, vt_gemm_context *out, int *n) {
    int tiles[MAX_CANDS][2], nt = vt_gemm_tiles(t->level, tiles, MAX_CANDS);
    size_t size;
    const vt_gemm_blocking_f32 *b0 = blocking_in(inc, t, &size);
    for (int i = 0; i < nt && *n < MAX_CANDS; i++) {
        vt_gemm_context c = *inc;
        vt_gemm_blocking_f32 *b = blocking_in(&c, t, &size);
        b->mr = tiles[i][0];
        b->nr = tiles[i][1];
        b->mc = round_to(b0->mc, b->mr);
        while (b->mc > b->m_one_pass && b->mc > b->mr) b->mc -= b->mr;
        b->nc = round_to(b0->nc, b->nr);
        b->nc_one_pass = round_to(b0->nc_one_pass, b->nr);
        while (b->nc_one_pass > b->nc && b->nc_one_pass > b->nr) b->nc_one_pass -= b->nr;
        int dup = 0;
        for (int j = 0; j < *n; j++) dup |= same_blocking(&out[j], &c, t);
        if (!dup && valid(&c)) out[(*n)++] = c;
    }
}

/* The candidates of knob k around inc (inc first); returns their count. A value is set
 * as VT_GEMM_CONTEXT would set it, so a candidate that breaks a rule is left out. */
static int candidates(const knob *k, const vt_gemm_context *inc, const vt_tune_target *t, vt_gemm_context *out) {
    int n = 0;
    out[n++] = *inc;
    if (!k->values) {
        tile_candidates(inc, t, out, &n);
        return n;
    }
    char key[64], err[256];
    snprintf(key, sizeof key, "%s.%s", vt_tune_blocking_name(t), k->field);
    for (int i = 0; i < k->nv && n < MAX_CANDS; i++) {
        int now, multiple;
        VT_ASSERT(vt_gemm_context_field(inc, key, &now, &multiple) == 0, "GEMM tuning: no field %s", key);
        char spec[96];
        snprintf(spec, sizeof spec, "%s=%d", key, round_to(k->values[i], multiple));
        vt_gemm_context c;
        if (vt_gemm_context_parse(spec, inc, &c, err, sizeof err)) continue;
        snprintf(c.name, sizeof c.name, "%s", inc->name);
        int dup = 0;
        for (int j = 0; j < n; j++) dup |= same_blocking(&out[j], &c, t);
        if (!dup) out[n++] = c;
    }
    return n;
}

/* The value of knob k in c, as text. */
static void knob_value(const knob *k, const vt_gemm_context *c, const vt_tune_target *t, char *buf, size_t len) {
    size_t size;
    if (!k->values) {
        const vt_gemm_blocking_f32 *b = blocking_in(c, t, &size);
        snprintf(buf, len, "%dx%d", b->mr, b->nr);
        return;
    }
    char key[64];
    int v = 0, multiple;
    snprintf(key, sizeof key, "%s.%s", vt_tune_blocking_name(t), k->field);
    vt_gemm_context_field(c, key, &v, &multiple);
    snprintf(buf, len, "%d", v);
}

/* ---- the search ------------------------------------------------------------------ */

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

void vt_tune_search(const vt_gemm_context *start, const vt_tune_target *t, const vt_tune_shape *s, int n,
                    vt_tune_measure_fn measure, void *user, vt_tune_result *r) {
    memset(r, 0, sizeof *r);
    r->best = *start;
    const char *bname = vt_tune_blocking_name(t);
    unsigned all = n >= 32 ? ~0u : (1u << n) - 1;
    size_t used = 0;
    measure(user, start, all); /* a warm-up: first touches, thread start-up */
    r->timed++;
    int nk;
    const knob *knobs = knobs_of(t, &nk);
    for (int k = 0; k < nk; k++) {
        unsigned mask = 0;
        for (int i = 0; i < n && i < 32; i++)
            if (knobs[k].affects(&s[i])) mask |= 1u << i;
        vt_gemm_context cands[MAX_CANDS];
        int nc = candidates(&knobs[k], &r->best, t, cands);
        if (!mask || nc < 2) continue;
        double best[MAX_CANDS];
        time_rounds(cands, nc, mask, measure, user, best, &r->timed);
        int win = 0;
        for (int i = 1; i < nc; i++)
            if (best[i] < best[win]) win = i;
        if (win == 0 || !(best[win] < best[0] * (1.0 - VT_TUNE_MARGIN))) continue;
        char from[32], to[32];
        knob_value(&knobs[k], &r->best, t, from, sizeof from);
        knob_value(&knobs[k], &cands[win], t, to, sizeof to);
        if (used < sizeof r->changes)
            used += (size_t)snprintf(r->changes + used, sizeof r->changes - used, "%s%s.%s %s -> %s (%+.1f%%)",
                                     used ? ", " : "", bname, knobs[k].field, from, to,
                                     100.0 * (best[win] / best[0] - 1.0));
        r->best = cands[win];
    }
    /* the start and the result on every product: the result only if faster there too */
    vt_gemm_context pair[2] = {*start, r->best};
    double tm[2] = {0.0, 0.0};
    if (!same_blocking(&pair[0], &pair[1], t)) {
        time_rounds(pair, 2, all, measure, user, tm, &r->timed);
        if (!(tm[1] < tm[0])) {
            r->best = *start;
            tm[1] = tm[0];
            r->changes[0] = '\0';
        }
    } else {
        tm[0] = tm[1] = measure(user, start, all);
        r->timed++;
    }
    r->t_start = tm[0];
    r->t_best = tm[1];
    r->changed = !same_blocking(&r->best, start, t);
}

/* ---- the timing on this CPU -------------------------------------------------------- */

typedef struct {
    const vt_tune_shape *s; /* shortened (gemm_tune.h) */
    int n;
    int bf16, tiles; /* bf16 products; attention's through vt_k.gemm_bf16 (the amx and dpbf16 paths) */
    float *a, *b, *c; /* operands big enough for every shape (batch products side by side) */
    vt_bf16 *b16;     /* b rounded: the weights' bf16 copies */
} bench;

/* The leading dimensions of shape s's operands as stored: attention's score blocks on
 * the gemm_bf16 paths have padded rows (vt_attention_score_ld), so there every row of a
 * per-head product is. */
static void shape_lds(const bench *bn, const vt_tune_shape *s, int ld[3]) {
    ld[0] = s->ta ? s->M : s->K;
    ld[1] = s->tb ? s->K : s->N;
    ld[2] = s->N;
    for (int i = 0; i < 3 && s->batch; i++) ld[i] = vt_attention_score_ld(ld[i], bn->tiles);
}

/* The floats each of A, B and C of shape s take, every copy of a batch product. */
static void shape_floats(const bench *bn, const vt_tune_shape *s, size_t f[3]) {
    int ld[3];
    shape_lds(bn, s, ld);
    const size_t copies = s->batch ? (size_t)s->batch : 1;
    f[0] = (size_t)(s->ta ? s->K : s->M) * ld[0] * copies;
    f[1] = (size_t)(s->tb ? s->N : s->K) * ld[1] * copies;
    f[2] = (size_t)s->M * ld[2] * copies;
}

static double measure_cpu(void *user, const vt_gemm_context *ctx, unsigned mask) {
    bench *bn = user;
    vt_gemm_context_set(ctx);
    double t0 = omp_get_wtime();
    for (int i = 0; i < bn->n; i++) {
        if (!(mask >> i & 1)) continue;
        const vt_tune_shape *s = &bn->s[i];
        int ld[3];
        shape_lds(bn, s, ld);
        if (!s->batch) { /* a linear layer's product; in bf16 the weight (op(B) but in dW) from its copy */
            vt_gemm_prec(bn->bf16, s->ta, s->tb, s->M, s->N, s->K, 1.0f, bn->a, ld[0], bn->b,
                         bn->bf16 && !s->ta ? bn->b16 : NULL, ld[1], s->beta, NULL, bn->c, ld[2]);
            continue;
        }
        size_t f[3];
        shape_floats(bn, s, f);
        const size_t sa = f[0] / s->batch, sb = f[1] / s->batch, sc = f[2] / s->batch;
        float *work = vt_gemm_workspace(bn->tiles ? vt_k.gemm_bf16_work_floats(s->M, s->N, s->K)
                                                  : vt_k.gemm_work_floats(s->M, s->N, s->K));
        for (int j = 0; j < s->batch; j++) { /* each on one thread, as the step runs them: here the calling one */
            const float *a = bn->a + j * sa, *b = bn->b + j * sb;
            float *c = bn->c + j * sc;
            if (bn->tiles)
                vt_k.gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, 1.0f, a, ld[0], b, NULL, ld[1], s->beta, NULL, c, ld[2],
                               work, NULL);
            else vt_k.gemm(s->ta, s->tb, s->M, s->N, s->K, 1.0f, a, ld[0], b, ld[1], s->beta, c, ld[2], work);
        }
    }
    return omp_get_wtime() - t0;
}

vt_status vt_tune_run(const vt_gemm_context *start, const vt_tune_target *t, const vt_tune_shape *s, int n,
                      vt_tune_result *r) {
    vt_tune_shape sh[VT_TUNE_MAX_SHAPES];
    const int dw_k = weight_gradient_k(t);
    bench bn = {sh, n, t->bf16, bf16_blocking(t), NULL, NULL, NULL, NULL};
    size_t na = 1, nb = 1, ncf = 1;
    for (int i = 0; i < n; i++) {
        sh[i] = s[i];
        if (!sh[i].batch && !sh[i].ta && sh[i].M > VT_TUNE_ROWS) sh[i].M = VT_TUNE_ROWS;
        if (!sh[i].batch && sh[i].ta && sh[i].K > dw_k) sh[i].K = dw_k;
        if (sh[i].batch > VT_TUNE_BATCH) sh[i].batch = VT_TUNE_BATCH;
        size_t f[3];
        shape_floats(&bn, &sh[i], f);
        if (f[0] > na) na = f[0];
        if (f[1] > nb) nb = f[1];
        if (f[2] > ncf) ncf = f[2];
    }
    bn.a = vt_aligned_alloc(na * sizeof(float));
    bn.b = vt_aligned_alloc(nb * sizeof(float));
    bn.c = vt_aligned_alloc(ncf * sizeof(float));
    bn.b16 = t->bf16 ? vt_aligned_alloc(nb * sizeof(vt_bf16)) : NULL;
    vt_status st = VT_OK;
    if (!bn.a || !bn.b || !bn.c || (t->bf16 && !bn.b16)) {
        st = vt_fail(VT_ERR_RUNTIME, "out of memory: the GEMM tuning's operands (%zu floats)", na + nb + ncf);
    } else {
        for (size_t i = 0; i < na; i++) bn.a[i] = (float)((i * 2654435761u) % 1999) / 1999.0f - 0.5f;
        for (size_t i = 0; i < nb; i++) bn.b[i] = (float)((i * 40503u) % 997) / 997.0f - 0.5f;
        if (bn.b16) vt_k.bf16_round(bn.b, bn.b16, nb);
        memset(bn.c, 0, ncf * sizeof(float));
        const vt_gemm_context active = vt_gemm_ctx;
        vt_tune_search(start, t, sh, n, measure_cpu, &bn, r);
        vt_gemm_context_set(&active);
    }
    free(bn.a);
    free(bn.b);
    free(bn.c);
    free(bn.b16);
    return st;
}
