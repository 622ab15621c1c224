/* e2e_eval.c - `vitrain eval` on an image folder through the built binary ($VT_BIN,
 * default ./vitrain; run from the repository root):
 *   - --logits OUT.npz holds logits_S for every evaluated size (and shuffled_logits_S with
 *     --patch-shuffle), labels, resolutions, the file paths in dataset order and the
 *     class names; each entry's CRC checks (tests/npz_read.h), the accuracy recomputed
 *     from it equals the printed one, and numpy.load reads it when a python3 with numpy
 *     is present;
 *   - a folder without the train split evaluates with the classes of the val folders
 *     (the same labels and logits as with the train split), an error naming
 *     data.class_list when their count is not model.num_classes, and data.class_list
 *     gives the order otherwise;
 *   - --logits with another suffix is a usage error (exit 2);
 *   - the checkpoint's own config: `vitrain eval --checkpoint RUN/last.safetensors` without
 *     CONFIG reproduces the run's final accuracy (a RoPE-Axial run on synthetic data);
 *     a CONFIG or --set that changes a key defining the model or its PE (pe.kind, pe.theta,
 *     model.width) is a config error (exit 2) naming each key with both values, while data
 *     and eval keys, pe.positions and pe.train_img_size (the resolution-change settings the
 *     positions study varies) may differ; a file without a stored config (timm's) needs a
 *     CONFIG.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "e2e_util.h"
#include "harness.h"
#include "image_fixtures.h"
#include "npz_read.h"

#include "config.h"
#include "resolve.h"
#include "kernels.h"
#include "vit.h"
#include "vit_fixture.h"

static char bin[1024];
static char tmp[64];

/* root/<split>/<class>/<i>.png: 12 x 10 RGB images whose colour depends on the class. */
static void make_folder(const char *root, const char *split, const char *const *classes, int nc, int per) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, split);
    mkdir(root, 0777);
    mkdir(p, 0777);
    for (int k = 0; k < nc; k++) {
        snprintf(p, sizeof p, "%s/%s/%s", root, split, classes[k]);
        mkdir(p, 0777);
        for (int i = 0; i < per; i++) {
            uint8_t px[12 * 10 * 3];
            for (int j = 0; j < 12 * 10 * 3; j++) px[j] = (uint8_t)((j % 3 == k % 3 ? 200 : 30) + 7 * i + j % 11);
            snprintf(p, sizeof p, "%s/%s/%s/img%d.png", root, split, classes[k], i);
            fx_write_png(p, 12, 10, PNG_COLOR_TYPE_RGB, 8, px, NULL, 0, NULL, 0, 0);
        }
    }
}

static const char *CONFIG =
    "{\"model\": {\"width\": 16, \"depth\": 1, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4, "
    "\"img_size\": 8, \"num_classes\": 3},"
    " \"pe\": {\"kind\": \"rope_mixed\"},"
    " \"data\": {\"kind\": \"imagefolder\", \"root\": \"%s/folder\"},"
    " \"train\": {\"batch_size\": 4}, \"runtime\": {\"progress\": \"never\"}}";

static void test_logits(const char *cfg, const char *ckpt) {
    char npz[300], out[256];
    snprintf(npz, sizeof npz, "%s/l.npz", tmp);
    snprintf(out, sizeof out, "%s/eval.out", tmp);
    int rc = run("%s eval %s --checkpoint %s --resolutions 8,12 --patch-shuffle --logits %s --threads 1 >%s 2>%s.err",
                 bin, cfg, ckpt, npz, out, out);
    CHECK(rc == 0, "eval with --logits: exit %d", rc);
    size_t len;
    unsigned char *b = (unsigned char *)test_read_file(npz, &len);
    npz_array a;
    const char *names[] = {"logits_8", "logits_12", "shuffled_logits_8", "shuffled_logits_12"};
    for (int i = 0; i < 4; i++)
        CHECK(b && npz_find(b, len, names[i], &a) && !strcmp(a.descr, "<f4") && a.ndim == 2 && a.shape[0] == 9 &&
                  a.shape[1] == 3,
              "%s (9, 3) float32", names[i]);
    CHECK(b && npz_find(b, len, "resolutions", &a) && a.shape[0] == 2 && npz_i64(&a, 1) == 12,
          "resolutions [8, 12]");
    CHECK(b && npz_find(b, len, "paths", &a) && !strncmp(a.descr, "<U", 2) && a.ndim == 1 && a.shape[0] == 9,
          "paths (9,) unicode: %s", b ? a.descr : "");
    if (b && npz_find(b, len, "paths", &a)) {
        /* UTF-32: the first path ends in folder/val/a/img0.png */
        int w = atoi(a.descr + 2);
        char first[256] = "";
        for (int i = 0; i < w && i < 255; i++) first[i] = (char)a.data[4 * i];
        CHECK(strstr(first, "/folder/val/a/img0.png") != NULL, "first path is the first file: %s", first);
    }
    CHECK(b && npz_find(b, len, "class_names", &a) && a.shape[0] == 3 && a.data[0] == 'a', "class_names");
    npz_array lg, lb;
    if (b && npz_find(b, len, "logits_8", &lg) && npz_find(b, len, "labels", &lb)) {
        float v[27];
        memcpy(v, lg.data, sizeof v);
        int correct = 0;
        for (int i = 0; i < 9; i++) {
            int best = 0;
            for (int k = 1; k < 3; k++)
                if (v[i * 3 + k] > v[i * 3 + best]) best = k;
            correct += best == npz_i64(&lb, (size_t)i);
            CHECK(npz_i64(&lb, (size_t)i) == i / 3, "label of sample %d is its folder's class", i);
        }
        char *js = test_read_file(out, NULL);
        const char *t = js ? strstr(js, "\"top1\":") : NULL;
        CHECK(t && fabs(atof(t + 7) - 100.0 * correct / 9) < 0.006, "top-1 recomputed from the logits");
        free(js);
    }
    free(b);
    if (run("python3 -c 'import numpy' 2>/dev/null") == 0 || run("/usr/bin/python3 -c 'import numpy' 2>/dev/null") == 0) {
        const char *py = run("python3 -c 'import numpy' 2>/dev/null") == 0 ? "python3" : "/usr/bin/python3";
        rc = run("%s -c \"import numpy as np, zipfile; assert zipfile.ZipFile('%s').testzip() is None; "
                 "z = np.load('%s'); assert z['logits_12'].shape == (9, 3) and z['labels'].dtype == np.int64; "
                 "assert z['paths'][4].endswith('val/b/img1.png') and list(z['class_names']) == ['a', 'b', 'c']\"",
                 py, npz, npz);
        CHECK(rc == 0, "numpy.load reads the archive (exit %d)", rc);
    } else {
        fprintf(stderr, "e2e_eval: numpy.load check skipped: no python3 with numpy\n");
    }
    rc = run("%s eval %s --checkpoint %s --logits %s/l.npy >/dev/null 2>%s.err", bin, cfg, ckpt, tmp, out);
    snprintf(npz, sizeof npz, "%s.err", out);
    CHECK(rc == 2 && file_contains(npz, "expected a .npz path"), "--logits .npy: exit %d", rc);
}

static void test_no_train_split(const char *cfg, const char *ckpt) {
    char out[256], err[256], with_train[256];
    snprintf(with_train, sizeof with_train, "%s/with_train.npz", tmp);
    int rc = run("%s eval %s --checkpoint %s --logits %s >/dev/null 2>/dev/null", bin, cfg, ckpt, with_train);
    CHECK(rc == 0, "eval with a train split: exit %d", rc);
    run("mv %s/folder/train %s/folder/train.away", tmp, tmp);
    snprintf(out, sizeof out, "%s/no_train.npz", tmp);
    snprintf(err, sizeof err, "%s/no_train.err", tmp);
    rc = run("%s eval %s --checkpoint %s --logits %s >/dev/null 2>%s", bin, cfg, ckpt, out, err);
    CHECK(rc == 0 && file_contains(err, "no train split") && file_contains(err, "the val split's folders, sorted"),
          "eval without train split: exit %d", rc);
    size_t la, lb;
    unsigned char *a = (unsigned char *)test_read_file(with_train, &la);
    unsigned char *b = (unsigned char *)test_read_file(out, &lb);
    npz_array x, y;
    CHECK(a && b && npz_find(a, la, "logits_8", &x) && npz_find(b, lb, "logits_8", &y) && x.bytes == y.bytes &&
              memcmp(x.data, y.data, x.bytes) == 0 && npz_find(a, la, "labels", &x) && npz_find(b, lb, "labels", &y) &&
              memcmp(x.data, y.data, x.bytes) == 0,
          "same logits and labels as with the train split");
    free(a);
    free(b);
    /* 4 classes in the model, 3 val folders: the sorted folders cannot be the classes */
    char ckpt4[256];
    vt_config c4;
    vt_vit m4;
    snprintf(ckpt4, sizeof ckpt4, "%s/m4.safetensors", tmp);
    const char *set4[1] = {"model.num_classes=4"};
    CHECK(vt_resolve_file(&c4, cfg, set4, 1) == VT_OK && vit_init_config(&m4, &c4, 3) == VT_OK &&
              vit_save_config(&m4, &c4, ckpt4) == VT_OK,
          "4-class checkpoint: %s", vt_last_error());
    vt_vit_free(&m4);
    rc = run("%s eval %s --checkpoint %s --set model.num_classes=4 >/dev/null 2>%s", bin, cfg, ckpt4, err);
    CHECK(rc != 0 && file_contains(err, "model.num_classes is 4") && file_contains(err, "data.class_list"),
          "class count mismatch names data.class_list: exit %d", rc);
    /* data.class_list gives the order: reversed, the labels are reversed */
    char list[256];
    snprintf(list, sizeof list, "%s/classes.txt", tmp);
    FILE *f = fopen(list, "w");
    fputs("c\nb\na\n", f);
    fclose(f);
    rc = run("%s eval %s --checkpoint %s --set data.class_list=%s --logits %s >/dev/null 2>%s", bin, cfg, ckpt,
             list, out, err);
    CHECK(rc == 0 && file_contains(err, "classes from " ), "eval with a class list: exit %d", rc);
    b = (unsigned char *)test_read_file(out, &lb);
    CHECK(b && npz_find(b, lb, "labels", &y) && npz_i64(&y, 0) == 2 && npz_i64(&y, 8) == 0,
          "class_list order gives the labels");
    free(b);
    run("mv %s/folder/train.away %s/folder/train", tmp, tmp);
}

static double json_top1(const char *out) {
    char *s = test_read_file(out, NULL);
    const char *p = s ? strstr(s, "\"top1\":") : NULL;
    double v = p ? atof(p + 7) : -1;
    free(s);
    return v;
}

static void test_checkpoint_config(void) {
    char run_dir[256], log[256], out[256], err[256];
    snprintf(run_dir, sizeof run_dir, "%s/run", tmp);
    snprintf(log, sizeof log, "%s/run.log", tmp);
    snprintf(out, sizeof out, "%s/ck.out", tmp);
    snprintf(err, sizeof err, "%s/ck.err", tmp);
    int rc = run("%s configs/synthetic_tiny.json --set pe.kind=rope_axial --set train.epochs=1 --run-dir %s "
                 "--threads 1 --set runtime.progress=never 2>%s", bin, run_dir, log);
    CHECK(rc == 0, "rope_axial run: exit %d", rc);
    double final = final_top1(log);
    rc = run("%s eval --checkpoint %s/last.safetensors --threads 1 >%s 2>%s", bin, run_dir, out, err);
    CHECK(rc == 0 && fabs(json_top1(out) - final) < 0.006,
          "eval without CONFIG: exit %d, top-1 %.2f%%, the run's final %.2f%%", rc, json_top1(out), final);
    rc = run("%s eval %s/config.json --checkpoint %s/last.safetensors --set eval.batch_size=7 --threads 1 >%s 2>%s",
             bin, run_dir, run_dir, out, err);
    CHECK(rc == 0 && fabs(json_top1(out) - final) < 0.006, "eval with the run's config.json: exit %d", rc);
    struct {
        const char *args, *want1, *want2;
    } bad[] = {
        {"configs/synthetic_tiny.json", "pe.kind: \"ape\" vs \"rope_axial\"", "configs/synthetic_tiny.json: "},
        {"--set pe.theta=50", "pe.theta: 50 vs 100", "1 key that defines the model differs"},
        {"--set pe.kind=none", "pe.kind: \"none\" vs \"rope_axial\"", "(--set value vs checkpoint value)"},
        {"RUN/config.json --set model.width=16 --set model.heads=2", "model.width: 16 vs 32", "Data and eval keys may differ"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "%s", bad[i].args);
        if (!strncmp(args, "RUN/", 4)) snprintf(args, sizeof args, "%s/%s", run_dir, bad[i].args + 4);
        rc = run("%s eval %s --checkpoint %s/last.safetensors --threads 1 >%s 2>%s", bin, args, run_dir, out, err);
        CHECK(rc == 2 && file_contains(err, "vitrain: config error: ") && file_contains(err, bad[i].want1) &&
                  file_contains(err, bad[i].want2),
              "eval %s: exit %d", bad[i].args, rc);
    }
    /* data and eval keys may differ */
    rc = run("%s eval --checkpoint %s/last.safetensors --set data.val_size=100 --set eval.batch_size=9 "
             "--resolutions 16,20 --threads 1 >%s 2>%s", bin, run_dir, out, err);
    CHECK(rc == 0 && file_contains(out, "\"n\":100,\"resolution\":20"), "data and eval keys changed: exit %d", rc);
    /* so may the position mode and the grid it is relative to, and they change the logits */
    rc = run("%s eval --checkpoint %s/last.safetensors --set data.val_size=100 --set pe.positions=interpolate "
             "--set pe.train_img_size=8 --set eval.batch_size=9 --resolutions 16,20 --threads 1 >%s.pos 2>%s",
             bin, run_dir, out, err);
    char pos[300];
    snprintf(pos, sizeof pos, "%s.pos", out);
    CHECK(rc == 0 && file_contains(pos, "\"n\":100,\"resolution\":20") && !same_bytes(out, pos),
          "pe.positions and pe.train_img_size changed: exit %d, and the logits move", rc);
    /* a file without a config */
    rc = run("%s eval --checkpoint tests/fixtures/timm/vit_ape.safetensors >%s 2>%s", bin, out, err);
    CHECK(rc == 2 && file_contains(err, "has no __metadata__[\"config\"]") && file_contains(err, "give the CONFIG"),
          "timm file without CONFIG: exit %d", rc);
}

int main(void) {
    if (test_kernels_init()) return 1;
    if (e2e_start("eval", bin, sizeof bin, tmp, sizeof tmp)) return 1;
    char root[256], cfg_path[256], ckpt[256], json[1024];
    snprintf(root, sizeof root, "%s/folder", tmp);
    const char *classes[3] = {"a", "b", "c"};
    make_folder(root, "train", classes, 3, 2);
    make_folder(root, "val", classes, 3, 3);
    snprintf(cfg_path, sizeof cfg_path, "%s/cfg.json", tmp);
    snprintf(json, sizeof json, CONFIG, tmp);
    FILE *f = fopen(cfg_path, "w");
    fputs(json, f);
    fclose(f);
    /* A checkpoint of the model (random weights: the test is about the files, not accuracy). */
    vt_config c;
    vt_vit m;
    snprintf(ckpt, sizeof ckpt, "%s/m.safetensors", tmp);
    CHECK(vt_resolve_file(&c, cfg_path, NULL, 0) == VT_OK && vit_init_config(&m, &c, 3) == VT_OK && vit_save_config(&m, &c, ckpt) == VT_OK,
          "checkpoint: %s", vt_last_error());
    vt_vit_free(&m);
    test_logits(cfg_path, ckpt);
    test_no_train_split(cfg_path, ckpt);
    test_checkpoint_config();
    return e2e_finish(tmp);
}
