/* gemm_cache.c - the per-CPU cache of tuned GEMM blockings (contract in gemm_cache.h). */
#include "gemm_cache.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "durable.h"
#include "input_file.h"

#define MAGIC "vitrain-gemm-cache 1"
#define MAX_FILE_BYTES 16384

void vt_gemm_cache_key_make(vt_gemm_cache_key *k, const vt_tune_target *t, const vt_tune_shape *s, int n,
                            int threads) {
    vt_cpu_ident id;
    vt_cpu_ident_read(&id);
    char shapes[1536];
    vt_tune_shapes_text(s, n, shapes, sizeof shapes);
    const char *isa = vt_kernels_isa_name(t->level), *products = vt_tune_target_name(t);
    snprintf(k->text, sizeof k->text, "cpu=%s/%d/%d/%d l1d=%ld l2=%ld l3=%ld isa=%s products=%s threads=%d shapes=%s",
             id.vendor[0] ? id.vendor : "unknown", id.family, id.model, id.stepping, sysconf(_SC_LEVEL1_DCACHE_SIZE),
             sysconf(_SC_LEVEL2_CACHE_SIZE), sysconf(_SC_LEVEL3_CACHE_SIZE), isa, products, threads, shapes);
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = k->text; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(k->file, sizeof k->file, "gemm-%s-%d-%d-%d-%s-%s-%016llx.txt", id.vendor[0] ? id.vendor : "unknown",
             id.family, id.model, id.stepping, isa, products, (unsigned long long)h);
}

int vt_gemm_cache_dir(char *buf, size_t len) {
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (x && x[0] == '/') n = snprintf(buf, len, "%s/vitrain", x); /* the spec: relative values are ignored */
    else if (home && *home) n = snprintf(buf, len, "%s/.cache/vitrain", home);
    else return -1;
    return n > 0 && (size_t)n < len ? 0 : -1;
}

/* Whether text is full (a vt_gemm_context_format text) without its avx512.inplace_*
 * items. */
static int is_without_inplace(const char *full, const char *text) {
    char cut[1024] = "";
    size_t n = 0;
    for (const char *p = full; *p;) {
        size_t len = strcspn(p, ",");
        if (strncmp(p, "avx512.inplace_", 15) && n + len + 2 < sizeof cut)
            n += (size_t)snprintf(cut + n, sizeof cut - n, "%s%.*s", n ? "," : "", (int)len, p);
        p += len + (p[len] == ',');
    }
    return !strcmp(cut, text);
}

int vt_gemm_blocking_parse(const char *text, vt_gemm_context *c, char *why, size_t whylen) {
    char err[256], back[1024];
    vt_gemm_context out;
    if (vt_gemm_context_parse(text, vt_gemm_context_at(0), &out, err, sizeof err)) {
        snprintf(why, whylen, "%s", err);
        return -1;
    }
    /* every field, each once and in order: what vt_gemm_context_format writes; or, from
     * a record written before the avx512 in-place limits existed, every field but those
     * two (they choose packing or not, never the sums: the base's values stand in) */
    if (vt_gemm_context_format(&out, back, sizeof back) || (strcmp(back, text) && !is_without_inplace(back, text))) {
        snprintf(why, whylen, "the blocking does not list every field once, in order");
        return -1;
    }
    *c = out;
    return 0;
}

/* The text after "tag " on the line of text that starts with it, up to the newline,
 * into out (0), or -1 when no line starts so or it does not fit. */
static int line_value(const char *text, const char *tag, char *out, size_t len) {
    size_t tl = strlen(tag);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, tag, tl) || p[tl] != ' ') continue;
        const char *v = p + tl + 1;
        size_t n = strcspn(v, "\n");
        if (n >= len) return -1;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
    }
    return -1;
}

vt_gemm_cache_found vt_gemm_cache_load(const char *dir, const vt_gemm_cache_key *k, vt_gemm_context *c,
                                       char *note, size_t notelen, char *why, size_t whylen) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, k->file);
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) return VT_GEMM_CACHE_MISS;
    char *text = NULL;
    size_t len = 0;
    if (vt_input_read(path, "GEMM blocking cache", MAX_FILE_BYTES, &text, &len) != VT_OK) {
        snprintf(why, whylen, "%s", vt_last_error());
        vt_clear_error();
        return VT_GEMM_CACHE_IGNORED;
    }
    char key[sizeof k->text + 1], items[1024], err[256];
    vt_gemm_cache_found found = VT_GEMM_CACHE_IGNORED;
    if (strlen(text) != len || strncmp(text, MAGIC "\n", strlen(MAGIC) + 1))
        snprintf(why, whylen, "%s: not a vitrain GEMM cache file (no '" MAGIC "' first line)", path);
    else if (line_value(text, "key", key, sizeof key) || strcmp(key, k->text))
        snprintf(why, whylen, "%s: written for another CPU, level, precision, bf16 path, thread count or set of "
                 "shapes (its key differs)", path);
    else if (line_value(text, "blocking", items, sizeof items))
        snprintf(why, whylen, "%s: no blocking line", path);
    else if (vt_gemm_blocking_parse(items, c, err, sizeof err))
        snprintf(why, whylen, "%s: a corrupt blocking (%s)", path, err);
    else
        found = VT_GEMM_CACHE_HIT;
    if (found == VT_GEMM_CACHE_HIT && line_value(text, "note", note, notelen)) snprintf(note, notelen, "-");
    free(text);
    return found;
}

vt_status vt_gemm_cache_store(const char *dir, const vt_gemm_cache_key *k, const vt_gemm_context *c,
                              const char *note, char *path, size_t pathlen) {
    char items[1024];
    VT_ASSERT(vt_gemm_context_format(c, items, sizeof items) == 0, "a GEMM context's fields exceed %zu characters",
              sizeof items);
    /* the directory and its parents ($XDG_CACHE_HOME may not exist yet) */
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (char *p = d + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(d, 0777) != 0 && errno != EEXIST)
            return vt_fail(VT_ERR_RUNTIME, "cannot create the GEMM cache directory %s: %s", d, strerror(errno));
        *p = saved;
        if (!saved) break;
    }
    snprintf(path, pathlen, "%s/%s", dir, k->file);
    size_t cap = strlen(k->text) + strlen(items) + strlen(note) + 64;
    char *text = vt_xmalloc(cap);
    int n = snprintf(text, cap, MAGIC "\nkey %s\nblocking %s\nnote %s\n", k->text, items, note);
    vt_status st = vt_durable_write_file(path, text, (size_t)n);
    free(text);
    return st;
}
