/* e2e_info_memory.c - `vitrain info` ($VT_BIN, run from the repository root) against
 * real runs:
 *   - its memory estimate ("memory_bytes") is within 15% of the peak resident set
 *     (ru_maxrss of the child process) of a short training run of the same config, for
 *     small models covering the estimate's terms: the ViT-Ti and ViT-S presets at 32 px,
 *     Performer attention, DropPath alone (the paper configs' regularisation, which the
 *     residual branches fuse), dropout + DropPath + LayerScale, a 100k-class head with mixup,
 *     SGD with Cayley-STRING (2 steps and the final evaluation each, synthetic data)
 *   - it answers without allocating the model: a model of 8.6e9 parameters
 *     (img_size 16384, patch_size 1) under a 1 GB address-space limit, at once
 * The presets at 224 px are measured the same way in the closing note (too slow
 * for the suite).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

static char bin[1024];
static char tmp[64];

static const char *BASE =
    "{\"model\": {\"preset\": \"vit_tiny\", \"img_size\": 32, \"patch_size\": 4, \"num_classes\": 10,"
    " \"in_chans\": 3}, \"data\": {\"kind\": \"synthetic\", \"train_size\": 64, \"val_size\": 32},"
    " \"train\": {\"steps\": 2, \"batch_size\": 16, \"eval_every\": 0, \"log_every\": 1}}";

/* "memory_bytes" of `vitrain info CFG SETS` (-1 on failure). */
static double info_memory(const char *cfg, const char *sets) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s info %s %s 2>/dev/null", bin, cfg, sets);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[4096];
    double v = -1;
    while (fgets(line, sizeof line, p)) {
        const char *m = strstr(line, "\"memory_bytes\":");
        if (m) v = atof(m + strlen("\"memory_bytes\":"));
    }
    pclose(p);
    return v;
}

/* Peak resident set (bytes) of `vitrain CFG SETS --run-dir DIR --threads 2`, -1 if it fails. */
static double run_peak_rss(const char *cfg, const char *sets, const char *dir) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec %s %s %s --run-dir %s --threads 2 >/dev/null 2>%s.log", bin, cfg,
             sets, dir, dir);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return -1;
    return (double)ru.ru_maxrss * 1024.0;
}

static void test_estimates(void) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, "%s/base.json", tmp);
    FILE *f = fopen(cfg, "w");
    fputs(BASE, f);
    fclose(f);
    static const struct {
        const char *name, *sets;
    } cases[] = {
        {"vit_tiny", ""},
        {"vit_small", "--set model.preset=vit_small"},
        {"performer", "--set model.attention=performer"},
        {"drop_path", "--set model.drop_path=0.1"},
        {"regularised", "--set model.drop_rate=0.1 --set model.attn_drop_rate=0.1 "
                        "--set model.drop_path=0.1 --set model.layer_scale=1e-5"},
        {"head_100k_mixup", "--set model.num_classes=100000 --set data.mixup=0.8 "
                            "--set train.batch_size=32"},
        {"sgd_cayley", "--set optim.name=sgd --set pe.kind=cayley"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[600];
        snprintf(dir, sizeof dir, "%s/%s", tmp, cases[i].name);
        double est = info_memory(cfg, cases[i].sets);
        double rss = run_peak_rss(cfg, cases[i].sets, dir);
        double err = rss > 0 ? (est - rss) / rss : 1.0;
        printf("%-16s estimate %8.1f MiB, peak RSS %8.1f MiB, %+.1f%%\n", cases[i].name,
               est / 1048576.0, rss / 1048576.0, 100.0 * err);
        CHECK(est > 0 && rss > 0 && err <= 0.15 && err >= -0.15,
              "%s: estimate %.1f MiB vs peak RSS %.1f MiB (%+.1f%%, limit 15%%)", cases[i].name,
              est / 1048576.0, rss / 1048576.0, 100.0 * err);
    }
}

/* A model of 8.6e9 parameters (34 GB of weights): info answers under a 1 GB limit. */
static void test_no_allocation(void) {
    char o[512];
    snprintf(o, sizeof o, "%s/huge.txt", tmp);
    int rc = run("ulimit -v 1048576; %s info configs/synthetic_tiny.json --set model.img_size=16384 "
                 "--set model.patch_size=1 >%s 2>&1", bin, o);
    char *t = test_read_file(o, NULL);
    CHECK(rc == 0 && t && strstr(t, "\"params\":8589952004,"),
          "info on an 8.6e9-parameter model under a 1 GB limit: exit %d, %s", rc, t ? t : "");
    free(t);
}

int main(void) {
    if (e2e_start("e2e_info", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    test_no_allocation();
    test_estimates();
    return e2e_finish(tmp);
}
