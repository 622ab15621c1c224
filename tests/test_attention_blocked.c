/* test_attention_blocked.c - vt_op_attention on sequences long enough for the fused
 * path's row blocking (N = 450: one N x N score block exceeds the per-thread budget, so
 * the query rows run in blocks of unequal size, 288 and 162; checked first, so a new
 * budget cannot silently leave a single block), against a double-precision naive
 * reference: forward output, and dq, dk, dv from one backward, without and with
 * attention dropout (the reference rebuilds the mask from the documented per-row
 * streams), keeping the probabilities and recomputing them. Also: the same output and
 * gradients for a short sequence (one row block) computed twice give identical bits (no
 * state leaks between calls) and on 2 and 3 threads the 1-thread bits; and when not
 * keeping the op holds nothing N x N: without gradients, and with gradients (its
 * backward recomputes the probabilities and the mask) the arena use of forward +
 * backward grows by one block's output and output grad per extra (batch, head), not by
 * an N x N block.
 * (tests/test_ops_grad.c holds the finite-difference checks on small shapes.) */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "ops/ops.h"
#include "rng.h"
#include "tape.h"
#include "test_runtime.h"

#define BH 2
#define N 450
#define HD 8

static vt_arena arena;
static vt_tape tape;
static vt_rng tape_rng;
static size_t op_bytes; /* arena bytes the op's forward and backward took in the last run */

static void fill(float *x, size_t n, vt_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(2.0 * vt_rng_uniform(r) - 1.0);
}

/* Naive reference for one call: out, and the gradients for upstream gradient dout.
 * q, k, v (BH, N, HD); out and dout (N, BH HD), the op's merged layout. keep: BH N N
 * mask (NULL: no dropout), inv_keep the survivor scale. */
static void reference(const float *q, const float *k, const float *v, const float *dout,
                      const unsigned char *keep, double inv_keep, double scale,
                      double *out, double *dq, double *dk, double *dv) {
    size_t nh = (size_t)N * HD, ld = (size_t)BH * HD;
    memset(dq, 0, BH * nh * sizeof(double));
    memset(dk, 0, BH * nh * sizeof(double));
    memset(dv, 0, BH * nh * sizeof(double));
    double *P = malloc((size_t)N * sizeof(double)), *dP = malloc((size_t)N * sizeof(double));
    for (int b = 0; b < BH; b++) {
        const float *qb = q + b * nh, *kb = k + b * nh, *vb = v + b * nh, *gb = dout + (size_t)b * HD;
        double *ob = out + (size_t)b * HD;
        for (int i = 0; i < N; i++) {
            double mx = -1e300, sum = 0;
            for (int j = 0; j < N; j++) {
                double s = 0;
                for (int c = 0; c < HD; c++) s += (double)qb[i * HD + c] * kb[j * HD + c];
                P[j] = s * scale;
                if (P[j] > mx) mx = P[j];
            }
            for (int j = 0; j < N; j++) sum += (P[j] = exp(P[j] - mx));
            for (int j = 0; j < N; j++) P[j] /= sum;
            const unsigned char *kr = keep ? keep + ((size_t)b * N + i) * N : NULL;
            double rowdot = 0;
            for (int c = 0; c < HD; c++) ob[i * ld + c] = 0;
            for (int j = 0; j < N; j++) {
                double m = kr ? (kr[j] ? inv_keep : 0.0) : 1.0;
                double dpd = 0;
                for (int c = 0; c < HD; c++) {
                    ob[i * ld + c] += P[j] * m * vb[j * HD + c];
                    dv[b * nh + j * HD + c] += P[j] * m * gb[i * ld + c];
                    dpd += (double)gb[i * ld + c] * vb[j * HD + c];
                }
                dP[j] = dpd * m;
                rowdot += dP[j] * P[j];
            }
            for (int j = 0; j < N; j++) {
                double ds = P[j] * (dP[j] - rowdot) * scale;
                for (int c = 0; c < HD; c++) {
                    dq[b * nh + i * HD + c] += ds * kb[j * HD + c];
                    dk[b * nh + j * HD + c] += ds * qb[i * HD + c];
                }
            }
        }
    }
    free(P);
    free(dP);
}

/* One forward + backward through the op on nbh (b, h) blocks of n_tok tokens; returns out
 * (arena), fills the grads and op_bytes. */
static vt_tensor *run(const float *src, const float *dout, float p, int keep, int nbh, int n_tok, float **grads) {
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 1;
    tape.training = 1;
    int64_t shape[4] = {1, nbh, n_tok, HD};
    size_t n = (size_t)nbh * n_tok * HD;
    vt_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = vt_tensor_new(&arena, 1, 4, shape);
        memcpy(in[i]->data, src + i * n, n * sizeof(float));
    }
    size_t before = arena.total_used;
    vt_tensor *o = vt_op_attention(&tape, in[0], in[1], in[2], 1.0f / sqrtf((float)HD), p, keep);
    memcpy(o->grad, dout, n * sizeof(float));
    vt_tape_replay(&tape);
    op_bytes = arena.total_used - before;
    for (int i = 0; i < 3; i++) grads[i] = in[i]->grad;
    return o;
}

static void check_long(const float *src, const float *dout, float p, int keep_probs) {
    size_t n = (size_t)BH * N * HD;
    vt_rng_seed(&tape_rng, 99);
    vt_rng copy = tape_rng;
    float *g[3];
    vt_tensor *o = run(src, dout, p, keep_probs, BH, N, g);
    unsigned char *keep = NULL;
    if (p > 0) {
        uint64_t base = vt_rng_u64(&copy);
        keep = malloc((size_t)BH * N * N);
        size_t dropped = 0;
        for (int row = 0; row < BH * N; row++) {
            vt_rng r;
            vt_rng_seed(&r, vt_rng_derive(base, (uint64_t)row, 0));
            for (int j = 0; j < N; j++) {
                keep[(size_t)row * N + j] = vt_rng_uniform(&r) >= p;
                dropped += !keep[(size_t)row * N + j];
            }
        }
        double frac = (double)dropped / ((double)BH * N * N);
        CHECK(fabs(frac - p) < 0.01, "dropout %.2f: dropped fraction %.4f", p, frac);
    }
    double *ref = malloc(4 * n * sizeof(double));
    reference(src, src + n, src + 2 * n, dout, keep, p > 0 ? 1.0 / (1.0 - p) : 1.0,
              1.0 / sqrt((double)HD), ref, ref + n, ref + 2 * n, ref + 3 * n);
    CHECK_ARRAY_CLOSE(o->data, ref, n, 1e-5, 1e-4, "out, N %d, dropout %.2f, keep %d", N, p, keep_probs);
    CHECK_ARRAY_CLOSE(g[0], ref + n, n, 1e-5, 1e-4, "dq, N %d, dropout %.2f, keep %d", N, p, keep_probs);
    CHECK_ARRAY_CLOSE(g[1], ref + 2 * n, n, 1e-5, 1e-4, "dk, N %d, dropout %.2f, keep %d", N, p, keep_probs);
    CHECK_ARRAY_CLOSE(g[2], ref + 3 * n, n, 1e-5, 1e-4, "dv, N %d, dropout %.2f, keep %d", N, p, keep_probs);
    free(ref);
    free(keep);
}

int main(void) {
    if (test_runtime_init(&arena, 1 << 20, &tape) != 0) return 1;
    tape.rng = &tape_rng;
    int R = vt_attention_row_block(N);
    CHECK(R < N && N % R != 0, "N %d runs in row blocks of %d: not several blocks of unequal size", N, R);
    size_t n = (size_t)BH * N * HD;
    float *src = malloc(4 * n * sizeof(float));
    vt_rng r;
    vt_rng_seed(&r, 5);
    fill(src, 4 * n, &r);
    for (int keep = 0; keep < 2; keep++) {
        check_long(src, src + 3 * n, 0.0f, keep);
        check_long(src, src + 3 * n, 0.2f, keep);
    }

    /* Repeatability on a short sequence (a single row block). */
    const int ns = 37;
    size_t m = (size_t)BH * ns * HD;
    float *first = malloc(4 * m * sizeof(float)), *g[3];
    vt_rng_seed(&tape_rng, 3);
    vt_tensor *o = run(src, src + 3 * n, 0.1f, 0, BH, ns, g);
    memcpy(first, o->data, m * sizeof(float));
    for (int i = 0; i < 3; i++) memcpy(first + (i + 1) * m, g[i], m * sizeof(float));
    vt_rng_seed(&tape_rng, 3);
    o = run(src, src + 3 * n, 0.1f, 0, BH, ns, g);
    int same = memcmp(first, o->data, m * sizeof(float)) == 0;
    for (int i = 0; i < 3; i++) same &= memcmp(first + (i + 1) * m, g[i], m * sizeof(float)) == 0;
    CHECK(same, "two identical calls (N %d, dropout 0.1) differ", ns);

    /* The (b, h) blocks go to threads as they come free: 24 blocks (dropout 0.1, keeping
     * and recomputing the probabilities) give the 1-thread bits on 2 and 3 threads. */
    const int nbs = 24, max_threads = omp_get_max_threads();
    size_t mb = (size_t)nbs * ns * HD;
    float *one = malloc(4 * mb * sizeof(float));
    for (int keep = 0; keep < 2; keep++)
        for (int nt = 1; nt <= 3; nt++) {
            omp_set_num_threads(nt);
            vt_rng_seed(&tape_rng, 4);
            o = run(src, src + 3 * n, 0.1f, keep, nbs, ns, g);
            if (nt == 1) {
                memcpy(one, o->data, mb * sizeof(float));
                for (int i = 0; i < 3; i++) memcpy(one + (i + 1) * mb, g[i], mb * sizeof(float));
                continue;
            }
            same = memcmp(one, o->data, mb * sizeof(float)) == 0;
            for (int i = 0; i < 3; i++) same &= memcmp(one + (i + 1) * mb, g[i], mb * sizeof(float)) == 0;
            CHECK(same, "%d (b, h) blocks, dropout 0.1, keep %d: %d threads differ from 1 thread", nbs, keep, nt);
        }
    omp_set_num_threads(max_threads);
    free(one);

    /* With gradients, recomputing (forward + backward, dropout 0.2, two row blocks): a
     * second (b, h) block adds its output and output grad (2 N HD floats), where keeping
     * P and the mask would add N N floats and N N bytes. */
    size_t one_block[2];
    for (int nbh = 1; nbh <= 2; nbh++) {
        run(src, src + 3 * n, 0.2f, 0, nbh, N, g);
        one_block[nbh - 1] = op_bytes;
    }
    size_t grow = (size_t)2 * N * HD * sizeof(float) + 128;
    CHECK(one_block[1] <= one_block[0] + grow, "attention with grad, N %d: %zu arena bytes for 1 (b, h) block, "
          "%zu for 2 (allowed %zu more)", N, one_block[0], one_block[1], grow);

    /* Without gradients: nothing N x N beyond one row block per thread, even when asked
     * to keep the probabilities (they are kept for a backward only). */
    vt_arena_reset(&arena);
    vt_tape_clear(&tape);
    tape.grad_enabled = 0;
    tape.training = 0;
    int64_t shape[4] = {1, BH, N, HD};
    vt_tensor *in[3];
    for (int i = 0; i < 3; i++) {
        in[i] = vt_tensor_new(&arena, 0, 4, shape);
        memcpy(in[i]->data, src + i * n, n * sizeof(float));
    }
    size_t before = arena.total_used;
    vt_op_attention(&tape, in[0], in[1], in[2], 1.0f / sqrtf((float)HD), 0.0f, 1);
    size_t used = arena.total_used - before;
    size_t full = (size_t)omp_get_max_threads() * N * N * sizeof(float);
    CHECK(used < full && tape.n == 0, "no-grad attention used %zu arena bytes (a full N x N per thread is %zu), "
          "recorded %d entries", used, full, tape.n);

    free(first);
    free(src);
    test_runtime_done(&arena, &tape);
    return test_summary();
}
