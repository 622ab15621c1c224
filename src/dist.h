/* dist.h - data-parallel training across processes with MPI (Open MPI).
 *
 * Owns: whether MPI runs at all, this process's rank and the world size, the start-up
 * agreement (every rank runs the same build, config and options), agreement on errors,
 * the bucketed gradient all-reduce that overlaps backward, small reductions (the step
 * loss, evaluation counts), broadcasts and the gather of sharded evaluation logits, and
 * the placement check of ranks and OpenMP threads. Does not own what a shard is (the
 * loader), the schedule or the batch semantics (train), or the parameter layout (vit).
 *
 * Launch. MPI is initialised only when a launcher started the process: Open MPI's
 * mpirun sets OMPI_COMM_WORLD_SIZE, PMIx launchers (srun --mpi=pmix, prterun) PMIX_RANK,
 * PMI-1/2 launchers PMI_SIZE. Without any of them `vitrain` never calls MPI: it is rank
 * 0 of 1, every collective below is the identity, and the run is the single-process one
 * bit for bit (MPI_Init would start Open MPI's helper threads and, under a launcher,
 * the launcher's CPU binding applies; neither is wanted when nobody asked for MPI).
 * Under a launcher with one rank the collectives are skipped as well, so `mpirun -np 1`
 * gives the same bits as no mpirun. MPI is used from the main thread only
 * (MPI_THREAD_FUNNELED): OpenMP teams and the loader's threads never call it.
 *
 * Output. Rank 0 writes the run directory, metrics, progress and results; the other
 * ranks' stdout is /dev/null and their stderr carries only their own warnings and errors.
 *
 * Errors. A status every rank computed from the same inputs (the config is the same on
 * every rank) is reported once, by rank 0. A status only some ranks saw is made known to
 * all with vt_dist_agree at the points where the ranks may diverge (data, files); every
 * rank then returns the failing rank's status and message ("rank r: ..."), rank 0 prints
 * it and all exit non-zero through MPI_Finalize. A rank that returns an error nobody
 * agreed on prints it itself (with its rank) and calls MPI_Abort, which ends every rank:
 * no path leaves the other ranks waiting in a collective. A rank that dies (a signal,
 * the OOM killer) is seen by mpirun, which ends the others and names the rank.
 */
#ifndef VT_DIST_H
#define VT_DIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"

/* Initialise MPI if a launcher started this process (see above); otherwise nothing.
 * Call first in main. */
void vt_dist_init(int *argc, char ***argv);
int vt_dist_rank(void);         /* 0 without MPI */
int vt_dist_size(void);         /* 1 without MPI */
/* Whether this rank writes run files, logs and progress: rank 0. */
static inline int vt_dist_root(void) { return vt_dist_rank() == 0; }

/* Where a message for the user goes until the start-up agreement: stderr on rank 0
 * (and without MPI); a buffer on the other ranks, printed only if that rank fails
 * alone (so the usual identical errors appear once). stderr afterwards. */
FILE *vt_dist_msg(void);

/* The start-up agreement, a collective every rank reaches exactly once before any work:
 * rc is this rank's exit code so far (0: ready). If any rank failed, every rank returns
 * the lowest failing rank's rc (that rank's buffered messages printed if it is not rank
 * 0). Otherwise the build (source hash, version.h) and `job` (the resolved config and
 * the options that shape the run, as text) are compared with rank 0's; a difference
 * is a usage error (2) printed by rank 0 naming the first differing rank and what
 * differs. Returns 0 when every rank may start. */
int vt_dist_start(int rc, const char *job);

/* This build's identity as vt_dist_start compares it: the hash of its sources
 * (scripts/version.sh), 16 hex digits. */
const char *vt_dist_build_id(void);

/* The process's exit code, called by main last: MPI_Finalize and rc when every rank
 * knows of rc (0, a start-up result, an agreed or a same-everywhere error); otherwise
 * MPI_Abort(rc), which ends every rank. Without MPI: rc. */
int vt_dist_exit(int rc);

/* A collective: VT_OK if st is VT_OK on every rank; otherwise every rank returns the
 * lowest failing rank's status with its message (prefixed "rank r: " when r > 0). */
vt_status vt_dist_agree(vt_status st);
/* Declare that every rank returns this same status from the same inputs (no
 * communication): the error is reported once, by rank 0, and the exit is clean. */
vt_status vt_dist_everywhere(vt_status st);
/* The same for an exit code every rank reached in agreement (main's "stopped" code after
 * the ranks agreed on a stop): returns rc, and vt_dist_exit then finalizes cleanly. */
int vt_dist_exit_everywhere(int rc);
/* Whether this rank prints the error it is about to exit with (main's fail path):
 * rank 0, or any rank whose error the others do not know. */
int vt_dist_reports_error(void);
/* "rank r: " for an error only this rank saw (world > 1), else "". */
const char *vt_dist_who(void);

/* The global batch (config key `key`, value global) split evenly over the ranks: *local
 * = global / R; not divisible is a usage error naming both numbers (the same on every
 * rank, reported once). */
vt_status vt_dist_split_batch(int global, const char *key, int *local);
/* Every rank's bytes hash equal to rank 0's (a collective); else a runtime error
 * naming `what` and the first rank that differs. */
vt_status vt_dist_check_same(const char *what, const void *data, size_t bytes);
/* Rank 0's bytes to every rank. */
void vt_dist_bcast(void *data, size_t bytes);
/* Element-wise sums over the ranks, in place. */
void vt_dist_sum_f64(double *v, int n);
void vt_dist_sum_i64(int64_t *v, int n);
/* Element-wise maxima over the ranks, in place. */
void vt_dist_max_int(int *v, int n);
/* Sharded rows back in order on rank 0: rank r holds rows r, r + R, r + 2R, ... of n
 * rows of row_bytes each (the loader's shard); rank 0 receives all n rows in full
 * (only written on rank 0; may be NULL elsewhere). */
void vt_dist_gather_strided(const void *mine, int64_t n, size_t row_bytes, void *full);
/* Seconds this process has spent in MPI calls on its main thread so far: time the
 * step waits on communication (launching, progressing and completing the gradient
 * exchange, the small reductions). 0 without MPI. */
double vt_dist_comm_seconds(void);

/* Warn (rank 0, once) when ranks are bound to fewer CPUs than their OpenMP threads or
 * the ranks of one host run more threads than it has CPUs. A collective. */
void vt_dist_check_placement(int threads);

/* ---- bucketed gradient all-reduce ----------------------------------------------- */

/* The flat gradient buffer cut into buckets (up to 25 MiB) from its end
 * (backward finishes the last parameters first). A bucket's MPI_Iallreduce (sum, in
 * place) starts as soon as backward reports every gradient at or above the bucket's
 * start final; MPI_Test on the buckets in flight runs after every tape entry, so Open
 * MPI progresses them while backward computes; vt_dist_grads_finish starts what is left
 * and waits for all. Then every rank holds the sum of all ranks' gradients. */
typedef struct vt_dist_grads vt_dist_grads;

/* Buckets of bucket_floats floats (0: 25 MiB, or n / 8 down to 1 MiB for a smaller
 * model, dist.c); NULL with one rank. */
vt_dist_grads *vt_dist_grads_new(float *grads, int64_t n, int64_t bucket_floats);
void vt_dist_grads_free(vt_dist_grads *g);
/* Arm for the backward about to run: until finish, ready() starts buckets. Without
 * begin (accumulation micro-steps but the last) ready() does nothing. */
void vt_dist_grads_begin(vt_dist_grads *g);
/* The tape's hook (tape.h vt_tape_hook): from >= 0: every gradient at flat offset
 * >= from is final; from = -1: a chance to progress the buckets in flight. */
void vt_dist_grads_ready(void *g, int64_t from);
/* Start the buckets not yet started, wait for all; disarm. */
void vt_dist_grads_finish(vt_dist_grads *g);

#endif
