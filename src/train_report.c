/* train_report.c - the start and end summaries of a training run (train_report.h). */
#include "train_report.h"

#include <sys/resource.h>

#include "config.h"
#include "data/formats.h"
#include "pe/kinds.h"

/* 5720000 -> "5.72 M", 52100 -> "52.1 k", 812 -> "812". */
static const char *count_str(char *buf, size_t len, int64_t n) {
    if (n >= 1000000) snprintf(buf, len, "%.3g M", (double)n / 1e6);
    else if (n >= 1000) snprintf(buf, len, "%.3g k", (double)n / 1e3);
    else snprintf(buf, len, "%lld", (long long)n);
    return buf;
}

void vt_report_print_start(FILE *out, const vt_report_start *r) {
    const vt_config *c = r->cfg;
    const vt_model_config *m = &c->model;
    char pn[32];
    fprintf(out, "vitrain: model    %s: width %d, depth %d, heads %d, patch %d, image %d, %d classes, "
            "pe %s; %s parameters, %.3g GFLOPs per image (forward)\n", m->preset[0] ? m->preset : "custom",
            m->width, m->depth, m->heads, m->patch_size, m->img_size, m->num_classes, vt_pe_kind_name(c->pe.kind),
            count_str(pn, sizeof pn, r->params), r->forward_flops / 1e9);
    fprintf(out, "vitrain: data     %s %s: train %lld, val %lld images, %d classes\n",
            vt_data_kind_name(c->data.kind), c->data.kind == VT_DATA_SYNTHETIC ? "(generated)" : c->data.root,
            (long long)r->train_n, (long long)r->val_n, r->classes);
    fprintf(out, "vitrain: compute  %s, kernels %s (GEMM context %s), %d thread%s x %d rank%s\n",
            c->train.precision == VT_PRECISION_BF16 ? "bf16" : "fp32", r->kernels, r->gemm_context,
            r->threads, r->threads == 1 ? "" : "s", r->ranks, r->ranks == 1 ? "" : "s");
    int64_t epochs = (r->total_steps + r->steps_per_epoch - 1) / r->steps_per_epoch;
    fprintf(out, "vitrain: schedule %lld epoch%s of %lld steps = %lld steps (global batch %d)",
            (long long)epochs, epochs == 1 ? "" : "s", (long long)r->steps_per_epoch,
            (long long)r->total_steps, c->train.batch_size * c->train.accum_steps);
    if (r->resume_step >= 0) fprintf(out, ", resumed at step %lld", (long long)r->resume_step);
    fprintf(out, "\nvitrain: run      %s (full config: %s/config.json; --verbose prints it)\n", r->run_dir,
            r->run_dir);
}

void vt_report_print_end(FILE *out, const vt_report_end *r) {
    fprintf(out, "final: top-1 %.2f%% top-5 %.2f%% (val, %lld images) at epoch %lld, step %lld\n",
            r->final.top1, r->final.top5, (long long)r->final.n, (long long)r->final_epoch,
            (long long)r->final_step);
    if (r->best_step >= 0)
        fprintf(out, "best:  top-1 %.2f%% at epoch %lld, step %lld\n", r->best_top1,
                (long long)r->best_epoch, (long long)r->best_step);
    else
        fprintf(out, "best:  top-1 %.2f%% (its epoch is not recorded in the older state this run "
                "resumed from)\n", r->best_top1);
    fprintf(out, "time:  %.1f s, %.0f img/s, peak memory %.0f MiB (resident set of rank 0)\n", r->wall_s,
            r->img_per_s, r->peak_mib);
    fprintf(out, "files: %s (last), %s (best)\n", r->last_path, r->best_path);
}

double vt_report_peak_mib(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}
