/* fuzz_idx.c - libFuzzer harness: the IDX (MNIST-style) reader, raw and gzip.
 *
 * The first two bytes (big-endian) give the length of the images file, which follows;
 * the rest is the labels file (val split; gzip when its bytes are gzip, as zlib decides).
 * Opening either fails with a message naming a file, or gives a dataset whose every
 * sample reads at the header's size with a label below model.num_classes. Memory is
 * bounded by the input (idx.c), which libFuzzer's malloc limit enforces.
 */
#include "config.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "fuzz_util.h"
#include "resolve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t n = (size_t)data[0] << 8 | data[1];
    if (n > size - 2) n = size - 2;
    const char *dir = fuzz_dir();
    fuzz_put(dir, "val-images-idx3-ubyte", data + 2, n);
    fuzz_put(dir, "val-labels-idx1-ubyte", data + 2 + n, size - 2 - n);
    vt_config cfg;
    vt_config_defaults(&cfg);
    cfg.data.kind = VT_DATA_IDX;
    cfg.model.num_classes = 10;
    snprintf(cfg.data.root, sizeof cfg.data.root, "%s", dir);
    vt_data_spec spec;
    vt_resolve_data_spec(&cfg, &spec);
    vt_dataset *ds = NULL;
    vt_status s = vt_dataset_idx.open(&ds, &spec, VT_SPLIT_VAL);
    if (s != VT_OK) {
        FUZZ_CHECK(ds == NULL && strstr(vt_last_error(), dir) != NULL, "message without the file: %s",
                   vt_last_error());
        return 0;
    }
    vt_sample sm = {0};
    for (int64_t i = 0; i < ds->size; i++) {
        int label = -1;
        FUZZ_CHECK(ds->ops->read(ds, i, &sm, &label) == VT_OK, "read %lld: %s", (long long)i,
                   vt_last_error());
        FUZZ_CHECK(sm.h == ds->height && sm.w == ds->width && sm.c == 1 && label >= 0 && label < 10,
                   "sample %lld: %d x %d x %d, label %d", (long long)i, sm.w, sm.h, sm.c, label);
    }
    vt_sample_free(&sm);
    ds->ops->close(ds);
    return 0;
}
