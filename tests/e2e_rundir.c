/* e2e_rundir.c - the run directory as a whole (rundir.h, durable.h, checkpoint.h) through
 * the built binary ($VT_BIN, default ./vitrain; run from the repository root) on
 * configs/synthetic_tiny.json:
 *   - a new run never overwrites another: the same command twice into one directory
 *     fails with exit 2 naming what is there and the ways on, leaving every file of the
 *     first run as it was; --start-over moves that run, unchanged, to DIR.old-1 and
 *     starts anew; a directory holding only what a run killed before its first pair left
 *     starts again; --start-over checks train.init, the data and the step's memory
 *     before it moves anything (a bad one leaves the directory as it was), and reads a
 *     train.init inside the directory before moving it; the same command started again
 *     with --resume-or-start over what a kill before the first pair left (the file is
 *     gone with the old run) is an error naming where the file went and the key to set,
 *     and with that key it starts the same run
 *   - one owner: two processes started together on one run directory, many times (two
 *     new runs; two resumes of a stopped run): exactly one trains, the other is refused
 *     naming the holder's PID (or, started after the first ended, finds its run); the
 *     metrics are one run's, every line whole; the resumed weights equal an uninterrupted
 *     run's bit for bit
 *   - nothing unloadable is published: the reproduction (head.weight x 1e25 as
 *     train.init, optim.clip_grad 0: AdamW's second moment overflows) stops with exit 1
 *     naming the tensor and the step, and publishes no pair; a resumed run whose weights
 *     overflow at step 9 refuses that pair, and `latest` keeps naming step 8's, intact
 *   - temporary files never follow a symbolic link planted at their name; a FIFO where
 *     the lock or the metrics go is an error, not a hang
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint.h"
#include "e2e_util.h"
#include "harness.h"
#include "safetensors.h"
#include "st_poke.h"

#define CFG "configs/synthetic_tiny.json"
/* 256 samples / 32 = 8 steps per epoch, 2 epochs, one pair kept */
#define SETS "--set data.train_size=256 --set train.epochs=2 --set train.keep_checkpoints=1 --threads 1"

static char bin[1024], tmp[256];

/* `latest` of dir names step `step` and both files of its pair read and verify. */
static int pair_ok(const char *dir, int64_t step) {
    vt_ckpt_pair p;
    if (vt_ckpt_current(dir, &p) != VT_OK || p.step != step) return 0;
    vt_safetensors w, s;
    if (vt_st_read(p.weights, &w) != VT_OK) return 0;
    vt_st_free(&w);
    if (vt_st_read(p.state, &s) != VT_OK) return 0;
    vt_st_free(&s);
    return 1;
}

/* Every line of dir/metrics.jsonl is one whole record; the number of train records. */
static int train_records(const char *dir, int *whole) {
    char path[600];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    int n = 0;
    *whole = s != NULL;
    for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        size_t len = strlen(line);
        if (strncmp(line, "{\"kind\":", 8) != 0 || line[len - 1] != '}' ||
            strchr(line + 1, '{') != NULL)
            *whole = 0;
        n += strstr(line, "\"kind\":\"train\"") != NULL;
    }
    free(s);
    return n;
}

static void test_no_overwrite(void) {
    char d[512], snap[600], log[600], old[600];
    snprintf(d, sizeof d, "%s/A", tmp);
    snprintf(snap, sizeof snap, "%s/A.snap", tmp);
    snprintf(log, sizeof log, "%s/A.log", tmp);
    snprintf(old, sizeof old, "%s/A.old-1", tmp);
    int rc = run("%s " CFG " " SETS " --run-dir %s 2>/dev/null", bin, d);
    CHECK(rc == 0 && pair_ok(d, 16), "first run: exit %d", rc);
    run("cp -a %s %s", d, snap);

    /* The same command again, another seed: refused, nothing of the first run touched. */
    rc = run("%s " CFG " " SETS " --set train.seed=5 --stop-after 3 --run-dir %s 2>%s", bin, d, log);
    char want[700];
    snprintf(want, sizeof want, "%s holds another run (the checkpoint of step 16 that `latest` "
             "names, metrics.jsonl, best.safetensors, config.json)", d);
    CHECK(rc == 2 && file_contains(log, want), "a second run into the directory: exit %d", rc);
    snprintf(want, sizeof want, "--resume %s", d);
    CHECK(file_contains(log, want) && file_contains(log, "--run-dir OTHER_DIR") &&
              file_contains(log, "--start-over"),
          "the message names the ways on");
    CHECK(run("diff -r -x lock %s %s >/dev/null", d, snap) == 0,
          "every file of the first run is as it was");

    /* --start-over moves it aside, unchanged, and starts anew. */
    rc = run("%s " CFG " " SETS " --set train.seed=5 --stop-after 3 --start-over --run-dir %s "
             "2>%s", bin, d, log);
    snprintf(want, sizeof want, "moved the run in %s", d);
    CHECK(rc == 0 && file_contains(log, want) && file_contains(log, old),
          "--start-over: exit %d, says where the old run went", rc);
    CHECK(run("diff -r -x lock %s %s >/dev/null", old, snap) == 0,
          "the old run is at %s, unchanged", old);
    CHECK(pair_ok(d, 3) && train_records(d, &(int){0}) == 3, "the new run is in %s", d);
    rc = run("%s " CFG " " SETS " --resume %s --start-over 2>%s", bin, d, log);
    CHECK(rc == 2 && file_contains(log, "give one of them"), "--resume with --start-over: exit %d",
          rc);

    /* Leftovers of a run killed before its first pair: a new run may start there. */
    char l[512];
    snprintf(l, sizeof l, "%s/left", tmp);
    run("mkdir -p %s && cp %s/config.json %s/metrics.jsonl %s/best.safetensors %s/ && "
        "cp %s/step_00000016.safetensors %s/step_00000008.safetensors && "
        "echo x > %s/step_00000008.state.safetensors.tmp && echo step_0000 > %s/latest.tmp",
        l, snap, snap, snap, l, snap, l, l, l);
    rc = run("%s " CFG " " SETS " --stop-after 4 --run-dir %s 2>%s", bin, l, log);
    int whole = 0;
    CHECK(rc == 0 && pair_ok(l, 4) && train_records(l, &whole) == 4 && whole,
          "a run restarted over leftovers: exit %d, its own pair and records", rc);
}

/* --start-over checks everything before it moves the old run: train.init inside the
 * directory being started over is read from there first (the new run starts from those
 * weights, as from the moved copy), and a bad train.init, data root or batch leaves the
 * directory as it was, with no DIR.old-N made. */
static void test_start_over_checks_first(void) {
    char d[512], snap[600], log[600], old[600], other[600];
    snprintf(d, sizeof d, "%s/B", tmp);
    snprintf(snap, sizeof snap, "%s/B.snap", tmp);
    snprintf(log, sizeof log, "%s/B.log", tmp);
    snprintf(old, sizeof old, "%s/B.old-1", tmp);
    snprintf(other, sizeof other, "%s/B.other", tmp);
    int rc = run("%s " CFG " " SETS " --run-dir %s 2>/dev/null", bin, d);
    CHECK(rc == 0 && pair_ok(d, 16), "first run: exit %d", rc);
    run("cp -a %s %s", d, snap);

    static const struct {
        const char *what, *sets, *says;
    } bad[] = {
        {"a missing train.init", "--set train.init=%s/nothing.safetensors", "train.init"},
        {"a train.init of another model", "--set train.init=%s/last.safetensors --set model.width=64",
         "train.init"},
        {"a missing data root", "--set data.kind=idx --set data.root=%s/no_such_data", "no_such_data"},
        {"a batch the memory cannot hold",
         "--set data.train_size=65536 --set train.batch_size=65536 --set eval.batch_size=64 "
         "--set train.init=%s/last.safetensors", "train.batch_size 65536"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char sets[512];
        snprintf(sets, sizeof sets, bad[i].sets, d);
        rc = run("ulimit -v 3145728 && %s " CFG " " SETS " %s --start-over --run-dir %s 2>%s", bin,
                 sets, d, log);
        CHECK(rc == 1 || rc == 2, "--start-over with %s: exit %d, expected 1 or 2", bad[i].what, rc);
        CHECK(file_contains(log, bad[i].says), "the message names what is wrong (%s)", bad[i].what);
        CHECK(access(old, F_OK) != 0 && run("diff -r -x lock %s %s >/dev/null", d, snap) == 0,
              "--start-over with %s: the run in %s is untouched, nothing moved aside", bad[i].what, d);
    }

    /* train.init inside the directory: read before the move; the run is the one the moved
     * copy starts, bit for bit */
    rc = run("%s " CFG " " SETS " --set train.init=%s/last.safetensors --stop-after 3 --start-over "
             "--run-dir %s 2>%s", bin, d, d, log);
    CHECK(rc == 0 && file_contains(log, "32 of 32 model tensors loaded") && pair_ok(d, 3),
          "--start-over with train.init in the directory: exit %d, the weights loaded", rc);
    CHECK(run("diff -r -x lock %s %s >/dev/null", old, snap) == 0, "the old run is at %s, unchanged", old);
    rc = run("%s " CFG " " SETS " --set train.init=%s/last.safetensors --stop-after 3 --run-dir %s "
             "2>/dev/null", bin, old, other);
    int na = 0, nb = 0;
    char *ra = train_records_text(d, &na), *rb = train_records_text(other, &nb);
    CHECK(rc == 0 && na == 3 && nb == 3 && ra && rb && strcmp(ra, rb) == 0,
          "the new run's losses and gradient norms equal those of one started from the moved copy");
    free(ra);
    free(rb);

    /* The started-over run killed before its first pair (its pair removed: what is left is
     * leftovers), then its command again with --resume-or-start, as a requeued job runs it:
     * train.init is gone with the old run; the error says where and what to set. */
    char want[700];
    rc = run("rm -f %s/latest %s/last.safetensors %s/step_* && %s " CFG " " SETS " --set train.init=%s/last.safetensors "
             "--stop-after 3 --resume-or-start --run-dir %s 2>%s", d, d, d, bin, d, d, log);
    snprintf(want, sizeof want, "set train.init=%s/last.safetensors", old);
    CHECK(rc == 1 && file_contains(log, "holds no checkpoint: starting the run") &&
              file_contains(log, "an earlier --start-over in the run directory") && file_contains(log, want),
          "--resume-or-start over leftovers with train.init moved aside: exit %d, says where it went", rc);
    rc = run("%s " CFG " " SETS " --set train.init=%s/last.safetensors --stop-after 3 --resume-or-start --run-dir %s "
             "2>%s", bin, old, d, log);
    ra = train_records_text(d, &na);
    rb = train_records_text(other, &nb);
    CHECK(rc == 0 && na == 3 && ra && rb && strcmp(ra, rb) == 0,
          "with train.init set as it says: exit %d, the run started from the moved copy", rc);
    free(ra);
    free(rb);
}

/* Two processes started together on dir with `args`; their exit codes and logs. */
static void race(const char *dir, const char *args, int rc[2], char logs[2][600]) {
    char rcs[2][600];
    for (int k = 0; k < 2; k++) {
        snprintf(logs[k], 600, "%s.%d.log", dir, k);
        snprintf(rcs[k], 600, "%s.%d.rc", dir, k);
    }
    run("(%s " CFG " " SETS " %s 2>%s; echo $? >%s) & (%s " CFG " " SETS " %s 2>%s; echo $? >%s) & "
        "wait", bin, args, logs[0], rcs[0], bin, args, logs[1], rcs[1]);
    for (int k = 0; k < 2; k++) {
        char *t = test_read_file(rcs[k], NULL);
        rc[k] = t ? atoi(t) : -1;
        free(t);
    }
}

/* Whether the losing process of a race said why: the lock's holder, or (started after
 * the winner ended) the run it found. */
static int refused(int rc, const char *log, int resumed) {
    if (rc == 1 && file_contains(log, "is in use by another vitrain process (PID ")) return 1;
    return resumed ? rc == 0 : rc == 2 && file_contains(log, "holds another run");
}

static void test_one_owner(void) {
    char ref[512], ref_last[600];
    snprintf(ref, sizeof ref, "%s/race-ref", tmp);
    snprintf(ref_last, sizeof ref_last, "%s/last.safetensors", ref);
    CHECK(run("%s " CFG " " SETS " --run-dir %s 2>/dev/null", bin, ref) == 0, "reference run");
    const int trials = 8;
    int fresh_ok = 0, resume_ok = 0, contested = 0;
    for (int t = 0; t < trials; t++) {
        char d[512], args[700], logs[2][600];
        int rc[2];
        snprintf(d, sizeof d, "%s/race%d", tmp, t);
        snprintf(args, sizeof args, "--run-dir %s", d);
        race(d, args, rc, logs);
        int w = rc[0] == 0 ? 0 : 1, whole = 0;
        int ok = (rc[0] == 0) != (rc[1] == 0) && refused(rc[1 - w], logs[1 - w], 0) &&
                 pair_ok(d, 16) && train_records(d, &whole) == 16 && whole;
        contested += rc[1 - w] == 1;
        fresh_ok += ok;
        if (!ok)
            fprintf(stderr, "fresh race %d: exits %d %d, records whole %d\n", t, rc[0], rc[1],
                    whole);

        /* stop at step 4, then two resumes together: one finishes the run */
        run("rm -rf %s && %s " CFG " " SETS " --stop-after 4 --run-dir %s 2>/dev/null", d, bin, d);
        snprintf(args, sizeof args, "--resume %s", d);
        race(d, args, rc, logs);
        char last[600];
        snprintf(last, sizeof last, "%s/last.safetensors", d);
        ok = (rc[0] == 0 || rc[1] == 0) && refused(rc[0], logs[0], 1) &&
             refused(rc[1], logs[1], 1) && pair_ok(d, 16) && train_records(d, &whole) == 16 &&
             whole && same_bytes(last, ref_last);
        contested += rc[0] == 1 || rc[1] == 1;
        resume_ok += ok;
        if (!ok)
            fprintf(stderr, "resume race %d: exits %d %d, records whole %d\n", t, rc[0], rc[1],
                    whole);
    }
    printf("one owner: %d of %d new-run races and %d of %d resume races ended with one run "
           "(%d refused by the lock)\n", fresh_ok, trials, resume_ok, trials, contested);
    CHECK(fresh_ok == trials && resume_ok == trials, "races: %d and %d of %d", fresh_ok, resume_ok,
          trials);
}

/* A copy of the weights file src with head.weight multiplied by f, as dst. */
static int scaled_copy(const char *src, const char *dst, float f) {
    vt_safetensors st;
    if (vt_st_read(src, &st) != VT_OK) return 0;
    const vt_st_tensor *h = vt_st_find(&st, "head.weight");
    if (h)
        for (int64_t i = 0; i < h->size; i++) h->data[i] *= f;
    int ok = h && vt_st_write(dst, st.tensors, st.n, (const char *const *)st.meta_keys,
                              (const char *const *)st.meta_values, st.n_meta) == VT_OK;
    vt_st_free(&st);
    return ok;
}

static void test_nothing_unloadable(void) {
    /* The reproduction. */
    char src[600], init[600], d[512], log[600], latest[600];
    snprintf(src, sizeof src, "%s/race-ref/last.safetensors", tmp);
    snprintf(init, sizeof init, "%s/huge_head.safetensors", tmp);
    snprintf(d, sizeof d, "%s/overflow", tmp);
    snprintf(log, sizeof log, "%s/overflow.log", tmp);
    snprintf(latest, sizeof latest, "%s/latest", d);
    CHECK(scaled_copy(src, init, 1e25f), "head.weight x 1e25 into %s: %s", init, vt_last_error());
    int rc = run("%s " CFG " --set train.init=%s --set data.train_size=32 --set optim.clip_grad=0 "
                 "--threads 1 --run-dir %s 2>%s", bin, init, d, log);
    CHECK(rc == 1 && file_contains(log, "checkpoint at step 1 (not saved") &&
              file_contains(log, "tensor \"optim.v\" holds +Inf") &&
              file_contains(log, "not written"),
          "an overflowing second moment stops the run naming tensor and step: exit %d", rc);
    CHECK(access(latest, F_OK) != 0, "no pair was published");
    rc = run("%s --resume %s --threads 1 2>%s", bin, d, log);
    CHECK(rc == 2 && file_contains(log, "holds no checkpoint to resume from"),
          "--resume finds no checkpoint: exit %d", rc);

    /* A good pair at step 8, then a resumed step whose update overflows the weights: the
     * pair of step 9 is refused, step 8's stays current and whole (keep_checkpoints 1
     * would have pruned it after a published step 9). */
    char g[512], state[600], last[600], keep[600];
    snprintf(g, sizeof g, "%s/diverge", tmp);
    snprintf(state, sizeof state, "%s/step_00000008.state.safetensors", g);
    snprintf(last, sizeof last, "%s/last.safetensors", g);
    snprintf(keep, sizeof keep, "%s/diverge_last", tmp);
    rc = run("%s " CFG " " SETS " --stop-after 8 --run-dir %s 2>/dev/null", bin, g);
    CHECK(rc == 0 && pair_ok(g, 8), "run to step 8: exit %d", rc);
    run("cp %s %s", last, keep);
    CHECK(poke_tensor(state, "optim.m", 3.0e38f), "huge first moment into %s", state);
    rc = run("%s " CFG " " SETS " --stop-after 9 --resume %s 2>%s", bin, g, log);
    CHECK(rc == 1 && file_contains(log, "checkpoint at step 9 (not saved; the previous checkpoint "
                                   "is intact: step 8, which --resume ") &&
              file_contains(log, "Inf at element"),
          "an overflowed weight stops the run naming the step: exit %d", rc);
    CHECK(pair_ok(g, 8) && same_bytes(last, keep), "latest still names step 8's pair, whole");
}

static void test_symlinked_temporaries(void) {
    char d[512], victim[600], log[600];
    snprintf(d, sizeof d, "%s/sym", tmp);
    snprintf(victim, sizeof victim, "%s/victim.txt", tmp);
    snprintf(log, sizeof log, "%s/sym.log", tmp);
    int rc = run("%s " CFG " " SETS " --stop-after 4 --run-dir %s 2>/dev/null", bin, d);
    CHECK(rc == 0, "run to step 4: exit %d", rc);
    run("echo precious > %s", victim);
    const char *names[] = {"metrics.jsonl.tmp", "config.json.tmp", "latest.tmp",
                           "step_00000008.safetensors.tmp", "best.safetensors.tmp"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        run("ln -s %s %s/%s", victim, d, names[i]);
    rc = run("%s " CFG " " SETS " --stop-after 8 --resume %s 2>%s", bin, d, log);
    char *v = test_read_file(victim, NULL);
    CHECK(rc == 0 && v && strcmp(v, "precious\n") == 0,
          "a resume past planted links: exit %d, their target untouched", rc);
    free(v);
    struct stat sb;
    int regular = 1;
    const char *files[] = {"metrics.jsonl", "config.json", "latest", "step_00000008.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", d, files[i]);
        regular &= lstat(p, &sb) == 0 && S_ISREG(sb.st_mode);
    }
    CHECK(regular && pair_ok(d, 8), "the run's files are regular files, the pair whole");

    /* A FIFO where the lock or the metrics go is refused at once, not waited on. */
    const char *fifos[] = {"lock", "metrics.jsonl"};
    for (int i = 0; i < 2; i++) {
        char f[512];
        snprintf(f, sizeof f, "%s/fifo%d", tmp, i);
        rc = run("mkdir -p %s && mkfifo %s/%s && timeout 60 %s " CFG " " SETS " --run-dir %s 2>%s",
                 f, f, fifos[i], bin, f, log);
        char want[700];
        snprintf(want, sizeof want, "%s/%s: cannot open", f, fifos[i]);
        CHECK(rc == 1 && file_contains(log, want) && file_contains(log, "not a regular file"),
              "a FIFO as %s: exit %d", fifos[i], rc);
    }
}

int main(void) {
    if (e2e_start("e2e_rundir", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_no_overwrite();
    test_start_over_checks_first();
    test_one_owner();
    test_nothing_unloadable();
    test_symlinked_temporaries();
    return e2e_finish(tmp);
}
