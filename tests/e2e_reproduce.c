/* e2e_reproduce.c - end-to-end test of the reproduction tooling: runs
 * `scripts/reproduce.sh all --quick --seeds 0,1 --jobs 2` (every table's code path on
 * synthetic data, two runs at a time, with the binary $VT_BIN, default ./vitrain; run from
 * the repository root, as scripts/run_tests.sh does) into a temporary directory, then checks
 *   - each TABLE.md has one row per PE (sharing: per share mode; positions: per PE and
 *     position mode), mean +- std cells, one bold best entry, and the provenance lines
 *     (command, machine, wall time, git revision, the revision that trained the runs)
 *   - each TABLE.json names its table, holds one row per variant and the provenance
 *   - every PNG decodes with libpng, has a plot-sized image and is not blank
 *   - the numbers: the quick runs learn; `vitrain eval --resolutions` at the training size
 *     equals the training's final evaluation (same checkpoint, same data); accuracy 1.25x
 *     off the training size stays well above chance; patch shuffle leaves the PE-free model's
 *     accuracy unchanged and costs the position-aware models accuracy
 *   - `vitrain eval` on a quick run: the plain evaluation equals --resolutions at the training
 *     size, --patch-shuffle adds the shuffled fields, bad --resolutions / --seed / shuffle
 *     flags exit 2 naming the problem
 *   - positions: at 2x the training size, positions kept in the trained range
 *     (interpolate; LieRE kinds: normalized to the evaluated grid) beat the trained
 *     extrapolating mode on average, and so does the interpolated sin-cos table; the
 *     papers' claims are tested again on the kept-in-range rows; a stale
 *     evaluation that contradicts another at the training size stops build_results
 *   - resolution.md tests the papers' claims (Welch t-tests, verdicts); the t-tests agree with
 *     scipy's on fixed inputs
 *   - --jobs 1 gives the same numbers as --jobs 2; a failing run stops the table (exit 1)
 *   - the fmnist14 family through --quick with --eval-samples: the resolution evaluations
 *     use that many images, the tables say so
 *   - --pes: the positions table of two PEs reuses the runs and has only their rows, and
 *     counts a run without a REVISION file as such; an unknown PE exits 2 naming it
 *   - a second invocation reuses the runs (no training) and a bad table name exits 2
 *   - every JSON file under configs/ loads, and within each family (fmnist, fmnist14, cifar100, in1k)
 *     the nine PE configs resolve to the same config apart from the pe section
 * Needs /usr/bin/python3 with matplotlib (scripts/deps.sh installs python3-matplotlib).
 */
#include <glob.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

#include "config.h"
#include "pe/kinds.h"
#include "resolve.h"

/* The variants reproduce.sh trains: ape, ape_sincos, none and the rotary kinds of the
 * registry (its `vitrain kinds --rotary`), filled by list_variants. */
enum { N_SEEDS = 2 };
static const char *PES[VT_PE_KIND_COUNT + 1], **ROTARY = PES + 3;
static int N_PES, N_ROT;

static void list_variants(void) {
    PES[0] = "ape";
    PES[1] = "ape_sincos";
    PES[2] = "none";
    N_PES = 3;
    for (int k = 0; k < VT_PE_KIND_COUNT; k++)
        if (vt_pe_kind_entry((vt_pe_kind)k)->rotary) PES[N_PES++] = vt_pe_kind_name((vt_pe_kind)k);
    N_ROT = N_PES - 3;
}
static const char *SHARE_ROWS[] = {"share none", "share layers", "share heads", "share all"};

static char bin[1024], out[256];

/* Lines starting "| " between from (NULL: the start) and the next "\n## " heading. */
static int table_lines(const char *md, const char *from) {
    const char *p = from ? strstr(md, from) : md, *end = p ? strstr(p + 1, "\n## ") : NULL;
    int n = 0;
    for (; p && (p = strstr(p, "\n| ")) && (!end || p < end); p++) n++;
    return n;
}

static int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* Number after "key": in a JSON line; NAN if absent. */
static double json_num(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    return p ? atof(p + strlen(pat)) : NAN;
}

/* The line of a .jsonl file holding `needle` (the last one if several), malloc'd. */
static char *jsonl_line(const char *path, const char *needle) {
    char *s = test_read_file(path, NULL), *res = NULL;
    if (!s) return NULL;
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        if (strstr(line, needle)) {
            free(res);
            res = strdup(line);
        }
    free(s);
    return res;
}

/* row_fmt: how a row label appears in the .md ("| %s |", or "%s)" for the sharing labels). */
static void check_md(const char *table, const char *const *rows, int n_rows, const char *row_fmt) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.md", out, table);
    char *md = test_read_file(path, NULL);
    CHECK(md != NULL, "%s written", path);
    if (!md) return;
    for (int i = 0; i < n_rows; i++) {
        char row[96];
        snprintf(row, sizeof row, row_fmt, rows[i]);
        CHECK(count_of(md, row) == 1, "%s: one row '%s'", path, row);
    }
    int lines = table_lines(md, NULL);
    CHECK(lines == n_rows + 1, "%s: header + %d rows, found %d table lines", path, n_rows, lines);
    CHECK(count_of(md, " +- ") >= n_rows, "%s: mean +- std cells", path);
    CHECK(count_of(md, "**") >= 2, "%s: a best entry in bold", path);
    CHECK(strstr(md, "- command: `scripts/reproduce.sh all --quick") && strstr(md, "- machine: ") &&
          strstr(md, "cores") && strstr(md, "- wall time") && strstr(md, "- git revision: "),
          "%s: command, machine, cores, wall time and git revision recorded", path);
    /* every run of the table was trained by this invocation: one revision, n_rows x seeds runs */
    char rev[96] = "", want_runs[160];
    FILE *g = popen("git rev-parse HEAD 2>/dev/null", "r");
    if (g) {
        if (!fgets(rev, sizeof rev, g)) rev[0] = '\0';
        pclose(g);
    }
    rev[strcspn(rev, "\n")] = '\0';
    snprintf(want_runs, sizeof want_runs, "- training runs: %d at %s", n_rows * N_SEEDS, rev);
    CHECK(rev[0] && strstr(md, want_runs) && !strstr(md, "no REVISION file"), "%s: '%s'", path, want_runs);
    free(md);

    snprintf(path, sizeof path, "%s/%s.json", out, table);
    char *js = test_read_file(path, NULL), want[64];
    snprintf(want, sizeof want, "\"table\": \"%s\"", table);
    CHECK(js && strstr(js, want), "%s names its table", path);
    CHECK(js && count_of(js, "\"variant\":") == n_rows, "%s: %d rows", path, n_rows);
    CHECK(js && strstr(js, "\"git_revision\":") && strstr(js, "\"machine\":") && strstr(js, "\"wall_s\":") &&
          strstr(js, "\"seeds\":") && strstr(js, "\"family\": \"quick\""), "%s: provenance", path);
    free(js);
}

static void check_png(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", out, name);
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    int ok = png_image_begin_read_from_file(&im, path);
    CHECK(ok, "%s: a PNG libpng reads (%s)", path, ok ? "" : im.message);
    if (!ok) return;
    im.format = PNG_FORMAT_GRAY;
    CHECK(im.width >= 300 && im.height >= 200 && im.width <= 4000 && im.height <= 4000,
          "%s: plot-sized image, %ux%u", path, im.width, im.height);
    unsigned char *px = malloc(PNG_IMAGE_SIZE(im));
    ok = png_image_finish_read(&im, NULL, px, 0, NULL);
    CHECK(ok, "%s decodes fully (%s)", path, ok ? "" : im.message);
    if (ok) {
        size_t n = (size_t)im.width * im.height, dark = 0;
        for (size_t i = 0; i < n; i++) dark += px[i] < 128;
        CHECK(dark > n / 200 && dark < n / 2, "%s: drawn content (%zu of %zu pixels dark)", path, dark, n);
    }
    free(px);
    png_image_free(&im);
}

static void check_numbers(void) {
    char path[512];
    double learned = 0, at_125 = 0;
    int aware_drops = 0;
    for (int i = 0; i < N_PES; i++)
        for (int s = 0; s < N_SEEDS; s++) {
            char dir[384];
            snprintf(dir, sizeof dir, "%s/runs/quick/%s/seed%d", out, PES[i], s);
            snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
            char *fin = jsonl_line(path, "\"resolution\":16,");
            snprintf(path, sizeof path, "%s/eval_resolution.jsonl", dir);
            char *own = jsonl_line(path, "\"resolution\":16,");
            char *r20 = jsonl_line(path, "\"resolution\":20,");
            snprintf(path, sizeof path, "%s/eval_shuffle.jsonl", dir);
            char *sh = jsonl_line(path, "shuffled_top1");
            CHECK(fin && own && r20 && sh, "%s: final eval, 16px and 20px evaluations, shuffle line", dir);
            if (fin && own && r20 && sh) {
                double t = json_num(fin, "top1");
                learned += t / (N_PES * N_SEEDS);
                CHECK_CLOSE(json_num(own, "top1"), t, 1e-9, 0, "%s: eval at its own size equals the "
                            "training's final evaluation", dir);
                CHECK_CLOSE(json_num(own, "loss"), json_num(fin, "loss"), 1e-6, 1e-6, "%s: same loss", dir);
                CHECK_CLOSE(json_num(sh, "top1"), t, 1e-9, 0, "%s: shuffle line's unshuffled top-1", dir);
                double r = json_num(r20, "top1");
                CHECK(r >= 0 && r <= 100 && json_num(r20, "n") == 128, "%s at 20px: top-1 %g over n 128", dir, r);
                at_125 += r / (N_PES * N_SEEDS);
                double drop = json_num(sh, "top1") - json_num(sh, "shuffled_top1");
                CHECK_CLOSE(json_num(sh, "top1_drop_rel"), t > 0 ? drop / t : 0, 1e-5, 0,
                            "%s: relative drop = (before - after) / before", dir);
                if (!strcmp(PES[i], "none"))
                    CHECK(drop == 0, "%s: a PE-free model is invariant to patch shuffling (drop %g)", dir, drop);
                else
                    aware_drops += drop > 5;
            }
            free(fin);
            free(own);
            free(r20);
            free(sh);
        }
    CHECK(learned > 60, "quick runs learn: mean final top-1 %.1f%% (chance 25%%)", learned);
    CHECK(at_125 > 40, "at 1.25x the training size: mean top-1 %.1f%% (chance 25%%)", at_125);
    CHECK(aware_drops >= 12, "shuffling costs the position-aware models > 5 points in %d of 16 runs",
          aware_drops);
}

static void check_configs(void) {
    glob_t g;
    int rc = glob("configs/*.json", 0, NULL, &g);
    CHECK(rc == 0 && g.gl_pathc >= 4 * (size_t)N_PES, "configs/*.json: %zu files", rc == 0 ? g.gl_pathc : 0);
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
        vt_config c;
        vt_status st = vt_resolve_file(&c, g.gl_pathv[i], NULL, 0);
        CHECK(st == VT_OK, "%s loads: %s", g.gl_pathv[i], st == VT_OK ? "" : vt_last_error());
    }
    if (rc == 0) globfree(&g);
    static const char *fams[] = {"fmnist", "fmnist14", "cifar100", "in1k"};
    for (int f = 0; f < 4; f++) {
        vt_config ref;
        char path[256];
        snprintf(path, sizeof path, "configs/%s_%s.json", PES[0], fams[f]);
        if (vt_resolve_file(&ref, path, NULL, 0) != VT_OK) continue;
        char *want = vt_config_to_json(&ref);
        int kinds = 0;
        for (int i = 1; i < N_PES; i++) {
            vt_config c;
            snprintf(path, sizeof path, "configs/%s_%s.json", PES[i], fams[f]);
            if (vt_resolve_file(&c, path, NULL, 0) != VT_OK) continue;
            kinds += c.pe.kind != ref.pe.kind || c.pe.ape != ref.pe.ape;
            c.pe = ref.pe;
            char *got = vt_config_to_json(&c);
            CHECK(strcmp(got, want) == 0, "%s: same recipe as %s_%s.json apart from pe", path, PES[0], fams[f]);
            free(got);
        }
        CHECK(kinds == N_PES - 1, "%s: every PE config has its own PE (%d of %d differ)", fams[f], kinds,
              N_PES - 1);
        free(want);
    }
}

/* Text of "key": up to the next ',' or '}' in line, into buf ("" if absent). */
static const char *json_text(const char *line, const char *key, char *buf, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = line ? strstr(line, pat) : NULL;
    buf[0] = '\0';
    if (p) {
        p += strlen(pat);
        size_t n = strcspn(p, ",}\n");
        snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
    }
    return buf;
}

/* Top-1 cells (mean) of one positions.md row "| pe | label | c1 | c2 | ... |". */
static int md_row_means(const char *md, const char *pe, const char *label, double *means, int max) {
    char head[128];
    snprintf(head, sizeof head, "\n| %s | %s |", pe, label);
    const char *p = md ? strstr(md, head) : NULL;
    if (!p) return 0;
    p += strlen(head);
    int n = 0;
    while (n < max && *p == ' ') {
        while (*p == ' ' || *p == '*') p++;
        means[n++] = atof(p);
        p = strchr(p, '|');
        if (!p || p[1] == '\n' || p[1] == '\0') break;
        p++;
    }
    return n;
}

static void check_positions(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/positions.md", out);
    char *md = test_read_file(path, NULL);
    CHECK(md != NULL, "%s written", path);
    if (!md) return;
    CHECK(strstr(md, "| PE | positions | 12 (0.75x) | 16* (1.00x) | 20 (1.25x) | 24 (1.50x) | 28 (1.75x) | 32 (2.00x) |")
          != NULL, "positions: the resolution table's columns");
    int rows = table_lines(md, NULL);
    CHECK(rows == 1 + 3 + N_ROT * 3 + 2, "positions: header + 3 APE rows + 3 modes x %d rotary PEs + 2 LieRE "
          "evaluated-grid rows, found %d table lines", N_ROT, rows);
    double gain = 0, m_trained[6], m_kept[6];
    int n_kinds = 0;
    for (int i = 0; i < N_ROT; i++) {
        int liere = !strncmp(ROTARY[i], "liere", 5);
        int a = md_row_means(md, ROTARY[i], liere ? "normalized (trained)" : "index (trained)", m_trained, 6);
        int b = md_row_means(md, ROTARY[i], liere ? "normalized to the evaluated grid" : "interpolate", m_kept, 6);
        CHECK(a == 6 && b == 6, "positions: %s rows of 6 sizes (%d, %d)", ROTARY[i], a, b);
        if (a == 6 && b == 6) {
            CHECK(m_trained[1] == m_kept[1], "%s: the same top-1 at the training size (%g, %g)", ROTARY[i],
                  m_trained[1], m_kept[1]);
            gain += m_kept[5] - m_trained[5];
            n_kinds++;
        }
    }
    CHECK(n_kinds == N_ROT && gain / N_ROT > 10, "at 2x, positions kept in the trained range gain %.1f points on "
          "average over extrapolating ones", n_kinds ? gain / n_kinds : 0.0);
    int a = md_row_means(md, "ape_sincos", "sin-cos, recomputed", m_trained, 6);
    int b = md_row_means(md, "ape_sincos", "sin-cos, interpolated", m_kept, 6);
    CHECK(a == 6 && b == 6 && m_kept[1] == m_trained[1] && m_kept[5] > m_trained[5] + 10,
          "sin-cos APE at 2x: interpolated %g vs recomputed %g", b == 6 ? m_kept[5] : -1.0, a == 6 ? m_trained[5] : -1.0);
    CHECK(md_row_means(md, "ape", "learned, resampled", m_kept, 6) == 6, "positions: the learned APE row");
    rows = table_lines(md, "\n## Positions kept in the trained range");
    CHECK(rows == 1 + (1 + N_ROT) * 5, "positions: paired tests of %d PEs at the 5 other sizes, found %d lines",
          1 + N_ROT, rows);
    rows = table_lines(md, "\n## The papers' claims with positions kept in the trained range");
    CHECK(rows == 1 + 8 * 4, "positions: the 8 claims at the 4 larger sizes, positions kept in range (%d lines)", rows);
    CHECK(strstr(md, "- command: `scripts/reproduce.sh all --quick") && strstr(md, "- machine: ") &&
          strstr(md, "- wall time") && strstr(md, "- git revision: ") && count_of(md, "**") >= 2,
          "positions.md: provenance lines and bold best entries");
    free(md);
    snprintf(path, sizeof path, "%s/positions.json", out);
    char *js = test_read_file(path, NULL);
    CHECK(js && strstr(js, "\"table\": \"positions\"") && count_of(js, "\"label\":") == 3 + 3 * N_ROT + 2 &&
          count_of(js, "\"kept\":") == (1 + N_ROT) * 5 && count_of(js, "\"positions\": \"interpolate\"") == N_ROT &&
          strstr(js, "\"git_revision\":"),
          "positions.json: %d rows, one interpolate row per rotary PE, provenance", 3 + 3 * N_ROT + 2);
    free(js);

    /* a stale evaluation contradicting the others at the training size stops the table */
    char dir[384];
    snprintf(dir, sizeof dir, "%s/runs/quick/circulant/seed1", out);
    int rc = run("cp %s/eval_positions_interpolate.jsonl %s/keep.jsonl && "
                 "sed -i 's/\"resolution\":16,\"top1\":[0-9.]*/\"resolution\":16,\"top1\":1.5/' "
                 "%s/eval_positions_interpolate.jsonl && "
                 "scripts/reproduce.sh positions --quick --seeds 0,1 --out %s --bin %s >/dev/null 2>%s.log4",
                 dir, dir, dir, out, bin, out);
    snprintf(path, sizeof path, "%s.log4", out);
    char *log = test_read_file(path, NULL);
    CHECK(rc == 1 && log && strstr(log, "circulant seed 1 at the training size 16px: interpolate and index differ"),
          "build_results refuses a positions table whose interpolate row disagrees at the training size (exit %d)",
          rc);
    free(log);
    run("mv %s/keep.jsonl %s/eval_positions_interpolate.jsonl", dir, dir);
}

/* build_results' t-tests against values scipy 1.10.1 printed (stats.ttest_ind(equal_var=False),
 * stats.ttest_rel) for the same inputs. */
static void check_tests_stats(void) {
    int rc = run("/usr/bin/python3 -c 'import sys; sys.path.insert(0, \"scripts\"); import build_results as b; "
                 "d, t, df, p = b.welch([1, 2, 3], [4, 5, 7]); "
                 "e, u, dg, q = b.paired([85.1, 86.0, 84.2], [80.3, 83.9, 81.0]); "
                 "ok = abs(t + 3.1622776601683795) < 1e-9 and abs(p - 0.041914517471454) < 1e-9 and "
                 "abs(u - 4.294956881181873) < 1e-9 and abs(q - 0.050166073734135265) < 1e-9 and dg == 2; "
                 "sys.exit(0 if ok else 1)'");
    CHECK(rc == 0, "Welch and paired t-tests of build_results.py match scipy's");
}

/* --jobs 1 gives the numbers of --jobs 2; a failing run stops the table with exit 1. */
static void check_jobs(void) {
    char path[512];
    int rc = run("scripts/reproduce.sh classification --quick --seeds 0,1 --jobs 1 --out %s/jobs1 --bin %s "
                 ">/dev/null 2>%s.log5", out, bin, out);
    CHECK(rc == 0, "classification --jobs 1 exit %d", rc);
    rc = run("/usr/bin/python3 -c 'import json, sys; r = [[x[\"top1\"] for x in json.load(open(f))[\"rows\"]] "
             "for f in sys.argv[1:]]; sys.exit(r[0] != r[1])' %s/classification.json %s/jobs1/classification.json",
             out, out);
    CHECK(rc == 0, "--jobs 1 and --jobs 2 give the same top-1 of every run");
    snprintf(path, sizeof path, "%s/fail.sh", out);
    FILE *f = fopen(path, "w");
    if (f) {
        /* every run fails; the registry listing (`kinds`) still answers, from the real binary */
        fprintf(f, "#!/bin/sh\nif [ \"$1\" = kinds ]; then exec %s \"$@\"; fi\n"
                   "echo 'vitrain: simulated failure' >&2\nexit 3\n", bin);
        fclose(f);
    }
    rc = run("chmod +x %s/fail.sh && scripts/reproduce.sh classification --quick --seeds 0,1 --jobs 2 --out %s/failed "
             "--bin %s/fail.sh >/dev/null 2>%s.log6", out, out, out, out);
    snprintf(path, sizeof path, "%s.log6", out);
    char *log = test_read_file(path, NULL);
    snprintf(path, sizeof path, "%s/failed/classification.md", out);
    CHECK(rc == 1 && log && strstr(log, "simulated failure") && strstr(log, "stopped after a failed run") &&
          access(path, F_OK) != 0, "a failing run with --jobs 2: exit %d (want 1), its log shown, no table", rc);
    free(log);
}

/* The fmnist14 configs through --quick (tiny model, synthetic data, their RandomResizedCrop)
 * with the sweep on the first 64 of 128 validation images. */
static void check_family14(void) {
    char path[512];
    int rc = run("scripts/reproduce.sh classification,resolution --quick --family fmnist14 --seeds 0,1 --jobs 2 "
                 "--eval-samples 64 --out %s/f14 --bin %s >/dev/null 2>%s.log7", out, bin, out);
    CHECK(rc == 0, "fmnist14 --quick --eval-samples 64: exit %d (log %s.log7)", rc, out);
    snprintf(path, sizeof path, "%s/f14/resolution.md", out);
    char *md = test_read_file(path, NULL);
    CHECK(md && strstr(md, "(quick_fmnist14 family)") && strstr(md, "64 validation images") &&
          strstr(md, "--eval-samples 64") && strstr(md, "2 runs at once"),
          "fmnist14 resolution.md: family, evaluated images, command and jobs recorded");
    free(md);
    snprintf(path, sizeof path, "%s/f14/runs/quick_fmnist14/rope_mixed/seed0/eval_resolution.jsonl", out);
    char *r20 = jsonl_line(path, "\"resolution\":20,");
    CHECK(r20 && json_num(r20, "n") == 64, "the sweep evaluated 64 images (%s)", r20 ? r20 : "none");
    free(r20);
    snprintf(path, sizeof path, "%s/f14/runs/quick_fmnist14/rope_mixed/seed0/config.json", out);
    char *cfg = test_read_file(path, NULL);
    CHECK(cfg && strstr(cfg, "\"train_transform\": \"rrc\""), "fmnist14 trains with RandomResizedCrop");
    free(cfg);
    snprintf(path, sizeof path, "%s/f14/runs/quick_fmnist14/rope_mixed/seed0/metrics.jsonl", out);
    char *fin = jsonl_line(path, "\"kind\":\"eval\"");
    CHECK(fin && json_num(fin, "n") == 128, "training's own evaluation uses the whole split");
    free(fin);
}

/* --pes restricts a table to some PEs (positions.md is rewritten with their rows only). */
static void check_pes(void) {
    char path[512];
    run("rm -f %s/runs/quick/rope_axial/seed1/REVISION", out); /* as a run of an older reproduce.sh */
    int rc = run("scripts/reproduce.sh positions --quick --seeds 0,1 --pes ape,rope_axial --out %s --bin %s "
                 ">/dev/null 2>%s.log8", out, bin, out);
    snprintf(path, sizeof path, "%s.log8", out);
    char *log = test_read_file(path, NULL);
    CHECK(rc == 0 && log && !strstr(log, "training") && !strstr(log, "evaluating"),
          "positions --pes ape,rope_axial reuses the runs and evaluations (exit %d)", rc);
    free(log);
    snprintf(path, sizeof path, "%s/positions.md", out);
    char *md = test_read_file(path, NULL);
    CHECK(md && table_lines(md, NULL) == 1 + 1 + 3 && strstr(md, "| rope_axial | interpolate |") &&
              !strstr(md, "| rope_mixed |") && !strstr(md, "| ape_sincos |") && strstr(md, "--pes ape,rope_axial"),
          "positions.md with --pes: the learned APE and RoPE-Axial's 3 modes only, and the command says so");
    CHECK(md && strstr(md, "- training runs: 3 at ") && strstr(md, "; 1 with no REVISION file"),
          "positions.md: 3 runs with their training revision, one without");
    CHECK(md && table_lines(md, "\n## The papers' claims with positions kept in the trained range") == 1 + 4,
          "positions.md with --pes ape,rope_axial: the one claim between them at 4 sizes");
    free(md);
    rc = run("scripts/reproduce.sh positions --quick --pes ape,rope --out %s --bin %s >/dev/null 2>%s.log8", out,
             bin, out);
    snprintf(path, sizeof path, "%s.log8", out);
    log = test_read_file(path, NULL);
    CHECK(rc == 2 && log && strstr(log, "--pes: unknown PE 'rope'"), "--pes with an unknown PE exits 2 (exit %d)", rc);
    free(log);
}

static void check_eval_cli(void) {
    char dir[384], path[512], a[64], b[64];
    snprintf(dir, sizeof dir, "%s/runs/quick/rope_mixed/seed1", out);
    int rc = run("%s eval %s/config.json --checkpoint %s/last.safetensors --threads 1 >%s/plain.jsonl 2>/dev/null",
                 bin, dir, dir, out);
    CHECK(rc == 0, "plain vitrain eval exit %d", rc);
    rc = run("%s eval %s/config.json --checkpoint %s/last.safetensors --threads 1 --resolutions 24,16 "
             "--patch-shuffle --seed 5 >%s/multi.jsonl 2>%s/multi.err", bin, dir, dir, out, out);
    CHECK(rc == 0, "vitrain eval --resolutions 24,16 --patch-shuffle exit %d", rc);
    snprintf(path, sizeof path, "%s/plain.jsonl", out);
    char *plain = jsonl_line(path, "\"resolution\":16,");
    snprintf(path, sizeof path, "%s/multi.jsonl", out);
    char *own = jsonl_line(path, "\"resolution\":16,"), *big = jsonl_line(path, "\"resolution\":24,");
    CHECK(plain && own && big, "JSON lines at 16 (plain and listed) and 24");
    CHECK(!strcmp(json_text(plain, "top1", a, sizeof a), json_text(own, "top1", b, sizeof b)) && a[0],
          "own size in --resolutions equals the plain eval: top-1 %s vs %s", a, b);
    CHECK(!strcmp(json_text(plain, "loss", a, sizeof a), json_text(own, "loss", b, sizeof b)) && a[0],
          "and the same loss: %s vs %s", a, b);
    CHECK(own && strstr(own, "\"shuffle_seed\":5,") && strstr(own, "\"shuffled_top1\":") &&
          big && strstr(big, "\"top1_drop_rel\":"), "--patch-shuffle fields in every line");
    CHECK(plain && !strstr(plain, "shuffled"), "no shuffle fields without --patch-shuffle");
    snprintf(path, sizeof path, "%s/multi.err", out);
    char *err = test_read_file(path, NULL);
    CHECK(err && strstr(err, "resolution") && strstr(err, "shuf top-1") && strstr(err, "\n24 ") &&
          strstr(err, "\n16 "), "readable table with both sizes on stderr");
    free(err);
    free(plain);
    free(own);
    free(big);
    static const struct { const char *args, *msg; } bad[] = {
        {"--resolutions 16,x", "comma-separated image sizes"},
        {"--resolutions 18", "18 is not a multiple of model.patch_size = 4"},
        {"--seed 1", "--seed only seeds the --patch-shuffle"},
        {"--patch-shuffle=1", "--patch-shuffle takes no value"},
    };
    for (int i = 0; i < 4; i++) {
        rc = run("%s eval %s/config.json --checkpoint %s/last.safetensors %s >/dev/null 2>%s/bad.err", bin,
                 dir, dir, bad[i].args, out);
        snprintf(path, sizeof path, "%s/bad.err", out);
        err = test_read_file(path, NULL);
        CHECK(rc == 2 && err && strstr(err, bad[i].msg), "'%s': exit %d (want 2) and '%s'", bad[i].args, rc,
              bad[i].msg);
        free(err);
    }
}

int main(void) {
    list_variants();
    check_configs();
    e2e_bin(bin, sizeof bin);
    snprintf(out, sizeof out, "/tmp/vt_e2e_reproduce_%d", (int)getpid());
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "vitrain binary %s not found (set VT_BIN)\n", bin);
        CHECK(0, "binary present");
        return test_summary();
    }
    int rc = run("scripts/reproduce.sh all --quick --seeds 0,1 --jobs 2 --out %s --bin %s 2>%s.log >/dev/null", out,
                 bin, out);
    CHECK(rc == 0, "reproduce.sh all --quick exit %d (log %s.log)", rc, out);
    if (rc != 0) {
        run("tail -30 %s.log >&2", out);
        return test_summary();
    }
    check_md("classification", PES, N_PES, "| %s |");
    check_md("resolution", PES, N_PES, "| %s |");
    check_md("shuffle", PES, N_PES, "| %s |");
    check_md("sharing", SHARE_ROWS, 4, "%s)");
    char path[512];
    snprintf(path, sizeof path, "%s/resolution.md", out);
    char *md = test_read_file(path, NULL);
    CHECK(md && strstr(md, "| 12 (0.75x) | 16* (1.00x) | 20 (1.25x) | 24 (1.50x) | 28 (1.75x) | 32 (2.00x) |"),
          "resolution columns 0.75x .. 2x in multiples of the patch");
    int claims = md ? table_lines(md, "\n## The papers' claims at larger sizes") : 0;
    CHECK(claims == 1 + 8 * 4, "resolution.md: 8 claims tested at the 4 larger sizes, found %d lines", claims);
    CHECK(md && count_of(md, "| agree |") + count_of(md, "| disagree |") + count_of(md, "| not resolved |") == 32,
          "every claim row has a verdict");
    free(md);
    check_png("classification_curves.png");
    check_png("resolution.png");
    check_png("shuffle.png");
    check_png("sharing_curves.png");
    check_png("positions.png");
    check_numbers();
    check_positions();
    check_tests_stats();
    check_jobs();
    check_family14();
    check_eval_cli();
    check_pes();

    rc = run("scripts/reproduce.sh shuffle --quick --seeds 0,1 --out %s --bin %s 2>%s.log2 >/dev/null", out,
             bin, out);
    snprintf(path, sizeof path, "%s.log2", out);
    char *log = test_read_file(path, NULL);
    CHECK(rc == 0 && log && !strstr(log, "training") && !strstr(log, "evaluating"),
          "a second run reuses the runs and evaluations (exit %d)", rc);
    free(log);
    rc = run("scripts/reproduce.sh tables --quick --out %s --bin %s 2>%s.log3", out, bin, out);
    snprintf(path, sizeof path, "%s.log3", out);
    log = test_read_file(path, NULL);
    CHECK(rc == 2 && log && strstr(log, "unknown table 'tables'"), "a bad table name exits 2 naming it");
    free(log);
    if (test_failed_count == 0) run("rm -rf %s %s.log*", out, out);
    return test_summary();
}
