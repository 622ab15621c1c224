/* gemm_context.c - the GEMMs' per-CPU blocking contexts (as BLIS's per-CPU contexts):
 * the table keyed by CPUID vendor, family and model, the pick for the running CPU, the
 * VT_GEMM_CONTEXT overrides and the rules every context keeps. It owns the blocking
 * values and their rationale (one line each; measurements and dead ends: TUNING.md),
 * the fp32 register tile among them (mr x nr: which of the shapes gemm_tiles.h lists
 * runs); the loops are gemm_driver.h's and the level files'.
 * Built for baseline x86-64 (it runs before any level is chosen); kernels/dispatch.c
 * calls it from vt_kernels_init. */
#include <cpuid.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_tiles.h"
#include "kernels.h"

/* The fp32 blockings for Zen 4's caches (1 MB L2, 32 KB L1d), the default's. */
#define ZEN4_AVX512                                                                                  \
    {                                                                                                \
        .mr = 14, .nr = 32,    /* 28 zmm accumulators, 2 of B, A broadcast per row */               \
        .kc = 384,             /* ta = 0: longer K blocks, fewer passes over C */                   \
        .kc_t = 256,           /* ta = 1: the transposed A packs best in 256-step blocks */         \
        .mc = 280,             /* 280 x 384 packed A (420 KB) + the next block's source in L2 */    \
        .nc = 1536,            /* ViT-B's widest N = 1536 in one block, 384 x 1536 packed B in L3 */ \
        .m_one_pass = 392,     /* one-pass packed A up to 392 KB (M <= 392: the weight gradients) */ \
        .nc_one_pass = 256,    /* + 256 KB of packed B: both in L2 */                               \
        .one_pass_min_n = 384, /* narrower products keep the BLIS order (TUNING.md) */              \
        .inplace_rows_max_n = 1536, /* op(A) rows in place: the transposing pack skipped */         \
        .inplace_t_max_n = 768,     /* ta = 1: in place up to ViT-B's weight gradients' N */         \
    }
#define ZEN4_AVX2                                                                                    \
    {                                                                                                \
        .mr = 6, .nr = 16,    /* the avx2 kernel's only shape: 12 ymm accumulators */               \
        .kc = 256,            /* a 256 x 16 B micro-panel (16 KB) stays in a 32 KB L1 */            \
        .kc_t = 256,          /* (the same for ta = 1) */                                           \
        .mc = 192,            /* 192 x 256 packed A (192 KB) in L2; ViT-Ti's 192 rows one block */  \
        .nc = 1536,           /* ViT-B's widest N in one block */                                    \
        .m_one_pass = 384,    /* 384 KB of one-pass packed A */                                     \
        .nc_one_pass = 256,   /* + 256 KB of packed B in L2 */                                      \
        .one_pass_min_n = 256, /* every N above one block */                                        \
    }
/* The bf16 levels' blockings, each the same in every context: avx512bf16 (VDPBF16PS) for a
 * 1 MB L2, amx (tiles) for a 2 MB one. */
#define VDPBF16PS_BLOCKING                                                                           \
    {                                                                                                \
        .kc = 1024, /* K <= 1024 in one pass over C (ViT-B's K up to 3072: 3 passes) */             \
        .mc = 280,  /* 280 x 1024 bf16 packed A (560 KB) in a 1 MB L2 */                            \
        .nc = 1536, /* ViT-B's widest N in one block */                                             \
    }
#define AMX_BLOCKING                                                                                 \
    {                                                                                                \
        .kc = 1024, /* 32 x 1024 bf16 B micro-panels (64 KB) stream from L2 */                      \
        .mc = 256,  /* 256 x 1024 bf16 packed A (512 KB) in L2 */                                   \
        .nc = 1536, /* 1024 x 1536 bf16 packed B (3 MB) in L2 / L3 */                               \
    }

/* The contexts, by name; the first is the default, for a CPU the table does not list. */
enum { CTX_DEFAULT, CTX_ZEN3, CTX_ZEN4, CTX_ZEN5, CTX_SPR };

/* A CPU the table lists: vendor, family, models [lo, hi], its context. */
typedef struct {
    const char *vendor;
    int family, model_lo, model_hi, ctx;
} cpu_key;

static const vt_gemm_context contexts[] = {
    /* Zen 4's values. */
    [CTX_DEFAULT] = {.name = "default", .avx2 = ZEN4_AVX2, .avx512 = ZEN4_AVX512,
                     .avx512bf16 = VDPBF16PS_BLOCKING, .amx = AMX_BLOCKING},
    /* Zen 3: AVX2 only (the avx2 fields); its 512 KB L2 holds the default's blocks but
     * for the one-pass order, halved to 192 KB of packed A + 256 KB of packed B. */
    [CTX_ZEN3] = {.name = "zen3",
     .avx2 = {.mr = 6, .nr = 16, .kc = 256, .kc_t = 256, .mc = 192, .nc = 1536, .m_one_pass = 192, .nc_one_pass = 256,
              .one_pass_min_n = 256},
     .avx512 = ZEN4_AVX512, .avx512bf16 = VDPBF16PS_BLOCKING, .amx = AMX_BLOCKING},
    [CTX_ZEN4] = {.name = "zen4", .avx2 = ZEN4_AVX2, .avx512 = ZEN4_AVX512, .avx512bf16 = VDPBF16PS_BLOCKING,
                  .amx = AMX_BLOCKING},
    /* Zen 5: 1 MB L2, 48 KB L1d, two 512-bit FMA pipes (TUNING.md: why these values). K
     * blocks of up to 1024 (ta = 0) pass over C at most 3 times for ViT-B's K <= 3072, with
     * 112 x 1024 floats of packed A (448 KB) in L2. The one-pass order only up to M = 392:
     * larger M (the ViT-B weight gradients, M = 768) take the BLIS order, whose last calls
     * prefetch the next block's sources into an L2 that 768 KB of one-pass packed A would
     * fill. */
    [CTX_ZEN5] = {.name = "zen5",
     .avx2 = ZEN4_AVX2,
     .avx512 = {.mr = 14, .nr = 32, .kc = 1024, .kc_t = 256, .mc = 112, .nc = 1536, .m_one_pass = 392,
                .nc_one_pass = 128, .one_pass_min_n = 384, .inplace_rows_max_n = 1536, .inplace_t_max_n = 768},
     .avx512bf16 = VDPBF16PS_BLOCKING, .amx = AMX_BLOCKING},
    /* Sapphire / Emerald Rapids: 2 MB L2, 48 KB L1d, two 512-bit FMA ports (TUNING.md: why
     * these values). An 8 x 48 tile (24 accumulators, 3 B vectors and 8 broadcasts a step);
     * K blocks of 512 (ta = 0) with 280 x 512 floats of packed A (560 KB) in L2; op(A)
     * always packed, so no step reads rows a page apart (ta = 1) or across (ta = 0); the
     * BLIS order for M > 392 (the ViT-B weight gradients) as on Zen 5. */
    [CTX_SPR] = {.name = "spr",
     .avx2 = ZEN4_AVX2,
     .avx512 = {.mr = 8, .nr = 48, .kc = 512, .kc_t = 256, .mc = 280, .nc = 1536, .m_one_pass = 392,
                .nc_one_pass = 240, .one_pass_min_n = 384, .inplace_rows_max_n = 0, .inplace_t_max_n = 0},
     .avx512bf16 = VDPBF16PS_BLOCKING, .amx = AMX_BLOCKING},
};
#define N_CONTEXTS (int)(sizeof contexts / sizeof contexts[0])

static const cpu_key cpus[] = {
    {"AuthenticAMD", 25, 0x00, 0x0F, CTX_ZEN3}, /* Zen 3: Milan */
    {"AuthenticAMD", 25, 0x20, 0x2F, CTX_ZEN3}, /* Vermeer */
    {"AuthenticAMD", 25, 0x40, 0x5F, CTX_ZEN3}, /* Rembrandt, Cezanne */
    {"AuthenticAMD", 25, 0x10, 0x1F, CTX_ZEN4}, /* Zen 4: Genoa */
    {"AuthenticAMD", 25, 0x60, 0x7F, CTX_ZEN4}, /* Raphael, Phoenix */
    {"AuthenticAMD", 25, 0xA0, 0xAF, CTX_ZEN4}, /* Bergamo, Siena */
    {"AuthenticAMD", 26, 0x00, 0x4F, CTX_ZEN5}, /* Zen 5: Turin, Strix, Granite Ridge */
    {"GenuineIntel", 6, 143, 143, CTX_SPR},     /* Sapphire Rapids */
    {"GenuineIntel", 6, 207, 207, CTX_SPR},     /* Emerald Rapids */
};

vt_gemm_context vt_gemm_ctx = {.name = "default", .avx2 = ZEN4_AVX2, .avx512 = ZEN4_AVX512,
                               .avx512bf16 = VDPBF16PS_BLOCKING, .amx = AMX_BLOCKING};

int vt_gemm_context_count(void) { return N_CONTEXTS; }

const vt_gemm_context *vt_gemm_context_at(int i) { return i >= 0 && i < N_CONTEXTS ? &contexts[i] : NULL; }

const vt_gemm_context *vt_gemm_context_for_cpu(const char *vendor, int family, int model) {
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
        if (!strcmp(vendor, cpus[i].vendor) && family == cpus[i].family && model >= cpus[i].model_lo &&
            model <= cpus[i].model_hi)
            return &contexts[cpus[i].ctx];
    return &contexts[CTX_DEFAULT];
}

void vt_cpu_ident_read(vt_cpu_ident *id) {
    unsigned int a, b, c, d;
    memset(id, 0, sizeof *id);
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    memcpy(id->vendor, &b, 4);
    memcpy(id->vendor + 4, &d, 4);
    memcpy(id->vendor + 8, &c, 4);
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    id->family = (a >> 8) & 0xF;
    id->model = (a >> 4) & 0xF;
    id->stepping = a & 0xF;
    if (id->family == 0xF) id->family += (a >> 20) & 0xFF;
    if (id->family == 0x6 || id->family >= 0xF) id->model += ((a >> 16) & 0xF) << 4;
}

const vt_gemm_context *vt_gemm_context_detect(void) {
    vt_cpu_ident id;
    vt_cpu_ident_read(&id);
    return vt_gemm_context_for_cpu(id.vendor, id.family, id.model);
}

/* A field VT_GEMM_CONTEXT may set: its name, where it is, and its rule: a multiple of
 * `multiple`, in [lo, hi]. */
typedef struct {
    const char *key;
    size_t offset;
    int multiple, lo, hi;
} field_rule;

#define RULE(level, f, mult, lo, hi) {#level "." #f, offsetof(vt_gemm_context, level.f), mult, lo, hi}
static const field_rule rules[] = {
    /* K blocks: the fp32 kernels' transposing pack takes 16 steps at a time (k_block) */
    /* the register tile: one of the level's shapes (check_f32); mc, nc and nc_one_pass
     * are multiples of it */
    RULE(avx2, mr, 1, 1, 16), RULE(avx2, nr, 1, 1, 64),
    RULE(avx2, kc, 16, 16, 8192), RULE(avx2, kc_t, 16, 16, 8192), RULE(avx2, mc, 1, 1, 8192),
    RULE(avx2, nc, 1, 1, 1 << 16), RULE(avx2, m_one_pass, 1, 0, 8192),
    RULE(avx2, nc_one_pass, 1, 1, 1 << 16), RULE(avx2, one_pass_min_n, 1, 0, 1 << 16),
    RULE(avx512, mr, 1, 1, 16), RULE(avx512, nr, 1, 1, 64),
    RULE(avx512, kc, 16, 16, 8192), RULE(avx512, kc_t, 16, 16, 8192),
    RULE(avx512, mc, 1, 1, 8192), RULE(avx512, nc, 1, 1, 1 << 16),
    RULE(avx512, m_one_pass, 1, 0, 8192), RULE(avx512, nc_one_pass, 1, 1, 1 << 16),
    RULE(avx512, one_pass_min_n, 1, 0, 1 << 16), RULE(avx512, inplace_rows_max_n, 1, 0, 1 << 16),
    RULE(avx512, inplace_t_max_n, 1, 0, 1 << 16),
    /* bf16: whole pairs of steps (VDPBF16PS), whole 32-step tiles (AMX) */
    RULE(avx512bf16, kc, 2, 2, 16384), RULE(avx512bf16, mc, VT_AVX512BF16_MR, VT_AVX512BF16_MR, 8192),
    RULE(avx512bf16, nc, VT_BF16_NR, VT_BF16_NR, 1 << 16), RULE(amx, kc, 32, 32, 16384),
    RULE(amx, mc, VT_AMX_MR, VT_AMX_MR, 8192), RULE(amx, nc, VT_BF16_NR, VT_BF16_NR, 1 << 16),
};
#define N_RULES (int)(sizeof rules / sizeof rules[0])

static int *field(vt_gemm_context *c, const field_rule *r) { return (int *)((char *)c + r->offset); }

/* The message for a value (as written) outside r's rule. */
static void rule_error(const field_rule *r, const char *value, char *err, size_t errlen) {
    if (r->multiple == 1)
        snprintf(err, errlen, "VT_GEMM_CONTEXT: %s=%.64s must be in [%d, %d]", r->key, value, r->lo, r->hi);
    else
        snprintf(err, errlen, "VT_GEMM_CONTEXT: %s=%.64s must be a multiple of %d in [%d, %d]", r->key, value,
                 r->multiple, r->lo, r->hi);
}

/* The tile dimension a field of an fp32 blocking must be a multiple of: mr for mc, nr
 * for nc and nc_one_pass (the panels fill whole blocks); 1 for the others. */
static int tile_multiple(const vt_gemm_blocking_f32 *b, const char *f, const char **tile) {
    int m = !strcmp(f, "mc") ? b->mr : !strcmp(f, "nc") || !strcmp(f, "nc_one_pass") ? b->nr : 1;
    if (tile) *tile = !strcmp(f, "mc") ? "mr" : "nr";
    return m;
}

/* The rules between fields of one fp32 kernel: mr x nr is one of the level's shapes
 * (shapes: n pairs), mc a multiple of mr, nc and nc_one_pass of nr; the packed-A region
 * holds min(M, m_one_pass) rows (so an M block, mc rows, must fit in it), the packed-B
 * region min(N, nc) columns (so a one-pass N block must fit), and one-pass N > its N
 * block. */
static int check_f32(const vt_gemm_blocking_f32 *b, const char *level, const int (*shapes)[2], int n, char *err,
                     size_t errlen) {
    int known = 0;
    char list[128] = "";
    for (int i = 0; i < n; i++) {
        known |= b->mr == shapes[i][0] && b->nr == shapes[i][1];
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%dx%d", i ? ", " : "", shapes[i][0],
                 shapes[i][1]);
    }
    if (!known) {
        snprintf(err, errlen, "VT_GEMM_CONTEXT: %s.mr x %s.nr = %d x %d is not a microkernel of %s (%s)", level,
                 level, b->mr, b->nr, level, list);
        return -1;
    }
    const struct {
        const char *name;
        int v;
    } mult[] = {{"mc", b->mc}, {"nc", b->nc}, {"nc_one_pass", b->nc_one_pass}};
    for (int i = 0; i < 3; i++) {
        const char *tile;
        int of = tile_multiple(b, mult[i].name, &tile);
        if (mult[i].v % of) {
            snprintf(err, errlen, "VT_GEMM_CONTEXT: %s.%s=%d must be a multiple of %s.%s = %d", level, mult[i].name,
                     mult[i].v, level, tile, of);
            return -1;
        }
    }
    if (b->mc > b->m_one_pass) {
        snprintf(err, errlen,
                 "VT_GEMM_CONTEXT: %s.mc = %d exceeds %s.m_one_pass = %d (an M block must fit the packed-A "
                 "region)",
                 level, b->mc, level, b->m_one_pass);
        return -1;
    }
    if (b->nc_one_pass > b->nc) {
        snprintf(err, errlen,
                 "VT_GEMM_CONTEXT: %s.nc_one_pass = %d exceeds %s.nc = %d (a one-pass N block must fit the "
                 "packed-B region)",
                 level, b->nc_one_pass, level, b->nc);
        return -1;
    }
    if (b->one_pass_min_n < b->nc_one_pass) {
        snprintf(err, errlen, "VT_GEMM_CONTEXT: %s.one_pass_min_n = %d is below %s.nc_one_pass = %d", level,
                 b->one_pass_min_n, level, b->nc_one_pass);
        return -1;
    }
    return 0;
}

int vt_gemm_context_parse(const char *spec, const vt_gemm_context *base, vt_gemm_context *out, char *err,
                          size_t errlen) {
    vt_gemm_context c = *base;
    char buf[1024]; /* every field, as vt_gemm_context_format writes them, fits */
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "VT_GEMM_CONTEXT is longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    strcpy(buf, spec);
    char *save = NULL, *item = strtok_r(buf, ",", &save);
    int first = 1;
    size_t overrides = 0; /* where the name's override suffix starts (0: none yet) */
    for (; item; item = strtok_r(NULL, ",", &save), first = 0) {
        char *eq = strchr(item, '=');
        if (!eq) {
            const vt_gemm_context *named = NULL;
            for (int i = 0; i < N_CONTEXTS; i++)
                if (!strcmp(item, contexts[i].name)) named = &contexts[i];
            if (!named || !first) {
                char names[128] = "";
                for (int i = 0; i < N_CONTEXTS; i++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%.16s", i ? ", " : "",
                             contexts[i].name);
                snprintf(err, errlen,
                         named ? "VT_GEMM_CONTEXT: \"%.64s\": a context's name may only come first"
                               : "VT_GEMM_CONTEXT: \"%.64s\" is not a context (use one of %s, then "
                                 "level.field=value items)",
                         item, names);
                return -1;
            }
            c = *named;
            continue;
        }
        *eq = '\0';
        const field_rule *r = NULL;
        for (int i = 0; i < N_RULES; i++)
            if (!strcmp(item, rules[i].key)) r = &rules[i];
        if (!r) {
            snprintf(err, errlen,
                     "VT_GEMM_CONTEXT: \"%.64s\" is not a field (avx2.* and avx512.*: mr, nr, kc, kc_t, mc, nc, m_one_pass, "
                     "nc_one_pass, one_pass_min_n; avx512.* also inplace_rows_max_n, inplace_t_max_n; "
                     "avx512bf16.* and amx.*: kc, mc, nc)",
                     item);
            return -1;
        }
        char *end;
        errno = 0;
        long v = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || *end) {
            snprintf(err, errlen, "VT_GEMM_CONTEXT: %s=\"%.64s\" is not a whole number", item, eq + 1);
            return -1;
        }
        if (errno || v < INT_MIN || v > INT_MAX) { /* past int's range, so outside every field's rule */
            rule_error(r, eq + 1, err, errlen);
            return -1;
        }
        *field(&c, r) = (int)v;
        if (!overrides) overrides = strlen(c.name);
        snprintf(c.name + strlen(c.name), sizeof c.name - strlen(c.name), "%s%s=%ld",
                 strlen(c.name) == overrides ? "+" : ",", item, v);
    }
    for (int i = 0; i < N_RULES; i++) {
        int v = *field(&c, &rules[i]);
        if (v < rules[i].lo || v > rules[i].hi || v % rules[i].multiple) {
            char text[16];
            snprintf(text, sizeof text, "%d", v);
            rule_error(&rules[i], text, err, errlen);
            return -1;
        }
    }
    static const int avx2_shapes[][2] = {{VT_AVX2_MR, VT_AVX2_NR}};
#define SHAPE_PAIR(mr, nv, nr) {mr, nr},
    static const int avx512_shapes[][2] = {VT_AVX512_SHAPES(SHAPE_PAIR)};
#undef SHAPE_PAIR
    if (check_f32(&c.avx2, "avx2", avx2_shapes, 1, err, errlen) ||
        check_f32(&c.avx512, "avx512", avx512_shapes, (int)(sizeof avx512_shapes / sizeof avx512_shapes[0]), err,
                  errlen))
        return -1;
    *out = c;
    return 0;
}

int vt_gemm_context_field(const vt_gemm_context *c, const char *key, int *value, int *multiple) {
    for (int i = 0; i < N_RULES; i++) {
        if (strcmp(key, rules[i].key)) continue;
        *value = *field((vt_gemm_context *)c, &rules[i]);
        *multiple = rules[i].multiple;
        /* an fp32 blocking's tile multiples (those fields' own rules take any whole number) */
        const char *f = strchr(key, '.') + 1;
        const vt_gemm_blocking_f32 *b = !strncmp(key, "avx2.", 5)     ? &c->avx2
                                        : !strncmp(key, "avx512.", 7) ? &c->avx512
                                                                      : NULL;
        if (b && tile_multiple(b, f, NULL) > 1) *multiple = tile_multiple(b, f, NULL);
        return 0;
    }
    return -1;
}

int vt_gemm_context_format(const vt_gemm_context *c, char *buf, size_t len) {
    int n = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < N_RULES; i++) {
        int w = snprintf(buf + n, len > (size_t)n ? len - (size_t)n : 0, "%s%s=%d", i ? "," : "", rules[i].key,
                         *field((vt_gemm_context *)c, &rules[i]));
        if (w < 0) return -1;
        n += w;
    }
    return (size_t)n < len ? 0 : -1;
}

int vt_gemm_tiles(vt_isa level, int (*tiles)[2], int max) {
#define SHAPE_PAIR(mr, nv, nr) {mr, nr},
    static const int avx512[][2] = {VT_AVX512_SHAPES(SHAPE_PAIR)}, avx2[][2] = {{VT_AVX2_MR, VT_AVX2_NR}};
#undef SHAPE_PAIR
    const int(*list)[2] = level >= VT_ISA_AVX512 ? avx512 : avx2;
    int n = level >= VT_ISA_AVX512 ? (int)(sizeof avx512 / sizeof avx512[0]) : level >= VT_ISA_AVX2 ? 1 : 0;
    for (int i = 0; i < n && i < max; i++) tiles[i][0] = list[i][0], tiles[i][1] = list[i][1];
    return n < max ? n : max;
}

void vt_gemm_context_set(const vt_gemm_context *c) { vt_gemm_ctx = *c; }
