/* footprint.c - the memory estimate of `vitrain info` (contract in footprint.h). */
#include "footprint.h"

#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "data/loader.h"
#include "kernels.h"
#include "ops/par.h"
#include "resolve.h"
#include "vit.h"

double vt_footprint_resident(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lld %lld", &pages, &resident) != 2) resident = 0;
        fclose(f);
    }
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

static double max2(double a, double b) { return a > b ? a : b; }

/* Transparent huge pages: 2 = always, 1 = on request (madvise), 0 = never. */
static int thp_mode(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char buf[128] = "";
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = '\0';
        fclose(f);
    }
    return strstr(buf, "[always]") ? 2 : strstr(buf, "[madvise]") ? 1 : 0;
}

/* Resident bytes of a buffer whose first `bytes` are touched: whole 2 MiB pages when it
 * gets huge pages (vt_aligned_alloc asks for them from 1 MiB on; huge = 1, or for any
 * large malloc when the kernel gives them always), else whole 4 KiB pages. */
static double resident(double bytes, int huge, int thp) {
    const double small = 4096.0, big = 2.0 * 1048576.0;
    double page = bytes >= big / 2 && ((huge && thp >= 1) || thp == 2) ? big : small;
    return bytes > 0 ? page * (double)(int64_t)((bytes + page - 1) / page) : 0.0;
}

vt_status vt_footprint_estimate(const vt_config *cfg, double baseline, vt_footprint *f) {
    memset(f, 0, sizeof *f);
    vt_vit m;
    vt_model_spec ms;
    vt_status st = vt_vit_plan(&m, vt_resolve_model_spec(cfg, &ms));
    if (st != VT_OK) return st;
    const int S = cfg->model.img_size;
    const double B = cfg->train.batch_size;
    double Be = cfg->eval.batch_size; /* resolved: train.batch_size unless given */
    VT_ASSERT(Be > 0, "eval.batch_size %g (not resolved?)", Be);
    const double K = m.num_classes, C = m.in_chans, D = m.D, Dh = m.mlp_hidden;
    const double N = 1.0 + (double)(S / m.P) * (S / m.P), P = (double)m.n_params;
    const double fl = sizeof(float);
    const int moments = cfg->optim.name == VT_OPT_ADAMW ? 2 : 1;
    const int threads = cfg->train.threads > 0 ? cfg->train.threads : omp_get_num_procs();

    const int thp = thp_mode(), mix = cfg->data.mixup > 0 || cfg->data.cutmix > 0;
    int64_t d_train = 0, d_val = 0, n_train, n_val;
    vt_data_spec spec;
    vt_resolve_data_spec(cfg, &spec);
    double lt = (double)vt_loader_memory_estimate(&spec, VT_SPLIT_TRAIN, S, (int)B, mix, &d_train, &n_train);
    double lv = (double)vt_loader_memory_estimate(&spec, VT_SPLIT_VAL, S, (int)Be, 0, &d_val, &n_val);
    if (n_val >= 0 && n_val < Be) Be = (double)n_val; /* evaluation batches are never larger */

    f->baseline = baseline;
    double features = (double)m.L * m.H * m.performer_m * m.hd;
    f->model = (2 + moments) * resident(fl * P, 1, thp) + resident(fl * features, 1, thp);
    /* the step's arena (after its first reset: one block, touched to its high water) and
     * gradient region */
    double region, arena = vt_vit_activation_floats(&m, S, cfg->train.precision == VT_PRECISION_BF16, &region);
    f->activations = resident(fl * B * (arena + 2.0 * K), 1, thp) + resident(fl * B * region, 1, thp);
    /* each thread packs operands of the step's largest products (sizes past INT_MAX are
     * not runnable anyway; they only need an answer) */
    int rows = B * N < INT_MAX ? (int)(B * N) : INT_MAX, work = 0;
    int shapes[4][3] = {{rows, 3 * m.D, m.D}, {rows, m.mlp_hidden, m.D}, {rows, m.D, m.mlp_hidden},
                        {(int)B, m.num_classes, m.D}};
    const int bf16 = cfg->train.precision == VT_PRECISION_BF16;
    double shared = 0; /* op(B) packed once for the threads of a cut over rows (ops/par.h) */
    for (int i = 0; i < 4; i++) {
        int w = (int)vt_k.gemm_work_floats(shapes[i][0], shapes[i][1], shapes[i][2]);
        if (w > work) work = w;
        if (threads > 1) shared = max2(shared, (double)vt_gemm_row_cut_b_floats(bf16, shapes[i][1], shapes[i][2]));
    }
    /* the K split's partial sums of the largest weight gradient it cuts (ops/par.h): qkv,
     * proj, fc1, fc2, the head and the patch embedding, M x N over K rows */
    const int patches = (int)(S / m.P) * (S / m.P);
    const int patch_len = (int)(C * m.P * m.P), tokens = rows; /* K of the linear layers' products */
    const int wgrads[6][3] = {{3 * m.D, m.D, tokens}, {m.D, m.D, tokens}, {m.mlp_hidden, m.D, tokens},
                              {m.D, m.mlp_hidden, tokens}, {m.num_classes, m.D, (int)B},
                              {m.D, patch_len, B * patches < INT_MAX ? (int)B * patches : INT_MAX}};
    double partials = 0;
    for (int i = 0; i < 6; i++)
        partials = max2(partials, (double)vt_gemm_wgrad_partial_floats(bf16, wgrads[i][0], wgrads[i][1], wgrads[i][2],
                                                                        threads));
    f->scratch = resident(fl * N * max2(D, Dh) * B, 1, thp) + resident(fl * N * max2(D, Dh) * Be, 1, thp) +
                 threads * resident(fl * work, 1, thp) + resident(fl * partials, 1, thp) +
                 resident(fl * shared, 1, thp);
    /* the evaluator's arena, its batch and shuffle scratch (its soft targets are never
     * written, so never resident) */
    f->eval = resident(fl * Be * (vt_vit_eval_floats(&m, S) + 2.0 * K), 1, thp) +
              resident(fl * Be * C * S * S, 1, thp) + resident(fl * C * S * S, 1, thp);
    /* plus the training loop's batch (its soft targets with mixup / cutmix only) */
    f->loader = lt + lv + resident(fl * B * C * S * S, 1, thp) + (mix ? resident(fl * B * K, 1, thp) : 0);
    f->dataset = resident((double)d_train, 0, thp) + resident((double)d_val, 0, thp);
    f->total = f->baseline + f->dataset + f->model + f->activations + f->scratch + f->eval + f->loader;
    /* --resume reads the weights, then the state (its moments), each whole, before any step */
    f->resume_peak = f->baseline + f->dataset + f->model + f->loader + f->eval - 
                     resident(fl * Be * (vt_vit_eval_floats(&m, S) + 2.0 * K), 1, thp) +
                     resident(fl * P * moments, 1, thp);
    vt_vit_free(&m);
    return VT_OK;
}
