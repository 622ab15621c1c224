/* test_train_state.c - the resume state's keys of the run log (train_state.h):
 *   - best_step and epoch_stats are written and read back exactly
 *   - a state of an older build, without them, reads as best_step -1 and zero sums
 *   - a malformed epoch_stats or a best_step after the step is an error naming the key
 *   - the timings (wall_s, epoch_stats' seconds) read back exactly and do not change the
 *     file's size, which then depends on the run's state alone
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "test_util.h"

#include "safetensors.h"
#include "train_state.h"

#define N 5

static char dir[256];

static vt_train_state base(void) {
    vt_train_state s;
    memset(&s, 0, sizeof s);
    s.step = 40;
    s.epoch = 1;
    s.batch = 8;
    s.optim_t = 40;
    s.rng[0] = 1;
    s.best_top1 = 53.5;
    s.wall_s = 9.25;
    s.best_step = 32;
    s.epoch_stats = (vt_epoch_stats){.loss_sum = 9.1234567890123, .steps = 8, .correct = 150, .counted = 256,
                                     .seconds = 1.5, .images = 256};
    return s;
}

/* A state file with the metadata the writer gives it, key's value replaced by value, or
 * with value NULL, the keys key and also_drop (may be NULL) dropped. */
static void write_with(const char *path, const char *key, const char *value, const char *also_drop) {
    char src[600];
    snprintf(src, sizeof src, "%s/src.safetensors", dir);
    float m[N] = {0}, v[N] = {0};
    vt_train_state s = base();
    CHECK(vt_train_state_write(src, &s, m, v, N, "{}") == VT_OK, "write: %s", vt_last_error());
    vt_safetensors f;
    CHECK(vt_st_read(src, &f) == VT_OK, "read: %s", vt_last_error());
    const char *keys[32], *vals[32];
    int n = 0;
    for (int i = 0; i < f.n_meta && n < 32; i++) {
        if (!value && (!strcmp(f.meta_keys[i], key) || (also_drop && !strcmp(f.meta_keys[i], also_drop))))
            continue;
        keys[n] = f.meta_keys[i];
        vals[n++] = !strcmp(f.meta_keys[i], key) ? value : f.meta_values[i];
    }
    CHECK(vt_st_write(path, f.tensors, f.n, keys, vals, n) == VT_OK, "rewrite: %s", vt_last_error());
    vt_st_free(&f);
}

int main(void) {
    if (test_tmpdir(dir, sizeof dir, "test_train_state")) return 1;
    char path[600];
    snprintf(path, sizeof path, "%s/s.safetensors", dir);
    float m[N] = {1, 2, 3, 4, 5}, v[N] = {1, 1, 1, 1, 1}, m2[N], v2[N];
    vt_train_state s = base(), r;
    CHECK(vt_train_state_write(path, &s, m, v, N, "{}") == VT_OK, "write: %s", vt_last_error());
    CHECK(vt_train_state_read(path, N, m2, v2, &r) == VT_OK, "read: %s", vt_last_error());
    CHECK(r.best_step == 32, "best_step %lld", (long long)r.best_step);
    CHECK(!memcmp(&r.epoch_stats, &s.epoch_stats, sizeof s.epoch_stats), "epoch_stats read back exactly: "
          "%.17g %lld %lld %lld %.17g %lld", r.epoch_stats.loss_sum, (long long)r.epoch_stats.steps,
          (long long)r.epoch_stats.correct, (long long)r.epoch_stats.counted, r.epoch_stats.seconds,
          (long long)r.epoch_stats.images);
    free(r.config);

    /* timings of every magnitude: read back exactly, the same file size for all */
    static const double times[] = {0.0, 0.080066512993653305, 0.11045616598858032, 9.25, 604800.123456789,
                                   1e-9, 3.5e7};
    long long size0 = -1;
    for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
        vt_train_state t = base();
        t.wall_s = times[i];
        t.epoch_stats.seconds = times[(i + 1) % (sizeof times / sizeof times[0])];
        CHECK(vt_train_state_write(path, &t, m, v, N, "{}") == VT_OK, "write: %s", vt_last_error());
        struct stat sb;
        long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
        if (i == 0) size0 = size;
        CHECK(size > 0 && size == size0, "wall_s %.17g, seconds %.17g: %lld bytes, %lld with wall_s 0", t.wall_s,
              t.epoch_stats.seconds, size, size0);
        CHECK(vt_train_state_read(path, N, m2, v2, &r) == VT_OK, "read: %s", vt_last_error());
        CHECK(r.wall_s == t.wall_s && r.epoch_stats.seconds == t.epoch_stats.seconds,
              "timings read back %.17g %.17g, written %.17g %.17g", r.wall_s, r.epoch_stats.seconds, t.wall_s,
              t.epoch_stats.seconds);
        free(r.config);
    }

    /* an older build's state */
    snprintf(path, sizeof path, "%s/old.safetensors", dir);
    write_with(path, "best_step", NULL, "epoch_stats");
    CHECK(vt_train_state_read(path, N, m2, v2, &r) == VT_OK, "older state reads: %s", vt_last_error());
    vt_epoch_stats zero;
    memset(&zero, 0, sizeof zero);
    CHECK(r.best_step == -1 && !memcmp(&r.epoch_stats, &zero, sizeof zero), "older state: best_step %lld",
          (long long)r.best_step);
    free(r.config);

    /* malformed values */
    static const struct { const char *key, *value; } bad[] = {
        {"epoch_stats", "1.5 8 150 256 1.5"}, {"epoch_stats", "1.5 8 300 256 1.5 256"},
        {"epoch_stats", "nan 8 150 256 1.5 256"}, {"epoch_stats", "1.5 41 150 256 1.5 256"},
        {"epoch_stats", "1.5 8 150 256 1.5 256 x"}, {"best_step", "41"}, {"best_step", "-2"},
        {"best_step", "3x"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/bad%zu.safetensors", dir, i);
        write_with(path, bad[i].key, bad[i].value, NULL);
        vt_status st = vt_train_state_read(path, N, m2, v2, &r);
        char want[64];
        snprintf(want, sizeof want, "__metadata__ \"%s\"", bad[i].key);
        CHECK(st == VT_ERR_RUNTIME && strstr(vt_last_error(), path) && strstr(vt_last_error(), want),
              "%s = \"%s\": %s", bad[i].key, bad[i].value, vt_last_error());
    }
    test_rm_rf(dir);
    return test_summary();
}
