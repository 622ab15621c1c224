/* formats.h - the registry of dataset formats: one descriptor (vt_dataset_kind, dataset.h)
 * per data.kind, each defined in the format's own file, and their names. The table
 * (formats.c) has one row per value of vt_data_kind, so a loop over
 * [0, VT_DATA_KIND_COUNT) sees every format (tests enumerate them that way).
 *
 * Adding a format: its line X(VT_DATA_<ID>, <id>) in data_config.h's VT_DATA_KINDS (the
 * externs below and the rows of formats.c follow from it), its file src/data/<id>.c
 * defining its descriptor vt_dataset_<id> (the form of idx.c: what it knows about itself
 * in the descriptor, reading samples through a vt_dataset_ops), its tests in
 * tests/test_datasets.c, and the layout of its files in data/README.md. Its classes and
 * rules reach `vitrain help-config` and configs/README.md (regenerate: help-config
 * --markdown) from its descriptor.
 */
#ifndef VT_DATA_FORMATS_H
#define VT_DATA_FORMATS_H

#include "data/dataset.h"

/* Every format's descriptor, vt_dataset_<id>, defined in its file (cifar10 and cifar100
 * both in cifar.c, the others in <id>.c). */
#define VT_DATASET_EXTERN_(e, id) extern const vt_dataset_kind vt_dataset_##id;
VT_DATA_KINDS(VT_DATASET_EXTERN_)
#undef VT_DATASET_EXTERN_

/* The descriptor of format k (0 <= k < VT_DATA_KIND_COUNT, asserted). */
const vt_dataset_kind *vt_dataset_kind_of(vt_data_kind k);

/* data.kind's name ("cifar10"); k in [0, VT_DATA_KIND_COUNT) (asserted). */
const char *vt_data_kind_name(vt_data_kind k);

#endif
