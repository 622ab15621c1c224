/* run_log.h - the records a training run leaves in its run directory as it goes:
 * metrics.jsonl, TensorBoard event files and summary.csv.
 *
 * Owns the three files' names, formats, tags and columns, and what a resume does to them.
 * Does not own when records are made (train.c), the event record bytes (tfevents.h),
 * how files are written (durable.h) or the checkpoints. Only rank 0 keeps a log.
 *
 * metrics.jsonl, one JSON object per line:
 *   {"kind":"train","step","epoch","loss","lr","grad_norm","img_per_s","wall_s"} every
 *     train.log_every optimizer steps (step counts completed steps, 1-based; loss is that
 *     step's mean over its global batch), then "top1" (that step's training top-1, %) when
 *     every sample of the step had a hard label, then with R > 1 ranks "ranks" and
 *     "comm_s" (rank 0's seconds per step in MPI calls: what backward did not hide)
 *   {"kind":"eval","step","epoch","top1","top5","loss","resolution","n","wall_s"} per
 *     evaluation
 *   {"kind":"checkpoint","step","bytes","seconds","wall_s"} per checkpoint pair written (its
 *     two files' bytes and the seconds the save took)
 *   {"kind":"epoch","step","epoch","loss","top1","lr","img_per_s","wall_s"} at the end of
 *     each epoch (and of a run that ends inside one): the mean loss over the epoch's steps,
 *     the training top-1 over its hard-labelled samples (null when it had none: mixup or
 *     cutmix on every batch), the last step's lr, the images/s of the epoch's steps
 * summary.csv, one row per epoch (timm's columns where they apply):
 *   epoch,step,train_loss,train_top1,eval_loss,eval_top1,eval_top5,lr,img_per_s,wall_s
 *   with the eval cells those of the evaluation at the training size made at the epoch's
 *   last step, empty when there was none (train.eval_every > 1) and train_top1 empty
 *   where metrics.jsonl has null.
 * events.out.tfevents.T.HOST (TensorBoard: `tensorboard --logdir RUN_DIR`), scalars with
 * the optimizer step as their step:
 *   train/loss, train/top1, train/lr, train/grad_norm, train/img_per_s, train/comm_s
 *     (R > 1) at each metrics train record;
 *   train/loss_epoch, train/top1_epoch, train/img_per_s_epoch at each epoch record;
 *   eval/top1, eval/top5, eval/loss for evaluations at the training size,
 *   eval_Spx/top1, eval_Spx/top5, eval_Spx/loss at another size S.
 *
 * Resume from a checkpoint at step s: metrics.jsonl, summary.csv and every event file of
 * the directory keep only the records of steps <= s (what the checkpoint has seen; each
 * rewritten whole and atomically), and the resumed process writes a new event file whose
 * name sorts after the earlier ones (T is its start time in seconds, later than theirs),
 * starting with a SessionLog START at step s + 1. TensorBoard reads a directory's event
 * files in name order, so a fresh `tensorboard --logdir` shows the same curves as an
 * uninterrupted run. One already watching replaces the points after s it had read with
 * the resumed run's: its data server drops a tag's points at and after a step that comes
 * again, and its Python loader (--load_fast=false) drops every point at and after the
 * START record's step (its purge of orphaned data).
 */
#ifndef VT_RUN_LOG_H
#define VT_RUN_LOG_H

#include <stdint.h>

#include "durable.h"
#include "eval.h"
#include "status.h"

/* One train record (metrics every train.log_every steps). */
typedef struct {
    int64_t step, epoch;   /* steps done (1-based), epoch of the step (1-based) */
    double loss, lr, grad_norm, img_per_s, wall_s;
    double top1;           /* %, NaN when the step had soft (mixup/cutmix) labels */
    int ranks;             /* > 1: comm_s is logged */
    double comm_s;
} vt_log_train;

/* What an epoch accumulates as its steps run (kept in the resume state, so an epoch cut by
 * a resume has the same means as an uninterrupted one). */
typedef struct {
    double loss_sum;       /* sum over the epoch's steps of their mean loss */
    int64_t steps;
    int64_t correct, counted; /* training top-1 over samples with hard labels */
    double seconds;        /* time of the epoch's steps (this process and resumed ones) */
    int64_t images;        /* images those seconds trained */
} vt_epoch_stats;

/* The log of a run directory. */
typedef struct {
    char dir[1024];
    int train_size;        /* model.img_size: evaluations at it are the eval/ tags */
    vt_durable_log metrics, summary, events; /* each record goes out in one write(2), so a
                                                 reader (TensorBoard, tail -f) sees whole ones */
    vt_eval_result last_eval; /* last evaluation at the training size, and its step */
    int64_t last_eval_step;
} vt_run_log;

/* Open the log of dir for a fresh run (resume_step < 0: the three files are started
 * empty, earlier event files of the directory removed) or for a run resumed at
 * resume_step (trimmed as above). Errors name the file. */
vt_status vt_run_log_open(vt_run_log *l, const char *dir, int train_size, int64_t resume_step);
/* Before a resume at step that makes that step's evaluations and epoch end again (a stop
 * cut them short, or they are a finished run's final ones): drop the records they left at
 * step from the three logs of dir (metrics.jsonl's eval and epoch records, summary.csv's
 * row, the eval and _epoch scalars of the event files), so each is there once. Errors
 * name the file. */
vt_status vt_run_log_drop_evals(const char *dir, int64_t step);
void vt_run_log_close(vt_run_log *l);
/* Make the three files durable (fsync): before a checkpoint pair is written, so the
 * records a checkpoint has seen survive a power cut with it. */
vt_status vt_run_log_sync(vt_run_log *l);

vt_status vt_run_log_train(vt_run_log *l, const vt_log_train *r);
vt_status vt_run_log_eval(vt_run_log *l, int64_t step, int64_t epoch, const vt_eval_result *r,
                          double wall_s);
/* The record of the checkpoint pair written at step: its two files' bytes (-1 if unknown)
 * and the seconds the save took. */
vt_status vt_run_log_checkpoint(vt_run_log *l, int64_t step, long long bytes, double seconds,
                                double wall_s);
/* The record of epoch `epoch` (1-based) ending at step `step`, from its stats and the
 * lr of its last step. */
vt_status vt_run_log_epoch(vt_run_log *l, int64_t step, int64_t epoch, const vt_epoch_stats *e,
                           double lr, double wall_s);

/* The mean loss and top-1 (%, NaN when nothing was counted) of an epoch's stats. */
double vt_epoch_stats_loss(const vt_epoch_stats *e);
double vt_epoch_stats_top1(const vt_epoch_stats *e);

#endif
