/* blocking.h - which GEMM blocking (kernels.h: vt_gemm_context) a run computes with,
 * where it came from, and the run directory's record of it.
 *
 * Owns: the order of the sources, the run record DIR/gemm_blocking.txt, the start-up
 * line that names the choice, and that every rank runs rank 0's blocking. Does not own
 * the table (kernels/gemm_context.c), the search (gemm_tune.h) nor the cache
 * (gemm_cache.h).
 *
 * The blocking changes the order of the float32 sums (K blocks summed into C), so a run
 * keeps one blocking from its first step to its last, resumes included. Sources, the
 * first that applies wins:
 *   env       VT_GEMM_CONTEXT is set (vt_kernels_init applied it to the table's entry);
 *   recorded  a resumed run: the blocking its run directory records (a run directory
 *             written before runs recorded it resumes with the table's entry, as it ran);
 *   cache     runtime.gemm_tune = on and the tuning cache holds an entry for this CPU,
 *             level, precision and bf16 path, thread count and the config's products;
 *   tuned     runtime.gemm_tune = on, no entry, one process, a model whose step's
 *             linear products reach VT_TUNE_MIN_FLOPS and a level with a SIMD GEMM: the
 *             search runs now over the blocking of the kernels that run the products
 *             (gemm_tune.h: the fp32 level's, or the amx / dpbf16 path's in bf16) and
 *             its result is cached;
 *   table     otherwise: the built-in table's entry for the CPU.
 * A new run records its blocking (every field and its source) in DIR/gemm_blocking.txt,
 * and a bf16 run the product path it runs (bf16_path.h), which orders the sums too: a
 * resumed bf16 run, and a bf16 evaluation of its checkpoint, run that path again
 * (precision.h: vt_precision_adopt_recorded).
 * An evaluation of a checkpoint (`vitrain eval`) computes with VT_GEMM_CONTEXT's
 * blocking when it is set, else with the record of the run directory the checkpoint is
 * in, else with the table's entry: a run's checkpoint then evaluates to its run's own
 * final validation bit for bit.
 */
#ifndef VT_BLOCKING_H
#define VT_BLOCKING_H

#include <stddef.h>

#include "config.h"
#include "gemm_tune.h"
#include "status.h"

/* The run record's name in a run directory. */
#define VT_BLOCKING_RECORD "gemm_blocking.txt"

/* Choose and set the blocking of a training run in dir (resume: continuing the run
 * there) on every rank: rank 0 chooses as above and logs one line saying what and why
 * (with the figures when it tuned), every rank sets rank 0's blocking, and for a new run
 * rank 0 writes dir's record. Collective under MPI. Errors: a resumed run's record that
 * does not parse (VT_ERR_USAGE, naming the file), a record that cannot be written or
 * out of memory (VT_ERR_RUNTIME). */
vt_status vt_blocking_for_run(const vt_config *cfg, const char *dir, int resume);

/* Choose and set the blocking of an evaluation of the checkpoint file at path on every
 * rank, as above (env, the record beside the file, the table): rank 0 chooses and logs
 * one line saying what and why, every rank sets rank 0's blocking and, for an evaluation
 * in bf16 (bf16), the bf16 path the record names. Collective under MPI. Errors: a record
 * beside the file that does not parse (VT_ERR_USAGE, naming it). */
vt_status vt_blocking_for_eval(const char *checkpoint, int bf16);

/* What one tuning did (vt_blocking_tune). */
typedef struct {
    vt_tune_target target; /* what was tuned */
    vt_tune_result r;
    double seconds;      /* the search's wall time */
    char cache_path[4200]; /* where it was cached ("" when it was not) */
    char cache_warn[4400]; /* why not ("" when it was) */
} vt_blocking_tuning;

/* Tune cfg's products for one of `ranks` ranks from start on this CPU now, in cfg's
 * precision on the active kernels (vt_tune_target_of), and cache the result under the
 * cache directory (a failure to cache is reported in t->cache_warn,
 * not an error). The result is named start's name + "/tuned". Errors: out of memory. */
vt_status vt_blocking_tune(const vt_config *cfg, int ranks, const vt_gemm_context *start, vt_blocking_tuning *t);
/* The tuning's figures in words: its wall time, the blocking tuned and the products it
 * was timed on, their seconds from the start to the result and their ratio, then each
 * kept change with its gain, or that no change beat the start. */
void vt_blocking_tuning_text(const vt_blocking_tuning *t, const char *start_name, char *buf, size_t len);

#endif
