/* fuzz_util.h - helpers shared by the libFuzzer harnesses of tests/fuzz/ (header-only;
 * the replay test includes every harness into one file, so everything here is guarded
 * and static).
 *
 * The readers under test take paths, so an input becomes a file: fuzz_memfile puts it in
 * a memfd (no disk, one per process, rewritten per input) and returns its /proc path;
 * fuzz_dir is a scratch directory on tmpfs for the dataset kinds, which open files by
 * name. FUZZ_CHECK states a property of the code under test: when it fails, the harness
 * prints why and aborts, which libFuzzer records as a crash with its input.
 */
#ifndef VT_FUZZ_UTIL_H
#define VT_FUZZ_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FUZZ_CHECK(cond, ...)                                                      \
    do {                                                                           \
        if (!(cond)) {                                                             \
            fprintf(stderr, "%s:%d: fuzz property failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                          \
            fputc('\n', stderr);                                                   \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* The tiny model whose checkpoints fuzz_safetensors loads (make_seeds.c writes one). */
#define FUZZ_MODEL_JSON                                                                   \
    "{\"model\": {\"width\": 8, \"depth\": 1, \"heads\": 2, \"mlp_ratio\": 2, "          \
    "\"patch_size\": 4, \"img_size\": 8, \"in_chans\": 1, \"num_classes\": 3}, "         \
    "\"data\": {\"kind\": \"synthetic\", \"mean\": [0.5], \"std\": [0.25]}}"

/* Moments per tensor in fuzz_state's resume states (make_seeds.c writes one). */
#define FUZZ_STATE_N 8

static void fuzz_write_all(int fd, const uint8_t *data, size_t size) {
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        FUZZ_CHECK(w > 0, "cannot write the fuzz input");
        off += (size_t)w;
    }
}

/* The input as a file: a memfd's /proc/self/fd path, valid until the next call. */
static const char *fuzz_memfile(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("vt_fuzz", 0);
        FUZZ_CHECK(fd >= 0, "memfd_create");
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    fuzz_write_all(fd, data, size);
    return path;
}

static char fuzz_dir_path[64];

static void fuzz_dir_remove(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fuzz_dir_path);
    if (fuzz_dir_path[0] && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", fuzz_dir_path);
}

/* A scratch directory on tmpfs (or /tmp), created once, removed at exit. */
static const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        struct stat sb;
        const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/vt_fuzz_XXXXXX", base);
        FUZZ_CHECK(mkdtemp(fuzz_dir_path) != NULL, "mkdtemp %s", fuzz_dir_path);
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Write size bytes to dir/name. */
static void fuzz_put(const char *dir, const char *name, const uint8_t *data, size_t size) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL, "cannot create %s", path);
    FUZZ_CHECK(size == 0 || fwrite(data, 1, size, f) == size, "cannot write %s", path);
    FUZZ_CHECK(fclose(f) == 0, "cannot close %s", path);
}

#endif
