/* cayley.c - Cayley-STRING (position-encodings.md 2.4), pe.kind = cayley.
 * R(r) = RoPE(r) P: every patch token's q and k go first through the change of basis
 * P = (I - S)(I + S)^(-1) = 2 (I + S)^(-1) - I, S = U - U^T, then through the inner
 * rotary map (applying RoPE first would cancel P in every patch-patch logit).
 * Parameters: pe.cayley_u (L', H', hd, hd), only the strict upper triangle is used
 * (lower triangle and diagonal are written 0 at init, ignored on read and get zero
 * gradient), init 0, so at init Cayley equals its inner RoPE exactly; with pe.inner =
 * mixed (default) also pe.freqs (L', H', hd/2, C) initialised as RoPE-Mixed (theta =
 * pe.theta, default 10); pe.inner = axial uses RoPE-Axial's fixed table (theta 100).
 * pe.share applies to both (section 4 leading dims).
 *
 * The unused entries of pe.cayley_u are never read and are zeroed after init and after
 * a checkpoint load (clear_unused), so they are written back as 0. Per forward: P of every (l', h')
 * is computed once (Gauss-Jordan inversion of I + S with partial pivoting in double:
 * I + S is invertible for skew S and well conditioned for moderate S; the float P is
 * the rounded double result); then the inner cos/sin table. apply_qk (the reference
 * form) applies P to all tokens by one GEMM per (sample, head) (vt_op_head_matmul); the
 * model's fused form folds P into the qkv projection's q and k rows (one GEMM per
 * (part, head) on the weights, O(hd^2 D) per layer whatever the batch) and rotates in
 * the split, which maps CLS back by P^T.
 * Backward (exact): with B = (I + S)^(-1) (kept in double) and G = dL/dP,
 * dL/dS = -2 B^T G B^T and dL/dU_ij += dL/dS_ij - dL/dS_ji for i < j. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinds.h"
#include "ops/par.h"
#include "rotary.h"

typedef struct {
    int Lp, Hp, C, mixed;
    int ui, fi;            /* indices of pe.cayley_u and pe.freqs (-1 with inner axial) */
    float *axial;          /* (npr, C) fixed inner table with inner axial, else NULL */
    int npr;
    vt_tensor **P;         /* Lp (Hp, hd, hd) change-of-basis matrices of this forward */
    vt_tensor **cs;        /* Lp inner cos/sin tables (a single shared one with axial) */
} cayley_state;

/* ---- The Cayley op: U (G, hd, hd) -> P (G, hd, hd) ---- */

typedef struct {
    const double *binv;    /* (G, hd, hd) B = (I + S)^(-1) */
    double *work;          /* (G, 2, hd, hd) backward scratch (arena) */
    const float *dp;
    float *du;
    int64_t G, hd;
} cayley_ctx;

/* B = (I + S)^(-1), S = U - U^T from the strict upper triangle of u (n x n). work: 2 n n. */
static void cayley_inverse(const float *u, int n, double *b, double *work) {
    double *a = work;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = i < j ? (double)u[i * n + j] : i > j ? -(double)u[j * n + i] : 0.0;
            a[i * n + j] = (i == j ? 1.0 : 0.0) + s;
            b[i * n + j] = i == j ? 1.0 : 0.0;
        }
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int r = c + 1; r < n; r++)
            if (fabs(a[r * n + c]) > fabs(a[piv * n + c])) piv = r;
        VT_ASSERT(a[piv * n + c] != 0.0, "cayley: I + S is singular (non-finite pe.cayley_u?)");
        if (piv != c)
            for (int j = 0; j < n; j++) {
                double x = a[c * n + j];
                a[c * n + j] = a[piv * n + j];
                a[piv * n + j] = x;
                x = b[c * n + j];
                b[c * n + j] = b[piv * n + j];
                b[piv * n + j] = x;
            }
        double inv = 1.0 / a[c * n + c];
        for (int j = 0; j < n; j++) {
            a[c * n + j] *= inv;
            b[c * n + j] *= inv;
        }
        for (int r = 0; r < n; r++) {
            if (r == c) continue;
            double f = a[r * n + c];
            if (f == 0.0) continue;
            for (int j = 0; j < n; j++) {
                a[r * n + j] -= f * a[c * n + j];
                b[r * n + j] -= f * b[c * n + j];
            }
        }
    }
}

static void cayley_bwd(void *p) {
    cayley_ctx *c = p;
    int n = (int)c->hd;
    #pragma omp parallel for schedule(static) if (c->G > 1 && c->G * c->hd * c->hd * c->hd > VT_PAR_MIN_WORK)
    for (int64_t g = 0; g < c->G; g++) {
        const double *b = c->binv + g * n * n;
        const float *gp = c->dp + g * n * n;
        double *x = c->work + g * 2 * n * n, *ds = x + (size_t)n * n;
        /* x = B^T G (row i of x accumulated over k: contiguous inner loops), ds = -2 x B^T */
        for (int i = 0; i < n; i++) {
            double *xi = x + (size_t)i * n;
            for (int j = 0; j < n; j++) xi[j] = 0.0;
            for (int k = 0; k < n; k++) {
                double f = b[k * n + i];
                const float *gk = gp + (size_t)k * n;
                for (int j = 0; j < n; j++) xi[j] += f * gk[j];
            }
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double s = 0.0;
                for (int k = 0; k < n; k++) s += x[i * n + k] * b[j * n + k];
                ds[i * n + j] = -2.0 * s;
            }
        float *du = c->du + g * n * n;
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) du[i * n + j] += (float)(ds[i * n + j] - ds[j * n + i]);
    }
}

vt_tensor *vt_op_cayley(vt_tape *t, vt_tensor *u) {
    int64_t G = u->shape[0];
    int n = (int)u->shape[1];
    VT_ASSERT(u->ndim == 3 && u->shape[2] == n, "cayley: U must be (G, hd, hd)");
    int g = vt_tape_wants_grad(t, u, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, 3, u->shape);
    double *binv = vt_arena_alloc(t->arena, (size_t)(G * n * n) * sizeof(double));
    double *work = vt_arena_alloc(t->arena, (size_t)(G * 2 * n * n) * sizeof(double));
    #pragma omp parallel for schedule(static) if (G > 1 && G * n * n * n > VT_PAR_MIN_WORK)
    for (int64_t i = 0; i < G; i++) {
        double *b = binv + i * n * n;
        cayley_inverse(u->data + i * n * n, n, b, work + i * 2 * n * n);
        float *pm = y->data + i * n * n;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++) pm[r * n + c] = (float)(2.0 * b[r * n + c] - (r == c ? 1.0 : 0.0));
    }
    if (g) {
        cayley_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (cayley_ctx){binv, work, y->grad, u->grad, G, n};
        vt_tape_record(t, "cayley", cayley_bwd, c);
    }
    return y;
}

/* ---- The kind ---- */

/* The inner RoPE's theta: RoPE-Axial's or RoPE-Mixed's. */
static void cayley_resolve(const vt_pe_config *pe, int hd, vt_pe_config *def) {
    (void)hd;
    def->theta = pe->inner == VT_INNER_AXIAL ? VT_ROT_AXIAL_THETA : VT_ROT_MIXED_THETA;
}

static vt_status cayley_check(const vt_pe_config *pe, int hd, const char *src) {
    vt_status st = vt_rot_check_pairs(pe, hd, src);
    if (st) return st;
    return pe->inner == VT_INNER_MIXED ? vt_rot_check_mixed_init(pe, hd, src)
                                       : vt_rot_check_axial(pe, hd, " (pe.inner = axial)", src);
}

static void cayley_create(vt_pe *pe) {
    int C = pe->cfg.coord_dim, hd = pe->hd, mixed = pe->cfg.inner == VT_INNER_MIXED;
    VT_ASSERT(hd % 2 == 0 && (mixed ? hd >= 4 && (C != 2 || hd % 4 == 0) : hd >= 2 * C) &&
              pe->cfg.theta > 0, "cayley: head dim %d, coord_dim %d, inner %d, theta %g", hd, C,
              (int)pe->cfg.inner, pe->cfg.theta);
    cayley_state *s = vt_xcalloc(1, sizeof *s);
    vt_rot_share_dims(pe, &s->Lp, &s->Hp);
    s->C = C;
    s->mixed = mixed;
    s->fi = -1;
    if (mixed) {
        int64_t fshape[4] = {s->Lp, s->Hp, hd / 2, C};
        s->fi = vt_pe_declare(pe, "pe.freqs", 4, fshape);
    } else {
        s->axial = vt_xmalloc((size_t)(hd / 2) * C * sizeof(float));
        s->npr = vt_rot_axial_freqs(hd, C, pe->cfg.theta, s->axial);
    }
    int64_t ushape[4] = {s->Lp, s->Hp, hd, hd};
    s->ui = vt_pe_declare(pe, "pe.cayley_u", 4, ushape);
    s->P = vt_xcalloc((size_t)s->Lp, sizeof *s->P);
    s->cs = vt_xcalloc((size_t)s->Lp, sizeof *s->cs);
    pe->state = s;
}

static void cayley_init(vt_pe *pe, vt_rng *rng) {
    cayley_state *s = pe->state;
    vt_tensor *u = pe->params[s->ui].t;
    memset(u->data, 0, (size_t)u->size * sizeof(float));
    if (!s->mixed) return;
    int set = (pe->hd / 2) * s->C;
    float *f = pe->params[s->fi].t->data;
    for (int i = 0; i < s->Lp * s->Hp; i++)
        vt_rot_mixed_init(pe->hd, s->C, pe->cfg.theta, rng, f + (size_t)i * set);
}

/* Entries below the strict upper triangle of pe.cayley_u are never read. */
static void cayley_clear_unused(vt_pe *pe) {
    cayley_state *s = pe->state;
    vt_rot_clear_unused(pe->params[s->ui].t, pe->hd);
}

static void cayley_prepare(vt_pe *pe, vt_tape *t, const vt_tensor *images) {
    cayley_state *s = pe->state;
    int hd = pe->hd, C = s->C;
    vt_tensor *coords = vt_rot_coords(pe, t, images);
    int64_t ushape[3] = {s->Hp, hd, hd}, uper = (int64_t)s->Hp * hd * hd;
    int64_t fshape[3] = {s->Hp, hd / 2, C}, fper = (int64_t)s->Hp * (hd / 2) * C;
    vt_tensor *axial_cs = NULL;
    if (!s->mixed) {
        int64_t ashape[3] = {1, s->npr, C};
        vt_tensor *f = vt_tensor_wrap(t->arena, s->axial, 3, ashape);
        axial_cs = vt_op_rot_cossin(t, vt_op_rot_angles(t, coords, f));
    }
    for (int l = 0; l < s->Lp; l++) {
        s->P[l] = vt_op_cayley(t, vt_rot_param_view(t, pe->params[s->ui].t, l * uper, 3, ushape));
        if (s->mixed) {
            vt_tensor *f = vt_rot_param_view(t, pe->params[s->fi].t, l * fper, 3, fshape);
            s->cs[l] = vt_op_rot_cossin(t, vt_op_rot_angles(t, coords, f));
        } else {
            s->cs[l] = axial_cs;
        }
    }
}

static void cayley_apply(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k) {
    cayley_state *s = pe->state;
    int l = vt_rot_layer(pe, layer);
    *q = vt_op_rot_pairs(t, vt_op_head_matmul(t, *q, s->P[l]), s->cs[l]);
    *k = vt_op_rot_pairs(t, vt_op_head_matmul(t, *k, s->P[l]), s->cs[l]);
}

/* The model's fused form: P folded into the q and k rows of the projection (every token
 * then leaves it multiplied by P), the inner rotation inside the split, and CLS taken
 * back by P^T there (P is orthogonal: CLS = P^T P x = x to float rounding). */
static void cayley_fold(vt_pe *pe, vt_tape *t, int layer, vt_tensor **w, vt_tensor **b) {
    cayley_state *s = pe->state;
    vt_op_qkv_fold(t, *w, *b, s->P[vt_rot_layer(pe, layer)], pe->H, w, b);
}

static void cayley_split(vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q, vt_tensor **k,
                         vt_tensor **v) {
    cayley_state *s = pe->state;
    int l = vt_rot_layer(pe, layer);
    vt_op_rot_split_heads(t, qkv, pe->H, s->cs[l], s->P[l], q, k, v);
}

static void cayley_destroy(vt_pe *pe) {
    cayley_state *s = pe->state;
    if (s) {
        free(s->axial);
        free(s->P);
        free(s->cs);
    }
    free(s);
    pe->state = NULL;
}

const vt_pe_kind_ops vt_pe_cayley_ops = {
    .kind = VT_PE_CAYLEY,
    .rotary = 1,
    .resolve = cayley_resolve,
    .check = cayley_check,
    .defaults_doc = "theta 10 (inner = mixed) or 100 (inner = axial)",
    .rules_doc = "an even head dim; inner = mixed: >= 4, divisible by 4 when coord_dim = 2; "
                 "inner = axial: >= 2 coord_dim",
    .create = cayley_create,
    .init = cayley_init,
    .prepare = cayley_prepare,
    .apply_qk = cayley_apply,
    .fold_qkv = cayley_fold,
    .split_qkv = cayley_split,
    .clear_unused = cayley_clear_unused,
    .destroy = cayley_destroy,
};
