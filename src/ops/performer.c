/* performer.c - vt_op_performer: Performer (FAVOR+) linear attention per (batch, head),
 * and its feature map vt_performer_phi (position-encodings.md section 3).
 *
 * Feature map, x (n, hd) rows, w (m, hd) the head's random features, c = m^(-1/2),
 * x~ = hd^(-1/4) x, u_i = w_i . x~:
 *   positive (FAVOR+): phi(x)_i = c (exp(u_i - |x~|^2/2 - s) + eps)
 *   relu:              phi(x)_i = c (relu(u_i) + eps)            (no stabiliser)
 * Stabiliser s (positive only): a query row uses its own max over i of
 * u_i - |x~|^2/2; the keys of one (sample, head) share one constant, the max over all
 * keys and features. Without eps both cancel exactly between numerator and denominator
 * below; with eps they only change how much eps weighs (the output moves by O(eps)).
 * The map runs in float32: u from the float GEMM, the exponent and exp in float.
 *
 * Attention, q, k, v (B, H, N, hd) -> out (B, H, N, hd), per (b, h):
 *   Qf = phi(q) (N, m), Kf = phi(k) (N, m), KV = Kf^T v (m, hd), z = Kf^T 1 (m),
 *   num = Qf KV (N, hd), den = Qf z (N), out = num / den.
 * Cost O(N m hd) time and O(N m) memory per (b, h): no N x N buffer anywhere.
 * With gradients Qf, Kf, KV, z and den are kept in the arena (2 B H N m + ... floats).
 *
 * Backward, for fixed features, with the stabilisers treated as constants (their
 * dependence on q, k is not differentiated, as in the reference implementation): with
 * eps = 0 the output does not depend on them at all, so this is the exact gradient;
 * with eps > 0 the neglected term is O(eps) relative. With G = dout,
 *   dnum = G / den, dden_n = -(G_n . out_n) / den_n,
 *   dQf = dnum KV^T + dden z^T, dKV = Qf^T dnum, dz = Qf^T dden,
 *   dv += Kf dKV, dKf = v dKV^T + 1 dz^T,
 *   through phi: du = dphi * (phi - c eps) (positive) or dphi * c [u > 0] (relu, read
 *   as phi > c eps), dx += hd^(-1/4) du w - hd^(-1/2) rowsum(du) x (the last term only
 *   for positive, from -|x~|^2/2).
 * OpenMP over (b, h); each task calls vt_k.gemm with its thread's workspace, so the
 * result does not depend on the thread count. The passes between the products are
 * kernel-table calls too (the positive map's exp and its backward: feature_exp,
 * feature_grad; row max, sums, scalings: max, dot, axpy, add, scale), since this file
 * builds for baseline x86-64 and plain loops would run scalar. The relu map's passes
 * stay plain loops. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "kernels.h"
#include "ops.h"
#include "par.h"
#include "status.h"

size_t vt_performer_work_floats(int N, int m, int hd) {
    size_t a = vt_k.gemm_work_floats(N, m, hd), b = vt_k.gemm_work_floats(m, hd, N),
           c = vt_k.gemm_work_floats(N, hd, m);
    size_t r = a > b ? a : b;
    return r > c ? r : c;
}

/* |x~|^2 / 2 of one row x (hd floats), x~ = a x, the squares summed in double. */
static float half_norm2(const float *x, int hd, float a) {
    return (float)(0.5 * (double)a * a * vt_k.dot(x, x, (size_t)hd));
}

void vt_performer_phi(const float *x, int n, int hd, const float *w, int m, vt_performer_kernel kernel,
                      int shared, float eps, float shift, float *phi, float *stab, float *work) {
    float a = powf((float)hd, -0.25f), c = 1.0f / sqrtf((float)m);
    vt_k.gemm(0, 1, n, m, hd, a, x, hd, w, hd, 0.0f, phi, m, work);
    if (kernel == VT_PERFORMER_RELU) {
        for (size_t e = 0; e < (size_t)n * m; e++) phi[e] = c * ((phi[e] > 0.0f ? phi[e] : 0.0f) + eps);
        if (stab) stab[0] = 0.0f;
        return;
    }
    /* row r's exponent u_i - |x~|^2/2 - s as u_i - t, t = half_r + s: one pass over u.
     * The keys' half_r is recomputed in the second pass (hd multiply-adds against m
     * exps) rather than kept: the map has no per-row buffer. */
    float gmax = -INFINITY;
    for (int r = 0; r < n; r++) {
        float half = half_norm2(x + (size_t)r * hd, hd, a), rmax = vt_k.max(phi + (size_t)r * m, (size_t)m) - half;
        if (!shared) {
            float s = rmax + shift;
            vt_k.feature_exp(phi + (size_t)r * m, phi + (size_t)r * m, (size_t)m, half + s, c, eps);
            if (stab) stab[r] = s;
        } else if (rmax > gmax) {
            gmax = rmax;
        }
    }
    if (!shared) return;
    float s = gmax + shift;
    for (int r = 0; r < n; r++)
        vt_k.feature_exp(phi + (size_t)r * m, phi + (size_t)r * m, (size_t)m, half_norm2(x + (size_t)r * hd, hd, a) + s,
                         c, eps);
    if (stab) stab[0] = s;
}

typedef struct {
    vt_arena *arena;
    const float *q, *k, *v, *out, *dout, *w;
    const float *keep; /* per (b, h), `per` floats: Qf (N, m), Kf (N, m), KV (m, hd), z (m), den (N) */
    size_t per;
    float *dq, *dk, *dv;
    vt_performer_kernel kernel;
    float eps;
    int BH, H, N, hd, m;
} perf_ctx;

/* dphi (N, m) -> du in place, then dx (N, hd) += hd^(-1/4) du w - hd^(-1/2) rowsum(du) x. */
static void phi_bwd(const perf_ctx *c, const float *phi, float *dphi, const float *x, const float *w,
                    float *dx, float *work) {
    int N = c->N, m = c->m, hd = c->hd;
    float a = powf((float)hd, -0.25f), cm = 1.0f / sqrtf((float)m), ce = cm * c->eps;
    for (int r = 0; r < N; r++) {
        float *dr = dphi + (size_t)r * m;
        const float *pr = phi + (size_t)r * m;
        if (c->kernel == VT_PERFORMER_RELU) {
            for (int i = 0; i < m; i++) dr[i] = pr[i] > ce ? dr[i] * cm : 0.0f;
            continue;
        }
        double rs = vt_k.feature_grad(dr, pr, ce, (size_t)m);
        vt_k.axpy((float)(-(double)a * a * rs), x + (size_t)r * hd, dx + (size_t)r * hd, (size_t)hd);
    }
    vt_k.gemm(0, 0, N, hd, m, a, dphi, m, w, hd, 1.0f, dx, hd, work);
}

static void performer_bwd(void *p) {
    perf_ctx *c = p;
    int N = c->N, m = c->m, hd = c->hd;
    size_t nh = (size_t)N * hd, nm = (size_t)N * m, mh = (size_t)m * hd;
    size_t sper = nh + N + mh + m + nm;
    int nt = omp_get_max_threads();
    float *scratch = vt_arena_alloc(c->arena, (size_t)nt * sper * sizeof(float));
    size_t wf = vt_performer_work_floats(N, m, hd);
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < c->BH; bh++) {
        float *dnum = scratch + (size_t)omp_get_thread_num() * sper, *dden = dnum + nh, *dKV = dden + N,
              *dz = dKV + mh, *dphi = dz + m;
        float *work = vt_gemm_workspace(wf);
        const float *G = c->dout + bh * nh, *out = c->out + bh * nh;
        const float *Qf = c->keep + (size_t)bh * c->per, *Kf = Qf + nm, *KV = Kf + nm, *z = KV + mh, *den = z + m;
        const float *w = c->w + (size_t)(bh % c->H) * mh;
        for (int n = 0; n < N; n++) {
            const float *gn = G + (size_t)n * hd;
            float inv = 1.0f / den[n], *dn = dnum + (size_t)n * hd;
            memcpy(dn, gn, (size_t)hd * sizeof(float));
            vt_k.scale(dn, inv, (size_t)hd);
            dden[n] = (float)(-vt_k.dot(gn, out + (size_t)n * hd, (size_t)hd) * inv);
        }
        vt_k.gemm(1, 0, m, hd, N, 1.0f, Qf, m, dnum, hd, 0.0f, dKV, hd, work);
        memset(dz, 0, (size_t)m * sizeof(float));
        for (int n = 0; n < N; n++) vt_k.axpy(dden[n], Qf + (size_t)n * m, dz, (size_t)m);
        if (c->dq) {
            vt_k.gemm(0, 1, N, m, hd, 1.0f, dnum, hd, KV, hd, 0.0f, dphi, m, work);
            for (int n = 0; n < N; n++) vt_k.axpy(dden[n], z, dphi + (size_t)n * m, (size_t)m);
            phi_bwd(c, Qf, dphi, c->q + bh * nh, w, c->dq + bh * nh, work);
        }
        if (c->dv) vt_k.gemm(0, 0, N, hd, m, 1.0f, Kf, m, dKV, hd, 1.0f, c->dv + bh * nh, hd, work);
        if (c->dk) {
            vt_k.gemm(0, 1, N, m, hd, 1.0f, c->v + bh * nh, hd, dKV, hd, 0.0f, dphi, m, work);
            for (int n = 0; n < N; n++) vt_k.add(dphi + (size_t)n * m, dz, dphi + (size_t)n * m, (size_t)m);
            phi_bwd(c, Kf, dphi, c->k + bh * nh, w, c->dk + bh * nh, work);
        }
    }
}

vt_tensor *vt_op_performer(vt_tape *t, vt_tensor *q, vt_tensor *k, vt_tensor *v, const float *w, int m,
                           const vt_performer_opts *opts) {
    VT_ASSERT(q->ndim == 4 && vt_same_shape(q, k) && vt_same_shape(q, v),
              "performer: q, k, v must all be (B, H, N, hd)");
    VT_ASSERT(w != NULL && m > 0, "performer: features w (H, m, hd) with m > 0 required, m = %d", m);
    vt_performer_opts o = opts ? *opts : (vt_performer_opts){VT_PERFORMER_POSITIVE, VT_PERFORMER_EPS, 0.0f, 0.0f};
    VT_ASSERT(o.eps >= 0.0f && (o.eps > 0.0f || o.kernel == VT_PERFORMER_POSITIVE),
              "performer: eps %g must be >= 0 (> 0 for the relu kernel)", o.eps);
    int H = (int)q->shape[1], BH = (int)(q->shape[0] * q->shape[1]), N = (int)q->shape[2],
        hd = (int)q->shape[3];
    size_t nh = (size_t)N * hd, nm = (size_t)N * m, mh = (size_t)m * hd;
    int g = vt_tape_wants_grad(t, q, k, v);
    vt_tensor *out = vt_tape_new(t, g, 4, q->shape);
    /* Kept for backward (g): Qf, Kf, KV, z, den for every (b, h); else per-thread scratch. */
    size_t per = 2 * nm + mh + m + N;
    int nt = omp_get_max_threads();
    float *keep = vt_arena_alloc(t->arena, (size_t)(g ? BH : nt) * per * sizeof(float));
    float *stab = vt_arena_alloc(t->arena, (size_t)nt * N * sizeof(float));
    size_t wf = vt_performer_work_floats(N, m, hd);
    const float *qd = q->data, *kd = k->data, *vd = v->data;
    float *od = out->data;
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
        float *work = vt_gemm_workspace(wf);
        float *Qf = keep + (size_t)(g ? bh : omp_get_thread_num()) * per, *Kf = Qf + nm, *KV = Kf + nm,
              *z = KV + mh, *den = z + m;
        float *st = stab + (size_t)omp_get_thread_num() * N;
        const float *wh = w + (size_t)(bh % H) * mh;
        vt_performer_phi(qd + bh * nh, N, hd, wh, m, o.kernel, 0, o.eps, o.q_shift, Qf, st, work);
        vt_performer_phi(kd + bh * nh, N, hd, wh, m, o.kernel, 1, o.eps, o.k_shift, Kf, st, work);
        vt_k.gemm(1, 0, m, hd, N, 1.0f, Kf, m, vd + bh * nh, hd, 0.0f, KV, hd, work);
        memset(z, 0, (size_t)m * sizeof(float));
        for (int n = 0; n < N; n++) vt_k.add(z, Kf + (size_t)n * m, z, (size_t)m);
        float *ob = od + bh * nh;
        vt_k.gemm(0, 0, N, hd, m, 1.0f, Qf, m, KV, hd, 0.0f, ob, hd, work);
        for (int n = 0; n < N; n++) {
            den[n] = (float)vt_k.dot(Qf + (size_t)n * m, z, (size_t)m);
            vt_k.scale(ob + (size_t)n * hd, 1.0f / den[n], (size_t)hd);
        }
    }
    if (g) {
        perf_ctx *c = vt_tape_ctx(t, sizeof *c);
        *c = (perf_ctx){t->arena, qd, kd, vd, od, out->grad, w, keep, per, q->grad, k->grad, v->grad,
                        o.kernel, o.eps, BH, H, N, hd, m};
        vt_tape_record(t, "performer", performer_bwd, c);
    }
    return out;
}
