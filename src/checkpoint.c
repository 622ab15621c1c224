/* checkpoint.c - the crash-consistent checkpoint pairs of a run directory and the
 * `latest` pointer (contract and protocol in checkpoint.h).
 *
 * Owns: the names of a run's checkpoint files, the pair/pointer protocol, which pairs
 * are kept. Does not own: how a file is written durably (durable.c), the safetensors
 * format (safetensors.c), what a pair holds (vit.c, train_state.c), when a run saves
 * (train.c).
 */
#include "checkpoint.h"
#include "durable.h"
#include "input_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ checkpoint pairs */

#define CKPT_PREFIX "step_"
#define CKPT_WEIGHTS ".safetensors"
#define CKPT_STATE ".state.safetensors"
#define CKPT_POINTER "latest"
#define CKPT_LAST "last.safetensors"
#define CKPT_LEGACY_STATE "last.state.safetensors"

static void path_join(char *out, size_t len, const char *dir, const char *name) {
    int n = snprintf(out, len, "%s/%s", dir, name);
    VT_ASSERT(n > 0 && (size_t)n < len, "checkpoint path '%s/%s' too long", dir, name);
}

void vt_ckpt_pair_of(const char *dir, int64_t step, vt_ckpt_pair *p) {
    VT_ASSERT(step >= 0, "checkpoint step %lld", (long long)step);
    char name[64];
    p->step = step;
    snprintf(name, sizeof name, CKPT_PREFIX "%08lld" CKPT_WEIGHTS, (long long)step);
    path_join(p->weights, sizeof p->weights, dir, name);
    snprintf(name, sizeof name, CKPT_PREFIX "%08lld" CKPT_STATE, (long long)step);
    path_join(p->state, sizeof p->state, dir, name);
}

void vt_ckpt_discard(const vt_ckpt_pair *p) {
    unlink(p->state);
    unlink(p->weights);
}

/* Step of a pair file name "step_<digits><suffix>[.tmp]" with suffix CKPT_WEIGHTS or
 * CKPT_STATE: *state = 1 for the state file, *tmp = 1 for a temporary; -1 if the name is
 * not one of ours. */
static int64_t parse_pair_name(const char *name, int *state, int *tmp) {
    if (strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) != 0) return -1;
    const char *p = name + strlen(CKPT_PREFIX), *q = p;
    int64_t step = 0;
    while (*q >= '0' && *q <= '9') {
        if (step > (INT64_MAX - 9) / 10) return -1;
        step = step * 10 + (*q++ - '0');
    }
    if (q - p < 8) return -1;
    *tmp = 0;
    size_t rest = strlen(q);
    if (rest > 4 && strcmp(q + rest - 4, ".tmp") == 0) {
        *tmp = 1;
        rest -= 4;
    }
    if (rest == strlen(CKPT_STATE) && strncmp(q, CKPT_STATE, rest) == 0) *state = 1;
    else if (rest == strlen(CKPT_WEIGHTS) && strncmp(q, CKPT_WEIGHTS, rest) == 0) *state = 0;
    else return -1;
    return step;
}

typedef struct {
    int64_t step;
    int has_weights, has_state;
} pair_files;

static int pair_cmp_desc(const void *a, const void *b) {
    const pair_files *x = a, *y = b;
    return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

/* Step 5 of the protocol: remove pairs other than the newest `keep` complete ones up to
 * `current`, pairs newer than it, incomplete pairs and leftover temporary files. */
static vt_status prune(const char *dir, int64_t current, int keep) {
    DIR *d = opendir(dir);
    if (!d) return vt_fail(VT_ERR_RUNTIME, "%s: cannot list the run directory to remove old "
                           "checkpoints: %s", dir, strerror(errno));
    pair_files *pairs = NULL;
    int n = 0, cap = 0, removed = 0;
    vt_status s = VT_OK;
    char path[VT_CKPT_PATH];
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int state = 0, tmp = 0;
        int64_t step = parse_pair_name(e->d_name, &state, &tmp);
        int other_tmp = strcmp(e->d_name, CKPT_POINTER ".tmp") == 0 ||
                        strcmp(e->d_name, CKPT_LAST ".tmp") == 0;
        /* The older layout's state file is superseded once `latest` exists. */
        int legacy = strcmp(e->d_name, CKPT_LEGACY_STATE) == 0;
        /* A killed save's leftover, never part of a pair: a failure to remove it is
         * harmless (the next tidy tries again), so it is not an error. */
        if (tmp || other_tmp || legacy) {
            path_join(path, sizeof path, dir, e->d_name);
            if (vt_durable_unlink(path) == 0) removed++;
            continue;
        }
        if (step < 0) continue;
        int k = 0;
        while (k < n && pairs[k].step != step) k++;
        if (k == n) {
            if (n == cap) {
                cap = cap ? 2 * cap : 16;
                pairs = vt_xrealloc(pairs, (size_t)cap * sizeof *pairs);
            }
            pairs[n++] = (pair_files){step, 0, 0};
        }
        if (state) pairs[k].has_state = 1;
        else pairs[k].has_weights = 1;
    }
    closedir(d);
    qsort(pairs, (size_t)n, sizeof *pairs, pair_cmp_desc);
    int kept = 0;
    for (int k = 0; k < n && s == VT_OK; k++) {
        pair_files *p = &pairs[k];
        int complete = p->has_weights && p->has_state;
        if (p->step == current || (p->step < current && complete && kept < keep)) {
            kept++;
            continue;
        }
        vt_ckpt_pair pp;
        vt_ckpt_pair_of(dir, p->step, &pp);
        if (p->has_state && vt_durable_unlink(pp.state) != 0 && errno != ENOENT)
            s = vt_fail(VT_ERR_RUNTIME, "%s: cannot remove an old checkpoint: %s", pp.state,
                        strerror(errno));
        else if (p->has_weights && vt_durable_unlink(pp.weights) != 0 && errno != ENOENT)
            s = vt_fail(VT_ERR_RUNTIME, "%s: cannot remove an old checkpoint: %s", pp.weights,
                        strerror(errno));
        removed++;
    }
    free(pairs);
    if (s == VT_OK && removed && vt_durable_fsync_dir(dir) != 0)
        s = vt_fail(VT_ERR_RUNTIME, "%s: fsync of the run directory failed: %s", dir,
                    strerror(errno));
    return s;
}

/* Step 4: last.safetensors becomes (a link to) the current weights. When it already is
 * that file (a resume's tidy), rename(2) of one hard link over another of the same file
 * does nothing and leaves the .tmp name, which prune removes. */
static vt_status relink_last(const char *dir, const char *weights) {
    char last[VT_CKPT_PATH], tmp[VT_CKPT_PATH];
    path_join(last, sizeof last, dir, CKPT_LAST);
    path_join(tmp, sizeof tmp, dir, CKPT_LAST ".tmp");
    unlink(tmp);
    vt_status s = VT_OK;
    if (vt_durable_link(weights, tmp) != 0) {
        if (errno == EPERM || errno == EXDEV || errno == EMLINK || errno == EOPNOTSUPP)
            s = vt_durable_copy(weights, tmp);
        else
            s = vt_fail(VT_ERR_RUNTIME, "%s: cannot link it to %s: %s", weights, tmp,
                        strerror(errno));
    }
    if (s == VT_OK && vt_durable_rename(tmp, last) != 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: renaming '%s' over it failed: %s", last, tmp,
                    strerror(errno));
        unlink(tmp);
    }
    if (s == VT_OK && vt_durable_fsync_dir(dir) != 0)
        s = vt_fail(VT_ERR_RUNTIME, "%s: fsync of the run directory failed: %s", dir,
                    strerror(errno));
    return s;
}

vt_status vt_ckpt_tidy(const char *dir, const vt_ckpt_pair *p, int keep) {
    VT_ASSERT(p->step >= 0 && keep >= 1, "tidy of pair %lld, keep %d", (long long)p->step, keep);
    vt_status s = relink_last(dir, p->weights);
    vt_status s2 = prune(dir, p->step, keep);
    return s != VT_OK ? s : s2;
}

vt_status vt_ckpt_publish(const char *dir, const vt_ckpt_pair *p, int keep, int *committed) {
    VT_ASSERT(keep >= 1, "keep_checkpoints %d", keep);
    if (committed) *committed = 0;
    char pointer[VT_CKPT_PATH], line[64];
    path_join(pointer, sizeof pointer, dir, CKPT_POINTER);
    int len = snprintf(line, sizeof line, CKPT_PREFIX "%08lld\n", (long long)p->step);
    vt_durable_file a;
    vt_status s = vt_durable_open(&a, pointer);
    if (s == VT_OK) s = vt_durable_write(&a, line, (size_t)len);
    if (s == VT_OK) s = vt_durable_commit(&a);
    if (s != VT_OK && !a.renamed) { /* before the commit point: the previous pair stays */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vt_last_error());
        vt_ckpt_discard(p);
        return vt_fail(s, "%s", msg);
    }
    if (committed) *committed = 1;
    vt_status s2 = vt_ckpt_tidy(dir, p, keep);
    return s != VT_OK ? s : s2;
}

/* Anything at path counts: a FIFO or directory in a pair's place is reported by the
 * reader (vt_st_read) as what it is, not as a missing file. */
static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

vt_status vt_ckpt_current(const char *dir, vt_ckpt_pair *p) {
    char pointer[VT_CKPT_PATH];
    path_join(pointer, sizeof pointer, dir, CKPT_POINTER);
    char *buf = NULL;
    size_t len = 0;
    vt_status read = vt_input_read(pointer, "checkpoint pointer", 64, &buf, &len);
    if (read != VT_OK && errno == ENOENT) {
        /* The older layout: one pair under fixed names. */
        memset(p, 0, sizeof *p);
        p->step = -1;
        path_join(p->weights, sizeof p->weights, dir, CKPT_LAST);
        path_join(p->state, sizeof p->state, dir, CKPT_LEGACY_STATE);
        if (exists(p->weights) && exists(p->state)) return VT_OK;
        return vt_fail(VT_ERR_USAGE, "%s holds no checkpoint to resume from: expected %s (written "
                       "with the first checkpoint pair, see train.ckpt_every); a run killed "
                       "before its first checkpoint must start again", dir, pointer);
    }
    if (read != VT_OK) return read;
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        buf[--len] = '\0';
    char name[96];
    snprintf(name, sizeof name, "%s" CKPT_WEIGHTS, buf);
    int state = 0, tmp = 0;
    int64_t step = memchr(buf, '/', len) ? -1 : parse_pair_name(name, &state, &tmp);
    vt_status s = VT_OK;
    if (step < 0 || tmp || state || strlen(buf) != len)
        s = vt_fail(VT_ERR_RUNTIME, "%s: expected one line \"step_<8 or more digits>\" naming the "
                    "newest checkpoint pair, found \"%.40s\"", pointer, buf);
    if (s == VT_OK) {
        vt_ckpt_pair_of(dir, step, p);
        const char *missing = !exists(p->weights) ? p->weights : !exists(p->state) ? p->state
                                                                                   : NULL;
        if (missing)
            s = vt_fail(VT_ERR_RUNTIME, "%s names %s, but %s is missing (files were removed or "
                        "copied without it)", pointer, buf, missing);
    }
    free(buf);
    return s;
}
