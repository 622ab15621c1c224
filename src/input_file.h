/* input_file.h - opening the files vitrain reads (configs, checkpoints, `latest`, class
 * lists, dataset files, images) without trusting what the path names.
 *
 * A path is opened non-blocking and checked with fstat to be a regular file before
 * anything can wait on it or read from it: a FIFO, a device such as /dev/zero, a socket
 * or a directory is an error naming the path and what it is, never a hang in open() or a
 * read that grows without end. The size fstat reports then bounds every read: no buffer
 * is larger than the file (or than the caller's limit).
 *
 * Owns: that check and the whole-file read. Does not own: what the bytes mean, nor
 * whether a missing file is an error (callers test for ENOENT through errno when they
 * have a fallback).
 */
#ifndef VT_INPUT_FILE_H
#define VT_INPUT_FILE_H

#include "status.h"

#include <stddef.h>
#include <stdint.h>

/* Open the regular file at path for reading: *fd (blocking, close-on-exec) and *size in
 * bytes. `what` names the file's role in messages ("config file", "data.class_list").
 * On failure nothing is left open; errno keeps the open() error (ENOENT: no such file). */
vt_status vt_input_open(const char *path, const char *what, int *fd, int64_t *size);

/* The size of the regular file at path (vt_input_open, then close): for callers that
 * check sizes before they read. */
vt_status vt_input_size(const char *path, const char *what, int64_t *size);

/* Read the whole regular file at path, at most max_bytes bytes (a larger file is an
 * error naming both sizes), into *data (malloc'd, NUL-terminated; *len bytes before the
 * terminator). */
vt_status vt_input_read(const char *path, const char *what, int64_t max_bytes, char **data,
                        size_t *len);

#endif
