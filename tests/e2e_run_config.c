/* e2e_run_config.c - a run directory's own config.json is the run (issue 26 item 1), for
 * every dataset format of the registry, through the built binary ($VT_BIN, default
 * ./vitrain; run from the repository root, as scripts/run_tests.sh does).
 *
 * For each data.kind the test writes a tiny dataset in a temporary directory (IDX files,
 * synthetic needs none, an image folder of PNGs, CIFAR-10 and CIFAR-100 binaries; samples
 * of another native size than the model's input where the format allows, so the eval
 * geometry matters), trains a small ViT a few steps from a config that leaves the eval
 * geometry to its default, and checks:
 *   - `vitrain eval RUN/config.json --checkpoint RUN/last.safetensors` prints the run's
 *     final top-1 and loss, digit for digit (so does the original config);
 *   - the geometry is seen: evaluating with the other data.eval_transform gives another
 *     loss (the check above can fail);
 *   - training again from RUN/config.json gives the same metrics (times aside) and the
 *     same last.safetensors, byte for byte; its config.json is RUN's but for
 *     train.run_dir, which records each run's own directory.
 */
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e_util.h"
#include "harness.h"
#include "image_fixtures.h"

#include "config.h"
#include "data/formats.h"

static char bin[1024];
static char tmp[64];

enum { NTRAIN = 48, NVAL = 24, NATIVE = 12 };

/* A deterministic sample: class k's pattern (stripes of period 2 + k along x or y) with a
 * little index-dependent noise. */
static uint8_t pixel(int k, int i, int y, int x, int ch) {
    int v = ((k % 2 ? x : y) / (1 + k % 3)) % 2 ? 200 : 40;
    return (uint8_t)(v + (i * 7 + y * 3 + x * 5 + ch * 11) % 23);
}

static void mkdirs(const char *path) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(buf, 0755);
        *p = '/';
    }
    mkdir(buf, 0755);
}

static void be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* root/{split}-images-idx3-ubyte and -labels-idx1-ubyte: n gray NATIVE^2 images, 3 classes. */
static int write_idx_split(const char *root, const char *split, int n) {
    size_t px = (size_t)NATIVE * NATIVE;
    uint8_t *img = malloc(16 + (size_t)n * px), *lab = malloc(8 + (size_t)n);
    be32(img, 0x803);
    be32(img + 4, (uint32_t)n);
    be32(img + 8, NATIVE);
    be32(img + 12, NATIVE);
    be32(lab, 0x801);
    be32(lab + 4, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        lab[8 + i] = (uint8_t)(i % 3);
        for (int y = 0; y < NATIVE; y++)
            for (int x = 0; x < NATIVE; x++) img[16 + i * px + y * NATIVE + x] = pixel(i % 3, i, y, x, 0);
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/%s-images-idx3-ubyte", root, split);
    int rc = fx_write_bytes(p, img, 16 + (size_t)n * px);
    snprintf(p, sizeof p, "%s/%s-labels-idx1-ubyte", root, split);
    rc |= fx_write_bytes(p, lab, 8 + (size_t)n);
    free(img);
    free(lab);
    return rc;
}

/* root/<split>/c<k>/<i>.png: RGB NATIVE x (NATIVE + 2) images, 3 classes. */
static int write_folder_split(const char *root, const char *split, int n) {
    int rc = 0, w = NATIVE, h = NATIVE + 2;
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < n; i++) {
        int k = i % 3;
        char dir[1024], p[1100];
        snprintf(dir, sizeof dir, "%s/%s/c%d", root, split, k);
        mkdirs(dir);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                for (int ch = 0; ch < 3; ch++) px[(y * w + x) * 3 + ch] = pixel(k, i, y, x, ch);
        snprintf(p, sizeof p, "%s/%03d.png", dir, i);
        rc |= fx_write_png(p, w, h, PNG_COLOR_TYPE_RGB, 8, px, NULL, 0, NULL, 0, 0);
    }
    free(px);
    return rc;
}

/* One CIFAR binary file of n records (label bytes: coarse then fine for CIFAR-100). */
static int write_cifar_file(const char *path, int n, int first, int c100) {
    int rec = 3072 + (c100 ? 2 : 1);
    uint8_t *b = malloc((size_t)n * rec);
    for (int r = 0; r < n; r++) {
        int i = first + r, k = i % 3;
        uint8_t *p = b + (size_t)r * rec;
        if (c100) { p[0] = (uint8_t)(k + 1); p[1] = (uint8_t)(k * 7); p += 2; }
        else *p++ = (uint8_t)k;
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) p[(ch * 32 + y) * 32 + x] = pixel(k, i, y, x, ch);
    }
    int rc = fx_write_bytes(path, b, (size_t)n * rec);
    free(b);
    return rc;
}

static int write_cifar(const char *root, int c100) {
    char p[1024];
    int rc = 0;
    if (c100) {
        snprintf(p, sizeof p, "%s/train.bin", root);
        rc |= write_cifar_file(p, NTRAIN, 0, 1);
        snprintf(p, sizeof p, "%s/test.bin", root);
        return rc | write_cifar_file(p, NVAL, NTRAIN, 1);
    }
    for (int f = 0; f < 5; f++) {
        snprintf(p, sizeof p, "%s/data_batch_%d.bin", root, f + 1);
        rc |= write_cifar_file(p, NTRAIN / 5 + 1, f * (NTRAIN / 5 + 1), 0);
    }
    snprintf(p, sizeof p, "%s/test_batch.bin", root);
    return rc | write_cifar_file(p, NVAL, 1000, 0);
}

/* The value of "key": in the last line of text that contains `kind` (NUL-terminated
 * copy into out; "" if absent). */
static void last_value(const char *text, const char *kind, const char *key, char *out, size_t n) {
    out[0] = '\0';
    const char *line = text, *best = NULL;
    while (line && *line) {
        const char *nl = strchr(line, '\n');
        const char *k = strstr(line, kind);
        if (k && (!nl || k < nl)) best = line;
        line = nl ? nl + 1 : NULL;
    }
    if (!best) return;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *v = strstr(best, pat);
    const char *nl = strchr(best, '\n');
    if (!v || (nl && v > nl)) return;
    v += strlen(pat);
    size_t len = strcspn(v, ",}\n");
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), v);
}

/* metrics.jsonl without the timing fields ("img_per_s", "wall_s", a checkpoint's "seconds",
 * and its "bytes", which vary with the digits of the wall time the state file records). */
static char *metrics_untimed(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    char *s = test_read_file(p, NULL);
    if (!s) return NULL;
    const char *keys[4] = {"\"img_per_s\":", "\"wall_s\":", "\"seconds\":", "\"bytes\":"};
    for (int k = 0; k < 4; k++)
        for (char *q = s; (q = strstr(q, keys[k]));) {
            char *e = q + strcspn(q, ",}");
            if (*e == ',') e++;
            memmove(q, e, strlen(e) + 1);
        }
    return s;
}

/* Train `cfg` into tmp/<name>/run, then the checks of the file comment. */
static void check_kind(const char *name, const char *cfg_text, const char *other_geometry) {
    char dir[512], cfg[600], run_dir[600], again[600], out[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    snprintf(again, sizeof again, "%s/again", dir);
    CHECK(fx_write_bytes(cfg, cfg_text, strlen(cfg_text)) == 0, "%s: write config", name);
    int rc = run("%s train %s --run-dir %s --threads 1 > %s/train.log 2>&1", bin, cfg, run_dir, dir);
    CHECK(rc == 0, "%s: training exits 0 (see %s/train.log)", name, dir);
    if (rc != 0) return;
    char mpath[700];
    snprintf(mpath, sizeof mpath, "%s/metrics.jsonl", run_dir);
    char *metrics = test_read_file(mpath, NULL);
    char top1[32], loss[32];
    last_value(metrics ? metrics : "", "\"kind\":\"eval\"", "top1", top1, sizeof top1);
    last_value(metrics ? metrics : "", "\"kind\":\"eval\"", "loss", loss, sizeof loss);
    free(metrics);
    CHECK(top1[0] && loss[0], "%s: the run has a final evaluation", name);

    const char *configs[2] = {"run/config.json", "config.json"};
    for (int c = 0; c < 2; c++) {
        snprintf(out, sizeof out, "%s/eval%d.jsonl", dir, c);
        rc = run("%s eval %s/%s --checkpoint %s/last.safetensors --threads 1 > %s 2>/dev/null", bin, dir,
                 configs[c], run_dir, out);
        char *e = test_read_file(out, NULL);
        char et1[32], el[32];
        last_value(e ? e : "", "\"resolution\"", "top1", et1, sizeof et1);
        last_value(e ? e : "", "\"resolution\"", "loss", el, sizeof el);
        free(e);
        CHECK(rc == 0 && strcmp(et1, top1) == 0 && strcmp(el, loss) == 0,
              "%s: eval with %s gives top-1 %s loss %s; the run's final is %s, %s", name, configs[c], et1,
              el, top1, loss);
    }
    snprintf(out, sizeof out, "%s/eval_other.jsonl", dir);
    rc = run("%s eval %s/run/config.json --checkpoint %s/last.safetensors --threads 1 --set "
             "data.eval_transform=%s > %s 2>/dev/null", bin, dir, run_dir, other_geometry, out);
    char *e = test_read_file(out, NULL);
    char el[32];
    last_value(e ? e : "", "\"resolution\"", "loss", el, sizeof el);
    free(e);
    CHECK(rc == 0 && el[0] && strcmp(el, loss) != 0,
          "%s: data.eval_transform=%s changes the evaluation (loss %s vs %s), so the check can fail",
          name, other_geometry, el, loss);

    rc = run("%s train %s/config.json --run-dir %s --threads 1 > %s/again.log 2>&1", bin, run_dir, again, dir);
    CHECK(rc == 0, "%s: training from the run's config.json exits 0", name);
    char *m1 = metrics_untimed(run_dir), *m2 = metrics_untimed(again);
    CHECK(m1 && m2 && strcmp(m1, m2) == 0, "%s: the run again from its config.json has the same metrics",
          name);
    free(m1);
    free(m2);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/last.safetensors", run_dir);
    snprintf(b, sizeof b, "%s/last.safetensors", again);
    CHECK(same_bytes(a, b), "%s: and the same last.safetensors, byte for byte", name);
    /* the same config.json but for train.run_dir, which names each run's own directory */
    snprintf(a, sizeof a, "%s/config.json", run_dir);
    snprintf(b, sizeof b, "%s/config.json", again);
    char *ca = test_read_file(a, NULL), *cb = test_read_file(b, NULL);
    char da[700], db[700];
    snprintf(da, sizeof da, "\"run_dir\": \"%s\"", run_dir);
    snprintf(db, sizeof db, "\"run_dir\": \"%s\"", again);
    char *pa = ca ? strstr(ca, da) : NULL, *pb = cb ? strstr(cb, db) : NULL;
    CHECK(pa && pb, "%s: each config.json records its own run directory", name);
    if (pa && pb) {
        memmove(pa, pa + strlen(da), strlen(pa + strlen(da)) + 1);
        memmove(pb, pb + strlen(db), strlen(pb + strlen(db)) + 1);
        CHECK(strcmp(ca, cb) == 0, "%s: and the same config.json otherwise", name);
    }
    free(ca);
    free(cb);
}

/* An image folder of 3 class folders (issue 39 item 4): without model.num_classes the
 * model has the folder's 3 classes (the run's config.json records them, `info` says where
 * they come from, the first loss is near ln 3, not ln 1000), and a given count that
 * disagrees with the folder is an error naming both. */
static void check_folder_classes(const char *name) {
    char dir[512], p[700], log[700];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    snprintf(p, sizeof p, "%s/run/config.json", dir);
    CHECK(file_contains(p, "\"num_classes\": 3,"), "%s: the run's config.json has the folder's 3 classes", name);
    snprintf(p, sizeof p, "%s/run/metrics.jsonl", dir);
    char *m = test_read_file(p, NULL);
    const char *l = m ? strstr(m, "\"loss\":") : NULL;
    double first = l ? strtod(l + 7, NULL) : -1;
    CHECK(first > 0.5 && first < 2.0, "%s: first loss %.4f is near ln 3 = 1.10 (ln 1000 = 6.91)", name, first);
    free(m);
    snprintf(log, sizeof log, "%s/info.out", dir);
    int rc = run("%s info %s/config.json > %s 2>&1", bin, dir, log);
    CHECK(rc == 0 && file_contains(log, "classes: 3 (from the data: data.kind = imagefolder"),
          "%s: info says the 3 classes come from the folder (exit %d)", name, rc);
    snprintf(log, sizeof log, "%s/wrong_classes.log", dir);
    rc = run("%s train %s/config.json --set model.num_classes=5 --run-dir %s/wrong --threads 1 > %s 2>&1", bin,
             dir, dir, log);
    CHECK(rc == 2 && file_contains(log, "has 3 classes but model.num_classes is 5") &&
          file_contains(log, "leave model.num_classes out"),
          "%s: 5 classes given for a folder of 3 is an error naming both (exit %d)", name, rc);
}

/* The shared model and recipe, with a data section; classes 0: model.num_classes left to
 * the format (CIFAR, image folders). */
static void config_for(char *out, size_t n, int in_chans, int classes, const char *data) {
    char nc[48] = "";
    if (classes) snprintf(nc, sizeof nc, " \"num_classes\": %d,", classes);
    snprintf(out, n,
             "{\"model\": {\"width\": 16, \"depth\": 1, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4,"
             " \"img_size\": 8, \"in_chans\": %d,%s \"drop_path\": 0.1},"
             " \"pe\": {\"kind\": \"rope_mixed\"},"
             " \"data\": {%s, \"mean\": [0.5], \"std\": [0.25], \"workers\": 1},"
             " \"optim\": {\"lr\": 0.003, \"warmup_steps\": 1},"
             " \"train\": {\"steps\": 6, \"batch_size\": 8, \"seed\": 3, \"log_every\": 1, \"eval_every\": 0},"
             " \"runtime\": {\"progress\": \"never\"}}\n",
             in_chans, nc, data);
}

int main(void) {
    if (e2e_start("e2e_run_config", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    int seen[VT_DATA_KIND_COUNT] = {0};
    for (int k = 0; k < VT_DATA_KIND_COUNT; k++) {
        vt_data_kind kind = (vt_data_kind)k;
        const char *name = vt_data_kind_name(kind);
        char root[512], data[1024], text[2048];
        snprintf(root, sizeof root, "%s/%s/data", tmp, name);
        mkdirs(root);
        int rc = 0, chans = 3;
        const char *other = "center_crop";
        switch (kind) {
        case VT_DATA_IDX:
            rc = write_idx_split(root, "train", NTRAIN) | write_idx_split(root, "val", NVAL);
            chans = 1;
            break;
        case VT_DATA_SYNTHETIC: break;
        case VT_DATA_IMAGEFOLDER:
            rc = write_folder_split(root, "train", NTRAIN) | write_folder_split(root, "val", NVAL);
            other = "resize";
            break;
        case VT_DATA_CIFAR10: rc = write_cifar(root, 0); break;
        case VT_DATA_CIFAR100: rc = write_cifar(root, 1); break;
        case VT_DATA_KIND_COUNT: break;
        }
        CHECK(rc == 0, "%s: dataset written under %s", name, root);
        if (kind == VT_DATA_SYNTHETIC)
            snprintf(data, sizeof data, "\"kind\": \"synthetic\", \"train_size\": %d, \"val_size\": %d, "
                     "\"synthetic_seed\": 5", NTRAIN, NVAL);
        else
            snprintf(data, sizeof data, "\"kind\": \"%s\", \"root\": \"%s\"", name, root);
        /* CIFAR and image folders define their classes: model.num_classes is left out */
        int own = kind == VT_DATA_CIFAR10 || kind == VT_DATA_CIFAR100 || kind == VT_DATA_IMAGEFOLDER;
        config_for(text, sizeof text, chans, own ? 0 : 3, data);
        check_kind(name, text, other);
        if (kind == VT_DATA_IMAGEFOLDER) check_folder_classes(name);
        seen[k] = 1;
    }
    for (int k = 0; k < VT_DATA_KIND_COUNT; k++)
        CHECK(seen[k], "data.kind %s is covered", vt_data_kind_name((vt_data_kind)k));
    return e2e_finish(tmp);
}
