/* e2e_timm.c - scripts/timm_convert.py both ways, checked by logits, without timm.
 *
 * Needs a python3 with numpy (Debian's python3-numpy, installed by scripts/deps.sh; tried:
 * $VT_PYTHON, python3, /usr/bin/python3); without one every check is skipped with the
 * reason. Run from the repository root (scripts/run_tests.sh does).
 *   - from-timm: every timm fixture (tests/fixtures/timm, see test_timm.c), given its
 *     constructor spec, becomes a vitrain checkpoint whose own config (in its metadata)
 *     builds a model with timm's logits at every evaluated size: VisionTransformer,
 *     BF16, Eva with q_bias/v_bias, F16, no_embed_class, and Eva's default 'ij' indexing
 *     and temperature 1e4 (axes swapped exactly by the converter);
 *   - to-timm of those gives back the timm file's tensors bitwise (where the layout is the
 *     one to-timm writes) and prints the exact constructor;
 *   - vitrain -> timm -> vitrain for every kind timm has (learned and sin-cos APE, RoPE-Axial,
 *     RoPE-Mixed with and without APE, LieRE-Commute as RoPE-Mixed with positions
 *     normalized folded into the frequencies): the reference logits of the PE fixtures
 *     (position-encodings.md in float64) are reproduced;
 *   - the kinds timm lacks and bad arguments are refused with exit 1 and a message naming
 *     the kind or argument.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"

#include "safetensors.h"
#include "config.h"
#include "resolve.h"
#include "kernels.h"
#include "tape.h"
#include "vit.h"
#include "vit_fixture.h"
#include "weights.h"

static char py[256];
static char tmp[64];

static int find_python(void) {
    const char *cands[3] = {getenv("VT_PYTHON"), "python3", "/usr/bin/python3"};
    for (int i = 0; i < 3; i++) {
        if (!cands[i] || !cands[i][0]) continue;
        if (run("%s -c 'import numpy' >/dev/null 2>&1", cands[i]) == 0) {
            snprintf(py, sizeof py, "%s", cands[i]);
            return 1;
        }
    }
    return 0;
}

static double max_diff(const float *a, const float *b, int64_t n, double *scale) {
    double d = 0;
    *scale = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)b[i]));
    }
    return d;
}

/* A vitrain checkpoint with its config in the metadata: the model it describes. */
static int open_model(const char *path, vt_vit *m) {
    vt_safetensors st;
    if (vt_st_read(path, &st) != VT_OK) {
        CHECK(0, "%s: %s", path, vt_last_error());
        return 0;
    }
    const char *json = vt_st_meta(&st, "config");
    vt_config cfg;
    int ok = json && vt_resolve_json(&cfg, json, path) == VT_OK && vit_init_config(m, &cfg, 1) == VT_OK;
    CHECK(ok, "%s: config in the metadata builds a model: %s", path, json ? vt_last_error() : "no config");
    vt_st_free(&st);
    if (!ok) return 0;
    vt_status s = vt_vit_load(m, path);
    CHECK(s == VT_OK, "%s: loads: %s", path, vt_last_error());
    if (s != VT_OK) vt_vit_free(m);
    return s == VT_OK;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

/* The converted model's logits against every output.logits_S of ref. */
static void check_logits(const char *what, vt_vit *m, const vt_safetensors *ref, double tol) {
    for (int i = 0; i < ref->n; i++) {
        int S;
        if (sscanf(ref->tensors[i].name, "output.logits_%d", &S) != 1) continue;
        char iname[64];
        snprintf(iname, sizeof iname, "input.images_%d", S);
        const vt_st_tensor *img = vt_st_find(ref, iname);
        if (!img) continue;
        int64_t n;
        float *got = vit_infer(m, img->data, img->shape, &n);
        double scale, d = max_diff(got, ref->tensors[i].data, n, &scale);
        CHECK(n == ref->tensors[i].size && d <= tol * fmax(scale, 1.0),
              "%s at %d px: max |vitrain - timm| %.3g (max |logit| %.3g)", what, S, d, scale);
        fprintf(stderr, "  %s at %d px: max |vitrain - timm| %.3g (max |logit| %.3g)\n", what, S, d, scale);
        free(got);
    }
}

/* Same names, shapes and values (float32 after widening). */
static void check_same_tensors(const char *what, const char *a_path, const char *b_path) {
    vt_safetensors a, b;
    if (vt_st_read(a_path, &a) != VT_OK || vt_st_read(b_path, &b) != VT_OK) {
        CHECK(0, "%s: %s", what, vt_last_error());
        return;
    }
    int same = a.n == b.n;
    for (int i = 0; same && i < a.n; i++) {
        const vt_st_tensor *x = &a.tensors[i], *y = vt_st_find(&b, x->name);
        same = y && x->size == y->size && x->ndim == y->ndim &&
               memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim) == 0 &&
               memcmp(x->data, y->data, (size_t)x->size * 4) == 0;
        if (!same) fprintf(stderr, "  %s: tensor %s differs\n", what, x->name);
    }
    CHECK(same, "%s: to-timm gives back the timm file's tensors (%d vs %d)", what, a.n, b.n);
    vt_st_free(&a);
    vt_st_free(&b);
}

static void test_from_timm(const char *name, int round_trip, const char *want_arg) {
    char fix[256], ref_path[256], spec[256], out[256], back[256], log[256];
    snprintf(fix, sizeof fix, "tests/fixtures/timm/%s.safetensors", name);
    snprintf(ref_path, sizeof ref_path, "tests/fixtures/timm/%s.ref.safetensors", name);
    snprintf(spec, sizeof spec, "%s/%s.spec.json", tmp, name);
    snprintf(out, sizeof out, "%s/%s.vitrain.safetensors", tmp, name);
    snprintf(back, sizeof back, "%s/%s.back.safetensors", tmp, name);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    vt_safetensors ref;
    if (vt_st_read(ref_path, &ref) != VT_OK || !vt_st_meta(&ref, "timm")) {
        CHECK(0, "%s: reference with a timm spec: %s", name, vt_last_error());
        return;
    }
    write_text(spec, vt_st_meta(&ref, "timm"));
    int rc = run("%s scripts/timm_convert.py from-timm %s %s --spec %s >%s 2>&1", py, fix, out, spec, log);
    CHECK(rc == 0, "%s: from-timm exit %d (log %s)", name, rc, log);
    vt_vit m;
    if (rc == 0 && open_model(out, &m)) {
        check_logits(name, &m, &ref, 2e-5);
        vt_vit_free(&m);
    }
    if (rc == 0 && round_trip) {
        rc = run("%s scripts/timm_convert.py to-timm %s %s >%s 2>&1", py, out, back, log);
        CHECK(rc == 0, "%s: to-timm exit %d (log %s)", name, rc, log);
        if (rc == 0) check_same_tensors(name, fix, back);
        char *text = test_read_file(log, NULL);
        CHECK(text && strstr(text, want_arg) && strstr(text, "load_state_dict"),
              "%s: to-timm prints the constructor with %s:\n%s", name, want_arg, text ? text : "");
        free(text);
    }
    vt_st_free(&ref);
}

/* A vitrain PE fixture with its config resolved (the converter reads resolved configs),
 * model tensors only. */
static int resolved_copy(const char *fixture, const char *dst, vt_safetensors *st) {
    if (vt_st_read(fixture, st) != VT_OK) {
        CHECK(0, "%s: %s", fixture, vt_last_error());
        return 0;
    }
    vt_config cfg;
    const char *json = vt_st_meta(st, "config");
    if (!json || vt_resolve_json(&cfg, json, fixture) != VT_OK) {
        CHECK(0, "%s: config: %s", fixture, vt_last_error());
        return 0;
    }
    char *resolved = vt_config_to_json(&cfg);
    vt_st_tensor *ts = calloc((size_t)st->n, sizeof *ts);
    int n = 0;
    for (int i = 0; i < st->n; i++) {
        const char *nm = st->tensors[i].name;
        if (!strncmp(nm, "input.", 6) || !strncmp(nm, "output.", 7) || !strncmp(nm, "grad.", 5) ||
            !strncmp(nm, "train.", 6))
            continue;
        ts[n++] = st->tensors[i];
    }
    const char *keys[1] = {"config"}, *vals[1] = {resolved};
    vt_status s = vt_st_write(dst, ts, n, keys, vals, 1);
    CHECK(s == VT_OK, "write %s: %s", dst, vt_last_error());
    free(ts);
    free(resolved);
    return s == VT_OK;
}

static void test_ours(const char *name, const char *want_arg) {
    char fix[256], src[256], timm[256], spec[256], back[256], log[256];
    snprintf(fix, sizeof fix, "tests/fixtures/%s.safetensors", name);
    snprintf(src, sizeof src, "%s/%s.src.safetensors", tmp, name);
    snprintf(timm, sizeof timm, "%s/%s.timm.safetensors", tmp, name);
    snprintf(spec, sizeof spec, "%s/%s.json", tmp, name);
    snprintf(back, sizeof back, "%s/%s.back.safetensors", tmp, name);
    snprintf(log, sizeof log, "%s/%s.log", tmp, name);
    vt_safetensors st;
    if (!resolved_copy(fix, src, &st)) return;
    int rc = run("%s scripts/timm_convert.py to-timm %s %s --spec %s >%s 2>&1", py, src, timm, spec, log);
    CHECK(rc == 0, "%s: to-timm exit %d (log %s)", name, rc, log);
    char *text = test_read_file(log, NULL);
    CHECK(rc != 0 || (text && strstr(text, want_arg)), "%s: constructor has %s:\n%s", name, want_arg,
          text ? text : "");
    free(text);
    if (rc == 0) rc = run("%s scripts/timm_convert.py from-timm %s %s --spec %s >%s 2>&1", py, timm, back, spec, log);
    CHECK(rc == 0, "%s: from-timm exit %d (log %s)", name, rc, log);
    vt_vit m;
    const vt_st_tensor *img = vt_st_find(&st, "input.images"), *want = vt_st_find(&st, "output.logits");
    if (rc == 0 && img && want && open_model(back, &m)) {
        int64_t n;
        float *got = vit_infer(&m, img->data, img->shape, &n);
        double scale, d = max_diff(got, want->data, n, &scale);
        CHECK(n == want->size && d <= 2e-5 * fmax(scale, 1.0),
              "%s: vitrain -> timm -> vitrain logits differ from the reference by %.3g", name, d);
        fprintf(stderr, "  %s -> timm -> vitrain: max |logit - reference| %.3g (max |logit| %.3g)\n", name, d, scale);
        free(got);
        vt_vit_free(&m);
    }
    vt_st_free(&st);
}

static void test_refused(void) {
    char src[256], out[256], log[256];
    snprintf(out, sizeof out, "%s/refused.safetensors", tmp);
    snprintf(log, sizeof log, "%s/refused.log", tmp);
    const char *kinds[4][2] = {{"vit_pe_cayley", "pe.kind = cayley: timm has no equivalent"},
                               {"vit_pe_circulant", "pe.kind = circulant: timm has no equivalent"},
                               {"vit_pe_liere", "pe.kind = liere: timm has no equivalent"},
                               {"vit_pe_rope_mixed_res", "pe.positions = interpolate"}};
    for (int i = 0; i < 4; i++) {
        char fix[256];
        vt_safetensors st;
        snprintf(fix, sizeof fix, "tests/fixtures/%s.safetensors", kinds[i][0]);
        snprintf(src, sizeof src, "%s/%s.src.safetensors", tmp, kinds[i][0]);
        if (!resolved_copy(fix, src, &st)) continue;
        vt_st_free(&st);
        int rc = run("%s scripts/timm_convert.py to-timm %s %s >%s 2>&1", py, src, out, log);
        char *text = test_read_file(log, NULL);
        CHECK(rc == 1 && text && strstr(text, kinds[i][1]) && access(out, F_OK) != 0,
              "%s refused (exit %d): %s", kinds[i][0], rc, text ? text : "");
        free(text);
    }
    struct {
        const char *args, *want;
    } bad[] = {
        {"--model vit --kwargs '{\"num_heads\": 3}'", "num_heads=3"},
        {"--model vit --kwargs '{\"weight_init_x\": 1}'", "weight_init_x"},
        {"--model vit --kwargs '{\"embed_dim\": 64}'", "embed_dim=64 disagrees with the tensors (32)"},
        {"--model vit --kwargs '{\"num_heads\": 2, \"pos_embed\": \"none\"}'", "pos_embed='none' but the file has"},
        {"--model eva --kwargs '{\"num_heads\": 2, \"global_pool\": \"token\", \"init_values\": 0.1}'",
         "init_values=0.1 but the file lacks"},
        {"--model vit --kwargs '{\"num_heads\": 2, \"global_pool\": \"avg\"}'", "fc_norm"},
        {"--model vit --kwargs '{\"class_token\": false}'", "class_token=False"},
        {"", "needs --spec FILE or --model"},
        /* the head count is not in the tensors: a name or num_heads tells it */
        {"--model vit --kwargs '{\"img_size\": 16}'", "num_heads is not in the tensors and was not given"},
        {"--model vit_tiny_patch16_224", "vit_tiny_patch16_224: embed_dim=192 disagrees with the tensors (32)"},
        {"--model vit_tiny_patch16_22", "did you mean 'vit_tiny_patch16_224'?"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run("%s scripts/timm_convert.py from-timm tests/fixtures/timm/vit_ape.safetensors %s %s >%s 2>&1",
                     py, out, bad[i].args, log);
        char *text = test_read_file(log, NULL);
        CHECK(rc == 1 && text && strstr(text, bad[i].want), "from-timm %s refused naming '%s' (exit %d): %s",
              bad[i].args, bad[i].want, rc, text ? text : "");
        free(text);
    }
    int rc = run("%s scripts/timm_convert.py to-timm tests/fixtures/timm/vit_ape.safetensors %s >%s 2>&1", py, out, log);
    char *text = test_read_file(log, NULL);
    CHECK(rc == 1 && text && strstr(text, "not a vitrain checkpoint"), "to-timm of a timm file: %s", text ? text : "");
    free(text);
}

/* A python with timm, torch and safetensors ($VT_TIMM_PYTHON, else scripts/timm_venv.sh's
 * .venv-timm), into tpy; 0 if none. */
static int find_timm_python(char *tpy, size_t len) {
    const char *cands[2] = {getenv("VT_TIMM_PYTHON"), ".venv-timm/bin/python"};
    for (int i = 0; i < 2; i++) {
        if (!cands[i] || !cands[i][0]) continue;
        if (run("%s -c 'import timm, torch, safetensors, numpy' >/dev/null 2>&1", cands[i]) == 0) {
            snprintf(tpy, len, "%s", cands[i]);
            return 1;
        }
    }
    return 0;
}

/* Every timm model name from-timm reads (`timm_convert.py names`): timm builds the model
 * by that name (small image, 5 classes, random weights), `from-timm --model NAME` converts
 * its state dict knowing nothing but the name and the two arguments changed, and the
 * converted checkpoint's own config gives timm's logits. */
static void test_names(void) {
    char tpy[256], names_path[128], log[128];
    int rc;
    if (!find_timm_python(tpy, sizeof tpy)) {
        fprintf(stderr, "e2e_timm: skipped: the timm model names round trip (no python with timm and torch: "
                "$VT_TIMM_PYTHON, or scripts/timm_venv.sh's .venv-timm)\n");
        return;
    }
    snprintf(names_path, sizeof names_path, "%s/names.txt", tmp);
    snprintf(log, sizeof log, "%s/names.log", tmp);
    rc = run("%s scripts/timm_convert.py names > %s", py, names_path);
    char *names = test_read_file(names_path, NULL);
    CHECK(rc == 0 && names && strstr(names, "vit_tiny_patch16_224\n") && strstr(names, "vit_base_patch16_224\n") &&
              strstr(names, "vit_small_patch16_rope_mixed_224\n"),
          "timm_convert.py names lists the supported names (exit %d)", rc);
    if (!names) return;
    /* one timm process makes every name's files in turn, waiting for each to be taken
     * (its state dict converted) */
    char cmd[4096];
    int o = snprintf(cmd, sizeof cmd, "nice -n 5 %s scripts/timm_name_reference.py %s --wait", tpy, tmp);
    for (char *line = strtok(names, "\n"); line && o < (int)sizeof cmd; line = strtok(NULL, "\n"))
        o += snprintf(cmd + o, sizeof cmd - (size_t)o, " %s", line);
    snprintf(cmd + o, sizeof cmd - (size_t)o, " 2>>%s", log);
    FILE *ref_pipe = popen(cmd, "r");
    CHECK(ref_pipe != NULL, "start %s", cmd);
    int n = 0;
    char name[128];
    int S;
    while (ref_pipe && fscanf(ref_pipe, "%127s %d", name, &S) == 2) {
        n++;
        char fix[256], ref_path[256], out[256];
        snprintf(fix, sizeof fix, "%s/%s.safetensors", tmp, name);
        snprintf(ref_path, sizeof ref_path, "%s/%s.ref.safetensors", tmp, name);
        snprintf(out, sizeof out, "%s/%s.vitrain.safetensors", tmp, name);
        rc = run("%s scripts/timm_convert.py from-timm %s %s --model %s --kwargs '{\"img_size\": %d, "
                 "\"num_classes\": 5}' >>%s 2>&1", py, fix, out, name, S, log);
        CHECK(rc == 0, "%s: from-timm --model %s exit %d (log %s)", name, name, rc, log);
        unlink(fix); /* the timm process makes the next name's files while this one is checked */
        vt_safetensors ref;
        vt_vit m;
        if (vt_st_read(ref_path, &ref) != VT_OK) {
            CHECK(0, "%s: %s", name, vt_last_error());
        } else {
            if (rc == 0 && open_model(out, &m)) {
                check_logits(name, &m, &ref, 1e-4);
                vt_vit_free(&m);
            }
            vt_st_free(&ref);
        }
        run("rm -f %s %s", ref_path, out);
    }
    rc = ref_pipe ? pclose(ref_pipe) : -1;
    CHECK(rc == 0, "timm built every name (status %d, log %s)", rc, log);
    free(names);
    CHECK(n >= 20, "%d timm names checked", n);
}

int main(void) {
    if (test_kernels_init()) return 1;
    if (!find_python()) {
        fprintf(stderr, "e2e_timm: skipped: no python3 with numpy ($VT_PYTHON, python3, /usr/bin/python3; "
                "Debian: python3-numpy, which scripts/deps.sh installs)\n");
        printf("0 passed, 0 failed, 1 skipped\n");
        return 0;
    }
    if (test_tmpdir(tmp, sizeof tmp, "timm")) return 1;
    fprintf(stderr, "e2e_timm: using %s\n", py);
    test_from_timm("vit_ape", 1, "global_pool='token'");
    test_from_timm("vit_ape_avg_bf16", 1, "init_values=0.1");
    test_from_timm("eva_rope_axial", 0, NULL);
    test_from_timm("eva_rope_mixed_f16", 1, "rope_type='mixed'");
    test_from_timm("eva_rope_mixed_ape", 0, NULL);
    test_from_timm("eva_rope_axial_ij", 0, NULL);
    test_from_timm("eva_rope_mixed_ij", 0, NULL);
    test_ours("vit_tiny", "VisionTransformer(img_size=8");
    test_ours("vit_tiny_avg", "init_values=0.1");
    test_ours("vit_pe_ape_sincos", "pos_embed='learn'");
    test_ours("vit_pe_rope_axial", "rope_type='cat', rope_temperature=100.0");
    test_ours("vit_pe_rope_mixed", "rope_grid_indexing='xy'");
    test_ours("vit_pe_rope_mixed_ape", "use_abs_pos_emb=True");
    test_ours("vit_pe_liere_commute", "rope_type='mixed'");
    test_refused();
    test_names();
    return e2e_finish(tmp);
}
