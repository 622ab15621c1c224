/* prefetch.h - private to kernels/: the software prefetch of the streaming kernels
 * (elementwise passes, GELU, LayerNorm, AdamW, sums) over arrays far larger than the
 * caches. A loop step that reads (or updates) the 64-byte line at p asks for the line
 * VT_PREFETCH_BYTES further on. A hint only: it changes no value, and a prefetch past
 * the end of an array does not fault. */
#ifndef VT_KERNELS_PREFETCH_H
#define VT_KERNELS_PREFETCH_H

/* How far ahead: enough to cover the memory latency of a lone stream, little enough
 * that four streams' lines in flight stay within L1. */
#define VT_PREFETCH_BYTES 4096

static inline void vt_prefetch_ahead(const void *p) {
    __builtin_prefetch((const char *)p + VT_PREFETCH_BYTES, 0, 3);
}

#endif
