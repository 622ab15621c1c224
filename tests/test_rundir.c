/* test_rundir.c - the run directory's owner and contents (rundir.h):
 *   - what a directory holds: nothing (missing, empty, only unrelated files), leftovers
 *     (a run's files but no `latest`), a run (`latest` naming a pair, one that does not
 *     resolve, or the older layout), with the run's files named
 *   - the lock: a second taker (another open of the lock file, as another process makes)
 *     is refused naming this process's PID and host; released, it can be taken again; a
 *     symbolic link or a FIFO as the lock file is refused without blocking
 *   - moving a run aside: DIR.old-1, then DIR.old-2, with its files, and DIR anew, empty
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "test_util.h"
#include "rundir.h"

static char root[64];

static void touch(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_inspect(void) {
    char d[256], what[1024];
    snprintf(d, sizeof d, "%s/missing", root);
    CHECK(vt_rundir_inspect(d, what, sizeof what) == VT_RUNDIR_NOTHING && what[0] == '\0',
          "a missing directory holds nothing");
    snprintf(d, sizeof d, "%s/d", root);
    mkdir(d, 0700);
    touch(d, "notes.txt", "mine\n");
    touch(d, "lock", "");
    CHECK(vt_rundir_inspect(d, what, sizeof what) == VT_RUNDIR_NOTHING,
          "unrelated files and a lock are nothing of a run");
    touch(d, "metrics.jsonl", "{}\n");
    touch(d, "step_00000004.safetensors", "x");
    touch(d, "latest.tmp", "step_00000004\n");
    CHECK(vt_rundir_inspect(d, what, sizeof what) == VT_RUNDIR_LEFTOVERS,
          "a run's files without latest are leftovers");
    touch(d, "step_00000004.state.safetensors", "x");
    touch(d, "latest", "step_00000004\n");
    touch(d, "config.json", "{}");
    CHECK(vt_rundir_inspect(d, what, sizeof what) == VT_RUNDIR_RUN &&
              !strcmp(what, "the checkpoint of step 4 that `latest` names, metrics.jsonl, "
                      "config.json"),
          "latest naming a pair is a run: %s", what);
    touch(d, "latest", "garbage\n");
    CHECK(vt_rundir_inspect(d, what, sizeof what) == VT_RUNDIR_RUN &&
              strstr(what, "a `latest` that does not resolve (") && strstr(what, "garbage"),
          "a latest that does not resolve is still a run: %s", what);
    char p[512];
    snprintf(p, sizeof p, "%s/latest", d);
    unlink(p);
    touch(d, "last.safetensors", "x");
    touch(d, "last.state.safetensors", "x");
    CHECK(vt_rundir_inspect(d, what, sizeof what) == VT_RUNDIR_RUN &&
              strstr(what, "a checkpoint (last.safetensors + last.state.safetensors)"),
          "the older layout is a run: %s", what);
}

static void test_lock(void) {
    char d[256], p[512];
    snprintf(d, sizeof d, "%s/locked", root);
    mkdir(d, 0700);
    vt_rundir_lock a, b;
    CHECK(vt_rundir_lock_take(&a, d) == VT_OK && a.fd >= 0, "first lock: %s", vt_last_error());
    char host[256] = "", want[512];
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "%s is in use by another vitrain process (PID %ld on host %s)", d,
             (long)getpid(), host);
    CHECK(vt_rundir_lock_take(&b, d) == VT_ERR_RUNTIME && strstr(vt_last_error(), want) &&
              b.fd == -1,
          "a second taker is refused naming the holder: %s", vt_last_error());
    vt_rundir_lock_release(&a);
    CHECK(vt_rundir_lock_take(&b, d) == VT_OK, "taken again after release: %s", vt_last_error());
    vt_rundir_lock_release(&b);

    snprintf(d, sizeof d, "%s/linked", root);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/lock", d);
    CHECK(symlink("/dev/null", p) == 0, "plant a link");
    CHECK(vt_rundir_lock_take(&a, d) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "it is a symbolic link"),
          "a symbolic link as the lock: %s", vt_last_error());
    snprintf(d, sizeof d, "%s/fifo", root);
    mkdir(d, 0700);
    snprintf(p, sizeof p, "%s/lock", d);
    CHECK(mkfifo(p, 0600) == 0, "make a FIFO");
    CHECK(vt_rundir_lock_take(&a, d) == VT_ERR_RUNTIME &&
              strstr(vt_last_error(), "not a regular file"),
          "a FIFO as the lock: %s", vt_last_error());
}

static void test_move_aside(void) {
    char d[256], moved[512], p[600];
    snprintf(d, sizeof d, "%s/run", root);
    for (int k = 1; k <= 2; k++) {
        mkdir(d, 0700);
        touch(d, "latest", "step_00000001\n");
        CHECK(vt_rundir_move_aside(d, moved, sizeof moved) == VT_OK, "move %d: %s", k,
              vt_last_error());
        char want[300];
        snprintf(want, sizeof want, "%s.old-%d", d, k);
        snprintf(p, sizeof p, "%s/latest", moved);
        CHECK(!strcmp(moved, want) && access(p, F_OK) == 0, "moved to %s with its files", moved);
        CHECK(vt_rundir_inspect(d, NULL, 0) == VT_RUNDIR_NOTHING, "%s anew, empty", d);
        rmdir(d);
    }
}

int main(void) {
    if (test_tmpdir(root, sizeof root, "rundir")) return 1;
    test_inspect();
    test_lock();
    test_move_aside();
    test_rm_rf(root);
    return test_summary();
}
