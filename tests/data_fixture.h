/* data_fixture.h - test helper: the scaffolding shared by test_data.c and
 * test_datasets.c (header-only; include from exactly one file per test binary, after
 * harness.h).
 *
 * Provides the binary's scratch directory (tmpdir, made by data_tmpdir_create and
 * removed with everything in it by data_tmpdir_remove), the count of checks skipped for
 * a missing external dataset (skipped) and the closing line with it (data_summary),
 * spec_of_kind (the data spec of a resolved default config of one format) and data_cfg:
 * such a spec with every field the loader reads set explicitly (mean 0, std 1, no flip,
 * splits "train" / "val").
 */
#ifndef VT_TEST_DATA_FIXTURE_H
#define VT_TEST_DATA_FIXTURE_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "resolve.h"
#include "test_util.h"

static char tmpdir[256];
static int skipped = 0;

/* Make tmpdir = a fresh "/tmp/vt_<name>_XXXXXX"; 0 on success, 1 (perror printed) if not. */
static int data_tmpdir_create(const char *name) { return test_tmpdir(tmpdir, sizeof tmpdir, name); }

/* Remove tmpdir and everything below it. */
static void data_tmpdir_remove(void) { test_rm_rf(tmpdir); }

/* Print "N passed, N failed, N skipped"; the binary's exit status (1 if anything failed). */
static int data_summary(void) {
    printf("%d passed, %d failed, %d skipped\n", test_passed_count, test_failed_count, skipped);
    return test_failed_count ? 1 : 0;
}

/* The data spec of the config defaults with data.kind = kind, resolved (so the format's
 * default train and eval geometry), for tests to change field by field. */
static void spec_of_kind(vt_data_spec *s, vt_data_kind kind) {
    vt_config c;
    vt_config_defaults(&c);
    char set[64];
    snprintf(set, sizeof set, "data.kind=%s", vt_data_kind_name(kind));
    if (vt_config_set(&c, set) != VT_OK || vt_resolve(&c) != VT_OK) {
        fprintf(stderr, "spec_of_kind %s: %s\n", set, vt_last_error());
        abort();
    }
    vt_resolve_data_spec(&c, s);
}

/* Loader spec for a `kind` dataset at `root`: img x img images with chans channels,
 * classes classes, seed `seed`, train and eval batch size `batch`. */
static void data_cfg(vt_data_spec *c, vt_data_kind kind, const char *root, int img, int chans,
                     int classes, long long seed, int batch) {
    spec_of_kind(c, kind);
    c->data.hflip = 0;
    snprintf(c->data.root, sizeof c->data.root, "%s", root);
    strcpy(c->data.train_split, "train");
    strcpy(c->data.val_split, "val");
    for (int i = 0; i < 3; i++) { c->data.mean[i] = 0.0; c->data.std[i] = 1.0; }
    c->img_size = img;
    c->in_chans = chans;
    c->num_classes = classes;
    c->seed = (uint64_t)seed;
    c->train_batch = batch;
    c->eval_batch = batch;
}

#endif
