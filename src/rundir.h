/* rundir.h - who owns a run directory, and what it holds.
 *
 * Owns: the run directory's lock (DIR/lock), the answer to "what does this directory
 * hold" that decides whether a new run may start there, and moving an old run aside.
 * Does not own the files of a run (checkpoint.c names the pairs and `latest`, train.c
 * the rest) nor how they are written (durable.c).
 *
 * Lock. A run (and a resumed run) takes an exclusive flock(2) on DIR/lock for its whole
 * life and records "pid PID host HOST" in it. The kernel releases the lock when the
 * process ends, however it ends, so a kill -9 never leaves a stale lock. The file is
 * never removed (removing it would let a waiting process lock a file no longer in the
 * directory while a third locks a new one). A second process gets an error naming the
 * holder's PID and host. On a file system where flock is not supported (the call fails
 * with ENOLCK or EOPNOTSUPP, as on NFS mounted without lock support) the run goes on
 * unlocked after a warning; where NFS locks are local to each client (mounted with
 * `nolock`), the lock excludes only processes on the same machine.
 *
 * Contents. A directory holds
 *   nothing    it does not exist, or none of the files a run writes are there
 *   leftovers  files of a run killed before its first complete checkpoint pair (no
 *              `latest`): nothing to resume, so a new run may start there
 *   a run      a checkpoint to resume (`latest`, or the older layout's last.safetensors +
 *              last.state.safetensors): a new run there would destroy it
 */
#ifndef VT_RUNDIR_H
#define VT_RUNDIR_H

#include <stddef.h>

#include "status.h"

typedef struct {
    int fd;                  /* the locked DIR/lock; -1: not held */
} vt_rundir_lock;

/* Lock dir (which exists) for this process. Errors: VT_ERR_RUNTIME naming dir and the
 * holder ("PID 1234 on host n1") when another process holds it, or what failed. */
vt_status vt_rundir_lock_take(vt_rundir_lock *lk, const char *dir);
/* Release (fd -1: nothing to do). */
void vt_rundir_lock_release(vt_rundir_lock *lk);

typedef enum { VT_RUNDIR_NOTHING, VT_RUNDIR_LEFTOVERS, VT_RUNDIR_RUN } vt_rundir_holds;

/* What dir holds (above). what (len > 0) receives a list of the run files found, for
 * messages ("checkpoint pairs up to step 128 (latest), metrics.jsonl, config.json"). */
vt_rundir_holds vt_rundir_inspect(const char *dir, char *what, size_t len);

/* Rename dir to the first free "DIR.old-N" (N = 1, 2, ...), whose name moved_to
 * receives, and create dir anew, empty. Nothing is deleted. */
vt_status vt_rundir_move_aside(const char *dir, char *moved_to, size_t len);

/* Where a file that path named inside dir went when runs were moved aside: 1 if path does
 * not exist, its directory is dir and the newest DIR.old-N holding its name has it (that
 * copy's path into copy), else 0. A run started over with --start-over and a train.init
 * inside the directory read that file before the move; a later start of the same command
 * (over what a kill left before the first pair) finds it here. */
int vt_rundir_moved_copy(const char *dir, const char *path, char *copy, size_t len);

#endif
