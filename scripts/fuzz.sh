#!/usr/bin/env bash
# fuzz.sh [--seeds] [SECONDS] [TARGET...]: run the libFuzzer harnesses of tests/fuzz/
# (`make fuzz FUZZ_TIME=SECONDS` calls it).
#
# Builds the library and each harness with clang, AddressSanitizer and UBSan into
# build-fuzz/, then runs each target (default: all of tests/fuzz/fuzz_*.c) for SECONDS
# (default $FUZZ_TIME, else 60) on tests/fuzz/corpus/<target>/ (the committed seeds) plus
# build-fuzz/corpus/<target>/ (what the fuzzer finds interesting; kept between runs, so
# successive runs go deeper). A crash, sanitizer report, leak, property failure
# (FUZZ_CHECK), timeout (FUZZ_TIMEOUT seconds for one input, default 30) or an input that
# needs more than 2 GB is written to tests/fuzz/regressions/<target>/: commit it with the
# fix, and `make test` replays it from then on (tests/test_fuzz_replay.c). Prints one line
# per target with its executions and findings; exits 1 if anything was found.
#   --seeds   first rewrite tests/fuzz/corpus/ with tests/fuzz/make_seeds.c
# Environment: FUZZ_TIME, FUZZ_TIMEOUT, FUZZ_FLAGS (extra libFuzzer flags, e.g. -jobs).
set -euo pipefail
cd "$(dirname "$0")/.."

seeds=0
if [[ ${1:-} == --seeds ]]; then seeds=1; shift; fi
secs=${1:-${FUZZ_TIME:-60}}
[[ $# -gt 0 ]] && shift
[[ $secs =~ ^[0-9]+$ && $secs -gt 0 ]] || { echo "fuzz.sh: SECONDS must be a positive integer, got '$secs'" >&2; exit 2; }
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    for f in tests/fuzz/fuzz_*.c; do t=${f#tests/fuzz/fuzz_}; targets+=("${t%.c}"); done
fi
for t in "${targets[@]}"; do
    [[ -f tests/fuzz/fuzz_$t.c ]] || { echo "fuzz.sh: no harness tests/fuzz/fuzz_$t.c" >&2; exit 2; }
done

scripts/deps.sh --fuzz
B=build-fuzz
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# The SIMD levels' kernels (kernels/avx2, avx512, avx512bf16, amx) are built uninstrumented:
# no harness targets them, `make test` checks each against the scalar kernels (instrumented
# here) and `make san` runs them under ASan, and clang's ASan compiles their unrolled
# intrinsics many times slower than the rest of the tree.
make --no-print-directory -j2 BUILD=$B CC=clang OPT=-O1 \
    EXTRA_CFLAGS="$san -fsanitize=fuzzer-no-link" LEVEL_EXTRA_CFLAGS= $B/libvitrain.a >/dev/null
cflags="-std=c11 -O1 -g -D_GNU_SOURCE -fopenmp -Isrc -Ikernels -Itests -Itests/fuzz \
        $(pkg-config --cflags libcjson libpng zlib stb) $san"
libs="$B/libvitrain.a $(pkg-config --libs libcjson libpng zlib) -lm -fopenmp"
mkdir -p $B/fuzz
if [[ $seeds -eq 1 ]]; then
    clang $cflags -o $B/fuzz/make_seeds tests/fuzz/make_seeds.c $libs
    rm -rf tests/fuzz/corpus
    ASAN_OPTIONS=detect_leaks=0 $B/fuzz/make_seeds tests/fuzz/corpus
fi

found=0
for t in "${targets[@]}"; do
    clang $cflags -fsanitize=fuzzer -o $B/fuzz/fuzz_$t tests/fuzz/fuzz_$t.c $libs
    mkdir -p $B/corpus/$t tests/fuzz/regressions/$t tests/fuzz/corpus/$t
    before=$(ls tests/fuzz/regressions/$t | wc -l)
    log=$B/fuzz/fuzz_$t.log
    rc=0
    start=$SECONDS
    $B/fuzz/fuzz_$t -max_total_time="$secs" -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb=2048 \
        -malloc_limit_mb=2048 -report_slow_units=100000000 -print_final_stats=1 \
        -artifact_prefix=tests/fuzz/regressions/$t/ ${FUZZ_FLAGS:-} \
        $B/corpus/$t tests/fuzz/corpus/$t >"$log" 2>&1 || rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    new=$(( $(ls tests/fuzz/regressions/$t | wc -l) - before ))
    corpus=$(ls $B/corpus/$t | wc -l)
    echo "fuzz_$t: ${execs:-?} executions in $((SECONDS - start)) s, corpus $corpus, $new new reproducer(s), exit $rc"
    if [[ $rc -ne 0 || $new -ne 0 ]]; then
        found=1
        grep -E 'ERROR|SUMMARY|fuzz property|runtime error|Test unit written' "$log" | head -20
        echo "fuzz_$t: full log in $log; reproducers in tests/fuzz/regressions/$t/"
    fi
done
exit $found
