/* data_config.h - the data section of the config: the list of dataset formats, the data
 * enumerations and vt_data_config, the types alone.
 *
 * Why a header of its own (the twin of model_spec.h for the model): data/ names its
 * section without including config.h, so the data pipeline cannot come to read the model,
 * recipe or runtime keys, and config.c stands above data/, not below it. config.h embeds
 * vt_data_config in vt_config and owns its schema rows (config.c parses and checks them);
 * resolve.h's vt_resolve_data_spec makes the pipeline's view, dataset.h's vt_data_spec,
 * from a resolved config.
 */
#ifndef VT_DATA_CONFIG_H
#define VT_DATA_CONFIG_H

/* Capacity of a config string that holds a path, NUL included: data.root and
 * data.class_list here, train.run_dir and train.init in config.h. */
#define VT_STR 512

/* Dataset formats, one X(enum value, id) each: id is its data.kind name and names its
 * descriptor vt_dataset_<id> (src/data/formats.h generates the externs and the registry's
 * rows from this list; "Adding a format" is there). */
#define VT_DATA_KINDS(X)                                                              \
    X(VT_DATA_IDX, idx) X(VT_DATA_SYNTHETIC, synthetic)                               \
    X(VT_DATA_IMAGEFOLDER, imagefolder) X(VT_DATA_CIFAR10, cifar10)                   \
    X(VT_DATA_CIFAR100, cifar100)
#define VT_DATA_KIND_ENUM_(e, id) e,
typedef enum { VT_DATA_KINDS(VT_DATA_KIND_ENUM_) VT_DATA_KIND_COUNT } vt_data_kind;
#undef VT_DATA_KIND_ENUM_
typedef enum { VT_ONERR_FAIL = 0, VT_ONERR_SKIP } vt_on_error;
typedef enum { VT_TT_AUTO = 0, VT_TT_SIMPLE, VT_TT_RRC } vt_train_transform;
typedef enum { VT_ET_AUTO = 0, VT_ET_RESIZE, VT_ET_CENTER_CROP } vt_eval_transform;
typedef enum { VT_INTERP_BILINEAR = 0, VT_INTERP_BICUBIC } vt_interp;
typedef enum { VT_REMODE_PIXEL = 0, VT_REMODE_CONST } vt_remode;

typedef struct {
    vt_data_kind kind;
    char root[VT_STR];
    char train_split[64], val_split[64];
    double mean[3], std[3];
    int workers;
    vt_on_error on_error;
    long long max_image_pixels; /* imagefolder: largest decoded image (width x height) */
    char class_list[VT_STR]; /* imagefolder: file naming the classes in index order; "" = folders */
    char label[16];         /* cifar100: fine | coarse */
    int train_size, val_size; /* synthetic dataset sizes */
    int synthetic_seed;
    int synthetic_depth_label; /* synthetic RGB-D: label needs the depth map (pairs of classes
                                  share the RGB pattern, depth bump vs dent tells them apart) */
    double crop_pct;
    vt_eval_transform eval_transform;   /* resolved (never auto): resize | center_crop */
    double hflip;
    vt_train_transform train_transform; /* resolved (never auto): simple | rrc */
    vt_interp interpolation;
    double scale[2], ratio[2];  /* RandomResizedCrop area fraction and aspect ranges */
    char auto_augment[64];      /* timm RandAugment string, "" = off */
    double mixup, cutmix, mixup_prob, mixup_switch_prob;
    double reprob;              /* random erasing probability */
    vt_remode remode;
} vt_data_config;


#endif
