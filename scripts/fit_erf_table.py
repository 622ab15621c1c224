#!/usr/bin/python3
"""fit_erf_table.py - regenerates the coefficient tables of the vector erf
(kernels/erf_table.h) and checks them. Run with /usr/bin/python3 (numpy; Debian's
python3-numpy, which python3-torch pulls in).

Each table splits |x| < 4 into intervals of one width and evaluates, in
u = |x| / width - i - 1/2 (u in [-1/2, 1/2]), a polynomial per interval: the Chebyshev
interpolant of erf on 200 nodes, in the monomial basis, each coefficient rounded to
float. Two tables, one per vector width, each as wide as one register's permute reaches:
  vt_erf16_coef  16 intervals of 1/4, degree 5: vt512_erf (kernels/avx512/avx512.h),
                 one 16-entry permute per coefficient;
  vt_erf8_coef   8 intervals of 1/2, degree 6: vt256_erf (kernels/avx2/avx2.h), one
                 8-entry permute per coefficient.
The script prints both as C, each with the largest absolute error of the kernel's float
evaluation (Horner with fused multiply-adds, modelled in double and rounded to float
after each step) against math.erf on a grid of 4.2 million floats in [0, 4.2]; the
header states those errors, and tests/test_kernels.c enforces 2e-7 through GELU.
numpy's fit may move the last bits of the smallest coefficients between versions (one
of vt_erf16_coef's by 2 ulp): the header's tables are the kernels' and the tested ones.
"""
import math

import numpy as np

NODES = 200
TABLES = (("vt_erf16_coef", 16, 0.25, 5), ("vt_erf8_coef", 8, 0.5, 6))


def fit(intervals, width, degree):
    """coef[j][i]: float32 coefficient of u^j on interval i."""
    k = np.arange(NODES)
    u = 0.5 * np.cos(np.pi * (k + 0.5) / NODES)
    coef = np.zeros((degree + 1, intervals), dtype=np.float32)
    for i in range(intervals):
        y = np.array([math.erf((i + 0.5 + v) * width) for v in u])
        cheb = np.polynomial.chebyshev.Chebyshev.fit(u, y, degree, domain=[-0.5, 0.5])
        mono = cheb.convert(kind=np.polynomial.Polynomial, domain=[-0.5, 0.5], window=[-0.5, 0.5])
        coef[:, i] = np.float32(mono.coef)
    return coef


def evaluate(coef, width, x):
    """The kernel's arithmetic on float32 x >= 0 (1 / width a power of two: t exact)."""
    degree = coef.shape[0] - 1
    t = (np.minimum(np.float32(3.99999976), x) * np.float32(1.0 / width)).astype(np.float32)
    i = np.floor(t).astype(np.int64)
    u = ((t - i.astype(np.float32)) - np.float32(0.5)).astype(np.float32)
    p = coef[degree, i].astype(np.float32)
    for j in range(degree - 1, -1, -1):
        p = (p.astype(np.float64) * u.astype(np.float64) + coef[j, i].astype(np.float64)).astype(np.float32)
    return np.where(x >= np.float32(4.0), np.float32(1.0), p)


def main():
    x = np.linspace(0.0, 4.2, 4200001).astype(np.float32)
    want = np.array([math.erf(float(v)) for v in x])
    for name, intervals, width, degree in TABLES:
        coef = fit(intervals, width, degree)
        print("static const float %s[%d][%d] __attribute__((aligned(64))) = {" % (name, degree + 1, intervals))
        for j in range(degree + 1):
            vals = ["%.9ef" % float(c) for c in coef[j]]
            print("    {" + ", ".join(vals[:8]) + ("," if intervals > 8 else "},"))
            if intervals > 8:
                print("     " + ", ".join(vals[8:]) + "},")
        print("};")
        err = np.abs(evaluate(coef, width, x).astype(np.float64) - want)
        print("/* %s: max |error| %.3g at x = %.9g */" % (name, err.max(), float(x[err.argmax()])))


if __name__ == "__main__":
    main()
