/* checkpoint.h - safetensors files (read: F32, BF16, F16 as float32; written: F32),
 * written atomically and verified on read, and the crash-consistent checkpoint pairs of
 * a run directory.
 *
 * Format (huggingface safetensors): 8-byte little-endian header length n, then n
 * bytes of JSON {"name": {"dtype": "F32", "shape": [...], "data_offsets": [b, e]},
 * ..., "__metadata__": {"key": "string value", ...}}, then the raw little-endian
 * data. Reading validates the header JSON, dtypes, shapes against offsets, offsets
 * against the file size, overlap and coverage, and reports the file and tensor name
 * on any violation. Writing goes to PATH.tmp, is flushed and fsynced, renamed to PATH,
 * and the directory is fsynced, so the rename itself survives a power cut.
 *
 * Integrity. Every file vt_st_write produces carries __metadata__["tensor_crc32"]: a
 * JSON object (as a string, like every metadata value) mapping each tensor name to the
 * CRC-32 of its data bytes as stored (BF16 and F16 ones before widening), as 8 lowercase
 * hex digits (the CRC of zlib.crc32 and binascii.crc32, so any tool can check it).
 * vt_st_read verifies it when present: a mismatch, a tensor without an entry or an entry
 * without a tensor is an error naming the file and the tensor; files without the key
 * (timm's, PyTorch's) load unchecked.
 * The key is consumed by the check: it is not among the metadata vt_st_read returns.
 * Independently, a NaN or infinity in any tensor's data is an error naming the file,
 * the tensor and the element (a diverged run or a corrupt file must not load silently).
 *
 * Checkpoint pairs. A run directory holds its resume points as pairs
 *   step_SSSSSSSS.safetensors        the model (vt_vit_save), SSSSSSSS = optimizer steps
 *                                    done, zero-padded to at least 8 digits
 *   step_SSSSSSSS.state.safetensors  the training state written with it (train_state.h)
 * and the pointer file
 *   latest                           one line "step_SSSSSSSS\n": the newest complete pair
 * plus last.safetensors, a hard link to the weights of the pair `latest` names (a copy
 * where the file system has no hard links): the stable name users and timm load.
 *
 * Protocol of one save at step s (vt_ckpt_publish does steps 3-5):
 *   1. write step_s.safetensors        (tmp, fsync, rename, fsync dir)
 *   2. write step_s.state.safetensors  (tmp, fsync, rename, fsync dir)
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
 * Fault injection (tests only). Built with -DVT_FAULT_INJECTION, every file operation
 * of this file (create, write, fsync, close, rename, link, unlink, directory fsync) is
 * an event numbered from 1 in process order, and the environment controls them:
 *   VT_FAULT_TRACE=FILE      append "N op path" per event to FILE
 *   VT_FAULT_KILL_AT=N       SIGKILL the process just before event N
 *   VT_FAULT_ENOSPC_AT=N     event N fails with ENOSPC instead of running
 *   VT_FAULT_NO_LINK=1       every link fails with EXDEV, as on a file system without
 *                            hard links (last.safetensors is then a copy)
 * The normal build has none of this (tests/e2e_checkpoint_faults.c uses it).
 */
#ifndef VT_CHECKPOINT_H
#define VT_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct {
    char name[160];
    int ndim;
    int64_t shape[8];
    int64_t size;          /* elements */
    char dtype[8];         /* read: the dtype stored in the file (F32, BF16, F16); data is
                              float32 whatever it is (checkpoint_dtype.h). write: ignored */
    float *data;           /* read: points into the file buffer; write: caller's */
} vt_st_tensor;

typedef struct {
    int n;
    vt_st_tensor *tensors;
    int n_meta;
    char **meta_keys, **meta_values;
    void *buffer;          /* owns tensor data after a read */
} vt_safetensors;

/* Write n tensors plus metadata (n_meta key/value strings; may be 0) and the
 * tensor_crc32 entry. Atomic and durable (see above). */
vt_status vt_st_write(const char *path, const vt_st_tensor *tensors, int n,
                      const char *const *meta_keys, const char *const *meta_values, int n_meta);
/* Read, validate and verify a whole file (checksums when present, finite values).
 * On error nothing is left allocated. */
vt_status vt_st_read(const char *path, vt_safetensors *out);
void vt_st_free(vt_safetensors *st);
/* Tensor by name, or NULL. */
const vt_st_tensor *vt_st_find(const vt_safetensors *st, const char *name);
/* Metadata value by key, or NULL. */
const char *vt_st_meta(const vt_safetensors *st, const char *key);

/* CRC-32 (zlib.crc32) of n bytes. */
uint32_t vt_crc32(const void *data, size_t n);

/* Write a float32 C-order NumPy .npy file (version 1.0), atomically. */
vt_status vt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape);

/* ---- checkpoint pairs of a run directory (protocol above) ---- */

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
