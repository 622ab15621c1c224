/* test_kernels.c - every SIMD kernel level against the scalar reference (kernels.h).
 *
 * For each level this CPU has (avx2, avx512; others are reported as skipped on
 * stderr) every table entry is compared with kernels/scalar/ on ragged sizes, pointers
 * misaligned by 1..3 floats and leading dimensions wider than the rows. Tolerances,
 * |fast - ref| <= atol + rtol |ref| unless stated:
 *   gemm            per element: 2.4e-7 (K + 4) S, S = |alpha| |op(A)| |op(B)| + |beta C0|
 *                   (the classical K eps bound, for both results); C outside M x N and
 *                   the 64 floats after gemm_work_floats must be untouched; beta == 0
 *                   with C full of NaN must give finite results.
 *   add/scale/axpy  exact (same IEEE operations as the reference).
 *   sum/dot         1e-12 sum|terms| (both accumulate in double).
 *   max             exact, also on all-negative rows (no lane past n may count).
 *   rot_pairs, rot_pairs_bwd, rot_pairs_bwd_cs  exact (same IEEE operations), on
 *                   pairs only, pairs plus copied channels, and no pairs; nothing past
 *                   the row (or past the 2 npr pair floats) written.
 *   matmul_f64      per element n 2^-52 sum_k |a b| + 2^-52 |C0| (acc), against a long
 *                   double product (the scalar reference too); nothing past n x n written.
 *   feature_exp     atol 1e-12, rtol 2e-6 (vector exp, as softmax); in place too.
 *   feature_grad    d exact (same IEEE operations), its sum 1e-12 sum|terms|.
 *   adamw           atol 1e-9, rtol 1e-6 (same operations; expected bit-identical).
 *   softmax         atol 1e-9, rtol 2e-6 (vector exp rel. error <= 1.2e-7, and the
 *                   levels' float row sums against the reference's double one); -inf
 *                   entries give exactly 0; also in place (y == x).
 *   softmax_bwd     atol 1e-6, rtol 1e-5 (row sums in another order).
 *   layernorm fwd   atol 2e-5, rtol 1e-5; with |mean| = 1000 >> std both are compared
 *                   with a double-precision LayerNorm, in units of u = ulp(1000) rstd |g|
 *                   (the error of a float mean) after 1e-5 of slack: fast within 1 u
 *                   (its mean is correctly rounded), the scalar reference (sequential
 *                   float mean, measured ~25 u at D = 1000) within 64 u.
 *   layernorm bwd   atol 1e-5, rtol 1e-4 (dx, dg, db; dg/db NULL allowed).
 *   gelu fwd        against double-precision GELU on a dense grid of [-12, 12] and large
 *                   |x|: |y - y*| <= 0.5 |x| 3e-7 + 2.4e-7 |y*|, i.e. erf error 2e-7
 *                   plus rounding of x / sqrt(2) and the products; vs scalar twice that.
 *   gelu bwd        against double precision: |dx - dx*| <= 4e-7 |dy| + 2.4e-7 |dx*|.
 * Also: vt_kernels_init rejects an unknown VT_ISA with a message naming it, and a
 * level above the CPU's best with one naming both levels and what is missing; every
 * level's table is complete (no NULL entry). The GEMM tests run under the active
 * blocking context, then under every other context of the table, a tiny one (many
 * blocks in every loop) and tiny ones with each avx512 register tile shape
 * (VT_AVX512_SHAPES) wherever a level's blocking differs; the table picks the
 * context by CPU (the default for one it does not list) and every malformed
 * VT_GEMM_CONTEXT item is rejected with a message naming it.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels.h"
#include "gemm_driver.h" /* row_cursor */
#include "gemm_tiles.h" /* VT_AVX512_SHAPES: every shape is tested */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 40) * (1.0 / 8388608.0) - 1.0);
}

/* A 64-byte aligned block of n + 64 floats; returns base + off (off < 16). */
static float *fbuf(size_t n, int off, float **base) {
    *base = aligned_alloc(64, ((n + 64) * sizeof(float) + 63) / 64 * 64);
    if (!*base) {
        fprintf(stderr, "test_kernels: out of memory (%zu floats)\n", n);
        exit(1);
    }
    return *base + off;
}

static void fill(float *x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * 0.5f * (frand() + 1.0f);
}

static const int ragged[] = {1, 2, 7, 15, 16, 17, 31, 33, 63, 127, 129, 257, 1000, 4099};
#define NRAGGED ((int)(sizeof ragged / sizeof ragged[0]))

/* ---------------------------------------------------------------- table + init */

static void test_table_complete(const vt_kernels *t) {
    CHECK(t->name != NULL, "a table has no name");
#define VT_KERNEL(entry, ret, params) CHECK(t->entry != NULL, "table %s has no entry " #entry, t->name ? t->name : "?");
#include "entries.def"
#undef VT_KERNEL
}

static void test_init(void) {
    const char *old = getenv("VT_ISA");
    char saved[64] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    char err[256] = "";
    setenv("VT_ISA", "avx9000", 1);
    int rc = vt_kernels_init(err, sizeof err);
    CHECK(rc == -1, "VT_ISA=avx9000 accepted (rc %d)", rc);
    CHECK(strstr(err, "avx9000") && strstr(err, "scalar"), "message does not name the value and the choices: '%s'", err);
    vt_isa best = vt_kernels_best_isa();
    if (best + 1 < VT_ISA_COUNT) { /* a level this CPU or OS lacks: an error saying why, not a downgrade */
        const char *above = vt_kernels_isa_name((vt_isa)(best + 1));
        setenv("VT_ISA", above, 1);
        err[0] = 0;
        rc = vt_kernels_init(err, sizeof err);
        CHECK(rc == -1, "VT_ISA=%s accepted on a CPU whose best level is %s (rc %d)", above,
              vt_kernels_isa_name(best), rc);
        CHECK(strstr(err, above) && strstr(err, vt_kernels_isa_name(best)) && strstr(err, "(the "),
              "message does not name the level asked for, the best one and why: '%s'", err);
    }
    if (old) setenv("VT_ISA", saved, 1);
    else unsetenv("VT_ISA");
    err[0] = 0;
    rc = vt_kernels_init(err, sizeof err);
    CHECK(rc == 0, "vt_kernels_init failed: %s", err);
    vt_isa want = vt_kernels_best_isa();
    for (int l = 0; old && l < VT_ISA_COUNT; l++)
        if (!strcmp(saved, vt_kernels_isa_name((vt_isa)l))) want = (vt_isa)l;
    CHECK(vt_k.isa == want, "active level %s, wanted level %d", vt_k.name, (int)want);
    test_table_complete(&vt_k);
    vt_kernels t;
    CHECK(vt_kernels_table(VT_ISA_SCALAR, &t) == 0 && t.isa == VT_ISA_SCALAR, "scalar table unavailable");
}

/* ---------------------------------------------------------------- gemm */

static int gemm_case_no = 0;

static void gemm_case(const vt_kernels *t, const vt_kernels *s, int ta, int tb, int M, int N, int K,
                      float alpha, float beta, int ldpad) {
    int off = 1 + gemm_case_no++ % 3;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + ldpad, ldb = bc + ldpad, ldc = N + ldpad;
    float *ab, *bb, *cb, *rb, *sb, *c0b, *aab, *abb;
    float *A = fbuf((size_t)ar * lda, off, &ab), *B = fbuf((size_t)br * ldb, off, &bb);
    float *C = fbuf((size_t)M * ldc, off, &cb), *R = fbuf((size_t)M * ldc, off, &rb);
    float *S = fbuf((size_t)M * ldc, 0, &sb), *C0 = fbuf((size_t)M * ldc, 0, &c0b);
    float *AA = fbuf((size_t)ar * lda, 0, &aab), *BA = fbuf((size_t)br * ldb, 0, &abb);
    fill(A, (size_t)ar * lda, -1, 1);
    fill(B, (size_t)br * ldb, -1, 1);
    for (size_t i = 0; i < (size_t)ar * lda; i++) AA[i] = fabsf(A[i]);
    for (size_t i = 0; i < (size_t)br * ldb; i++) BA[i] = fabsf(B[i]);
    for (size_t i = 0; i < (size_t)M * ldc; i++) {
        int pad = (int)(i % ldc) >= N;
        C0[i] = pad ? 12345.0f : beta == 0.0f ? NAN : frand();
    }
    memcpy(C, C0, sizeof(float) * M * ldc);
    memcpy(R, C0, sizeof(float) * M * ldc);
    size_t wf = t->gemm_work_floats(M, N, K), ws = s->gemm_work_floats(M, N, K);
    float *wb, *W = fbuf(wf, 0, &wb), *swb, *SW = fbuf(ws, 0, &swb);
    for (int i = 0; i < 64; i++) W[wf + i] = -777.0f;
    s->gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, R, ldc, SW);
    t->gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, W);
    s->gemm(ta, tb, M, N, K, fabsf(alpha), AA, lda, BA, ldb, 0.0f, S, ldc, SW);
    long bad = -1;
    double worst = 0;
    int pad_ok = 1, guard_ok = 1;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t e = (size_t)i * ldc + j;
            if (j >= N) {
                if (C[e] != 12345.0f) pad_ok = 0;
                continue;
            }
            double bound = fabs(S[e]) + (beta != 0.0f ? fabs(beta * C0[e]) : 0.0);
            double tol = 2.4e-7 * (K + 4) * bound + 1e-30;
            double d = fabs((double)C[e] - R[e]);
            if (!(d <= tol) && (bad < 0 || d / tol > worst)) {
                bad = (long)e;
                worst = d / tol;
            }
        }
    }
    for (int i = 0; i < 64; i++)
        if (W[wf + i] != -777.0f) guard_ok = 0;
    CHECK(bad < 0, "%s gemm ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g ld+%d off=%d: C[%ld] got %.9g want %.9g",
          t->name, ta, tb, M, N, K, alpha, beta, ldpad, off, bad, bad < 0 ? 0.0 : C[bad],
          bad < 0 ? 0.0 : R[bad]);
    CHECK(pad_ok, "%s gemm ta=%d tb=%d M=%d N=%d K=%d wrote outside M x N", t->name, ta, tb, M, N, K);
    CHECK(guard_ok, "%s gemm M=%d N=%d K=%d wrote past gemm_work_floats=%zu", t->name, M, N, K, wf);

    /* gemm_bias: bitwise this table's gemm followed by adding bias to each row; the
     * padding columns untouched */
    float *biasb, *bias = fbuf((size_t)N + 1, off, &biasb), *CBb, *CB = fbuf((size_t)M * ldc, off, &CBb);
    fill(bias, (size_t)N, -2, 2);
    memcpy(CB, C0, sizeof(float) * M * ldc);
    t->gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias, CB, ldc, W);
    long bbad = -1;
    for (int i = 0; i < M && bbad < 0; i++)
        for (int j = 0; j < ldc; j++) {
            size_t e = (size_t)i * ldc + j;
            float want = j < N ? C[e] + bias[j] : 12345.0f;
            if (memcmp(&CB[e], &want, sizeof want) != 0) {
                bbad = (long)e;
                break;
            }
        }
    CHECK(bbad < 0, "%s gemm_bias ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C[%ld] got %.9g, gemm + bias %.9g",
          t->name, ta, tb, M, N, K, alpha, beta, bbad, bbad < 0 ? 0.0 : CB[bbad],
          bbad < 0 ? 0.0 : (bbad % ldc < N ? C[bbad] + bias[bbad % ldc] : 12345.0));
    free(biasb); free(CBb);

    /* gemm_prefetch: bitwise gemm, whatever it is told comes next (here A and B
     * themselves, with their own strides, or nothing) */
    float *cpb, *CP = fbuf((size_t)M * ldc, off, &cpb);
    const vt_region none = {0}, next_ab[2] = {{A, (size_t)lda, ar, ac}, {B, (size_t)ldb, br, bc}};
    for (int v = 0; v < 2; v++) {
        memcpy(CP, C0, sizeof(float) * M * ldc);
        t->gemm_prefetch(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, CP, ldc, W,
                         v ? next_ab : (const vt_region[2]){none, none});
        long pbad = -1;
        for (size_t e = 0; e < (size_t)M * ldc && pbad < 0; e++)
            if (memcmp(&CP[e], &C[e], sizeof(float)) != 0) pbad = (long)e;
        CHECK(pbad < 0, "%s gemm_prefetch (%s next) ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g: C[%ld] got %.9g, "
              "gemm %.9g", t->name, v ? "A and B" : "nothing", ta, tb, M, N, K, alpha, beta, pbad,
              pbad < 0 ? 0.0 : CP[pbad], pbad < 0 ? 0.0 : C[pbad]);
    }
    free(cpb);
    free(ab); free(bb); free(cb); free(rb); free(sb); free(c0b); free(aab); free(abb); free(wb); free(swb);
}

static void test_gemm(const vt_kernels *t, const vt_kernels *s) {
    static const int Ms[] = {1, 2, 5, 6, 7, 12, 13, 14, 15, 17, 18, 19, 28, 29, 33, 63}; /* MR 6 | 14 */
    static const int Ns[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65};     /* NR 16 | 32 */
    static const int Ks[] = {1, 2, 7, 16, 17, 33};
    static const float alphas[] = {1.0f, -0.7f, 2.5f};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    int n = 0;
    for (int tr = 0; tr < 4; tr++)
        for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
            for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
                for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++, n++)
                    gemm_case(t, s, tr >> 1, tr & 1, Ms[a], Ns[b], Ks[c], alphas[n % 3], betas[(n / 3) % 3],
                              n % 4 == 0 ? 0 : 1 + n % 5);
    for (int tr = 0; tr < 4; tr++) {
        int ta = tr >> 1, tb = tr & 1;
        gemm_case(t, s, ta, tb, 197, 576, 192, 1.0f, 0.0f, 0);     /* ViT-S qkv-like, beta 0 */
        gemm_case(t, s, ta, tb, 37, 45, 600, -0.7f, 1.0f, 3);      /* K > KC */
        gemm_case(t, s, ta, tb, 30, 40, 785, 1.0f, 0.5f, 2);       /* K in several blocks, the last shorter */
        gemm_case(t, s, ta, tb, 30, 40, 768, -1.0f, 1.0f, 1);      /* K = 2 x 384 (zen4's AVX-512 KC): blocks <= KC */
        gemm_case(t, s, ta, tb, 20, 36, 2100, 0.5f, 1.0f, 3);      /* K in several blocks of every context's KC (zen5: 1024) */
        gemm_case(t, s, ta, tb, 350, 40, 20, 2.5f, 0.5f, 1);       /* M > MC */
        gemm_case(t, s, ta, tb, 400, 1600, 12, 1.0f, 1.0f, 2);     /* N > NC (M > M_ONE_PASS) */
        gemm_case(t, s, ta, tb, 300, 700, 600, -0.5f, 0.5f, 4);    /* K blocks outermost, 3 N blocks */
        gemm_case(t, s, ta, tb, 130, 100, 300, 0.5f, 0.0f, 5);     /* all edges at once */
        gemm_case(t, s, ta, tb, 197, 64, 197, 1.0f, 1.0f, 0);      /* attention's P v: A in place */
        gemm_case(t, s, ta, tb, 197, 197, 64, 0.125f, 0.5f, 1);    /* attention's q k^T: 5-column tail */
        gemm_case(t, s, ta, tb, 300, 150, 270, -1.5f, 0.5f, 2);    /* N <= 192, M K >= 2^16: A in place */
        gemm_case(t, s, ta, tb, 400, 300, 200, 0.5f, 1.0f, 3);     /* ta = 1: A in place up to N = 768 */
        gemm_case(t, s, ta, tb, 200, 384, 330, 1.0f, 0.5f, 1);     /* not one pass (N <= 384) */
        gemm_case(t, s, ta, tb, 200, 385, 330, 1.0f, 0.5f, 0);     /* one pass */
        gemm_case(t, s, ta, tb, 13, 3, 33, -0.7f, 0.5f, 1);        /* narrow edges: 3 columns, */
        gemm_case(t, s, ta, tb, 29, 4, 17, 2.5f, 0.0f, 2);         /* 4, */
        gemm_case(t, s, ta, tb, 19, 20, 64, 1.0f, 1.0f, 3);        /* 4 after a 16-column panel, */
        gemm_case(t, s, ta, tb, 33, 36, 7, 0.5f, 0.5f, 0);         /* 4 after a 32-column panel */
    }
    gemm_case(t, s, 0, 0, 0, 5, 5, 1.0f, 0.0f, 0);
    gemm_case(t, s, 0, 0, 5, 5, 0, 1.0f, 0.0f, 0);                 /* K = 0: C = beta C */
    gemm_case(t, s, 1, 0, 5, 7, 0, 1.0f, 0.5f, 1);
}

/* ---------------------------------------------------------------- bf16 */

static uint32_t fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float bitsf(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}
static float bf16f(vt_bf16 h) { return bitsf((uint32_t)h << 16); }

/* The bf16 rounding of x by another route than the kernels' integer trick: a normal x
 * rounded to 8 significant bits by nearbyint (ties to even) in double, overflow to inf;
 * zeros and denormals to a zero of their sign; NaN to the quiet NaN of its upper half. */
static vt_bf16 bf16_model(float x) {
    uint32_t u = fbits(x);
    if (isnan(x)) return (vt_bf16)((u >> 16) | 0x40);
    if (isinf(x) || x == 0.0f || fpclassify(x) == FP_SUBNORMAL) return (vt_bf16)((u >> 16) & (isinf(x) ? 0xffff : 0x8000));
    int e;
    frexp((double)x, &e); /* |x| in [2^(e-1), 2^e) */
    double r = ldexp(nearbyint(ldexp((double)x, 8 - e)), e - 8);
    if (fabs(r) >= 0x1p128) return (vt_bf16)(x < 0 ? 0xff80 : 0x7f80);
    return (vt_bf16)(fbits((float)r) >> 16);
}

/* bf16_round: the scalar level against the model, every level against the scalar one,
 * bitwise, on special values, every exponent with ties and near-ties, and random bit
 * patterns; ragged n and misaligned pointers, nothing past n written. */
static void test_bf16_round(const vt_kernels *t, const vt_kernels *s) {
    enum { N = 4099 };
    float *xb, *x = fbuf(N, 1, &xb);
    const size_t bytes = (2 * (N + 64) * sizeof(vt_bf16) + 63) / 64 * 64; /* aligned_alloc: a multiple of 64 */
    vt_bf16 *y = aligned_alloc(64, bytes), *z = aligned_alloc(64, bytes);
    static const uint32_t special[] = {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x3f808000,
                                       0x3f818000, 0x3f80ffff, 0x7f7fffff, 0x7f7f8000, 0xff7f8000, 0x7f800000,
                                       0xff800000, 0x7fc00000, 0x7f800001, 0xffa00000, 0x3f7fffff, 0x0080ffff};
    size_t ns = sizeof special / sizeof *special;
    for (size_t i = 0; i < N; i++) {
        uint32_t u;
        if (i < ns) u = special[i];
        else if (i < ns + 2 * 254) /* every exponent: a tie and a value just above it */
            u = ((uint32_t)((i - ns) / 2 + 1) << 23) | ((i - ns) % 2 ? 0x8001u : 0x18000u) | (i % 3 ? 0 : 0x80000000u);
        else {
            rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17;
            u = (uint32_t)(rng_state >> 32);
        }
        x[i] = bitsf(u);
    }
    long bad = -1;
    for (size_t i = 0; i < N && bad < 0; i++)
        if ((s->bf16_round(x + i, z, 1), z[0] != bf16_model(x[i]))) bad = (long)i;
    CHECK(bad < 0, "scalar bf16_round(%08x) = %04x, rounding to nearest even gives %04x",
          bad < 0 ? 0u : fbits(x[bad]), bad < 0 ? 0u : (unsigned)z[0], bad < 0 ? 0u : (unsigned)bf16_model(x[bad]));
    static const int ns_[] = {1, 7, 15, 16, 17, 33, 100, N};
    for (size_t c = 0; c < sizeof ns_ / sizeof *ns_; c++) {
        int n = ns_[c];
        for (int off = 0; off < 3; off++) {
            for (int i = 0; i < n + 32; i++) y[off + i] = z[i] = 0xabcd;
            t->bf16_round(x, y + off, (size_t)n);
            s->bf16_round(x, z, (size_t)n);
            long b = -1;
            for (int i = 0; i < n && b < 0; i++)
                if (y[off + i] != z[i]) b = i;
            int past = 0;
            for (int i = n; i < n + 32; i++) past |= y[off + i] != 0xabcd;
            CHECK(b < 0, "%s bf16_round n=%d off=%d: x=%08x gives %04x, scalar %04x", t->name, n, off,
                  b < 0 ? 0u : fbits(x[b]), b < 0 ? 0u : (unsigned)y[off + b], b < 0 ? 0u : (unsigned)z[b]);
            CHECK(!past, "%s bf16_round n=%d off=%d wrote past n", t->name, n, off);
        }
    }
    /* bf16_round_float: the scalar bf16_round's bits widened, into another buffer at
     * every misalignment and in place, nothing written past n */
    float *fb, *f = fbuf(N + 64, 0, &fb);
    for (size_t c = 0; c < sizeof ns_ / sizeof *ns_; c++) {
        int n = ns_[c];
        s->bf16_round(x, z, (size_t)n);
        for (int off = 0; off < 4; off++) {
            for (int i = 0; i < n + 32; i++) f[off + i] = bitsf(0x7fabcdefu);
            if (off == 3) memcpy(f + off, x, (size_t)n * sizeof *x); /* in place */
            t->bf16_round_float(off == 3 ? f + off : x, f + off, (size_t)n);
            long b = -1;
            for (int i = 0; i < n && b < 0; i++)
                if (fbits(f[off + i]) != (uint32_t)z[i] << 16) b = i;
            int past = 0;
            for (int i = n; i < n + 32; i++) past |= fbits(f[off + i]) != 0x7fabcdefu;
            CHECK(b < 0, "%s bf16_round_float n=%d off=%d: x=%08x gives %08x, scalar bf16_round %04x", t->name, n,
                  off, b < 0 ? 0u : fbits(x[b]), b < 0 ? 0u : fbits(f[off + b]), b < 0 ? 0u : (unsigned)z[b]);
            CHECK(!past, "%s bf16_round_float n=%d off=%d wrote past n", t->name, n, off);
        }
    }
    free(fb);
    free(xb);
    free(y);
    free(z);
}

static int gemm_bf16_case_no = 0;

/* gemm_bf16 of t against the scalar reference s (kernels.h: bf16 numerics): per element
 * |C - ref| <= 2.4e-7 (K + 4) S + K 2^-126 |alpha|, S = |alpha| sum_k |a' b'| + |beta C0|
 * + |bias| (the float32 accumulation in another order, and flushed denormals); the
 * reference itself against the exact (double) sum of the rounded products within the
 * same bound. b16: op(B) from a bf16 copy (B itself passed as NULL, so it cannot be
 * read). C outside M x N and the 64 floats past the workspace untouched; beta == 0 with
 * C full of NaN gives finite results; a second call, and one given a prefetch hint, give
 * the same bits. */
static void gemm_bf16_case(const vt_kernels *t, const vt_kernels *s, int ta, int tb, int M, int N, int K,
                           float alpha, float beta, int ldpad, int b16, int with_bias) {
    int off = 1 + gemm_bf16_case_no++ % 3;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + ldpad, ldb = bc + ldpad, ldc = N + ldpad;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)M * ldc;
    float *ab, *bb, *cb, *rb, *sb, *c0b, *aab, *abb, *biasb;
    float *A = fbuf(na, off, &ab), *B = fbuf(nb, off, &bb), *C = fbuf(nc, off, &cb), *R = fbuf(nc, off, &rb);
    float *S = fbuf(nc, 0, &sb), *C0 = fbuf(nc, 0, &c0b), *AA = fbuf(na, 0, &aab), *BA = fbuf(nb, 0, &abb);
    float *bias = fbuf((size_t)N, off, &biasb);
    vt_bf16 *B16b = aligned_alloc(64, ((nb + 64) * sizeof(vt_bf16) + 63) / 64 * 64), *B16 = B16b + off;
    /* values of mixed magnitude, so rounding to 8 bits and the order of sums both matter */
    for (size_t i = 0; i < na; i++) A[i] = frand() * (i % 7 == 0 ? 64.0f : i % 5 == 0 ? 0.01f : 1.0f);
    for (size_t i = 0; i < nb; i++) B[i] = frand() * (i % 11 == 0 ? 16.0f : 1.0f);
    fill(bias, (size_t)N, -2, 2);
    s->bf16_round(B, B16, nb);
    vt_bf16 *tmp = aligned_alloc(64, ((na > nb ? na : nb) * sizeof(vt_bf16) + 63) / 64 * 64);
    s->bf16_round(A, tmp, na);
    for (size_t i = 0; i < na; i++) AA[i] = fabsf(bf16f(tmp[i]));
    for (size_t i = 0; i < nb; i++) BA[i] = fabsf(bf16f(B16[i]));
    free(tmp);
    for (size_t i = 0; i < nc; i++) {
        int pad = (int)(i % ldc) >= N;
        C0[i] = pad ? 12345.0f : beta == 0.0f ? NAN : frand();
    }
    const float *bias_p = with_bias ? bias : NULL;
    const float *Bp = b16 ? NULL : B;
    const vt_bf16 *B16p = b16 ? B16 : NULL;
    memcpy(C, C0, sizeof(float) * nc);
    memcpy(R, C0, sizeof(float) * nc);
    size_t wf = t->gemm_bf16_work_floats(M, N, K), ws = s->gemm_bf16_work_floats(M, N, K);
    float *wb, *W = fbuf(wf, 0, &wb), *swb, *SW = fbuf(ws, 0, &swb);
    for (int i = 0; i < 64; i++) W[wf + i] = -777.0f;
    s->gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, NULL, ldb, beta, bias_p, R, ldc, SW, NULL);
    t->gemm_bf16(ta, tb, M, N, K, alpha, A, lda, Bp, B16p, ldb, beta, bias_p, C, ldc, W, NULL);
    s->gemm_bf16(ta, tb, M, N, K, fabsf(alpha), AA, lda, BA, NULL, ldb, 0.0f, NULL, S, ldc, SW, NULL);
    long bad = -1, rbad = -1;
    double worst = 0, rworst = 0;
    int pad_ok = 1, guard_ok = 1;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t e = (size_t)i * ldc + j;
            if (j >= N) {
                pad_ok &= C[e] == 12345.0f;
                continue;
            }
            double bound = fabs(S[e]) + (beta != 0.0f ? fabs(beta * C0[e]) : 0.0) + (with_bias ? fabs(bias[j]) : 0.0);
            double tol = 2.4e-7 * (K + 4) * bound + K * 0x1p-126 * fabs(alpha) + 1e-30;
            double d = fabs((double)C[e] - R[e]);
            if (!(d <= tol) && (bad < 0 || d / tol > worst)) bad = (long)e, worst = d / tol;
            if (t == s) { /* the reference against the exact sum of its rounded products */
                double exact = 0;
                for (int p = 0; p < K && alpha != 0.0f; p++) {
                    float a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
                    float b = tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j];
                    vt_bf16 ha, hb;
                    s->bf16_round(&a, &ha, 1);
                    s->bf16_round(&b, &hb, 1);
                    exact += (double)bf16f(ha) * bf16f(hb);
                }
                exact = alpha * exact + (beta != 0.0f ? (double)beta * C0[e] : 0.0) + (with_bias ? bias[j] : 0.0);
                double dr = fabs(exact - R[e]);
                if (!(dr <= tol) && (rbad < 0 || dr / tol > rworst)) rbad = (long)e, rworst = dr / tol;
            }
        }
    }
    for (int i = 0; i < 64; i++) guard_ok &= W[wf + i] == -777.0f;
    CHECK(bad < 0, "%s gemm_bf16 ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g ld+%d off=%d b16=%d bias=%d: C[%ld] got "
          "%.9g want %.9g (%.3g x tol)", t->name, ta, tb, M, N, K, alpha, beta, ldpad, off, b16, with_bias, bad,
          bad < 0 ? 0.0 : C[bad], bad < 0 ? 0.0 : R[bad], worst);
    CHECK(rbad < 0, "scalar gemm_bf16 ta=%d tb=%d M=%d N=%d K=%d: C[%ld] = %.9g is %.3g x tol from the exact sum of "
          "its rounded products", ta, tb, M, N, K, rbad, rbad < 0 ? 0.0 : R[rbad], rworst);
    CHECK(pad_ok, "%s gemm_bf16 ta=%d tb=%d M=%d N=%d K=%d wrote outside M x N", t->name, ta, tb, M, N, K);
    CHECK(guard_ok, "%s gemm_bf16 M=%d N=%d K=%d wrote past gemm_bf16_work_floats=%zu", t->name, M, N, K, wf);
    /* the same bits again: a second call, and one told A and B come next */
    float *c2b, *C2 = fbuf(nc, off, &c2b);
    const vt_region next_ab[2] = {{A, (size_t)lda, ar, ac}, {B, (size_t)ldb, br, bc}};
    for (int v = 0; v < 2; v++) {
        memcpy(C2, C0, sizeof(float) * nc);
        t->gemm_bf16(ta, tb, M, N, K, alpha, A, lda, Bp, B16p, ldb, beta, bias_p, C2, ldc, W, v ? next_ab : NULL);
        long db = -1;
        for (size_t e = 0; e < nc && db < 0; e++)
            if (memcmp(&C2[e], &C[e], sizeof(float)) != 0) db = (long)e;
        CHECK(db < 0, "%s gemm_bf16 ta=%d tb=%d M=%d N=%d K=%d: %s gives other bits at C[%ld]", t->name, ta, tb, M,
              N, K, v ? "a call with a prefetch hint" : "a second call", db);
    }
    free(c2b);
    free(ab); free(bb); free(cb); free(rb); free(sb); free(c0b); free(aab); free(abb); free(biasb); free(B16b);
    free(wb); free(swb);
}

static void test_gemm_bf16(const vt_kernels *t, const vt_kernels *s) {
    static const int Ms[] = {1, 2, 7, 13, 14, 15, 16, 17, 28, 29, 31, 32, 33, 47};
    static const int Ns[] = {1, 5, 15, 16, 17, 31, 32, 33, 48, 65};
    static const int Ks[] = {1, 2, 3, 7, 16, 17, 31, 32, 33, 63, 64, 65, 97};
    static const float alphas[] = {1.0f, -0.7f, 2.5f};
    static const float betas[] = {0.0f, 1.0f, 0.5f};
    int n = 0;
    for (int tr = 0; tr < 4; tr++)
        for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
            for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++, n++)
                gemm_bf16_case(t, s, tr >> 1, tr & 1, Ms[a], Ns[b], Ks[n % 13], alphas[n % 3], betas[(n / 3) % 3],
                               n % 4 == 0 ? 0 : 1 + n % 5, n % 2, (n / 2) % 2);
    for (int tr = 0; tr < 4; tr++) {
        int ta = tr >> 1, tb = tr & 1;
        gemm_bf16_case(t, s, ta, tb, 197, 197, 64, 0.125f, 0.0f, 0, 0, 0); /* attention's q k^T */
        gemm_bf16_case(t, s, ta, tb, 197, 64, 197, 1.0f, 1.0f, 1, 0, 0);   /* P v, odd K */
        gemm_bf16_case(t, s, ta, tb, 130, 200, 192, 1.0f, 0.0f, 2, 1, 1);  /* a linear layer, bf16 weights */
        gemm_bf16_case(t, s, ta, tb, 37, 45, 1001, -0.7f, 1.0f, 3, 1, 0);  /* K in several blocks */
        gemm_bf16_case(t, s, ta, tb, 300, 40, 100, 2.5f, 0.5f, 1, 0, 1);  /* M > MC */
        gemm_bf16_case(t, s, ta, tb, 40, 1700, 40, 1.0f, 0.5f, 0, 1, 1);  /* N > NC */
        gemm_bf16_case(t, s, ta, tb, 64, 48, 2600, 1.0f, 1.0f, 0, 0, 0);  /* a weight gradient: long K */
        gemm_bf16_case(t, s, ta, tb, 70, 96, 77, 1.0f, 0.0f, 3, tr & 1, 0); /* whole tiles stored as they are */
    }
    gemm_bf16_case(t, s, 0, 0, 0, 5, 5, 1.0f, 0.0f, 0, 0, 0);
    gemm_bf16_case(t, s, 0, 1, 5, 5, 0, 1.0f, 0.0f, 0, 1, 1); /* K = 0: C = beta C + bias */
    gemm_bf16_case(t, s, 1, 0, 5, 7, 0, 1.0f, 0.5f, 1, 0, 0);
    gemm_bf16_case(t, s, 0, 1, 6, 9, 8, 0.0f, 0.5f, 1, 0, 1); /* alpha = 0 */
}


/* The packed op(B) or op(A) entries of t (entries.def: gemm_bf16_packed_b_floats,
 * _pack_b, _packed_b; gemm_bf16_packed_a_floats, _pack_a, _packed_a; side 'B' or 'A';
 * side 'F': the float32 gemm_packed_b_floats, gemm_pack_b, gemm_packed_b)
 * for one product: a level without a packed form says so with no panels; else packing
 * the panels in three ranges, each into a buffer of its own full of a marker (two bf16
 * NaNs, which no finite operand packs to), writes disjoint words that together cover the
 * packed form and nothing past it, and the product on the ranges packed into one buffer,
 * last range first, gives bitwise t's gemm_bf16 ('F': t's gemm_bias; each itself tested
 * against the scalar reference; for the scalar level, the reference). */
static void gemm_packed_case(const vt_kernels *t, char side, int ta, int tb, int M, int N, int K, float alpha,
                                  float beta, int b16, int with_bias) {
    int panels = -1;
    if (side == 'F') b16 = 0;
    const char *packed_fn = side == 'A' ? "gemm_bf16_packed_a" : side == 'F' ? "gemm_packed_b" : "gemm_bf16_packed_b";
    const char *pack_fn = side == 'A' ? "gemm_bf16_pack_a" : side == 'F' ? "gemm_pack_b" : "gemm_bf16_pack_b";
    size_t pf = side == 'A'   ? t->gemm_bf16_packed_a_floats(M, K, &panels)
                : side == 'F' ? t->gemm_packed_b_floats(N, K, &panels)
                              : t->gemm_bf16_packed_b_floats(N, K, &panels);
    if (pf == 0) {
        CHECK(panels == 0, "%s %s_floats(%d, %d) = 0 with %d panels", t->name, packed_fn,
              side == 'A' ? M : N, K, panels);
        return;
    }
    CHECK(panels > 0, "%s %s_floats(%d, %d) = %zu with %d panels", t->name, packed_fn,
          side == 'A' ? M : N, K, pf, panels);
    if (panels <= 0) return;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 1, ldb = bc + 2, ldc = N + 3;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)M * ldc;
    float *ab, *bb, *cb, *rb, *biasb, *pb, *mb, *wb;
    float *A = fbuf(na, 1, &ab), *B = fbuf(nb, 2, &bb), *C = fbuf(nc, 3, &cb), *R = fbuf(nc, 3, &rb);
    float *bias = fbuf((size_t)N, 0, &biasb), *P = fbuf(pf, 0, &pb), *Mk = fbuf(pf, 0, &mb);
    vt_bf16 *B16 = aligned_alloc(64, (nb * sizeof(vt_bf16) + 63) / 64 * 64 + 64);
    size_t wf = side == 'F' ? t->gemm_work_floats(M, N, K) : t->gemm_bf16_work_floats(M, N, K);
    float *W = fbuf(wf, 0, &wb);
    unsigned char *owner = calloc(pf, 1);
    for (size_t i = 0; i < na; i++) A[i] = frand() * (i % 7 == 0 ? 64.0f : 1.0f);
    fill(B, nb, -1, 1);
    fill(bias, (size_t)N, -2, 2);
    for (size_t i = 0; i < nc; i++) C[i] = R[i] = (int)(i % ldc) >= N ? 12345.0f : frand();
    t->bf16_round(B, B16, nb);
    const float *Bp = b16 ? NULL : B, *bias_p = with_bias ? bias : NULL;
    const vt_bf16 *B16p = b16 ? B16 : NULL;
    const uint32_t marker = 0xFFFFFFFFu;
    int cut[4] = {0, panels / 3, panels - panels / 4, panels}, overlap = 0, outside = 0;
    for (int r = 0; r < 3; r++) {
        for (size_t i = 0; i < pf + 64; i++) memcpy(&Mk[i], &marker, 4);
        if (side == 'A') t->gemm_bf16_pack_a(ta, M, K, A, lda, cut[r], cut[r + 1], Mk);
        else if (side == 'F') t->gemm_pack_b(tb, N, K, B, ldb, cut[r], cut[r + 1], Mk);
        else t->gemm_bf16_pack_b(tb, N, K, Bp, B16p, ldb, cut[r], cut[r + 1], Mk);
        for (size_t i = 0; i < pf + 64; i++) {
            uint32_t w;
            memcpy(&w, &Mk[i], 4);
            if (w == marker) continue;
            if (i >= pf) outside++;
            else if (owner[i]++) overlap++;
        }
    }
    size_t unwritten = 0;
    for (size_t i = 0; i < pf; i++) unwritten += owner[i] == 0;
    CHECK(overlap == 0 && outside == 0 && unwritten == 0,
          "%s %s ta=%d tb=%d M=%d N=%d K=%d b16=%d in panel ranges [%d %d %d %d): %d words written "
          "twice, %d past the %zu floats, %zu never written", t->name, pack_fn, ta, tb, M, N, K, b16, cut[0],
          cut[1], cut[2], cut[3], overlap, outside, pf, unwritten);
    for (size_t i = 0; i < pf; i++) P[i] = NAN;
    for (int r = 2; r >= 0; r--) {
        if (side == 'A') t->gemm_bf16_pack_a(ta, M, K, A, lda, cut[r], cut[r + 1], P);
        else if (side == 'F') t->gemm_pack_b(tb, N, K, B, ldb, cut[r], cut[r + 1], P);
        else t->gemm_bf16_pack_b(tb, N, K, Bp, B16p, ldb, cut[r], cut[r + 1], P);
    }
    if (side == 'F') t->gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias_p, R, ldc, W);
    else t->gemm_bf16(ta, tb, M, N, K, alpha, A, lda, Bp, B16p, ldb, beta, bias_p, R, ldc, W, NULL);
    if (side == 'A') t->gemm_bf16_packed_a(tb, M, N, K, alpha, P, Bp, B16p, ldb, beta, bias_p, C, ldc, W);
    else if (side == 'F') t->gemm_packed_b(ta, M, N, K, alpha, A, lda, P, beta, bias_p, C, ldc, W);
    else t->gemm_bf16_packed_b(ta, M, N, K, alpha, A, lda, P, beta, bias_p, C, ldc, W);
    long bad = -1;
    for (size_t i = 0; i < nc && bad < 0; i++)
        if (memcmp(&C[i], &R[i], 4)) bad = (long)i;
    CHECK(bad < 0, "%s %s ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g b16=%d bias=%d: C[%ld] = "
          "%.9g, %s gives %.9g", t->name, packed_fn, ta, tb, M, N, K, alpha, beta, b16, with_bias, bad,
          bad < 0 ? 0 : C[bad], side == 'F' ? "gemm_bias" : "gemm_bf16", bad < 0 ? 0 : R[bad]);
    free(ab), free(bb), free(cb), free(rb), free(biasb), free(pb), free(mb), free(wb), free(B16), free(owner);
}

/* gemm_b_blocks (entries.def) for one product: blocks within op(B), and the product run
 * block by block through t's gemm_bias (beta in the first K block, 1 after it, the bias
 * in the last) bitwise t's gemm_bias on the whole. */
static void gemm_blocks_case(const vt_kernels *t, int ta, int tb, int M, int N, int K, float alpha, float beta,
                             int with_bias) {
    int nc = -1, kc = -1;
    t->gemm_b_blocks(ta, N, K, &nc, &kc);
    CHECK(nc >= 1 && nc <= (N > 1 ? N : 1) && kc >= 1 && kc <= (K > 1 ? K : 1),
          "%s gemm_b_blocks(ta=%d, N=%d, K=%d) = %d columns x %d steps", t->name, ta, N, K, nc, kc);
    if (nc < 1 || kc < 1) return;
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + 1, ldb = bc + 2, ldc = N + 3;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, ncf = (size_t)M * ldc;
    float *ab, *bb, *cb, *rb, *biasb, *wb;
    float *A = fbuf(na, 1, &ab), *B = fbuf(nb, 2, &bb), *C = fbuf(ncf, 3, &cb), *R = fbuf(ncf, 3, &rb);
    float *bias = fbuf((size_t)N, 0, &biasb), *W = fbuf(t->gemm_work_floats(M, N, K), 0, &wb);
    fill(A, na, -1, 1);
    fill(B, nb, -1, 1);
    fill(bias, (size_t)N, -2, 2);
    for (size_t i = 0; i < ncf; i++) C[i] = R[i] = frand();
    const float *bias_p = with_bias ? bias : NULL;
    t->gemm_bias(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, bias_p, R, ldc, W);
    for (int jc = 0; jc < N; jc += nc)
        for (int pc = 0; pc < K; pc += kc) {
            int n = N - jc < nc ? N - jc : nc, k = K - pc < kc ? K - pc : kc;
            const float *a = A + (ta ? (size_t)pc * lda : (size_t)pc);
            const float *b = B + (tb ? (size_t)jc * ldb + pc : (size_t)pc * ldb + jc);
            t->gemm_bias(ta, tb, M, n, k, alpha, a, lda, b, ldb, pc == 0 ? beta : 1.0f,
                         bias_p && pc + k == K ? bias_p + jc : NULL, C + jc, ldc, W);
        }
    long bad = -1;
    for (size_t i = 0; i < ncf && bad < 0; i++)
        if (memcmp(&C[i], &R[i], 4)) bad = (long)i;
    CHECK(bad < 0, "%s gemm_bias ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g bias=%d in gemm_b_blocks' %d x %d "
          "blocks: C[%ld] = %.9g, whole %.9g", t->name, ta, tb, M, N, K, alpha, beta, with_bias, kc, nc, bad,
          bad < 0 ? 0 : C[bad], bad < 0 ? 0 : R[bad]);
    free(ab), free(bb), free(cb), free(rb), free(biasb), free(wb);
}

/* The packed forms (bf16 op(B) and op(A), float32 op(B)) on shapes across the blockings'
 * edges: M and N past a panel and an N block (1700 columns), K past a K block (1001,
 * 2600), odd K, one row, and M past the one-pass bound with N past its columns (the
 * packed product keeps the BLIS order there); the float32 blocks (gemm_b_blocks). */
static void test_gemm_packed(const vt_kernels *t) {
    static const int shapes[][3] = {{1, 1, 1},      {7, 17, 33},    {33, 63, 2},    {70, 96, 77},
                                    {40, 1700, 40}, {37, 45, 1001}, {64, 48, 2600}, {130, 200, 192},
                                    {1700, 40, 40}, {450, 600, 300}};
    for (int side = 0; side < 3; side++) {
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
            for (int tr = 0; tr < 4; tr++)
                gemm_packed_case(t, "BAF"[side], tr >> 1, tr & 1, shapes[i][0], shapes[i][1], shapes[i][2],
                                      i % 3 ? 1.0f : -0.7f, i % 2 ? 0.5f : 0.0f, (int)(i + tr) % 2, (int)i % 3 != 1);
        gemm_packed_case(t, "BAF"[side], 0, 1, 5, 9, 8, 0.0f, 0.5f, 0, 1); /* alpha = 0 */
    }
    /* the blocks: op(B) of one block, past an N block, past K blocks (small M: the rows
     * change no block) */
    static const int blocks[][3] = {{1, 1, 1}, {7, 17, 33}, {40, 1700, 40}, {37, 45, 1001}, {64, 48, 2600},
                                    {130, 200, 192}};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        for (int tr = 0; tr < 4; tr++)
            gemm_blocks_case(t, tr >> 1, tr & 1, blocks[i][0], blocks[i][1], blocks[i][2], i % 3 ? 1.0f : -0.7f,
                             i % 2 ? 0.5f : 0.0f, (int)i % 3 != 1);
}

/* A float32 with denormals flushed to a zero of their sign (the bf16 instructions' FTZ). */
static float ftz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }

/* The bf16 levels' own summation order, bitwise (kernels.h: bf16 numerics), for K within
 * one K block, alpha 1, beta 0: avx512bf16 as VDPBF16PS documents it (per pair the odd
 * step's product, then the even one's, each an FMA, results flushed to zero); amx as
 * TDPBF16PS does (per 32-step tile, even and odd steps in two sums from zero, added,
 * then added to the accumulator). Operands of widely spread magnitude (so every order
 * gives other bits) and products below FLT_MIN (flushed). Run natively where the CPU has
 * the level and in the emulation build, this pins the emulation to the hardware. */
static void test_gemm_bf16_order(const vt_kernels *t) {
    static const int Ks[] = {1, 2, 3, 31, 32, 33, 64, 95, 200, 384};
    const int M = 5, N = 19;
    for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++)
        for (int tr = 0; tr < 4; tr++) {
            int K = Ks[ki], ta = tr >> 1, tb = tr & 1;
            int lda = ta ? M : K, ldb = tb ? K : N;
            float *ab, *bb, *cb, *wb;
            float *A = fbuf((size_t)M * K, 0, &ab), *B = fbuf((size_t)K * N, 0, &bb), *C = fbuf((size_t)M * N, 0, &cb);
            float *W = fbuf(t->gemm_bf16_work_floats(M, N, K), 0, &wb);
            for (int i = 0; i < M * K; i++) A[i] = ldexpf(frand(), (int)(rng_state % 41) - 20) * (i % 9 == 0 ? 1e-19f : 1.0f);
            for (int i = 0; i < K * N; i++) B[i] = ldexpf(frand(), (int)(rng_state % 31) - 15) * (i % 7 == 0 ? 1e-20f : 1.0f);
            /* the last rows of op(A) and columns of op(B) tiny: their products and sums near FLT_MIN */
            for (int i = M - 2; i < M; i++)
                for (int k = 0; k < K; k++) *(ta ? &A[(size_t)k * lda + i] : &A[(size_t)i * lda + k]) *= 1e-22f;
            for (int j = N - 3; j < N; j++)
                for (int k = 0; k < K; k++) *(tb ? &B[(size_t)j * ldb + k] : &B[(size_t)k * ldb + j]) *= 1e-14f;
            t->gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, NULL, ldb, 0.0f, NULL, C, N, W, NULL);
            long bad = -1;
            float want_bad = 0;
            for (int i = 0; i < M && bad < 0; i++)
                for (int j = 0; j < N && bad < 0; j++) {
                    float ar[2], br[2], acc = 0.0f, te = 0.0f, to = 0.0f;
                    int pairs = (K + 1) / 2;
                    if (t->isa == VT_ISA_AMX) pairs = (pairs + 15) / 16 * 16; /* whole tiles, zero-padded */
                    for (int p = 0; p < pairs; p++) {
                        for (int h = 0; h < 2; h++) {
                            int k = 2 * p + h;
                            float a = k < K ? (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) : 0.0f;
                            float b = k < K ? (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]) : 0.0f;
                            vt_bf16 ha = bf16_model(a), hb = bf16_model(b);
                            ar[h] = bf16f(ha);
                            br[h] = bf16f(hb);
                        }
                        if (t->isa == VT_ISA_AVX512BF16) {
                            acc = ftz(fmaf(ar[1], br[1], acc));
                            acc = ftz(fmaf(ar[0], br[0], acc));
                        } else {
                            te = ftz(fmaf(ar[0], br[0], te));
                            to = ftz(fmaf(ar[1], br[1], to));
                            if (p % 16 == 15) {
                                acc = ftz(acc + ftz(te + to));
                                te = to = 0.0f;
                            }
                        }
                    }
                    if (memcmp(&acc, &C[(size_t)i * N + j], sizeof acc) != 0) bad = (long)(i * N + j), want_bad = acc;
                }
            CHECK(bad < 0, "%s gemm_bf16 ta=%d tb=%d K=%d: C[%ld] = %a, the instruction's documented order gives %a",
                  t->name, ta, tb, K, bad, bad < 0 ? 0.0 : C[bad], want_bad);
            free(ab); free(bb); free(cb); free(wb);
        }
}

/* ---------------------------------------------------------------- elementwise */

static void test_elementwise(const vt_kernels *t, const vt_kernels *s) {
    for (int r = 0; r < NRAGGED; r++) {
        size_t n = (size_t)ragged[r];
        int off = 1 + r % 3;
        float *b1, *b2, *b3, *b4;
        float *x = fbuf(n, off, &b1), *y = fbuf(n, off, &b2), *z = fbuf(n, (off + 1) % 4, &b3),
              *w = fbuf(n, 0, &b4);
        fill(x, n + 8, -3, 3);
        fill(y, n + 8, -3, 3);
        t->add(x, y, z, n);
        s->add(x, y, w, n);
        CHECK_ARRAY_CLOSE(z, w, n, 0.0, 0.0, "%s add n=%zu", t->name, n);
        memcpy(z, x, n * sizeof(float));
        memcpy(w, x, n * sizeof(float));
        z[n] = w[n] = 42.0f;
        t->scale(z, -1.3f, n);
        s->scale(w, -1.3f, n);
        CHECK_ARRAY_CLOSE(z, w, n + 1, 0.0, 0.0, "%s scale n=%zu (incl. the float after)", t->name, n);
        float *b5, *u = fbuf(n, off, &b5);
        for (int a = 0; a < 16; a++) { /* every start alignment; the floats around untouched */
            memcpy(u, x, (n + 1) * sizeof(float));
            int at = a < (int)n ? a : 0;
            size_t len = n - (size_t)at;
            t->zero_stream(u + at, len);
            int ok = 1;
            for (size_t i = 0; i <= n; i++) {
                int in = i >= (size_t)at && i < n;
                ok &= in ? u[i] == 0.0f && !signbit(u[i]) : memcmp(&u[i], &x[i], sizeof(float)) == 0;
            }
            CHECK(ok, "%s zero_stream of %zu floats at +%d: wrong zeros or a write outside", t->name, len, at);
            memcpy(u, y, (n + 1) * sizeof(float)); /* copy_stream: x[at + 1 ..] to u + at */
            size_t clen = len > 0 ? len - 1 : 0;
            t->copy_stream(x + at + 1, u + at, clen);
            ok = 1;
            for (size_t i = 0; i <= n; i++) {
                int in = i >= (size_t)at && i < (size_t)at + clen;
                ok &= memcmp(&u[i], in ? &x[i + 1] : &y[i], sizeof(float)) == 0;
            }
            CHECK(ok, "%s copy_stream of %zu floats to +%d: wrong values or a write outside", t->name, clen, at);
        }
        free(b5);
        memcpy(z, y, n * sizeof(float));
        memcpy(w, y, n * sizeof(float));
        t->axpy(0.37f, x, z, n);
        s->axpy(0.37f, x, w, n);
        CHECK_ARRAY_CLOSE(z, w, n + 1, 0.0, 0.0, "%s axpy n=%zu", t->name, n);
        double sa = 0, da = 0;
        for (size_t i = 0; i < n; i++) {
            sa += fabs(x[i]);
            da += fabs((double)x[i] * y[i]);
        }
        CHECK_CLOSE(t->sum(x, n), s->sum(x, n), 1e-12 * sa, 0.0, "%s sum n=%zu", t->name, n);
        CHECK_CLOSE(t->dot(x, y, n), s->dot(x, y, n), 1e-12 * da, 0.0, "%s dot n=%zu", t->name, n);
        free(b1); free(b2); free(b3); free(b4);
    }
    /* a sum whose float accumulation would lose everything: 1e8 + many ones */
    float *bb, *big = fbuf(1001, 1, &bb);
    big[0] = 1e8f;
    for (int i = 1; i < 1001; i++) big[i] = 1.0f;
    CHECK_CLOSE(t->sum(big, 1001), 1e8 + 1000.0, 0.0, 0.0, "%s sum must accumulate in double", t->name);
    big[0] = 4096.0f; /* 2^24 + 1000: a float accumulator stays at 2^24 */
    CHECK_CLOSE(t->dot(big, big, 1001), 16777216.0 + 1000.0, 0.0, 0.0, "%s dot must accumulate in double", t->name);
    free(bb);
}

/* max, feature_exp, feature_grad: ragged n, misaligned, the float after n untouched. */
static void test_performer_kernels(const vt_kernels *t, const vt_kernels *s) {
    for (int r = 0; r < NRAGGED; r++) {
        size_t n = (size_t)ragged[r];
        int off = 1 + r % 3;
        float *b[4];
        float *x = fbuf(n, off, &b[0]), *y = fbuf(n, off, &b[1]), *d = fbuf(n, (off + 1) % 4, &b[2]),
              *e = fbuf(n, 0, &b[3]);
        for (int neg = 0; neg < 2; neg++) { /* all-negative: a lane past n read as 0 would win */
            fill(x, n + 8, neg ? -5.0f : -3.0f, neg ? -1.0f : 3.0f);
            x[n] = 100.0f;
            CHECK(t->max(x, n) == s->max(x, n), "%s max n=%zu neg=%d: %g, want %g", t->name, n, neg,
                  (double)t->max(x, n), (double)s->max(x, n));
            x[n - 1] = 50.0f; /* the largest last */
            CHECK(t->max(x, n) == 50.0f, "%s max n=%zu misses the last element", t->name, n);
        }
        fill(x, n, -30.0f, 5.0f);
        y[n] = d[n] = 42.0f;
        t->feature_exp(x, y, n, 2.5f, 0.0625f, 1e-4f);
        s->feature_exp(x, d, n, 2.5f, 0.0625f, 1e-4f);
        CHECK_ARRAY_CLOSE(y, d, n + 1, 1e-12, 2e-6, "%s feature_exp n=%zu (incl. the float after)", t->name, n);
        memcpy(y, x, n * sizeof(float));
        t->feature_exp(y, y, n, -1.0f, 0.5f, 0.0f);
        s->feature_exp(x, d, n, -1.0f, 0.5f, 0.0f);
        CHECK_ARRAY_CLOSE(y, d, n, 1e-12, 2e-6, "%s feature_exp in place n=%zu", t->name, n);
        fill(x, n, 0.0f, 2.0f);
        fill(d, n + 1, -1.0f, 1.0f);
        memcpy(e, d, (n + 1) * sizeof(float));
        double gt = t->feature_grad(d, x, 1e-3f, n), gs = s->feature_grad(e, x, 1e-3f, n), ga = 0;
        CHECK_ARRAY_CLOSE(d, e, n + 1, 0.0, 0.0, "%s feature_grad d n=%zu (incl. the float after)", t->name, n);
        for (size_t i = 0; i < n; i++) ga += fabs(e[i]);
        CHECK_CLOSE(gt, gs, 1e-12 * ga, 0.0, "%s feature_grad sum n=%zu", t->name, n);
        for (int i = 0; i < 4; i++) free(b[i]);
    }
}

/* The three pair-rotation entries against the reference, bitwise, for npr pairs in rows
 * of n >= 2 npr floats, misaligned; the float after each output untouched. */
static void test_rot_pairs(const vt_kernels *t, const vt_kernels *s) {
    static const int shapes[][2] = {{1, 2}, {3, 6}, {4, 8}, {7, 16}, {8, 16}, {9, 18}, {16, 40}, {32, 64},
                                    {33, 70}, {0, 5}, {20, 41}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        size_t npr = (size_t)shapes[c][0], n = (size_t)shapes[c][1];
        int off = 1 + (int)c % 3;
        float *b[6];
        float *x = fbuf(n, off, &b[0]), *r = fbuf(n, (off + 1) % 4, &b[1]), *dy = fbuf(n, 0, &b[2]);
        float *y1 = fbuf(n, off, &b[3]), *y2 = fbuf(n, (off + 2) % 4, &b[4]), *acc = fbuf(n, 0, &b[5]);
        fill(x, n + 1, -3, 3);
        fill(r, n + 1, -1, 1);
        fill(dy, n + 1, -2, 2);
        fill(acc, n + 1, -1, 1);
        y1[n] = y2[n] = 42.0f;
        t->rot_pairs(x, r, npr, n, y1);
        s->rot_pairs(x, r, npr, n, y2);
        CHECK_ARRAY_CLOSE(y1, y2, n + 1, 0.0, 0.0, "%s rot_pairs npr=%zu n=%zu (incl. the float after)", t->name,
                          npr, n);
        memcpy(y1, acc, (n + 1) * sizeof(float));
        memcpy(y2, acc, (n + 1) * sizeof(float));
        t->rot_pairs_bwd(dy, r, npr, n, y1);
        s->rot_pairs_bwd(dy, r, npr, n, y2);
        CHECK_ARRAY_CLOSE(y1, y2, n + 1, 0.0, 0.0, "%s rot_pairs_bwd npr=%zu n=%zu (incl. the float after)",
                          t->name, npr, n);
        memcpy(y1, acc, (n + 1) * sizeof(float));
        memcpy(y2, acc, (n + 1) * sizeof(float));
        t->rot_pairs_bwd_cs(x, dy, npr, y1);
        s->rot_pairs_bwd_cs(x, dy, npr, y2);
        CHECK_ARRAY_CLOSE(y1, y2, n + 1, 0.0, 0.0, "%s rot_pairs_bwd_cs npr=%zu (incl. the floats after 2 npr)",
                          t->name, npr);
        for (int i = 0; i < 6; i++) free(b[i]);
    }
    /* the reference itself: a rotation by 90 degrees of (1, 2) is (-2, 1) */
    float x[2] = {1.0f, 2.0f}, r[2] = {0.0f, 1.0f}, y[2];
    s->rot_pairs(x, r, 1, 2, y);
    CHECK(y[0] == -2.0f && y[1] == 1.0f, "scalar rot_pairs of (1, 2) by 90 degrees: (%g, %g)", y[0], y[1]);
}

/* matmul_f64 of every n up to 17 and some larger, acc 0 and 1, against a long double
 * product; the double after C must stay untouched. */
static void test_matmul_f64(const vt_kernels *t) {
    static const int sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 31, 33, 64, 65};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si];
        size_t nn = (size_t)n * n;
        double *A = malloc(nn * sizeof(double)), *B = malloc(nn * sizeof(double)),
               *C = malloc((nn + 1) * sizeof(double)), *C0 = malloc(nn * sizeof(double));
        if (!A || !B || !C || !C0) {
            fprintf(stderr, "test_kernels: out of memory\n");
            exit(1);
        }
        for (size_t e = 0; e < nn; e++) {
            A[e] = frand();
            B[e] = frand() * 3.0;
            C0[e] = frand();
        }
        for (int acc = 0; acc < 2; acc++) {
            memcpy(C, C0, nn * sizeof(double));
            C[nn] = 42.0;
            t->matmul_f64(n, A, B, C, acc);
            int bad = 0, bi = 0, bj = 0;
            double bgot = 0, bwant = 0, btol = 0;
            for (int i = 0; i < n && !bad; i++)
                for (int j = 0; j < n && !bad; j++) {
                    long double want = acc ? C0[(size_t)i * n + j] : 0.0L, mag = 0.0L;
                    for (int k = 0; k < n; k++) {
                        long double p = (long double)A[(size_t)i * n + k] * B[(size_t)k * n + j];
                        want += p;
                        mag += fabsl(p);
                    }
                    double tol = (double)(n * 0x1p-52L * mag) + (acc ? 0x1p-52 * fabs(C0[(size_t)i * n + j]) : 0.0);
                    double got = C[(size_t)i * n + j];
                    if (!(fabs(got - (double)want) <= tol)) {
                        bad = 1, bi = i, bj = j, bgot = got, bwant = (double)want, btol = tol;
                    }
                }
            CHECK(!bad, "%s matmul_f64 n=%d acc=%d: C[%d][%d] = %.17g, want %.17g (tol %.3g)", t->name, n, acc,
                  bi, bj, bgot, bwant, btol);
            CHECK(C[nn] == 42.0, "%s matmul_f64 n=%d acc=%d wrote past C", t->name, n, acc);
        }
        free(A); free(B); free(C); free(C0);
    }
}

static void test_adamw(const vt_kernels *t, const vt_kernels *s) {
    for (int r = 0; r < NRAGGED; r++) {
        size_t n = (size_t)ragged[r];
        int off = r % 4;
        float *b[8];
        float *p1 = fbuf(n, off, &b[0]), *m1 = fbuf(n, off, &b[1]), *v1 = fbuf(n, off, &b[2]);
        float *p2 = fbuf(n, 0, &b[3]), *m2 = fbuf(n, 0, &b[4]), *v2 = fbuf(n, 0, &b[5]);
        float *g = fbuf(n, (off + 2) % 4, &b[6]);
        fill(p1, n, -1, 1);
        fill(m1, n, -0.1f, 0.1f);
        fill(v1, n, 0, 0.01f);
        fill(g, n, -1, 1);
        memcpy(p2, p1, n * 4);
        memcpy(m2, m1, n * 4);
        memcpy(v2, v1, n * 4);
        float bc1 = 1.0f - powf(0.9f, 3), bc2 = 1.0f - powf(0.999f, 3);
        t->adamw(p1, g, m1, v1, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, bc1, bc2);
        s->adamw(p2, g, m2, v2, n, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.05f, bc1, bc2);
        CHECK_ARRAY_CLOSE(p1, p2, n, 1e-9, 1e-6, "%s adamw p n=%zu", t->name, n);
        CHECK_ARRAY_CLOSE(m1, m2, n, 1e-9, 1e-6, "%s adamw m n=%zu", t->name, n);
        CHECK_ARRAY_CLOSE(v1, v2, n, 1e-9, 1e-6, "%s adamw v n=%zu", t->name, n);
        for (int i = 0; i < 7; i++) free(b[i]);
    }
}

/* ---------------------------------------------------------------- softmax */

/* Rows cols floats long, ld = cols (contiguous) and ld = cols + 5 (a gap after each
 * row, which must keep its sentinel). */
static void test_softmax(const vt_kernels *t, const vt_kernels *s) {
    const float sentinel = 7.0f;
    for (int r = 0; r < NRAGGED; r++)
        for (int gap = 0; gap <= 5; gap += 5) {
            int cols = ragged[r], rows = 3, off = 1 + r % 3, ld = cols + gap;
            size_t n = (size_t)rows * ld;
            float *b[6];
            float *x = fbuf(n, off, &b[0]), *y = fbuf(n, off, &b[1]), *yr = fbuf(n, 0, &b[2]);
            float *dy = fbuf(n, (off + 1) % 4, &b[3]), *dx = fbuf(n, off, &b[4]), *dxr = fbuf(n, 0, &b[5]);
            for (int big = 0; big < 2; big++) {
                fill(x, n, big ? -1000.0f : -4.0f, big ? 1000.0f : 4.0f);
                if (cols > 3) x[2] = x[ld + 1] = -INFINITY; /* masked positions */
                for (size_t i = 0; i < n; i++) y[i] = yr[i] = sentinel;
                float sc = big ? 1.0f : 0.125f;
                t->softmax_rows(x, y, rows, cols, ld, sc);
                s->softmax_rows(x, yr, rows, cols, ld, sc);
                CHECK_ARRAY_CLOSE(y, yr, n, 1e-9, 2e-6, "%s softmax rows=%d cols=%d ld=%d big=%d", t->name, rows, cols,
                                  ld, big);
                if (gap) CHECK(y[cols] == sentinel && y[n - 1] == sentinel, "%s softmax ld=%d: wrote between rows", t->name, ld);
                if (cols > 3) CHECK(y[2] == 0.0f && y[ld + 1] == 0.0f, "%s softmax: exp(-inf) not 0", t->name);
                double tot = 0;
                for (int c = 0; c < cols; c++) tot += y[c];
                CHECK_CLOSE(tot, 1.0, 1e-5, 0.0, "%s softmax row sum cols=%d", t->name, cols);
                memcpy(x, yr, n * 4); /* in place: y == x */
                fill(x, n, -4, 4);
                memcpy(yr, x, n * 4);
                t->softmax_rows(x, x, rows, cols, ld, sc);
                s->softmax_rows(yr, yr, rows, cols, ld, sc);
                CHECK_ARRAY_CLOSE(x, yr, n, 1e-9, 2e-6, "%s softmax in place cols=%d ld=%d", t->name, cols, ld);
            }
            fill(dy, n, -1, 1);
            for (size_t i = 0; i < n; i++) dx[i] = dxr[i] = sentinel;
            t->softmax_bwd_rows(yr, dy, dx, rows, cols, ld);
            s->softmax_bwd_rows(yr, dy, dxr, rows, cols, ld);
            CHECK_ARRAY_CLOSE(dx, dxr, n, 1e-6, 1e-5, "%s softmax_bwd cols=%d ld=%d", t->name, cols, ld);
            if (gap) CHECK(dx[cols] == sentinel && dx[n - 1] == sentinel, "%s softmax_bwd ld=%d: wrote between rows", t->name, ld);
            memcpy(dx, dy, n * 4); /* dx == dy allowed */
            t->softmax_bwd_rows(yr, dx, dx, rows, cols, ld);
            s->softmax_bwd_rows(yr, dy, dxr, rows, cols, ld);
            for (int i = 0; i < rows && gap; i++) /* the gaps keep dy's values in place */
                for (int c = cols; c < ld; c++) dxr[(size_t)i * ld + c] = dy[(size_t)i * ld + c];
            CHECK_ARRAY_CLOSE(dx, dxr, n, 1e-6, 1e-5, "%s softmax_bwd in place cols=%d ld=%d", t->name, cols, ld);
            for (int i = 0; i < 6; i++) free(b[i]);
        }
}

/* ---------------------------------------------------------------- layernorm */

static void test_layernorm(const vt_kernels *t, const vt_kernels *s) {
    for (int r = 0; r < NRAGGED; r++) {
        int D = ragged[r], rows = 3, off = 1 + r % 3;
        size_t n = (size_t)rows * D;
        float *b[16];
        float *x = fbuf(n, off, &b[0]), *g = fbuf(D, (off + 1) % 4, &b[1]), *bi = fbuf(D, off, &b[2]);
        float *y = fbuf(n, off, &b[3]), *yr = fbuf(n, 0, &b[4]);
        float *mu = fbuf(rows, 0, &b[5]), *rs = fbuf(rows, 1, &b[6]), *mur = fbuf(rows, 0, &b[7]),
              *rsr = fbuf(rows, 0, &b[8]);
        float *dy = fbuf(n, off, &b[9]), *dx = fbuf(n, (off + 2) % 4, &b[10]), *dxr = fbuf(n, 0, &b[11]);
        float *dg = fbuf(D, off, &b[12]), *dgr = fbuf(D, 0, &b[13]), *db = fbuf(D, 1, &b[14]),
              *dbr = fbuf(D, 0, &b[15]);
        fill(x, n, -2, 3);
        fill(g, D, 0.5f, 1.5f);
        fill(bi, D, -0.5f, 0.5f);
        t->layernorm_fwd(x, g, bi, y, mu, rs, rows, D, 1e-5f);
        s->layernorm_fwd(x, g, bi, yr, mur, rsr, rows, D, 1e-5f);
        CHECK_ARRAY_CLOSE(y, yr, n, 2e-5, 1e-5, "%s layernorm_fwd y D=%d", t->name, D);
        CHECK_ARRAY_CLOSE(mu, mur, rows, 2e-6, 1e-5, "%s layernorm_fwd mean D=%d", t->name, D);
        CHECK_ARRAY_CLOSE(rs, rsr, rows, 1e-6, 2e-5, "%s layernorm_fwd rstd D=%d", t->name, D);
        fill(dy, n, -1, 1);
        fill(dx, n, -1, 1);
        fill(dg, D, -1, 1);
        fill(db, D, -1, 1);
        memcpy(dxr, dx, n * 4);
        memcpy(dgr, dg, D * 4);
        memcpy(dbr, db, D * 4);
        t->layernorm_bwd(dy, x, g, mur, rsr, dx, dg, db, rows, D);
        s->layernorm_bwd(dy, x, g, mur, rsr, dxr, dgr, dbr, rows, D);
        CHECK_ARRAY_CLOSE(dx, dxr, n, 1e-5, 1e-4, "%s layernorm_bwd dx D=%d", t->name, D);
        CHECK_ARRAY_CLOSE(dg, dgr, D, 1e-5, 1e-4, "%s layernorm_bwd dg D=%d", t->name, D);
        CHECK_ARRAY_CLOSE(db, dbr, D, 1e-5, 1e-4, "%s layernorm_bwd db D=%d", t->name, D);
        t->layernorm_bwd(dy, x, g, mur, rsr, dx, NULL, NULL, rows, D);
        s->layernorm_bwd(dy, x, g, mur, rsr, dxr, NULL, NULL, rows, D);
        CHECK_ARRAY_CLOSE(dx, dxr, n, 1e-5, 1e-4, "%s layernorm_bwd dg=db=NULL D=%d", t->name, D);

        /* large common offset: compare both with a double-precision LayerNorm */
        fill(x, n, 999.0f, 1001.0f);
        t->layernorm_fwd(x, g, bi, y, mu, rs, rows, D, 1e-5f);
        s->layernorm_fwd(x, g, bi, yr, mur, rsr, rows, D, 1e-5f);
        double wf = 0, ws = 0;
        for (int rr = 0; rr < rows; rr++) {
            const float *xr = x + (size_t)rr * D;
            double m = 0, v = 0;
            for (int i = 0; i < D; i++) m += xr[i];
            m /= D;
            for (int i = 0; i < D; i++) v += (xr[i] - m) * (xr[i] - m);
            v /= D;
            double rsd = 1.0 / sqrt(v + 1e-5);
            /* one ulp of the mean, amplified by rstd g, plus 1e-5 */
            const double ulp_m = ldexp(1.0, -14); /* ulp(1000) in float */
            for (int i = 0; i < D; i++) {
                double want = (xr[i] - m) * rsd * g[i] + bi[i];
                double scale_i = ulp_m * rsd * fabs(g[i]);
                wf = fmax(wf, (fabs(y[(size_t)rr * D + i] - want) - 1e-5) / scale_i);
                ws = fmax(ws, (fabs(yr[(size_t)rr * D + i] - want) - 1e-5) / scale_i);
            }
        }
        CHECK(wf <= 1.0, "%s layernorm_fwd mean 1000 D=%d: error %.3g ulp(mean) rstd |g| vs double", t->name, D, wf);
        CHECK(ws <= 64.0, "scalar layernorm_fwd mean 1000 D=%d: error %.3g ulp(mean) rstd |g| vs double", D, ws);
        for (int i = 0; i < 16; i++) free(b[i]);
    }
}

/* ---------------------------------------------------------------- gelu */

static double gelu_d(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double gelu_grad_d(double x) {
    return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
}

/* The GELU entries on the ragged lengths, from misaligned starts: each element bitwise the
 * full-length call's (elementwise kernels), and the float after n never written. */
static void test_gelu_lengths(const vt_kernels *t) {
    enum { N = 4099 + 8 };
    float *b[8];
    float *x = fbuf(N, 0, &b[0]), *dy = fbuf(N, 0, &b[1]), *y = fbuf(N, 0, &b[2]), *dx = fbuf(N, 0, &b[3]);
    float *g = fbuf(N, 0, &b[4]), *dxf = fbuf(N, 0, &b[5]), *z = fbuf(N + 1, 0, &b[6]), *gz = fbuf(N + 1, 0, &b[7]);
    fill(x, N, -6, 6);
    fill(dy, N, -2, 2);
    t->gelu_fwd(x, y, N);
    for (int i = 0; i < N; i++) dx[i] = 0.25f;
    t->gelu_bwd(x, dy, dx, N);
    memcpy(g, dy, N * 4);
    for (int i = 0; i < N; i++) dxf[i] = 0.25f;
    t->gelu_bwd_fwd(x, g, dxf, N, 1);
    const float guard = 42.0f;
    for (int r = 0; r < NRAGGED; r++) {
        size_t n = (size_t)ragged[r], a = (size_t)r % 3; /* elements [a, a + n) */
        z[a + n] = guard;
        t->gelu_fwd(x + a, z + a, n);
        CHECK(memcmp(z + a, y + a, n * 4) == 0 && z[a + n] == guard,
              "%s gelu_fwd n=%zu at +%zu: values differ from the full call's or the float after was written",
              t->name, n, a);
        for (size_t i = 0; i < n; i++) z[a + i] = 0.25f;
        z[a + n] = guard;
        t->gelu_bwd(x + a, dy + a, z + a, n);
        CHECK(memcmp(z + a, dx + a, n * 4) == 0 && z[a + n] == guard,
              "%s gelu_bwd n=%zu at +%zu: values differ from the full call's or the float after was written",
              t->name, n, a);
        memcpy(gz, dy, (a + n) * 4); /* g: dy in, gelu(x) out */
        gz[a + n] = guard;
        for (size_t i = 0; i < n; i++) z[a + i] = 0.25f;
        z[a + n] = guard;
        t->gelu_bwd_fwd(x + a, gz + a, z + a, n, 1);
        CHECK(memcmp(z + a, dxf + a, n * 4) == 0 && memcmp(gz + a, y + a, n * 4) == 0 && z[a + n] == guard &&
                  gz[a + n] == guard,
              "%s gelu_bwd_fwd n=%zu at +%zu: values differ from the full call's or a float after was written",
              t->name, n, a);
    }
    for (int i = 0; i < 8; i++) free(b[i]);
}

static void test_gelu(const vt_kernels *t, const vt_kernels *s) {
    enum { NG = 24001 + 16 };
    float *b[6];
    float *x = fbuf(NG, 1, &b[0]), *y = fbuf(NG, 2, &b[1]), *yr = fbuf(NG, 0, &b[2]);
    float *dy = fbuf(NG, 3, &b[3]), *dx = fbuf(NG, 1, &b[4]), *dxr = fbuf(NG, 0, &b[5]);
    static const float large[16] = {-1e30f, 1e30f, -1e4f, 1e4f, -100.f, 100.f, -20.f, 20.f,
                                    -9.f,   9.f,   -6.f,  6.f,  -4.5f,  4.5f,  -1e-30f, 0.f};
    for (int i = 0; i < 24001; i++) x[i] = -12.0f + 0.001f * (float)i;
    for (int i = 0; i < 16; i++) x[24001 + i] = large[i];
    for (int len = 0; len < 2; len++) {
        size_t n = len ? NG : 33; /* a short ragged call, then the grid */
        t->gelu_fwd(x, y, n);
        s->gelu_fwd(x, yr, n);
        long bad = -1, badr = -1;
        for (size_t i = 0; i < n; i++) {
            double want = gelu_d(x[i]), ax = fabs(x[i]);
            if (!(fabs(y[i] - want) <= 0.5 * ax * 3e-7 + 2.4e-7 * fabs(want))) bad = (long)i;
            if (!(fabs(y[i] - yr[i]) <= 0.5 * ax * 6e-7 + 4.8e-7 * fabs(yr[i]))) badr = (long)i;
        }
        CHECK(bad < 0, "%s gelu_fwd x=%.9g got %.9g want %.9g", t->name, bad < 0 ? 0 : x[bad],
              bad < 0 ? 0 : y[bad], bad < 0 ? 0 : gelu_d(x[bad]));
        CHECK(badr < 0, "%s gelu_fwd vs scalar x=%.9g got %.9g want %.9g", t->name, badr < 0 ? 0 : x[badr],
              badr < 0 ? 0 : y[badr], badr < 0 ? 0 : yr[badr]);
        fill(dy, n, -2, 2);
        fill(dx, n, -1, 1);
        memcpy(dxr, dx, n * 4);
        memcpy(yr, dx, n * 4); /* yr keeps the initial dx */
        t->gelu_bwd(x, dy, dx, n);
        s->gelu_bwd(x, dy, dxr, n);
        bad = badr = -1;
        for (size_t i = 0; i < n; i++) {
            double want = yr[i] + (double)dy[i] * gelu_grad_d(x[i]), ady = fabs(dy[i]);
            if (!(fabs(dx[i] - want) <= 4e-7 * ady + 2.4e-7 * fabs(want))) bad = (long)i;
            if (!(fabs(dx[i] - dxr[i]) <= 8e-7 * ady + 4.8e-7 * fabs(dxr[i]))) badr = (long)i;
        }
        CHECK(bad < 0, "%s gelu_bwd x=%.9g got %.9g want %.9g", t->name, bad < 0 ? 0 : x[bad],
              bad < 0 ? 0 : dx[bad], bad < 0 ? 0 : yr[bad] + (double)dy[bad] * gelu_grad_d(x[bad]));
        CHECK(badr < 0, "%s gelu_bwd vs scalar x=%.9g got %.9g want %.9g", t->name, badr < 0 ? 0 : x[badr],
              badr < 0 ? 0 : dx[badr], badr < 0 ? 0 : dxr[badr]);
        /* the fused entry: bitwise this table's gelu_bwd (dx) and gelu_fwd (y) */
        float *dx0 = dxr; /* the initial dx, kept in yr's place below */
        memcpy(dxr, yr, n * 4);
        memcpy(yr, dy, n * 4);
        t->gelu_bwd_fwd(x, yr, dxr, n, 1);
        CHECK(memcmp(dxr, dx, n * 4) == 0, "%s gelu_bwd_fwd n=%zu: dx differs from gelu_bwd's", t->name, n);
        CHECK(memcmp(yr, y, n * 4) == 0, "%s gelu_bwd_fwd n=%zu: g differs from gelu_fwd's", t->name, n);
        /* add 0: dx written, not read (NaN in it must not matter): gelu_bwd into zeros */
        for (size_t i = 0; i < n; i++) dx0[i] = 0.0f;
        t->gelu_bwd(x, dy, dx0, n);
        float *dxn = malloc(n * 4 + 4);
        for (size_t i = 0; i < n; i++) dxn[i] = NAN;
        memcpy(yr, dy, n * 4);
        t->gelu_bwd_fwd(x, yr, dxn, n, 0);
        long bad0 = -1;
        for (size_t i = 0; i < n && bad0 < 0; i++)
            if (!(dxn[i] == dx0[i])) bad0 = (long)i;
        CHECK(bad0 < 0, "%s gelu_bwd_fwd add 0 n=%zu: dx[%ld] %.9g, gelu_bwd into zeros %.9g", t->name, n, bad0,
              bad0 < 0 ? 0.0 : dxn[bad0], bad0 < 0 ? 0.0 : dx0[bad0]);
        free(dxn);
    }
    for (int i = 0; i < 6; i++) free(b[i]);
    test_gelu_lengths(t);
}

/* gemm_work_floats never decreases as M, N or K grows (kernels.h): callers size one
 * workspace for their largest call (attention: N x N x hd for every row block). Checked
 * between neighbours of a list that straddles every blocking constant we use. */
static void test_work_monotone(const vt_kernels *t, vt_kernel_gemm_work_floats_fn *work, const char *entry) {
    static const int d[] = {1, 6, 13, 14, 15, 64, 191, 192, 193, 197, 256, 279, 280, 281, 384, 385,
                            391, 392, 393, 400, 785, 1536, 1537, 3072, 8320};
    const int n = (int)(sizeof d / sizeof *d);
    const char *dim = NULL; /* the first size found to shrink the workspace as it grows */
    int x = 0, y = 0, lo = 0, hi = 0;
    for (int a = 0; a < n && !dim; a++)
        for (int b = 0; b < n && !dim; b++)
            for (int c = 0; c + 1 < n && !dim; c++) {
                x = d[a], y = d[b], lo = d[c], hi = d[c + 1];
                dim = work(hi, x, y) < work(lo, x, y)   ? "M"
                      : work(x, hi, y) < work(x, lo, y) ? "N"
                      : work(x, y, hi) < work(x, y, lo) ? "K"
                                                        : NULL;
            }
    CHECK(!dim, "%s %s decreases when %s grows from %d to %d (other sizes %d, %d)", t->name, entry,
          dim ? dim : "-", lo, hi, x, y);
}

/* The rows of a last panel shorter than MR come out bitwise as they do inside a whole
 * panel (the short-row kernels do each element's FMAs in the same order as the full
 * tile, kernels.h): op(A)'s first M rows times op(B), for M = 14 + r (r = 1..13) and
 * M = 28 (two whole panels of the AVX-512 tile; 12 + r rows of the AVX2 one), compared
 * row by row. N 40 (a 32-column panel and an 8-column one), 20 (one 20-column panel)
 * and 64 (A read in place, its last panel packed); K 37 and 300 (two K blocks). */
static void test_gemm_short_rows(const vt_kernels *t) {
    static const int Ns[] = {40, 20, 64}, Ks[] = {37, 300};
    for (int tr = 0; tr < 4; tr++)
        for (int ni = 0; ni < 3; ni++)
            for (int ki = 0; ki < 2; ki++) {
                int ta = tr >> 1, tb = tr & 1, N = Ns[ni], K = Ks[ki], MF = 28;
                int lda = ta ? MF : K, ldb = tb ? K : N;
                float *ab, *bb, *cfb, *cb, *wb;
                float *A = fbuf((size_t)MF * K, 0, &ab), *B = fbuf((size_t)K * N, 0, &bb);
                float *Cf = fbuf((size_t)MF * N, 0, &cfb), *C = fbuf((size_t)MF * N, 0, &cb);
                float *W = fbuf(t->gemm_work_floats(MF, N, K), 0, &wb);
                fill(A, (size_t)MF * K, -1, 1);
                fill(B, (size_t)K * N, -1, 1);
                fill(Cf, (size_t)MF * N, -1, 1);
                float *c0b, *C0 = fbuf((size_t)MF * N, 0, &c0b);
                memcpy(C0, Cf, sizeof(float) * MF * N);
                t->gemm(ta, tb, MF, N, K, 0.7f, A, lda, B, ldb, 0.5f, Cf, N, W);
                int bad_m = 0, bad_e = -1;
                for (int M = 15; M < MF && !bad_m; M++) {
                    memcpy(C, C0, sizeof(float) * MF * N);
                    t->gemm(ta, tb, M, N, K, 0.7f, A, lda, B, ldb, 0.5f, C, N, W);
                    for (int e = 0; e < M * N && !bad_m; e++)
                        if (memcmp(&C[e], &Cf[e], sizeof(float)) != 0) bad_m = M, bad_e = e;
                }
                CHECK(!bad_m, "%s gemm ta=%d tb=%d N=%d K=%d: row %d of the first %d rows differs from the %d-row "
                      "product's (%.9g vs %.9g)", t->name, ta, tb, N, K, bad_e < 0 ? 0 : bad_e / N, bad_m, MF,
                      bad_e < 0 ? 0.0 : C[bad_e], bad_e < 0 ? 0.0 : Cf[bad_e]);
                free(c0b); free(ab); free(bb); free(cfb); free(cb); free(wb);
            }
}

/* ---------------------------------------------------------------- blocking contexts */

/* The drivers' division-free split of a region's rows over a block's microkernel calls
 * (row_cursor) gives every part the rows the division gives: [rows p / parts,
 * rows (p + 1) / parts), so each row is prefetched once, by the call the split names. */
static void test_row_cursor(void) {
    int bad = 0, cases = 0;
    for (int rows = 0; rows <= 300 && !bad; rows++)
        for (int parts = 1; parts <= 2000 && !bad; parts += parts < 64 ? 1 : 37) {
            row_cursor c = row_cursor_at_0(rows, parts);
            for (int p = 0; p < parts; p++) {
                int r0, r1;
                row_cursor_next(&c, &r0, &r1);
                if (r0 != (int)((long)rows * p / parts) || r1 != (int)((long)rows * (p + 1) / parts)) {
                    CHECK(0, "row_cursor: %d rows in %d parts, part %d gave [%d, %d)", rows, parts, p, r0, r1);
                    bad = 1;
                    break;
                }
            }
            cases++;
        }
    CHECK(!bad && cases > 10000, "row_cursor: %d splits compared", cases);
    volatile int zero = 0; /* at run time, as gemm_macro's count: a division by it would trap */
    row_cursor none = row_cursor_at_0(5, zero); /* a block with no prefetching calls */
    CHECK(none.parts == 0 && none.r1 == 0 && none.q == 0 && none.rem == 0,
          "row_cursor of 0 parts: parts %d, r1 %d, q %d, rem %d", none.parts, none.r1, none.q, none.rem);
}

/* The context table's keys, the rules VT_GEMM_CONTEXT's overrides are checked against,
 * and the names overrides give. */
static void test_gemm_context_table(void) {
    static const struct {
        const char *vendor;
        int family, model;
        const char *want;
    } cpus[] = {
        {"AuthenticAMD", 25, 0x01, "zen3"},   {"AuthenticAMD", 25, 0x21, "zen3"},
        {"AuthenticAMD", 25, 0x50, "zen3"},   {"AuthenticAMD", 25, 0x11, "zen4"},
        {"AuthenticAMD", 25, 0x61, "zen4"},   {"AuthenticAMD", 25, 0xA0, "zen4"},
        {"AuthenticAMD", 26, 0x02, "zen5"},   {"AuthenticAMD", 26, 0x44, "zen5"},
        {"GenuineIntel", 6, 143, "spr"},      {"GenuineIntel", 6, 207, "spr"},
        {"GenuineIntel", 6, 85, "default"},   {"GenuineIntel", 6, 173, "default"},
        {"AuthenticAMD", 23, 0x31, "default"}, {"AuthenticAMD", 26, 0x50, "default"},
        {"HygonGenuine", 24, 0x00, "default"}, {"", 0, 0, "default"},
    };
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
        const vt_gemm_context *c = vt_gemm_context_for_cpu(cpus[i].vendor, cpus[i].family, cpus[i].model);
        CHECK(!strcmp(c->name, cpus[i].want), "%s family %d model %#x: context %s, want %s", cpus[i].vendor,
              cpus[i].family, cpus[i].model, c->name, cpus[i].want);
    }
    CHECK(!strcmp(vt_gemm_context_at(0)->name, "default"), "entry 0 is %s", vt_gemm_context_at(0)->name);
    const vt_gemm_context *mine = vt_gemm_context_detect();
    int listed = 0;
    char err[512];
    for (int i = 0; i < vt_gemm_context_count(); i++) {
        const vt_gemm_context *c = vt_gemm_context_at(i);
        listed |= c == mine;
        vt_gemm_context p;
        /* every entry keeps the rules (parse checks the whole context) and is found by name */
        int rc = vt_gemm_context_parse(c->name, vt_gemm_context_at(0), &p, err, sizeof err);
        CHECK(rc == 0 && !memcmp(&p, c, sizeof p), "entry %s: %s", c->name, rc ? err : "parse gave other values");
    }
    CHECK(listed, "vt_gemm_context_detect() gave %s, not an entry of the table", mine->name);

    const vt_gemm_context *zen4 = vt_gemm_context_for_cpu("AuthenticAMD", 25, 0x11);
    vt_gemm_context p = *vt_gemm_context_at(0);
    int rc = vt_gemm_context_parse("zen4,avx512.kc=768,amx.mc=128", vt_gemm_context_at(0), &p, err, sizeof err);
    CHECK(rc == 0, "parse: %s", err);
    CHECK(!strcmp(p.name, "zen4+avx512.kc=768,amx.mc=128"), "name %s", p.name);
    CHECK(p.avx512.kc == 768 && p.amx.mc == 128 && p.avx512.mc == zen4->avx512.mc && p.avx2.kc == zen4->avx2.kc,
          "values kc %d mc %d", p.avx512.kc, p.amx.mc);
    rc = vt_gemm_context_parse("avx2.kc=512", zen4, &p, err, sizeof err); /* no name: the base */
    CHECK(rc == 0 && p.avx2.kc == 512 && !strcmp(p.name, "zen4+avx2.kc=512"), "%s", rc ? err : p.name);
    rc = vt_gemm_context_parse("avx512.inplace_rows_max_n=0,avx512.inplace_t_max_n=0", zen4, &p, err, sizeof err);
    CHECK(rc == 0 && p.avx512.inplace_rows_max_n == 0 && p.avx512.inplace_t_max_n == 0 &&
          zen4->avx512.inplace_t_max_n > 0, "op(A) always packed: %s", rc ? err : p.name);

    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"zen9", "\"zen9\" is not a context"},
        {"avx512.kc=768,zen4", "may only come first"},
        {"avx512.kx=768", "\"avx512.kx\" is not a field"},
        {"sse.kc=768", "is not a field"},
        {"avx512.kc=", "is not a whole number"},
        {"avx512.kc=7x", "is not a whole number"},
        {"avx512.kc=99999999999", "avx512.kc=99999999999 must be a multiple of 16 in [16, 8192]"},
        {"avx512.kc=-99999999999", "avx512.kc=-99999999999 must be a multiple of 16 in [16, 8192]"},
        {"avx512.kc=100", "avx512.kc=100 must be a multiple of 16"},
        {"avx512.kc=0", "avx512.kc=0 must be a multiple of 16"},
        {"avx512.mc=15", "avx512.mc=15 must be a multiple of avx512.mr = 14"},
        {"avx2.nc=40", "avx2.nc=40 must be a multiple of avx2.nr = 16"},
        {"avx512bf16.kc=33", "avx512bf16.kc=33 must be a multiple of 2"},
        {"amx.kc=48", "amx.kc=48 must be a multiple of 32"},
        {"amx.mc=-32", "amx.mc=-32 must be"},
        {"avx512.inplace_t_max_n=-1", "avx512.inplace_t_max_n=-1 must be in [0, 65536]"},
        {"avx2.mc=99999", "avx2.mc=99999 must be in [1, 8192]"},
        {"avx2.inplace_rows_max_n=768", "\"avx2.inplace_rows_max_n\" is not a field"},
        {"avx512.mc=420", "avx512.mc = 420 exceeds avx512.m_one_pass"},
        {"avx512.nc=128", "avx512.nc_one_pass = 256 exceeds avx512.nc = 128"},
        {"avx2.one_pass_min_n=100", "avx2.one_pass_min_n = 100 is below"},
        {"avx512.mr=13", "avx512.mr x avx512.nr = 13 x 32 is not a microkernel of avx512"},
        {"avx2.nr=32", "avx2.mr x avx2.nr = 6 x 32 is not a microkernel of avx2"},
        {"avx512.mr=12", "avx512.mc=280 must be a multiple of avx512.mr = 12"},
        {"avx512.mr=9,avx512.nr=48,avx512.mc=279", "avx512.nc_one_pass=256 must be a multiple of avx512.nr = 48"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vt_gemm_context q = *zen4;
        err[0] = '\0';
        rc = vt_gemm_context_parse(bad[i].spec, zen4, &q, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[i].says) && !memcmp(&q, zen4, sizeof q),
              "VT_GEMM_CONTEXT=%s: rc %d, message \"%s\", want one saying \"%s\", output untouched", bad[i].spec, rc,
              err, bad[i].says);
    }
}

/* The fma path's numerics, bitwise (kernels.h: bf16 product paths): t's fma path gives
 * the bits of t's float32 gemm_bias (avx512's above it) run on operands rounded to bf16
 * beforehand, with op(B) from a float32 B and from its bf16 copy. The shapes take every
 * route of the float32 driver: op(A) read in place (N <= 64; M K large and N moderate),
 * op(B) packed by the microkernels (tb = 0), the one-pass order (M small, N large), K in
 * several blocks, edges of every kernel; denormals, infinities and NaNs among the
 * operands (one each). So no operand element reaches
 * the FMAs unrounded, on any route. */
static void test_gemm_bf16_fma(const vt_kernels *t) {
    vt_kernels f = *t;
    char why[256];
    if (vt_bf16_path_entries(VT_BF16_FMA, t->isa, &f, why, sizeof why) != 0) {
        CHECK(0, "%s: no fma path: %s", t->name, why);
        return;
    }
    vt_kernels ref;
    vt_kernels_table(t->isa < VT_ISA_AVX512 ? t->isa : VT_ISA_AVX512, &ref);
    static const int shapes[][3] = {{197, 64, 197}, {300, 200, 300}, {40, 1700, 40}, {37, 45, 1001},
                                    {130, 200, 192}, {7, 5, 33},     {29, 3, 70},    {600, 48, 150}};
    int n = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int v = 0; v < 8; v++, n++) {
            const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], ta = v & 1, tb = (v >> 1) & 1,
                      b16 = v >> 2;
            const int pad = n % 3, lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
            const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
            const float alpha = n % 2 ? 1.0f : -0.7f, beta = n % 3 == 0 ? 0.0f : 0.5f;
            float *ab, *rab, *bb, *rbb, *cb, *rcb, *biasb, *wb;
            float *A = fbuf(na, 0, &ab), *RA = fbuf(na, 0, &rab), *B = fbuf(nb, 0, &bb), *RB = fbuf(nb, 0, &rbb);
            float *C = fbuf(nc, 0, &cb), *RC = fbuf(nc, 0, &rcb), *bias = fbuf((size_t)N, 0, &biasb);
            size_t wf = f.gemm_bf16_work_floats(M, N, K), wr = ref.gemm_work_floats(M, N, K);
            float *W = fbuf(wf > wr ? wf : wr, 0, &wb);
            vt_bf16 *B16 = aligned_alloc(64, (nb * sizeof(vt_bf16) + 63) / 64 * 64);
            vt_bf16 *h = aligned_alloc(64, ((na > nb ? na : nb) * sizeof(vt_bf16) + 63) / 64 * 64);
            for (size_t i = 0; i < na; i++)
                A[i] = i % 97 == 5 ? 1e-39f : i == na / 3 ? bitsf(0x7fa12345u) : frand() * (i % 7 ? 1.0f : 50.0f);
            for (size_t i = 0; i < nb; i++) B[i] = i % 89 == 7 ? -2e-39f : i == nb / 2 ? INFINITY : frand();
            fill(bias, (size_t)N, -1, 1);
            for (size_t i = 0; i < nc; i++) C[i] = RC[i] = frand();
            t->bf16_round(A, h, na);
            for (size_t i = 0; i < na; i++) RA[i] = bf16f(h[i]);
            t->bf16_round(B, B16, nb);
            for (size_t i = 0; i < nb; i++) RB[i] = bf16f(B16[i]);
            const float *bias_p = n % 4 == 1 ? bias : NULL;
            ref.gemm_bias(ta, tb, M, N, K, alpha, RA, lda, RB, ldb, beta, bias_p, RC, ldc, W);
            f.gemm_bf16(ta, tb, M, N, K, alpha, A, lda, b16 ? NULL : B, b16 ? B16 : NULL, ldb, beta, bias_p, C, ldc,
                        W, NULL);
            long bad = -1;
            for (size_t e = 0; e < nc && bad < 0; e++)
                if (memcmp(&C[e], &RC[e], sizeof(float)) != 0) bad = (long)e;
            CHECK(bad < 0, "%s fma path ta=%d tb=%d M=%d N=%d K=%d b16=%d: C[%ld] = %a, %s gemm_bias on the rounded "
                  "operands gives %a", t->name, ta, tb, M, N, K, b16, bad, bad < 0 ? 0.0 : C[bad], ref.name,
                  bad < 0 ? 0.0 : RC[bad]);
            free(ab); free(rab); free(bb); free(rbb); free(cb); free(rcb); free(biasb); free(wb); free(B16); free(h);
        }
}

/* gemm_sums on the bf16 path `path` (tiles: amx or dpbf16) that table f holds (a copy of
 * level t's table): C bitwise t's gemm (bf16: f's gemm_bf16) on the same operands, the
 * sums bitwise float32 adds row after row within each chunk, nothing written past C's
 * rows or the sums; shapes through every loop order (one pass, row blocks, column blocks,
 * A in place on avx512, K blocks), chunks crossing K blocks, empty chunks, one chunk and
 * 32, and N = 0. */
static void gemm_sums_path(const vt_kernels *t, const vt_kernels *f_table, const char *path, int tiles) {
    const vt_kernels f = *f_table;
    static const int shapes[][3] = {{40, 30, 700}, {150, 400, 530}, {200, 385, 330}, {400, 300, 200},
                                    {300, 700, 600}, {13, 3, 33},  {7, 1700, 40},   {5, 9, 1},
                                    {9, 0, 70}};
    int n = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
        for (int v = 0; v < 8; v++, n++) {
            const int M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], bf16 = v & 1, split = v >> 1;
            /* tiles (amx, dpbf16) skip the largest shape: the emulation lane runs their products
             * at a few million multiply-adds a second, and 400 x 300 x 200 and the tiny
             * contexts (test_gemm_contexts) cross every block edge of their driver */
            if (tiles && (int64_t)M * N * K > 100000000) continue;
            const int pad = n % 3, lda = M + pad, ldb = N + pad, ldc = N + pad;
            /* the chunks: 1, 3, 32 (at most K) as vt_par_chunk_begin cuts them, or ragged with empty ones */
            int edge[40], nch;
            if (split < 3) {
                nch = split == 0 ? 1 : split == 1 ? 3 : 32;
                if (nch > K) nch = K;
                for (int c = 0; c <= nch; c++) edge[c] = (int)((int64_t)K * c / nch);
            } else {
                const int e[] = {0, 0, K / 7, K / 7, K / 2 + 1, K - 1, K};
                nch = 6;
                for (int c = 0; c <= nch; c++) edge[c] = c == 0 ? 0 : e[c] < edge[c - 1] ? edge[c - 1] : e[c];
            }
            const size_t na = (size_t)K * lda, nb = (size_t)K * ldb, nc = (size_t)M * ldc, ns = (size_t)nch * M;
            float *ab, *bb, *cb, *rcb, *sb, *rsb, *wb;
            float *A = fbuf(na, 0, &ab), *B = fbuf(nb, 0, &bb), *C = fbuf(nc, 0, &cb), *RC = fbuf(nc, 0, &rcb);
            float *S = fbuf(ns + 16, 0, &sb), *RS = fbuf(ns + 16, 0, &rsb);
            size_t wf = f.gemm_bf16_work_floats(M, N, K), w32 = t->gemm_work_floats(M, N, K);
            float *W = fbuf(wf > w32 ? wf : w32, 0, &wb);
            for (size_t i = 0; i < na; i++) A[i] = i % 53 == 3 ? -0.0f : frand() * (i % 5 ? 1.0f : 40.0f);
            fill(B, nb, -1, 1);
            for (size_t i = 0; i < nc; i++) C[i] = RC[i] = frand();
            for (size_t i = 0; i < ns + 16; i++) S[i] = RS[i] = i % 4 ? frand() : 0.0f;
            const float beta = n % 3 == 0 ? 0.0f : 1.0f;
            if (bf16) f.gemm_bf16(1, 0, M, N, K, 1.0f, A, lda, B, NULL, ldb, beta, NULL, RC, ldc, W, NULL);
            else t->gemm(1, 0, M, N, K, 1.0f, A, lda, B, ldb, beta, RC, ldc, W);
            for (int c = 0; c < nch; c++)
                for (int k = edge[c]; k < edge[c + 1]; k++)
                    for (int i = 0; i < M; i++) RS[(size_t)c * M + i] += A[(size_t)k * lda + i];
            f.gemm_sums(bf16, M, N, K, A, lda, B, ldb, beta, C, ldc, W, nch, edge, S);
            long bad = -1, sbad = -1;
            for (size_t e = 0; e < nc && bad < 0; e++)
                if (memcmp(&C[e], &RC[e], sizeof(float)) != 0) bad = (long)e;
            for (size_t e = 0; e < ns + 16 && sbad < 0; e++)
                if (memcmp(&S[e], &RS[e], sizeof(float)) != 0) sbad = (long)e;
            CHECK(bad < 0, "%s gemm_sums (%s path) bf16=%d M=%d N=%d K=%d beta=%g: C[%ld] = %a, its %s gives %a",
                  t->name, path, bf16, M, N, K, beta, bad, bad < 0 ? 0.0 : C[bad], bf16 ? "gemm_bf16" : "gemm",
                  bad < 0 ? 0.0 : RC[bad]);
            CHECK(sbad < 0, "%s gemm_sums (%s path) bf16=%d M=%d N=%d K=%d, %d chunks: sums[%ld] (of %zu) = %a, the "
                  "rows' float sums give %a", t->name, path, bf16, M, N, K, nch, sbad, ns, sbad < 0 ? 0.0 : S[sbad],
                  sbad < 0 ? 0.0 : RS[sbad]);
            free(ab); free(bb); free(cb); free(rcb); free(sb); free(rsb); free(wb);
        }
}

/* gemm_sums on level t's own bf16 path and, where that is not the fma path, on the fma
 * path too (the amx level's dpbf16 path is the avx512bf16 level's own). */
static void test_gemm_sums(const vt_kernels *t) {
    const int own = t->isa == VT_ISA_SCALAR ? -1 : (int)vt_bf16_path_of_level(t->isa);
    gemm_sums_path(t, t, own < 0 ? "scalar" : vt_bf16_path_name((vt_bf16_path)own),
                   own == VT_BF16_AMX || own == VT_BF16_DPBF16);
    vt_kernels f = *t;
    char why[256];
    if (own < 0 || own == VT_BF16_FMA) return;
    if (vt_bf16_path_entries(VT_BF16_FMA, t->isa, &f, why, sizeof why) != 0)
        CHECK(0, "%s: no fma path: %s", t->name, why);
    else gemm_sums_path(t, &f, "fma", 0);
}

/* Which context fields level l's two GEMMs read: its fp32 gemm's blocking and its
 * gemm_bf16's (avx2 and avx512 run gemm_bf16 through their fp32 gemm). */
static void level_blocking(const vt_gemm_context *c, vt_isa l, const void **f32, const void **bf16,
                           size_t *bf16_size) {
    *f32 = l == VT_ISA_AVX2 ? (const void *)&c->avx2 : (const void *)&c->avx512;
    *bf16 = l == VT_ISA_AMX ? (const void *)&c->amx : l == VT_ISA_AVX512BF16 ? (const void *)&c->avx512bf16 : *f32;
    *bf16_size = l >= VT_ISA_AVX512BF16 ? sizeof(vt_gemm_blocking_bf16) : sizeof(vt_gemm_blocking_f32);
}

/* The GEMM tests of every level this CPU has under every context of the table, and a
 * tiny one that splits the test shapes into many blocks in every loop (the one-pass
 * order included); a level runs them again only under blocking it has not yet run
 * (main runs them under the active context first). */
static void test_gemm_contexts(const vt_kernels *s) {
    const vt_gemm_context active = vt_gemm_ctx;
    vt_gemm_context ctx[24];
    int n = 0;
    ctx[n++] = active;
    for (int i = 0; i < vt_gemm_context_count() && n < 15; i++) ctx[n++] = *vt_gemm_context_at(i);
    char err[512];
    int rc = vt_gemm_context_parse("default,avx2.kc=32,avx2.kc_t=16,avx2.mc=18,avx2.nc=48,avx2.m_one_pass=60,"
                                   "avx2.nc_one_pass=32,avx2.one_pass_min_n=40,avx512.kc=32,avx512.kc_t=48,"
                                   "avx512.mc=28,avx512.nc=96,avx512.m_one_pass=70,avx512.nc_one_pass=64,"
                                   "avx512.one_pass_min_n=64,avx512bf16.kc=34,avx512bf16.mc=28,avx512bf16.nc=64,"
                                   "amx.kc=64,amx.mc=64,amx.nc=64",
                                   &active, &ctx[n], err, sizeof err);
    CHECK(rc == 0, "the tiny context: %s", err);
    if (rc == 0) n++;
    /* every avx512 register tile shape, under blocks as tiny as the tiny context's (mc,
     * nc and nc_one_pass multiples of the tile) */
#define SHAPE_PAIR(mr, nv, nr) {mr, nr},
    static const int shapes[][2] = {VT_AVX512_SHAPES(SHAPE_PAIR)};
#undef SHAPE_PAIR
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int mr = shapes[i][0], nr = shapes[i][1];
        char spec[256];
        snprintf(spec, sizeof spec,
                 "avx512.mr=%d,avx512.nr=%d,avx512.kc=32,avx512.kc_t=48,avx512.mc=%d,avx512.nc=%d,avx512.m_one_pass=%d,"
                 "avx512.nc_one_pass=%d,avx512.one_pass_min_n=%d",
                 mr, nr, 2 * mr, 3 * nr, 5 * mr, 2 * nr, 2 * nr);
        rc = vt_gemm_context_parse(spec, &active, &ctx[n], err, sizeof err);
        CHECK(rc == 0, "the tiny %d x %d shape: %s", mr, nr, err);
        if (rc == 0) n++;
    }
    for (int l = VT_ISA_AVX2; l < VT_ISA_COUNT; l++) {
        vt_kernels t;
        if (vt_kernels_table((vt_isa)l, &t) != 0) continue;
        for (int i = 0; i < n; i++) {
            const void *f32, *bf16;
            size_t bsz;
            level_blocking(&ctx[i], (vt_isa)l, &f32, &bf16, &bsz);
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) {
                const void *f32j, *bf16j;
                level_blocking(&ctx[j], (vt_isa)l, &f32j, &bf16j, &bsz);
                seen = !memcmp(f32, f32j, sizeof(vt_gemm_blocking_f32)) && !memcmp(bf16, bf16j, bsz);
            }
            if (seen || i == 0) continue; /* ctx[0], the active one: main's run */
            vt_gemm_context_set(&ctx[i]);
            int failed = test_failed_count;
            test_gemm(&t, s);
            test_work_monotone(&t, t.gemm_work_floats, "gemm_work_floats");
            test_gemm_bf16(&t, s);
            test_gemm_packed(&t);
            test_gemm_bf16_fma(&t);
            test_gemm_sums(&t);
            test_work_monotone(&t, t.gemm_bf16_work_floats, "gemm_bf16_work_floats");
            if (test_failed_count > failed)
                fprintf(stderr, "  (the failures above: %s under the GEMM context %s)\n", t.name, ctx[i].name);
        }
    }
    vt_gemm_context_set(&active);
}

int main(void) {
    test_init();
    vt_kernels s;
    vt_kernels_table(VT_ISA_SCALAR, &s);
    test_table_complete(&s);
    test_gelu(&s, &s); /* the scalar GELU against double precision, and its fused entry */
    test_work_monotone(&s, s.gemm_work_floats, "gemm_work_floats");
    test_bf16_round(&s, &s);
    test_gemm_bf16(&s, &s);
    test_gemm_packed(&s);
    test_gemm_sums(&s);
    test_matmul_f64(&s);
    for (int tr = 0; tr < 4; tr++) /* the scalar gemm_bias against its gemm */
        gemm_case(&s, &s, tr >> 1, tr & 1, 7, 9, 5, -0.7f, tr & 1 ? 0.5f : 0.0f, tr);
    gemm_case(&s, &s, 0, 0, 3, 4, 0, 1.0f, 0.5f, 0);
    for (int l = VT_ISA_AVX2; l < VT_ISA_COUNT; l++) {
        vt_kernels t;
        if (vt_kernels_table((vt_isa)l, &t) != 0) {
            fprintf(stderr, "test_kernels: this CPU lacks %s, its kernels are not tested\n",
                    vt_kernels_isa_name((vt_isa)l));
            continue;
        }
        test_table_complete(&t);
        test_elementwise(&t, &s);
        test_performer_kernels(&t, &s);
        test_matmul_f64(&t);
        test_rot_pairs(&t, &s);
        test_adamw(&t, &s);
        test_softmax(&t, &s);
        test_layernorm(&t, &s);
        test_gelu(&t, &s);
        test_gemm(&t, &s);
        test_gemm_short_rows(&t);
        test_work_monotone(&t, t.gemm_work_floats, "gemm_work_floats");
        test_work_monotone(&t, t.gemm_bf16_work_floats, "gemm_bf16_work_floats");
        test_bf16_round(&t, &s);
        test_gemm_bf16(&t, &s);
        test_gemm_packed(&t);
        test_gemm_bf16_fma(&t);
        test_gemm_sums(&t);
        if (t.isa >= VT_ISA_AVX512BF16) test_gemm_bf16_order(&t);
    }
    test_gemm_context_table();
    test_row_cursor();
    test_gemm_contexts(&s);
    return test_summary();
}
