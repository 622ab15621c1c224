/* checkpoint.h - the crash-consistent checkpoint pairs of a run directory and the
 * `latest` pointer naming the newest complete one. Files are written through durable.h
 * (whose fault injection the tests drive), tensors through safetensors.h.
 *
 * A run directory holds its resume points as pairs
 *   step_SSSSSSSS.safetensors        the model (vt_vit_save), SSSSSSSS = optimizer steps
 *                                    done, zero-padded to at least 8 digits
 *   step_SSSSSSSS.state.safetensors  the training state written with it (train_state.h)
 * and the pointer file
 *   latest                           one line "step_SSSSSSSS\n": the newest complete pair
 * plus last.safetensors, a hard link to the weights of the pair `latest` names (a copy
 * where the file system has no hard links): the stable name users and timm load.
 *
 * Protocol of one save at step s (vt_ckpt_publish does steps 3-5):
 *   1. write step_s.safetensors        (durable.h: tmp, fsync, rename, fsync dir)
 *   2. write step_s.state.safetensors  (durable.h: tmp, fsync, rename, fsync dir)
 *   3. write latest.tmp = "step_s\n", fsync it, rename it over latest, fsync the dir:
 *      the commit point. Before it `latest` names the previous pair, after it step s.
 *   4. link step_s.safetensors to last.safetensors.tmp, rename it over
 *      last.safetensors, fsync the dir
 *   5. delete pairs beyond the newest train.keep_checkpoints (state first, then
 *      weights), pairs newer than s (left by a save that was killed) and leftover .tmp
 *      files of these names; fsync the dir
 * A save that fails before the commit point removes what it wrote of step s, so a full
 * disk leaves the previous pair, still named by `latest`, and nothing else new.
 * Invariant: from the first commit on, `latest` always names a pair whose two files are
 * complete and durable, because they are written and fsynced before `latest` moves to
 * them and deleted only after it has moved away. A kill at any instant leaves that pair,
 * from which --resume continues bit-exactly (train.h). last.safetensors lags `latest`
 * by at most one save between steps 3 and 4.
 * A run directory of the older layout (last.safetensors + last.state.safetensors, no
 * `latest`) is still resumed from those two files.
 *
 */
#ifndef VT_CHECKPOINT_H
#define VT_CHECKPOINT_H

#include <stdint.h>

#include "status.h"

#define VT_CKPT_PATH 4096

typedef struct {
    int64_t step;
    char weights[VT_CKPT_PATH];  /* DIR/step_SSSSSSSS.safetensors */
    char state[VT_CKPT_PATH];    /* DIR/step_SSSSSSSS.state.safetensors */
} vt_ckpt_pair;

/* The file names of the pair of step `step` in dir. */
void vt_ckpt_pair_of(const char *dir, int64_t step, vt_ckpt_pair *p);
/* Steps 3-5 of the protocol for a pair whose two files are written: make it the one
 * `latest` names, relink last.safetensors, keep the newest `keep` (>= 1) pairs.
 * *committed (if not NULL) says whether `latest` names the pair now. On a failure before
 * the commit point the pair's files are removed and `latest` is unchanged; after it, the
 * pair stays current and the error names what failed. */
vt_status vt_ckpt_publish(const char *dir, const vt_ckpt_pair *p, int keep, int *committed);
/* Steps 4-5 for the current pair p (from vt_ckpt_current, p->step >= 0): a run resumed
 * after a kill between the commit point and the end of a save completes it, so
 * last.safetensors names p's weights and leftovers are gone. */
vt_status vt_ckpt_tidy(const char *dir, const vt_ckpt_pair *p, int keep);
/* Remove a pair's files (a save that failed before vt_ckpt_publish). Never call it on
 * the pair `latest` names. */
void vt_ckpt_discard(const vt_ckpt_pair *p);
/* The pair to resume from: the one `latest` names, else the older layout's
 * last.safetensors + last.state.safetensors. VT_ERR_USAGE when dir has neither (the
 * message says what was looked for), VT_ERR_RUNTIME when `latest` is unreadable,
 * malformed or names missing files. */
vt_status vt_ckpt_current(const char *dir, vt_ckpt_pair *p);

#endif
