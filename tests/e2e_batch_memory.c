/* e2e_batch_memory.c - the built binary ($VT_BIN, run from the repository root) given a
 * batch its memory cannot hold, under a 3 GiB address-space limit (`ulimit -v`, as a
 * machine without the memory):
 *   - train.batch_size 65536 of the tiny model (about 6 GiB a step): exit 1 before the
 *     first step, the message naming train.batch_size, the GiB and train.accum_steps,
 *     never the internal-error abort (exit 134); no train record, no checkpoint;
 *   - the same at 2 ranks (when mpirun is present): the message names the images per rank;
 *   - eval.batch_size 1048576 with a small training batch: exit 1 before the first step,
 *     naming eval.batch_size;
 *   - `vitrain eval` of a checkpoint with that eval.batch_size: the same message;
 *   - the batch that fits (64) trains under the same limit: the check refuses only what
 *     cannot be allocated.
 * `timeout` only turns a hang into a failure; nothing is timed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

static char bin[512], tmp[64];

#define TINY "configs/synthetic_tiny.json --threads 1 --set data.val_size=32"
#define LIMIT_KB 3145728 /* 3 GiB */

/* `vitrain ARGS` under the address-space limit, output to tmp/name.log; the exit code. */
static int run_capped(const char *name, const char *args) {
    return run("ulimit -v %d && timeout 300 %s %s >%s/%s.log 2>&1", LIMIT_KB, bin, args, tmp, name);
}

static int log_has(const char *name, const char *needle) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.log", tmp, name);
    return file_contains(path, needle);
}

static int exists(const char *dir, const char *file) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return access(path, F_OK) == 0;
}

/* 1 if dir/file exists and contains needle (0 otherwise, quietly). */
static int file_contains_quiet(const char *dir, const char *file, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    char *s = test_read_file(path, NULL);
    int r = s && strstr(s, needle);
    free(s);
    return r;
}

static void test_train_batch(void) {
    char args[1024], dir[256];
    snprintf(dir, sizeof dir, "%s/huge", tmp);
    snprintf(args, sizeof args, TINY " --set data.train_size=65536 --set train.batch_size=65536 "
             "--set eval.batch_size=64 --run-dir %s", dir);
    int rc = run_capped("huge", args);
    CHECK(rc == 1, "train.batch_size 65536 under a 3 GiB limit: exit %d, expected 1", rc);
    CHECK(log_has("huge", "out of memory: a training step of train.batch_size 65536 images"),
          "the message names the batch");
    CHECK(log_has("huge", "GiB") && log_has("huge", "train.accum_steps"),
          "the message names the GiB and the way on (train.accum_steps)");
    CHECK(!file_contains_quiet(tmp, "huge" ".log", "internal error"), "no internal-error abort");
    CHECK(!exists(dir, "latest") && !file_contains_quiet(dir, "metrics.jsonl", "\"kind\":\"train\""),
          "no step ran, no checkpoint");
}

static void test_train_batch_ranks(void) {
    if (run("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("skip: the 2-rank check needs mpirun\n");
        return;
    }
    char args[1024];
    snprintf(args, sizeof args, "ulimit -v %d && timeout 300 mpirun --oversubscribe --bind-to none%s "
             "-np 2 %s " TINY " --set data.train_size=131072 --set train.batch_size=131072 "
             "--set eval.batch_size=64 --run-dir %s/huge2 >%s/huge2.log 2>&1", LIMIT_KB,
             geteuid() == 0 ? " --allow-run-as-root" : "", bin, tmp, tmp);
    int rc = run("%s", args);
    CHECK(rc == 1, "2 ranks, train.batch_size 131072: exit %d, expected 1", rc);
    CHECK(log_has("huge2", "train.batch_size 131072 images (65536 per rank)"),
          "the message names the images per rank");
    CHECK(!file_contains_quiet(tmp, "huge2" ".log", "internal error"), "no internal-error abort");
}

static void test_eval_batch(void) {
    char args[1024], dir[256];
    snprintf(dir, sizeof dir, "%s/evalhuge", tmp);
    snprintf(args, sizeof args, TINY " --set data.train_size=64 --set eval.batch_size=1048576 "
             "--set data.val_size=1048576 --run-dir %s", dir);
    int rc = run_capped("evalhuge", args);
    CHECK(rc == 1, "eval.batch_size 1048576 under a 3 GiB limit: exit %d, expected 1", rc);
    CHECK(log_has("evalhuge", "eval.batch_size") && log_has("evalhuge", "out of memory"),
          "the message names eval.batch_size");
    CHECK(!file_contains_quiet(tmp, "evalhuge" ".log", "internal error"), "no internal-error abort");
    CHECK(!file_contains_quiet(dir, "metrics.jsonl", "\"kind\":\"train\""), "no step ran");
}

static void test_fits(void) {
    char args[1024], dir[256];
    snprintf(dir, sizeof dir, "%s/fits", tmp);
    snprintf(args, sizeof args, TINY " --set data.train_size=128 --set train.batch_size=64 "
             "--set train.steps=2 --run-dir %s", dir);
    int rc = run_capped("fits", args);
    CHECK(rc == 0, "train.batch_size 64 under the same limit: exit %d, expected 0", rc);
    CHECK(exists(dir, "last.safetensors"), "it trained");
    /* the eval command with a batch too large for the limit, on that checkpoint */
    snprintf(args, sizeof args, "eval " TINY " --set data.val_size=1048576 --set eval.batch_size=1048576 "
             "--checkpoint %s/last.safetensors", dir);
    rc = run_capped("evalcmd", args);
    CHECK(rc == 1, "vitrain eval with eval.batch_size 1048576: exit %d, expected 1", rc);
    CHECK(log_has("evalcmd", "eval.batch_size") && !file_contains_quiet(tmp, "evalcmd" ".log", "internal error"),
          "the eval command names eval.batch_size, no abort");
}

int main(void) {
    if (e2e_start("e2e_batch_memory", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_train_batch();
    test_train_batch_ranks();
    test_eval_batch();
    test_fits();
    return e2e_finish(tmp);
}
