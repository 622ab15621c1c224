/* e2e_resume_dir.c - resume by directory (issue 39 item 3), through the built binary
 * ($VT_BIN, default ./vitrain; run from the repository root, as scripts/run_tests.sh does):
 *   - a stopped run prints the exact command that continues it, and its config.json
 *     records the run directory it was written to (not the config's train.run_dir);
 *   - `vitrain --resume DIR` alone continues with the run's own config (every --set of
 *     the first start included), and so does DIR/config.json given as CONFIG (which says
 *     so): together the uninterrupted run's per-step losses, gradient norms, learning rates
 *     and final weights bit for bit;
 *   - with the original CONFIG but without one of its --set, every key that differs is
 *     named with both values (exit 2), not a tensor shape;
 *   - keys that do not change what is computed (logging, progress, threads) may differ and
 *     are logged;
 *   - a longer train.epochs is allowed and says what it does to the schedule: with a
 *     constant schedule the extended run equals an uninterrupted run of the new length bit
 *     for bit; a shorter one, or another kind of length, is an error;
 *   - a directory that is no run is refused naming what is missing;
 *   - --resume-or-start compares the command's config with the run's by the same rule: a
 *     requeued command that changed what is computed is refused naming the key (exit 2),
 *     one that changed only its progress display continues the run, bit for bit the
 *     uninterrupted one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "e2e_util.h"
#include "harness.h"

#define CFG "configs/synthetic_tiny.json"
/* 256 samples / 32 = 8 steps per epoch; dropout on, so its stream must be restored */
#define SETS "--set data.train_size=256 --set model.num_classes=3 --set model.drop_rate=0.1 " \
             "--set train.log_every=1 --set runtime.progress=never"

static char bin[1024];
static char tmp[64];

/* "step loss grad_norm lr" of every train record of dir/metrics.jsonl; *count of them. */
static char *train_records(const char *dir, int *count) {
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    *count = 0;
    if (!s) return calloc(1, 1);
    size_t cap = strlen(s) + 1, o = 0;
    char *out = calloc(cap, 1);
    const char *keys[4] = {"\"step\":", "\"loss\":", "\"grad_norm\":", "\"lr\":"};
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "\"kind\":\"train\"")) continue;
        for (int k = 0; k < 4; k++) {
            const char *v = strstr(line, keys[k]);
            size_t n = v ? strcspn(v + strlen(keys[k]), ",}") : 0;
            o += (size_t)snprintf(out + o, cap - o, "%.*s%c", (int)n, v ? v + strlen(keys[k]) : "", k < 3 ? ' ' : '\n');
        }
        (*count)++;
    }
    free(s);
    return out;
}

/* Same train records and same last.safetensors in runs a and b, n records each. */
static void check_same_run(const char *what, const char *a, const char *b, int n) {
    int na = 0, nb = 0;
    char *ra = train_records(a, &na), *rb = train_records(b, &nb);
    CHECK(na == n && nb == n && strcmp(ra, rb) == 0, "%s: %d and %d steps (want %d), equal bit for bit", what, na,
          nb, n);
    if (strcmp(ra, rb) != 0) fprintf(stderr, "--- %s:\n%s--- %s:\n%s", a, ra, b, rb);
    free(ra);
    free(rb);
    char pa[160], pb[160];
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    CHECK(same_bytes(pa, pb), "%s: the same final weights", what);
}

static void test_resume_alone(void) {
    char a[128], b[128], log[160], want[1400];
    snprintf(a, sizeof a, "%s/straight", tmp);
    snprintf(b, sizeof b, "%s/stopped", tmp);
    snprintf(log, sizeof log, "%s/stopped.log", tmp);
    int rc = run("%s " CFG " " SETS " --set train.epochs=3 --threads 1 --run-dir %s 2>/dev/null", bin, a);
    CHECK(rc == 0, "straight run: exit %d", rc);
    rc = run("%s " CFG " " SETS " --set train.epochs=3 --threads 1 --run-dir %s --stop-after 11 2>%s", bin, b, log);
    snprintf(want, sizeof want, "continue with: %s " CFG " " SETS " --set train.epochs=3 --threads 1 --resume %s\n",
             bin, b);
    CHECK(rc == 0 && file_contains(log, want), "the stop line prints the exact command (exit %d)", rc);
    snprintf(want, sizeof want, "\"run_dir\": \"%s\"", b);
    char cfg[160];
    snprintf(cfg, sizeof cfg, "%s/config.json", b);
    CHECK(file_contains(cfg, want), "config.json records the run directory used");

    /* the original CONFIG without its --set: every differing key named */
    rc = run("%s --resume %s " CFG " --threads 1 2>%s", bin, b, log);
    char *text = test_read_file(log, NULL);
    CHECK(rc == 2 && text && strstr(text, "model.num_classes: 3 in the run, 4 in " CFG) &&
              strstr(text, "data.train_size: 256 in the run, 1024 in " CFG) && !strstr(text, "head.weight"),
          "the original CONFIG without its --set: exit %d, the keys named:\n%s", rc, text ? text : "");
    free(text);

    /* logging and progress may differ, and are logged (on a copy of the run) */
    rc = run("cp -a %s %s.copy && %s --resume %s.copy --set train.log_every=2 --threads 1 --stop-after 12 2>%s", b, b,
             bin, b, log);
    CHECK(rc == 0 && file_contains(log, "train.log_every: 1 in the run, 2 now (does not change what is computed)"),
          "a run-only key may differ: exit %d", rc);
    /* the run's own config, twice: the straight run bit for bit */
    rc = run("%s --resume %s --threads 1 --stop-after 14 2>%s", bin, b, log);
    CHECK(rc == 0 && file_contains(log, "the run's own config"), "vitrain --resume DIR alone: exit %d", rc);
    rc = run("%s --resume %s %s/config.json --threads 1 2>%s", bin, b, b, log);
    CHECK(rc == 0 && file_contains(log, "config.json agrees with the run's config") &&
              file_contains(log, "the run continues exactly"),
          "--resume DIR with the run's own config.json says it continues exactly: exit %d", rc);
    check_same_run("stopped at 11 and 14, resumed by directory", a, b, 24);
}

static void test_longer(void) {
    char c[128], d[128], log[160];
    /* constant schedule: 2 epochs, then extended to 3 = an uninterrupted 3-epoch run */
    snprintf(c, sizeof c, "%s/const3", tmp);
    snprintf(d, sizeof d, "%s/const2", tmp);
    snprintf(log, sizeof log, "%s/longer.log", tmp);
    const char *k = "--set optim.schedule=constant --set train.eval_every=0";
    int rc = run("%s " CFG " " SETS " %s --set train.epochs=3 --threads 1 --run-dir %s 2>/dev/null", bin, k, c);
    rc |= run("%s " CFG " " SETS " %s --set train.epochs=2 --threads 1 --run-dir %s 2>/dev/null", bin, k, d);
    CHECK(rc == 0, "the 3- and 2-epoch runs: exit %d", rc);
    rc = run("%s --resume %s --set train.epochs=3 --threads 1 2>%s", bin, d, log);
    CHECK(rc == 0 && file_contains(log, "train.epochs: 2 in the run, 3 now: the run is extended from 2 to 3 epochs; "
                                        "optim.schedule = constant, so every step has the learning rate of an "
                                        "uninterrupted 3-epoch run"),
          "a longer run with a constant schedule: exit %d", rc);
    check_same_run("2 epochs extended to 3 (constant schedule)", c, d, 24);
    rc = run("%s --resume %s --set train.epochs=2 --threads 1 2>%s", bin, d, log);
    CHECK(rc == 2 && file_contains(log, "train.epochs: 3 in the run, 2 in --set"), "a shorter run: exit %d", rc);
    rc = run("%s --resume %s --set train.steps=30 --threads 1 2>%s", bin, d, log);
    CHECK(rc == 2 && file_contains(log, "train.steps: 0 in the run, 30 in --set"), "epochs to steps: exit %d", rc);
    /* cosine: allowed, the schedule's meaning stated */
    rc = run("%s " CFG " " SETS " --set train.epochs=1 --threads 1 --run-dir %s/cos 2>/dev/null", bin, tmp);
    rc |= run("%s --resume %s/cos --set train.epochs=2 --threads 1 2>%s", bin, tmp, log);
    CHECK(rc == 0 && file_contains(log, "the cosine schedule is recomputed over 2 epochs") &&
              file_contains(log, "the result matches no uninterrupted run"),
          "a longer run with a cosine schedule: exit %d", rc);
}

static void test_not_a_run(void) {
    char log[160], d[128];
    snprintf(log, sizeof log, "%s/bad.log", tmp);
    snprintf(d, sizeof d, "%s/empty", tmp);
    mkdir(d, 0777);
    int rc = run("%s --resume %s 2>%s", bin, d, log);
    CHECK(rc == 2 && file_contains(log, "holds no checkpoint to resume from") &&
              file_contains(log, "config.json does not exist"),
          "a directory without config.json: exit %d", rc);
    rc = run("%s --resume %s/nope 2>%s", bin, tmp, log);
    CHECK(rc == 2 && file_contains(log, "no such run directory"), "a missing directory: exit %d", rc);
    rc = run("%s --resume 2>%s", bin, log);
    CHECK(rc == 2 && file_contains(log, "needs a value"), "--resume without DIR: exit %d", rc);
}

static void test_resume_or_start(void) {
    char a[128], r[128], log[160];
    snprintf(a, sizeof a, "%s/straight", tmp); /* test_resume_alone's uninterrupted run */
    snprintf(r, sizeof r, "%s/requeued", tmp);
    snprintf(log, sizeof log, "%s/requeued.log", tmp);
#define RUN CFG " " SETS " --set train.epochs=3 --threads 1 --resume-or-start --run-dir"
    int rc = run("%s " RUN " %s --stop-after 5 2>/dev/null", bin, r);
    CHECK(rc == 0, "--resume-or-start starts the run: exit %d", rc);
    rc = run("%s " RUN " %s --set optim.lr=0.1 2>%s", bin, r, log);
    CHECK(rc == 2 && file_contains(log, "--resume-or-start ") &&
              file_contains(log, "optim.lr: 0.003 in the run, 0.1 in the command's config"),
          "--resume-or-start with another optim.lr: exit %d, the key named", rc);
    rc = run("%s " RUN " %s --set runtime.progress=always --stop-after 9 2>%s", bin, r, log);
    CHECK(rc == 0 && file_contains(log, "runtime.progress: \"never\" in the run, \"always\" now (does not change "
                                        "what is computed)"),
          "--resume-or-start with another runtime.progress: exit %d", rc);
    rc = run("%s " RUN " %s 2>%s", bin, r, log);
    CHECK(rc == 0 && file_contains(log, "the command's config agrees with the run's config"),
          "--resume-or-start with the run's command: exit %d", rc);
#undef RUN
    check_same_run("started, refused, resumed twice by --resume-or-start", a, r, 24);
}

int main(void) {
    if (e2e_start("resume", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_resume_alone();
    test_resume_or_start();
    test_longer();
    test_not_a_run();
    return e2e_finish(tmp);
}
