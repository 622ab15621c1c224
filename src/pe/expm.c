/* expm.c - float64 matrix exponential by scaling and squaring with a norm-chosen
 * Taylor degree evaluated by Paterson-Stockmeyer, its Frechet derivative (the same on
 * the block matrix [[X, F], [0, X]], kept as its two distinct blocks) and the backward
 * (expm.h states the error bound). The products are vt_k.matmul_f64 (SIMD register
 * tiles); the matrices are small (a LieRE block, g <= hd) and the callers run many of
 * them in parallel. */
#include "expm.h"

#include <math.h>
#include <string.h>

#include "kernels.h"

/* Taylor terms are added until the next one is bounded by this (2^-56). */
#define EXPM_TOL 1.3877787807814457e-17
/* ||X|| <= 1/2 reaches EXPM_TOL by degree 16; the cap only stops non-finite input. */
#define EXPM_MAX_DEGREE 40
/* Paterson-Stockmeyer block for degree <= 40: ceil(sqrt(40)). */
#define EXPM_MAX_P 7

static double norm1(const double *A, int n) {
    double best = 0.0;
    for (int j = 0; j < n; j++) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += fabs(A[(size_t)i * n + j]);
        if (s > best) best = s;
    }
    return best;
}

/* s with ||A||_1 / 2^s <= 1/2. */
static int squarings(double nrm) {
    int s = 0;
    while (nrm > 0.5 && s < 1000) {
        nrm *= 0.5;
        s++;
    }
    return s;
}

/* Taylor degree m >= 1 for x = ||X||_1 <= 1/2. exp: the first m with
 * x^(m+1) / (m+1)! <= EXPM_TOL (bounds the first omitted term). Frechet: the first m with
 * x^m / m! <= EXPM_TOL (bounds the first omitted term of the derivative series, whose
 * k-th term is at most ||F|| x^(k-1) / (k-1)!). */
static int taylor_degree(double x, int frechet) {
    double t = x; /* x^m / m! */
    int m = 1;
    while (m < EXPM_MAX_DEGREE && (frechet ? t : t * x / (m + 1)) > EXPM_TOL) {
        m++;
        t *= x / m;
    }
    return m;
}

/* Paterson-Stockmeyer block p = ceil(sqrt(m)) (<= EXPM_MAX_P) and the coefficients 1/k!. */
static int ps_block(int m, double *coef) {
    int p = 1;
    while (p * p < m) p++;
    coef[0] = 1.0;
    for (int k = 1; k <= m; k++) coef[k] = coef[k - 1] / k;
    return p;
}

/* L (+)= sum_{i=1}^{cnt} coef[base + i] Lw[i]: a chunk's terms without the identity (Lw[i]
 * = X^i), or the derivative part of a chunk (Lw[i] = L_i). */
static void add_terms(double *L, double *const *Lw, const double *coef, int base, int cnt, int n,
                      int acc) {
    size_t nn = (size_t)n * n;
    if (!acc) memset(L, 0, nn * sizeof(double));
    for (int i = 1; i <= cnt; i++) {
        double c = coef[base + i];
        const double *P = Lw[i];
        for (size_t e = 0; e < nn; e++) L[e] += c * P[e];
    }
}

/* T (+)= coef[base] I + sum_{i=1}^{cnt} coef[base + i] Pw[i]  (Pw[i] = X^i, i >= 1). */
static void add_chunk(double *T, double *const *Pw, const double *coef, int base, int cnt, int n,
                      int acc) {
    if (!acc) memset(T, 0, (size_t)n * n * sizeof(double));
    for (int i = 0; i < n; i++) T[(size_t)i * n + i] += coef[base];
    add_terms(T, Pw, coef, base, cnt, n, 1);
}

static void swap(double **a, double **b) {
    double *t = *a;
    *a = *b;
    *b = t;
}

size_t vt_expm_work_doubles(int n) { return (EXPM_MAX_P + 2) * (size_t)n * n; }

void vt_expm(const double *A, int n, double *E, double *work) {
    size_t nn = (size_t)n * n;
    double *Pw[EXPM_MAX_P + 1];
    for (int i = 1; i <= EXPM_MAX_P; i++) Pw[i] = work + (size_t)(i - 1) * nn;
    double *T = work + EXPM_MAX_P * nn, *tmp = T + nn;
    double nrm = norm1(A, n);
    int s = squarings(nrm);
    double scale = ldexp(1.0, -s), x = nrm * scale, coef[EXPM_MAX_DEGREE + 1];
    int m = taylor_degree(x, 0), p = ps_block(m, coef), q = m / p;
    for (size_t i = 0; i < nn; i++) Pw[1][i] = A[i] * scale;
    for (int i = 2; i <= p; i++) vt_k.matmul_f64(n, Pw[i - 1], Pw[1], Pw[i], 0);
    /* Paterson-Stockmeyer: T = C_q; T = T X^p + C_j for j = q-1 .. 0, where chunk C_j
     * holds the terms j p .. j p + p - 1 (the top one up to m). */
    add_chunk(T, Pw, coef, q * p, m - q * p, n, 0);
    for (int j = q - 1; j >= 0; j--) {
        vt_k.matmul_f64(n, T, Pw[p], tmp, 0);
        swap(&T, &tmp);
        add_chunk(T, Pw, coef, j * p, p - 1, n, 1);
    }
    for (int i = 0; i < s; i++) {
        vt_k.matmul_f64(n, T, T, tmp, 0);
        swap(&T, &tmp);
    }
    memcpy(E, T, nn * sizeof(double));
}

size_t vt_expm_frechet_work_doubles(int n) { return (2 * EXPM_MAX_P + 5) * (size_t)n * n; }

void vt_expm_frechet(const double *A, const double *Edir, int n, double *Lout, double *expA,
                     double *work) {
    size_t nn = (size_t)n * n;
    /* (X^i, L_i) = [[X, F], [0, X]]^i's diagonal and upper-right blocks */
    double *Pw[EXPM_MAX_P + 1], *Lw[EXPM_MAX_P + 1];
    for (int i = 1; i <= EXPM_MAX_P; i++) {
        Pw[i] = work + (size_t)(i - 1) * nn;
        Lw[i] = work + (size_t)(EXPM_MAX_P + i - 1) * nn;
    }
    double *T = work + 2 * EXPM_MAX_P * nn, *Ls = T + nn, *t1 = Ls + nn, *t2 = t1 + nn;
    double nrm = norm1(A, n);
    int s = squarings(nrm);
    double scale = ldexp(1.0, -s), x = nrm * scale, coef[EXPM_MAX_DEGREE + 1];
    int m = taylor_degree(x, 1), p = ps_block(m, coef), q = m / p;
    for (size_t i = 0; i < nn; i++) {
        Pw[1][i] = A[i] * scale;
        Lw[1][i] = Edir[i] * scale;
    }
    for (int i = 2; i <= p; i++) {
        vt_k.matmul_f64(n, Pw[i - 1], Pw[1], Pw[i], 0);
        vt_k.matmul_f64(n, Pw[i - 1], Lw[1], Lw[i], 0);
        vt_k.matmul_f64(n, Lw[i - 1], Pw[1], Lw[i], 1);
    }
    /* Paterson-Stockmeyer on the block matrix: (T, L) <- (T X^p, T L_p + L X^p) + chunk. */
    add_chunk(T, Pw, coef, q * p, m - q * p, n, 0);
    add_terms(Ls, Lw, coef, q * p, m - q * p, n, 0);
    for (int j = q - 1; j >= 0; j--) {
        vt_k.matmul_f64(n, T, Lw[p], t1, 0);
        vt_k.matmul_f64(n, Ls, Pw[p], t1, 1);
        vt_k.matmul_f64(n, T, Pw[p], t2, 0);
        swap(&T, &t2);
        swap(&Ls, &t1);
        add_chunk(T, Pw, coef, j * p, p - 1, n, 1);
        add_terms(Ls, Lw, coef, j * p, p - 1, n, 1);
    }
    /* exp(2M) = exp(M)^2: (T, L) -> (T T, T L + L T). */
    for (int i = 0; i < s; i++) {
        vt_k.matmul_f64(n, T, Ls, t1, 0);
        vt_k.matmul_f64(n, Ls, T, t1, 1);
        vt_k.matmul_f64(n, T, T, t2, 0);
        swap(&T, &t2);
        swap(&Ls, &t1);
    }
    memcpy(Lout, Ls, nn * sizeof(double));
    if (expA) memcpy(expA, T, nn * sizeof(double));
}

void vt_expm_backward(const double *A, const double *G, int n, double *dA, double *work) {
    size_t nn = (size_t)n * n;
    double *At = work + (2 * EXPM_MAX_P + 4) * nn; /* vt_expm_frechet uses the slots before */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) At[(size_t)i * n + j] = A[(size_t)j * n + i];
    vt_expm_frechet(At, G, n, dA, NULL, work);
}
