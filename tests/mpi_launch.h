/* mpi_launch.h - helpers of the end-to-end tests that launch ranks with Open MPI's
 * mpirun (header-only): the mpirun command prefix, a monotonic clock, and the PID of a
 * rank among mpirun's children.
 */
#ifndef VT_MPI_LAUNCH_H
#define VT_MPI_LAUNCH_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* "mpirun -np N --oversubscribe [--allow-run-as-root] EXTRA" */
static inline const char *mpirun(int np, const char *extra) {
    static char buf[8][256];
    static int k = 0;
    char *b = buf[k++ % 8];
    snprintf(b, 256, "mpirun -np %d --oversubscribe%s %s", np, geteuid() == 0 ? " --allow-run-as-root" : "",
             extra ? extra : "");
    return b;
}

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A /proc file (size 0 to stat and ftell) read to its end; NUL-terminated, length in *len. */
static inline char *read_proc(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap + 1);
    for (size_t got; (got = fread(b + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) b = realloc(b, (cap *= 2) + 1);
    }
    fclose(f);
    b[n] = '\0';
    if (len) *len = n;
    return b;
}

/* PID of the child of `parent` whose environment has OMPI_COMM_WORLD_RANK=rank, or -1. */
static inline pid_t rank_pid(pid_t parent, int rank) {
    DIR *d = opendir("/proc");
    pid_t found = -1;
    char want[64];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    for (struct dirent *e; d && found < 0 && (e = readdir(d));) {
        pid_t pid = (pid_t)atoi(e->d_name);
        if (pid <= 0) continue;
        char p[64];
        snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
        char *st = read_proc(p, NULL);
        const char *rp = st ? strrchr(st, ')') : NULL;
        int ppid = -1;
        if (rp) sscanf(rp + 2, "%*c %d", &ppid);
        free(st);
        if (ppid != parent) continue;
        snprintf(p, sizeof p, "/proc/%d/environ", (int)pid);
        size_t len = 0;
        char *env = read_proc(p, &len);
        for (size_t o = 0; env && o < len; o += strlen(env + o) + 1)
            if (!strcmp(env + o, want)) found = pid;
        free(env);
    }
    if (d) closedir(d);
    return found;
}

#endif
