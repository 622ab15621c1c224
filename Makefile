# vitrain build. `make` builds ./vitrain, `make test` builds and runs the test suite,
# `make san` runs the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer,
# `make emu` runs the tests on the AVX-512 kernels emulated on AVX2, `make bench` prints
# benchmark JSON. Sources are found by wildcard: adding a file under src/, kernels/ or
# tests/ needs no Makefile edit.

CC       ?= gcc
BUILD    ?= build
BIN      ?= vitrain
OPT      ?= -O2
CFLAGS_BASE := -std=c11 $(OPT) -g -Wall -Wextra -D_GNU_SOURCE -fopenmp -march=x86-64 -mtune=generic \
               -Isrc -Ikernels
AVX2_FLAGS   := -mavx2 -mfma
AVX512_FLAGS := -mavx2 -mfma -mavx512f -mavx512bw -mavx512dq -mavx512vl
AVX512BF16_FLAGS = $(AVX512_FLAGS) -mavx512bf16
AMX_FLAGS = $(AVX512BF16_FLAGS) -mamx-tile -mamx-bf16
SAN_FLAGS    := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
# The emulation lane: kernels/avx512 on SIMDe over AVX2 (kernels/avx512/emulated.h).
# -Wno-psabi: GCC notes that 512-bit vector arguments have another ABI without
# -mavx512f; no such argument crosses a file boundary (the entry points take pointers).
EMU_BUILD := build-emu512
EMU_AVX512_FLAGS := $(AVX2_FLAGS) -Wno-psabi
EMU_E2E := e2e_train

# Libraries through pkg-config: module -> Debian package.
PKG_MODULES := libcjson libpng zlib stb
deb_of = $(if $(filter libcjson,$(1)),libcjson-dev,$(if $(filter libpng,$(1)),libpng-dev,$(if $(filter zlib,$(1)),zlib1g-dev,libstb-dev)))

NEEDS_LIBS := $(filter-out clean help run test san emu,$(or $(MAKECMDGOALS),all))
ifneq ($(NEEDS_LIBS),)
  ifeq ($(shell command -v pkg-config),)
    $(error pkg-config not found. Install it with: sudo apt-get install pkg-config   (or run scripts/deps.sh))
  endif
  MISSING := $(strip $(foreach m,$(PKG_MODULES),$(if $(shell pkg-config --exists $(m) && echo ok),,$(m))))
  ifneq ($(MISSING),)
    $(error missing libraries: $(MISSING). Install with: sudo apt-get install $(foreach m,$(MISSING),$(call deb_of,$(m)))   (or run scripts/deps.sh))
  endif
  PKG_CFLAGS := $(shell pkg-config --cflags $(PKG_MODULES))
  PKG_LIBS   := $(shell pkg-config --libs libcjson libpng zlib)
endif

CFLAGS  := $(CFLAGS_BASE) $(PKG_CFLAGS) $(EXTRA_CFLAGS)
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
LIB_OBJ := $(call obj,$(SRC_LIB) $(KERN_BASE) $(KERN_AVX2) $(KERN_AVX512) $(KERN_AVX512BF16) $(KERN_AMX))
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
BENCH_BIN := $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

.PHONY: all test check san san-check emu emu-check bench run clean help
all: $(BIN)

$(BIN): $(call obj,$(SRC_MAIN)) $(BUILD)/libvitrain.a
	$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/libvitrain.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/kernels/avx2/%.o: kernels/avx2/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kernels/avx512/%.o: kernels/avx512/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kernels/avx512bf16/%.o: kernels/avx512bf16/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512BF16_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/kernels/amx/%.o: kernels/amx/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AMX_FLAGS) -MMD -MP -c $< -o $@

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/%: tests/%.c $(BUILD)/libvitrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(BUILD)/libvitrain.a $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libvitrain.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libvitrain.a $(LDLIBS)

# The README's test command: installs missing dependencies, builds, runs `check`.
test:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 check

# Unit tests run under every ISA the CPU has and with 1 and 2 threads; end-to-end
# tests once. Ends with the total "N passed, N failed".
check: $(BIN) $(TEST_BIN)
	@BUILD=$(BUILD) VT_BIN=$(abspath $(BIN)) scripts/run_tests.sh

# Unit tests under ASan + UBSan (separate build tree), one ISA/thread setting.
san:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 san-check

san-check:
	$(MAKE) BUILD=build-san BIN=build-san/vitrain OPT=-O1 EXTRA_CFLAGS="$(SAN_FLAGS)" build-san/vitrain $(patsubst $(BUILD)/%,build-san/%,$(filter $(BUILD)/tests/test_%,$(TEST_BIN)))
	@BUILD=build-san VT_BIN=$(abspath build-san/vitrain) VT_TEST_MATRIX=0 VT_TEST_UNIT_ONLY=1 scripts/run_tests.sh

# The tests on the AVX-512 kernels where the CPU has only AVX2 + FMA: everything built
# with VT_AVX512_EMULATED (separate build tree), kernels/avx512 with AVX2 flags; unit
# tests under VT_ISA=avx512 with 1 and 2 threads, then e2e_train (its default level is
# the emulated one; e2e_reproduce tests the tooling, not the kernels, and is slow here).
emu:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 emu-check

emu-check:
	@echo '#include <simde/x86/avx512.h>' | $(CC) -E -x c - >/dev/null 2>&1 || { echo "SIMDe not found. Install it with: sudo apt-get install libsimde-dev   (or run scripts/deps.sh)"; exit 1; }
	$(MAKE) BUILD=$(EMU_BUILD) BIN=$(EMU_BUILD)/vitrain EXTRA_CFLAGS=-DVT_AVX512_EMULATED AVX512_FLAGS="$(EMU_AVX512_FLAGS)" AVX512BF16_FLAGS="$(EMU_AVX512_FLAGS)" AMX_FLAGS="$(EMU_AVX512_FLAGS)" $(EMU_BUILD)/vitrain $(patsubst $(BUILD)/%,$(EMU_BUILD)/%,$(filter $(BUILD)/tests/test_%,$(TEST_BIN))) $(EMU_E2E:%=$(EMU_BUILD)/tests/%)
	@BUILD=$(EMU_BUILD) VT_BIN=$(abspath $(EMU_BUILD)/vitrain) VT_TEST_ISAS=avx512 VT_TEST_E2E="$(EMU_E2E)" scripts/run_tests.sh

bench: $(BIN) $(BENCH_BIN)
	@for b in $(BENCH_BIN); do $$b || exit 1; done

# The main job: install what is missing, build, train the default config.
run:
	@scripts/deps.sh
	@$(MAKE) --no-print-directory -j2 vitrain
	./vitrain configs/default.json

clean:
	rm -rf build build-san $(EMU_BUILD) vitrain

help:
	@echo "targets: all (./vitrain), run (default training job), test (deps + build + suite), check (suite only), san, emu (AVX-512 kernels emulated on AVX2), bench, clean"

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
