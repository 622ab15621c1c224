/* gemm_cache.h - the per-CPU cache of tuned GEMM blockings (gemm_tune.h), one small text
 * file per key under $XDG_CACHE_HOME/vitrain/ (else ~/.cache/vitrain/).
 *
 * Owns: the key (CPUID vendor, family, model and stepping; the L1d, L2 and L3 sizes the
 * CPU reports; the kernel level; the products' precision and bf16 path, which say which
 * blocking was tuned and how its products ran (vt_tune_target_name: an fp32 entry never
 * serves a bf16 run, nor an amx entry a dpbf16 one); the OpenMP thread count; the shapes
 * tuned), the file's
 * name and format, and reading and writing it. Does not own the blocking's rules
 * (kernels/gemm_context.c) nor when the cache is used (blocking.h).
 *
 * File format (text, one item a line):
 *   vitrain-gemm-cache 1
 *   key <the key, one line>
 *   blocking <every field of the context, VT_GEMM_CONTEXT's items>
 *   note <free text: where the entry came from>
 * The file is named after the CPU, the level and a hash of the key, and repeats the whole
 * key: a file whose key differs (another CPU's, copied over, a hash collision) is foreign
 * and ignored, as is one that does not parse (corrupt); the caller warns in one line.
 * Files are replaced atomically (durable.h), so a reader never sees half an entry.
 */
#ifndef VT_GEMM_CACHE_H
#define VT_GEMM_CACHE_H

#include <stddef.h>

#include "gemm_tune.h"
#include "kernels.h"
#include "status.h"

typedef struct {
    char text[2048]; /* the key as the file holds it */
    char file[160];  /* the file name in the cache directory */
} vt_gemm_cache_key;

/* The key of target t's products s[0..n) on this CPU at threads threads. */
void vt_gemm_cache_key_make(vt_gemm_cache_key *k, const vt_tune_target *t, const vt_tune_shape *s, int n,
                            int threads);
/* The cache directory ($XDG_CACHE_HOME/vitrain, else $HOME/.cache/vitrain); -1 when
 * neither variable is set (no cache). */
int vt_gemm_cache_dir(char *buf, size_t len);

typedef enum { VT_GEMM_CACHE_MISS = 0, VT_GEMM_CACHE_HIT, VT_GEMM_CACHE_IGNORED } vt_gemm_cache_found;
/* The entry of key k in dir: HIT with the blocking in *c and the note in note; MISS when there is no file; IGNORED with why (naming the file and
 * what is wrong) for a foreign or corrupt one. */
vt_gemm_cache_found vt_gemm_cache_load(const char *dir, const vt_gemm_cache_key *k, vt_gemm_context *c,
                                       char *note, size_t notelen, char *why, size_t whylen);
/* Write c as the entry of key k in dir (created when missing), atomically. Errors
 * (VT_ERR_RUNTIME) name the file. The path written into path. */
vt_status vt_gemm_cache_store(const char *dir, const vt_gemm_cache_key *k, const vt_gemm_context *c,
                              const char *note, char *path, size_t pathlen);

/* *c = the blocking text of a cache or run record line ("blocking ITEMS"): exactly what
 * vt_gemm_context_format writes (every field once, in order, each within its rules).
 * Returns 0, or -1 with why (c's name is left for the caller to set). */
int vt_gemm_blocking_parse(const char *text, vt_gemm_context *c, char *why, size_t whylen);

#endif
