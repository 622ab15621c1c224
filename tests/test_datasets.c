/* test_datasets.c - the imagefolder and CIFAR dataset kinds (src/data/imagefolder.c,
 * src/data/cifar.c) and their bad inputs, through the dataset interface and the loader.
 *
 * Everything is generated into a temporary directory:
 *  - imagefolder indexing: classes sorted by name, labels per file, extensions matched in
 *    any case, non-image / hidden files, sub-folders and stray files ignored and counted,
 *    native sizes and channels per sample (JPEG, PNG, gray, PNG data named .JPEG), the
 *    val split on the train class list; data.class_list (order, ignored folders, errors);
 *  - CIFAR-10 (5 train batches + test batch, in root and in cifar-10-batches-bin/) and
 *    CIFAR-100 (fine and coarse labels) from hand-made records: count, labels, planar ->
 *    HWC pixels, and the loader output;
 *  - bad inputs, each with its message: missing root, missing split, empty class folder,
 *    val class not in train, zero-byte image, truncated JPEG and PNG, text named .jpg,
 *    CIFAR file size not a whole number of records, label out of range, missing batch;
 *  - an image smaller than the model's input through the loader (upscaled, values kept);
 *  - on_error=fail stops at the first bad file with its name and reason; on_error=skip
 *    gives a full epoch with bad files replaced by the next valid one, the same batches
 *    under any thread count, and the right skip count;
 *  - data-parallel shards of every kind (imagefolder, CIFAR-10, IDX, synthetic), train and
 *    val: 2 ranks' batches together are one process's bit for bit and each rank reads
 *    only its own samples;
 *  - scripts/make_sample_data.py's output opens and decodes (skipped without python3);
 *  - an end-to-end training run of a few steps on a generated imagefolder through the
 *    binary at $VT_BIN (reported as skipped when VT_BIN is not set).
 */
#include <ftw.h>
#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "data/dataset.h"
#include "data/imagefolder.h"
#include "data/loader.h"
#include "harness.h"
#include "data_fixture.h"
#include "image_fixtures.h"

static int has(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

/* tmpdir/rel, creating its parent folders. */
static char *tpath(char *buf, const char *rel) {
    snprintf(buf, 1024, "%s/%s", tmpdir, rel);
    for (char *p = buf + strlen(tmpdir) + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(buf, 0755);
        *p = '/';
    }
    return buf;
}

/* A solid-colour PNG (c = 1 or 3) of w x h. */
static void solid_png(const char *rel, int w, int h, int c, uint8_t r, uint8_t g, uint8_t b) {
    char p[1024];
    uint8_t *px = malloc((size_t)w * h * c);
    const uint8_t col[3] = {r, g, b};
    for (int i = 0; i < w * h; i++)
        for (int ch = 0; ch < c; ch++) px[i * c + ch] = col[ch];
    CHECK(fx_write_png(tpath(p, rel), w, h, c == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB, 8, px,
                       NULL, 0, NULL, 0, 0) == 0, "write %s", rel);
    free(px);
}

/* A solid-colour RGB JPEG at quality 100. */
static void solid_jpg(const char *rel, int w, int h, uint8_t r, uint8_t g, uint8_t b) {
    char p[1024];
    uint8_t *px = malloc((size_t)w * h * 3);
    for (int i = 0; i < w * h; i++) { px[3 * i] = r; px[3 * i + 1] = g; px[3 * i + 2] = b; }
    CHECK(fx_write_jpeg(tpath(p, rel), w, h, 3, px, 100) == 0, "write %s", rel);
    free(px);
}

static void text_file(const char *rel, const char *text) {
    char p[1024];
    CHECK(fx_write_bytes(tpath(p, rel), text, strlen(text)) == 0, "write %s", rel);
}

/* A truncated copy (first half) of a fresh pattern image: JPEG if jpeg, else PNG. */
static void truncated_image(const char *rel, int jpeg) {
    char p[1024], full[1024];
    snprintf(full, sizeof full, "%s/full_%d.tmp", tmpdir, jpeg);
    if (jpeg) fx_jpeg_pattern(full, 24, 24, 3, 90);
    else fx_png_pattern(full, 24, 24, 3);
    size_t len;
    free(test_read_file(full, &len));
    CHECK(fx_truncate_copy(full, tpath(p, rel), len / 2) == 0, "write %s", rel);
    remove(full);
}

/* Config for the loader on an imagefolder/CIFAR root: mean 0, std 1, no flip. */
static void cfg_for(vt_data_spec *c, vt_data_kind kind, const char *root_rel, int img, int chans,
                    int classes) {
    char root[sizeof c->data.root];
    snprintf(root, sizeof root, "%s/%s", tmpdir, root_rel);
    data_cfg(c, kind, root, img, chans, classes, 3, 4);
    c->data.on_error = VT_ONERR_FAIL;
}

/* Open a split through the format's descriptor (dataset.h). */
static vt_status open_kind(vt_dataset **ds, const vt_data_spec *c, vt_split split) {
    return vt_dataset_kind_of(c->data.kind)->open(ds, c, split);
}

/* Opening must fail with a message containing every needle (NULL-terminated). */
static void expect_open_error(const char *what, const vt_data_spec *c, vt_split split,
                              const char *const *needles) {
    vt_dataset *ds = NULL;
    vt_status s = open_kind(&ds, c, split);
    CHECK(s != VT_OK && ds == NULL, "%s: open should fail", what);
    if (ds) ds->ops->close(ds);
    const char *msg = vt_last_error();
    for (int i = 0; needles[i]; i++)
        CHECK(has(msg, needles[i]), "%s: message \"%s\" lacks \"%s\"", what, msg, needles[i]);
    /* The loader passes the same error through. */
    vt_loader *L = NULL;
    s = vt_loader_open(&L, c, split, c->img_size);
    CHECK(s != VT_OK && L == NULL, "%s: loader open should fail", what);
    if (L) vt_loader_close(L);
    CHECK(has(vt_last_error(), needles[0]), "%s: loader message \"%s\"", what, vt_last_error());
}

/* ---- imagefolder indexing ------------------------------------------------------------ */

static void make_folder(void) {
    /* Classes created out of order: bird < cat < dog. */
    solid_png("if/train/dog/d1.png", 16, 16, 3, 200, 10, 20);
    solid_png("if/train/dog/d2.png", 5, 9, 3, 1, 2, 3);
    text_file("if/train/dog/notes.md", "not an image");
    mkdir(tpath((char[1024]){0}, "if/train/dog/extra/"), 0755);
    solid_png("if/train/bird/b1.png", 5, 7, 3, 10, 20, 30);
    solid_jpg("if/train/bird/b2.JPG", 9, 6, 90, 160, 220);
    text_file("if/train/bird/readme.txt", "hello");
    text_file("if/train/bird/.hidden.jpg", "hidden");
    uint8_t flat[100];
    memset(flat, 40, sizeof flat);
    CHECK(fx_write_jpeg(tpath((char[1024]){0}, "if/train/cat/c1.jpeg"), 10, 10, 1, flat, 100) == 0, "gray jpeg");
    solid_png("if/train/cat/c2.PNG", 3, 4, 1, 77, 0, 0);
    solid_png("if/train/cat/c3.JPEG", 6, 5, 3, 5, 6, 7); /* PNG data under a .JPEG name */
    text_file("if/train/LICENSE", "stray file in the split folder");
    solid_png("if/val/bird/v1.png", 8, 8, 3, 11, 22, 33);
    solid_jpg("if/val/dog/v2.jpg", 8, 8, 100, 100, 100);
}

static void test_imagefolder_index(void) {
    make_folder();
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "if", 16, 3, 3);
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK, "open train: %s", vt_last_error());
    if (s) return;
    CHECK(ds->size == 7 && ds->num_classes == 3, "7 images in 3 classes, got %lld in %d",
          (long long)ds->size, ds->num_classes);
    CHECK(ds->channels == 3 && ds->height == 0 && ds->width == 0, "variable native size");
    const char *want_cls[3] = {"bird", "cat", "dog"};
    for (int k = 0; k < 3 && k < ds->num_classes; k++)
        CHECK(strcmp(vt_dataset_class_name(ds, k), want_cls[k]) == 0, "class %d is %s", k,
              vt_dataset_class_name(ds, k));
    CHECK(vt_imagefolder_ignored(ds) == 5, "ignored: readme.txt, .hidden.jpg, notes.md, extra/, "
          "LICENSE; got %lld", (long long)vt_imagefolder_ignored(ds));
    const char *want_path[7] = {"bird/b1.png", "bird/b2.JPG", "cat/c1.jpeg", "cat/c2.PNG",
                                "cat/c3.JPEG", "dog/d1.png", "dog/d2.png"};
    const int want_label[7] = {0, 0, 1, 1, 1, 2, 2};
    const int want_h[7] = {7, 6, 10, 4, 5, 16, 9}, want_w[7] = {5, 9, 10, 3, 6, 16, 5};
    const int want_c[7] = {3, 3, 1, 1, 3, 3, 3};
    const int want_px0[7] = {10, 90, 40, 77, 5, 200, 1};
    vt_sample sm = {0};
    for (int i = 0; i < 7 && i < ds->size; i++) {
        char p[1024];
        vt_dataset_sample_path(ds, i, p, sizeof p);
        CHECK(has(p, want_path[i]), "sample %d path %s, want .../%s", i, p, want_path[i]);
        int label = -1;
        s = ds->ops->read(ds, i, &sm, &label);
        CHECK(s == VT_OK, "read %d: %s", i, vt_last_error());
        if (s) continue;
        CHECK(label == want_label[i], "sample %d label %d want %d", i, label, want_label[i]);
        CHECK(sm.h == want_h[i] && sm.w == want_w[i] && sm.c == want_c[i],
              "sample %d: %d x %d x %d, want %d x %d x %d", i, sm.w, sm.h, sm.c, want_w[i], want_h[i], want_c[i]);
        CHECK_CLOSE(sm.pixels[0], want_px0[i], 2, 0, "sample %d first pixel", i);
    }
    ds->ops->close(ds);

    s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_VAL);
    CHECK(s == VT_OK, "open val: %s", vt_last_error());
    if (s) { vt_sample_free(&sm); return; }
    CHECK(ds->size == 2 && ds->num_classes == 3, "val: 2 images, the 3 train classes; got %lld, %d",
          (long long)ds->size, ds->num_classes);
    int l0 = -1, l1 = -1;
    CHECK(ds->ops->read(ds, 0, &sm, &l0) == VT_OK && ds->ops->read(ds, 1, &sm, &l1) == VT_OK, "val reads");
    CHECK(l0 == 0 && l1 == 2, "val labels from the train class list: %d %d", l0, l1);
    CHECK(vt_dataset_skipped(ds) == 0, "nothing skipped");
    ds->ops->close(ds);
    vt_sample_free(&sm);
}

/* data.class_list: listed classes in line order, other folders ignored; its errors. */
static void test_class_list(void) {
    char list[1024];
    text_file("lists/two.txt", "  dog \n# a comment\n\ncat\r\n");
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "if", 16, 3, 2);
    snprintf(c.data.class_list, sizeof c.data.class_list, "%s", tpath(list, "lists/two.txt"));
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK, "class list: %s", vt_last_error());
    if (!s) {
        CHECK(ds->size == 5 && ds->num_classes == 2, "dog + cat: 5 images, 2 classes; got %lld, %d",
              (long long)ds->size, ds->num_classes);
        CHECK(strcmp(vt_dataset_class_name(ds, 0), "dog") == 0 &&
              strcmp(vt_dataset_class_name(ds, 1), "cat") == 0, "classes in list order");
        vt_sample sm = {0};
        int l0 = -1, l4 = -1;
        CHECK(ds->ops->read(ds, 0, &sm, &l0) == VT_OK && ds->ops->read(ds, 4, &sm, &l4) == VT_OK, "reads");
        CHECK(l0 == 1 && l4 == 0, "cat/c1.jpeg is class 1, dog/d2.png class 0: got %d %d", l0, l4);
        vt_sample_free(&sm);
        ds->ops->close(ds);
    }
    s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_VAL);
    CHECK(s == VT_OK, "class list val: %s", vt_last_error());
    if (!s) {
        vt_sample sm = {0};
        int l = -1;
        CHECK(ds->size == 1 && ds->ops->read(ds, 0, &sm, &l) == VT_OK && l == 0,
              "val: only dog/v2.jpg (class 0); got %lld samples, label %d", (long long)ds->size, l);
        vt_sample_free(&sm);
        ds->ops->close(ds);
    }
    struct { const char *file, *text, *needle; } bad[] = {
        {"lists/horse.txt", "dog\nhorse\n", "line 2: class 'horse' has no folder"},
        {"lists/dup.txt", "dog\ncat\ndog\n", "line 3: class 'dog' is listed twice"},
        {"lists/empty.txt", "# nothing\n\n", "names no class"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        text_file(bad[i].file, bad[i].text);
        snprintf(c.data.class_list, sizeof c.data.class_list, "%s", tpath(list, bad[i].file));
        expect_open_error(bad[i].file, &c, VT_SPLIT_TRAIN,
                          (const char *const[]){"data.class_list", bad[i].needle, NULL});
    }
    snprintf(c.data.class_list, sizeof c.data.class_list, "%s/lists/none.txt", tmpdir);
    expect_open_error("missing class list", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data.class_list", "cannot open", "none.txt", NULL});
    /* a FIFO is refused at once rather than waited on */
    snprintf(c.data.class_list, sizeof c.data.class_list, "%s", tpath(list, "lists/fifo.txt"));
    CHECK(mkfifo(list, 0600) == 0, "mkfifo %s", list);
    expect_open_error("class list FIFO", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data.class_list is a FIFO (named pipe)", "fifo.txt", NULL});
}

/* Images smaller than the model input (3 x 4 gray, 5 x 7 RGB) come out of the loader
 * resized to S x S with their value, gray expanded to 3 channels. */
static void test_small_image_through_loader(void) {
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "if", 16, 3, 3);
    strcpy(c.data.val_split, "train");   /* the eval split keeps dataset order */
    vt_loader *L = NULL;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 16);
    CHECK(s == VT_OK, "loader: %s", vt_last_error());
    if (s) return;
    const int S = 16, per = 3 * S * S;
    float *img = malloc(sizeof(float) * 4 * per);
    int labels[4], soft_used, count;
    vt_loader_seek(L, 0, 0, 4);
    s = vt_loader_next(L, img, labels, NULL, &soft_used, &count);
    CHECK(s == VT_OK && count == 4, "batch 0: %s (count %d)", vt_last_error(), count);
    /* Sample 0: bird/b1.png 5 x 7 RGB (10, 20, 30); sample 3: cat/c2.PNG 3 x 4 gray 77. */
    const float want0[3] = {10 / 255.0f, 20 / 255.0f, 30 / 255.0f};
    float maxd = 0;
    for (int ch = 0; ch < 3; ch++)
        for (int i = 0; i < S * S; i++) {
            maxd = fmaxf(maxd, fabsf(img[ch * S * S + i] - want0[ch]));
            maxd = fmaxf(maxd, fabsf(img[3 * per + ch * S * S + i] - 77 / 255.0f));
        }
    CHECK(maxd < 1e-5f, "small solid images upscaled keep their value (max diff %g)", maxd);
    CHECK(labels[0] == 0 && labels[3] == 1, "labels %d %d", labels[0], labels[3]);
    vt_loader_close(L);

    /* The train split (RandomResizedCrop for imagefolder by default) on 3 x 2 and 2 x 3
     * images: every output pixel still holds the solid colour. */
    solid_png("small/train/a/tiny.png", 3, 2, 3, 50, 100, 150);
    solid_png("small/train/b/tiny_gray.png", 2, 3, 1, 60, 0, 0);
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "small", 16, 3, 2);
    c.data.hflip = 0.5;
    s = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, 16);
    CHECK(s == VT_OK, "train loader: %s", vt_last_error());
    if (s) { free(img); return; }
    vt_loader_seek(L, 0, 0, 2);
    s = vt_loader_next(L, img, labels, NULL, &soft_used, &count);
    CHECK(s == VT_OK && count == 2, "train batch: %s (count %d)", vt_last_error(), count);
    maxd = 0;
    for (int b = 0; b < 2 && count == 2; b++) {
        const float *want = labels[b] == 0 ? (const float[3]){50 / 255.0f, 100 / 255.0f, 150 / 255.0f}
                                           : (const float[3]){60 / 255.0f, 60 / 255.0f, 60 / 255.0f};
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < S * S; i++) maxd = fmaxf(maxd, fabsf(img[b * per + ch * S * S + i] - want[ch]));
    }
    CHECK(maxd < 1e-4f, "train-time crop of images smaller than the input keeps the colour (max diff %g)", maxd);
    free(img);
    vt_loader_close(L);
}

static void test_imagefolder_bad_layout(void) {
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "no_such_root", 16, 3, 3);
    expect_open_error("missing root", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data.root", "no_such_root", "does not exist", NULL});

    cfg_for(&c, VT_DATA_IMAGEFOLDER, "if", 16, 3, 3);
    strcpy(c.data.val_split, "validation");
    expect_open_error("missing val split", &c, VT_SPLIT_VAL,
                      (const char *const[]){"data.val_split", "if/validation", "does not exist", NULL});
    strcpy(c.data.train_split, "training");
    expect_open_error("missing train split", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data.train_split", "if/training", NULL});

    /* A train class folder holding no image. */
    solid_png("empty/train/a/x.png", 4, 4, 3, 1, 1, 1);
    text_file("empty/train/b/only.txt", "no images here");
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "empty", 16, 3, 2);
    expect_open_error("empty class folder", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"empty/train/b", "has no image files", "1 other", NULL});

    /* A val class that the train split does not have. */
    solid_png("vbad/train/a/x.png", 4, 4, 3, 1, 1, 1);
    solid_png("vbad/val/horse/y.png", 4, 4, 3, 1, 1, 1);
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "vbad", 16, 3, 1);
    expect_open_error("val class not in train", &c, VT_SPLIT_VAL,
                      (const char *const[]){"horse", "not a class of the train split", NULL});

    /* A split with images but no class folders (unfoldered ImageNet val). */
    solid_png("flat/train/a/x.png", 4, 4, 3, 1, 1, 1);
    solid_png("flat/val/ILSVRC2012_val_00000001.png", 4, 4, 3, 1, 1, 1);
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "flat", 16, 3, 1);
    expect_open_error("unfoldered val", &c, VT_SPLIT_VAL,
                      (const char *const[]){"no class folders with images", "data/imagenet/README.md", NULL});
}

/* ---- bad files: fail and skip -------------------------------------------------------- */

/* Class a: good (red), zero-byte, truncated JPEG. Class b: text named .jpg, good (green),
 * truncated PNG, good JPEG (blue), good (gray). Indices 1, 2, 3 are replaced by 4, and 5
 * by 6. */
static void make_bad_folder(void) {
    char p[1024];
    solid_png("bad/train/a/1_good.png", 6, 6, 3, 255, 0, 0);
    CHECK(fx_write_bytes(tpath(p, "bad/train/a/2_empty.jpg"), "", 0) == 0, "zero-byte file");
    truncated_image("bad/train/a/3_trunc.jpg", 1);
    text_file("bad/train/b/1_text.jpg", "I am a text file named .jpg\n");
    solid_png("bad/train/b/2_good.png", 7, 5, 3, 0, 255, 0);
    truncated_image("bad/train/b/3_trunc.png", 0);
    solid_jpg("bad/train/b/4_good.jpg", 8, 8, 0, 0, 255);
    solid_png("bad/train/b/5_good.png", 4, 4, 1, 128, 0, 0);
}

static void test_bad_files_fail(void) {
    make_bad_folder();
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "bad", 8, 3, 2);
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    CHECK(ds->size == 8, "8 files indexed (bad ones too), got %lld", (long long)ds->size);
    struct { int index; const char *file, *reason; } bad[4] = {
        {1, "2_empty.jpg", "empty file (0 bytes)"},
        {2, "3_trunc.jpg", "truncated JPEG"},
        {3, "1_text.jpg", "not an image"},
        {5, "3_trunc.png", "truncated PNG"},
    };
    vt_sample sm = {0};
    for (int i = 0; i < 4; i++) {
        int label = -1;
        s = ds->ops->read(ds, bad[i].index, &sm, &label);
        const char *msg = vt_last_error();
        CHECK(s == VT_ERR_RUNTIME, "%s: read should fail", bad[i].file);
        CHECK(has(msg, bad[i].file) && has(msg, bad[i].reason) && has(msg, "data.on_error=skip"),
              "%s: message \"%s\" should name the file, \"%s\" and the skip hint", bad[i].file, msg,
              bad[i].reason);
    }
    CHECK(vt_dataset_skipped(ds) == 0, "fail mode skips nothing");
    ds->ops->close(ds);

    /* data.max_image_pixels reaches the decoder: the 8 x 8 JPEG (index 6) is over 63. */
    c.data.max_image_pixels = 63;
    s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK, "open: %s", vt_last_error());
    if (s) return;
    int label = -1;
    s = ds->ops->read(ds, 6, &sm, &label);
    CHECK(s == VT_ERR_RUNTIME && has(vt_last_error(), "4_good.jpg") &&
              has(vt_last_error(), "exceeds data.max_image_pixels = 63"),
          "pixel limit: %s", vt_last_error());
    c.data.max_image_pixels = 64;
    ds->ops->close(ds);
    s = vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK && ds->ops->read(ds, 6, &sm, &label) == VT_OK, "at the limit: %s",
          vt_last_error());
    vt_sample_free(&sm);
    if (s == VT_OK) ds->ops->close(ds);

    /* Through the loader: the first bad file of the batch stops it, with its name. */
    strcpy(c.data.val_split, "train");
    vt_loader *L = NULL;
    s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 8);
    CHECK(s == VT_OK, "loader: %s", vt_last_error());
    if (s) return;
    float *img = malloc(sizeof(float) * 4 * 3 * 8 * 8);
    int labels[4], su, count = -1;
    s = vt_loader_next(L, img, labels, NULL, &su, &count);
    CHECK(s == VT_ERR_RUNTIME && has(vt_last_error(), "2_empty.jpg") && has(vt_last_error(), "empty file"),
          "loader under fail: status %d, \"%s\"", (int)s, vt_last_error());
    free(img);
    vt_loader_close(L);
}

/* One full epoch of the eval split (dataset order) under skip; images and labels. */
static int skip_epoch(const vt_data_spec *c, float *img, int *labels, int64_t *skips) {
    vt_loader *L = NULL;
    if (vt_loader_open(&L, c, VT_SPLIT_VAL, 8) != VT_OK) return -1;
    int total = 0, su, count;
    vt_loader_seek(L, 0, 0, 4);
    for (int b = 0; b < 3; b++) {
        if (vt_loader_next(L, img + (size_t)total * 3 * 64, labels + total, NULL, &su, &count) != VT_OK)
            break;
        if (count == 0) break;
        total += count;
    }
    *skips = vt_loader_skipped(L);
    vt_loader_close(L);
    return total;
}

static void test_bad_files_skip(void) {
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "bad", 8, 3, 2);
    c.data.on_error = VT_ONERR_SKIP;
    strcpy(c.data.val_split, "train");
    float img[2][8 * 3 * 64];
    int labels[2][8];
    int64_t skips[2];
    int n[2];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        n[t] = skip_epoch(&c, img[t], labels[t], &skips[t]);
    }
    omp_set_num_threads(1);
    CHECK(n[0] == 8, "a full epoch of 8 samples under skip, got %d (%s)", n[0], vt_last_error());
    CHECK(skips[0] == 4 && skips[1] == 4, "4 distinct bad files skipped, got %lld and %lld",
          (long long)skips[0], (long long)skips[1]);
    /* Replacement: 1, 2, 3 -> 4 (green, class b); 5 -> 6 (blue, class b). */
    const int src[8] = {0, 4, 4, 4, 4, 6, 6, 7};
    const float rgb[8][3] = {{1, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 1, 0}, {0, 0, 0},
                             {0, 0, 1}, {128 / 255.0f, 128 / 255.0f, 128 / 255.0f}};
    const int want_label[8] = {0, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < 8 && i < n[0]; i++) {
        CHECK(labels[0][i] == want_label[i], "sample %d label %d want %d", i, labels[0][i], want_label[i]);
        float d = 0;
        for (int ch = 0; ch < 3; ch++)
            for (int k = 0; k < 64; k++) d = fmaxf(d, fabsf(img[0][(i * 3 + ch) * 64 + k] - rgb[src[i]][ch]));
        CHECK(d < 3 / 255.0f, "sample %d holds file %d's pixels (max diff %g)", i, src[i], d);
    }
    CHECK(n[1] == n[0] && memcmp(img[0], img[1], sizeof img[0]) == 0 &&
          memcmp(labels[0], labels[1], sizeof labels[0]) == 0,
          "skip replacement identical under 1 and 2 threads");

    /* Train split under skip: every batch of the epoch arrives, labels match the files. */
    vt_loader *L = NULL;
    vt_status s = vt_loader_open(&L, &c, VT_SPLIT_TRAIN, 8);
    CHECK(s == VT_OK, "train loader: %s", vt_last_error());
    if (s) return;
    int got = 0, ones = 0, su, count;
    for (int b = 0; b < 3; b++) {
        s = vt_loader_next(L, img[0], labels[0], NULL, &su, &count);
        CHECK(s == VT_OK, "train batch %d: %s", b, vt_last_error());
        if (s || count == 0) break;
        got += count;
        for (int i = 0; i < count; i++) ones += labels[0][i] == 1;
    }
    CHECK(got == 8 && ones == 7, "train epoch under skip: %d samples, %d of class b (want 8, 7)", got, ones);
    CHECK(vt_loader_skipped(L) == 4, "train skip count %lld", (long long)vt_loader_skipped(L));
    vt_loader_close(L);

    /* All files bad: skip cannot help. */
    text_file("allbad/train/a/x.jpg", "text");
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "allbad", 8, 3, 1);
    c.data.on_error = VT_ONERR_SKIP;
    vt_dataset *ds = NULL;
    CHECK(vt_dataset_imagefolder.open(&ds, &c, VT_SPLIT_TRAIN) == VT_OK, "open allbad");
    if (!ds) return;
    vt_sample sm = {0};
    int label;
    s = ds->ops->read(ds, 0, &sm, &label);
    CHECK(s == VT_ERR_RUNTIME && has(vt_last_error(), "all 1 images failed"), "all bad: \"%s\"", vt_last_error());
    vt_sample_free(&sm);
    ds->ops->close(ds);
}

/* ---- CIFAR --------------------------------------------------------------------------- */

/* Pixel byte of record r (global index), plane ch, position i: a known function. */
static uint8_t cifar_px(int r, int ch, int i) { return (uint8_t)(r * 31 + ch * 85 + i * 7); }

/* Write `n` records starting at global record index r0; labels from lab(r). */
static void write_cifar(const char *rel, int r0, int n, int cifar100, int extra_bytes, int bad_label_at) {
    char p[1024];
    int rec = 3072 + (cifar100 ? 2 : 1);
    size_t len = (size_t)n * rec + (size_t)extra_bytes;
    uint8_t *b = calloc(len ? len : 1, 1);
    for (int k = 0; k < n; k++) {
        uint8_t *r = b + (size_t)k * rec;
        int g = r0 + k;
        if (cifar100) { r[0] = (uint8_t)(g % 20); r[1] = (uint8_t)((g * 7) % 100); }
        else r[0] = (uint8_t)(g % 10);
        if (k == bad_label_at) r[cifar100 ? 0 : 0] = cifar100 ? 25 : 10;
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < 1024; i++) r[rec - 3072 + ch * 1024 + i] = cifar_px(g, ch, i);
    }
    CHECK(fx_write_bytes(tpath(p, rel), b, len) == 0, "write %s", rel);
    free(b);
}

static void check_cifar_sample(const vt_dataset *ds, int index, int global, int want_label) {
    vt_sample sm = {0};
    int label = -1;
    vt_status s = ds->ops->read(ds, index, &sm, &label);
    CHECK(s == VT_OK && sm.h == 32 && sm.w == 32 && sm.c == 3, "cifar read %d", index);
    CHECK(label == want_label, "cifar sample %d label %d want %d", index, label, want_label);
    int bad = 0;
    for (int y = 0; y < 32 && !s; y++)
        for (int x = 0; x < 32; x++)
            for (int ch = 0; ch < 3; ch++) bad += sm.pixels[(y * 32 + x) * 3 + ch] != cifar_px(global, ch, y * 32 + x);
    CHECK(bad == 0, "cifar sample %d: planes -> HWC (%d bytes differ)", index, bad);
    vt_sample_free(&sm);
}

static void test_cifar10(void) {
    /* Two records per train batch, three in the test batch; in the archive's folder. */
    char name[128];
    for (int f = 0; f < 5; f++) {
        snprintf(name, sizeof name, "c10/cifar-10-batches-bin/data_batch_%d.bin", f + 1);
        write_cifar(name, 2 * f, 2, 0, 0, -1);
    }
    write_cifar("c10/cifar-10-batches-bin/test_batch.bin", 100, 3, 0, 0, -1);
    vt_data_spec c;
    cfg_for(&c, VT_DATA_CIFAR10, "c10", 32, 3, 10);
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_cifar10.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK, "cifar10 train: %s", vt_last_error());
    if (!s) {
        CHECK(ds->size == 10 && ds->num_classes == 10 && ds->channels == 3 && ds->height == 32,
              "cifar10 train: 10 records, 10 classes");
        check_cifar_sample(ds, 0, 0, 0);
        check_cifar_sample(ds, 7, 7, 7);   /* data_batch_4.bin, second record */
        ds->ops->close(ds);
    }
    s = vt_dataset_cifar10.open(&ds, &c, VT_SPLIT_VAL);
    CHECK(s == VT_OK, "cifar10 test: %s", vt_last_error());
    if (!s) {
        CHECK(ds->size == 3, "test_batch: 3 records");
        check_cifar_sample(ds, 2, 102, 2);
        ds->ops->close(ds);
    }
    /* Through the loader: pixel (y, x) of channel ch normalised with mean 0, std 1. */
    vt_loader *L = NULL;
    s = vt_loader_open(&L, &c, VT_SPLIT_VAL, 32);
    CHECK(s == VT_OK, "cifar10 loader: %s", vt_last_error());
    if (!s) {
        float *img = malloc(sizeof(float) * 4 * 3 * 1024);
        int labels[4], su, count;
        s = vt_loader_next(L, img, labels, NULL, &su, &count);
        CHECK(s == VT_OK && count == 3, "loader batch: %s", vt_last_error());
        CHECK(labels[1] == 1, "loader label %d", labels[1]);
        CHECK_CLOSE(img[1 * 3 * 1024 + 2 * 1024 + 5 * 32 + 9], cifar_px(101, 2, 5 * 32 + 9) / 255.0, 1e-6, 0,
                    "loader pixel (record 1, B, y 5, x 9)");
        free(img);
        vt_loader_close(L);
    }

    /* Bad inputs. */
    write_cifar("c10bad/data_batch_1.bin", 0, 2, 0, 0, -1);
    write_cifar("c10bad/data_batch_2.bin", 2, 2, 0, 0, -1);
    cfg_for(&c, VT_DATA_CIFAR10, "c10bad", 32, 3, 10);
    expect_open_error("missing batch", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"c10bad/data_batch_3.bin", "missing", "cifar-10-binary", NULL});
    write_cifar("c10bad/data_batch_3.bin", 4, 2, 0, 5, -1);
    write_cifar("c10bad/data_batch_4.bin", 6, 2, 0, 0, -1);
    write_cifar("c10bad/data_batch_5.bin", 8, 2, 0, 0, -1);
    expect_open_error("size not a whole number of records", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data_batch_3.bin", "size 6151 bytes", "3073-byte records",
                                            "2 records + 5 bytes", NULL});
    write_cifar("c10bad/data_batch_3.bin", 4, 2, 0, 0, 1);
    expect_open_error("label out of range", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data_batch_3.bin", "record 1", "label 10", "expected 0..9", NULL});
    write_cifar("c10bad/test_batch.bin", 0, 0, 0, 0, -1);
    expect_open_error("empty test batch", &c, VT_SPLIT_VAL,
                      (const char *const[]){"test_batch.bin", "empty file", NULL});
    char fifo[1024];
    remove(tpath(fifo, "c10bad/test_batch.bin"));
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    expect_open_error("test batch FIFO", &c, VT_SPLIT_VAL,
                      (const char *const[]){"test_batch.bin", "is a FIFO (named pipe)", NULL});
    cfg_for(&c, VT_DATA_CIFAR10, "c10_missing_root", 32, 3, 10);
    expect_open_error("missing root", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"data.root", "c10_missing_root", NULL});
}

static void test_cifar100(void) {
    write_cifar("c100/train.bin", 0, 5, 1, 0, -1);
    write_cifar("c100/test.bin", 50, 2, 1, 0, -1);
    vt_data_spec c;
    cfg_for(&c, VT_DATA_CIFAR100, "c100", 32, 3, 100);
    strcpy(c.data.label, "fine");
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_cifar100.open(&ds, &c, VT_SPLIT_TRAIN);
    CHECK(s == VT_OK, "cifar100: %s", vt_last_error());
    if (!s) {
        CHECK(ds->size == 5 && ds->num_classes == 100, "cifar100 fine: 5 records, 100 classes");
        check_cifar_sample(ds, 3, 3, 21);   /* fine = 3 * 7 */
        ds->ops->close(ds);
    }
    strcpy(c.data.label, "coarse");
    c.num_classes = 20;
    s = vt_dataset_cifar100.open(&ds, &c, VT_SPLIT_VAL);
    CHECK(s == VT_OK, "cifar100 coarse: %s", vt_last_error());
    if (!s) {
        CHECK(ds->size == 2 && ds->num_classes == 20, "cifar100 coarse: 2 records, 20 classes");
        check_cifar_sample(ds, 1, 51, 51 % 20);
        ds->ops->close(ds);
    }
    write_cifar("c100bad/train.bin", 0, 3, 1, 0, 2);
    cfg_for(&c, VT_DATA_CIFAR100, "c100bad", 32, 3, 100);
    expect_open_error("cifar100 coarse label out of range", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"train.bin", "record 2", "coarse label 25", "0..19", NULL});
    write_cifar("c100bad/train.bin", 0, 3, 1, 3073, -1);
    expect_open_error("cifar100 record size", &c, VT_SPLIT_TRAIN,
                      (const char *const[]){"train.bin", "3074-byte records", "3 records + 3073 bytes", NULL});
}

/* ---- end to end ---------------------------------------------------------------------- */

static void test_train_end_to_end(void) {
    const char *bin = getenv("VT_BIN");
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "skipped: end-to-end imagefolder training (set VT_BIN to the vitrain binary)\n");
        skipped++;
        return;
    }
    /* Two classes, 8 images each, JPEG and PNG, color and gray, odd sizes; one of them a
     * text file (skipped). 4 steps of 4 = one epoch, so every file is read. */
    char rel[256];
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 8; i++) {
            uint8_t v = (uint8_t)(k ? 200 - i : 30 + i);
            snprintf(rel, sizeof rel, "e2e/train/class%d/img%d.%s", k, i, i % 2 ? "jpg" : "png");
            if (i % 2) solid_jpg(rel, 11 + i, 13, v, v, v);
            else solid_png(rel, 9 + i, 7 + i, i % 4 ? 3 : 1, v, v, v);
            if (i < 2) {
                snprintf(rel, sizeof rel, "e2e/val/class%d/img%d.png", k, i);
                solid_png(rel, 12, 12, 3, v, v, v);
            }
        }
    text_file("e2e/train/class1/img7.jpg", "not a jpeg");   /* replaces a good one */
    char cfg[1024], run[1024], log[1024], p[2048];
    tpath(cfg, "e2e.json");
    FILE *f = fopen(cfg, "w");
    fprintf(f, "{\"model\": {\"width\": 16, \"depth\": 1, \"heads\": 2, \"mlp_ratio\": 2, \"patch_size\": 4,"
               " \"img_size\": 8, \"in_chans\": 3, \"num_classes\": 2},\n"
               " \"data\": {\"kind\": \"imagefolder\", \"root\": \"%s/e2e\", \"on_error\": \"skip\"},\n"
               " \"train\": {\"steps\": 4, \"batch_size\": 4, \"seed\": 1, \"log_every\": 1}}\n", tmpdir);
    fclose(f);
    tpath(run, "e2e_run");
    tpath(log, "e2e.log");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s --run-dir %s --threads 1 >%s 2>&1", bin, cfg, run, log);
    int rc = system(cmd);
    int code = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    size_t len = 0;
    char *out = test_read_file(log, &len);
    CHECK(code == 0, "training on an imagefolder exits 0, got %d; log:\n%s", code, out ? out : "");
    CHECK(out && has(out, "class1/img7.jpg") && has(out, "not an image"), "the bad file is logged");
    free(out);
    snprintf(p, sizeof p, "%s/metrics.jsonl", run);
    char *m = test_read_file(p, &len);
    int steps = 0;
    for (char *q = m; q && (q = strstr(q, "\"kind\":\"train\"")) != NULL; q++) steps++;
    CHECK(steps == 4, "4 train records in metrics.jsonl, got %d", steps);
    CHECK(m && has(m, "\"kind\":\"eval\""), "an evaluation on the val split ran");
    free(m);
    snprintf(p, sizeof p, "%s/last.safetensors", run);
    CHECK(access(p, R_OK) == 0, "checkpoint written");
}

/* scripts/make_sample_data.py (run from the repository root, as run_tests.sh does): its
 * image folder and CIFAR files open and every sample decodes. */
static void test_sample_data_script(void) {
    if (access("scripts/make_sample_data.py", R_OK) != 0 || system("python3 -c 'import zlib' 2>/dev/null") != 0) {
        fprintf(stderr, "skipped: scripts/make_sample_data.py (needs python3 and the repository root as cwd)\n");
        skipped++;
        return;
    }
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 scripts/make_sample_data.py %s/sample --seed 5 >/dev/null", tmpdir);
    CHECK(system(cmd) == 0, "make_sample_data.py ran");
    struct { vt_data_kind kind; const char *root; vt_split split; int64_t size; int classes; } want[] = {
        {VT_DATA_IMAGEFOLDER, "sample/imagefolder", VT_SPLIT_TRAIN, 36, 3},
        {VT_DATA_IMAGEFOLDER, "sample/imagefolder", VT_SPLIT_VAL, 12, 3},
        {VT_DATA_CIFAR10, "sample/cifar10", VT_SPLIT_TRAIN, 100, 10},
        {VT_DATA_CIFAR10, "sample/cifar10", VT_SPLIT_VAL, 20, 10},
        {VT_DATA_CIFAR100, "sample/cifar100", VT_SPLIT_TRAIN, 60, 100},
        {VT_DATA_CIFAR100, "sample/cifar100", VT_SPLIT_VAL, 20, 100},
    };
    vt_sample sm = {0};
    int gray = 0, color = 0;
    for (size_t t = 0; t < sizeof want / sizeof want[0]; t++) {
        vt_data_spec c;
        cfg_for(&c, want[t].kind, want[t].root, 32, 3, want[t].classes);
        vt_dataset *ds = NULL;
        vt_status s = open_kind(&ds, &c, want[t].split);
        CHECK(s == VT_OK, "sample %s: %s", want[t].root, vt_last_error());
        if (s) continue;
        CHECK(ds->size == want[t].size && ds->num_classes == want[t].classes,
              "sample %s split %d: %lld samples in %d classes", want[t].root, (int)want[t].split,
              (long long)ds->size, ds->num_classes);
        int bad = 0;
        for (int64_t i = 0; i < ds->size; i++) {
            int label = -1;
            if (ds->ops->read(ds, i, &sm, &label) != VT_OK || label < 0 || label >= ds->num_classes) {
                fprintf(stderr, "sample %lld: %s\n", (long long)i, vt_last_error());
                bad++;
                continue;
            }
            if (want[t].kind == VT_DATA_IMAGEFOLDER) {
                gray += sm.c == 1;
                color += sm.c == 3;
            }
        }
        CHECK(bad == 0, "sample %s: %d samples failed", want[t].root, bad);
        if (want[t].kind == VT_DATA_IMAGEFOLDER && want[t].split == VT_SPLIT_TRAIN)
            CHECK(vt_imagefolder_ignored(ds) == 1, "README.txt ignored");
        ds->ops->close(ds);
    }
    CHECK(gray > 0 && color > 0, "sample images include gray (%d) and color (%d)", gray, color);
    vt_sample_free(&sm);
}

/* ---- data-parallel shards of every kind ------------------------------------------------ */

/* A dataset that counts the reads of each index and forwards them to the kind's own. */
typedef struct {
    vt_dataset *inner;
    _Atomic int *reads; /* owned by the test */
} counted_ds;

static vt_status counted_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    const counted_ds *c = ds->impl;
    atomic_fetch_add(&c->reads[index], 1);
    return c->inner->ops->read(c->inner, index, s, label);
}

static void counted_close(vt_dataset *ds) {
    counted_ds *c = ds->impl;
    c->inner->ops->close(c->inner);
    free(c);
    free(ds);
}

static const vt_dataset_ops counted_ops = {.kind = "counted", .read = counted_read, .close = counted_close};

/* One epoch (epoch 1 of train: a shuffled order; val: dataset order) of split through
 * the loader as shard rank of world at batch / world, synchronous; images and labels
 * appended at *img / *lab in loader order, reads[i] counts the reads of index i.
 * Returns the samples, or -1 if the dataset does not open. */
static int64_t read_epoch(const vt_data_spec *spec, vt_data_kind kind, vt_split split, int batch, int rank,
                          int world, float *img, int *lab, _Atomic int *reads, int64_t cap) {
    vt_dataset *inner = NULL;
    if (vt_dataset_kind_of(kind)->open(&inner, spec, split) != VT_OK) return -1;
    for (int64_t i = 0; i < inner->size; i++) atomic_init(&reads[i], 0);
    counted_ds *c = calloc(1, sizeof *c);
    c->inner = inner;
    c->reads = reads;
    vt_dataset *ds = calloc(1, sizeof *ds);
    *ds = *inner;
    ds->ops = &counted_ops;
    ds->impl = c;
    vt_loader *L = NULL;
    if (vt_loader_open_dataset(&L, ds, spec, split, spec->img_size) != VT_OK) return -1;
    vt_loader_set_workers(L, 0);
    vt_loader_set_shard(L, rank, world);
    const int S = spec->img_size, C = spec->in_chans, b = batch / world;
    const size_t per = (size_t)C * S * S;
    float *soft = malloc(sizeof(float) * (size_t)b * spec->num_classes);
    vt_loader_seek(L, split == VT_SPLIT_TRAIN ? 1 : 0, 0, b);
    int64_t n = 0;
    for (int cnt = 1, su; cnt > 0 && n + b <= cap;) {
        if (vt_loader_next(L, img + n * per, lab + n, soft, &su, &cnt) != VT_OK) {
            n = -1;
            break;
        }
        n += cnt;
    }
    free(soft);
    vt_loader_close(L);
    return n;
}

/* For one kind (spec at its fixture, batch 4, no mixup): the 2 shards of each split
 * together give one process's samples bit for bit (shard r's sample i of batch k is
 * position 2 i + r of batch k), and each rank reads only its own samples: the ranks'
 * read indices are disjoint and together are one process's. */
static void check_kind_shards(const char *what, vt_data_spec *spec, vt_data_kind kind) {
    enum { CAP = 64, W = 2, B = 4 };
    spec->data.mixup = spec->data.cutmix = 0;
    const size_t per = (size_t)spec->in_chans * spec->img_size * spec->img_size;
    float *ref = malloc(sizeof(float) * per * CAP), *got = malloc(sizeof(float) * per * CAP);
    int rlab[CAP], glab[CAP];
    static _Atomic int rref[CAP], rsh[W][CAP];
    for (int sp = 0; sp < 2; sp++) {
        vt_split split = sp ? VT_SPLIT_VAL : VT_SPLIT_TRAIN;
        const char *sn = sp ? "val" : "train";
        int64_t n = read_epoch(spec, kind, split, B, 0, 1, ref, rlab, rref, CAP);
        CHECK(n > 0 && n < CAP, "%s %s: one process reads %lld samples: %s", what, sn, (long long)n,
              n < 0 ? vt_last_error() : "");
        if (n <= 0 || n >= CAP) continue;
        int64_t total = 0;
        int same = 1;
        for (int r = 0; r < W; r++) {
            int64_t m = read_epoch(spec, kind, split, B, r, W, got, glab, rsh[r], CAP);
            CHECK(m >= 0, "%s %s shard %d: %s", what, sn, r, m < 0 ? vt_last_error() : "");
            for (int64_t i = 0; i < m; i++) {
                int64_t k = i / (B / W), j = (k * B) + (i % (B / W)) * W + r; /* position in ref */
                same &= j < n && glab[i] == rlab[j] && !memcmp(got + i * per, ref + j * per, per * sizeof(float));
            }
            total += m > 0 ? m : 0;
        }
        CHECK(same && total == n, "%s %s: 2 shards of %lld samples in all equal one process's %lld bit for bit",
              what, sn, (long long)total, (long long)n);
        int disjoint = 1, cover = 1;
        for (int i = 0; i < CAP; i++) {
            int a = atomic_load(&rsh[0][i]), b = atomic_load(&rsh[1][i]), o = atomic_load(&rref[i]);
            disjoint &= !(a && b);
            cover &= (a + b) == o;
        }
        CHECK(disjoint && cover, "%s %s: each rank reads only its shard (disjoint reads, together one "
              "process's)", what, sn);
    }
    free(ref);
    free(got);
}

static void test_shards_every_kind(void) {
    vt_data_spec c;
    cfg_for(&c, VT_DATA_IMAGEFOLDER, "if", 8, 3, 3);
    check_kind_shards("imagefolder", &c, VT_DATA_IMAGEFOLDER);
    cfg_for(&c, VT_DATA_CIFAR10, "c10", 32, 3, 10);
    check_kind_shards("cifar10", &c, VT_DATA_CIFAR10);
    /* IDX: 11 train and 5 val images of 6 x 6 */
    for (int sp = 0; sp < 2; sp++) {
        const int n = sp ? 5 : 11;
        char p[1024], name[64];
        uint8_t h[16] = {0, 0, 8, 3, 0, 0, 0, (uint8_t)n, 0, 0, 0, 6, 0, 0, 0, 6}, px[11 * 36], lab[8 + 11];
        for (int i = 0; i < n * 36; i++) px[i] = (uint8_t)(i * 7 + sp * 50);
        snprintf(name, sizeof name, "idx/%s-images-idx3-ubyte", sp ? "val" : "train");
        FILE *f = fopen(tpath(p, name), "wb");
        fwrite(h, 1, 16, f);
        fwrite(px, 1, (size_t)n * 36, f);
        fclose(f);
        uint8_t lh[8] = {0, 0, 8, 1, 0, 0, 0, (uint8_t)n};
        memcpy(lab, lh, 8);
        for (int i = 0; i < n; i++) lab[8 + i] = (uint8_t)(i % 3);
        snprintf(name, sizeof name, "idx/%s-labels-idx1-ubyte", sp ? "val" : "train");
        CHECK(fx_write_bytes(tpath(p, name), lab, (size_t)8 + n) == 0, "write %s", name);
    }
    cfg_for(&c, VT_DATA_IDX, "idx", 6, 1, 3);
    check_kind_shards("idx", &c, VT_DATA_IDX);
    spec_of_kind(&c, VT_DATA_SYNTHETIC);
    c.data.train_size = 13;
    c.data.val_size = 7;
    c.img_size = 8;
    c.in_chans = 3;
    c.num_classes = 4;
    check_kind_shards("synthetic", &c, VT_DATA_SYNTHETIC);
}

int main(void) {
    if (data_tmpdir_create("test_datasets") != 0) return 1;
    int threads = omp_get_max_threads();
    test_imagefolder_index();
    test_class_list();
    test_small_image_through_loader();
    test_imagefolder_bad_layout();
    test_bad_files_fail();
    test_bad_files_skip();
    omp_set_num_threads(threads);
    test_cifar10();
    test_cifar100();
    test_shards_every_kind();
    test_sample_data_script();
    test_train_end_to_end();
    data_tmpdir_remove();
    return data_summary();
}
