/* liere.c - LieRE and LieRE-Commute (position-encodings.md 2.6), pe.kind = liere |
 * liere_commute.
 *
 * Owns the parameter pe.liere_u (L', H', C, hd/g, g, g) (leading dims by pe.share; only the
 * strictly upper triangle of each g x g block is used: the rest is written 0 at init,
 * ignored in the forward, cleared to 0 at every prepare (a loaded checkpoint's stray
 * values are not written back) and gets zero gradient), its init and the application of
 * R(r) = expm(sum_k r_k A_k), A_k = U_k - U_k^T per block of g channels (block diagonal;
 * g = pe.block_size, default hd; liere_commute: g = 2). Coordinates (pe.positions, default
 * normalized; RGB-D depth) are rotary.c's (vt_rot_coords).
 *
 * Sign: the 2 x 2 block [[0, u], [-u, 0]] gives [[cos a, sin a], [-sin a, cos a]],
 * a = u . r: a rotation by -a in the section-1 convention, so liere_commute with U = -f
 * equals rope_mixed with frequencies f.
 *
 * Per forward (prepare): one g x g matrix per (sample when positions are per sample (RGB-D),
 * parameter head, patch position, block), for every parameter layer l', computed in float64
 * (expm.c: scaling and squaring, error far below float32 rounding; g = 2 uses the closed
 * form cos / sin) and stored in float32 in the step arena; shared by the batch, q and k and
 * the layers of a shared set. Per layer (apply_qk) q and k get y_blk = R_blk x_blk on every
 * patch token (token 0, CLS, copied), as one GEMM per (position, block) over all the rows
 * (samples x heads) sharing that matrix (plain loops for g <= 4).
 *
 * Backward (exact): dR from the apply (dR += dy x^T, dx += R^T dy), then per matrix
 * dA = L(A^T, dR) (expm.h; closed form for g = 2), S_ij = dA_ij - dA_ji (i < j),
 * dU_k,ij += r_k S_ij and dr_k += sum_{i<j} U_k,ij S_ij (to the depth scale through
 * vt_rot_coords with RGB-D). Every sum runs in a fixed order: deterministic for any
 * thread count.
 *
 * Init: strictly upper entries U(0, 2 pi) * pe.init_scale (the reference code's), in the
 * order (l', h', k, block, i, j > i); lower triangle and diagonal 0.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "expm.h"
#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "kinds.h"
#include "lie.h"
#include "rotary.h"

typedef struct {
    int g, nb, C, Lp, Hp, param;
    vt_tensor **R;       /* per parameter layer: (Ba, Hp, Np, nb g g) of this forward */
} liere_state;

/* ---- R from U and the coordinates ---- */

typedef struct {
    vt_arena *arena;
    const float *coords, *U, *dR;
    float *dcoords, *dU;
    int64_t Ba, G, Np, C, nb, g;
} rot_ctx;

/* A = sum_k r_k (U_k - U_k^T) of one block: U points at block (h', k = 0, n); the C axes
 * are stride_k floats apart. Only the strictly upper part of U is read. */
static void build_a(const float *U, const float *r, int64_t C, int64_t g, int64_t stride_k,
                    double *A) {
    memset(A, 0, (size_t)(g * g) * sizeof(double));
    for (int64_t k = 0; k < C; k++) {
        const float *u = U + k * stride_k;
        double rk = r[k];
        for (int64_t i = 0; i < g; i++)
            for (int64_t j = i + 1; j < g; j++) {
                double v = rk * u[i * g + j];
                A[i * g + j] += v;
                A[j * g + i] -= v;
            }
    }
}

/* Item index it = ((ba G + h') Np + position) nb + block -> its four indices. */
typedef struct {
    int64_t ba, h, np, n;
} item_idx;

static item_idx item_of(int64_t it, int64_t G, int64_t Np, int64_t nb) {
    item_idx x;
    x.n = it % nb;
    x.np = (it / nb) % Np;
    x.h = (it / (nb * Np)) % G;
    x.ba = it / (nb * Np * G);
    return x;
}

static void rot_bwd(void *p) {
    rot_ctx *c = p;
    int64_t Ba = c->Ba, G = c->G, Np = c->Np, C = c->C, nb = c->nb, g = c->g, gg = g * g;
    int64_t items = Ba * G * Np * nb, stride_k = nb * gg;
    /* S_ij = dA_ij - dA_ji (i < j) of every item, float64. */
    double *S = vt_arena_alloc(c->arena, (size_t)(items * gg) * sizeof(double));
    size_t per = g == 2 ? 0 : vt_expm_frechet_work_doubles((int)g) + 3 * (size_t)gg;
    int nt = omp_get_max_threads();
    double *scratch = per ? vt_arena_alloc(c->arena, (size_t)nt * per * sizeof(double)) : NULL;
    #pragma omp parallel for schedule(dynamic, 1) if (items * gg * g > VT_PAR_MIN_WORK)
    for (int64_t it = 0; it < items; it++) {
        item_idx x = item_of(it, G, Np, nb);
        const float *r = c->coords + (x.ba * Np + x.np) * C;
        const float *U = c->U + (x.h * C * nb + x.n) * gg;
        const float *dR = c->dR + it * gg;
        double *s = S + it * gg;
        if (g == 2) {
            double a = 0.0;
            for (int64_t k = 0; k < C; k++) a += (double)r[k] * U[k * stride_k + 1];
            double co = cos(a), si = sin(a);
            s[1] = -dR[0] * si + dR[1] * co - dR[2] * co - dR[3] * si;
            continue;
        }
        double *w = scratch + (size_t)omp_get_thread_num() * per;
        double *A = w + vt_expm_frechet_work_doubles((int)g), *Gm = A + gg, *dA = Gm + gg;
        build_a(U, r, C, g, stride_k, A);
        for (int64_t i = 0; i < gg; i++) Gm[i] = dR[i];
        vt_expm_backward(A, Gm, (int)g, dA, w);
        for (int64_t i = 0; i < g; i++)
            for (int64_t j = i + 1; j < g; j++) s[i * g + j] = dA[i * g + j] - dA[j * g + i];
    }
    /* dU[h', k, n, i, j] += sum over (ba, position) of r_k S, in that order. */
    if (c->dU) {
        #pragma omp parallel for schedule(static) if (Ba * Np * G * C * nb * gg > VT_PAR_MIN_WORK)
        for (int64_t hkn = 0; hkn < G * C * nb; hkn++) {
            int64_t h = hkn / (C * nb), k = (hkn / nb) % C, n = hkn % nb;
            float *dU = c->dU + hkn * gg;
            for (int64_t i = 0; i < g; i++)
                for (int64_t j = i + 1; j < g; j++) {
                    double acc = 0.0;
                    for (int64_t ba = 0; ba < Ba; ba++)
                        for (int64_t np = 0; np < Np; np++) {
                            int64_t it = ((ba * G + h) * Np + np) * nb + n;
                            acc += (double)c->coords[(ba * Np + np) * C + k] *
                                   S[it * gg + i * g + j];
                        }
                    dU[i * g + j] += (float)acc;
                }
        }
    }
    /* dr_k += sum over (h', block) of sum_{i<j} U_k,ij S_ij. */
    if (c->dcoords) {
        #pragma omp parallel for schedule(static) if (Ba * Np * G * C * nb * gg > VT_PAR_MIN_WORK)
        for (int64_t bn = 0; bn < Ba * Np; bn++) {
            int64_t ba = bn / Np, np = bn % Np;
            for (int64_t k = 0; k < C; k++) {
                double acc = 0.0;
                for (int64_t h = 0; h < G; h++)
                    for (int64_t n = 0; n < nb; n++) {
                        int64_t it = ((ba * G + h) * Np + np) * nb + n;
                        const float *u = c->U + ((h * C + k) * nb + n) * gg;
                        for (int64_t i = 0; i < g; i++)
                            for (int64_t j = i + 1; j < g; j++)
                                acc += u[i * g + j] * S[it * gg + i * g + j];
                    }
                c->dcoords[bn * C + k] += (float)acc;
            }
        }
    }
}

/* R[ba, h', np, n] = expm(sum_k r_k (U_k - U_k^T)) for block n of head set h' at position
 * np of sample ba: coords (Ba, Np, C), U (G, C, nb, g g) -> R (Ba, G, Np, nb g g), float64
 * math, rounded to float once. */
static vt_tensor *liere_rot(vt_tape *t, vt_tensor *coords, vt_tensor *U, int g) {
    int64_t Ba = coords->shape[0], Np = coords->shape[1], C = coords->shape[2];
    int64_t G = U->shape[0], nb = U->shape[2], gg = (int64_t)g * g, stride_k = nb * gg;
    VT_ASSERT(U->ndim == 4 && U->shape[1] == C && U->shape[3] == gg,
              "liere: U (%lld, %lld, %lld, %lld) does not fit C = %lld, g = %d",
              (long long)U->shape[0], (long long)U->shape[1], (long long)U->shape[2],
              (long long)U->shape[3], (long long)C, g);
    int grad = vt_tape_wants_grad(t, coords, U, NULL);
    int64_t shape[4] = {Ba, G, Np, nb * gg};
    vt_tensor *R = vt_tape_new(t, grad, 4, shape);
    int64_t items = Ba * G * Np * nb;
    size_t per = g == 2 ? 0 : vt_expm_work_doubles(g) + 2 * (size_t)gg;
    int nt = omp_get_max_threads();
    double *scratch = per ? vt_arena_alloc(t->arena, (size_t)nt * per * sizeof(double)) : NULL;
    #pragma omp parallel for schedule(dynamic, 1) if (items * gg * g > VT_PAR_MIN_WORK)
    for (int64_t it = 0; it < items; it++) {
        item_idx x = item_of(it, G, Np, nb);
        const float *r = coords->data + (x.ba * Np + x.np) * C;
        const float *u = U->data + (x.h * C * nb + x.n) * gg;
        float *out = R->data + it * gg;
        if (g == 2) {
            double a = 0.0;
            for (int64_t k = 0; k < C; k++) a += (double)r[k] * u[k * stride_k + 1];
            double co = cos(a), si = sin(a);
            out[0] = (float)co;
            out[1] = (float)si;
            out[2] = (float)-si;
            out[3] = (float)co;
            continue;
        }
        double *w = scratch + (size_t)omp_get_thread_num() * per;
        double *A = w + vt_expm_work_doubles(g), *E = A + gg;
        build_a(u, r, C, g, stride_k, A);
        vt_expm(A, g, E, w);
        for (int64_t i = 0; i < gg; i++) out[i] = (float)E[i];
    }
    if (grad) {
        rot_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (rot_ctx){t->arena, coords->data, U->data, R->grad, coords->grad, U->grad,
                       Ba, G, Np, C, nb, g};
        vt_tape_record(t, "liere_rot", rot_bwd, c);
    }
    return R;
}

/* ---- Block-diagonal apply ---- */

/* Blocks up to this size are applied with plain loops (a GEMM call per 2 x 2 block costs
 * more than the product). */
#define SMALL_G 4

typedef struct {
    const float *x, *R, *dy;
    float *dx, *dR;
    int64_t B, H, N, hd, Ba, G, g;
} apply_ctx;

/* The rows (sample, head) sharing matrix (ba, h'): M rows `stride` floats apart from
 * base offset `off` (token 0, channel 0). */
static void rows_of(int64_t B, int64_t H, int64_t N, int64_t hd, int64_t Ba, int64_t G, int64_t ba,
                    int64_t h, int64_t *M, int64_t *stride, int64_t *off) {
    *M = (Ba == 1 ? B : 1) * (G == 1 ? H : 1);
    *stride = (G == 1 ? 1 : H) * N * hd;
    *off = ((Ba == 1 ? 0 : ba) * H + (G == 1 ? 0 : h)) * N * hd;
}

/* Small blocks (g <= SMALL_G), slab by slab so memory is read contiguously:
 * dx_blk += R^T dy_blk per (sample, head); dR += dy x^T per (ba, h', position), summed
 * over the samples / heads sharing it in a fixed order. */
static void apply_bwd_small(const apply_ctx *c) {
    int64_t B = c->B, H = c->H, N = c->N, hd = c->hd, Ba = c->Ba, G = c->G, g = c->g;
    int64_t nb = hd / g, Np = N - 1, gg = g * g;
    if (c->dx) {
        #pragma omp parallel for schedule(static) if (B * H * N * hd * g > VT_PAR_MIN_WORK)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            const float *Rb = c->R + ((Ba > 1 ? b : 0) * G + (G > 1 ? h : 0)) * Np * nb * gg;
            const float *dy = c->dy + bh * N * hd;
            float *dx = c->dx + bh * N * hd;
            for (int64_t i = 0; i < hd; i++) dx[i] += dy[i];
            for (int64_t n = 1; n < N; n++)
                for (int64_t bl = 0; bl < nb; bl++) {
                    const float *R = Rb + ((n - 1) * nb + bl) * gg, *d = dy + n * hd + bl * g;
                    float *o = dx + n * hd + bl * g;
                    for (int64_t i = 0; i < g; i++)
                        for (int64_t j = 0; j < g; j++) o[j] += R[i * g + j] * d[i];
                }
        }
    }
    if (c->dR) {
        int64_t nbat = Ba > 1 ? 1 : B, nh = G > 1 ? 1 : H;
        #pragma omp parallel for schedule(static) if (B * H * N * hd * g > VT_PAR_MIN_WORK)
        for (int64_t r = 0; r < Ba * G * Np; r++) {
            int64_t ba = r / (G * Np), hg = (r / Np) % G, n = 1 + r % Np;
            float *dR = c->dR + r * nb * gg;
            for (int64_t bi = 0; bi < nbat; bi++)
                for (int64_t hi = 0; hi < nh; hi++) {
                    int64_t b = Ba > 1 ? ba : bi, h = G > 1 ? hg : hi;
                    const float *xr = c->x + ((b * H + h) * N + n) * hd;
                    const float *dy = c->dy + ((b * H + h) * N + n) * hd;
                    for (int64_t bl = 0; bl < nb; bl++)
                        for (int64_t i = 0; i < g; i++)
                            for (int64_t j = 0; j < g; j++)
                                dR[bl * gg + i * g + j] += dy[bl * g + i] * xr[bl * g + j];
                }
        }
    }
}

static void apply_bwd(void *p) {
    apply_ctx *c = p;
    int64_t B = c->B, H = c->H, N = c->N, hd = c->hd, Ba = c->Ba, G = c->G, g = c->g;
    int64_t nb = hd / g, Np = N - 1, gg = g * g, items = Ba * G * Np * nb;
    if (g <= SMALL_G) {
        apply_bwd_small(c);
        return;
    }
    int64_t M0, st0, off0;
    rows_of(B, H, N, hd, Ba, G, 0, 0, &M0, &st0, &off0);
    size_t wf = vt_k.gemm_work_floats((int)M0, (int)g, (int)g);
    size_t wf2 = vt_k.gemm_work_floats((int)g, (int)g, (int)M0);
    if (wf2 > wf) wf = wf2;
    if (c->dx) {
        for (int64_t bh = 0; bh < B * H; bh++)
            for (int64_t i = 0; i < hd; i++) c->dx[bh * N * hd + i] += c->dy[bh * N * hd + i];
    }
    #pragma omp parallel for schedule(static) if (B * H * N * hd * g > VT_PAR_MIN_WORK)
    for (int64_t it = 0; it < items; it++) {
        item_idx x = item_of(it, G, Np, nb);
        int64_t M, stride, off;
        rows_of(B, H, N, hd, Ba, G, x.ba, x.h, &M, &stride, &off);
        off += (1 + x.np) * hd + x.n * g;
        const float *R = c->R + it * gg;
        float *work = vt_gemm_workspace(wf);
        if (c->dx)
            vt_k.gemm(0, 0, (int)M, (int)g, (int)g, 1.0f, c->dy + off, (int)stride, R, (int)g, 1.0f,
                      c->dx + off, (int)stride, work);
        if (c->dR)
            vt_k.gemm(1, 0, (int)g, (int)g, (int)M, 1.0f, c->dy + off, (int)stride, c->x + off,
                      (int)stride, 1.0f, c->dR + it * gg, (int)g, work);
    }
}

/* x (B, H, N, hd), R (Ba, G, N - 1, nb g g) with Ba in {1, B}, G in {1, H}: for token
 * n >= 1 every block of g channels becomes R_blk x_blk; token 0 is copied. */
static vt_tensor *liere_apply(vt_tape *t, vt_tensor *x, vt_tensor *R, int g) {
    char sa[64], sb[64];
    int64_t B = x->shape[0], H = x->shape[1], N = x->shape[2], hd = x->shape[3];
    int64_t Ba = R->shape[0], G = R->shape[1], nb = hd / g, Np = N - 1, gg = (int64_t)g * g;
    VT_ASSERT(x->ndim == 4 && R->ndim == 4 && hd % g == 0 && (Ba == 1 || Ba == B) &&
                  (G == 1 || G == H) && R->shape[2] == Np && R->shape[3] == nb * gg,
              "liere apply: R %s does not fit x %s with blocks of %d",
              vt_shape_str(R, sb, sizeof sb), vt_shape_str(x, sa, sizeof sa), g);
    int grad = vt_tape_wants_grad(t, x, R, NULL);
    vt_tensor *y = vt_tape_new(t, grad, 4, x->shape);
    if (g <= SMALL_G) {
        #pragma omp parallel for schedule(static) if (B * H * N * hd * g > VT_PAR_MIN_WORK)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            const float *Rb = R->data + ((Ba > 1 ? b : 0) * G + (G > 1 ? h : 0)) * Np * nb * gg;
            const float *xs = x->data + bh * N * hd;
            float *ys = y->data + bh * N * hd;
            memcpy(ys, xs, (size_t)hd * sizeof(float));
            for (int64_t n = 1; n < N; n++)
                for (int64_t bl = 0; bl < nb; bl++) {
                    const float *Rm = Rb + ((n - 1) * nb + bl) * gg, *xr = xs + n * hd + bl * g;
                    float *yr = ys + n * hd + bl * g;
                    for (int64_t i = 0; i < g; i++) {
                        float acc = 0.0f;
                        for (int64_t j = 0; j < g; j++) acc += Rm[i * g + j] * xr[j];
                        yr[i] = acc;
                    }
                }
        }
    } else {
        int64_t items = Ba * G * Np * nb, M0, st0, off0;
        rows_of(B, H, N, hd, Ba, G, 0, 0, &M0, &st0, &off0);
        size_t wf = vt_k.gemm_work_floats((int)M0, g, g);
        for (int64_t bh = 0; bh < B * H; bh++)
            memcpy(y->data + bh * N * hd, x->data + bh * N * hd, (size_t)hd * sizeof(float));
        #pragma omp parallel for schedule(static) if (B * H * N * hd * g > VT_PAR_MIN_WORK)
        for (int64_t it = 0; it < items; it++) {
            item_idx ix = item_of(it, G, Np, nb);
            int64_t M, stride, off;
            rows_of(B, H, N, hd, Ba, G, ix.ba, ix.h, &M, &stride, &off);
            off += (1 + ix.np) * hd + ix.n * g;
            vt_k.gemm(0, 1, (int)M, g, g, 1.0f, x->data + off, (int)stride, R->data + it * gg, g,
                      0.0f, y->data + off, (int)stride, vt_gemm_workspace(wf));
        }
    }
    if (grad) {
        apply_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (apply_ctx){x->data, R->data, y->grad, x->grad, R->grad, B, H, N, hd, Ba, G, g};
        vt_tape_record(t, "liere_apply", apply_bwd, c);
    }
    return y;
}

/* ---- The kinds ---- */

/* The LieRE paper's best: normalized positions, one generator set for the model; dense
 * blocks of the whole head (liere) or 2 x 2 blocks (liere_commute). */
static void liere_resolve(const vt_pe_config *pe, int hd, vt_pe_config *def) {
    def->positions = VT_POS_NORMALIZED;
    def->share = VT_SHARE_ALL;
    def->block_size = pe->kind == VT_PE_LIERE_COMMUTE ? 2 : hd;
}

static vt_status liere_check(const vt_pe_config *pe, int hd, const char *src) {
    vt_status st = vt_rot_check_pairs(pe, hd, src);
    if (st) return st;
    int g = pe->block_size;
    if (pe->kind == VT_PE_LIERE_COMMUTE && g != 2)
        return vt_fail(VT_ERR_USAGE, "%s: pe.block_size = %d is invalid for liere_commute: must be 2",
                       src, g);
    if (g < 2 || hd % g != 0)
        return vt_fail(VT_ERR_USAGE, "%s: pe.block_size = %d is invalid for liere: must be >= 2 and "
                       "divide the head dim %d", src, g, hd);
    return VT_OK;
}

static void liere_create(vt_pe *pe) {
    int g = pe->cfg.block_size, hd = pe->hd, C = pe->cfg.coord_dim;
    VT_ASSERT(g >= 2 && hd % g == 0 && (pe->cfg.kind != VT_PE_LIERE_COMMUTE || g == 2) && C >= 1 &&
              C <= 3, "liere: block size %d, head dim %d, coord_dim %d", g, hd, C);
    liere_state *s = vt_xcalloc(1, sizeof *s);
    s->g = g;
    s->nb = hd / g;
    s->C = C;
    vt_rot_share_dims(pe, &s->Lp, &s->Hp);
    int64_t shape[6] = {s->Lp, s->Hp, C, s->nb, g, g};
    s->param = vt_pe_declare(pe, "pe.liere_u", 6, shape);
    s->R = vt_xcalloc((size_t)s->Lp, sizeof *s->R);
    pe->state = s;
}

static void liere_init(vt_pe *pe, vt_rng *rng) {
    liere_state *s = pe->state;
    vt_tensor *p = pe->params[s->param].t;
    int g = s->g;
    int64_t blocks = p->size / ((int64_t)g * g);
    for (int64_t bl = 0; bl < blocks; bl++) {
        float *u = p->data + bl * g * g;
        for (int i = 0; i < g; i++)
            for (int j = 0; j < g; j++)
                u[i * g + j] =
                    j > i ? (float)(2.0 * M_PI * vt_rng_uniform(rng) * pe->cfg.init_scale) : 0.0f;
    }
}

void vt_pe_liere_prepare_coords(vt_pe *pe, vt_tape *t, vt_tensor *coords) {
    VT_ASSERT(pe->kind == &vt_pe_liere_ops || pe->kind == &vt_pe_liere_commute_ops,
              "liere tables on a %s PE", vt_pe_kind_name(pe->kind->kind));
    liere_state *s = pe->state;
    VT_ASSERT(coords->ndim == 3 && coords->shape[2] == s->C, "liere: coords need C = %d", s->C);
    int64_t gg = (int64_t)s->g * s->g, per = (int64_t)s->Hp * s->C * s->nb * gg;
    int64_t shape[4] = {s->Hp, s->C, s->nb, gg};
    for (int l = 0; l < s->Lp; l++) {
        vt_tensor *U = vt_rot_param_view(t, pe->params[s->param].t, l * per, 4, shape);
        s->R[l] = liere_rot(t, coords, U, s->g);
    }
}

static void liere_prepare(vt_pe *pe, vt_tape *t, const vt_tensor *images) {
    vt_pe_liere_prepare_coords(pe, t, vt_rot_coords(pe, t, images));
}

static void liere_apply_qk(vt_pe *pe, vt_tape *t, int layer, vt_tensor **q, vt_tensor **k) {
    liere_state *s = pe->state;
    vt_tensor *R = s->R[vt_rot_layer(pe, layer)];
    VT_ASSERT(R != NULL, "liere: apply_qk before prepare");
    *q = liere_apply(t, *q, R, s->g);
    *k = liere_apply(t, *k, R, s->g);
}

static void liere_destroy(vt_pe *pe) {
    liere_state *s = pe->state;
    if (!s) return;
    free(s->R);
    free(s);
    pe->state = NULL;
}

/* The lower triangle and diagonal of each g x g block of pe.liere_u are never read. */
static void liere_clear_unused(vt_pe *pe) {
    liere_state *s = pe->state;
    vt_rot_clear_unused(pe->params[s->param].t, s->g);
}

const vt_pe_kind_ops vt_pe_liere_ops = {
    .kind = VT_PE_LIERE,
    .rotary = 1,
    .resolve = liere_resolve,
    .check = liere_check,
    .defaults_doc = "positions normalized, share all, block_size = head dim",
    .rules_doc = "an even head dim; block_size >= 2, dividing the head dim",
    .create = liere_create,
    .init = liere_init,
    .prepare = liere_prepare,
    .apply_qk = liere_apply_qk,
    .clear_unused = liere_clear_unused,
    .destroy = liere_destroy,
};

const vt_pe_kind_ops vt_pe_liere_commute_ops = {
    .kind = VT_PE_LIERE_COMMUTE,
    .rotary = 1,
    .resolve = liere_resolve,
    .check = liere_check,
    .defaults_doc = "positions normalized, share all, block_size 2",
    .rules_doc = "an even head dim; block_size 2",
    .create = liere_create,
    .init = liere_init,
    .prepare = liere_prepare,
    .apply_qk = liere_apply_qk,
    .clear_unused = liere_clear_unused,
    .destroy = liere_destroy,
};
