/* bf16_path.c - the bf16 product paths (kernels.h: "bf16 product paths"): which ones the
 * active level offers, and making one of them the table's gemm_bf16. It owns the paths'
 * names and the level each needs; the choice among them (VT_BF16_PATH, the throughput
 * probe) is src/bf16_path.c's. Built for baseline x86-64: it only copies table entries. */
#include <stdio.h>
#include <string.h>

#include "kernels.h"

static const struct {
    const char *name; /* as VT_BF16_PATH spells it */
    const char *unit; /* what multiplies, for messages */
    vt_isa needs;     /* the lowest level that has it */
} paths[VT_BF16_PATH_COUNT] = {
    [VT_BF16_AMX] = {"amx", "AMX tiles (TDPBF16PS)", VT_ISA_AMX},
    [VT_BF16_DPBF16] = {"dpbf16", "VDPBF16PS", VT_ISA_AVX512BF16},
    [VT_BF16_FMA] = {"fma", "float32 FMA on operands rounded to bf16", VT_ISA_AVX2},
};

const char *vt_bf16_path_name(vt_bf16_path p) {
    return p >= 0 && p < VT_BF16_PATH_COUNT ? paths[p].name : "?";
}

const char *vt_bf16_path_unit(vt_bf16_path p) {
    return p >= 0 && p < VT_BF16_PATH_COUNT ? paths[p].unit : "?";
}

int vt_bf16_path_parse(const char *name) {
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++)
        if (!strcmp(name, paths[p].name)) return p;
    return -1;
}

vt_bf16_path vt_bf16_path_of_level(vt_isa isa) {
    return isa >= VT_ISA_AMX ? VT_BF16_AMX : isa >= VT_ISA_AVX512BF16 ? VT_BF16_DPBF16 : VT_BF16_FMA;
}

/* The level whose gemm_bf16 is path p under the active level `active`: amx and dpbf16
 * their own levels; fma the highest level without bf16 instructions (avx512, avx2),
 * whose gemm_bf16 runs the rounded operands through its float32 kernels. */
static vt_isa level_of(vt_bf16_path p, vt_isa active) {
    if (p != VT_BF16_FMA) return paths[p].needs;
    return active < VT_ISA_AVX512 ? active : VT_ISA_AVX512;
}

int vt_bf16_path_entries(vt_bf16_path p, vt_isa active, vt_kernels *t, char *why, size_t whylen) {
    if (p < 0 || p >= VT_BF16_PATH_COUNT) {
        snprintf(why, whylen, "no bf16 path number %d", (int)p);
        return -1;
    }
    vt_isa best = vt_kernels_best_isa();
    if (active < paths[p].needs) {
        /* what stands in the way: VT_ISA below the CPU's best level, the CPU/OS, or both */
        const char *a = vt_kernels_isa_name(active), *b = vt_kernels_isa_name(best);
        char what[160];
        if (best >= paths[p].needs) snprintf(what, sizeof what, "VT_ISA=%s runs the %s level", a, a);
        else if (active < best)
            snprintf(what, sizeof what, "this CPU/OS offers at most %s (VT_ISA=%s runs the %s level)", b, a, a);
        else snprintf(what, sizeof what, "this CPU/OS offers at most %s", b);
        snprintf(why, whylen, "the %s path (%s) needs the %s level, and %s", paths[p].name, paths[p].unit,
                 vt_kernels_isa_name(paths[p].needs), what);
        return -1;
    }
    vt_kernels lt;
    if (vt_kernels_table(level_of(p, active), &lt)) { /* a bug: active <= best */
        snprintf(why, whylen, "the %s level's table is not available", vt_kernels_isa_name(level_of(p, active)));
        return -1;
    }
    t->gemm_bf16 = lt.gemm_bf16;
    t->gemm_bf16_work_floats = lt.gemm_bf16_work_floats;
    t->gemm_bf16_packed_b_floats = lt.gemm_bf16_packed_b_floats;
    t->gemm_bf16_pack_b = lt.gemm_bf16_pack_b;
    t->gemm_bf16_packed_b = lt.gemm_bf16_packed_b;
    t->gemm_bf16_packed_a_floats = lt.gemm_bf16_packed_a_floats;
    t->gemm_bf16_pack_a = lt.gemm_bf16_pack_a;
    t->gemm_bf16_packed_a = lt.gemm_bf16_packed_a;
    t->gemm_sums = lt.gemm_sums; /* its bf16 products are the path's; float32 the same everywhere */
    return 0;
}

int vt_kernels_set_bf16_path(vt_bf16_path p, char *why, size_t whylen) {
    return vt_bf16_path_entries(p, vt_k.isa, &vt_k, why, whylen);
}

int vt_kernels_bf16_path(void) {
    for (int p = 0; p < VT_BF16_PATH_COUNT; p++) {
        vt_kernels t = vt_k;
        char why[160];
        if (vt_bf16_path_entries((vt_bf16_path)p, vt_k.isa, &t, why, sizeof why) == 0 && t.gemm_bf16 == vt_k.gemm_bf16)
            return p;
    }
    return -1;
}
