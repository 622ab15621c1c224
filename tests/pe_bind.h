/* pe_bind.h - test helper: bind a PE's parameters to test-owned buffers, as vit.c binds
 * them to the model's flat buffers, and draw their initial values (header-only; used by
 * pe_fixture.h and pe_tiny_model.h). */
#ifndef VT_TEST_PE_BIND_H
#define VT_TEST_PE_BIND_H

#include <stdint.h>
#include <stdlib.h>

#include "pe/pe.h"
#include "rng.h"
#include "tensor.h"

/* views[i] (an array of pe->n_params) becomes parameter i's view, with the model's shape
 * (vit.c: dims past VT_MAX_DIMS merged into the first), into two fresh zeroed buffers
 * *data and *grad of the returned total floats (one more, so an empty PE allocates too);
 * then vt_pe_init_params from a stream seeded by seed. */
static inline int64_t pe_bind_init(vt_pe *pe, vt_tensor *views, float **data, float **grad, uint64_t seed) {
    int64_t total = 0;
    for (int i = 0; i < pe->n_params; i++) total += pe->params[i].size;
    *data = calloc((size_t)total + 1, sizeof(float));
    *grad = calloc((size_t)total + 1, sizeof(float));
    int64_t off = 0;
    for (int i = 0; i < pe->n_params; i++) {
        vt_pe_param *p = &pe->params[i];
        vt_tensor *t = &views[i];
        int lead = p->ndim > VT_MAX_DIMS ? p->ndim - VT_MAX_DIMS + 1 : 1;
        t->ndim = p->ndim > VT_MAX_DIMS ? VT_MAX_DIMS : p->ndim;
        t->shape[0] = 1;
        for (int d = 0; d < lead; d++) t->shape[0] *= p->shape[d];
        for (int d = 1; d < t->ndim; d++) t->shape[d] = p->shape[lead + d - 1];
        t->size = p->size;
        t->data = *data + off;
        t->grad = *grad + off;
        off += p->size;
        p->t = t;
    }
    vt_rng rng;
    vt_rng_seed(&rng, seed);
    vt_pe_init_params(pe, &rng);
    return total;
}

#endif
