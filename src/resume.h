/* resume.h - the config a resumed run continues with (`vitrain --resume DIR`).
 *
 * Owns: reading a run directory's own recorded config (DIR/config.json: the resolved
 * config with every --set of the run and the run directory it was written to) and
 * comparing a config given with --resume (or --resume-or-start) against it, key by key, with the rule of what
 * may differ. Does not own the run directory's files or the resume state (train.c,
 * checkpoint.c, train_state.c) nor the keys (config.c marks the run-only ones).
 *
 * `vitrain --resume DIR` alone continues with DIR/config.json. With a CONFIG and/or
 * --set as well, every key that differs from the run's is named:
 *   - keys that only change how the run goes (config.h's vt_config_change.run_only:
 *     threads, logging, progress, checkpoint cadence and count, loader threads) are
 *     allowed and logged;
 *   - a longer run (train.epochs, or train.steps, raised; the other one unchanged) is
 *     allowed and logged with what it does to the learning-rate schedule: a constant
 *     schedule gives every step the rate of an uninterrupted run of the new length; a
 *     cosine one is recomputed over the new length, so the rate jumps up at the resumed
 *     step and the result matches no uninterrupted run;
 *   - any other difference changes what is computed: an error naming each such key with
 *     both values (VT_ERR_USAGE).
 * The run directory of the result is DIR, whatever train.run_dir the configs name.
 */
#ifndef VT_RESUME_H
#define VT_RESUME_H

#include "config.h"
#include "status.h"

/* The config to resume the run in dir with, into *out (resolved): dir/config.json, or
 * config_path (NULL: none) with n_sets --set assignments compared against it as above
 * (with only --set, they apply to the run's config). Notes on stderr (rank 0). Errors:
 * VT_ERR_USAGE for a directory without a run's config.json and for differences that
 * change what is computed; messages name dir and the keys. */
vt_status vt_resume_config(vt_config *out, const char *dir, const char *config_path,
                           const char *const *sets, int n_sets);

/* A run that --resume-or-start continues: the command's config (cfg, resolved: CONFIG
 * and every --set) compared against dir/config.json by the same rule, so a requeued
 * command that changed what is computed is refused as --resume refuses it. Notes on
 * stderr. A directory without config.json has nothing to compare with (the resume then
 * reports what it lacks). Errors: VT_ERR_USAGE naming dir and each key that differs. */
vt_status vt_resume_check(const vt_config *cfg, const char *dir);

#endif
