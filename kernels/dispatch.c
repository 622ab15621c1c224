/* dispatch.c - CPU probe (CPUID + XGETBV) and the active kernel table.
 * The table is filled scalar-first, then each level up to the chosen one overrides
 * the entries it implements (levels[] below: one row per level). VT_ISA forces a level;
 * asking for one the CPU or OS lacks is an error, never a silent downgrade. It also sets
 * the GEMMs' blocking context for the CPU (gemm_context.c; VT_GEMM_CONTEXT overrides). Built with
 * VT_AVX512_EMULATED (the test lane `make emu`), the levels above avx2 are emulated
 * (kernels/avx512/emulated.h) and need only AVX2 + FMA. */
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "level.h"

vt_kernels vt_k;

#ifdef VT_AVX512_EMULATED
#define EMU "-emulated"
#else
#define EMU ""
#endif

static const struct {
    vt_isa isa;
    const char *name;  /* as VT_ISA spells it */
    const char *label; /* vt_kernels.name */
    void (*fill)(vt_kernels *t);
} levels[VT_ISA_COUNT] = {
    {VT_ISA_SCALAR, "scalar", "scalar", vt_kernels_fill_scalar},
    {VT_ISA_AVX2, "avx2", "avx2", vt_kernels_fill_avx2},
    {VT_ISA_AVX512, "avx512", "avx512" EMU, vt_kernels_fill_avx512},
    {VT_ISA_AVX512BF16, "avx512bf16", "avx512bf16" EMU, vt_kernels_fill_avx512bf16},
    {VT_ISA_AMX, "amx", "amx" EMU, vt_kernels_fill_amx},
};

static unsigned long long xgetbv0(void) {
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

#ifndef VT_AVX512_EMULATED
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* Whether the kernel grants this process AMX tile data (asked once; later calls return
 * the first answer). */
static int amx_permission(void) {
    static int asked = 0, granted = 0;
    if (!asked) {
        granted = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
        asked = 1;
    }
    return granted;
}
#endif

/* The highest level this CPU and OS support; *why (when not NULL) says what stops the
 * next level up ("" at the top). */
static vt_isa probe(const char **why) {
    const char *unused;
    if (!why) why = &unused;
    unsigned int a, b, c, d;
    *why = "the CPU has no CPUID leaf 1";
    if (!__get_cpuid(1, &a, &b, &c, &d)) return VT_ISA_SCALAR;
    int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
    *why = "the CPU has no AVX, FMA or OSXSAVE";
    if (!osxsave || !avx || !fma) return VT_ISA_SCALAR;
    unsigned long long xcr0 = xgetbv0();
    *why = "the OS does not save the AVX state (XCR0)";
    if ((xcr0 & 0x6) != 0x6) return VT_ISA_SCALAR; /* OS saves SSE and AVX state */
    *why = "the CPU has no AVX2";
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return VT_ISA_SCALAR;
    int avx2 = (b >> 5) & 1;
    if (!avx2) return VT_ISA_SCALAR;
#ifdef VT_AVX512_EMULATED
    *why = "";
    return (vt_isa)(VT_ISA_COUNT - 1); /* every higher level runs on AVX2 + FMA */
#else
    int avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1;
    int avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
    int os_zmm = (xcr0 & 0xE6) == 0xE6; /* opmask, ZMM_Hi256, Hi16_ZMM */
    *why = "the CPU has no AVX-512 F/DQ/BW/VL";
    if (!(avx512f && avx512dq && avx512bw && avx512vl)) return VT_ISA_AVX2;
    *why = "the OS does not save the AVX-512 state (XCR0)";
    if (!os_zmm) return VT_ISA_AVX2;
    /* AMX-BF16 and AMX-TILE: leaf 7 subleaf 0, EDX bits 22 and 24 */
    int amx = ((d >> 22) & 1) && ((d >> 24) & 1);
    /* AVX512_BF16: leaf 7 subleaf 1, EAX bit 5 (subleaf 1 exists when leaf 7.0 EAX >= 1) */
    *why = "the CPU has no AVX512_BF16";
    if (a < 1 || !__get_cpuid_count(7, 1, &a, &b, &c, &d) || !((a >> 5) & 1)) return VT_ISA_AVX512;
    /* the OS saves tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA) and grants this
     * process the tile data (Linux: arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA;
     * once per process, every thread may then use the tiles) */
    *why = "the CPU has no AMX-TILE and AMX-BF16";
    if (!amx) return VT_ISA_AVX512BF16;
    *why = "the OS does not enable the AMX tile state (XCR0 bits 17-18)";
    if ((xcr0 & 0x60000) != 0x60000) return VT_ISA_AVX512BF16;
    *why = "the kernel refused the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
    if (!amx_permission()) return VT_ISA_AVX512BF16;
    *why = "";
    return VT_ISA_AMX;
#endif
}

vt_isa vt_kernels_best_isa(void) { return probe(NULL); }

const char *vt_kernels_isa_name(vt_isa isa) {
    return isa >= 0 && isa < VT_ISA_COUNT ? levels[isa].name : "?";
}

int vt_kernels_table(vt_isa isa, vt_kernels *t) {
    if (isa < 0 || isa > vt_kernels_best_isa()) return -1;
    memset(t, 0, sizeof *t);
    for (int l = 0; l <= (int)isa; l++) levels[l].fill(t);
    t->isa = isa;
    t->name = levels[isa].label;
    return 0;
}

int vt_kernels_init(char *err, size_t errlen) {
    static int done = 0;
    if (done) return 0;
    const char *why;
    vt_isa best = probe(&why), isa = best;
    const char *env = getenv("VT_ISA");
    if (env && *env) {
        int found = -1;
        for (int l = 0; l < VT_ISA_COUNT; l++)
            if (!strcmp(env, levels[l].name)) found = l;
        if (found < 0) {
            char names[128] = "";
            for (int l = 0; l < VT_ISA_COUNT; l++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                         l == 0 ? "" : l + 1 == VT_ISA_COUNT ? " or " : ", ", levels[l].name);
            snprintf(err, errlen, "VT_ISA=%s is not a known level (use %s)", env, names);
            return -1;
        }
        isa = (vt_isa)found;
        if (isa > best) {
            snprintf(err, errlen, "VT_ISA=%s requested but this CPU/OS supports at most %s (%s)",
                     env, levels[best].name, why);
            return -1;
        }
    }
    /* the GEMMs' blocking for this CPU (gemm_context.c), then VT_GEMM_CONTEXT's changes */
    const vt_gemm_context *ctx = vt_gemm_context_detect();
    vt_gemm_context chosen = *ctx;
    const char *genv = getenv("VT_GEMM_CONTEXT");
    if (genv && *genv && vt_gemm_context_parse(genv, ctx, &chosen, err, errlen)) return -1;
    vt_gemm_context_set(&chosen);
    vt_kernels_table(isa, &vt_k);
    done = 1;
    return 0;
}
