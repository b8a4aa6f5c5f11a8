# hmoe — build, test, bench, fuzz.
#
#   make              ./hmoe (CUDA parts too when nvcc is on PATH)
#   make CUDA=0       CPU-only engine
#   make test         build and run the test suite (last line: "N passed, N failed")
#   make test-gpu     GPU tests (needs a GPU; CI only compiles them: make gpu-tests)
#   make bench        build the benchmarks in bench/
#   make demo         build, benchmark a synthetic model (hmoe bench) and generate a few tokens with it
#   make fuzz         libFuzzer target over the GGUF parser (clang, ASan/UBSan)
#
# Sources are found by wildcard: every src/*/*.c is part of libhmoe; files named
# *_avx2.c / *_avx512.c get their own -m flags (the CPU picks a path at run time, so the
# rest of the binary must stay runnable on any x86-64); *.cu files are compiled by nvcc
# only when CUDA=1.

CC      ?= gcc
NVCC    ?= nvcc
SHARED  ?= tests
BUILD   ?= build

HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
CUDA    ?= $(if $(HAVE_NVCC),1,0)
# GPU architectures: consumer Ampere/Ada/Blackwell and Hopper. Override with CUDA_ARCH=90
# for a quick build on the H200 machine.
CUDA_ARCH ?= 86 89 90 120
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(HAVE_NVCC)))

# -O2 by default; -g keeps symbols for perf/gdb at no run-time cost. -fno-math-errno and
# -fno-trapping-math let loops vectorise without changing results (no -ffast-math: it
# flushes subnormals, which breaks bit-exact dequantisation, quants.md §0.1).
OPT     ?= -O2
CFLAGS  ?=
CFLAGS  += -std=c11 $(OPT) -g -Wall -Wextra -fopenmp -fno-math-errno -fno-trapping-math \
           -D_DEFAULT_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Isrc -MMD -MP \
           -DHMOE_HAVE_CUDA=$(CUDA)
LDLIBS  += -fopenmp -lm -lpthread

AVX2_FLAGS   := -mavx2 -mfma -mf16c -mbmi2
AVX512_FLAGS := $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512vbmi -mavx512bitalg

C_SRC   := $(wildcard src/*/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
LIB_SRC := $(filter-out $(CLI_SRC),$(C_SRC))
CU_SRC  := $(if $(filter 1,$(CUDA)),$(wildcard src/*/*.cu),)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
LIB     := $(BUILD)/libhmoe.a

NVCCFLAGS ?= -O3 -lineinfo
NVCCFLAGS += -std=c++17 -Iinclude -Isrc -DHMOE_HAVE_CUDA=1 --expt-relaxed-constexpr \
             -Xcompiler -Wall,-Wextra,-fopenmp $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a))
ifeq ($(CUDA),1)
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
endif

TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
GPU_TEST_SRC := $(wildcard tests/gpu_test_*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

.PHONY: all test test-gpu gpu-tests bench demo fuzz clean
all: hmoe

hmoe: $(CLI_OBJ) $(LIB)
	$(CC) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -c -o $@ $<

$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -c -o $@ $<

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: tests/%.c $(LIB) tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The suite: unit tests against $(SHARED)/fixtures (tests/fixtures in the repository) plus CLI
# checks through ./hmoe.
test: hmoe $(TEST_BIN)
	HMOE_SHARED=$(SHARED) ./tests/run.sh

test-gpu: hmoe $(GPU_TEST_BIN)
	HMOE_SHARED=$(SHARED) BUILD=$(BUILD) ./tests/run_gpu.sh

# Build the GPU tests without running them (CI has no GPU; without CUDA they link the stubs).
gpu-tests: $(GPU_TEST_BIN)

bench: hmoe $(BENCH_BIN)

# The first thing to run on a fresh machine: no model download needed. `hmoe bench` writes a
# small synthetic Qwen3-MoE model (random weights, real layout), prints llama-bench's table and
# the roofline; the model is kept in $(BUILD) so that `hmoe run` can show a short generation.
DEMO_MODEL := $(BUILD)/demo-synthetic-tiny.gguf
demo: hmoe
	./hmoe bench --synthetic-out $(DEMO_MODEL)
	@echo
	@echo "hmoe run on the same synthetic model (random weights: the text is noise, the timings are real):"
	./hmoe run -m $(DEMO_MODEL) --chat --no-think -p "Hello! What can you do?" -n 32 --temp 0

# Fuzz the GGUF parser: clang's libFuzzer with address and undefined-behaviour sanitizers.
# Run: ./build/fuzz/fuzz_gguf -max_total_time=600 tests/data/fuzz-corpus
FUZZ_CC ?= clang
FUZZ_FLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -D_DEFAULT_SOURCE -Iinclude -Isrc -DHMOE_HAVE_CUDA=0
fuzz: $(BUILD)/fuzz/fuzz_gguf
# types.c points at the reference kernels, so the whole (CPU-only, portable) kernels dir comes along.
$(BUILD)/fuzz/fuzz_gguf: tests/fuzz_gguf.c $(wildcard src/gguf/*.c) $(wildcard src/kernels/*.c) src/util/err.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

clean:
	rm -rf $(BUILD) hmoe

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(wildcard $(BUILD)/tests/*.d)
