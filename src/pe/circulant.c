/* circulant.c - Circulant-STRING (position-encodings.md 2.5), pe.kind = circulant.
 *
 * Owns the parameter pe.circulant_c (L', H', C, hd/b, b) (leading dims by pe.share), its
 * init and the exact application of R(r) = blockdiag_n exp(sum_k r_k L_{k,n}),
 * L = C - C^T, C_ij = c[(i - j) mod b]. Coordinates, angle tables and the pair rotation
 * are rotary.c's (rotary.h).
 *
 * Method (exact, O(hd b) per token, never a dense hd x hd product). Every block of a head
 * is projected on the orthonormal real DFT basis F (b x b), in this order:
 *   rows 2(j-1), 2(j-1)+1  (1 <= j < b/2): sqrt(2/b) cos(2 pi j m / b), sqrt(2/b) sin(...)
 *   row  b-2: DC 1/sqrt(b);   row b-1: Nyquist (-1)^m / sqrt(b).
 * exp(sum r_k L_k) maps u_j -> cos(a) u_j + sin(a) v_j, v_j -> -sin(a) u_j + cos(a) v_j,
 * a = sum_k r_k w_{k,j}, w_{k,j} = 2 sum_m c_k[m] sin(2 pi j m / b) (L_k has eigenvalue
 * -i w_{k,j} on u_j + i v_j), and fixes DC and Nyquist. In the coefficients (alpha, beta)
 * of (u_j, v_j) that is the section-1 pair rotation (alpha c - beta s, alpha s + beta c),
 * so plane j of block n is pair p = n b/2 + j - 1 of the head in the projected
 * coordinates, and pair n b/2 + b/2 - 1 (DC, Nyquist) gets frequency 0 (cos = 1,
 * sin = 0: exactly fixed). Per forward: w (from c, float64 sums), angles, cos/sin are
 * computed once in prepare, shared by the batch, by q and k and by the layers sharing a
 * set; per layer q and k go F -> pair rotation -> F^T (apply_qk, the reference form:
 * each block transform one small GEMM per (sample, head, block) over the patch tokens,
 * token 0 (CLS) copied unchanged at each step). The model's fused form (circ_fold /
 * circ_split below) folds F into the projection and rotates in the split: O(hd) per
 * token. Error: float32 rounding of F, cos/sin and three short products, a few
 * 1e-7 relative; against a dense float64 expm of the generator it is tested to 1e-5.
 *
 * Init (pe.init): rope_mixed (default): per (l', h') one RoPE-Mixed initial set f
 * (vt_rot_mixed_init, theta = pe.theta); plane j of block n takes f[n b/2 + j - 1] and
 * c_k[m] = (1/b) sum_{j=1}^{b/2-1} f_k sin(2 pi j m / b) (the minimum-norm odd solution:
 * c[0] = c[b/2] = 0, c[b-m] = -c[m]; it reproduces w = f exactly in exact arithmetic).
 * normal: c ~ N(0, init_std^2). Default share none.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "kinds.h"
#include "lie.h"
#include "rotary.h"

typedef struct {
    int b, nb, C, Lp, Hp, param;
    float *F;            /* (b, b) DFT basis, rows as in the header */
    float *Fhead;        /* (hd, hd) blockdiag(F) of a whole head (the fused form), built
                            at its first use: a model only planned (vitrain info, eval's
                            check of a file) never holds these hd^2 floats */
    vt_tensor **cs;      /* per parameter layer: (Ba, Hp, Np, hd) cos/sin of this forward */
} circ_state;

/* The real orthonormal DFT basis of size b (even) in the header's row order. */
static void circ_basis(int b, float *F) {
    double r2 = sqrt(2.0 / b), r1 = sqrt(1.0 / b);
    for (int j = 1; j < b / 2; j++)
        for (int m = 0; m < b; m++) {
            double a = 2.0 * M_PI * (double)((j * m) % b) / b;
            F[(size_t)(2 * (j - 1)) * b + m] = (float)(r2 * cos(a));
            F[(size_t)(2 * (j - 1) + 1) * b + m] = (float)(r2 * sin(a));
        }
    for (int m = 0; m < b; m++) {
        F[(size_t)(b - 2) * b + m] = (float)r1;
        F[(size_t)(b - 1) * b + m] = (float)(m % 2 ? -r1 : r1);
    }
}

/* sin(2 pi j m / b) reduced exactly: the argument j m mod b keeps the angle in [0, 2 pi). */
static double circ_sin(int j, int m, int b) {
    return sin(2.0 * M_PI * (double)((j * m) % b) / b);
}

/* ---- w from c: the plane frequencies ---- */

typedef struct {
    const float *dw;
    float *dc;
    int G, C, nb, b;
} freqs_ctx;

static void freqs_bwd(void *p) {
    freqs_ctx *c = p;
    int b = c->b, hp = c->nb * b / 2, C = c->C;
    for (int g = 0; g < c->G; g++)
        for (int k = 0; k < C; k++)
            for (int n = 0; n < c->nb; n++) {
                float *dc = c->dc + (((size_t)g * C + k) * c->nb + n) * b;
                for (int m = 0; m < b; m++) {
                    double s = 0.0;
                    for (int j = 1; j < b / 2; j++)
                        s += 2.0 * circ_sin(j, m, b) *
                             c->dw[((size_t)g * hp + (size_t)n * b / 2 + j - 1) * C + k];
                    dc[m] += (float)s;
                }
            }
}

/* w[g, n b/2 + j - 1, k] = 2 sum_m c[g, k, n, m] sin(2 pi j m / b) for 1 <= j < b/2, and
 * w[g, n b/2 + b/2 - 1, k] = 0. c (G, C, nb, b) -> w (G, nb b/2, C) (float64 sums). */
static vt_tensor *circ_freqs(vt_tape *t, vt_tensor *c) {
    int G = (int)c->shape[0], C = (int)c->shape[1], nb = (int)c->shape[2], b = (int)c->shape[3];
    int hp = nb * b / 2;
    int g = vt_tape_wants_grad(t, c, NULL, NULL);
    int64_t shape[3] = {G, hp, C};
    vt_tensor *w = vt_tape_new(t, g, 3, shape);
    for (int gi = 0; gi < G; gi++)
        for (int k = 0; k < C; k++)
            for (int n = 0; n < nb; n++) {
                const float *cc = c->data + (((size_t)gi * C + k) * nb + n) * b;
                for (int j = 1; j <= b / 2; j++) {
                    double s = 0.0;
                    if (j < b / 2)
                        for (int m = 0; m < b; m++) s += 2.0 * cc[m] * circ_sin(j, m, b);
                    w->data[((size_t)gi * hp + (size_t)n * b / 2 + j - 1) * C + k] = (float)s;
                }
            }
    if (g) {
        freqs_ctx *x = vt_tape_ctx(t, sizeof *x);
        *x = (freqs_ctx){w->grad, c->grad, G, C, nb, b};
        vt_tape_record(t, "circulant_freqs", freqs_bwd, x);
    }
    return w;
}

/* ---- Block DFT: y = blockdiag(F) x (or F^T when inverse) on patch tokens ---- */

typedef struct {
    const float *F, *dy;
    float *dx;
    int64_t rows, N, hd;
    int b, inverse;
} dft_ctx;

/* One (sample, head) slab: for each block, the Np = N - 1 patch rows (stride hd) times
 * F^T (forward: coefficients F x per row) or F (inverse: F^T z per row), as a GEMM;
 * accumulated into out when beta = 1. The transpose flag picks F^T or F. */
static void dft_slab(const float *F, int b, int tb, int64_t N, int64_t hd, const float *in,
                     float *out, float beta, float *work) {
    for (int64_t o = 0; o < hd; o += b)
        vt_k.gemm(0, tb, (int)(N - 1), b, b, 1.0f, in + hd + o, (int)hd, F, b, beta, out + hd + o,
                  (int)hd, work);
}

/* The transpose of a block transform is the other one: dx += dy F (forward) or dy F^T. */
static void dft_bwd(void *p) {
    dft_ctx *c = p;
    int64_t hd = c->hd, N = c->N;
    size_t wf = vt_k.gemm_work_floats((int)(N - 1), c->b, c->b);
    #pragma omp parallel for schedule(static) if (c->rows * N * hd * c->b > VT_PAR_MIN_WORK)
    for (int64_t r = 0; r < c->rows; r++) {
        const float *dy = c->dy + r * N * hd;
        float *dx = c->dx + r * N * hd;
        for (int64_t i = 0; i < hd; i++) dx[i] += dy[i];
        if (N > 1) dft_slab(c->F, c->b, c->inverse, N, hd, dy, dx, 1.0f, vt_gemm_workspace(wf));
    }
}

/* x (B, H, N, hd) -> y: every patch token's blocks transformed by F (inverse: F^T);
 * token 0 copied. Backward: dx += the transposed transform of dy. */
static vt_tensor *circ_dft(vt_tape *t, vt_tensor *x, const float *F, int b, int inverse) {
    VT_ASSERT(x->ndim == 4 && x->shape[3] % b == 0, "circulant: x head dim %lld vs block %d",
              (long long)x->shape[3], b);
    int64_t B = x->shape[0], H = x->shape[1], N = x->shape[2], hd = x->shape[3];
    int g = vt_tape_wants_grad(t, x, NULL, NULL);
    vt_tensor *y = vt_tape_new(t, g, 4, x->shape);
    size_t wf = vt_k.gemm_work_floats((int)(N - 1), b, b);
    #pragma omp parallel for schedule(static) if (B * H * N * hd * b > VT_PAR_MIN_WORK)
    for (int64_t r = 0; r < B * H; r++) {
        const float *xs = x->data + r * N * hd;
        float *ys = y->data + r * N * hd;
        memcpy(ys, xs, (size_t)hd * sizeof(float));
        if (N > 1) dft_slab(F, b, !inverse, N, hd, xs, ys, 0.0f, vt_gemm_workspace(wf));
    }
    if (g) {
        dft_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (dft_ctx){F, y->grad, x->grad, B * H, N, hd, b, inverse};
        vt_tape_record(t, "circulant_dft", dft_bwd, c);
    }
    return y;
}

/* ---- The kind ---- */

/* Block size 16; theta 10 for the RoPE-Mixed init (none for the normal one). */
static void circ_resolve(const vt_pe_config *pe, int hd, vt_pe_config *def) {
    (void)hd;
    def->block_size = 16;
    if (pe->init == VT_PEINIT_ROPE_MIXED) def->theta = VT_ROT_MIXED_THETA;
}

static vt_status circ_check(const vt_pe_config *pe, int hd, const char *src) {
    vt_status st = vt_rot_check_pairs(pe, hd, src);
    if (st) return st;
    int b = pe->block_size;
    if (b % 2 != 0 || b < 4 || hd % b != 0)
        return vt_fail(VT_ERR_USAGE, "%s: pe.block_size = %d is invalid for circulant: must be even, >= 4 "
                       "and divide the head dim %d", src, b, hd);
    return pe->init == VT_PEINIT_ROPE_MIXED ? vt_rot_check_mixed_init(pe, hd, src) : VT_OK;
}

static void circ_create(vt_pe *pe) {
    int b = pe->cfg.block_size, hd = pe->hd, C = pe->cfg.coord_dim;
    VT_ASSERT(b >= 4 && b % 2 == 0 && hd % b == 0 && C >= 1 && C <= 3,
              "circulant: block size %d, head dim %d, coord_dim %d", b, hd, C);
    circ_state *s = vt_xcalloc(1, sizeof *s);
    s->b = b;
    s->nb = hd / b;
    s->C = C;
    vt_rot_share_dims(pe, &s->Lp, &s->Hp);
    int64_t shape[5] = {s->Lp, s->Hp, C, s->nb, b};
    s->param = vt_pe_declare(pe, "pe.circulant_c", 5, shape);
    s->F = vt_xmalloc((size_t)b * b * sizeof(float));
    circ_basis(b, s->F);
    s->cs = vt_xcalloc((size_t)s->Lp, sizeof *s->cs);
    pe->state = s;
}

static void circ_init(vt_pe *pe, vt_rng *rng) {
    circ_state *s = pe->state;
    vt_tensor *p = pe->params[s->param].t;
    int b = s->b, nb = s->nb, C = s->C, hd = pe->hd;
    if (pe->cfg.init == VT_PEINIT_NORMAL) {
        for (int64_t i = 0; i < p->size; i++)
            p->data[i] = (float)(pe->cfg.init_std * vt_rng_normal(rng));
        return;
    }
    float *f = vt_xmalloc((size_t)(hd / 2) * C * sizeof(float));
    for (int set = 0; set < s->Lp * s->Hp; set++) {
        vt_rot_mixed_init(hd, C, pe->cfg.theta, rng, f);
        float *c = p->data + (size_t)set * C * nb * b;
        for (int k = 0; k < C; k++)
            for (int n = 0; n < nb; n++)
                for (int m = 0; m < b; m++) {
                    double v = 0.0;
                    for (int j = 1; j < b / 2; j++)
                        v += f[((size_t)n * b / 2 + j - 1) * C + k] * circ_sin(j, m, b);
                    c[((size_t)k * nb + n) * b + m] = (float)(v / b);
                }
    }
    free(f);
}

void vt_pe_circulant_prepare_coords(vt_pe *pe, vt_tape *t, vt_tensor *coords) {
    VT_ASSERT(pe->kind == &vt_pe_circulant_ops, "circulant tables on a %s PE",
              vt_pe_kind_name(pe->kind->kind));
    circ_state *s = pe->state;
    VT_ASSERT(coords->ndim == 3 && coords->shape[2] == s->C, "circulant: coords need C = %d", s->C);
    int64_t per = (int64_t)s->Hp * s->C * s->nb * s->b;
    int64_t shape[4] = {s->Hp, s->C, s->nb, s->b};
    for (int l = 0; l < s->Lp; l++) {
        vt_tensor *c = vt_rot_param_view(t, pe->params[s->param].t, l * per, 4, shape);
        vt_tensor *w = circ_freqs(t, c);
        s->cs[l] = vt_op_rot_cossin(t, vt_op_rot_angles(t, coords, w));
    }
}

static void circ_prepare(vt_pe *pe, vt_tape *t, const vt_tensor *images) {
    vt_pe_circulant_prepare_coords(pe, t, vt_rot_coords(pe, t, images));
}

static void circ_apply(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k) {
    circ_state *s = pe->state;
    vt_tensor *cs = s->cs[vt_rot_layer(pe, layer)];
    VT_ASSERT(cs != NULL, "circulant: apply_qk before prepare");
    vt_tensor **x[2] = {q, k};
    for (int i = 0; i < 2; i++) {
        vt_tensor *y = circ_dft(t, *x[i], s->F, s->b, 0);
        y = vt_op_rot_pairs(t, y, cs);
        *x[i] = circ_dft(t, y, s->F, s->b, 1);
    }
}

/* The model's fused form with softmax attention (pe->dot_only): blockdiag(F) folded into
 * the projection's q and k rows for every token, the plane rotation inside the split, and
 * the final F^T left out: q and k stay in the DFT basis, which leaves every product
 * q_n . k_m (CLS included) as the contract's since F is orthogonal. Otherwise (Performer
 * sees q and k themselves) the reference form. */
static void circ_fold(vt_pe *pe, vt_tape *t, int layer, vt_tensor **w, vt_tensor **b) {
    (void)layer;
    circ_state *s = pe->state;
    if (!pe->dot_only) return;
    if (!s->Fhead) {
        int hd = pe->hd;
        s->Fhead = vt_xcalloc((size_t)hd * hd, sizeof(float));
        for (int n = 0; n < s->nb; n++)
            for (int i = 0; i < s->b; i++)
                memcpy(s->Fhead + (size_t)(n * s->b + i) * hd + n * s->b, s->F + (size_t)i * s->b,
                       (size_t)s->b * sizeof(float));
    }
    int64_t shape[3] = {1, pe->hd, pe->hd};
    vt_op_qkv_fold(t, *w, *b, vt_tensor_wrap(t->arena, s->Fhead, 3, shape), pe->H, w, b);
}

static void circ_split(vt_pe *pe, vt_tape *t, int layer, vt_tensor *qkv, vt_tensor **q, vt_tensor **k,
                       vt_tensor **v) {
    circ_state *s = pe->state;
    if (!pe->dot_only) {
        vt_op_split_heads(t, qkv, pe->H, q, k, v);
        circ_apply(pe, t, layer, q, k);
        return;
    }
    vt_tensor *cs = s->cs[vt_rot_layer(pe, layer)];
    VT_ASSERT(cs != NULL, "circulant: split_qkv before prepare");
    vt_op_rot_split_heads(t, qkv, pe->H, cs, NULL, q, k, v);
}

static void circ_destroy(vt_pe *pe) {
    circ_state *s = pe->state;
    if (!s) return;
    free(s->F);
    free(s->Fhead);
    free(s->cs);
    free(s);
    pe->state = NULL;
}

const vt_pe_kind_ops vt_pe_circulant_ops = {
    .kind = VT_PE_CIRCULANT,
    .rotary = 1,
    .resolve = circ_resolve,
    .check = circ_check,
    .defaults_doc = "block_size 16; theta 10 with init = rope_mixed",
    .rules_doc = "an even head dim; block_size even, >= 4, dividing the head dim; init = "
                 "rope_mixed: a head dim >= 4, divisible by 4 when coord_dim = 2",
    .create = circ_create,
    .init = circ_init,
    .prepare = circ_prepare,
    .apply_qk = circ_apply,
    .fold_qkv = circ_fold,
    .split_qkv = circ_split,
    .destroy = circ_destroy,
};
