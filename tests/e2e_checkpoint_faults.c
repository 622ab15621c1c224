/* e2e_checkpoint_faults.c - the checkpoint protocol (checkpoint.h) under kills and full
 * disks, through the fault-injection build of vitrain ($BUILD/tests/vitrain_fault, or
 * $VT_FAULT_BIN) on configs/synthetic_tiny.json (128 samples, 4 steps per epoch, 3
 * epochs, depth 1, train.keep_checkpoints 1: pairs saved at steps 4, 8 and 12, the
 * second and third save prune the previous pair; best.safetensors at the end):
 *   - a traced uninterrupted run numbers every file operation (event) of the run (the
 *     lock, config.json, metrics.jsonl, best.safetensors and the pairs, `latest` and
 *     last.safetensors: every file a run writes); its final last.safetensors is the
 *     reference
 *   - for every event N: SIGKILL just before it. At that instant the run directory
 *     holds a complete pair named by `latest` (both files read and verify), or, before
 *     the first commit, none, and --resume says so (exit 2). --resume (or, with no pair, a
 *     fresh run) then finishes with weights equal to the reference byte for byte
 *   - for every event N: the operation fails with ENOSPC: exit 1, the message names the
 *     file and "No space left on device"; the invariant above holds, no temporary file
 *     is left, and --resume finishes with the reference weights
 *   - the same at every event of step 4's copy where hard links fail (VT_FAULT_NO_LINK:
 *     last.safetensors becomes a copy of the weights, written like any other file)
 *   - a kill, then an ENOSPC, at each event of the tidy a resume does first (after a
 *     kill just before the second commit), then --resume again: the reference weights
 *     (an ENOSPC removing a leftover .tmp file does not stop the resume)
 *   - a real full disk: a tmpfs sized for one pair and a half (mounted in a user and
 *     mount namespace with unshare) makes the second save fail; the first pair stays,
 *     alone and named by `latest`; after the tmpfs grows, --resume finishes with the
 *     reference weights. Skipped, with a note, where unshare cannot mount.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

#include "checkpoint.h"
#include "safetensors.h"

#define CFG "configs/synthetic_tiny.json"
#define SETS                                                                              \
    "--set data.train_size=128 --set data.val_size=32 --set train.epochs=3 "             \
    "--set model.depth=1 --set train.eval_every=0 --set train.keep_checkpoints=1 --threads 1"

static char bin[1024];
static char tmp[64];

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Whether dir holds a file whose name ends in ".tmp". */
static int has_tmp_file(const char *dir) {
    DIR *d = opendir(dir);
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0) found = 1;
    }
    if (d) closedir(d);
    return found;
}

/* The invariant: `latest` names a pair whose two files read and verify (1), or there is
 * no checkpoint yet (0); -1 (with a message) if `latest` exists but its pair is broken. */
static int pair_state(const char *dir, int64_t *step) {
    vt_ckpt_pair p;
    vt_status s = vt_ckpt_current(dir, &p);
    if (s == VT_ERR_USAGE) return 0;
    if (s != VT_OK) {
        fprintf(stderr, "%s: %s\n", dir, vt_last_error());
        return -1;
    }
    vt_safetensors w, st;
    if (vt_st_read(p.weights, &w) != VT_OK) {
        fprintf(stderr, "%s\n", vt_last_error());
        return -1;
    }
    vt_st_free(&w);
    if (vt_st_read(p.state, &st) != VT_OK) {
        fprintf(stderr, "%s\n", vt_last_error());
        return -1;
    }
    vt_st_free(&st);
    *step = p.step;
    return 1;
}

/* Finish the run in dir: --resume, or a fresh run when it has no checkpoint yet (which
 * --resume must report with exit 2), with env (variable assignments) before each command.
 * Returns 1 if the final weights equal ref. */
static int finish_and_compare(const char *dir, const char *env, int has_pair, const char *ref) {
    char log[600];
    snprintf(log, sizeof log, "%s.resume.log", dir);
    int rc = run("%s%s " CFG " " SETS " --resume %s 2>%s", env, bin, dir, log);
    if (!has_pair) {
        char *t = test_read_file(log, NULL);
        int said = rc == 2 && t && strstr(t, "holds no checkpoint to resume from");
        free(t);
        if (!said) {
            fprintf(stderr, "%s: --resume without a checkpoint: exit %d\n", dir, rc);
            return 0;
        }
        rc = run("%s%s " CFG " " SETS " --run-dir %s 2>%s", env, bin, dir, log);
    }
    if (rc != 0) {
        fprintf(stderr, "%s: finishing the run: exit %d (log %s)\n", dir, rc, log);
        return 0;
    }
    char last[600];
    snprintf(last, sizeof last, "%s/last.safetensors", dir);
    return same_bytes(last, ref);
}

/* Trace lines of the reference run: op and path of event i (1-based) in ops/paths. */
static int read_trace(const char *path, char ops[][16], char paths[][600], int max) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int n = 0;
    char line[800];
    while (n < max && fgets(line, sizeof line, f)) {
        long k;
        char op[16], p[600];
        if (sscanf(line, "%ld %15s %599s", &k, op, p) != 3 || k != n + 1) break;
        snprintf(ops[n], 16, "%s", op);
        snprintf(paths[n], 600, "%s", p);
        n++;
    }
    fclose(f);
    return n;
}

#define MAX_EVENTS 1024
static char ops[MAX_EVENTS][16], paths[MAX_EVENTS][600];

/* The event path with the reference run directory replaced by dir (same file names). */
static void event_path(const char *ref_dir, int i, const char *dir, char *out, size_t len) {
    const char *p = paths[i];
    size_t n = strlen(ref_dir);
    if (strncmp(p, ref_dir, n) == 0) snprintf(out, len, "%.600s%.600s", dir, p + n);
    else snprintf(out, len, "%.600s", p);
    /* a TensorBoard events file is named by its start time and host, which differ from the
     * traced run's: the message must name the file up to that suffix */
    char *ev = strstr(out, "/events.out.tfevents.");
    if (ev) ev[strlen("/events.out.tfevents.")] = '\0';
}

/* Kill, then ENOSPC, at each event of the run traced in `trace` (environment env for
 * every run: "" or "VT_FAULT_NO_LINK=1 "), or, with copy_only, at the events of
 * last.safetensors's copy (link, and the file last.safetensors.tmp). ref_dir is the
 * traced run's directory, ref the reference weights; mode names the figures printed. */
static void fault_points(const char *mode, const char *env, int copy_only, const char *trace,
                         const char *ref_dir, const char *ref) {
    int n = read_trace(trace, ops, paths, MAX_EVENTS);
    int saves = 0, commits = 0, copies = 0;
    for (int i = 0; i < n; i++) {
        saves += !strcmp(ops[i], "create") && strstr(paths[i], ".state.safetensors.tmp");
        commits += !strcmp(ops[i], "rename") && strstr(paths[i], "/latest");
        copies += !strcmp(ops[i], "create") && strstr(paths[i], "/last.safetensors.tmp");
    }
    CHECK(n > 60 && saves == 3 && commits == 3 && copies == (copy_only ? 3 : 0),
          "%s: trace of %d events, %d state files, %d commits, %d copies", mode, n, saves,
          commits, copies);
    /* every file a run writes goes through the injected operations */
    static const char *const files[] = {"/lock", "/config.json", "/metrics.jsonl",
                                        "/best.safetensors", "/latest", "/last.safetensors",
                                        ".state.safetensors"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = strstr(paths[i], files[f]) != NULL;
        CHECK(seen, "%s: the trace has events of %s", mode, files[f]);
    }

    int points = 0, killed = 0, matched = 0, before_commit = 0, broken = 0;
    for (int i = 0; i < n; i++) {
        if (copy_only && strcmp(ops[i], "link") && !strstr(paths[i], "/last.safetensors.tmp"))
            continue;
        points++;
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s-kill%03d", tmp, mode, i + 1);
        int rc = run("%sVT_FAULT_KILL_AT=%d %s " CFG " " SETS " --run-dir %s 2>/dev/null", env,
                     i + 1, bin, dir);
        killed += rc == -1 || rc == 137;
        int64_t step = -1;
        int ps = pair_state(dir, &step);
        broken += ps < 0;
        before_commit += ps == 0;
        int ok = ps >= 0 && finish_and_compare(dir, env, ps == 1, ref);
        matched += ok;
        if (!ok || !(rc == -1 || rc == 137))
            fprintf(stderr, "%s: kill before event %d (%s %s): exit %d, pair %d (step %lld)%s\n",
                    mode, i + 1, ops[i], paths[i], rc, ps, (long long)step,
                    ok ? "" : ", final weights differ");
        else run("rm -rf %s %s.resume.log", dir, dir);
    }
    printf("%s kill points: %d of %d killed, %d resumed to the reference weights (%d before the "
           "first commit), %d left a broken pair\n", mode, killed, points, matched, before_commit,
           broken);
    CHECK(points > 0 && killed == points && matched == points && broken == 0,
          "%s: kills %d, matched %d, broken %d of %d events", mode, killed, matched, broken,
          points);

    int failed = 0, named = 0, clean = 0;
    matched = broken = 0;
    for (int i = 0; i < n; i++) {
        if (copy_only && strcmp(ops[i], "link") && !strstr(paths[i], "/last.safetensors.tmp"))
            continue;
        char dir[600], log[700], want[1400];
        snprintf(dir, sizeof dir, "%s/%s-nospc%03d", tmp, mode, i + 1);
        snprintf(log, sizeof log, "%s.log", dir);
        int rc = run("%sVT_FAULT_ENOSPC_AT=%d %s " CFG " " SETS " --run-dir %s 2>%s", env, i + 1,
                     bin, dir, log);
        failed += rc == 1;
        char *t = test_read_file(log, NULL);
        event_path(ref_dir, i, dir, want, sizeof want);
        int says = t && strstr(t, "No space left on device") && strstr(t, want);
        named += says;
        free(t);
        clean += !has_tmp_file(dir);
        int64_t step = -1;
        int ps = pair_state(dir, &step);
        broken += ps < 0;
        int ok = ps >= 0 && finish_and_compare(dir, env, ps == 1, ref);
        matched += ok;
        if (!ok || rc != 1 || !says)
            fprintf(stderr, "%s: ENOSPC at event %d (%s %s): exit %d, message %s, pair %d%s\n",
                    mode, i + 1, ops[i], want, rc, says ? "ok" : "lacks the file or the reason",
                    ps, ok ? "" : ", final weights differ");
        else run("rm -rf %s %s %s.resume.log", dir, log, dir);
    }
    printf("%s ENOSPC points: %d of %d failed with exit 1, %d named the file and the reason, %d "
           "left no temporary file, %d resumed to the reference weights\n", mode, failed, points,
           named, clean, matched);
    CHECK(failed == points && named == points && clean == points && matched == points &&
              broken == 0,
          "%s ENOSPC: failed %d, named %d, clean %d, matched %d, broken %d of %d", mode, failed,
          named, clean, matched, broken, points);
}

/* Every event of a normal run; then, where hard links fail (VT_FAULT_NO_LINK: step 4
 * copies the weights to last.safetensors), the events of that copy. */
static void test_kills_and_enospc(void) {
    char ref_dir[512], ref[600], trace[600];
    snprintf(ref_dir, sizeof ref_dir, "%s/ref", tmp);
    snprintf(ref, sizeof ref, "%s/last.safetensors", ref_dir);
    snprintf(trace, sizeof trace, "%s/trace.txt", tmp);
    int rc = run("VT_FAULT_TRACE=%s %s " CFG " " SETS " --run-dir %s 2>%s.log", trace, bin,
                 ref_dir, ref_dir);
    CHECK(rc == 0, "reference run exit %d", rc);
    fault_points("linked", "", 0, trace, ref_dir, ref);

    char copy_dir[512], copy_trace[600], copy_last[600];
    snprintf(copy_dir, sizeof copy_dir, "%s/ref-copy", tmp);
    snprintf(copy_trace, sizeof copy_trace, "%s/trace-copy.txt", tmp);
    snprintf(copy_last, sizeof copy_last, "%s/last.safetensors", copy_dir);
    rc = run("VT_FAULT_NO_LINK=1 VT_FAULT_TRACE=%s %s " CFG " " SETS " --run-dir %s 2>%s.log",
             copy_trace, bin, copy_dir, copy_dir);
    CHECK(rc == 0 && same_bytes(copy_last, ref), "run without hard links: exit %d, "
          "last.safetensors a copy of the reference weights", rc);
    fault_points("copied", "VT_FAULT_NO_LINK=1 ", 1, copy_trace, copy_dir, ref);
}

/* The resume after a kill just before the second commit (`latest` still names step 4;
 * step 8's pair and latest.tmp are left over) finishes that save's tidy (relink
 * last.safetensors, remove the leftovers) before training: a kill, then an ENOSPC, at
 * each of those events of the resume, then another --resume, must end at the reference
 * weights with the step-4 pair intact in between. A leftover .tmp file that cannot be
 * removed does not stop the resume, which then finishes at the reference weights. */
static void test_resume_tidy(void) {
    char ref[600], trace[600];
    snprintf(ref, sizeof ref, "%s/ref/last.safetensors", tmp);
    snprintf(trace, sizeof trace, "%s/trace.txt", tmp);
    int n = read_trace(trace, ops, paths, MAX_EVENTS), commit = 0, seen = 0;
    for (int i = 0; i < n && !commit; i++)
        if (!strcmp(ops[i], "rename") && strstr(paths[i], "/latest") && ++seen == 2) commit = i + 1;
    CHECK(commit > 0, "second commit found in the trace");
    if (!commit) return;
    char base[600], tr2[600];
    snprintf(base, sizeof base, "%s/tidy-base", tmp);
    snprintf(tr2, sizeof tr2, "%s/trace-resume.txt", tmp);
    run("VT_FAULT_KILL_AT=%d %s " CFG " " SETS " --run-dir %s 2>/dev/null", commit, bin, base);
    int rc = run("cp -a %s %s.t && VT_FAULT_TRACE=%s %s " CFG " " SETS " --resume %s.t "
                 "2>/dev/null", base, base, tr2, bin, base);
    CHECK(rc == 0, "traced resume exit %d", rc);
    static char rops[MAX_EVENTS][16], rpaths[MAX_EVENTS][600];
    /* the tidy: from its link of last.safetensors to the next file created */
    int rn = read_trace(tr2, rops, rpaths, MAX_EVENTS), t0 = 0, k = 0;
    while (t0 < rn && strcmp(rops[t0], "link") != 0) t0++;
    while (t0 + k < rn && strcmp(rops[t0 + k], "create") != 0) k++;
    CHECK(k >= 6, "the resume's tidy has %d events (link, rename, removals, directory fsyncs)", k);
    int matched = 0, intact = 0, failed = 0;
    for (int kind = 0; kind < 2; kind++) {
        for (int i = t0 + 1; i <= t0 + k; i++) {
            char dir[600];
            snprintf(dir, sizeof dir, "%s/tidy-%s%02d", tmp, kind ? "nospc" : "kill", i);
            rc = run("cp -a %s %s && VT_FAULT_%s_AT=%d %s " CFG " " SETS " --resume %s 2>%s.log",
                     base, dir, kind ? "ENOSPC" : "KILL", i, bin, dir, dir);
            /* A leftover .tmp that cannot be removed is harmless: the resume goes on. */
            int leftover = kind && !strcmp(rops[i - 1], "unlink") &&
                           strstr(rpaths[i - 1], ".tmp") == rpaths[i - 1] + strlen(rpaths[i - 1]) - 4;
            failed += leftover ? rc == 0 : kind ? rc == 1 : (rc == -1 || rc == 137);
            int64_t step = -1;
            int ps = pair_state(dir, &step);
            int want_step = leftover ? 12 : 4;
            intact += ps == 1 && step == want_step;
            char last[700];
            snprintf(last, sizeof last, "%s/last.safetensors", dir);
            int ok = ps == 1 && (leftover ? same_bytes(last, ref) : finish_and_compare(dir, "", 1, ref));
            matched += ok;
            if (!ok || step != want_step)
                fprintf(stderr, "resume tidy: %s at event %d (%s %s): exit %d, pair %d step %lld%s\n",
                        kind ? "ENOSPC" : "kill", i, rops[i - 1], rpaths[i - 1], rc, ps,
                        (long long)step, ok ? "" : ", final weights differ");
            else run("rm -rf %s %s.log %s.resume.log", dir, dir, dir);
        }
    }
    printf("resume tidy points: %d kills + %d ENOSPC, %d stopped the resume (or, removing a "
           "leftover .tmp, let it finish), %d left the step-4 pair (or finished), %d ended at "
           "the reference weights\n", k, k, failed, intact, matched);
    CHECK(failed == 2 * k && intact == 2 * k && matched == 2 * k,
          "resume tidy: stopped %d, intact %d, matched %d of %d", failed, intact, matched, 2 * k);
}

/* A real full disk on a tmpfs: room for the first pair and half the second. */
static void test_tmpfs_full(void) {
    if (run("unshare -rm sh -c 'mount -t tmpfs -o size=64k tmpfs %s' >/dev/null 2>&1", tmp) != 0) {
        printf("note: tmpfs test skipped: unshare -rm cannot mount a tmpfs here (the injected "
               "ENOSPC test above covers the same paths)\n");
        return;
    }
    char ref[600], w[600], s[600];
    snprintf(ref, sizeof ref, "%s/ref/last.safetensors", tmp);
    snprintf(w, sizeof w, "%s/ref/step_00000012.safetensors", tmp);
    snprintf(s, sizeof s, "%s/ref/step_00000012.state.safetensors", tmp);
    long wp = (file_size(w) + 4095) / 4096, sp = (file_size(s) + 4095) / 4096;
    CHECK(wp > 4 && sp > 4, "pair sizes %ld and %ld pages", wp, sp);
    /* config.json, metrics.jsonl, latest: a page each; the first pair; the second's
     * weights and half its state. */
    long kb = 4 * (3 + wp + sp + wp + sp / 2), big = 4 * kb;
    char mnt[600], out1[600], out2[600], log1[600], log2[600];
    snprintf(mnt, sizeof mnt, "%s/mnt", tmp);
    snprintf(out1, sizeof out1, "%s/full", tmp);
    snprintf(out2, sizeof out2, "%s/grown", tmp);
    snprintf(log1, sizeof log1, "%s/full.log", tmp);
    snprintf(log2, sizeof log2, "%s/grown.log", tmp);
    mkdir(mnt, 0700);
    int rc = run("unshare -rm sh -c '"
                 "mount -t tmpfs -o size=%ldk tmpfs %s || exit 90; "
                 "%s " CFG " " SETS " --run-dir %s/run 2>%s; echo $? >%s.rc; cp -a %s/run %s; "
                 "mount -o remount,size=%ldk %s || exit 91; "
                 "%s " CFG " " SETS " --resume %s/run 2>%s; echo $? >%s.rc; cp -a %s/run %s'",
                 kb, mnt, bin, mnt, log1, out1, mnt, out1, big, mnt, bin, mnt, log2, out2, mnt,
                 out2);
    CHECK(rc == 0, "namespace script exit %d", rc);
    char p[700];
    snprintf(p, sizeof p, "%s.rc", out1);
    char *t = test_read_file(p, NULL);
    CHECK(t && atoi(t) == 1, "the run on a full tmpfs exits 1 (got %s)", t ? t : "nothing");
    free(t);
    t = test_read_file(log1, NULL);
    CHECK(t && strstr(t, "No space left on device") && strstr(t, "step_00000008.state.safetensors") &&
              strstr(t, "the previous checkpoint is intact"),
          "full-disk message: %s", t ? t : "(none)");
    free(t);
    int64_t step = -1;
    CHECK(pair_state(out1, &step) == 1 && step == 4, "latest names the complete step-4 pair (%lld)",
          (long long)step);
    snprintf(p, sizeof p, "%s/step_00000008.safetensors", out1);
    CHECK(access(p, F_OK) != 0 && !has_tmp_file(out1), "nothing of the failed save is left");
    snprintf(p, sizeof p, "%s.rc", out2);
    t = test_read_file(p, NULL);
    CHECK(t && atoi(t) == 0, "--resume after the disk grew exits 0 (got %s)", t ? t : "nothing");
    free(t);
    snprintf(p, sizeof p, "%s/last.safetensors", out2);
    CHECK(same_bytes(p, ref), "resumed weights equal the reference");
}

int main(void) {
    const char *fb = getenv("VT_FAULT_BIN");
    const char *build = getenv("BUILD");
    if (fb && *fb) snprintf(bin, sizeof bin, "%s", fb);
    else snprintf(bin, sizeof bin, "%s/tests/vitrain_fault", build && *build ? build : "build");
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "%s: not found (make builds it with `make check`)\n", bin);
        CHECK(0, "fault-injection binary %s", bin);
        return test_summary();
    }
    if (test_tmpdir(tmp, sizeof tmp, "e2e_faults")) return 1;
    test_kills_and_enospc();
    test_resume_tidy();
    test_tmpfs_full();
    return e2e_finish(tmp);
}
