/* name_index.h - a name-sorted index over an array of records whose first member is their
 * name (a char array): vt_st_tensor of a safetensors file, vt_wtensor of its translation.
 *
 * Lookups by name over files with many tensors cost log n instead of n, and duplicates
 * are neighbours once sorted, so checking a file costs n log n, never n^2.
 * Owns: the sort and the search. Does not own what a duplicate means (the callers say).
 */
#ifndef VT_NAME_INDEX_H
#define VT_NAME_INDEX_H

#include <stddef.h>

/* The indices 0..n-1 of the n records of `stride` bytes at base, sorted by name (equal
 * names in record order); malloc'd, n + 1 entries. */
int *vt_name_index_build(const void *base, size_t stride, int n);

/* The record index of `name` (the first of equal names), or -1. */
int vt_name_index_find(const void *base, size_t stride, const int *index, int n, const char *name);

/* The first i > 0 with index[i] naming the same as index[i - 1], or -1: a duplicate. */
int vt_name_index_duplicate(const void *base, size_t stride, const int *index, int n);

#endif
