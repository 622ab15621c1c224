/* rundir.c - the run directory's lock, what it holds, moving an old run aside
 * (contract in rundir.h). */
#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "durable.h"

#define LOCK_NAME "lock"

/* The holder recorded in an open lock file: "PID 1234 on host n1" into out. */
static void read_holder(int fd, char *out, size_t len) {
    /* the holder writes its record just after it locks: give it up to 200 ms */
    for (int tries = 0; tries < 20; tries++) {
        char buf[256];
        ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        long pid = 0;
        char host[200] = "";
        if (n > 0 && buf[n - 1] == '\n' && sscanf(buf, "pid %ld host %199s", &pid, host) == 2) {
            snprintf(out, len, "PID %ld on host %s", pid, host);
            return;
        }
        usleep(10000);
    }
    snprintf(out, len, "a process that has not recorded its PID yet");
}

vt_status vt_rundir_lock_take(vt_rundir_lock *lk, const char *dir) {
    lk->fd = -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/" LOCK_NAME, dir);
    /* Until the file locked is the one the directory names now (a run moved aside
     * between the open and the flock leaves the old file behind its new name). */
    for (int tries = 0; tries < 8; tries++) {
        int fd = vt_durable_open_in_place(path);
        if (fd < 0)
            return vt_fail(VT_ERR_RUNTIME, "%s: cannot open the run directory's lock file: %s",
                           path, vt_durable_open_error(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int e = errno;
            if (e == EWOULDBLOCK) {
                char holder[256];
                read_holder(fd, holder, sizeof holder);
                close(fd);
                return vt_fail(VT_ERR_RUNTIME, "%s is in use by another vitrain process (%s): "
                               "a run directory has one owner at a time; wait for that run to "
                               "end, or use another --run-dir", dir, holder);
            }
            close(fd);
            if (e == ENOLCK || e == EOPNOTSUPP || e == ENOSYS) {
                fprintf(stderr, "vitrain: warning: %s: the file system does not support locks "
                        "(%s); nothing stops a second process from writing this run directory\n",
                        path, strerror(e));
                return VT_OK;
            }
            return vt_fail(VT_ERR_RUNTIME, "%s: cannot lock: %s", path, strerror(e));
        }
        struct stat held, named;
        if (fstat(fd, &held) == 0 && stat(path, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino) {
            char host[200] = "unknown", rec[300];
            gethostname(host, sizeof host - 1);
            host[sizeof host - 1] = '\0';
            int n = snprintf(rec, sizeof rec, "pid %ld host %s\n", (long)getpid(), host);
            vt_status s = vt_durable_rewrite_in_place(fd, path, rec, (size_t)n);
            if (s != VT_OK) {
                close(fd);
                return s;
            }
            lk->fd = fd;
            return VT_OK;
        }
        close(fd);
    }
    return vt_fail(VT_ERR_RUNTIME, "%s: the lock file keeps being replaced while it is locked "
                   "(another process is moving the run directory)", path);
}

void vt_rundir_lock_release(vt_rundir_lock *lk) {
    if (lk->fd >= 0) close(lk->fd); /* closing the last descriptor releases the flock */
    lk->fd = -1;
}

/* Whether name is one of the files a run writes (besides its lock). */
static int is_run_file(const char *name) {
    static const char *const names[] = {"config.json", "metrics.jsonl", "best.safetensors",
                                        "last.safetensors", "latest", "latest.tmp", "gemm_blocking.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0) return 1;
    return strncmp(name, "step_", 5) == 0 || strncmp(name, "last.", 5) == 0 ||
           strncmp(name, "config.json.", 12) == 0 || strncmp(name, "metrics.jsonl.", 14) == 0 ||
           strncmp(name, "best.safetensors.", 17) == 0;
}

static void append(char *out, size_t len, const char *fmt, const char *s) {
    size_t at = strlen(out);
    if (at < len) snprintf(out + at, len - at, fmt, s);
}

vt_rundir_holds vt_rundir_inspect(const char *dir, char *what, size_t len) {
    if (what && len) what[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return VT_RUNDIR_NOTHING;
    int any = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) any |= is_run_file(e->d_name);
    closedir(d);
    vt_ckpt_pair p;
    char why[512] = "";
    vt_status s = vt_ckpt_current(dir, &p);
    if (s == VT_ERR_RUNTIME) snprintf(why, sizeof why, "%s", vt_last_error());
    vt_clear_error();
    int run = s != VT_ERR_USAGE;
    if (what && len) {
        if (s == VT_OK && p.step >= 0) {
            char step[64];
            snprintf(step, sizeof step, "%lld", (long long)p.step);
            append(what, len, "the checkpoint of step %s that `latest` names", step);
        } else if (s == VT_OK) {
            append(what, len, "%s", "a checkpoint (last.safetensors + last.state.safetensors)");
        } else if (run) {
            append(what, len, "a `latest` that does not resolve (%s)", why);
        }
        static const char *const shown[] = {"metrics.jsonl", "best.safetensors", "config.json"};
        for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", dir, shown[i]);
            if (access(path, F_OK) == 0) append(what, len, what[0] ? ", %s" : "%s", shown[i]);
        }
    }
    return run ? VT_RUNDIR_RUN : any ? VT_RUNDIR_LEFTOVERS : VT_RUNDIR_NOTHING;
}

vt_status vt_rundir_move_aside(const char *dir, char *moved_to, size_t len) {
    char to[4200];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--; /* "runs/a/" moves to "runs/a.old-1" */
    for (int k = 1; k < 100000; k++) {
        snprintf(to, sizeof to, "%.*s.old-%d", (int)n, dir, k);
        struct stat sb;
        if (lstat(to, &sb) == 0) continue;
        /* rename(2) would replace an empty directory created meanwhile: no-replace, or,
         * where the file system lacks it, the check just made */
        int rc = renameat2(AT_FDCWD, dir, AT_FDCWD, to, RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) rc = rename(dir, to);
        if (rc == 0) {
            snprintf(moved_to, len, "%s", to);
            if (mkdir(dir, 0777) != 0)
                return vt_fail(VT_ERR_RUNTIME, "moved the old run %s to %s, but cannot create "
                               "%s anew: %s", dir, to, dir, strerror(errno));
            return VT_OK;
        }
        if (errno != EEXIST)
            return vt_fail(VT_ERR_RUNTIME, "cannot move the old run %s aside to %s: %s", dir, to,
                           strerror(errno));
    }
    return vt_fail(VT_ERR_RUNTIME, "cannot move the old run %s aside: %.*s.old-1 ... -99999 all "
                   "exist", dir, (int)n, dir);
}

int vt_rundir_moved_copy(const char *dir, const char *path, char *copy, size_t len) {
    struct stat sb;
    if (stat(path, &sb) == 0 || errno != ENOENT) return 0;
    const char *slash = strrchr(path, '/');
    char parent[4200], a[PATH_MAX], b[PATH_MAX];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == path) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    if (!realpath(parent, a) || !realpath(dir, b) || strcmp(a, b) != 0) return 0;
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    int found = 0;
    for (int k = 1; k < 100000; k++) { /* move_aside takes the first free N: the newest is the last */
        char old[4200], cand[4400];
        snprintf(old, sizeof old, "%.*s.old-%d", (int)n, dir, k);
        if (lstat(old, &sb) != 0) break;
        snprintf(cand, sizeof cand, "%s/%s", old, slash ? slash + 1 : path);
        if (stat(cand, &sb) == 0 && S_ISREG(sb.st_mode)) {
            snprintf(copy, len, "%s", cand);
            found = 1;
        }
    }
    return found;
}
