/* test_bf16_path.c - the bf16 product path's choice (src/bf16_path.h, kernels.h "bf16
 * product paths"): the pick rule on injected probe figures (every CPU: the figures of an
 * AMX Xeon, of one without AMX whose VDPBF16PS runs at half the FMA rate, of Zen 4/5
 * whose VDPBF16PS runs at twice it, and near ties), the names VT_BF16_PATH takes, which
 * levels offer which path and what an unavailable one says, VT_BF16_PATH's override and
 * errors, and the probe itself on this CPU. The paths' arithmetic is tested against the
 * scalar reference in test_kernels.c (each path is a level's gemm_bf16). */
#include <stdlib.h>
#include <string.h>

#include "bf16_path.h"
#include "harness.h"
#include "kernels.h"
#include "test_util.h"

static int pick(double amx, double dp, double fma, vt_bf16_path own) {
    vt_bf16_probe pr = {{amx, dp, fma}};
    return vt_bf16_path_pick(&pr, own);
}

static void test_pick(void) {
    /* an AMX Xeon: the tiles far ahead */
    CHECK(pick(520, 77, 130, VT_BF16_AMX) == VT_BF16_AMX, "AMX Xeon: amx");
    /* the same Xeon without AMX: VDPBF16PS at half the FMA rate, so fma */
    CHECK(pick(0, 77, 130, VT_BF16_DPBF16) == VT_BF16_FMA, "Xeon without AMX: fma");
    /* Zen 4/5: VDPBF16PS at twice the FMA rate */
    CHECK(pick(0, 280, 140, VT_BF16_DPBF16) == VT_BF16_DPBF16, "Zen: dpbf16");
    /* a near tie keeps the level's own path; a clear win (the margin) does not */
    CHECK(pick(0, 100, 100 * VT_BF16_PATH_MARGIN * 0.99, VT_BF16_DPBF16) == VT_BF16_DPBF16, "near tie: own");
    CHECK(pick(0, 100, 100 * VT_BF16_PATH_MARGIN * 1.01, VT_BF16_DPBF16) == VT_BF16_FMA, "past the margin: fma");
    CHECK(pick(120, 110, 100, VT_BF16_AMX) == VT_BF16_AMX, "own fastest");
    CHECK(pick(100, 0, 200, VT_BF16_AMX) == VT_BF16_FMA, "slow tiles lose to fma");
    /* the level's own path not measured: the fastest measured */
    CHECK(pick(0, 0, 90, VT_BF16_DPBF16) == VT_BF16_FMA, "own missing: fma");
    CHECK(pick(0, 0, 0, VT_BF16_FMA) == -1, "nothing offered: -1");
}

static void test_names(void) {
    const char *names[] = {"amx", "dpbf16", "fma"};
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
        CHECK(vt_bf16_path_parse(names[p]) == p, "parse %s", names[p]);
        CHECK(!strcmp(vt_bf16_path_name((vt_bf16_path)p), names[p]), "name of %d", p);
    }
    CHECK(vt_bf16_path_parse("AMX") == -1 && vt_bf16_path_parse("") == -1 && vt_bf16_path_parse("avx512bf16") == -1,
          "names are exact");
    CHECK(vt_bf16_path_of_level(VT_ISA_AMX) == VT_BF16_AMX && vt_bf16_path_of_level(VT_ISA_AVX512BF16) == VT_BF16_DPBF16 &&
              vt_bf16_path_of_level(VT_ISA_AVX512) == VT_BF16_FMA && vt_bf16_path_of_level(VT_ISA_AVX2) == VT_BF16_FMA,
          "each level's own path");
}

/* Which level offers which path: a path above the active level is refused, saying
 * which level it needs; one at or below it sets both entries to that level's. */
static void test_offered(void) {
    vt_isa best = vt_kernels_best_isa();
    static const vt_isa needs[VT_BF16_PATH_COUNT] = {VT_ISA_AMX, VT_ISA_AVX512BF16, VT_ISA_AVX2};
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++)
        for (int l = 0; l <= (int)best; l++) {
            vt_kernels t = {0};
            char why[256] = "";
            int rc = vt_bf16_path_entries((vt_bf16_path)p, (vt_isa)l, &t, why, sizeof why);
            if (l < (int)needs[p]) {
                char want[64];
                snprintf(want, sizeof want, "needs the %s level", vt_kernels_isa_name(needs[p]));
                CHECK(rc == -1 && strstr(why, want) && strstr(why, vt_kernels_isa_name((vt_isa)l)),
                      "path %s under level %s: refused naming both (%s)", vt_bf16_path_name((vt_bf16_path)p),
                      vt_kernels_isa_name((vt_isa)l), why);
                CHECK(t.gemm_bf16 == NULL, "a refused path leaves the table alone");
            } else {
                vt_kernels lt;
                vt_isa from = p == VT_BF16_FMA ? (l < VT_ISA_AVX512 ? (vt_isa)l : VT_ISA_AVX512) : needs[p];
                vt_kernels_table(from, &lt);
                CHECK(rc == 0 && t.gemm_bf16 == lt.gemm_bf16 && t.gemm_bf16_work_floats == lt.gemm_bf16_work_floats,
                      "path %s under level %s: the %s level's entries (%s)", vt_bf16_path_name((vt_bf16_path)p),
                      vt_kernels_isa_name((vt_isa)l), vt_kernels_isa_name(from), why);
            }
        }
    if (best < VT_ISA_AMX) { /* the CPU lacks the path: the message says what it offers */
        vt_kernels t;
        char why[256] = "";
        vt_bf16_path_entries(VT_BF16_AMX, best, &t, why, sizeof why);
        CHECK(strstr(why, "this CPU/OS offers at most") != NULL, "amx on a CPU without it: %s", why);
    }
}

/* VT_BF16_PATH: a bad name and an unavailable path are usage errors; a good one is set
 * and said; unset, the probe chooses among what the level offers. */
static void test_select(void) {
    char line[512];
    vt_kernels saved = vt_k;
    setenv("VT_BF16_PATH", "tiles", 1);
    vt_status st = vt_bf16_path_select(line, sizeof line);
    CHECK(st == VT_ERR_USAGE && strstr(vt_last_error(), "VT_BF16_PATH=tiles is not a bf16 path"),
          "unknown VT_BF16_PATH: %s", vt_last_error());
    if (vt_k.isa < VT_ISA_AMX) {
        setenv("VT_BF16_PATH", "amx", 1);
        st = vt_bf16_path_select(line, sizeof line);
        CHECK(st == VT_ERR_USAGE && strstr(vt_last_error(), "VT_BF16_PATH=amx cannot run here: the amx path"),
              "unavailable VT_BF16_PATH: %s", vt_last_error());
    }
    if (vt_k.isa >= VT_ISA_AVX2) {
        setenv("VT_BF16_PATH", "fma", 1);
        st = vt_bf16_path_select(line, sizeof line);
        CHECK(st == VT_OK && vt_kernels_bf16_path() == VT_BF16_FMA && strstr(line, "fma path") &&
                  strstr(line, "as VT_BF16_PATH asks"),
              "VT_BF16_PATH=fma: %s", line);
        vt_k = saved;
        unsetenv("VT_BF16_PATH");
        vt_bf16_probe pr;
        CHECK(vt_bf16_path_probe(&pr) == VT_OK, "probe");
        for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
            vt_kernels t = vt_k;
            char why[256];
            int offered = vt_bf16_path_entries((vt_bf16_path)p, vt_k.isa, &t, why, sizeof why) == 0;
            CHECK(offered ? pr.gflops[p] > 0 : pr.gflops[p] == 0, "probe figure of %s: %g (offered %d)",
                  vt_bf16_path_name((vt_bf16_path)p), pr.gflops[p], offered);
        }
        st = vt_bf16_path_select(line, sizeof line);
        int chosen = vt_kernels_bf16_path();
        CHECK(st == VT_OK && chosen >= 0 && strstr(line, "probe GFLOP/s:") &&
                  strstr(line, vt_bf16_path_name((vt_bf16_path)chosen)),
              "probed choice %d: %s", chosen, line);
        /* a level without bf16 instructions says that bf16 is slower there */
        int bare = vt_bf16_path_of_level(vt_k.isa) == VT_BF16_FMA;
        CHECK(!strstr(line, "no bf16 instructions") == !bare && (!bare || strstr(line, "slower than float32 here")),
              "the note on the cost of bf16 (level %s): %s", vt_k.name, line);
        fprintf(stderr, "test_bf16_path: on %s: %s\n", vt_k.name, line);
    }
    vt_k = saved;
}

int main(void) {
    if (test_kernels_init()) return 1;
    test_pick();
    test_names();
    test_offered();
    test_select();
    return test_summary();
}
