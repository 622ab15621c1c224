/* train.h - the training loop.
 *
 * Owns: the run directory (config.json, metrics.jsonl, last/best checkpoints and the
 * resume state), the optimizer-step schedule (epochs or train.steps, gradient
 * accumulation, LR per vt_lr_at, clipping), the evaluation and checkpoint cadence, the
 * progress display, the NaN/Inf stop and exact resume. Does not own the model, the
 * optimizer math, the data pipeline or the file formats (vit, optim, loader,
 * checkpoint do).
 *
 * Schedule. An optimizer step consumes accum_steps consecutive micro-batches of
 * train.batch_size from one epoch; micro-batches left over at the end of an epoch
 * are skipped, so steps_per_epoch = floor(batches_per_epoch / accum_steps) and the
 * position of optimizer step s (0-based) is epoch s / steps_per_epoch, micro-batch
 * (s % steps_per_epoch) * accum_steps. Total steps T = train.steps if > 0, else
 * epochs * steps_per_epoch. Warmup W = optim.warmup_steps if > 0, else
 * round(optim.warmup_epochs * steps_per_epoch). Gradients of the micro-batches are
 * summed and scaled by 1 / accum_steps: the mean over the global batch.
 *
 * Run directory. One process owns it (rundir.h: DIR/lock); a new run starts only in a
 * directory holding no other run's checkpoint (or, with start_over, after moving that run
 * to DIR.old-N), so nothing a run wrote is truncated or deleted by another. Every file is
 * written through durable.h. Files:
 *   lock                       the owner's flock and "pid PID host HOST"
 *   config.json                the resolved config (every --set applied) with
 *                              train.run_dir = this directory: what `vitrain --resume DIR`
 *                              continues with (resume.h); the checkpoints' metadata holds
 *                              the same config without the run directory
 *   metrics.jsonl, summary.csv, the run's logs (run_log.h): train records every log_every
 *   events.out.tfevents.*      steps, evaluations, per-epoch means; TensorBoard scalars
 *   step_N.safetensors,        a checkpoint pair (checkpoint.h): the model (vt_vit_save)
 *   step_N.state.safetensors   and the resume state (train_state.h), written every
 *                              ckpt_every epochs, every ckpt_every_steps steps, at the
 *                              first step boundary ckpt_every_minutes after the newest
 *                              pair, at the end and when stopped early (stop_after, a
 *                              signal); the newest train.keep_checkpoints pairs are kept
 *   latest                     names the newest complete pair: what --resume continues from
 *   last.safetensors           the newest pair's weights (a hard link): the file to load
 *   best.safetensors           the model at the best val top-1 so far
 *
 * Data parallelism (dist.h, under mpirun): train.batch_size and train.accum_steps keep
 * meaning the global batch. Each of R ranks trains on batch_size / R samples of every
 * micro-batch (its loader shard: samples r, r + R, ... of the batch one process would
 * read, with the same augmentation and dropout draws), the last micro-batch's backward
 * sums the gradients over the ranks, and the step divides by accum_steps R: clipping
 * and the optimizer see the global mean and every rank steps identically. So R ranks
 * equal one process up to float summation order, and one rank under mpirun equals no
 * mpirun bit for bit. Evaluation is sharded the same way (eval.h). Rank 0 holds the
 * run directory's lock and is the only rank that writes, links or removes anything there
 * (metrics, checkpoints, the tidy of a resume), and prints progress (images/s of the
 * global batch); every rank reads the run directory on --resume (so it must be on a
 * file system they all see), and a run resumed with another rank count continues the
 * same recipe. Train records
 * with R > 1 also carry "ranks" and "comm_s": rank 0's seconds per step spent in MPI calls
 * (the gradient exchange and the small reductions, what backward did not hide).
 *
 * Stopping on a signal (stop.h): SIGINT, SIGTERM or SIGUSR1 received by any rank stops
 * the run at the next optimizer-step boundary: the step in progress finishes, the ranks
 * agree on the stop at the boundary (one small reduction per step, which also carries
 * rank 0's verdict on ckpt_every_minutes), the pair of that step is written, and
 * vt_train_run returns VT_OK with stopped = 1 and stop_signal set. An evaluation in
 * progress ends at its next batch (the ranks agree before each, eval.h); its step's pair
 * then records the evaluation and the epoch record as pending (train_state.h
 * eval_pending), and the resumed run makes them before its next step. The last step's
 * pair is written before the final evaluations, so a kill during them loses no training;
 * a signal during them stops the run the same way (eval_cut set), and a resume of that
 * pair makes all of them again. Either way the logs keep each evaluation once
 * (vt_run_log_drop_evals).
 *
 * Exact resume: for the same thread count a resumed run's per-step losses equal the
 * uninterrupted run's bit for bit (data order from (seed, epoch) via vt_loader_seek,
 * the dropout stream restored, moments and parameters restored exactly). On resume,
 * the logs keep only the records up to the saved step (run_log.h), and the epoch's
 * running means continue from the resume state.
 *
 * Terminal: the start and end summaries (train_report.h), a progress line, one line per
 * evaluation.
 */
#ifndef VT_TRAIN_H
#define VT_TRAIN_H

#include <stdint.h>

#include "config.h"
#include "eval.h"
#include "status.h"

typedef struct {
    const char *run_dir;     /* NULL: train.run_dir, or runs/<config file stem> if empty */
    const char *resume_dir;  /* NULL: a fresh run; else continue the run saved there */
    int64_t stop_after;      /* > 0: stop once this many optimizer steps are done (in
                                total, counting resumed ones), writing the checkpoint pair
                                an interrupted run would be resumed from */
    int resume_or_start;     /* 1 (with resume_dir NULL): continue the run in the run
                                directory when it holds a checkpoint pair, else start it
                                there (a requeued job runs one command every time) */
    int start_over;          /* a new run in a directory holding another run's checkpoint
                                moves that run aside to DIR.old-N (rundir.h) instead of
                                failing */
    int verbose;             /* print the resolved config at start (it is always saved as
                                RUN_DIR/config.json) */
} vt_train_opts;

typedef struct {
    char run_dir[VT_STR];
    int64_t steps;           /* optimizer steps completed (in total) */
    int64_t total_steps;     /* T */
    int stopped;             /* 1: ended before T by stop_after, or by a signal */
    int stop_signal;         /* the signal that stopped it (any rank's), 0: none */
    int eval_cut;            /* the signal cut an evaluation of this step short (the
                                continued run makes it first) */
    vt_eval_result final;    /* last evaluation at the training resolution (n = 0 if none) */
    double best_top1;
    double wall_s;           /* training wall time, including earlier resumed parts */
} vt_train_result;

/* The run directory of this config: override if non-NULL, else train.run_dir, else
 * "runs/<stem of cfg->source>" ("runs/run" when the config has no source). */
void vt_train_run_dir(const vt_config *cfg, const char *override, char *out, size_t len);

/* Train cfg (validated) as described above. Errors: VT_ERR_USAGE for a config the
 * data cannot satisfy (dataset smaller than one global batch, class count) or a
 * resume directory without state; VT_ERR_RUNTIME for data/checkpoint/IO failures and a
 * NaN or Inf loss (the message names the step, epoch and last good checkpoint). */
vt_status vt_train_run(const vt_config *cfg, const vt_train_opts *opts, vt_train_result *res);

/* mkdir -p. Errors name the path component that could not be created. */
vt_status vt_mkdir_p(const char *path);

#endif
