/* durable.c - atomic whole-file writes, append-only logs and the fault-injectable file
 * operations of a run directory (contract in durable.h). */
#include "durable.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ fault injection */

#ifdef VT_FAULT_INJECTION
static long fault_count;

/* Record event `op` on `path`; kill the process before it, or return the errno it
 * must fail with (0: run it), as the environment asks. */
static int fault_event(const char *op, const char *path) {
    long n = ++fault_count;
    const char *trace = getenv("VT_FAULT_TRACE");
    if (trace && *trace) {
        FILE *f = fopen(trace, "a");
        if (f) {
            fprintf(f, "%ld %s %s\n", n, op, path);
            fclose(f);
        }
    }
    const char *kill_at = getenv("VT_FAULT_KILL_AT");
    if (kill_at && atol(kill_at) == n) raise(SIGKILL);
    const char *nospc = getenv("VT_FAULT_ENOSPC_AT");
    if (nospc && atol(nospc) == n) return ENOSPC;
    return 0;
}
#else
static inline int fault_event(const char *op, const char *path) {
    (void)op;
    (void)path;
    return 0;
}
#endif

#define FAULT(op, path)                   \
    do {                                  \
        int e_ = fault_event(op, path);   \
        if (e_) { errno = e_; return -1; } \
    } while (0)

/* ------------------------------------------------------------ single operations */

/* A new file at path, never through a symbolic link: a leftover of that name (a killed
 * writer's temporary file, or a planted link) is removed first; if something appears
 * there again before the create, the create fails with EEXIST. */
static int fs_create(const char *path) {
    FAULT("create", path);
    const int how = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path, how, 0666);
    if (fd < 0 && errno == EEXIST && unlink(path) == 0) fd = open(path, how, 0666);
    return fd;
}

/* All n bytes, retrying short writes; -1 with errno on failure. */
static int fs_write(int fd, const void *data, size_t n, const char *path) {
    FAULT("write", path);
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) { errno = EIO; return -1; }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fs_fsync(int fd, const char *path) {
    FAULT("fsync", path);
    return fsync(fd);
}

static int fs_close(int fd, const char *path) {
    int e = fault_event("close", path);
    int rc = close(fd);
    if (e) { errno = e; return -1; }
    return rc;
}

int vt_durable_rename(const char *from, const char *to) {
    FAULT("rename", to);
    return rename(from, to);
}

int vt_durable_link(const char *from, const char *to) {
    FAULT("link", to);
#ifdef VT_FAULT_INJECTION
    const char *no_link = getenv("VT_FAULT_NO_LINK");
    if (no_link && strcmp(no_link, "1") == 0) { /* a file system without hard links */
        errno = EXDEV;
        return -1;
    }
#endif
    return link(from, to);
}

int vt_durable_unlink(const char *path) {
    FAULT("unlink", path);
    return unlink(path);
}

int vt_durable_fsync_dir(const char *dir) {
    FAULT("fsync-dir", dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* Open an existing or new file that must be a regular one: O_NONBLOCK, so a FIFO or a
 * device at path never blocks the open, then fstat. -1 with errno (EINVAL for a file
 * that is not regular). */
static int open_regular(const char *path, int flags) {
    int fd = open(path, flags | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == ENXIO) errno = EINVAL; /* a FIFO without a reader */
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

/* The directory part of path ("." when it has none) into out. */
static void dir_of(const char *path, char *out, size_t len) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, len, ".");
    else if (slash == path) snprintf(out, len, "/");
    else snprintf(out, len, "%.*s", (int)(slash - path), path);
}

/* ---------------------------------------------------------------- whole files */

vt_status vt_durable_open(vt_durable_file *f, const char *path) {
    size_t len = strlen(path);
    f->path = path;
    f->renamed = 0;
    f->tmp = vt_xmalloc(len + 5);
    memcpy(f->tmp, path, len);
    memcpy(f->tmp + len, ".tmp", 5);
    f->fd = fs_create(f->tmp);
    if (f->fd < 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: cannot create temporary file '%s': %s",
                              path, f->tmp, strerror(errno));
        free(f->tmp);
        f->tmp = NULL;
        return s;
    }
    return VT_OK;
}

void vt_durable_abort(vt_durable_file *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    f->tmp = NULL;
}

vt_status vt_durable_write(vt_durable_file *f, const void *data, size_t bytes) {
    if (bytes && fs_write(f->fd, data, bytes, f->tmp) != 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: write of %zu bytes to '%s' failed: %s",
                              f->path, bytes, f->tmp, strerror(errno));
        vt_durable_abort(f);
        return s;
    }
    return VT_OK;
}

vt_status vt_durable_commit(vt_durable_file *f) {
    const char *step = NULL;
    if (fs_fsync(f->fd, f->tmp) != 0) step = "fsync";
    int fd = f->fd;
    f->fd = -1;
    if (!step && fs_close(fd, f->tmp) != 0) step = "closing";
    else if (step) close(fd);
    if (!step && vt_durable_rename(f->tmp, f->path) != 0) step = "renaming";
    if (step) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: %s '%s' failed: %s", f->path, step, f->tmp,
                              strerror(errno));
        vt_durable_abort(f);
        return s;
    }
    f->renamed = 1;
    free(f->tmp);
    f->tmp = NULL;
    char dir[4096];
    dir_of(f->path, dir, sizeof dir);
    if (vt_durable_fsync_dir(dir) != 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: fsync of directory '%s' after the rename failed: %s",
                       f->path, dir, strerror(errno));
    return VT_OK;
}

vt_status vt_durable_write_file(const char *path, const void *data, size_t bytes) {
    vt_durable_file f;
    vt_status s = vt_durable_open(&f, path);
    if (s == VT_OK) s = vt_durable_write(&f, data, bytes);
    if (s == VT_OK) s = vt_durable_commit(&f);
    return s;
}

vt_status vt_durable_copy(const char *src, const char *dst) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open: %s", src, strerror(errno));
    int out = fs_create(dst);
    if (out < 0) {
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: cannot create: %s", dst, strerror(errno));
        close(in);
        return s;
    }
    static char buf[1 << 16];
    vt_status s = VT_OK;
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            s = vt_fail(VT_ERR_RUNTIME, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        if (r == 0) break;
        if (fs_write(out, buf, (size_t)r, dst) != 0) {
            s = vt_fail(VT_ERR_RUNTIME, "%s: write failed: %s", dst, strerror(errno));
            break;
        }
    }
    close(in);
    if (s == VT_OK && fs_fsync(out, dst) != 0)
        s = vt_fail(VT_ERR_RUNTIME, "%s: fsync failed: %s", dst, strerror(errno));
    if (fs_close(out, dst) != 0 && s == VT_OK)
        s = vt_fail(VT_ERR_RUNTIME, "%s: close failed: %s", dst, strerror(errno));
    if (s != VT_OK) unlink(dst);
    return s;
}

/* ---------------------------------------------------------------- append-only logs */

vt_status vt_durable_log_open(vt_durable_log *log, const char *path, int truncate) {
    snprintf(log->path, sizeof log->path, "%s", path);
    log->fd = -1;
    int e = fault_event("create", path);
    int fd = e ? -1 : open_regular(path, O_WRONLY | O_CREAT | O_APPEND | (truncate ? O_TRUNC : 0));
    if (e) errno = e;
    if (fd < 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: cannot open for appending: %s", path,
                       errno == ELOOP ? "it is a symbolic link" : errno == EINVAL ?
                       "not a regular file" : strerror(errno));
    log->fd = fd;
    return VT_OK;
}

vt_status vt_durable_log_write(vt_durable_log *log, const void *data, size_t bytes) {
    if (fs_write(log->fd, data, bytes, log->path) != 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: appending %zu bytes failed: %s", log->path, bytes,
                       strerror(errno));
    return VT_OK;
}

vt_status vt_durable_log_sync(vt_durable_log *log) {
    if (fs_fsync(log->fd, log->path) != 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: fsync failed: %s", log->path, strerror(errno));
    return VT_OK;
}

void vt_durable_log_close(vt_durable_log *log) {
    if (log->fd >= 0) close(log->fd);
    log->fd = -1;
}

/* ---------------------------------------------------------------- files rewritten in place */

int vt_durable_open_in_place(const char *path) {
    FAULT("create", path);
    return open_regular(path, O_RDWR | O_CREAT);
}

vt_status vt_durable_rewrite_in_place(int fd, const char *path, const void *data, size_t bytes) {
    const char *step = NULL;
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) step = "truncating";
    else if (fs_write(fd, data, bytes, path) != 0) step = "writing";
    else if (fs_fsync(fd, path) != 0) step = "fsync of";
    if (step) return vt_fail(VT_ERR_RUNTIME, "%s: %s it failed: %s", path, step, strerror(errno));
    return VT_OK;
}
