/* qkv_fused.c - the fused q/k preparation of the rotary kinds (declared in rotary.h):
 * vt_op_rot_split_heads, the q / k / v split with the pair rotation (and an optional
 * per-head map of the CLS token) in the same pass, and vt_op_qkv_fold, a per-head matrix
 * folded into the q and k rows of the qkv projection.
 *
 * Why: the unfused path (vt_op_split_heads, then per q and k a per-token GEMM and a
 * vt_op_rot_pairs) walks q and k three to five times forward and as often backward,
 * and that memory traffic, not arithmetic, is what a rotary kind costs over `none`.
 * A kind whose transform is "position-independent matrix M, then a pair rotation"
 * (cayley: M = P; circulant: M = blockdiag F) folds M into the projection
 * (M W q-rows: O(hd^2 D) per layer instead of O(B N hd^2)) and rotates inside the split.
 *
 * Determinism: every output element is written by one thread; the sums into dcs and
 * dcls run in a fixed order (samples, then heads, q before k) whatever the thread count.
 */
#include <string.h>

#include "kernels.h"
#include "ops/ops.h"
#include "ops/par.h"
#include "rotary.h"

/* y = m^T x for one hd-vector (m row-major hd x hd), sums over j in ascending order. */
static void cls_row(const float *m, const float *x, int64_t hd, float *y) {
    for (int64_t i = 0; i < hd; i++) y[i] = 0.0f;
    for (int64_t j = 0; j < hd; j++)
        for (int64_t i = 0; i < hd; i++) y[i] += m[j * hd + i] * x[j];
}

/* ---- Rotary split ---- */

/* Samples per backward chunk: the unit of work and of the partial sums of dcs / dcls. */
#define RSPLIT_CHUNK 4

typedef struct {
    const float *x, *cs, *cls, *dq, *dk, *dv;
    float *dx, *dcs, *dcls;
    float *pcs, *pcls;     /* per-chunk partial sums of dcs (when Ba = 1) and dcls, or NULL */
    int64_t B, N, H, hd, Ba, G, Gc, npr;
} rsplit_ctx;

/* Sample-major like the forward (rows of qkv and q/k/v walked in order: a token-major walk
 * over a large batch touches a different page per sample and thrashes the TLB). Chunk k
 * (samples [4k, 4k + 4)) writes its rows of dqkv, its own rows of dcs when positions are per
 * sample, else its partial sums of dcs and dcls (summed over b, h, q then k), which are then
 * added in chunk order: deterministic for any thread count. */
static void rsplit_bwd(void *p) {
    rsplit_ctx *c = p;
    int64_t B = c->B, N = c->N, H = c->H, hd = c->hd, D = H * hd, npr = c->npr, Np = N - 1;
    int64_t nchunk = (B + RSPLIT_CHUNK - 1) / RSPLIT_CHUNK;
    int64_t ncs = c->G * Np * 2 * npr, ncls = c->Gc * hd * hd;
    #pragma omp parallel for schedule(static) if (nchunk > 1 && B * N * 3 * D > VT_PAR_MIN)
    for (int64_t ch = 0; ch < nchunk; ch++) {
        float *pcs = c->pcs ? c->pcs + ch * ncs : NULL, *pcls = c->pcls ? c->pcls + ch * ncls : NULL;
        if (pcs) memset(pcs, 0, (size_t)ncs * sizeof(float));
        if (pcls) memset(pcls, 0, (size_t)ncls * sizeof(float));
        for (int64_t b = ch * RSPLIT_CHUNK; b < B && b < (ch + 1) * RSPLIT_CHUNK; b++)
            for (int64_t n = 0; n < N; n++) {
                const float *x = c->x + (b * N + n) * 3 * D;
                float *dx = c->dx ? c->dx + (b * N + n) * 3 * D : NULL;
                for (int64_t h = 0; h < H; h++) {
                    int64_t o = ((b * H + h) * N + n) * hd;
                    if (dx) vt_k.add(dx + 2 * D + h * hd, c->dv + o, dx + 2 * D + h * hd, (size_t)hd);
                    int64_t ri = ((c->G > 1 ? h : 0) * Np + n - 1) * 2 * npr;
                    const float *r = n == 0 ? NULL : c->cs + (c->Ba > 1 ? b * ncs : 0) + ri;
                    float *dcs = !r || !c->dcs ? NULL : pcs ? pcs + ri : c->dcs + b * ncs + ri;
                    const float *m = c->cls ? c->cls + (c->Gc > 1 ? h : 0) * hd * hd : NULL;
                    float *dm = pcls ? pcls + (c->Gc > 1 ? h : 0) * hd * hd : NULL;
                    for (int s = 0; s < 2; s++) {
                        const float *dy = (s == 0 ? c->dq : c->dk) + o, *xs = x + s * D + h * hd;
                        float *dxs = dx ? dx + s * D + h * hd : NULL;
                        if (r) {
                            if (dxs) vt_k.rot_pairs_bwd(dy, r, (size_t)npr, (size_t)hd, dxs);
                            if (dcs) vt_k.rot_pairs_bwd_cs(xs, dy, (size_t)npr, dcs);
                        } else if (m) {
                            for (int64_t j = 0; dxs && j < hd; j++) {
                                float acc = 0.0f;
                                for (int64_t i = 0; i < hd; i++) acc += m[j * hd + i] * dy[i];
                                dxs[j] += acc;
                            }
                            for (int64_t j = 0; dm && j < hd; j++)
                                for (int64_t i = 0; i < hd; i++) dm[j * hd + i] += xs[j] * dy[i];
                        } else if (dxs) {
                            vt_k.add(dxs, dy, dxs, (size_t)hd);
                        }
                    }
                }
            }
    }
    if (c->pcs) {
        #pragma omp parallel for schedule(static) if (ncs * nchunk > VT_PAR_MIN_WORK)
        for (int64_t e = 0; e < ncs; e++)
            for (int64_t ch = 0; ch < nchunk; ch++) c->dcs[e] += c->pcs[ch * ncs + e];
    }
    if (c->pcls)
        for (int64_t e = 0; e < ncls; e++)
            for (int64_t ch = 0; ch < nchunk; ch++) c->dcls[e] += c->pcls[ch * ncls + e];
}

void vt_op_rot_split_heads(vt_tape *t, vt_tensor *qkv, int H, vt_tensor *cs, vt_tensor *cls,
                           vt_tensor **q, vt_tensor **k, vt_tensor **v) {
    char sa[64], sb[64];
    VT_ASSERT(qkv->ndim == 3 && qkv->shape[2] % (3 * H) == 0 && cs->ndim == 4,
              "rot_split_heads: qkv %s with %d heads, cs %s", vt_shape_str(qkv, sa, sizeof sa), H,
              vt_shape_str(cs, sb, sizeof sb));
    int64_t B = qkv->shape[0], N = qkv->shape[1], D = qkv->shape[2] / 3, hd = D / H;
    int64_t Ba = cs->shape[0], G = cs->shape[1], npr = cs->shape[3] / 2, Np = N - 1;
    VT_ASSERT((Ba == 1 || Ba == B) && (G == 1 || G == H) && cs->shape[2] == Np &&
                  cs->shape[3] % 2 == 0 && 2 * npr <= hd,
              "rot_split_heads: cs %s does not fit qkv %s with %d heads (expected (1 or B, 1 or H, "
              "N - 1, 2 npr <= hd))", vt_shape_str(cs, sb, sizeof sb), vt_shape_str(qkv, sa, sizeof sa), H);
    int64_t Gc = cls ? cls->shape[0] : 1;
    VT_ASSERT(!cls || (cls->ndim == 3 && (Gc == 1 || Gc == H) && cls->shape[1] == hd && cls->shape[2] == hd),
              "rot_split_heads: cls %s, expected (1 or H, hd, hd) with hd %lld",
              cls ? vt_shape_str(cls, sb, sizeof sb) : "-", (long long)hd);
    int g = vt_tape_wants_grad(t, qkv, cs, cls);
    int64_t shape[4] = {B, H, N, hd};
    vt_tensor *out[3];
    for (int s = 0; s < 3; s++) out[s] = vt_tape_new(t, g, 4, shape);
    #pragma omp parallel for schedule(static) if (B * N * 3 * D > VT_PAR_MIN)
    for (int64_t row = 0; row < B * N; row++) {
        int64_t b = row / N, n = row % N;
        const float *x = qkv->data + row * 3 * D;
        for (int64_t h = 0; h < H; h++) {
            int64_t o = ((b * H + h) * N + n) * hd;
            memcpy(out[2]->data + o, x + 2 * D + h * hd, (size_t)hd * sizeof(float));
            const float *r = n == 0 ? NULL
                : cs->data + (((Ba > 1 ? b : 0) * G + (G > 1 ? h : 0)) * Np + n - 1) * 2 * npr;
            for (int s = 0; s < 2; s++) {
                const float *xs = x + s * D + h * hd;
                float *y = out[s]->data + o;
                if (r) vt_k.rot_pairs(xs, r, (size_t)npr, (size_t)hd, y);
                else if (cls) cls_row(cls->data + (Gc > 1 ? h : 0) * hd * hd, xs, hd, y);
                else memcpy(y, xs, (size_t)hd * sizeof(float));
            }
        }
    }
    if (g) {
        rsplit_ctx *c = vt_tape_ctx(t, sizeof *c);
        int64_t nchunk = (B + RSPLIT_CHUNK - 1) / RSPLIT_CHUNK, ncs = G * Np * 2 * npr;
        float *pcs = cs->grad && Ba == 1
            ? vt_arena_alloc(t->arena, (size_t)(nchunk * ncs) * sizeof(float)) : NULL;
        float *pcls = cls && cls->grad
            ? vt_arena_alloc(t->arena, (size_t)(nchunk * Gc * hd * hd) * sizeof(float)) : NULL;
        *c = (rsplit_ctx){qkv->data, cs->data, cls ? cls->data : NULL, out[0]->grad, out[1]->grad,
                          out[2]->grad, qkv->grad, cs->grad, cls ? cls->grad : NULL, pcs, pcls,
                          B, N, H, hd, Ba, G, Gc, npr};
        vt_tape_record(t, "rot_split_heads", rsplit_bwd, c);
    }
    *q = out[0];
    *k = out[1];
    *v = out[2];
}

/* ---- Projection fold ---- */

typedef struct {
    const float *w, *b, *m, *dw2, *db2;
    float *dw, *db, *dm;
    int64_t H, hd, Din, G;
} fold_ctx;

static void fold_bwd(void *p) {
    fold_ctx *c = p;
    int64_t H = c->H, hd = c->hd, D = H * hd, Din = c->Din, G = c->G;
    if (c->dw || c->db) {
        #pragma omp parallel for schedule(static) if (2 * H > 1 && 2 * D * Din * hd > VT_PAR_MIN_WORK)
        for (int64_t sh = 0; sh < 2 * H; sh++) {
            int64_t h = sh % H, r0 = (sh / H) * D + h * hd;
            const float *m = c->m + (G > 1 ? h : 0) * hd * hd;
            if (c->dw) {
                float *w = vt_gemm_workspace(vt_k.gemm_work_floats((int)hd, (int)Din, (int)hd));
                vt_k.gemm(1, 0, (int)hd, (int)Din, (int)hd, 1.0f, m, (int)hd, c->dw2 + r0 * Din, (int)Din,
                          1.0f, c->dw + r0 * Din, (int)Din, w);
            }
            for (int64_t j = 0; c->db && j < hd; j++) {
                float acc = 0.0f;
                for (int64_t i = 0; i < hd; i++) acc += m[i * hd + j] * c->db2[r0 + i];
                c->db[r0 + j] += acc;
            }
        }
        for (int64_t r = 2 * D; c->dw && r < 3 * D; r++)
            for (int64_t i = 0; i < Din; i++) c->dw[r * Din + i] += c->dw2[r * Din + i];
        for (int64_t r = 2 * D; c->db && r < 3 * D; r++) c->db[r] += c->db2[r];
    }
    if (c->dm) {
        /* dm[g] += sum over (q, k) and the heads of g of dW2 W^T + db2 b^T, in that order. */
        #pragma omp parallel for schedule(static) if (G > 1 && 2 * D * Din * hd > VT_PAR_MIN_WORK)
        for (int64_t g = 0; g < G; g++) {
            float *dm = c->dm + g * hd * hd;
            float *w = vt_gemm_workspace(vt_k.gemm_work_floats((int)hd, (int)hd, (int)Din));
            for (int64_t sh = 0; sh < 2 * H; sh++) {
                int64_t h = sh % H, r0 = (sh / H) * D + h * hd;
                if (G > 1 && h != g) continue;
                vt_k.gemm(0, 1, (int)hd, (int)hd, (int)Din, 1.0f, c->dw2 + r0 * Din, (int)Din, c->w + r0 * Din,
                          (int)Din, 1.0f, dm, (int)hd, w);
                for (int64_t i = 0; c->b && i < hd; i++)
                    for (int64_t j = 0; j < hd; j++) dm[i * hd + j] += c->db2[r0 + i] * c->b[r0 + j];
            }
        }
    }
}

void vt_op_qkv_fold(vt_tape *t, vt_tensor *w, vt_tensor *b, vt_tensor *m, int H,
                    vt_tensor **w_out, vt_tensor **b_out) {
    char sa[64], sb[64];
    VT_ASSERT(w->ndim == 2 && w->shape[0] % (3 * H) == 0 && m->ndim == 3,
              "qkv_fold: w %s with %d heads, m %s", vt_shape_str(w, sa, sizeof sa), H,
              vt_shape_str(m, sb, sizeof sb));
    int64_t D = w->shape[0] / 3, Din = w->shape[1], hd = D / H, G = m->shape[0];
    VT_ASSERT((G == 1 || G == H) && m->shape[1] == hd && m->shape[2] == hd &&
                  (!b || (b->ndim == 1 && b->shape[0] == 3 * D)),
              "qkv_fold: m %s does not fit w %s with %d heads (expected (1 or H, hd, hd)), or a bias "
              "that is not (3 D)", vt_shape_str(m, sb, sizeof sb), vt_shape_str(w, sa, sizeof sa), H);
    int gw = vt_tape_wants_grad(t, w, m, NULL), gb = b && vt_tape_wants_grad(t, b, m, NULL);
    vt_tensor *w2 = vt_tape_new(t, gw, 2, w->shape), *b2 = b ? vt_tape_new(t, gb, 1, b->shape) : NULL;
    #pragma omp parallel for schedule(static) if (2 * H > 1 && 2 * D * Din * hd > VT_PAR_MIN_WORK)
    for (int64_t sh = 0; sh < 2 * H; sh++) {
        int64_t h = sh % H, r0 = (sh / H) * D + h * hd;
        const float *mm = m->data + (G > 1 ? h : 0) * hd * hd;
        float *work = vt_gemm_workspace(vt_k.gemm_work_floats((int)hd, (int)Din, (int)hd));
        vt_k.gemm(0, 0, (int)hd, (int)Din, (int)hd, 1.0f, mm, (int)hd, w->data + r0 * Din, (int)Din, 0.0f,
                  w2->data + r0 * Din, (int)Din, work);
        for (int64_t i = 0; b && i < hd; i++) {
            float acc = 0.0f;
            for (int64_t j = 0; j < hd; j++) acc += mm[i * hd + j] * b->data[r0 + j];
            b2->data[r0 + i] = acc;
        }
    }
    memcpy(w2->data + 2 * D * Din, w->data + 2 * D * Din, (size_t)(D * Din) * sizeof(float));
    if (b) memcpy(b2->data + 2 * D, b->data + 2 * D, (size_t)D * sizeof(float));
    if (gw || gb) {
        fold_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (fold_ctx){w->data, b ? b->data : NULL, m->data, w2->grad, gb ? b2->grad : NULL,
                        w->grad, gb ? b->grad : NULL, m->grad, H, hd, Din, G};
        vt_tape_record(t, "qkv_fold", fold_bwd, c);
    }
    *w_out = w2;
    *b_out = b2;
}
