/* durable.h - the one way files of a run directory are written: whole files replaced
 * atomically and durably, append-only logs, and the single file operations the
 * checkpoint protocol (checkpoint.h) is made of.
 *
 * Owns: the temporary-file, fsync, rename and directory-fsync sequence, and the
 * fault-injection hooks of every file operation. Does not own what the files hold
 * (safetensors.c, npz.c, train.c) nor which files a run keeps (checkpoint.c).
 *
 * A whole file PATH is written to PATH.tmp, fsynced, closed, renamed over PATH, and the
 * directory is fsynced, so the rename itself survives a power cut: a crash leaves the old
 * PATH or the new one, never a half-written one. The temporary file is created with
 * O_EXCL | O_NOFOLLOW after removing any leftover of that name (a killed writer's file,
 * or a symbolic link planted there: unlink removes the link, never its target), so a
 * write never goes through a link to a file elsewhere.
 * An append-only log (metrics.jsonl) is opened with O_APPEND | O_NOFOLLOW and written
 * line by line; vt_durable_log_sync makes what it holds durable.
 *
 * Errors are VT_ERR_RUNTIME with a message naming the file, the step that failed and
 * strerror ("No space left on device").
 *
 * Fault injection (tests only). Built with -DVT_FAULT_INJECTION, every operation of this
 * file (create, write, fsync, close, rename, link, unlink, directory fsync) is an event
 * numbered from 1 in process order, and the environment controls them:
 *   VT_FAULT_TRACE=FILE      append "N op path" per event to FILE
 *   VT_FAULT_KILL_AT=N       SIGKILL the process just before event N
 *   VT_FAULT_ENOSPC_AT=N     event N fails with ENOSPC instead of running
 *   VT_FAULT_NO_LINK=1       every link fails with EXDEV, as on a file system without
 *                            hard links
 * Cleanup after a failure (removing a temporary file) is not an event. The normal build
 * has none of this (tests/e2e_checkpoint_faults.c uses it).
 */
#ifndef VT_DURABLE_H
#define VT_DURABLE_H

#include <stddef.h>

#include "status.h"

/* An open PATH.tmp that becomes PATH on commit or disappears on abort. */
typedef struct {
    const char *path;
    char *tmp;
    int fd;
    int renamed;         /* commit got as far as the rename: PATH is the new file */
} vt_durable_file;

/* Create PATH.tmp (path must outlive f). On error nothing is left. */
vt_status vt_durable_open(vt_durable_file *f, const char *path);
/* Append bytes to the temporary file; on error it is removed (no abort needed). */
vt_status vt_durable_write(vt_durable_file *f, const void *data, size_t bytes);
/* fsync, close, rename over PATH, fsync the directory. A failure before the rename
 * removes the temporary file and leaves PATH as it was (f->renamed == 0); one after it
 * leaves the new PATH in place (f->renamed == 1). */
vt_status vt_durable_commit(vt_durable_file *f);
/* Drop the temporary file; PATH (if any) is untouched. */
void vt_durable_abort(vt_durable_file *f);
/* The whole sequence for one buffer. */
vt_status vt_durable_write_file(const char *path, const void *data, size_t bytes);

/* An append-only log: opened (created if missing) for appending, or truncated to empty
 * first with truncate = 1; an error if path is a symbolic link or not a regular file. */
typedef struct {
    char path[4096];
    int fd;
} vt_durable_log;

vt_status vt_durable_log_open(vt_durable_log *log, const char *path, int truncate);
/* Append bytes (a whole line) to the log. */
vt_status vt_durable_log_write(vt_durable_log *log, const void *data, size_t bytes);
/* fsync what the log holds. */
vt_status vt_durable_log_sync(vt_durable_log *log);
/* Close (fd -1: nothing to do). */
void vt_durable_log_close(vt_durable_log *log);

/* A small file rewritten in place, never replaced (the run directory's lock, whose
 * inode carries the flock): opened read-write, created if missing, never through a
 * symbolic link, and only if it is a regular file (a FIFO there never blocks the open).
 * Returns the descriptor, or -1 with errno (ELOOP: a link; EINVAL: not a regular file). */
int vt_durable_open_in_place(const char *path);
/* Replace the contents of the file open at fd (named path, for messages) with data and
 * fsync it. */
vt_status vt_durable_rewrite_in_place(int fd, const char *path, const void *data, size_t bytes);

/* The single operations the checkpoint protocol is made of: each is one fault event and
 * returns 0, or -1 with errno. */
int vt_durable_link(const char *from, const char *to);   /* hard link (EXDEV etc. where none) */
int vt_durable_rename(const char *from, const char *to);
int vt_durable_unlink(const char *path);
int vt_durable_fsync_dir(const char *dir);
/* Copy src to the new file dst (created with O_EXCL | O_NOFOLLOW, fsynced; no directory
 * fsync): a file system without hard links gets a copy where a link was asked for. On
 * error dst is removed. */
vt_status vt_durable_copy(const char *src, const char *dst);

#endif
