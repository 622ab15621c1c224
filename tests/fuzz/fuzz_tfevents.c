/* fuzz_tfevents.c - libFuzzer harness: a run directory's TensorBoard event file as a
 * resume reads it (run_log.h, tfevents.h).
 *
 * The input's first byte is the step s resumed from, the rest an event file of a run
 * directory. vt_run_log_open(dir, s) must succeed (a damaged file is cut at its first bad
 * record, never an error), and leave the file holding exactly the input's well-formed
 * records up to its first bad one whose step is <= s, in order and byte for byte, plus a
 * new event file that starts with file_version and START at s + 1.
 */
#include <dirent.h>

#include "fuzz_util.h"
#include "test_util.h"
#include "run_log.h"
#include "tfevents.h"

#define FUZZ_EVENTS_NAME "events.out.tfevents.0000000001.fuzz"

/* The run directory, emptied. */
static const char *tfevents_dir(void) {
    static char dir[128];
    snprintf(dir, sizeof dir, "%s/tfevents_run", fuzz_dir());
    mkdir(dir, 0777);
    DIR *d = opendir(dir);
    FUZZ_CHECK(d != NULL, "opendir %s", dir);
    struct dirent *e;
    char p[512];
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    return dir;
}

/* Bytes of a file (test_util.h's whole-file read), its length into *n; the harness
 * fails if it cannot be read. */
static uint8_t *tfevents_read(const char *path, size_t *n) {
    uint8_t *b = (uint8_t *)test_read_file(path, n);
    FUZZ_CHECK(b != NULL, "cannot read %s", path);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int64_t s = data[0];
    const uint8_t *file = data + 1;
    size_t len = size - 1;
    const char *dir = tfevents_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/" FUZZ_EVENTS_NAME, dir);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(file, 1, len, f) == len && fclose(f) == 0, "cannot write %s", path);

    /* what the trim must keep: the well-formed records up to the first bad one, step <= s */
    uint8_t *want = malloc(len + 1);
    size_t wn = 0, pos = 0, start = 0, dn;
    const uint8_t *d;
    while (vt_tfevents_next(file, len, &pos, &d, &dn) == 1) {
        int64_t step = vt_tfevents_event_step(d, dn);
        if (step >= 0 && step <= s) {
            memcpy(want + wn, file + start, pos - start);
            wn += pos - start;
        }
        start = pos;
    }

    vt_run_log l;
    FUZZ_CHECK(vt_run_log_open(&l, dir, 8, s) == VT_OK, "open: %s", vt_last_error());
    char fresh[sizeof l.events.path];
    snprintf(fresh, sizeof fresh, "%s", l.events.path);
    vt_run_log_close(&l);
    size_t n;
    uint8_t *got = tfevents_read(path, &n);
    FUZZ_CHECK(n == wn && memcmp(got, want, n) == 0, "trimmed file: %zu bytes, expected %zu", n, wn);
    free(got);
    free(want);
    got = tfevents_read(fresh, &n);
    int64_t steps[3];
    int k = 0;
    pos = 0;
    while (k < 3 && vt_tfevents_next(got, n, &pos, &d, &dn) == 1) steps[k++] = vt_tfevents_event_step(d, dn);
    FUZZ_CHECK(k == 2 && pos == n && steps[0] == 0 && steps[1] == s + 1, "new file: %d records", k);
    free(got);
    return 0;
}
