/* info.c - the `vitrain info` report (info.h). */
#include "info.h"

#include <stdint.h>

#include "footprint.h"
#include "pe/kinds.h"
#include "resolve.h"
#include "vit.h"

vt_status vt_info_print(const vt_config *cfg, FILE *out) {
    vt_vit m;
    vt_model_spec ms;
    vt_status st = vt_vit_plan(&m, vt_resolve_model_spec(cfg, &ms));
    if (st != VT_OK) return st;
    vt_footprint fp;
    st = vt_footprint_estimate(cfg, vt_footprint_resident(), &fp);
    if (st != VT_OK) {
        vt_vit_free(&m);
        return st;
    }
    const int S = cfg->model.img_size;
    const int64_t gb = (int64_t)cfg->train.batch_size * cfg->train.accum_steps;
    double fwd = vt_vit_flops(&m, S);
    double step_flops = 3.0 * fwd * (double)gb;
    const double MiB = 1048576.0;
    fprintf(out, "model: width %d, depth %d, heads %d, patch %d, image %dx%d, %d classes, pe %s\n",
            cfg->model.width, cfg->model.depth, cfg->model.heads, cfg->model.patch_size, S, S,
            cfg->model.num_classes, vt_pe_kind_name(cfg->pe.kind));
    char origin[VT_STR + 128];
    fprintf(out, "classes: %d (%s)\n", cfg->model.num_classes,
            vt_resolve_classes_origin(cfg, origin, sizeof origin));
    fprintf(out, "parameters: %lld (%.2f M)\n", (long long)m.n_params, m.n_params / 1e6);
    fprintf(out, "forward FLOPs per image: %.4g G\n", fwd / 1e9);
    fprintf(out, "training step FLOPs: %.4g G (3 x forward x global batch %lld)\n", step_flops / 1e9,
            (long long)gb);
    fprintf(out, "memory estimate (peak resident set of training): %.1f MiB = model and optimizer %.1f "
            "+ activations (batch %d) %.1f + evaluation %.1f + data loaders %.1f + dataset %.1f + "
            "scratch %.1f + process %.1f MiB; --resume peaks at %.1f MiB while loading\n",
            fp.total / MiB, fp.model / MiB, cfg->train.batch_size, fp.activations / MiB, fp.eval / MiB,
            fp.loader / MiB, fp.dataset / MiB, fp.scratch / MiB, fp.baseline / MiB,
            fp.resume_peak / MiB);
    fprintf(out, "{\"params\":%lld,\"forward_flops_per_image\":%.6g,\"train_step_flops\":%.6g,"
            "\"global_batch\":%lld,\"memory_bytes\":%.0f,\"param_state_bytes\":%.0f,"
            "\"activation_bytes\":%.0f,\"eval_bytes\":%.0f,\"loader_bytes\":%.0f,"
            "\"dataset_bytes\":%.0f,\"scratch_bytes\":%.0f,\"process_bytes\":%.0f,"
            "\"resume_peak_bytes\":%.0f,\"img_size\":%d}\n", (long long)m.n_params, fwd, step_flops,
            (long long)gb, fp.total, fp.model, fp.activations, fp.eval, fp.loader, fp.dataset,
            fp.scratch, fp.baseline, fp.resume_peak, S);
    vt_vit_free(&m);
    return VT_OK;
}
