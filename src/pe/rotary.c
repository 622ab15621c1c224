/* rotary.c - the shared rotary infrastructure declared in rotary.h: parameter sharing,
 * token coordinates (with the RGB-D depth coordinate and its learnable scale), the
 * differentiable angle / cos-sin / pair-rotation / per-head-matrix ops, and the
 * RoPE-Axial and RoPE-Mixed frequency tables. Contracts are in rotary.h.
 *
 * Determinism: every output element (forward and gradient) is written by one thread,
 * and reductions over the batch / heads / tokens run in a fixed order, so results do
 * not depend on the thread count.
 */
#include "rotary.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels.h"
#include "kinds.h"
#include "ops/ops.h"
#include "ops/par.h"

/* ---- Sharing ---- */

void vt_rot_share_dims(const vt_pe *pe, int *Lp, int *Hp) {
    vt_share s = pe->cfg.share;
    *Lp = (s == VT_SHARE_NONE || s == VT_SHARE_HEADS) ? pe->L : 1;
    *Hp = (s == VT_SHARE_NONE || s == VT_SHARE_LAYERS) ? pe->H : 1;
}

int vt_rot_layer(const vt_pe *pe, int layer) {
    int Lp, Hp;
    vt_rot_share_dims(pe, &Lp, &Hp);
    return Lp == 1 ? 0 : layer;
}

void vt_rot_clear_unused(vt_tensor *u, int g) {
    int64_t gg = (int64_t)g * g;
    VT_ASSERT(u->size % gg == 0, "clear_unused: %lld elements are not whole %d x %d blocks",
              (long long)u->size, g, g);
    for (int64_t b = 0; b < u->size; b += gg)
        for (int i = 0; i < g; i++)
            for (int j = 0; j <= i; j++) u->data[b + i * g + j] = 0.0f;
}

vt_tensor *vt_rot_param_view(vt_tape *t, const vt_tensor *param, int64_t offset, int ndim,
                             const int64_t *shape) {
    vt_tensor *v = vt_tensor_wrap(t->arena, param->data + offset, ndim, shape);
    VT_ASSERT(offset >= 0 && offset + v->size <= param->size,
              "param view [%lld, %lld) outside a parameter of %lld elements", (long long)offset,
              (long long)(offset + v->size), (long long)param->size);
    v->grad = param->grad ? param->grad + offset : NULL;
    return v;
}

/* ---- Coordinates ---- */

/* Whether z comes from the images' depth channel (then positions are per sample). */
static int has_depth(const vt_pe *pe, const vt_tensor *images) {
    if (pe->depth_param < 0 || !images) return 0;
    VT_ASSERT(images->ndim == 4 && images->shape[1] == 4,
              "RGB-D positions need images (B, 4, S, S) with depth in channel 3");
    return 1;
}

int vt_rot_coords_batch(const vt_pe *pe, const vt_tensor *images) {
    return has_depth(pe, images) ? (int)images->shape[0] : 1;
}

/* Scale of the position mode for one axis (x: n = cols, n_train = train_cols). */
static double axis_scale(vt_pos_mode mode, int n, int n_train) {
    switch (mode) {
    case VT_POS_NORMALIZED: return 1.0 / (double)(n_train - 1 > 1 ? n_train - 1 : 1);
    case VT_POS_INTERPOLATE: return (double)n_train / (double)n;
    case VT_POS_INDEX: break;
    }
    return 1.0;
}

/* Mean depth of every patch: dmean (B, Np) from channel 3 of images (B, 4, S, S). */
static void patch_depth_means(const vt_tensor *images, int rows, int cols, int P, float *dmean) {
    int64_t B = images->shape[0], S = images->shape[2];
    VT_ASSERT(images->shape[3] == S && S == (int64_t)rows * P && S == (int64_t)cols * P,
              "depth: images of side %lld do not match a %d x %d grid of patch %d", (long long)S, rows,
              cols, P);
    int64_t Np = (int64_t)rows * cols;
    #pragma omp parallel for schedule(static) if (B * Np * P * P > VT_PAR_MIN)
    for (int64_t bn = 0; bn < B * Np; bn++) {
        int64_t b = bn / Np, n = bn % Np, i = n / cols, j = n % cols;
        const float *d = images->data + (b * 4 + 3) * S * S;
        double s = 0.0;
        for (int64_t y = i * P; y < (i + 1) * P; y++)
            for (int64_t x = j * P; x < (j + 1) * P; x++) s += d[y * S + x];
        dmean[bn] = (float)(s / ((double)P * P));
    }
}

/* Fill out (Ba, Np, C); dmean (Ba, Np) receives the raw depth means with depth. */
static void coords_fill(const vt_pe *pe, int rows, int cols, const vt_tensor *images, float *out,
                        float *dmean) {
    int C = pe->cfg.coord_dim, Ba = vt_rot_coords_batch(pe, images);
    int64_t Np = (int64_t)rows * cols;
    VT_ASSERT(C >= 1 && C <= 3, "pe.coord_dim %d out of range", C);
    const double *off = pe->coord_offset;
    if (C == 1) {
        int64_t nt = (int64_t)pe->train_rows * pe->train_cols;
        double sc = axis_scale(pe->cfg.positions, (int)Np, (int)nt);
        for (int64_t n = 0; n < Np; n++) out[n] = (float)((double)n * sc + off[0]);
    } else {
        double sx = axis_scale(pe->cfg.positions, cols, pe->train_cols);
        double sy = axis_scale(pe->cfg.positions, rows, pe->train_rows);
        for (int64_t n = 0; n < Np; n++) {
            float *r = out + n * C;
            r[0] = (float)((double)(n % cols) * sx + off[0]);
            r[1] = (float)((double)(n / cols) * sy + off[1]);
            if (C == 3) r[2] = (float)off[2];
        }
    }
    for (int b = 1; b < Ba; b++) memcpy(out + b * Np * C, out, (size_t)(Np * C) * sizeof(float));
    if (has_depth(pe, images)) {
        VT_ASSERT(C == 3, "per-sample depth positions need pe.coord_dim 3, found %d", C);
        patch_depth_means(images, rows, cols, pe->P, dmean);
        double scale = pe->params[pe->depth_param].t->data[0];
        for (int64_t bn = 0; bn < Ba * Np; bn++)
            out[bn * 3 + 2] = (float)((double)dmean[bn] * scale + pe->coord_offset[2]);
    }
}

void vt_pe_coords(const vt_pe *pe, int rows, int cols, const vt_tensor *images, float *out) {
    int Ba = vt_rot_coords_batch(pe, images);
    size_t bytes = has_depth(pe, images) ? (size_t)Ba * rows * cols * sizeof(float) : 0;
    float *dmean = bytes ? malloc(bytes) : NULL;
    if (bytes && !dmean) vt_out_of_memory("the patches' depth means", bytes);
    coords_fill(pe, rows, cols, images, out, dmean);
    free(dmean);
}

typedef struct {
    const float *dy, *dmean;
    float *dscale;
    int64_t n; /* Ba Np */
} coords_ctx;

static void coords_bwd(void *p) {
    coords_ctx *c = p;
    double s = 0.0;
    for (int64_t i = 0; i < c->n; i++) s += (double)c->dy[i * 3 + 2] * c->dmean[i];
    c->dscale[0] += (float)s;
}

vt_tensor *vt_rot_coords(vt_pe *pe, vt_tape *t, const vt_tensor *images) {
    int C = pe->cfg.coord_dim, Ba = vt_rot_coords_batch(pe, images);
    int64_t Np = (int64_t)pe->rows * pe->cols;
    vt_tensor *scale = pe->depth_param >= 0 ? pe->params[pe->depth_param].t : NULL;
    int depth = has_depth(pe, images), g = depth && vt_tape_wants_grad(t, scale, NULL, NULL);
    int64_t shape[3] = {Ba, Np, C};
    vt_tensor *y = vt_tape_new(t, g, 3, shape);
    float *dmean = depth ? vt_arena_alloc(t->arena, (size_t)(Ba * Np) * sizeof(float)) : NULL;
    coords_fill(pe, pe->rows, pe->cols, images, y->data, dmean);
    if (g) {
        coords_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (coords_ctx){y->grad, dmean, scale->grad, Ba * Np};
        vt_tape_record(t, "rot_coords", coords_bwd, c);
    }
    return y;
}

/* ---- Angles ---- */

typedef struct {
    const float *coords, *freqs, *dy;
    float *dcoords, *dfreqs;
    int64_t Ba, G, Np, npr, C;
} angles_ctx;

static void angles_bwd(void *p) {
    angles_ctx *c = p;
    int64_t Ba = c->Ba, G = c->G, Np = c->Np, npr = c->npr, C = c->C;
    if (c->dcoords) {
        #pragma omp parallel for schedule(static) if (Ba * Np * G * npr * C > VT_PAR_MIN)
        for (int64_t bn = 0; bn < Ba * Np; bn++) {
            int64_t b = bn / Np, n = bn % Np;
            for (int64_t k = 0; k < C; k++) {
                double s = 0.0;
                for (int64_t g = 0; g < G; g++) {
                    const float *dy = c->dy + ((b * G + g) * Np + n) * npr;
                    const float *f = c->freqs + g * npr * C;
                    for (int64_t q = 0; q < npr; q++) s += (double)dy[q] * f[q * C + k];
                }
                c->dcoords[bn * C + k] += (float)s;
            }
        }
    }
    if (c->dfreqs) {
        #pragma omp parallel for schedule(static) if (Ba * Np * G * npr * C > VT_PAR_MIN)
        for (int64_t gp = 0; gp < G * npr; gp++) {
            int64_t g = gp / npr, q = gp % npr;
            for (int64_t k = 0; k < C; k++) {
                double s = 0.0;
                for (int64_t b = 0; b < Ba; b++) {
                    const float *dy = c->dy + (b * G + g) * Np * npr + q;
                    const float *x = c->coords + b * Np * C + k;
                    for (int64_t n = 0; n < Np; n++) s += (double)dy[n * npr] * x[n * C];
                }
                c->dfreqs[gp * C + k] += (float)s;
            }
        }
    }
}

vt_tensor *vt_op_rot_angles(vt_tape *t, vt_tensor *coords, vt_tensor *freqs) {
    char sa[64], sb[64];
    VT_ASSERT(coords->ndim == 3 && freqs->ndim == 3 && coords->shape[2] == freqs->shape[2],
              "rot_angles: coords %s and freqs %s, expected (Ba, Np, C) and (G, npr, C)",
              vt_shape_str(coords, sa, sizeof sa), vt_shape_str(freqs, sb, sizeof sb));
    int64_t Ba = coords->shape[0], Np = coords->shape[1], C = coords->shape[2];
    int64_t G = freqs->shape[0], npr = freqs->shape[1];
    int g = vt_tape_wants_grad(t, coords, freqs, NULL);
    int64_t shape[4] = {Ba, G, Np, npr};
    vt_tensor *y = vt_tape_new(t, g, 4, shape);
    #pragma omp parallel for schedule(static) if (Ba * G * Np * npr * C > VT_PAR_MIN)
    for (int64_t r = 0; r < Ba * G * Np; r++) {
        int64_t b = r / (G * Np), gg = (r / Np) % G, n = r % Np;
        const float *x = coords->data + (b * Np + n) * C;
        const float *f = freqs->data + gg * npr * C;
        float *o = y->data + r * npr;
        for (int64_t q = 0; q < npr; q++) {
            double s = 0.0;
            for (int64_t k = 0; k < C; k++) s += (double)x[k] * f[q * C + k];
            o[q] = (float)s;
        }
    }
    if (g) {
        angles_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (angles_ctx){coords->data, freqs->data, y->grad, coords->grad, freqs->grad,
                          Ba, G, Np, npr, C};
        vt_tape_record(t, "rot_angles", angles_bwd, c);
    }
    return y;
}

/* ---- cos / sin ---- */

typedef struct {
    const float *cs, *dcs;
    float *dang;
    int64_t n;
} cossin_ctx;

static void cossin_bwd(void *p) {
    cossin_ctx *c = p;
    #pragma omp parallel for schedule(static) if (c->n > VT_PAR_MIN)
    for (int64_t i = 0; i < c->n; i++)
        c->dang[i] += c->cs[2 * i] * c->dcs[2 * i + 1] - c->cs[2 * i + 1] * c->dcs[2 * i];
}

vt_tensor *vt_op_rot_cossin(vt_tape *t, vt_tensor *ang) {
    char sa[64];
    VT_ASSERT(ang->ndim == 4, "rot_cossin: angles %s, expected (Ba, G, Np, npr)",
              vt_shape_str(ang, sa, sizeof sa));
    int g = vt_tape_wants_grad(t, ang, NULL, NULL);
    int64_t shape[4] = {ang->shape[0], ang->shape[1], ang->shape[2], 2 * ang->shape[3]};
    vt_tensor *y = vt_tape_new(t, g, 4, shape);
    int64_t n = ang->size;
    #pragma omp parallel for schedule(static) if (n > VT_PAR_MIN / 8) /* a sine and a cosine: ~8 passes' work */
    for (int64_t i = 0; i < n; i++) {
        y->data[2 * i] = cosf(ang->data[i]);
        y->data[2 * i + 1] = sinf(ang->data[i]);
    }
    if (g) {
        cossin_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (cossin_ctx){y->data, y->grad, ang->grad, n};
        vt_tape_record(t, "rot_cossin", cossin_bwd, c);
    }
    return y;
}

/* ---- Pair rotation ---- */

typedef struct {
    const float *x, *cs, *dy;
    float *dx, *dcs;
    int64_t B, H, N, hd, Ba, G, npr;
} pairs_ctx;

static void pairs_bwd(void *p) {
    pairs_ctx *c = p;
    int64_t B = c->B, H = c->H, N = c->N, hd = c->hd, G = c->G, npr = c->npr, Np = N - 1;
    if (c->dx) {
        #pragma omp parallel for schedule(static) if (B * H > 1 && B * H * N * hd > VT_PAR_MIN)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t b = bh / H, h = bh % H;
            const float *cs = c->cs + ((c->Ba > 1 ? b : 0) * G + (G > 1 ? h : 0)) * Np * 2 * npr;
            const float *dy = c->dy + bh * N * hd;
            float *dx = c->dx + bh * N * hd;
            vt_k.add(dx, dy, dx, (size_t)hd); /* token 0 (CLS) is not rotated */
            for (int64_t n = 1; n < N; n++)
                vt_k.rot_pairs_bwd(dy + n * hd, cs + (n - 1) * 2 * npr, (size_t)npr, (size_t)hd, dx + n * hd);
        }
    }
    if (c->dcs) {
        int64_t nb = c->Ba > 1 ? 1 : B, nh = G > 1 ? 1 : H;
        #pragma omp parallel for schedule(static) if (B * H * N * hd > VT_PAR_MIN)
        for (int64_t r = 0; r < c->Ba * G * Np; r++) {
            int64_t ba = r / (G * Np), g = (r / Np) % G, n = 1 + r % Np;
            float *d = c->dcs + r * 2 * npr;
            for (int64_t bi = 0; bi < nb; bi++) {
                int64_t b = c->Ba > 1 ? ba : bi;
                for (int64_t hi = 0; hi < nh; hi++) {
                    int64_t h = G > 1 ? g : hi;
                    int64_t o = ((b * H + h) * N + n) * hd;
                    vt_k.rot_pairs_bwd_cs(c->x + o, c->dy + o, (size_t)npr, d);
                }
            }
        }
    }
}

vt_tensor *vt_op_rot_pairs(vt_tape *t, vt_tensor *x, vt_tensor *cs) {
    char sa[64], sb[64];
    VT_ASSERT(x->ndim == 4 && cs->ndim == 4, "rot_pairs: x %s, cs %s: expected 4-D",
              vt_shape_str(x, sa, sizeof sa), vt_shape_str(cs, sb, sizeof sb));
    int64_t B = x->shape[0], H = x->shape[1], N = x->shape[2], hd = x->shape[3];
    int64_t Ba = cs->shape[0], G = cs->shape[1], npr = cs->shape[3] / 2;
    VT_ASSERT((Ba == 1 || Ba == B) && (G == 1 || G == H) && cs->shape[2] == N - 1 &&
                  cs->shape[3] % 2 == 0 && 2 * npr <= hd,
              "rot_pairs: cs %s does not fit x %s (expected (1 or B, 1 or H, N - 1, 2 npr <= hd))",
              vt_shape_str(cs, sb, sizeof sb), vt_shape_str(x, sa, sizeof sa));
    int g = vt_tape_wants_grad(t, x, cs, NULL);
    vt_tensor *y = vt_tape_new(t, g, 4, x->shape);
    int64_t Np = N - 1;
    #pragma omp parallel for schedule(static) if (B * H > 1 && B * H * N * hd > VT_PAR_MIN)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t b = bh / H, h = bh % H;
        const float *c = cs->data + ((Ba > 1 ? b : 0) * G + (G > 1 ? h : 0)) * Np * 2 * npr;
        const float *xs = x->data + bh * N * hd;
        float *ys = y->data + bh * N * hd;
        memcpy(ys, xs, (size_t)hd * sizeof(float));
        for (int64_t n = 1; n < N; n++)
            vt_k.rot_pairs(xs + n * hd, c + (n - 1) * 2 * npr, (size_t)npr, (size_t)hd, ys + n * hd);
    }
    if (g) {
        pairs_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (pairs_ctx){x->data, cs->data, y->grad, x->grad, cs->grad, B, H, N, hd, Ba, G, npr};
        vt_tape_record(t, "rot_pairs", pairs_bwd, c);
    }
    return y;
}

/* ---- Per-head matrix ---- */

typedef struct {
    const float *x, *m, *dy;
    float *dx, *dm;
    int64_t B, H, N, hd, G;
} hmm_ctx;

static void hmm_bwd(void *p) {
    hmm_ctx *c = p;
    int64_t B = c->B, H = c->H, N = c->N, G = c->G;
    int hd = (int)c->hd, Np = (int)(N - 1);
    if (c->dx) {
        #pragma omp parallel for schedule(static) if (B * H > 1 && B * H * N * hd * hd > VT_PAR_MIN_WORK)
        for (int64_t bh = 0; bh < B * H; bh++) {
            int64_t h = bh % H;
            const float *m = c->m + (G > 1 ? h : 0) * hd * hd;
            const float *dy = c->dy + bh * N * hd;
            float *dx = c->dx + bh * N * hd;
            for (int i = 0; i < hd; i++) dx[i] += dy[i];
            if (Np == 0) continue;
            float *w = vt_gemm_workspace(vt_k.gemm_work_floats(Np, hd, hd));
            vt_k.gemm(0, 0, Np, hd, hd, 1.0f, dy + hd, hd, m, hd, 1.0f, dx + hd, hd, w);
        }
    }
    if (c->dm && Np > 0) {
        int64_t nb = G > 1 ? B : B * H;
        #pragma omp parallel for schedule(static) if (G > 1 && B * H * N * hd * hd > VT_PAR_MIN_WORK)
        for (int64_t g = 0; g < G; g++) {
            float *w = vt_gemm_workspace(vt_k.gemm_work_floats(hd, hd, Np));
            for (int64_t i = 0; i < nb; i++) {
                int64_t bh = G > 1 ? i * H + g : i;
                vt_k.gemm(1, 0, hd, hd, Np, 1.0f, c->dy + bh * N * hd + hd, hd, c->x + bh * N * hd + hd, hd,
                          1.0f, c->dm + g * hd * hd, hd, w);
            }
        }
    }
}

vt_tensor *vt_op_head_matmul(vt_tape *t, vt_tensor *x, vt_tensor *m) {
    char sa[64], sb[64];
    VT_ASSERT(x->ndim == 4 && m->ndim == 3, "head_matmul: x %s, m %s: expected 4-D and 3-D",
              vt_shape_str(x, sa, sizeof sa), vt_shape_str(m, sb, sizeof sb));
    int64_t B = x->shape[0], H = x->shape[1], N = x->shape[2], G = m->shape[0];
    int hd = (int)x->shape[3], Np = (int)(N - 1);
    VT_ASSERT((G == 1 || G == H) && m->shape[1] == hd && m->shape[2] == hd,
              "head_matmul: m %s does not fit x %s (expected (1 or H, hd, hd))",
              vt_shape_str(m, sb, sizeof sb), vt_shape_str(x, sa, sizeof sa));
    int g = vt_tape_wants_grad(t, x, m, NULL);
    vt_tensor *y = vt_tape_new(t, g, 4, x->shape);
    #pragma omp parallel for schedule(static) if (B * H > 1 && B * H * N * hd * hd > VT_PAR_MIN_WORK)
    for (int64_t bh = 0; bh < B * H; bh++) {
        int64_t h = bh % H;
        const float *xs = x->data + bh * N * hd, *mm = m->data + (G > 1 ? h : 0) * hd * hd;
        float *ys = y->data + bh * N * hd;
        memcpy(ys, xs, (size_t)hd * sizeof(float));
        if (Np > 0) {
            float *w = vt_gemm_workspace(vt_k.gemm_work_floats(Np, hd, hd));
            vt_k.gemm(0, 1, Np, hd, hd, 1.0f, xs + hd, hd, mm, hd, 0.0f, ys + hd, hd, w);
        }
    }
    if (g) {
        hmm_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (hmm_ctx){x->data, m->data, y->grad, x->grad, m->grad, B, H, N, hd, G};
        vt_tape_record(t, "head_matmul", hmm_bwd, c);
    }
    return y;
}

vt_status vt_rot_check_pairs(const vt_pe_config *pe, int hd, const char *src) {
    if (hd % 2 != 0)
        return vt_fail(VT_ERR_USAGE, "%s: head dim model.width / model.heads = %d is odd; pe.kind = %s "
                       "rotates channel pairs and needs an even head dim", src, hd,
                       vt_pe_kind_name(pe->kind));
    return VT_OK;
}

vt_status vt_rot_check_axial(const vt_pe_config *pe, int hd, const char *variant, const char *src) {
    if (hd < 2 * pe->coord_dim)
        return vt_fail(VT_ERR_USAGE, "%s: pe.kind = %s%s with pe.coord_dim = %d needs a head dim >= %d "
                       "(one pair per axis); found %d", src, vt_pe_kind_name(pe->kind), variant,
                       pe->coord_dim, 2 * pe->coord_dim, hd);
    return VT_OK;
}

vt_status vt_rot_check_mixed_init(const vt_pe_config *pe, int hd, const char *src) {
    const char *kind = vt_pe_kind_name(pe->kind);
    if (pe->coord_dim == 2 && hd % 4 != 0)
        return vt_fail(VT_ERR_USAGE, "%s: pe.kind = %s (RoPE-Mixed init, pe.coord_dim = 2) needs a head "
                       "dim divisible by 4; found %d", src, kind, hd);
    if (hd < 4)
        return vt_fail(VT_ERR_USAGE, "%s: pe.kind = %s (RoPE-Mixed init) needs a head dim >= 4; found %d",
                       src, kind, hd);
    return VT_OK;
}

/* ---- Frequencies ---- */

int vt_rot_axial_freqs(int hd, int C, double theta, float *out) {
    int k = hd / (2 * C), npr = C * k;
    VT_ASSERT(k >= 1, "rope_axial: head dim %d too small for %d axes", hd, C);
    memset(out, 0, (size_t)npr * C * sizeof(float));
    for (int a = 0; a < C; a++)
        for (int i = 0; i < k; i++) out[(a * k + i) * C + a] = (float)pow(theta, -(double)i / k);
    return npr;
}

double vt_rot_mixed_init(int hd, int C, double theta, vt_rng *rng, float *out) {
    int q = hd / 4, np = hd / 2;
    VT_ASSERT(q >= 1, "rope_mixed init: head dim %d < 4", hd);
    if (C == 2) {
        VT_ASSERT(hd % 4 == 0, "rope_mixed init with C = 2 needs hd %% 4 == 0, found %d", hd);
        double alpha = 2.0 * M_PI * vt_rng_uniform(rng), ca = cos(alpha), sa = sin(alpha);
        for (int p = 0; p < np; p++) {
            double m = pow(theta, -4.0 * (p % q) / hd);
            out[2 * p] = (float)(p < q ? m * ca : -m * sa);
            out[2 * p + 1] = (float)(p < q ? m * sa : m * ca);
        }
        return alpha;
    }
    for (int p = 0; p < np; p++) {
        double m = pow(theta, -4.0 * (p % q) / hd);
        if (C == 1) {
            out[p] = (float)(vt_rng_uniform(rng) < 0.5 ? -m : m);
            continue;
        }
        double v[3], nrm = 0.0;
        do {
            nrm = 0.0;
            for (int c = 0; c < C; c++) {
                v[c] = vt_rng_normal(rng);
                nrm += v[c] * v[c];
            }
        } while (nrm == 0.0);
        nrm = sqrt(nrm);
        for (int c = 0; c < C; c++) out[p * C + c] = (float)(m * v[c] / nrm);
    }
    return 0.0;
}
