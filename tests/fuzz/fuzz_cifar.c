/* fuzz_cifar.c - libFuzzer harness: the CIFAR-10 / CIFAR-100 binary readers.
 *
 * The first byte picks the kind (bit 0: cifar100; bit 1: coarse labels), the rest is the
 * val split's file (test_batch.bin or test.bin). Opening either fails with a message
 * naming the file, or gives a dataset of size / record-size samples whose every sample
 * reads as 32 x 32 x 3 with a label below the class count.
 */
#include "config.h"
#include "data/dataset.h"
#include "data/formats.h"
#include "fuzz_util.h"
#include "resolve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *dir = fuzz_dir();
    int c100 = data[0] & 1;
    const char *name = c100 ? "test.bin" : "test_batch.bin";
    fuzz_put(dir, name, data + 1, size - 1);
    vt_config cfg;
    vt_config_defaults(&cfg);
    cfg.data.kind = c100 ? VT_DATA_CIFAR100 : VT_DATA_CIFAR10;
    cfg.model.num_classes = c100 ? (data[0] & 2 ? 20 : 100) : 10;
    snprintf(cfg.data.root, sizeof cfg.data.root, "%s", dir);
    snprintf(cfg.data.label, sizeof cfg.data.label, "%s", data[0] & 2 ? "coarse" : "fine");
    vt_data_spec spec;
    vt_resolve_data_spec(&cfg, &spec);
    vt_dataset *ds = NULL;
    vt_status s = (c100 ? vt_dataset_cifar100 : vt_dataset_cifar10).open(&ds, &spec, VT_SPLIT_VAL);
    if (s != VT_OK) {
        FUZZ_CHECK(ds == NULL && strstr(vt_last_error(), dir) != NULL, "message without the file: %s",
                   vt_last_error());
        return 0;
    }
    const int64_t rec = c100 ? 3074 : 3073;
    FUZZ_CHECK(ds->size * rec == (int64_t)size - 1, "%lld records from %zu bytes",
               (long long)ds->size, size - 1);
    vt_sample sm = {0};
    for (int64_t i = 0; i < ds->size; i++) {
        int label = -1;
        FUZZ_CHECK(ds->ops->read(ds, i, &sm, &label) == VT_OK, "read %lld: %s", (long long)i,
                   vt_last_error());
        FUZZ_CHECK(sm.h == 32 && sm.w == 32 && sm.c == 3 && label >= 0 && label < ds->num_classes,
                   "sample %lld: %d x %d x %d, label %d of %d", (long long)i, sm.w, sm.h, sm.c,
                   label, ds->num_classes);
    }
    vt_sample_free(&sm);
    ds->ops->close(ds);
    return 0;
}
