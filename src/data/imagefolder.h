/* imagefolder.h - what the imagefolder format (imagefolder.c) offers beyond its
 * descriptor in the registry (formats.h): the count of files a split did not index.
 */
#ifndef VT_DATA_IMAGEFOLDER_H
#define VT_DATA_IMAGEFOLDER_H

#include <stdint.h>

#include "data/dataset.h"

/* Files of an imagefolder split that were not indexed: names without a .jpg, .jpeg or
 * .png extension (any case), hidden names, and files outside class folders. ds must be
 * an open imagefolder split (asserted). */
int64_t vt_imagefolder_ignored(const vt_dataset *ds);

#endif
