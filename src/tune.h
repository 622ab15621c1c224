/* tune.h - the `vitrain tune CONFIG` command: tune the GEMM blocking for the products of
 * CONFIG's training step on this CPU at the current thread count, and cache it where a
 * later run of that config (runtime.gemm_tune = on) finds it (blocking.h).
 *
 * Owns: the command's checks and its report (stdout: a readable summary and one JSON
 * line). Does not own the search (gemm_tune.h), the cache (gemm_cache.h) nor the argument
 * parsing (main.c).
 */
#ifndef VT_TUNE_H
#define VT_TUNE_H

#include "config.h"
#include "status.h"

/* Tune cfg's products (on one of `ranks` MPI ranks: its share of the batch; in cfg's
 * train.precision, on the bf16 path chosen before: the blocking of the kernels that run
 * them, gemm_tune.h) from the active context (the table's entry for this CPU, changed
 * by VT_GEMM_CONTEXT when that is set), whatever the cache holds, and cache the result.
 * Errors (VT_ERR_USAGE): running under several MPI ranks, a batch the ranks do not divide, the scalar level, no cache directory;
 * VT_ERR_RUNTIME: the cache cannot be written, out of memory. */
vt_status vt_tune_command(const vt_config *cfg, int ranks);

#endif
