/* eval_checkpoint.h - the `vitrain eval` command: a checkpoint's top-1 / top-5 accuracy
 * and mean cross-entropy on the val split at each image size, optionally also with each
 * image's patches shuffled, and optionally the logits as a NumPy archive.
 *
 * Owns: the config an evaluation runs under (the checkpoint's own, or CONFIG + --set whose
 * model keys must agree with the checkpoint's), the list of image sizes, the model built
 * from the checkpoint, the per-size loop, the output (one JSON line per size on stdout, a
 * readable line per size and a closing table on stderr, rank 0 only), the .npz of
 * --logits, and that the evaluation computes with the GEMM blocking the checkpoint's run
 * recorded (blocking.h vt_blocking_for_eval). Does not own the evaluation itself (eval.h), the archive format (npz.h), the
 * command line or the kernel table and threads (main.c starts those between open and run,
 * as it does for training).
 *
 * The twin of train.h: main.c parses the arguments into vt_eval_opts, opens the command,
 * starts the job (dist.h) and the runtime, and runs it.
 */
#ifndef VT_EVAL_CHECKPOINT_H
#define VT_EVAL_CHECKPOINT_H

#include <stdint.h>

#include "safetensors.h"
#include "config.h"
#include "status.h"

typedef struct {
    const char *checkpoint;          /* --checkpoint FILE (.safetensors) */
    const char *config;              /* CONFIG, or NULL: the checkpoint's own config */
    const char *const *sets;         /* --set overrides, applied after CONFIG or the */
    int n_sets;                      /* checkpoint's config */
    const int *resolutions;          /* --resolutions; n_resolutions = 0: model.img_size, */
    int n_resolutions;               /* then eval.resolutions */
    int patch_shuffle;               /* also evaluate with each image's patches permuted */
    uint64_t seed;                   /* seed of those permutations */
    const char *logits;              /* NULL, or the .npz path of --logits */
} vt_eval_opts;

/* What vt_eval_checkpoint_open failed at, so the command line reports it as such. */
typedef enum {
    VT_EVAL_FAILED_FILE,    /* reading the checkpoint: an error of that file */
    VT_EVAL_FAILED_CONFIG,  /* the checkpoint's config, CONFIG or --set: a config error */
    VT_EVAL_FAILED_ARGS     /* a command-line choice the config rejects (a size, no CONFIG
                               for a checkpoint without one): a usage error */
} vt_eval_failure;

/* An opened command: the checkpoint read, the config resolved, the sizes checked. */
typedef struct {
    const vt_eval_opts *opts;
    vt_safetensors ckpt;
    int ckpt_open;
    vt_config cfg;
    int sizes[VT_MAX_RES + 1], n_sizes;
} vt_eval_checkpoint;

/* Read opts->checkpoint, resolve the config (see the top of this file) and the list of
 * image sizes (each a multiple of model.patch_size). On an error *failed says which kind;
 * ec is closed either way with vt_eval_checkpoint_close. */
vt_status vt_eval_checkpoint_open(vt_eval_checkpoint *ec, const vt_eval_opts *opts,
                                  vt_eval_failure *failed);

/* Build the model from the checkpoint and evaluate it at every size, printing as above
 * and writing opts->logits. Needs the kernel table and threads started. Every rank
 * returns the same status (dist.h). */
vt_status vt_eval_checkpoint_run(vt_eval_checkpoint *ec);

void vt_eval_checkpoint_close(vt_eval_checkpoint *ec);

#endif
