/* kernels.h - the SIMD primitives: the only kernel header the rest of vitrain uses.
 *
 * Kernels see raw pointers and sizes only: no tensors, no tape, no allocation, no
 * threads, no printing. The table's entries and their contracts are listed once, in
 * entries.def. Every entry exists as scalar C in kernels/scalar/ (the specification);
 * each higher level (kernels/<level>/) overrides the entries it lists. At start-up
 * vt_kernels_init() probes CPUID/XGETBV, fills the table scalar-first and overrides
 * level by level up to the chosen one; VT_ISA=<level> forces a level (an error if the
 * CPU or OS lacks it). It also picks the GEMMs' blocking for the CPU (vt_gemm_context,
 * below); VT_GEMM_CONTEXT overrides it.
 *
 * bf16 numerics (train.precision = bf16: the entries gemm_bf16, bf16_round and
 * bf16_round_float).
 * - bf16 is the upper half of a float32: sign, 8 exponent bits, 7 mantissa bits (vt_bf16).
 *   Rounding a float32 to bf16 is VCVTNEPS2BF16's: to nearest, ties to even; a zero or
 *   denormal gives a zero of its sign; an infinity stays one; a NaN stays a NaN, made
 *   quiet. Every level rounds bitwise the same.
 * - gemm_bf16 multiplies the operands rounded to bf16 (when packed, or a weight's copy
 *   made by bf16_round) and accumulates in float32: a product of two bf16 values is
 *   exact in float32 (8 x 8 significant bits), so the result differs from the exact sum
 *   of the rounded products by the float32 accumulation alone.
 * - Accumulation order per level. scalar (the reference): k ascending in one float32
 *   accumulator per element. The faster levels' gemm_bf16 are the bf16 product paths below.
 * - So levels and paths differ only in summation order (and flushed denormals): every one
 *   is within |C - C_ref| <= 2.4e-7 (K + 4) S + K 2^-126, S = |alpha| sum_k |a' b'| +
 *   |beta C0|, of the scalar reference (tests/test_kernels.c checks it), and is
 *   deterministic for a fixed path, blocking and thread count.
 *
 * bf16 product paths. Where a CPU has several units for the bf16 products, each is a
 * path: a gemm_bf16 (with its work-space size, packed forms and gemm_sums) that
 * vt_kernels_set_bf16_path puts in the table; the level's own path is there after
 * vt_kernels_init, and src/bf16_path.c chooses among them by a start-up throughput probe
 * (VT_BF16_PATH overrides).
 * - What every path shares: the operands rounded to bf16 (the same bits, the rounding
 *   above), each product of two bf16 exact in float32, float32 sums, alpha, beta and the
 *   bias applied as entries.def says, the same work-space contract.
 * - Where they differ: the order of the float32 sums (and whether denormals flush), so
 *   results differ between paths by the bound above, never more:
 *   amx (level amx): TDPBF16PS; per tile of 32 steps the even and the odd steps in two
 *     float32 sums from zero (denormal inputs read as zero, results flushed), added to
 *     each other, then to the accumulator; K blocks summed into C.
 *   dpbf16 (level avx512bf16 and up): VDPBF16PS; per pair of steps (k, k + 1) the k + 1
 *     product then the k product, each a float32 fused multiply-add rounded to nearest
 *     even with the same flushing, K blocks summed into C.
 *   fma (levels avx2 and up, the only path of avx2 and avx512): the float32 GEMM of
 *     avx512 (avx2 on the avx2 level), whose packing rounds op(A) and op(B) to bf16 and
 *     widens them back to float32 (a bf16 op(B) only widened) as it copies them into
 *     its panels; no operand is read unpacked. Its results are bitwise that level's
 *     gemm_bias on the rounded operands: its K blocks summed into C, no chunks of its
 *     own; no denormal flush. So an op that reuses operands may round them once
 *     (bf16_round_float) and call the level's float32 GEMM instead (attention does).
 */
#ifndef VT_KERNELS_H
#define VT_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* The levels, each including the ones below it. */
typedef enum {
    VT_ISA_SCALAR = 0,
    VT_ISA_AVX2 = 1,       /* AVX2 + FMA */
    VT_ISA_AVX512 = 2,     /* AVX-512 F/BW/DQ/VL */
    VT_ISA_AVX512BF16 = 3, /* + AVX512_BF16 (VDPBF16PS) */
    VT_ISA_AMX = 4         /* + AMX-TILE, AMX-BF16 (TDPBF16PS) */
} vt_isa;
#define VT_ISA_COUNT 5

/* A rows x len block of floats at base, row stride ld floats (rows == 0: none). */
typedef struct {
    const float *base;
    size_t ld;
    int rows, len;
} vt_region;

/* A bf16 value: the upper 16 bits of a float32 (see the numerics above). */
typedef uint16_t vt_bf16;

/* vt_kernel_<name>_fn: the function type of each entry. */
#define VT_KERNEL(name, ret, params) typedef ret vt_kernel_##name##_fn params;
#include "entries.def"
#undef VT_KERNEL

typedef struct vt_kernels {
    vt_isa isa;
    const char *name; /* the level's name ("avx512-emulated" etc. in the emulation build) */
#define VT_KERNEL(name, ret, params) vt_kernel_##name##_fn *name;
#include "entries.def"
#undef VT_KERNEL
} vt_kernels;

/* The active table (valid after vt_kernels_init). */
extern vt_kernels vt_k;

/* The GEMMs' cache blocking for one CPU, BLIS's per-CPU context (kernels/gemm_context.c
 * holds the table and each value's rationale). Fields per GEMM kernel: the fp32 kernels'
 * register tile, mr x nr (one of the level's shapes, kernels/gemm_tiles.h); K blocks of at
 * most kc steps (kc_t: with ta = 1), M blocks of at most mc rows, N blocks of at most nc
 * columns; the fp32 kernels run K blocks outermost (the one-pass order) for
 * M <= m_one_pass and N > one_pass_min_n, in N blocks of nc_one_pass; outside that
 * order they read a large op(A) in place instead of packing it for N up to
 * inplace_rows_max_n (ta = 0) or inplace_t_max_n (ta = 1) (0: always packed; a choice of
 * route, not of sums: an element's bits are the same either way; avx512 only, the avx2
 * kernel has no in-place route). */
typedef struct {
    int mr, nr, kc, kc_t, mc, nc, m_one_pass, nc_one_pass, one_pass_min_n, inplace_rows_max_n, inplace_t_max_n;
} vt_gemm_blocking_f32;
typedef struct {
    int kc, mc, nc;
} vt_gemm_blocking_bf16;
typedef struct {
    char name[96]; /* the table entry's name, then any VT_GEMM_CONTEXT overrides */
    vt_gemm_blocking_f32 avx2, avx512;
    vt_gemm_blocking_bf16 avx512bf16, amx;
} vt_gemm_context;

/* The active context: read by the GEMM kernels (and their work-space sizes) at every
 * call. vt_kernels_init sets it once (the table's entry for this CPU, then
 * VT_GEMM_CONTEXT); before that it is the default entry. */
extern vt_gemm_context vt_gemm_ctx;
/* The table: entry i (0 <= i < vt_gemm_context_count(); entry 0 is "default"). */
int vt_gemm_context_count(void);
const vt_gemm_context *vt_gemm_context_at(int i);
/* The entry for a CPU by CPUID vendor string, family and model (display values: base +
 * extended); the default entry for a CPU the table does not list. */
const vt_gemm_context *vt_gemm_context_for_cpu(const char *vendor, int family, int model);
/* The running CPU as CPUID names it: vendor string, display family and model (base +
 * extended), stepping (all zero where CPUID is missing). */
typedef struct {
    char vendor[13];
    int family, model, stepping;
} vt_cpu_ident;
void vt_cpu_ident_read(vt_cpu_ident *id);
/* The entry for the CPU running this. */
const vt_gemm_context *vt_gemm_context_detect(void);
/* *out = base changed by spec, VT_GEMM_CONTEXT's syntax: comma-separated items, the first
 * optionally an entry's name (replacing base), the others level.field=value (e.g.
 * "zen4,avx512.kc=768,amx.mc=128"). Returns 0, or -1 with a message in err naming the
 * item and what is wrong (unknown name or field, not a number, a value that breaks a
 * rule of the kernel: multiples of its tile, mc <= m_one_pass, ...). */
int vt_gemm_context_parse(const char *spec, const vt_gemm_context *base, vt_gemm_context *out, char *err,
                          size_t errlen);
/* Every field of c as VT_GEMM_CONTEXT items ("avx2.mr=6,...,amx.nc=1536", without the
 * name): vt_gemm_context_parse of the text gives c's blocking back whatever the base.
 * Returns 0, or -1 when len is too small. */
int vt_gemm_context_format(const vt_gemm_context *c, char *buf, size_t len);
/* c's field key (VT_GEMM_CONTEXT's name: "amx.kc", "avx512.mc") in *value, and in
 * *multiple what its values must be a multiple of in c (its own rule's, or for an fp32
 * blocking's mc, nc and nc_one_pass c's mr or nr; the range and the rules between other
 * fields are vt_gemm_context_parse's to check). Returns 0, or -1 when key names no field. */
int vt_gemm_context_field(const vt_gemm_context *c, const char *key, int *value, int *multiple);
/* The fp32 register tiles (mr, nr) the level's GEMM is compiled for (kernels/gemm_tiles.h:
 * avx512's shapes, avx2's one; none below), at most max of them; returns the count. */
int vt_gemm_tiles(vt_isa level, int (*tiles)[2], int max);
/* Make c (valid: from the table or vt_gemm_context_parse) the active context; between
 * GEMM calls only (tests running the kernels under each context). */
void vt_gemm_context_set(const vt_gemm_context *c);

/* The bf16 product paths (see "bf16 product paths" above). */
typedef enum { VT_BF16_AMX = 0, VT_BF16_DPBF16 = 1, VT_BF16_FMA = 2 } vt_bf16_path;
#define VT_BF16_PATH_COUNT 3
/* The path's name as VT_BF16_PATH spells it ("amx", "dpbf16", "fma"), and the unit it
 * multiplies on, in words. */
const char *vt_bf16_path_name(vt_bf16_path p);
const char *vt_bf16_path_unit(vt_bf16_path p);
/* The path named name, or -1. */
int vt_bf16_path_parse(const char *name);
/* The path a level's own table holds: amx, dpbf16, or fma below avx512bf16 (the scalar
 * level's gemm_bf16 is the reference, no path). */
vt_bf16_path vt_bf16_path_of_level(vt_isa isa);
/* Set t's gemm_bf16 entries (gemm_bf16, its work-space size, its packed op(B) and packed
 * op(A) trios, and gemm_sums) to path p's under the level `active`.
 * Returns 0, or -1 with why saying what p needs and what the CPU/OS (or VT_ISA) offers. */
int vt_bf16_path_entries(vt_bf16_path p, vt_isa active, vt_kernels *t, char *why, size_t whylen);
/* The same for the active table vt_k; between GEMM calls only (at start-up). */
int vt_kernels_set_bf16_path(vt_bf16_path p, char *why, size_t whylen);
/* The path in the active table, or -1 (the scalar level's reference). */
int vt_kernels_bf16_path(void);
/* Whether products of this precision (bf16 nonzero) are bf16 ones on the fma path: the
 * float32 kernels on operands rounded as they are packed (the bf16 product paths above). */
static inline int vt_kernels_on_fma_path(int bf16) { return bf16 && vt_kernels_bf16_path() == VT_BF16_FMA; }

/* Probe the CPU, honour VT_ISA, fill vt_k, set vt_gemm_ctx (honouring VT_GEMM_CONTEXT).
 * Returns 0, or -1 with a message in err (VT_ISA unknown or not supported by this
 * CPU/OS, VT_GEMM_CONTEXT malformed). Idempotent. */
int vt_kernels_init(char *err, size_t errlen);
/* Highest level this CPU and OS support. */
vt_isa vt_kernels_best_isa(void);
/* Fill t with the table for a given level (for tests comparing levels);
 * returns -1 if the CPU lacks it. */
int vt_kernels_table(vt_isa isa, vt_kernels *t);
/* The level's name as VT_ISA spells it ("scalar", "avx2", ...). */
const char *vt_kernels_isa_name(vt_isa isa);

#endif
