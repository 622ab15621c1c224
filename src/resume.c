/* resume.c - the config a resumed run continues with (contract in resume.h). */
#include "resume.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "dist.h"
#include "resolve.h"

#define MAX_CHANGES 64
#define EXACT "the run continues exactly (an uninterrupted run's steps, bit for bit at the same thread count)"

/* A longer run of the same kind: train.epochs raised with train.steps 0 in both, or
 * train.steps raised. *what receives the schedule's meaning. */
static int longer_run(const vt_config *run, const vt_config *now, const char *key, char *what, size_t len) {
    int epochs = strcmp(key, "train.epochs") == 0;
    int ok = epochs ? run->train.steps == 0 && now->train.steps == 0 && now->train.epochs > run->train.epochs
                    : run->train.steps > 0 && now->train.steps > run->train.steps;
    if (!ok) return 0;
    long long a = epochs ? run->train.epochs : run->train.steps, b = epochs ? now->train.epochs : now->train.steps;
    const char *unit = epochs ? "epoch" : "step";
    if (run->optim.schedule == VT_SCHED_CONSTANT)
        snprintf(what, len, "the run is extended from %lld to %lld %ss; optim.schedule = constant, so every "
                 "step has the learning rate of an uninterrupted %lld-%s run", a, b, unit, b, unit);
    else
        snprintf(what, len, "the run is extended from %lld to %lld %ss; the cosine schedule is recomputed over "
                 "%lld %ss, so from the resumed step on the learning rate is the longer schedule's, higher "
                 "than the %lld-%s schedule had it (the steps before followed that one): the result "
                 "matches no uninterrupted run", a, b, unit, b, unit, a, unit);
    return 1;
}

/* Compare the given config with the run's: fail naming every difference that changes
 * what is computed, else log the allowed ones. src names the given config in messages,
 * how the option that resumes ("--resume", "--resume-or-start"). */
static vt_status compare(const vt_config *run, const vt_config *now, const char *dir, const char *src,
                         const char *how) {
    vt_config_change ch[MAX_CHANGES];
    int n = vt_config_changes(run, now, ch, MAX_CHANGES);
    if (n > MAX_CHANGES) n = MAX_CHANGES;
    char bad[4096] = "", what[512];
    int n_bad = 0;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const vt_config_change *c = &ch[i];
        if (!strcmp(c->key, "train.run_dir") || c->run_only || longer_run(run, now, c->key, what, sizeof what))
            continue; /* the run directory is dir; the others are allowed */
        if (used < sizeof bad)
            used += (size_t)snprintf(bad + used, sizeof bad - used, "%s%s: %s in the run, %s in %s",
                                     n_bad ? "; " : "", c->key, c->a, c->b, src);
        n_bad++;
    }
    if (n_bad)
        return vt_fail(VT_ERR_USAGE, "%s %s: %s differs from the run's config (%s/config.json) in %d "
                       "key%s that change%s what is computed: %s. A resumed run continues its own config: "
                       "`vitrain --resume %s` alone takes it (threads, logging, progress, checkpoint cadence "
                       "and a longer train.epochs or train.steps may differ); another recipe needs a new run "
                       "directory", how, dir, src, dir, n_bad, n_bad == 1 ? "" : "s", n_bad == 1 ? "s" : "", bad,
                       dir);
    int exact = 1;
    for (int i = 0; i < n; i++) exact &= ch[i].run_only;
    if (exact && vt_dist_root())
        fprintf(stderr, "vitrain: %s %s: %s agrees with the run's config (%s/config.json)%s; %s\n", how, dir, src,
                dir, n > 1 || (n == 1 && strcmp(ch[0].key, "train.run_dir")) ? " in what it computes" : "", EXACT);
    for (int i = 0; i < n && vt_dist_root(); i++) {
        const vt_config_change *c = &ch[i];
        if (!strcmp(c->key, "train.run_dir")) continue;
        if (c->run_only)
            fprintf(stderr, "vitrain: %s %s: %s: %s in the run, %s now (does not change what is "
                    "computed)\n", how, dir, c->key, c->a, c->b);
        else if (longer_run(run, now, c->key, what, sizeof what))
            fprintf(stderr, "vitrain: %s %s: %s: %s in the run, %s now: %s\n", how, dir, c->key, c->a, c->b, what);
    }
    return VT_OK;
}

/* The run's own config, dir/config.json (its path into path), resolved into *run;
 * errors name how and dir. */
static vt_status run_config(const char *dir, const char *how, vt_config *run, char *path, size_t len) {
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return vt_fail(VT_ERR_USAGE, "%s %s: no such run directory", how, dir);
    snprintf(path, len, "%s/config.json", dir);
    if (stat(path, &sb) != 0)
        return vt_fail(VT_ERR_USAGE, "%s %s: %s holds no checkpoint to resume from: %s does not exist "
                       "(not a run directory vitrain wrote, or its first start failed before writing it)", how,
                       dir, dir, path);
    vt_status st = vt_resolve_file(run, path, NULL, 0);
    return st == VT_OK ? VT_OK : vt_fail_context(st, "%s %s", how, dir);
}

vt_status vt_resume_check(const vt_config *cfg, const char *dir) {
    vt_config run;
    char path[VT_STR + 32];
    struct stat sb;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (stat(path, &sb) != 0) return VT_OK; /* nothing to compare: the resume reports what the directory lacks */
    vt_status st = run_config(dir, "--resume-or-start", &run, path, sizeof path);
    return st == VT_OK ? compare(&run, cfg, dir, "the command's config", "--resume-or-start") : st;
}

vt_status vt_resume_config(vt_config *out, const char *dir, const char *config_path,
                           const char *const *sets, int n_sets) {
    vt_config run;
    char path[VT_STR + 32];
    vt_status st = run_config(dir, "--resume", &run, path, sizeof path);
    if (st != VT_OK) return st;
    vt_config now = run;
    if (config_path) {
        st = vt_resolve_file(&now, config_path, sets, n_sets);
    } else {
        for (int i = 0; i < n_sets && st == VT_OK; i++) st = vt_config_set(&now, sets[i]);
        if (st == VT_OK) st = vt_resolve(&now);
    }
    if (st != VT_OK) return st;
    if (config_path || n_sets) {
        char src[VT_STR + 16];
        snprintf(src, sizeof src, "%s", config_path ? config_path : "--set");
        if ((st = compare(&run, &now, dir, src, "--resume")) != VT_OK) return st;
    } else if (vt_dist_root()) {
        fprintf(stderr, "vitrain: --resume %s: the run's own config (%s); %s\n", dir, path, EXACT);
    }
    snprintf(now.train.run_dir, sizeof now.train.run_dir, "%s", dir);
    *out = now;
    return VT_OK;
}
