#!/usr/bin/env bash
# Runs the test binaries and prints the total "N passed, N failed" line last.
# Unit tests (build/tests/test_*) run under every ISA this CPU supports and with 1 and
# 2 OpenMP threads (test_kernels, which tests every level itself and starts no threads,
# under the top one and 2 threads only;
# VT_TEST_ISAS="avx512 amx": those ISAs instead of the CPU's;
# VT_TEST_ISAS=lacking: the levels above avx2 this CPU lacks, for the emulation build;
# VT_TEST_MATRIX=0: default ISA, 2 threads only), and test_ops_grad once more with 4
# threads asked and 2 allowed; VT_EMU_KERNELS=path: that test_kernels (the emulation
# build's) once, for the levels this CPU lacks; end-to-end tests (build/tests/e2e_*)
# run once (VT_TEST_E2E="e2e_train": only those). VT_TEST_UNIT_ONLY=1 skips them.
# VT_TEST_SKIP="test_kernels ...": binaries not to run (.ci/run: what an earlier step ran).
# Each binary's line ends with its wall time, so CI's log shows where its minutes go.
# Exit status: non-zero if any binary failed or printed no summary line.
set -u
BUILD=${BUILD:-build}
# Every binary runs with the tape's protocol checks on (checking mode, src/tape.h).
export VT_TAPE_CHECK=${VT_TAPE_CHECK:-1}
cd "$(dirname "$0")/.."

# The levels this CPU has (each includes the ones before it), and those it lacks.
isas="scalar" lacking=""
flags=" $(grep -m1 '^flags' /proc/cpuinfo || true) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }
has avx2 fma && isas="$isas avx2"
level=0
has avx512f avx512bw avx512dq avx512vl && level=1
((level == 1)) && has avx512_bf16 && level=2
((level == 2)) && has amx_bf16 amx_tile && level=3
for l in avx512 avx512bf16 amx; do
    if ((level > 0)); then isas="$isas $l"; level=$((level - 1)); else lacking="$lacking $l"; fi
done
if [[ ${VT_TEST_ISAS:-} == lacking ]]; then isas=${lacking# }; elif [[ -n ${VT_TEST_ISAS:-} ]]; then isas=$VT_TEST_ISAS; fi
threads="1 2"
if [[ ${VT_TEST_MATRIX:-1} == 0 ]]; then isas="default"; threads="2"; fi

total_pass=0 total_fail=0 bad=0
run_one() { # label, then command
    local label=$1; shift
    local out rc t0=$EPOCHREALTIME
    out=$("$@" 2>&1); rc=$?
    local secs
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    local line
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
    if [[ -z $line ]]; then
        printf '%s\n' "$out" | tail -20
        echo "FAIL $label: exit $rc, no summary line ($secs s)"
        bad=1; total_fail=$((total_fail + 1)); return
    fi
    local p f
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    if [[ $rc -ne 0 || $f -ne 0 ]]; then
        printf '%s\n' "$out" | grep -v -E '^[0-9]+ passed' | tail -40
        echo "FAIL $label: $line (exit $rc, $secs s)"; bad=1
    else
        echo "ok   $label: $line ($secs s)"
    fi
}

# in_list LIST NAME: NAME is one of the space-separated words of LIST
in_list() { [[ " $1 " == *" $2 "* ]]; }
skipped() {
    in_list "${VT_TEST_SKIP:-}" "$(basename "$1")" || return 1
    echo "skip $(basename "$1"): VT_TEST_SKIP"
}

for t in "$BUILD"/tests/test_*; do
    [[ -x $t ]] || continue
    skipped "$t" && continue
    # test_kernels checks every level the CPU has against the scalar one in each run, so
    # it runs under the top level only (VT_ISA changes no kernel it tests), and on one
    # thread count (kernels start no threads)
    t_isas=$isas t_threads=$threads
    [[ $(basename "$t") == test_kernels ]] && t_isas=${isas##* } t_threads=${threads##* }
    for isa in $t_isas; do
        for th in $t_threads; do
            if [[ $isa == default ]]; then
                run_one "$(basename "$t") threads=$th" env OMP_NUM_THREADS=$th "$t"
            else
                run_one "$(basename "$t") VT_ISA=$isa threads=$th" env VT_ISA=$isa OMP_NUM_THREADS=$th "$t"
            fi
        done
    done
done
# The kernel levels this CPU lacks, through the emulation build's test_kernels: it tests
# every level up to amx whatever VT_ISA says, and its kernels start no threads.
if [[ -n ${VT_EMU_KERNELS:-} && -n $lacking ]]; then
    run_one "test_kernels (emulation build:$lacking emulated)" env VT_ISA=amx OMP_NUM_THREADS=1 "$VT_EMU_KERNELS"
fi
# A team smaller than the threads asked for (OMP_THREAD_LIMIT below OMP_NUM_THREADS):
# code that sizes work by omp_get_max_threads() must not assume every thread arrives
# (test_ops_grad runs vt_gemm's row, column and K splits and the threaded ops).
if [[ -x $BUILD/tests/test_ops_grad ]]; then
    run_one "test_ops_grad threads=4 limit=2" env OMP_NUM_THREADS=4 OMP_THREAD_LIMIT=2 "$BUILD/tests/test_ops_grad"
fi
if [[ ${VT_TEST_UNIT_ONLY:-0} != 1 ]]; then
    for t in "$BUILD"/tests/e2e_*; do
        [[ -x $t ]] || continue
        skipped "$t" && continue
        [[ -z ${VT_TEST_E2E:-} ]] || in_list "$VT_TEST_E2E" "$(basename "$t")" || continue
        run_one "$(basename "$t")" env OMP_NUM_THREADS=2 "$t"
    done
fi
echo "$total_pass passed, $total_fail failed"
[[ $bad -eq 0 && $total_fail -eq 0 ]]
