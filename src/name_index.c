/* name_index.c - name-sorted indices over named records (contract in name_index.h). */
#include "name_index.h"

#include <stdlib.h>
#include <string.h>

#include "status.h"

typedef struct {
    const char *base;
    size_t stride;
} records;

static const char *name_at(const records *r, int i) { return r->base + (size_t)i * r->stride; }

static int by_name_cmp(const void *a, const void *b, void *ctx) {
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(name_at(ctx, x), name_at(ctx, y));
    return c ? c : x - y;
}

int *vt_name_index_build(const void *base, size_t stride, int n) {
    int *index = vt_xcalloc((size_t)n + 1, sizeof *index);
    for (int i = 0; i < n; i++) index[i] = i;
    records r = {base, stride};
    qsort_r(index, (size_t)n, sizeof *index, by_name_cmp, &r);
    return index;
}

int vt_name_index_find(const void *base, size_t stride, const int *index, int n, const char *name) {
    records r = {base, stride};
    int lo = 0, hi = n;
    while (lo < hi) { /* the first position whose name is not below `name` */
        int mid = lo + (hi - lo) / 2;
        if (strcmp(name_at(&r, index[mid]), name) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && strcmp(name_at(&r, index[lo]), name) == 0 ? index[lo] : -1;
}

int vt_name_index_duplicate(const void *base, size_t stride, const int *index, int n) {
    records r = {base, stride};
    for (int i = 1; i < n; i++)
        if (strcmp(name_at(&r, index[i]), name_at(&r, index[i - 1])) == 0) return i;
    return -1;
}
