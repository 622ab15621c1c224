/* e2e_tune.c - the GEMM blocking's sources through the built binary ($VT_BIN, default
 * ./vitrain; run from the repository root), with the tuning cache in a temporary
 * XDG_CACHE_HOME:
 *   - `vitrain tune CONFIG` writes this CPU's entry for the config's products and says
 *     where; a bad argument is a usage error (exit 2) naming it;
 *   - a new run takes the cache's entry and records it in DIR/gemm_blocking.txt;
 *   - a resumed run computes with the recorded blocking whatever the cache holds now:
 *     bit for bit the uninterrupted run's weights (and a run started on the changed
 *     cache differs, so the check has teeth where the blocking changes the sums);
 *   - VT_GEMM_CONTEXT wins over the record, the cache and the table, and says so;
 *     runtime.gemm_tune = off keeps the table's entry;
 *   - a corrupt cache file is ignored with a one-line warning; a corrupt record stops a
 *     resume naming the file;
 *   - `vitrain eval` of a run's checkpoint computes with the blocking the run recorded
 *     (here one made under VT_GEMM_CONTEXT, which differs from the table's): its top-1,
 *     top-5 and loss are the run's final evaluation's, as printed, and its logits those
 *     of that blocking set by hand, bit for bit; the same file outside the run directory
 *     evaluates with the table's entry, whose logits differ (the check has teeth);
 *     VT_GEMM_CONTEXT wins over the record; a corrupt record is an error naming it;
 *   - in bf16 (on the CPU's own path, VT_BF16_PATH set to it): `vitrain tune` tunes and
 *     caches that path's blocking under a key of its own; a new run takes it, a resumed
 *     run keeps its record whatever the cache holds (bit for bit, with teeth as above);
 *     another path's run (dpbf16 on an AMX CPU) and an fp32 run do not take it; a
 *     corrupt entry is ignored with a one-line warning; a VT_BF16_PATH that is no path
 *     or one the level lacks is a usage error, one an fp32 config ignores a warning;
 *   - the bf16 path is recorded beside the blocking: a resumed bf16 run and a bf16
 *     evaluation of its checkpoint run the recorded path whatever the probe picks (bit
 *     for bit, with teeth), VT_BF16_PATH overrides it and a path the level cannot run
 *     falls back, each with a warning; a record naming no path stops the resume;
 *   - under mpirun every rank computes with rank 0's blocking: two ranks whose caches
 *     differ (XDG_CACHE_HOME per rank) train the weights, bit for bit, of two ranks that
 *     both have rank 0's cache, and two ranks on the other cache train others (the check
 *     has teeth); skipped with a line without mpirun.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2e_util.h"
#include "harness.h"
#include "mpi_launch.h"

#define CFG "configs/synthetic_tiny.json"
#define SETS "--set data.train_size=256 --set model.num_classes=3 --set train.epochs=2 --set runtime.progress=never"

static char bin[1024], tmp[64], env[256];

/* Set every kc (avx2, avx512; not kc_t) of the cache file at path to kc. */
static int set_cache_kc(const char *path, int kc) {
    return run("sed -i -E 's/(avx2|avx512)\\.kc=[0-9]+/\\1.kc=%d/g' %s", kc, path);
}

/* Set every blocking's kc, the bf16 ones' too (avx512bf16, amx), to kc (a multiple of 32). */
static int set_all_kc(const char *path, int kc) {
    return run("sed -i -E 's/(avx2|avx512|avx512bf16|amx)\\.kc=[0-9]+/\\1.kc=%d/g' %s", kc, path);
}

/* The one cache file of the cache directory dir (dir/vitrain/gemm-*.txt), into path. */
static int cache_file_in(const char *dir, char *path, size_t len) {
    char list[256];
    snprintf(list, sizeof list, "%s/list", tmp);
    if (run("ls %s/vitrain/gemm-*.txt > %s 2>/dev/null", dir, list) != 0) return -1;
    char *s = test_read_file(list, NULL);
    int ok = s && strchr(s, '\n') == s + strlen(s) - 1;
    if (ok) snprintf(path, len, "%.*s", (int)(strlen(s) - 1), s);
    free(s);
    return ok ? 0 : -1;
}

/* The one cache file of the temporary cache, into path. */
static int cache_file(char *path, size_t len) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/cache", tmp);
    return cache_file_in(dir, path, len);
}

/* File same holds ref's bytes, and (where the blocking changes the sums: a SIMD level)
 * file other, made with another blocking, does not: the first check has teeth. what
 * names both: "SAME's ...; OTHER's". */
static void same_not_other(const char *ref, const char *same, const char *other, const char *what) {
    CHECK(same_bytes(ref, same), "%s: bit for bit", what);
    if (vt_kernels_best_isa() >= VT_ISA_AVX2) CHECK(!same_bytes(ref, other), "%s differ", what);
}

static void test_tune_arguments(void) {
    char log[160];
    snprintf(log, sizeof log, "%s/args.log", tmp);
    int rc = run("%s %s tune 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "missing CONFIG"), "no CONFIG: exit %d", rc);
    rc = run("%s %s tune " CFG " --checkpoint x 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "unknown option '--checkpoint' for 'vitrain tune'"), "a foreign option: exit %d",
          rc);
    rc = run("%s %s tune " CFG " --threads many 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "--threads 'many'"), "a bad --threads: exit %d", rc);
    rc = run("%s %s tune " CFG " --ranks 0 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "--ranks '0'"), "a bad --ranks: exit %d", rc);
    rc = run("%s %s tune " CFG " --ranks 3 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "train.batch_size 32 is not a multiple of it"),
          "--ranks that do not divide the batch: exit %d", rc);
    rc = run("%s %s tune " CFG " --set model.widht=8 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "model.widht"), "a bad --set: exit %d", rc);
    rc = run("%s %s tune no_such.json 2>%s", env, bin, log);
    CHECK(rc == 2 && file_contains(log, "no_such.json"), "a missing CONFIG file: exit %d", rc);
    rc = run("env -u HOME -u XDG_CACHE_HOME %s tune " CFG " " SETS " --threads 1 2>%s", bin, log);
    CHECK(rc == 2 && file_contains(log, "no cache directory"), "no cache directory: exit %d", rc);
    rc = run("%s %s tune --help >%s", env, bin, log);
    CHECK(rc == 0 && file_contains(log, "usage: vitrain tune CONFIG"), "tune --help: exit %d", rc);
}

static void test_sources(void) {
    char log[160], out[160], a[128], b[128], c[128], d[128], rec[160], cache[512], pa[160], pb[160];
    snprintf(log, sizeof log, "%s/run.log", tmp);
    snprintf(out, sizeof out, "%s/tune.out", tmp);
    int rc = run("%s %s tune " CFG " " SETS " --threads 1 >%s 2>%s", env, bin, out, log);
    CHECK(rc == 0 && file_contains(out, "cached in ") && file_contains(out, "\"tune\":\"gemm\""),
          "vitrain tune: exit %d", rc);
    CHECK(cache_file(cache, sizeof cache) == 0, "one cache file under XDG_CACHE_HOME/vitrain");
    CHECK(set_cache_kc(cache, 16) == 0, "edit the cache: kc 16");

    /* the straight run and a stopped one, both on the cache's entry */
    snprintf(a, sizeof a, "%s/straight", tmp);
    snprintf(b, sizeof b, "%s/stopped", tmp);
    rc = run("%s %s " CFG " " SETS " --threads 1 --run-dir %s 2>%s", env, bin, a, log);
    CHECK(rc == 0 && file_contains(log, "from the tuning cache"), "a new run takes the cache's entry: exit %d", rc);
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", a);
    CHECK(file_contains(rec, "source cache") && file_contains(rec, "avx512.kc=16,"), "the run records its blocking");
    rc = run("%s %s " CFG " " SETS " --threads 1 --run-dir %s --stop-after 5 2>%s", env, bin, b, log);
    CHECK(rc == 0, "the stopped run: exit %d", rc);

    /* the cache changes; the resumed run keeps its recorded blocking */
    CHECK(set_cache_kc(cache, 32) == 0, "edit the cache: kc 32");
    rc = run("%s %s --resume %s --threads 1 2>%s", env, bin, b, log);
    CHECK(rc == 0 && file_contains(log, "as the run recorded it"), "the resume says where its blocking comes from: "
          "exit %d", rc);
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    CHECK(same_bytes(pa, pb), "resumed on its recorded blocking: the uninterrupted run's weights bit for bit");
    snprintf(c, sizeof c, "%s/changed", tmp);
    rc = run("%s %s " CFG " " SETS " --threads 1 --run-dir %s 2>%s", env, bin, c, log);
    snprintf(pb, sizeof pb, "%s/last.safetensors", c);
    if (vt_kernels_best_isa() >= VT_ISA_AVX2)
        CHECK(rc == 0 && !same_bytes(pa, pb), "a run on the changed cache sums otherwise (the check above has "
              "teeth): exit %d", rc);

    /* VT_GEMM_CONTEXT wins over the record; runtime.gemm_tune = off over the cache */
    rc = run("cp -a %s %s.env && %s VT_GEMM_CONTEXT=avx2.kc=48,avx512.kc=48 %s --resume %s.env --threads 1 "
             "--set train.epochs=3 2>%s", b, b, env, bin, b, log);
    CHECK(rc == 0 && file_contains(log, "from VT_GEMM_CONTEXT (it overrides the blocking the run recorded)"),
          "the environment wins over the record: exit %d", rc);
    snprintf(d, sizeof d, "%s/off", tmp);
    rc = run("%s %s " CFG " " SETS " --set runtime.gemm_tune=off --threads 1 --run-dir %s --stop-after 1 2>%s", env,
             bin, d, log);
    CHECK(rc == 0 && file_contains(log, "the table's entry for this CPU (runtime.gemm_tune = off)"),
          "runtime.gemm_tune = off: exit %d", rc);
    rc = run("rm -rf %s && %s VT_GEMM_CONTEXT=avx512.kc=48 %s " CFG " " SETS " --threads 1 --run-dir %s "
             "--stop-after 1 2>%s", d, env, bin, d, log);
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", d);
    CHECK(rc == 0 && file_contains(log, "from VT_GEMM_CONTEXT (it overrides the tuning cache and the table)") &&
              file_contains(rec, "source env") && file_contains(rec, "avx512.kc=48,"),
          "the environment wins over the cache, and is recorded: exit %d", rc);

    /* a corrupt record stops the resume, naming it */
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", b);
    rc = run("echo garbage > %s && %s %s --resume %s --threads 1 2>%s", rec, env, bin, b, log);
    CHECK(rc == 2 && file_contains(log, "gemm_blocking.txt: not a valid GEMM blocking record"),
          "a corrupt record: exit %d", rc);

    /* a corrupt cache file: one warning, the table's entry */
    rc = run("echo garbage > %s && rm -rf %s && %s %s " CFG " " SETS " --threads 1 --run-dir %s --stop-after 1 2>%s",
             cache, c, env, bin, c, log);
    CHECK(rc == 0 && file_contains(log, "warning: ignoring a GEMM cache file: ") &&
              file_contains(log, "not a vitrain GEMM cache file") && file_contains(log, "the table's entry"),
          "a corrupt cache file is ignored with a warning: exit %d", rc);
}

#define BF16 " --set train.precision=bf16"

static void test_bf16_sources(void) {
    const vt_isa top = vt_kernels_best_isa();
    if (top < VT_ISA_AVX2) {
        printf("e2e_tune: skipped: the bf16 blockings (the scalar level has none to tune)\n");
        return;
    }
    const char *path = top >= VT_ISA_AMX ? "amx" : top >= VT_ISA_AVX512BF16 ? "dpbf16" : "fma";
    char cdir[128], benv[320], log[160], out[160], cache[512], a[128], b[128], c[128], rec[160], pa[160], pb[160];
    snprintf(cdir, sizeof cdir, "%s/cache_bf16", tmp);
    snprintf(benv, sizeof benv, "XDG_CACHE_HOME=%s VT_BF16_PATH=%s", cdir, path);
    snprintf(log, sizeof log, "%s/bf16.log", tmp);
    snprintf(out, sizeof out, "%s/bf16_tune.out", tmp);
    int rc = run("env %s %s tune " CFG " " SETS BF16 " --threads 1 >%s 2>%s", benv, bin, out, log);
    char want[64], products[32];
    snprintf(products, sizeof products, "bf16-%s", path);
    snprintf(want, sizeof want, "\"products\":\"%s\"", products);
    CHECK(rc == 0 && file_contains(out, want) && file_contains(log, "products: the "),
          "vitrain tune of a bf16 config tunes the %s path's blocking: exit %d", path, rc);
    CHECK(cache_file_in(cdir, cache, sizeof cache) == 0 && strstr(cache, products) != NULL,
          "one cache file, named for %s: %s", products, cache);
    CHECK(set_all_kc(cache, 32) == 0, "edit the cache: kc 32");

    snprintf(a, sizeof a, "%s/bf16_straight", tmp);
    snprintf(b, sizeof b, "%s/bf16_stopped", tmp);
    rc = run("env %s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s 2>%s", benv, bin, a, log);
    CHECK(rc == 0 && file_contains(log, "from the tuning cache"), "a new bf16 run takes its path's entry: exit %d", rc);
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", a);
    CHECK(file_contains(rec, "source cache") && file_contains(rec, "amx.kc=32") && file_contains(rec, "avx512bf16.kc=32"),
          "the bf16 run records its blocking");
    rc = run("env %s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s --stop-after 5 2>%s", benv, bin, b, log);
    CHECK(rc == 0, "the stopped bf16 run: exit %d", rc);
    CHECK(set_all_kc(cache, 64) == 0, "edit the cache: kc 64");
    rc = run("env %s %s --resume %s --threads 1 2>%s", benv, bin, b, log);
    CHECK(rc == 0 && file_contains(log, "as the run recorded it"), "the bf16 resume takes its record: exit %d", rc);
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    CHECK(same_bytes(pa, pb), "resumed bf16 run on its recorded blocking: the uninterrupted run's weights bit for bit");
    snprintf(c, sizeof c, "%s/bf16_changed", tmp);
    rc = run("env %s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s 2>%s", benv, bin, c, log);
    snprintf(pb, sizeof pb, "%s/last.safetensors", c);
    CHECK(rc == 0 && !same_bytes(pa, pb), "a bf16 run on the changed cache sums otherwise (teeth): exit %d", rc);

    /* an fp32 run, and a run on another bf16 path, do not take the entry */
    rc = run("rm -rf %s && XDG_CACHE_HOME=%s %s " CFG " " SETS " --threads 1 --run-dir %s --stop-after 1 2>%s", c,
             cdir, bin, c, log);
    CHECK(rc == 0 && !file_contains(log, "from the tuning cache") && file_contains(log, "the table's entry"),
          "an fp32 run does not take the bf16 entry: exit %d", rc);
    if (top >= VT_ISA_AMX) {
        rc = run("rm -rf %s && XDG_CACHE_HOME=%s VT_BF16_PATH=dpbf16 %s " CFG " " SETS BF16
                 " --threads 1 --run-dir %s --stop-after 1 2>%s", c, cdir, bin, c, log);
        CHECK(rc == 0 && !file_contains(log, "from the tuning cache") && file_contains(log, "the table's entry"),
              "a dpbf16 run does not take the amx entry: exit %d", rc);
        rc = run("XDG_CACHE_HOME=%s VT_BF16_PATH=dpbf16 %s tune " CFG " " SETS BF16 " --threads 1 >%s 2>%s", cdir, bin,
                 out, log);
        CHECK(rc == 0 && file_contains(out, "\"products\":\"bf16-dpbf16\"") &&
                  run("ls %s/vitrain/gemm-*-bf16-dpbf16-*.txt >/dev/null 2>&1", cdir) == 0,
              "tuning for dpbf16 writes an entry of its own: exit %d", rc);
    }

    /* the user's mistakes: no such path, a path the level lacks, a path an fp32 config ignores */
    rc = run("XDG_CACHE_HOME=%s VT_BF16_PATH=nope %s tune " CFG " " SETS BF16 " --threads 1 >%s 2>%s", cdir, bin, out,
             log);
    CHECK(rc == 2 && file_contains(log, "VT_BF16_PATH=nope is not a bf16 path"), "VT_BF16_PATH=nope: exit %d", rc);
    rc = run("XDG_CACHE_HOME=%s VT_ISA=avx2 VT_BF16_PATH=amx %s tune " CFG " " SETS BF16 " --threads 1 >%s 2>%s", cdir,
             bin, out, log);
    CHECK(rc == 2 && file_contains(log, "VT_BF16_PATH=amx cannot run here"), "an amx path on the avx2 level: exit %d",
          rc);
    rc = run("XDG_CACHE_HOME=%s VT_BF16_PATH=%s %s tune " CFG " " SETS " --threads 1 >%s 2>%s", cdir, path, bin, out,
             log);
    CHECK(rc == 0 && file_contains(log, "is ignored: the config trains in fp32") &&
              file_contains(out, "\"products\":\"fp32\""),
          "VT_BF16_PATH with an fp32 config: a warning, the fp32 blocking tuned: exit %d", rc);

    /* a corrupt bf16 entry: one warning, the table's entry */
    rc = run("echo garbage > %s && rm -rf %s && env %s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s "
             "--stop-after 1 2>%s", cache, c, benv, bin, c, log);
    CHECK(rc == 0 && file_contains(log, "warning: ignoring a GEMM cache file: ") && file_contains(log, "the table's entry"),
          "a corrupt bf16 cache file is ignored with a warning: exit %d", rc);
}

/* The bf16 path named by the record file rec ("bf16_path NAME"), into name; -1 when none. */
static int recorded_path(const char *rec, char *name, size_t len) {
    char *s = test_read_file(rec, NULL), *l = s ? strstr(s, "\nbf16_path ") : NULL;
    int ok = l != NULL;
    if (ok) snprintf(name, len, "%.*s", (int)strcspn(l + 11, "\n"), l + 11);
    free(s);
    return ok ? 0 : -1;
}

/* The bf16 path is part of how a run sums: a new bf16 run records the one it chose, a
 * resumed run and an evaluation of its checkpoint run that one again whatever the probe
 * picks now (bit for bit the uninterrupted run's weights; a run on the probe's path sums
 * otherwise: teeth), unless VT_BF16_PATH says otherwise or the path cannot run here
 * (a warning each); a record naming no path stops the resume. Needs two paths. */
static void test_bf16_path_record(void) {
    const vt_isa top = vt_kernels_best_isa();
    if (top < VT_ISA_AVX512BF16) {
        printf("e2e_tune: skipped: the bf16 path's record (this CPU offers one bf16 path, fma)\n");
        return;
    }
    char log[160], a[128], b[128], q[128], rec[160], probe[16] = "", other[16], pa[200], pb[200], pq[200], want[160];
    snprintf(log, sizeof log, "%s/path.log", tmp);
    snprintf(a, sizeof a, "%s/path_straight", tmp);
    snprintf(b, sizeof b, "%s/path_stopped", tmp);
    snprintf(q, sizeof q, "%s/path_probe", tmp);
    /* the probe's path on this CPU now (a run on it, for the teeth), and another one */
    int rc = run("%s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s 2>%s", env, bin, q, log);
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", q);
    CHECK(rc == 0 && recorded_path(rec, probe, sizeof probe) == 0, "a new bf16 run records its path: exit %d", rc);
    snprintf(other, sizeof other, "%s", strcmp(probe, "fma") ? "fma" : "dpbf16");
    rc = run("%s %s " CFG " " SETS " --threads 1 --run-dir %s/path_fp32 --stop-after 1 2>%s", env, bin, tmp, log);
    snprintf(rec, sizeof rec, "%s/path_fp32/gemm_blocking.txt", tmp);
    CHECK(rc == 0 && recorded_path(rec, want, sizeof want) != 0, "an fp32 run records no bf16 path: exit %d", rc);

    /* a run on the other path, straight and stopped; the resume without VT_BF16_PATH */
    rc = run("%s VT_BF16_PATH=%s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s 2>%s", env, other, bin, a, log);
    CHECK(rc == 0, "the straight run on the %s path: exit %d", other, rc);
    rc = run("%s VT_BF16_PATH=%s %s " CFG " " SETS BF16 " --threads 1 --run-dir %s --stop-after 5 2>%s", env, other,
             bin, b, log);
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", b);
    CHECK(rc == 0 && recorded_path(rec, want, sizeof want) == 0 && !strcmp(want, other),
          "the stopped run records the %s path: exit %d", other, rc);
    CHECK(run("cp -a %s %s.env && cp -a %s %s.isa && cp -a %s %s.bad", b, b, b, b, b, b) == 0,
          "copies of the stopped run");
    rc = run("%s %s --resume %s --threads 1 2>%s", env, bin, b, log);
    snprintf(want, sizeof want, "bf16 products on the %s path, as the run recorded it", other);
    char chosen[64]; /* the probe may pick the run's path itself this time: then nothing to adopt */
    snprintf(chosen, sizeof chosen, "bf16 products on the %s path (", other);
    CHECK(rc == 0 && (file_contains(log, want) || file_contains(log, chosen)),
          "the resume runs the recorded %s path: exit %d", other, rc);
    snprintf(pa, sizeof pa, "%s/last.safetensors", a);
    snprintf(pb, sizeof pb, "%s/last.safetensors", b);
    snprintf(pq, sizeof pq, "%s/last.safetensors", q);
    same_not_other(pa, pb, pq, "resumed on its recorded bf16 path: the uninterrupted run's weights; the probe's path's");

    /* VT_BF16_PATH overrides the record; a path this level cannot run; a record naming no path */
    rc = run("%s VT_BF16_PATH=%s %s --resume %s.env --threads 1 --stop-after 6 2>%s", env, probe, bin, b, log);
    snprintf(want, sizeof want, "VT_BF16_PATH=%s overrides the %s path the run's products ran on", probe, other);
    CHECK(rc == 0 && file_contains(log, want), "VT_BF16_PATH over the record, with a warning: exit %d", rc);
    rc = run("sed -i 's/^bf16_path .*/bf16_path dpbf16/' %s.isa/gemm_blocking.txt && %s VT_ISA=avx2 %s --resume %s.isa "
             "--threads 1 --stop-after 6 2>%s", b, env, bin, b, log);
    CHECK(rc == 0 && file_contains(log, "warning: the run's bf16 products ran on the dpbf16 path") &&
              file_contains(log, "which cannot run here") && file_contains(log, "sum differently from the run's"),
          "a recorded path this level cannot run: a warning, exit %d", rc);
    rc = run("sed -i 's/^bf16_path .*/bf16_path tpu/' %s.bad/gemm_blocking.txt && %s %s --resume %s.bad --threads 1 "
             "2>%s", b, env, bin, b, log);
    CHECK(rc == 2 && file_contains(log, "gemm_blocking.txt: not a valid GEMM blocking record") &&
              file_contains(log, "bf16_path 'tpu' is not a bf16 path"),
          "a record naming no bf16 path stops the resume, naming it: exit %d", rc);

    /* eval of the run's checkpoint in bf16 runs the recorded path too */
    rc = run("%s %s eval --checkpoint %s --precision bf16 --threads 1 >/dev/null 2>%s", env, bin, pa, log);
    snprintf(want, sizeof want, "bf16 products on the %s path, as the run recorded it", other);
    CHECK(rc == 0 && (file_contains(log, want) || file_contains(log, chosen)),
          "eval --precision bf16 of the run's checkpoint runs its %s path: exit %d", other, rc);
}

/* The last "kind":"eval" record of run directory dir's metrics.jsonl, into line. */
static int last_eval_record(const char *dir, char *line, size_t len) {
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char *s = test_read_file(path, NULL);
    int found = 0;
    for (char *l = s ? strtok(s, "\n") : NULL; l; l = strtok(NULL, "\n"))
        if (strstr(l, "\"kind\":\"eval\"")) found = snprintf(line, len, "%s", l) > 0;
    free(s);
    return found;
}

static void test_eval_blocking(void) {
    char dir[160], log[160], out[160], ckpt[200], alone[160], rec[200], line[1024], got[1024], ln[160];
    snprintf(dir, sizeof dir, "%s/evalrun", tmp);
    snprintf(log, sizeof log, "%s/eval.log", tmp);
    snprintf(out, sizeof out, "%s/eval.out", tmp);
    snprintf(ckpt, sizeof ckpt, "%s/last.safetensors", dir);
    snprintf(alone, sizeof alone, "%s/alone.safetensors", tmp);
    snprintf(rec, sizeof rec, "%s/gemm_blocking.txt", dir);
    int rc = run("%s VT_GEMM_CONTEXT=avx2.kc=16,avx512.kc=16 %s " CFG " " SETS " --threads 1 --run-dir %s 2>%s", env,
                 bin, dir, log);
    CHECK(rc == 0 && file_contains(rec, "avx512.kc=16,"), "a run under VT_GEMM_CONTEXT records its blocking: exit %d",
          rc);
    rc = run("%s %s eval --checkpoint %s --threads 1 --logits %s/recorded.npz >%s 2>%s", env, bin, ckpt, tmp, out, log);
    CHECK(rc == 0 && file_contains(log, "as the checkpoint's run recorded it"),
          "eval of a run's checkpoint says it takes the run's recorded blocking: exit %d", rc);
    CHECK(last_eval_record(dir, line, sizeof line), "the run logged its final evaluation");
    char *o = test_read_file(out, NULL);
    snprintf(got, sizeof got, "%s", o ? o : "");
    free(o);
    static const char *const keys[] = {"top1", "top5", "loss", "n"};
    for (int k = 0; k < 4; k++) {
        char a[64] = "", b[64] = "";
        json_raw(line, keys[k], a, sizeof a);
        json_raw(got, keys[k], b, sizeof b);
        CHECK(a[0] && !strcmp(a, b), "eval's %s is the run's final evaluation's: %s, the run's %s", keys[k], b, a);
    }

    /* The printed metrics of this small model hide a change of blocking (float rounding
     * of the mean loss), its logits do not: they are those of the run's blocking set by
     * hand, and the same weights outside the run directory (the table's entry) give
     * others. */
    rc = run("cp %s %s && %s VT_GEMM_CONTEXT=avx2.kc=16,avx512.kc=16 %s eval --checkpoint %s --threads 1 --logits "
             "%s/env.npz >%s 2>%s", ckpt, alone, env, bin, alone, tmp, out, log);
    CHECK(rc == 0, "eval under the run's VT_GEMM_CONTEXT: exit %d", rc);
    rc = run("%s %s eval --checkpoint %s --threads 1 --logits %s/table.npz >%s 2>%s", env, bin, alone, tmp, out, log);
    CHECK(rc == 0 && file_contains(log, "the table's entry for this CPU (no gemm_blocking.txt beside the checkpoint"),
          "eval of a checkpoint outside a run directory takes the table's entry: exit %d", rc);
    snprintf(got, sizeof got, "%s/recorded.npz", tmp);
    snprintf(ln, sizeof ln, "%s/env.npz", tmp);
    snprintf(out, sizeof out, "%s/table.npz", tmp);
    same_not_other(got, ln, out, "eval with the record: the logits of the run's blocking set by hand; the table's");

    rc = run("%s VT_GEMM_CONTEXT=avx512.kc=48 %s eval --checkpoint %s --threads 1 >%s 2>%s", env, bin, ckpt, out, log);
    CHECK(rc == 0 && file_contains(log, "from VT_GEMM_CONTEXT (it overrides the blocking the checkpoint's run recorded"),
          "VT_GEMM_CONTEXT wins over the record in eval: exit %d", rc);
    rc = run("echo garbage > %s && %s %s eval --checkpoint %s --threads 1 >%s 2>%s", rec, env, bin, ckpt, out, log);
    CHECK(rc == 2 && file_contains(log, "gemm_blocking.txt: not a valid GEMM blocking record") &&
              file_contains(log, "an evaluation that sums as the run's own did"),
          "eval with a corrupt record beside the checkpoint: exit %d", rc);
}

static void test_mpi_rank0_blocking(void) {
    if (run("mpirun --version >/dev/null 2>&1") != 0) {
        printf("e2e_tune: skipped: rank 0's blocking on every rank (mpirun not found: scripts/deps.sh installs "
               "openmpi-bin)\n");
        return;
    }
    char a[128], b[128], fa[512], fb[512], same[160], mixed[160], other[160], log[200], p0[200], p1[200];
    snprintf(a, sizeof a, "%s/mpi_cache_a", tmp);
    snprintf(b, sizeof b, "%s/mpi_cache_b", tmp);
    int rc = run("XDG_CACHE_HOME=%s %s tune " CFG " " SETS " --ranks 2 --threads 1 >/dev/null 2>%s/mpi_tune.log", a,
                 bin, tmp);
    CHECK(rc == 0 && cache_file_in(a, fa, sizeof fa) == 0, "vitrain tune --ranks 2: exit %d", rc);
    CHECK(set_cache_kc(fa, 16) == 0, "rank 0's cache: kc 16");
    CHECK(run("mkdir -p %s && cp -a %s/vitrain %s/", b, a, b) == 0 && cache_file_in(b, fb, sizeof fb) == 0 &&
              set_cache_kc(fb, 32) == 0,
          "the other cache: kc 32");
#define MPI_RUN CFG " " SETS " --set train.log_every=1 --threads 1 --run-dir"
    snprintf(same, sizeof same, "%s/mpi_same", tmp);
    snprintf(mixed, sizeof mixed, "%s/mpi_mixed", tmp);
    snprintf(other, sizeof other, "%s/mpi_other", tmp);
    rc = run("%s env XDG_CACHE_HOME=%s %s " MPI_RUN " %s 2>%s.log", mpirun(2, NULL), a, bin, same, same);
    CHECK(rc == 0, "2 ranks on rank 0's cache: exit %d", rc);
    rc = run("%s env XDG_CACHE_HOME=%s %s " MPI_RUN " %s : -np 1 env XDG_CACHE_HOME=%s %s " MPI_RUN " %s 2>%s.log",
             mpirun(1, NULL), a, bin, mixed, b, bin, mixed, mixed);
    CHECK(rc == 0, "rank 0 on its cache, rank 1 on another: exit %d", rc);
    rc = run("%s env XDG_CACHE_HOME=%s %s " MPI_RUN " %s 2>%s.log", mpirun(2, NULL), b, bin, other, other);
    CHECK(rc == 0, "2 ranks on the other cache: exit %d", rc);
#undef MPI_RUN
    snprintf(log, sizeof log, "%s.log", mixed);
    snprintf(p0, sizeof p0, "%s/gemm_blocking.txt", mixed);
    CHECK(file_contains(log, "from the tuning cache") && file_contains(p0, "avx512.kc=16,"),
          "the caches differ: rank 0's entry is said and recorded");
    snprintf(p0, sizeof p0, "%s/last.safetensors", same);
    snprintf(p1, sizeof p1, "%s/last.safetensors", mixed);
    snprintf(log, sizeof log, "%s/last.safetensors", other);
    same_not_other(p0, p1, log, "ranks whose caches differ: the weights of both ranks on rank 0's cache; both ranks "
                   "on the other cache");
}

int main(void) {
    if (e2e_start("e2e_tune", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    snprintf(env, sizeof env, "XDG_CACHE_HOME=%s/cache", tmp);
    if (test_kernels_init()) return 1;
    test_tune_arguments();
    test_sources();
    test_bf16_sources();
    test_bf16_path_record();
    test_eval_blocking();
    test_mpi_rank0_blocking();
    return e2e_finish(tmp);
}
