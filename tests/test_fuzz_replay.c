/* test_fuzz_replay.c - replays the fuzzing seeds and every kept reproducer through the
 * libFuzzer harnesses of tests/fuzz/, without clang or libFuzzer: each harness is
 * included here with its entry point renamed, and every file of tests/fuzz/corpus/<t>/
 * and tests/fuzz/regressions/<t>/ goes through target t's entry point (run from the
 * repository root, as scripts/run_tests.sh does). A harness aborts on a violated
 * property (FUZZ_CHECK), which leaves this binary without its summary line; memory
 * errors and undefined behaviour show under `make san`. Each target must have seeds.
 */
#include <dirent.h>

#include "harness.h"
#include "test_util.h"

#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_config_one
#include "fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_image_one
#include "fuzz/fuzz_image.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_cifar_one
#include "fuzz/fuzz_cifar.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_idx_one
#include "fuzz/fuzz_idx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_state_one
#include "fuzz/fuzz_state.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_tfevents_one
#include "fuzz/fuzz_tfevents.c"
#undef LLVMFuzzerTestOneInput

static const struct {
    const char *name;
    int (*one)(const uint8_t *, size_t);
} targets[] = {{"safetensors", fuzz_safetensors_one}, {"config", fuzz_config_one},
               {"image", fuzz_image_one},             {"cifar", fuzz_cifar_one},
               {"idx", fuzz_idx_one},                 {"state", fuzz_state_one},
               {"tfevents", fuzz_tfevents_one}};

/* Every regular file of dir through one(); the count replayed (0 if dir is missing). */
static int replay_dir(const char *dir, int (*one)(const uint8_t *, size_t)) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len;
        char *buf = test_read_file(path, &len);
        if (buf) {
            one((const uint8_t *)buf, len);
            n++;
        }
        free(buf);
    }
    closedir(d);
    return n;
}

int main(void) {
    int total = 0;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", targets[i].name);
        int seeds = replay_dir(dir, targets[i].one);
        snprintf(dir, sizeof dir, "tests/fuzz/regressions/%s", targets[i].name);
        int kept = replay_dir(dir, targets[i].one);
        CHECK(seeds > 0, "fuzz target %s has no seeds in tests/fuzz/corpus/%s", targets[i].name,
              targets[i].name);
        printf("%s: %d seeds and %d reproducers replayed\n", targets[i].name, seeds, kept);
        total += seeds + kept;
    }
    CHECK(total > 0, "replayed %d inputs", total);
    return test_summary();
}
