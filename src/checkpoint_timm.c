/* checkpoint_timm.c - timm's tensor layouts read into ours (contract in
 * checkpoint_timm.h). */
#include "checkpoint_timm.h"
#include "name_index.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void vt_shape_format(int ndim, const int64_t *shape, char *buf, size_t len) {
    size_t off = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (off < len) snprintf(buf + off, len - off, ")");
}

static int is_square(int64_t n) {
    if (n < 1) return 0;
    int64_t s = (int64_t)llround(sqrt((double)n));
    return s * s == n;
}

/* "blocks.<i>.<rest>" with rest == want and <i> written as the model writes it (decimal
 * digits without a sign or leading zero, so "blocks.00.attn.v_bias" is not block 0's but a
 * tensor of its own name): the block index, else -1. */
static int block_suffix(const char *name, const char *want) {
    const char *p = name + strlen("blocks.");
    if (strncmp(name, "blocks.", strlen("blocks.")) != 0 || *p < '0' || *p > '9') return -1;
    if (p[0] == '0' && p[1] != '.') return -1;
    int i = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (i > (INT_MAX - 9) / 10) return -1;
        i = i * 10 + (*p - '0');
    }
    return *p == '.' && strcmp(p + 1, want) == 0 ? i : -1;
}

static vt_wtensor from_file(const vt_st_tensor *f) {
    vt_wtensor w;
    memset(&w, 0, sizeof w);
    snprintf(w.name, sizeof w.name, "%s", f->name);
    snprintf(w.file_name, sizeof w.file_name, "%s", f->name);
    w.dtype = f->dtype[0] ? f->dtype : "F32";
    w.ndim = w.file_ndim = f->ndim;
    memcpy(w.shape, f->shape, sizeof w.shape);
    memcpy(w.file_shape, f->shape, sizeof w.file_shape);
    w.size = f->size;
    w.data = f->data;
    return w;
}

/* One file tensor in our layout (or marks a q_bias / v_bias pair). */
static vt_status convert(const vt_safetensors *st, const vt_st_tensor *f, const char *path,
                         vt_wtensor *w, int *skip) {
    char s[96];
    *w = from_file(f);
    *skip = 0;
    int blk;
    if ((blk = block_suffix(f->name, "gamma_1")) >= 0 || (blk = block_suffix(f->name, "gamma_2")) >= 0) {
        int which = f->name[strlen(f->name) - 1] - '0';
        snprintf(w->name, sizeof w->name, "blocks.%d.ls%d.gamma", blk, which);
        w->layout = "timm Eva layer-scale name";
    } else if ((blk = block_suffix(f->name, "attn.v_bias")) >= 0) {
        *skip = 1; /* merged at its q_bias */
        char q[160];
        snprintf(q, sizeof q, "blocks.%d.attn.q_bias", blk);
        if (!vt_st_find(st, q))
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor '%s' without '%s': a timm Eva qkv bias needs "
                           "both", path, f->name, q);
    } else if ((blk = block_suffix(f->name, "attn.q_bias")) >= 0) {
        char v[160];
        snprintf(v, sizeof v, "blocks.%d.attn.v_bias", blk);
        const vt_st_tensor *vb = vt_st_find(st, v);
        if (!vb)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor '%s' without '%s': a timm Eva qkv bias needs "
                           "both", path, f->name, v);
        if (f->ndim != 1 || vb->ndim != 1 || vb->shape[0] != f->shape[0]) {
            char a[96];
            vt_shape_format(f->ndim, f->shape, s, sizeof s);
            vt_shape_format(vb->ndim, vb->shape, a, sizeof a);
            return vt_fail(VT_ERR_RUNTIME, "%s: tensors '%s' %s and '%s' %s: expected two vectors of "
                           "one length (the q and v biases)", path, f->name, s, v, a);
        }
        int64_t D = f->shape[0];
        snprintf(w->name, sizeof w->name, "blocks.%d.attn.qkv.bias", blk);
        w->shape[0] = 3 * D;
        w->size = 3 * D;
        w->owned = vt_xcalloc((size_t)(3 * D), sizeof(float));
        memcpy(w->owned, f->data, (size_t)D * sizeof(float));
        memcpy(w->owned + 2 * D, vb->data, (size_t)D * sizeof(float));
        w->data = w->owned;
        w->layout = "timm Eva q_bias, 0, v_bias";
    } else if (strcmp(f->name, "rope.freqs") == 0) {
        if (f->ndim != 4 || f->shape[0] != 2) {
            vt_shape_format(f->ndim, f->shape, s, sizeof s);
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor 'rope.freqs' has shape %s: expected (2, L, H, "
                           "hd/2) (timm RoPE-Mixed: x and y frequencies per layer and head)", path, s);
        }
        int64_t n = f->size / 2;
        snprintf(w->name, sizeof w->name, "pe.freqs");
        w->shape[0] = f->shape[1];
        w->shape[1] = f->shape[2];
        w->shape[2] = f->shape[3];
        w->shape[3] = 2;
        w->owned = vt_xmalloc((size_t)f->size * sizeof(float));
        for (int64_t i = 0; i < n; i++) {
            w->owned[2 * i] = f->data[i];
            w->owned[2 * i + 1] = f->data[n + i];
        }
        w->data = w->owned;
        w->layout = "timm rope.freqs (2, L, H, hd/2) permuted";
    } else if (strcmp(f->name, "pos_embed") == 0) {
        vt_shape_format(f->ndim, f->shape, s, sizeof s);
        if (f->ndim != 3 || f->shape[0] != 1 || f->shape[1] < 1)
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor 'pos_embed' has shape %s: expected (1, tokens, "
                           "width)", path, s);
        int64_t N = f->shape[1], D = f->shape[2];
        if (is_square(N)) {
            w->shape[1] = N + 1;
            w->size = (N + 1) * D;
            w->owned = vt_xcalloc((size_t)w->size, sizeof(float));
            memcpy(w->owned + D, f->data, (size_t)(N * D) * sizeof(float));
            w->data = w->owned;
            w->layout = "no class-token row (timm no_embed_class=True): CLS row 0";
        } else if (!is_square(N - 1)) {
            return vt_fail(VT_ERR_RUNTIME, "%s: tensor 'pos_embed' has shape %s: %lld tokens are neither "
                           "a square grid (a table without class-token row, timm no_embed_class=True) "
                           "nor 1 + a square grid (class-token row first)", path, s, (long long)N);
        }
    }
    return VT_OK;
}

_Static_assert(offsetof(vt_wtensor, name) == 0, "name_index.h reads a record's name first");

vt_status vt_wfile_from_st(const vt_safetensors *st, const char *path, vt_wfile *out) {
    memset(out, 0, sizeof *out);
    out->t = vt_xcalloc((size_t)st->n + 1, sizeof *out->t);
    for (int i = 0; i < st->n; i++) {
        vt_wtensor w;
        int skip;
        vt_status s = convert(st, &st->tensors[i], path, &w, &skip);
        if (s != VT_OK) {
            vt_wfile_free(out);
            return s;
        }
        if (skip) continue;
        out->t[out->n++] = w;
    }
    /* Sorted by name (the index vt_wfile_find searches), two tensors landing on one name
     * are neighbours. */
    out->by_name = vt_name_index_build(out->t, sizeof *out->t, out->n);
    int dup = vt_name_index_duplicate(out->t, sizeof *out->t, out->by_name, out->n);
    if (dup >= 0) {
        const vt_wtensor *a = &out->t[out->by_name[dup - 1]], *b = &out->t[out->by_name[dup]];
        vt_status s = vt_fail(VT_ERR_RUNTIME, "%s: tensors '%s' and '%s' are both '%s' (one "
                              "layout or the other, not both)", path, a->file_name, b->file_name,
                              a->name);
        vt_wfile_free(out);
        return s;
    }
    return VT_OK;
}

void vt_wfile_free(vt_wfile *f) {
    for (int i = 0; i < f->n; i++) free(f->t[i].owned);
    free(f->t);
    free(f->by_name);
    memset(f, 0, sizeof *f);
}

const vt_wtensor *vt_wfile_find(const vt_wfile *f, const char *name) {
    int i = vt_name_index_find(f->t, sizeof *f->t, f->by_name, f->n, name);
    return i >= 0 ? &f->t[i] : NULL;
}
