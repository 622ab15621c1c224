#!/usr/bin/python3
"""fit_erf_table.py - regenerates vt_erf_coef (kernels/erf_table.h), the coefficient
table of the vector erf (vt256_erf in kernels/avx2/avx2.h, vt512_erf in
kernels/avx512/avx512.h), and checks it. Run with /usr/bin/python3 (numpy; Debian's
python3-numpy, which python3-torch pulls in).

The erf splits |x| < 4 into 16 intervals [i / 4, (i + 1) / 4) and evaluates, in
u = 4 |x| - i - 1/2 (u in [-1/2, 1/2]), a degree-5 polynomial per interval: the
Chebyshev interpolant of erf on 200 nodes, in the monomial basis, each coefficient
rounded to float. This script prints that table as C and the largest absolute error of
the kernel's float evaluation (Horner with fused multiply-adds, modelled in double and
rounded to float after each step) against math.erf on a grid of 4.2 million floats in
[0, 4.2] (5.87e-8 when the table was made; a one-off C harness over every float of
[0, 5] gave 5.9e-8 for the AVX-512 kernel itself), and tests/test_kernels.c enforces
2e-7 through GELU.
"""
import math

import numpy as np

INTERVALS, WIDTH, DEGREE, NODES = 16, 0.25, 5, 200


def fit():
    """coef[j][i]: float32 coefficient of u^j on interval i."""
    k = np.arange(NODES)
    u = 0.5 * np.cos(np.pi * (k + 0.5) / NODES)
    coef = np.zeros((DEGREE + 1, INTERVALS), dtype=np.float32)
    for i in range(INTERVALS):
        y = np.array([math.erf((i + 0.5 + v) * WIDTH) for v in u])
        cheb = np.polynomial.chebyshev.Chebyshev.fit(u, y, DEGREE, domain=[-0.5, 0.5])
        mono = cheb.convert(kind=np.polynomial.Polynomial, domain=[-0.5, 0.5], window=[-0.5, 0.5])
        coef[:, i] = np.float32(mono.coef)
    return coef


def evaluate(coef, x):
    """The kernel's arithmetic on float32 x >= 0."""
    t = (np.minimum(np.float32(3.99999976), x) * np.float32(4.0)).astype(np.float32)
    i = np.floor(t).astype(np.int64)
    u = ((t - i.astype(np.float32)) - np.float32(0.5)).astype(np.float32)
    p = coef[DEGREE, i].astype(np.float32)
    for j in range(DEGREE - 1, -1, -1):
        p = (p.astype(np.float64) * u.astype(np.float64) + coef[j, i].astype(np.float64)).astype(np.float32)
    return np.where(x >= np.float32(4.0), np.float32(1.0), p)


def main():
    coef = fit()
    print("static const float vt_erf_coef[6][16] __attribute__((aligned(64))) = {")
    for j in range(DEGREE + 1):
        vals = ["%.9ef" % float(c) for c in coef[j]]
        print("    {" + ", ".join(vals[:8]) + ",")
        print("     " + ", ".join(vals[8:]) + "},")
    print("};")
    x = np.linspace(0.0, 4.2, 4200001).astype(np.float32)
    want = np.array([math.erf(float(v)) for v in x])
    err = np.abs(evaluate(coef, x).astype(np.float64) - want)
    print("/* max |error| %.3g at x = %.9g */" % (err.max(), float(x[err.argmax()])))


if __name__ == "__main__":
    main()
