/* imagefolder.c - the imagefolder dataset kind: ROOT/<split>/<class>/<image>.
 *
 * Layout: data.root/<data.train_split>/<class>/<file> and the same under data.val_split
 * (ImageNet: train/n01440764/n01440764_10026.JPEG, val re-foldered the same way).
 * Classes: the sub-folders of the TRAIN split, sorted by name (strcmp, bytewise), give
 * the class indices 0..K-1, for both splits; a val folder whose name is not a train class
 * is an error, a train class without a val folder just has no val samples. Hidden names
 * (leading '.') are ignored. With data.class_list (a text file, one folder name per line,
 * '#' comments; path as given, relative to the working directory) the listed classes, in
 * line order, are the classes instead: each must be a train folder and appear once;
 * folders not listed are ignored in both splits (counted in the log line).
 * Evaluation without a train split (data.root/<train_split> does not exist, e.g. only
 * ImageNet's val was copied): the classes are data.class_list (not checked against
 * folders), else the val split's own folders sorted, whose count must then equal
 * model.num_classes (sorted folders give the training indices only when every class has
 * a folder; with fewer it is an error asking for data.class_list). Logged once.
 * Files: indexed by extension (.jpg, .jpeg, .png in any case) in sorted order within each
 * class (not recursive); other names, hidden entries, sub-folders of a class folder and
 * plain files directly in the split folder are ignored and counted (one log line per open on stderr). A class folder with no image
 * file is an error (the message counts what was ignored there). The content is decoded by
 * its magic bytes (image.h), so PNG data under a .JPEG name works.
 *
 * Memory: only an index is kept - the split directory, one "class/file" string per
 * sample in a single pool, its offset and label, and one "known bad" byte (about 45 bytes
 * per ImageNet file). Pixels are decoded per sample in read() into the caller's buffer.
 *
 * Bad files (zero-byte, truncated, not an image, corrupt; see image.h for the reasons):
 *  - data.on_error = fail: read() returns the error naming the file and the reason.
 *  - data.on_error = skip: read() replaces the sample by the next index, cyclically,
 *    whose file decodes, and uses that file's label. Each bad file is logged once on
 *    stderr with its reason and counted (vt_dataset_skipped). A file's verdict never
 *    changes, so the replacement is the same whatever the thread count or timing; the
 *    per-file "bad" byte and the counter are atomics, the only state read() writes.
 *    If every file is bad, read() fails.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data/imagefolder.h"
#include "input_file.h"
#include "image.h"

typedef struct {
    char *dir;                 /* data.root/<split> */
    char *pool;                /* "class/file\0" per sample */
    int64_t *off;              /* sample -> offset in pool */
    int32_t *label;            /* sample -> class index */
    char **classes;            /* num_classes sorted names */
    int nclasses;
    int skip;                  /* data.on_error = skip */
    int64_t max_pixels;        /* data.max_image_pixels */
    atomic_uchar *bad;         /* sample -> 1 once its file failed to decode */
    atomic_llong skipped;      /* distinct bad files so far */
    int64_t ignored;           /* files not indexed */
} if_impl;

/* A growable list of names. */
typedef struct {
    char **v;
    size_t n, cap;
} name_list;

static void names_push(name_list *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = vt_xrealloc(l->v, sizeof(char *) * l->cap);
    }
    size_t len = strlen(s) + 1;
    l->v[l->n] = vt_xmalloc(len);
    memcpy(l->v[l->n], s, len);
    l->n++;
}

static void names_free(name_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_image_ext(const char *name) {
    const char *dot = strrchr(name, '.');
    return dot && (strcasecmp(dot, ".jpg") == 0 || strcasecmp(dot, ".jpeg") == 0 ||
                   strcasecmp(dot, ".png") == 0);
}

/* Entry type: 1 directory, 2 regular file, 0 other (stat follows symlinks). */
static int entry_type(const char *dir, const struct dirent *e) {
    if (e->d_type == DT_DIR) return 1;
    if (e->d_type == DT_REG) return 2;
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(p, &st) != 0) return 0;
    return S_ISDIR(st.st_mode) ? 1 : S_ISREG(st.st_mode) ? 2 : 0;
}

/* List dir: sub-folders into dirs (sorted), image files into files (sorted), others
 * counted in *ignored (first ignored name kept in first_ignored if empty). */
static vt_status list_dir(const char *dir, name_list *dirs, name_list *files, int64_t *ignored,
                          char *first_ignored, size_t fi_len) {
    DIR *d = opendir(dir);
    if (!d) return vt_fail(VT_ERR_RUNTIME, "%s: cannot open directory: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        int t = e->d_name[0] == '.' ? 0 : entry_type(dir, e);
        if (t == 1 && dirs) {
            names_push(dirs, e->d_name);
        } else if (t == 2 && files && has_image_ext(e->d_name)) {
            names_push(files, e->d_name);
        } else {
            (*ignored)++;
            if (first_ignored[0] == '\0') snprintf(first_ignored, fi_len, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    if (dirs && dirs->n) qsort(dirs->v, dirs->n, sizeof(char *), cmp_str);
    if (files && files->n) qsort(files->v, files->n, sizeof(char *), cmp_str);
    return VT_OK;
}

static void if_close(vt_dataset *ds) {
    if (!ds) return;
    if_impl *im = ds->impl;
    if (im) {
        free(im->dir);
        free(im->pool);
        free(im->off);
        free(im->label);
        for (int k = 0; k < im->nclasses; k++) free(im->classes[k]);
        free(im->classes);
        free((void *)im->bad);
        free(im);
    }
    free(ds);
}

static vt_status if_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label);

static int64_t if_skipped(const vt_dataset *ds);
static const char *if_path(const vt_dataset *ds, int64_t index, char *buf, size_t len);
static const char *if_class_name(const vt_dataset *ds, int k);
static const vt_dataset_ops if_ops = {.read = if_read, .close = if_close, .skipped = if_skipped,
                                      .sample_path = if_path, .class_name = if_class_name};

static const char *if_path(const vt_dataset *ds, int64_t index, char *buf, size_t len) {
    const if_impl *im = ds->impl;
    snprintf(buf, len, "%s/%s", im->dir, im->pool + im->off[index]);
    return buf;
}

static vt_status if_read(const vt_dataset *ds, int64_t index, vt_sample *s, int *label) {
    if_impl *im = ds->impl;
    int64_t n = ds->size;
    char path[PATH_MAX];
    vt_status st = VT_OK;
    for (int64_t k = 0; k < n; k++) {
        int64_t i = (index + k) % n;
        if (atomic_load_explicit(&im->bad[i], memory_order_relaxed)) continue;
        if_path(ds, i, path, sizeof path);
        st = vt_image_load(path, im->max_pixels, &s->pixels, &s->cap, &s->h, &s->w, &s->c);
        if (st == VT_OK) {
            *label = im->label[i];
            return VT_OK;
        }
        if (!im->skip) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", vt_last_error());
            return vt_fail(st, "%s (data.on_error=fail; set data.on_error=skip to replace bad "
                           "images and go on)", msg);
        }
        if (atomic_exchange(&im->bad[i], 1) == 0) {
            long long total = atomic_fetch_add(&im->skipped, 1) + 1;
            fprintf(stderr, "vitrain: data: skipping bad image %lld (%lld so far): %s\n",
                    (long long)i, total, vt_last_error());
        }
    }
    return vt_fail(VT_ERR_RUNTIME, "%s: all %lld images failed to decode (data.on_error=skip has "
                   "nothing to replace them with)", im->dir, (long long)n);
}

static const char *if_class_name(const vt_dataset *ds, int k) {
    return ((const if_impl *)ds->impl)->classes[k];
}

int64_t vt_imagefolder_ignored(const vt_dataset *ds) {
    VT_ASSERT(ds->ops == &if_ops, "not an imagefolder dataset");
    return ((const if_impl *)ds->impl)->ignored;
}

static int64_t if_skipped(const vt_dataset *ds) {
    return atomic_load(&((if_impl *)ds->impl)->skipped);
}

/* A class name and its index, sorted by name for lookups. */
typedef struct {
    const char *name;
    int k;
} class_key;

static int cmp_key(const void *a, const void *b) {
    return strcmp(((const class_key *)a)->name, ((const class_key *)b)->name);
}

/* Read data.class_list: one class folder name per line (surrounding blanks trimmed; empty
 * lines and lines starting with '#' skipped) into out, in file order. Every name must be
 * a folder of the train split (`folders`, sorted; NULL: no train split to check against)
 * and appear once. */
static vt_status read_class_list(const char *path, const name_list *folders, const char *train_dir,
                                 name_list *out) {
    int fd;
    int64_t size;
    vt_status opened = vt_input_open(path, "data.class_list", &fd, &size);
    if (opened != VT_OK) return opened;
    FILE *f = fdopen(fd, "r");
    VT_ASSERT(f != NULL, "fdopen of an open descriptor failed");
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    int lineno = 0;
    vt_status s = VT_OK;
    while ((got = getline(&line, &cap, f)) >= 0) {
        lineno++;
        char *b = line, *e = line + got;
        while (b < e && (*b == ' ' || *b == '\t')) b++;
        while (e > b && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t')) e--;
        *e = '\0';
        if (*b == '\0' || *b == '#') continue;
        if (folders && !bsearch(&b, folders->v, folders->n, sizeof(char *), cmp_str)) {
            s = vt_fail(VT_ERR_RUNTIME, "data.class_list: %s line %d: class '%s' has no folder in "
                        "the train split %s", path, lineno, b, train_dir);
            break;
        }
        for (size_t i = 0; i < out->n; i++)
            if (strcmp(out->v[i], b) == 0) {
                s = vt_fail(VT_ERR_RUNTIME, "data.class_list: %s line %d: class '%s' is listed twice "
                            "(first as class %zu)", path, lineno, b, i);
                break;
            }
        if (s) break;
        names_push(out, b);
    }
    free(line);
    fclose(f);
    if (!s && out->n == 0)
        s = vt_fail(VT_ERR_RUNTIME, "data.class_list: %s names no class (one folder name per line "
                    "expected)", path);
    if (s) names_free(out);
    return s;
}

/* Is `dir` a directory? Else a message naming it (what = "data.root", ...). */
static vt_status need_dir(const char *dir, const char *what, const char *hint) {
    struct stat st;
    if (stat(dir, &st) != 0)
        return vt_fail(VT_ERR_RUNTIME, "%s: %s does not exist (%s); %s", what, dir, strerror(errno), hint);
    if (!S_ISDIR(st.st_mode))
        return vt_fail(VT_ERR_RUNTIME, "%s: %s is not a directory; %s", what, dir, hint);
    return VT_OK;
}

static vt_status if_open(vt_dataset **out, const vt_data_spec *spec, vt_split split) {
    *out = NULL;
    const vt_data_config *d = &spec->data;
    const char *root = d->root;
    const char *layout = "data.kind=imagefolder expects ROOT/<split>/<class>/<image>.jpg|.jpeg|.png";
    vt_status s = need_dir(root, "data.root", layout);
    if (s) return s;
    char train_dir[PATH_MAX], dir[PATH_MAX], ign_first[PATH_MAX] = "";
    snprintf(train_dir, sizeof train_dir, "%s/%s", root, d->train_split);
    const char *split_key = split == VT_SPLIT_TRAIN ? "data.train_split" : "data.val_split";
    snprintf(dir, sizeof dir, "%s/%s", root, split == VT_SPLIT_TRAIN ? d->train_split : d->val_split);
    /* Evaluating without a train split: the classes are data.class_list, else the val
     * split's own folders (sorted), which must then be exactly model.num_classes. */
    struct stat tsb;
    int no_train = split == VT_SPLIT_VAL && stat(train_dir, &tsb) != 0 && errno == ENOENT;
    if (!no_train && (s = need_dir(train_dir, "data.train_split", layout))) return s;
    if ((s = need_dir(dir, split_key, layout))) return s;
    const char *class_dir = no_train ? dir : train_dir;
    const char *classes_key = no_train ? split_key : "data.train_split";

    /* Classes from the train split. */
    name_list classes = {0}, dirs = {0}, files = {0};
    int64_t ign_train = 0;
    char scratch[PATH_MAX] = "";
    if ((s = list_dir(class_dir, &classes, NULL, &ign_train, scratch, sizeof scratch))) return s;
    if (classes.n == 0) {
        vt_status r = vt_fail(VT_ERR_RUNTIME, "%s: %s has no class folders (%lld files directly in it); %s",
                              classes_key, class_dir, (long long)ign_train, layout);
        names_free(&classes);
        return r;
    }
    if (no_train && !d->class_list[0] && classes.n != (size_t)spec->num_classes) {
        vt_status r = vt_fail(VT_ERR_RUNTIME, "data.train_split: %s does not exist, so the classes are "
                              "the %zu class folders of %s (sorted), but model.num_classes is %d: set "
                              "data.class_list to a file naming the %d training classes in index order",
                              train_dir, classes.n, dir, spec->num_classes, spec->num_classes);
        names_free(&classes);
        return r;
    }
    if (no_train && !spec->quiet)
        fprintf(stderr, "vitrain: data: no train split %s: classes from %s\n", train_dir,
                d->class_list[0] ? d->class_list : "the val split's folders, sorted");
    if (classes.n > INT_MAX / 2) {
        names_free(&classes);
        return vt_fail(VT_ERR_RUNTIME, "%s: too many class folders", train_dir);
    }
    /* data.class_list replaces the sorted folders by the listed ones, in file order. */
    const char *list_path = d->class_list;
    if (list_path[0]) {
        name_list listed = {0};
        s = read_class_list(list_path, no_train ? NULL : &classes, train_dir, &listed);
        names_free(&classes);
        if (s) return s;
        classes = listed;
    }
    class_key *keys = vt_xmalloc(sizeof(class_key) * classes.n);
    for (size_t k = 0; k < classes.n; k++) keys[k] = (class_key){classes.v[k], (int)k};
    qsort(keys, classes.n, sizeof *keys, cmp_key);
    int64_t unlisted = 0;

    /* The split's class folders (the train list again for the train split). */
    int64_t ignored = 0;
    if ((s = list_dir(dir, &dirs, NULL, &ignored, ign_first, sizeof ign_first))) {
        names_free(&classes);
        free(keys);
        return s;
    }
    size_t pool_len = 0, pool_cap = 0, n = 0, n_cap = 0;
    char *pool = NULL;
    int64_t *off = NULL;
    int32_t *lab = NULL;
    for (size_t di = 0; di < dirs.n; di++) {
        class_key probe = {dirs.v[di], 0};
        const class_key *hit = bsearch(&probe, keys, classes.n, sizeof *keys, cmp_key);
        if (!hit && list_path[0]) {
            unlisted++;
            continue;
        }
        if (!hit) {
            s = vt_fail(VT_ERR_RUNTIME, "%s: class folder '%s' (%s/%s) is not a class of the train "
                        "split %s (%zu classes); the val split must use the train classes", split_key,
                        dirs.v[di], dir, dirs.v[di], train_dir, classes.n);
            goto fail;
        }
        int k = hit->k;
        char cdir[PATH_MAX];
        if (snprintf(cdir, sizeof cdir, "%s/%s", dir, dirs.v[di]) >= (int)sizeof cdir) {
            s = vt_fail(VT_ERR_RUNTIME, "%s/%s: path longer than %d bytes", dir, dirs.v[di], PATH_MAX);
            goto fail;
        }
        int64_t ign_here = 0;
        char first_here[PATH_MAX] = "";
        if ((s = list_dir(cdir, NULL, &files, &ign_here, first_here, sizeof first_here))) goto fail;
        if (files.n == 0) {
            s = vt_fail(VT_ERR_RUNTIME, "%s: class folder %s has no image files (.jpg .jpeg .png, "
                        "any case; %lld other entries ignored%s%s); remove the folder or add images",
                        split_key, cdir, (long long)ign_here, ign_here ? ", e.g. " : "", first_here);
            goto fail;
        }
        ignored += ign_here;
        if (ign_first[0] == '\0') snprintf(ign_first, sizeof ign_first, "%s", first_here);
        for (size_t fi = 0; fi < files.n; fi++) {
            size_t need = strlen(dirs.v[di]) + 1 + strlen(files.v[fi]) + 1;
            if (pool_len + need > pool_cap) {
                pool_cap = (pool_len + need) * 2;
                pool = vt_xrealloc(pool, pool_cap);
            }
            if (n == n_cap) {
                n_cap = n_cap ? 2 * n_cap : 1024;
                off = vt_xrealloc(off, sizeof(int64_t) * n_cap);
                lab = vt_xrealloc(lab, sizeof(int32_t) * n_cap);
            }
            off[n] = (int64_t)pool_len;
            lab[n] = k;
            n++;
            size_t cl = strlen(dirs.v[di]);
            memcpy(pool + pool_len, dirs.v[di], cl);
            pool[pool_len + cl] = '/';
            memcpy(pool + pool_len + cl + 1, files.v[fi], need - cl - 1);
            pool_len += need;
        }
        names_free(&files);
    }
    if (n == 0) {
        s = vt_fail(VT_ERR_RUNTIME, "%s: %s has no class folders with images (%lld files directly "
                    "in it%s); %s", split_key, dir, (long long)ignored,
                    ignored ? ": an unfoldered ImageNet val? see data/imagenet/README.md" : "", layout);
        goto fail;
    }
    names_free(&dirs);
    free(keys);

    if_impl *im = vt_xcalloc(1, sizeof *im);
    im->dir = vt_xmalloc(strlen(dir) + 1);
    memcpy(im->dir, dir, strlen(dir) + 1);
    im->pool = pool;
    im->off = off;
    im->label = lab;
    im->classes = classes.v;
    im->nclasses = (int)classes.n;
    im->skip = d->on_error == VT_ONERR_SKIP;
    im->max_pixels = d->max_image_pixels;
    im->bad = vt_xcalloc(n, sizeof *im->bad);
    atomic_init(&im->skipped, 0);
    im->ignored = ignored;
    vt_dataset *ds = vt_xcalloc(1, sizeof *ds);
    ds->ops = &if_ops;
    ds->size = (int64_t)n;
    ds->num_classes = (int)classes.n;
    ds->channels = 3;
    ds->height = ds->width = 0;
    ds->impl = im;
    if (!spec->quiet) {
        fprintf(stderr, "vitrain: data: %s: %zu images in %d classes", dir, n, im->nclasses);
        if (ignored) fprintf(stderr, "; %lld non-image files ignored (e.g. %s)", (long long)ignored, ign_first);
        if (unlisted) fprintf(stderr, "; %lld class folders not in %s ignored", (long long)unlisted, list_path);
        fputc('\n', stderr);
    }
    *out = ds;
    return VT_OK;

fail:
    free(keys);
    names_free(&classes);
    names_free(&dirs);
    names_free(&files);
    free(pool);
    free(off);
    free(lab);
    return s;
}

/* The classes the files define (model.num_classes' default): the names in
 * data.class_list, else the train split's class folders, else (no train split) the val
 * split's, as if_open counts them; 0 when they cannot be read (opening the split then
 * names the problem). */
static int if_classes(const vt_data_config *d) {
    name_list names = {0};
    int64_t ignored = 0;
    char dir[PATH_MAX], first[PATH_MAX] = "";
    size_t k = 0;
    if (d->class_list[0]) {
        if (read_class_list(d->class_list, NULL, NULL, &names) == VT_OK) k = names.n;
    } else {
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", d->root, d->train_split);
        if (stat(dir, &sb) != 0 && errno == ENOENT) snprintf(dir, sizeof dir, "%s/%s", d->root, d->val_split);
        if (list_dir(dir, &names, NULL, &ignored, first, sizeof first) == VT_OK) k = names.n;
    }
    names_free(&names);
    return k > INT_MAX / 2 ? 0 : (int)k;
}

const vt_dataset_kind vt_dataset_imagefolder = {
    .kind = VT_DATA_IMAGEFOLDER,
    .needs_root = 1,
    .classes = if_classes,
    .open = if_open,
    .classes_doc = "the train split's class folders, or data.class_list (read when the config is "
                   "resolved)",
    .rules_doc = "-",
};
