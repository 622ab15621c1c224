# vitrain build. `make` builds ./vitrain, `make test` builds and runs the test suite,
# `make san` runs the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer,
# `make fuzz` runs the libFuzzer harnesses of tests/fuzz/ (FUZZ_TIME seconds each),
# `make emu` runs the tests on the kernel levels this CPU lacks (avx512, avx512bf16, amx),
# emulated on AVX2, `make bench` prints benchmark JSON. Sources are found by wildcard:
# adding a file under src/, kernels/ or tests/ needs no Makefile edit.

CC       ?= gcc
BUILD    ?= build
BIN      ?= vitrain
OPT      ?= -O2
CFLAGS_BASE := -std=c11 $(OPT) -g -Wall -Wextra -D_GNU_SOURCE -fopenmp -march=x86-64 -mtune=generic \
               -Isrc -Ikernels
# Each level's directory under kernels/ is compiled with its flags, the rest for baseline x86-64.
# -falign-loops=64: every avx2 loop starts a cache line, so the 6 x 16 kernel's 116-byte K
# loop spans 2 lines whatever code precedes it, not 3 (kernels/TUNING.md).
AVX2_FLAGS   := -mavx2 -mfma -falign-loops=64
AVX512_FLAGS := -mavx2 -mfma -mavx512f -mavx512bw -mavx512dq -mavx512vl
AVX512BF16_FLAGS = $(AVX512_FLAGS) -mavx512bf16
AMX_FLAGS = $(AVX512BF16_FLAGS) -mamx-tile -mamx-bf16
SAN_FLAGS    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The emulation build: every level above avx2 on AVX2 + FMA, the AVX-512 intrinsics on
# SIMDe (kernels/avx512/emulated.h), the bf16 instructions and the AMX tiles in C
# (kernels/avx512bf16/avx512bf16.h, kernels/amx/emulated.h).
# -Wno-psabi: GCC notes that 512-bit vector arguments have another ABI without
# -mavx512f; no such argument crosses a file boundary (the entry points take pointers).
# -O1: SIMDe's kernels compile several times faster than at -O2, and test as fast.
EMU_BUILD := build-emu512
EMU_AVX512_FLAGS := $(AVX2_FLAGS) -Wno-psabi -O1
EMU_MAKE = $(MAKE) --no-print-directory BUILD=$(EMU_BUILD) BIN=$(EMU_BUILD)/vitrain EXTRA_CFLAGS=-DVT_AVX512_EMULATED \
           AVX512_FLAGS="$(EMU_AVX512_FLAGS)" AVX512BF16_FLAGS="$(EMU_AVX512_FLAGS)" AMX_FLAGS="$(EMU_AVX512_FLAGS)"
EMU_E2E := e2e_train e2e_precision
# A CPU without AMX lacks at least the amx level: `make test` then also runs the
# emulation build's test_kernels (every kernel of every level against the scalar ones).
EMU_KERNELS := $(if $(filter amx_tile,$(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)),,$(EMU_BUILD)/tests/test_kernels)

# Libraries through pkg-config: module -> Debian package (ompi-c: Open MPI, src/dist.c).
PKG_MODULES := libcjson libpng zlib stb ompi-c
deb_of = $(if $(filter libcjson,$(1)),libcjson-dev,$(if $(filter libpng,$(1)),libpng-dev,$(if $(filter zlib,$(1)),zlib1g-dev,$(if $(filter ompi-c,$(1)),libopenmpi-dev,libstb-dev))))

NEEDS_LIBS := $(filter-out clean help run test san emu fuzz,$(or $(MAKECMDGOALS),all))
ifneq ($(NEEDS_LIBS),)
  ifeq ($(shell command -v pkg-config),)
    $(error pkg-config not found. Install it with: sudo apt-get install pkg-config   (or run scripts/deps.sh))
  endif
  MISSING := $(strip $(foreach m,$(PKG_MODULES),$(if $(shell pkg-config --exists $(m) && echo ok),,$(m))))
  ifneq ($(MISSING),)
    $(error missing libraries: $(MISSING). Install with: sudo apt-get install $(foreach m,$(MISSING),$(call deb_of,$(m)))   (or run scripts/deps.sh))
  endif
  PKG_CFLAGS := $(shell pkg-config --cflags $(PKG_MODULES))
  PKG_LIBS   := $(shell pkg-config --libs libcjson libpng zlib ompi-c)
endif

CFLAGS  := $(CFLAGS_BASE) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
# The SIMD levels' directories (kernels/avx2, avx512, avx512bf16, amx) take EXTRA_CFLAGS
# unless a build sets LEVEL_EXTRA_CFLAGS (scripts/fuzz.sh compiles them uninstrumented).
LEVEL_EXTRA_CFLAGS ?= $(EXTRA_CFLAGS)
LEVEL_CFLAGS := $(CFLAGS_BASE) $(PKG_CFLAGS) $(LEVEL_EXTRA_CFLAGS)
LDLIBS  := $(PKG_LIBS) -lm -fopenmp

SRC_ALL   := $(wildcard src/*.c src/*/*.c)
SRC_MAIN  := src/main.c
SRC_LIB   := $(filter-out $(SRC_MAIN),$(SRC_ALL))
KERN_BASE := $(wildcard kernels/*.c kernels/scalar/*.c)
KERN_AVX2 := $(wildcard kernels/avx2/*.c)
KERN_AVX512 := $(wildcard kernels/avx512/*.c)
KERN_AVX512BF16 := $(wildcard kernels/avx512bf16/*.c)
KERN_AMX := $(wildcard kernels/amx/*.c)
TEST_SRC  := $(wildcard tests/test_*.c tests/e2e_*.c)
BENCH_SRC := $(wildcard bench/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))
KERN_OBJ := $(call obj,$(KERN_BASE) $(KERN_AVX2) $(KERN_AVX512) $(KERN_AVX512BF16) $(KERN_AMX))
LIB_OBJ := $(call obj,$(SRC_LIB)) $(KERN_OBJ)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all test check emu-kernels san san-check emu emu-check bench run clean help fuzz FORCE
all: $(BIN)

$(BIN): $(call obj,$(SRC_MAIN)) $(BUILD)/libvitrain.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libvitrain.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The kernels alone (test_kernels needs nothing else, so the emulation lane of `make
# test` compiles only them).
$(BUILD)/libkernels.a: $(KERN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/kernels/avx2/%.o: kernels/avx2/%.c
	@mkdir -p $(dir $@)
	$(CC) $(LEVEL_CFLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kernels/avx512/%.o: kernels/avx512/%.c
	@mkdir -p $(dir $@)
	$(CC) $(LEVEL_CFLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kernels/avx512bf16/%.o: kernels/avx512bf16/%.c
	@mkdir -p $(dir $@)
	$(CC) $(LEVEL_CFLAGS) $(AVX512BF16_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kernels/amx/%.o: kernels/amx/%.c
	@mkdir -p $(dir $@)
	$(CC) $(LEVEL_CFLAGS) $(AMX_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# src/dist.c compares the build across MPI ranks: $(BUILD)/version.h (scripts/version.sh)
# names the sources' hash and changes only when they do.
$(BUILD)/version.h: FORCE
	@scripts/version.sh $@
$(BUILD)/src/dist.o: $(BUILD)/version.h
$(BUILD)/src/dist.o: CFLAGS += -I$(BUILD)
FORCE:

# src/image.c includes libstb-dev's stb_image.h with upstream 2.28's entropy-decoder
# guards added (scripts/stb_image_patch.sh says which and why).
STB_HEADER = $(shell pkg-config --variable=includedir stb)/stb_image.h
$(BUILD)/gen/stb_image_fixed.h: scripts/stb_image_patch.sh
	@mkdir -p $(dir $@)
	scripts/stb_image_patch.sh $(STB_HEADER) $@
$(BUILD)/src/image.o: $(BUILD)/gen/stb_image_fixed.h
$(BUILD)/src/image.o: CFLAGS += -I$(BUILD)/gen

$(BUILD)/tests/%: tests/%.c $(BUILD)/libvitrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libvitrain.a $(LDLIBS)

$(BUILD)/tests/test_kernels: tests/test_kernels.c $(BUILD)/libkernels.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libkernels.a $(LDLIBS)

# vitrain with durable.c built for fault injection (durable.h; the rest from the
# library), for tests/e2e_checkpoint_faults.c.
FAULT_BIN := $(BUILD)/tests/vitrain_fault
$(BUILD)/fault/durable.o: src/durable.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DVT_FAULT_INJECTION -MMD -MP -c $< -o $@

$(FAULT_BIN): $(call obj,$(SRC_MAIN)) $(BUILD)/fault/durable.o $(BUILD)/libvitrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libvitrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libvitrain.a $(LDLIBS)

# The README's test command: installs missing dependencies, builds, runs `check`.
test:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 check

# Unit tests run under every ISA the CPU has and with 1 and 2 threads, test_kernels of
# the emulation build once for the levels it lacks; end-to-end tests once. Ends with
# the total "N passed, N failed".
check: $(BIN) $(TEST_BIN) $(FAULT_BIN) emu-kernels
	@BUILD=$(BUILD) VT_BIN=$(abspath $(BIN)) VT_EMU_KERNELS=$(EMU_KERNELS) scripts/run_tests.sh

# The emulation build's test_kernels (none on a CPU with AMX), a prerequisite of check so
# that it builds beside the rest.
emu-kernels:
	+@$(if $(EMU_KERNELS),$(EMU_MAKE) $(EMU_KERNELS) >/dev/null)

# Unit tests under ASan + UBSan (separate build tree), one ISA/thread setting.
san:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 san-check

san-check:
	$(MAKE) BUILD=build-san BIN=build-san/vitrain OPT=-O1 EXTRA_CFLAGS="$(SAN_FLAGS)" build-san/vitrain $(patsubst $(BUILD)/%,build-san/%,$(filter $(BUILD)/tests/test_%,$(TEST_BIN)))
	@BUILD=build-san VT_BIN=$(abspath build-san/vitrain) VT_TEST_MATRIX=0 VT_TEST_UNIT_ONLY=1 scripts/run_tests.sh

# The tests on the kernel levels this CPU lacks: everything built with VT_AVX512_EMULATED
# (separate build tree), kernels/avx512, avx512bf16 and amx with AVX2 flags; unit tests
# under each lacking level with 1 and 2 threads, then e2e_train (its default level is the
# highest emulated one; e2e_reproduce tests the tooling, not the kernels, and is slow here).
emu:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 emu-check

emu-check:
	@echo '#include <simde/x86/avx512.h>' | $(CC) -E -x c - >/dev/null 2>&1 || { echo "SIMDe not found. Install it with: sudo apt-get install libsimde-dev   (or run scripts/deps.sh)"; exit 1; }
	$(EMU_MAKE) $(EMU_BUILD)/vitrain $(patsubst $(BUILD)/%,$(EMU_BUILD)/%,$(filter $(BUILD)/tests/test_%,$(TEST_BIN))) $(EMU_E2E:%=$(EMU_BUILD)/tests/%)
	@BUILD=$(EMU_BUILD) VT_BIN=$(abspath $(EMU_BUILD)/vitrain) VT_TEST_ISAS=lacking VT_TEST_E2E="$(EMU_E2E)" scripts/run_tests.sh

# The libFuzzer harnesses of tests/fuzz/ (clang, ASan + UBSan, build-fuzz/), each for
# FUZZ_TIME seconds; findings land in tests/fuzz/regressions/, which `make test` replays.
FUZZ_TIME ?= 60
fuzz:
	@scripts/fuzz.sh $(FUZZ_TIME)

bench: $(BIN) $(BENCH_BIN)
	@for b in $(BENCH_BIN); do $$b || exit 1; done

# The main job: install what is missing, build, train the default config.
run:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 vitrain
	./vitrain configs/default.json

clean:
	rm -rf build build-san build-fuzz $(EMU_BUILD) vitrain

help:
	@echo "targets: all (./vitrain), run (default training job), test (deps + build + suite), check (suite only), san, emu (the kernel levels this CPU lacks, emulated on AVX2), fuzz (FUZZ_TIME=seconds per target), bench, clean"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
