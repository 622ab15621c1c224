/* gradcheck.h - test helper: the central-difference gradient check every gradient test
 * uses (header-only).
 *
 * A test states its loss as a function of its own state, L = loss(ctx), computed in
 * double from forwards without gradients, and has the analytic gradient from its
 * backward. gc_central perturbs one float element x by +-h and returns the central
 * difference (L(x + h) - L(x - h)) / 2h, with x restored bit for bit. gc_check_elem
 * compares one analytic value with it, |analytic - numeric| <= atol + rtol |numeric|
 * (a NaN on either side fails), and adds the outcome to a gc_result; gc_check_array does
 * that for the elements start, start + step, ... of an array. Each test keeps its own
 * h, tolerances, elements and assertions on the result (bad == 0, a non-zero gradient,
 * ...), since those follow from what it differentiates.
 */
#ifndef VT_TEST_GRADCHECK_H
#define VT_TEST_GRADCHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

typedef double (*gc_loss_fn)(void *ctx);

typedef struct {
    int checked, bad;  /* elements compared, and those outside the tolerance */
    double worst;      /* largest |analytic - numeric| */
    double worst_rel;  /* largest |analytic - numeric| / (atol + rtol |numeric|): above 1 is bad */
    double max_ana;    /* largest |analytic| and |numeric| compared */
    double max_num;
} gc_result;

/* (L(x + h) - L(x - h)) / 2h, L = loss(ctx); *x is restored afterwards. */
static inline double gc_central(float *x, double h, gc_loss_fn loss, void *ctx) {
    float x0 = *x;
    *x = (float)(x0 + h);
    double lp = loss(ctx);
    *x = (float)(x0 - h);
    double lm = loss(ctx);
    *x = x0;
    return (lp - lm) / (2.0 * h);
}

/* Compare ana, the analytic d L / d *x, with gc_central(x, h); add to r. With `what`
 * not NULL, the first bad element of r is printed as "what[i]: analytic .. numeric ..".
 * Returns 1 if within the tolerance; *num_out (if not NULL) receives the numeric value. */
static inline int gc_check_elem(gc_result *r, const char *what, int64_t i, float *x, double ana, double h,
                                double atol, double rtol, gc_loss_fn loss, void *ctx, double *num_out) {
    double num = gc_central(x, h, loss, ctx), diff = fabs(ana - num);
    double rel = diff / (atol + rtol * fabs(num));
    int ok = !isnan(ana) && !isnan(num) && diff <= atol + rtol * fabs(num);
    if (num_out) *num_out = num;
    r->checked++;
    if (!(diff <= r->worst)) r->worst = diff;
    if (!(rel <= r->worst_rel)) r->worst_rel = rel;
    if (fabs(ana) > r->max_ana) r->max_ana = fabs(ana);
    if (fabs(num) > r->max_num) r->max_num = fabs(num);
    if (!ok) {
        if (!r->bad && what) fprintf(stderr, "  %s[%lld]: analytic %.9g numeric %.9g\n", what, (long long)i, ana, num);
        r->bad++;
    }
    return ok;
}

/* gc_check_elem for x[i] against ana[i], i = start, start + step, ... < n. */
static inline gc_result gc_check_array(const char *what, float *x, const float *ana, int64_t n, int64_t start,
                                       int64_t step, double h, double atol, double rtol, gc_loss_fn loss,
                                       void *ctx) {
    gc_result r = {0};
    for (int64_t i = start; i < n; i += step)
        gc_check_elem(&r, what, i, &x[i], ana[i], h, atol, rtol, loss, ctx, NULL);
    return r;
}

#endif
