/* train_state.h - the resume state file written beside each checkpoint's weights
 * (the ".state.safetensors" half of a pair, checkpoint.h).
 *
 * Owns the file's contents and their validation. A safetensors file with tensors
 *   optim.m, optim.v    the optimizer moments, (n_params,) float32 each; optim.v only
 *                       for AdamW (SGD keeps one moment)
 * and __metadata__ strings
 *   format              "vitrain-train-state-1"
 *   step, epoch, batch  optimizer steps done, and the epoch and micro-batch they lead to
 *   optim_t             the optimizer's step counter (AdamW bias correction)
 *   rng                 the dropout stream: four words of 16 hex digits, not all zero
 *   best_top1           the best val top-1 so far (-1 before any evaluation)
 *   wall_s              training wall time so far, seconds, >= 0 ("%.16e": timings are
 *                       written at a fixed width, so the file's size does not vary with them)
 *   params_hash         16 hex digits: vt_train_params_hash of the weights saved with
 *                       it, which ties the state to its weights file
 *   best_step           the step of best_top1 (-1 before any evaluation)
 *   epoch_stats         the current epoch's running sums (run_log.h vt_epoch_stats):
 *                       "loss_sum steps correct counted seconds images"
 *   eval_pending        "1": a stop request ended the evaluation due at this step (and
 *                       so the epoch record after it) before it finished: a resume runs
 *                       them before the next step; "0": none pending
 *   config              the resolved config JSON of the run
 * best_step, epoch_stats and eval_pending are absent from states of older builds: read as
 * -1 (unknown), zero sums (the epoch's means then cover the steps after the resume) and 0.
 * Reading checks every key and tensor a resume relies on, each error naming the file
 * and the key or tensor: format, non-negative integers, finite numbers, the rng words,
 * the hash, the moments' shape, their finiteness (vt_st_read) and optim.v >= 0.
 * Whether the state fits the run resuming it (steps per epoch, the weights' hash) is the
 * training loop's check (train.c).
 */
#ifndef VT_TRAIN_STATE_H
#define VT_TRAIN_STATE_H

#include <stdint.h>

#include "run_log.h"
#include "status.h"

typedef struct {
    int64_t step, epoch, batch, optim_t;
    uint64_t rng[4];
    double best_top1, wall_s;
    uint64_t params_hash;
    int64_t best_step;
    vt_epoch_stats epoch_stats;
    int eval_pending;      /* 1: the evaluation due at step (and the epoch record) still to run */
    char *config;          /* read: the saved config JSON (malloc'd, free it); write: unused */
} vt_train_state;

/* FNV-1a (64-bit) of the bytes of n floats. */
uint64_t vt_train_params_hash(const float *params, int64_t n);

/* Write the state file (atomic and durable, checkpoint.h): s's fields, the moments m and
 * v (n floats each; v NULL for SGD) and config_json. */
vt_status vt_train_state_write(const char *path, const vt_train_state *s, const float *m,
                               const float *v, int64_t n, const char *config_json);

/* Read and validate path: *s (s->config malloc'd) and the moments into m and v (n floats
 * each; v NULL when the optimizer keeps one moment, and then the file must have none). On
 * error nothing is allocated and m, v are unchanged. */
vt_status vt_train_state_read(const char *path, int64_t n, float *m, float *v, vt_train_state *s);

#endif
