/* test_train_report.c - the start and end summaries (train_report.h), text for text: a
 * ViT-B preset on image folders resumed under 4 ranks, and the end of a run whose best
 * epoch is known and of one resumed from an older state that did not record it.
 * (tests/e2e_logging.c checks the same lines from a real run.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "config.h"
#include "pe/kinds.h"
#include "resolve.h"
#include "train_report.h"

/* What the start (s) or end (e) summary prints, as a malloc'd string. */
static char *capture(const vt_report_start *s, const vt_report_end *e) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (s) vt_report_print_start(f, s);
    if (e) vt_report_print_end(f, e);
    fclose(f);
    return buf;
}

int main(void) {
    vt_config c;
    const char *sets[] = {"model.preset=\"vit_base\"", "data.root=\"data/imagenet\"", "train.precision=\"bf16\"",
                          "train.batch_size=128", "train.accum_steps=32", "model.num_classes=1000"};
    CHECK(vt_resolve_file(&c, NULL, sets, 6) == VT_OK, "config: %s", vt_last_error());
    vt_report_start s = {.cfg = &c, .run_dir = "runs/in1k", .params = 86567656, .forward_flops = 17.58e9,
                         .train_n = 1281167, .val_n = 50000, .classes = 1000, .steps_per_epoch = 312,
                         .total_steps = 93600, .resume_step = 6240, .threads = 1, .ranks = 4,
                         .kernels = "amx", .gemm_context = "spr"};
    char *got = capture(&s, NULL);
    char want[2048];
    snprintf(want, sizeof want,
             "vitrain: model    vit_base: width 768, depth 12, heads 12, patch 16, image 224, 1000 classes, "
             "pe %s; 86.6 M parameters, 17.6 GFLOPs per image (forward)\n"
             "vitrain: data     imagefolder data/imagenet: train 1281167, val 50000 images, 1000 classes\n"
             "vitrain: compute  bf16, kernels amx (GEMM context spr), 1 thread x 4 ranks\n"
             "vitrain: schedule 300 epochs of 312 steps = 93600 steps (global batch 4096), resumed at step 6240\n"
             "vitrain: run      runs/in1k (full config: runs/in1k/config.json; --verbose prints it)\n",
             vt_pe_kind_name(c.pe.kind));
    CHECK(got && !strcmp(got, want), "start summary:\n%s\nexpected\n%s", got, want);
    free(got);

    s.params = 812;
    s.resume_step = -1;
    s.ranks = 1;
    s.threads = 8;
    s.total_steps = 100; /* ends inside the first epoch */
    got = capture(&s, NULL);
    CHECK(got && strstr(got, "; 812 parameters, ") && strstr(got, "8 threads x 1 rank\n") &&
              strstr(got, "schedule 1 epoch of 312 steps = 100 steps (global batch 4096)\nvitrain: run"),
          "small counts and singulars:\n%s", got);
    free(got);

    vt_report_end e = {.final = {.top1 = 81.234, .top5 = 95.5, .n = 50000, .img_size = 224}, .final_epoch = 300,
                       .final_step = 93600, .best_top1 = 81.5, .best_epoch = 290, .best_step = 90480,
                       .wall_s = 123456.78, .img_per_s = 2345.6, .peak_mib = 20480.4,
                       .last_path = "runs/in1k/last.safetensors", .best_path = "runs/in1k/best.safetensors"};
    got = capture(NULL, &e);
    const char *want_end =
        "final: top-1 81.23% top-5 95.50% (val, 50000 images) at epoch 300, step 93600\n"
        "best:  top-1 81.50% at epoch 290, step 90480\n"
        "time:  123456.8 s, 2346 img/s, peak memory 20480 MiB (resident set of rank 0)\n"
        "files: runs/in1k/last.safetensors (last), runs/in1k/best.safetensors (best)\n";
    CHECK(got && !strcmp(got, want_end), "end summary:\n%s\nexpected\n%s", got, want_end);
    free(got);
    e.best_step = e.best_epoch = -1;
    got = capture(NULL, &e);
    CHECK(got && strstr(got, "best:  top-1 81.50% (its epoch is not recorded in the older state this run "
                             "resumed from)\n"), "best of an older state:\n%s", got);
    free(got);
    return test_summary();
}
