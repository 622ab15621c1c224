/* precision.c - the bf16 weight copies and the bf16 path's choice (precision.h). */
#include "precision.h"

#include "bf16_path.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"

/* The GEMM weights: the parameters with weight decay (linear and convolution weights). */
static int is_gemm_weight(const vt_param *p) { return p->decay; }

vt_status vt_bf16_weights_attach(vt_vit *m, uint16_t **buf) {
    size_t n = 0;
    for (int i = 0; i < m->n_p; i++)
        if (is_gemm_weight(&m->p[i])) n += (size_t)m->p[i].t.size;
    *buf = vt_aligned_alloc((n > 0 ? n : 1) * sizeof(uint16_t));
    if (!*buf) return vt_fail(VT_ERR_RUNTIME, "out of memory: bf16 copies of %zu weights", n);
    size_t off = 0;
    for (int i = 0; i < m->n_p; i++) {
        if (!is_gemm_weight(&m->p[i])) continue;
        m->p[i].t.bf16 = *buf + off;
        off += (size_t)m->p[i].t.size;
    }
    vt_bf16_weights_update(m);
    return VT_OK;
}

void vt_bf16_weights_update(vt_vit *m) {
    #pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < m->n_p; i++)
        if (m->p[i].t.bf16) vt_k.bf16_round(m->p[i].t.data, m->p[i].t.bf16, (size_t)m->p[i].t.size);
}

int vt_bf16_weights_attached(const vt_vit *m) {
    for (int i = 0; i < m->n_p; i++)
        if (is_gemm_weight(&m->p[i])) return m->p[i].t.bf16 != NULL;
    return 0;
}

void vt_bf16_weights_detach(vt_vit *m, uint16_t *buf) {
    for (int i = 0; i < m->n_p; i++) m->p[i].t.bf16 = NULL;
    free(buf);
}

vt_status vt_precision_select(vt_precision p) {
    static int done = 0;
    if (p != VT_PRECISION_BF16 || done) return VT_OK;
    char line[512];
    vt_status st = vt_bf16_path_select(line, sizeof line);
    if (st != VT_OK) return st;
    done = 1;
    fprintf(stderr, "vitrain: precision bf16 on the %s level: %s; operands rounded to bf16, float32 sums\n",
            vt_k.name, line);
    return VT_OK;
}
