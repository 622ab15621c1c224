/* input_file.c - non-blocking open, regular-file check and sized whole-file reads
 * (contract in input_file.h). */
#include "input_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* "a FIFO (named pipe)", ... : what a non-regular file is, for messages. */
static const char *file_type(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

vt_status vt_input_open(const char *path, const char *what, int *fd, int64_t *size) {
    *fd = -1;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting. */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: cannot open %s: %s", path, what, strerror(e));
        errno = e;
        return s;
    }
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        int e = errno;
        close(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: cannot stat %s: %s", path, what, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: the %s is %s, not a regular file", path, what,
                              file_type(sb.st_mode));
        errno = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL; /* not ENOENT: callers test for that */
        return s;
    }
    int flags = fcntl(f, F_GETFL);
    if (flags < 0 || fcntl(f, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(f);
        return vt_fail(VT_ERR_RUNTIME, "%s: cannot set %s blocking: %s", path, what, strerror(e));
    }
    *fd = f;
    *size = (int64_t)sb.st_size;
    return VT_OK;
}

vt_status vt_input_size(const char *path, const char *what, int64_t *size) {
    int fd;
    vt_status s = vt_input_open(path, what, &fd, size);
    if (s == VT_OK) close(fd);
    return s;
}

vt_status vt_input_read(const char *path, const char *what, int64_t max_bytes, char **data,
                        size_t *len) {
    *data = NULL;
    *len = 0;
    int fd;
    int64_t size;
    vt_status s = vt_input_open(path, what, &fd, &size);
    if (s != VT_OK) return s;
    if (size > max_bytes) {
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: the %s has %lld bytes, more than the %lld a %s may "
                       "have", path, what, (long long)size, (long long)max_bytes, what);
    }
    char *buf = malloc((size_t)size + 1);
    if (!buf) {
        close(fd);
        return vt_fail(VT_ERR_RUNTIME, "%s: out of memory for the %lld-byte %s", path,
                       (long long)size, what);
    }
    size_t got = 0;
    while (got < (size_t)size) {
        ssize_t r = read(fd, buf + got, (size_t)size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            free(buf);
            return vt_fail(VT_ERR_RUNTIME, "%s: reading the %s failed after %zu of %lld bytes: %s",
                           path, what, got, (long long)size, e ? strerror(e) : "the file shrank");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    *data = buf;
    *len = got;
    return VT_OK;
}
