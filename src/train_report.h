/* train_report.h - the start and end summaries of a training run: the few lines a person
 * reads on the terminal (stderr, rank 0).
 *
 * Owns their wording and layout. Does not own the facts (train.c gathers them) nor the
 * full resolved config, which is in RUN_DIR/config.json and printed only on request.
 *
 * Start (after everything is loaded, so nothing is printed before a run that cannot
 * start):
 *   vitrain: model    PRESET: width D, depth L, heads H, patch P, image S, K classes, pe KIND;
 *                     N parameters, G GFLOPs per image (forward)
 *   vitrain: data     KIND ROOT: train N, val N images, K classes
 *   vitrain: compute  PRECISION, kernels LEVEL (GEMM context NAME), T threads x R ranks
 *   vitrain: schedule E epochs of S steps = T steps (global batch B), resumed at step s
 *   vitrain: run      DIR (full config: DIR/config.json; --verbose prints it)
 * End (a run that reached its last step):
 *   final: top-1 X% top-5 Y% (val, N images) at epoch E, step S
 *   best:  top-1 X% at epoch E, step S
 *   time:  W s, N img/s, peak memory M MiB (resident set of rank 0)
 *   files: DIR/last.safetensors (last), DIR/best.safetensors (best)
 */
#ifndef VT_TRAIN_REPORT_H
#define VT_TRAIN_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "eval.h"

typedef struct {
    const vt_config *cfg;
    const char *run_dir;
    int64_t params;
    double forward_flops;        /* per image at model.img_size */
    int64_t train_n, val_n;      /* samples of the train split, evaluated of the val split */
    int classes;                 /* of the dataset */
    int64_t steps_per_epoch, total_steps;
    int64_t resume_step;         /* -1: a fresh run */
    int threads, ranks;
    const char *kernels, *gemm_context;
} vt_report_start;

typedef struct {
    vt_eval_result final;
    int64_t final_epoch, final_step;
    double best_top1;
    int64_t best_epoch, best_step; /* -1: not recorded (resumed from an older state) */
    double wall_s;               /* training wall time, resumed parts included */
    double img_per_s;            /* images trained by this process / its seconds of steps */
    double peak_mib;
    const char *last_path, *best_path;
} vt_report_end;

void vt_report_print_start(FILE *out, const vt_report_start *r);
void vt_report_print_end(FILE *out, const vt_report_end *r);
/* Peak resident set of this process, MiB (getrusage). */
double vt_report_peak_mib(void);

#endif
