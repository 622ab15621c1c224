/* precision.c - the bf16 weight copies and the bf16 path's choice (precision.h). */
#include "precision.h"

#include "bf16_path.h"
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"

/* The GEMM weights: the parameters with weight decay (linear and convolution weights). */
static int is_gemm_weight(const vt_param *p) { return p->decay; }

vt_status vt_bf16_weights_attach(vt_vit *m, uint16_t **buf) {
    *buf = NULL;
    if (vt_kernels_bf16_path() == VT_BF16_FMA) return VT_OK; /* precision.h: no copies on the fma path */
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

/* This rank runs the bf16 path rank 0 chose (path; -1: rank 0's level has no path). */
static vt_status adopt_root_path(int path) {
    char why[256];
    if (path < 0 || vt_kernels_set_bf16_path((vt_bf16_path)path, why, sizeof why) == 0) return VT_OK;
    return vt_fail(VT_ERR_USAGE, "rank 0 runs the bf16 products on the %s path, which this rank cannot: %s",
                   vt_bf16_path_name((vt_bf16_path)path), why);
}

vt_status vt_precision_select(vt_precision p) {
    static int done = 0;
    if (p != VT_PRECISION_BF16 || done) return VT_OK;
    int env;
    vt_status st = vt_dist_agree(vt_bf16_path_env(&env)); /* every rank's own VT_BF16_PATH is valid */
    if (st != VT_OK) return st;
    char line[512];
    int path = -1;
    if (vt_dist_root()) {
        st = vt_bf16_path_select(line, sizeof line);
        path = vt_kernels_bf16_path();
    }
    if ((st = vt_dist_agree(st)) != VT_OK) return st;
    vt_dist_bcast(&path, sizeof path);
    if ((st = vt_dist_agree(vt_dist_root() ? VT_OK : adopt_root_path(path))) != VT_OK) return st;
    done = 1;
    if (vt_dist_root())
        fprintf(stderr, "vitrain: precision bf16 on the %s level: %s; operands rounded to bf16, float32 sums%s\n",
                vt_k.name, line, vt_dist_size() > 1 ? "; every rank on this path" : "");
    return VT_OK;
}

vt_status vt_precision_adopt_recorded(int recorded, const char *record) {
    int path = vt_kernels_bf16_path(); /* rank 0's decision, what every rank runs */
    if (vt_dist_root() && recorded >= 0 && recorded != path) {
        const char *rec = vt_bf16_path_name((vt_bf16_path)recorded), *now = vt_bf16_path_name((vt_bf16_path)path);
        char why[256];
        int env = -1;
        vt_bf16_path_env(&env); /* checked by vt_precision_select */
        vt_clear_error();
        if (env >= 0)
            fprintf(stderr, "vitrain: warning: VT_BF16_PATH=%s overrides the %s path the run's products ran on "
                    "(%s): the sums differ from the run's\n", now, rec, record);
        else if (vt_kernels_set_bf16_path((vt_bf16_path)recorded, why, sizeof why) == 0) {
            fprintf(stderr, "vitrain: bf16 products on the %s path, as the run recorded it (%s), not the %s path "
                    "chosen now: they sum as the run's did\n", rec, record, now);
            path = recorded;
        } else
            fprintf(stderr, "vitrain: warning: the run's bf16 products ran on the %s path (%s), which cannot run "
                    "here (%s): they run on the %s path and sum differently from the run's\n", rec, record, why,
                    now);
    }
    vt_dist_bcast(&path, sizeof path);
    return vt_dist_agree(vt_dist_root() ? VT_OK : adopt_root_path(path));
}
