# hmoe — build, test, bench, fuzz.
#
#   make              ./hmoe (CUDA parts too when nvcc is on PATH), as many jobs as CPUs
#   make CUDA=0       CPU-only engine
#   make CUDA_ARCH=all  CUDA code for every supported GPU (release builds; slow to compile)
#   make CC=clang     gcc >= 10 and clang >= 14 both build it
#   make test         build and run the test suite (last line: "N passed, N failed")
#   make sanitize     the same suite on an ASan + UBSan build (objects in build/san; same as
#                     make SAN=1 test); make sanitize-server: only the server's tests
#   make test-gpu     GPU tests (needs a GPU; CI only compiles them: make gpu-tests)
#   make bench        build the benchmarks in bench/
#   make demo         build, benchmark a synthetic model (hmoe bench) and generate a few tokens with it
#   make fuzz         libFuzzer targets (clang, ASan/UBSan): the GGUF parser, model config + vocabulary,
#                     the chat template interpreter,
#                     the server's request readers
#
.DEFAULT_GOAL := all

# Sources are found by wildcard: every src/*/*.c is part of libhmoe; files named
# *_avx2.c / *_avxvnni.c / *_avx512.c get their own -m flags (the CPU picks a path at run time, so the
# rest of the binary must stay runnable on any x86-64); *.cu files are compiled by nvcc
# only when CUDA=1.

# Parallel by default; a -j on the command line wins.
NPROC   := $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += -j$(NPROC)

CC      ?= gcc
NVCC    ?= nvcc
SHARED  ?= tests
SAN     ?= 0
BUILD   ?= $(if $(filter 1,$(SAN)),build/san,build)

HAVE_NVCC := $(shell command -v $(NVCC) 2>/dev/null)
CUDA    ?= $(if $(HAVE_NVCC),1,0)
# GPU architectures (compute capabilities without the dot). Default: the GPU of this machine
# (nvidia-smi), else sm_86 plus its PTX, which the driver compiles for any newer GPU at first
# start. CUDA_ARCH=all: native code for every supported generation (consumer Ampere/Ada/
# Blackwell and Hopper) plus PTX; CUDA_ARCH="90 120" picks a list.
CUDA_ARCH_ALL := 86 89 90 120
GPU_CC  := $(if $(HAVE_NVCC),$(shell timeout 10 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
             | grep -E '^[0-9]+\.[0-9]+$$' | head -n1 | tr -d .))
CUDA_ARCH ?= $(if $(GPU_CC),$(GPU_CC),86)
CUDA_PTX  ?= $(if $(GPU_CC),0,1)
ifeq ($(strip $(CUDA_ARCH)),all)
override CUDA_ARCH := $(CUDA_ARCH_ALL)
CUDA_PTX := 1
endif
CUDA_PTX_ARCH := $(firstword $(CUDA_ARCH))
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
ifeq ($(SAN),1)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer $(SAN_EXTRA)
CFLAGS  += $(SAN_FLAGS)
LDLIBS  += $(SAN_FLAGS)
endif

AVX2_FLAGS   := -mavx2 -mfma -mf16c -mbmi2
AVX512_FLAGS := $(AVX2_FLAGS) -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512vbmi -mavx512bitalg -mgfni
# AMX for *_amx_avx512.c only when the compiler knows it (gcc >= 11, clang >= 12); without it
# that file builds a fallback that never selects AMX.
AMX_FLAGS := $(shell $(CC) -mamx-tile -mamx-int8 -E -x c /dev/null >/dev/null 2>&1 && echo -mamx-tile -mamx-int8)
# AVX-VNNI (VEX vpdpbusd) for *_avxvnni.c only when the compiler knows it (gcc >= 11, clang >= 12);
# without it those files build empty and the run-time check never selects them.
AVXVNNI_FLAGS := $(shell $(CC) -mavxvnni -E -x c /dev/null >/dev/null 2>&1 && echo -mavxvnni)
CFLAGS  += -DHMOE_HAVE_AVXVNNI=$(if $(AVXVNNI_FLAGS),1,0)

C_SRC   := $(wildcard src/*/*.c src/model/arch/*.c src/text/jinja/*.c)
CLI_SRC := $(wildcard src/cli/*.c)
# src/server (`hmoe serve`) needs libmicrohttpd and jansson; without them hmoe is built without
# `serve` (SERVER=0 forces that). The server objects link into ./hmoe only, never libhmoe.
SERVER_SRC := $(wildcard src/server/*.c)
HAVE_SERVER_LIBS := $(shell pkg-config --exists libmicrohttpd jansson 2>/dev/null && echo 1)
SERVER  ?= $(if $(HAVE_SERVER_LIBS),1,0)
LIB_SRC := $(filter-out $(CLI_SRC) $(SERVER_SRC),$(C_SRC))
CU_SRC  := $(if $(filter 1,$(CUDA)),$(wildcard src/*/*.cu),)

LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o) $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
SERVER_OBJ := $(if $(filter 1,$(SERVER)),$(SERVER_SRC:%.c=$(BUILD)/%.o),)
ifeq ($(SERVER),1)
SERVER_CFLAGS := $(shell pkg-config --cflags libmicrohttpd jansson)
SERVER_LIBS   := $(shell pkg-config --libs libmicrohttpd jansson)
endif
$(CLI_OBJ) $(SERVER_OBJ): CFLAGS += -DHMOE_HAVE_SERVER=$(SERVER) $(SERVER_CFLAGS)
# The files that test HMOE_HAVE_SERVER are rebuilt when it changes.
SERVER_STAMP := $(BUILD)/gen/server-$(SERVER).stamp
$(SERVER_STAMP):
	@mkdir -p $(dir $@)
	@rm -f $(BUILD)/gen/server-*.stamp
	@touch $@
$(BUILD)/src/cli/main.o $(BUILD)/src/cli/cmd_serve.o: $(SERVER_STAMP)
LIB     := $(BUILD)/libhmoe.a

empty :=
space := $(empty) $(empty)
comma := ,
NVCCFLAGS ?= -O3 -lineinfo
NVCCFLAGS += -std=c++17 -Iinclude -Isrc -DHMOE_HAVE_CUDA=1 --expt-relaxed-constexpr \
             -Xcompiler -Wall,-Wextra,-fopenmp $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
             $(if $(filter 1,$(CUDA_PTX)),-gencode arch=compute_$(CUDA_PTX_ARCH)$(comma)code=compute_$(CUDA_PTX_ARCH))
ifeq ($(CUDA),1)
LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
endif

# tests/test_server_*.c link the server's objects: built only when the server is.
SERVER_TEST_SRC := $(wildcard tests/test_server_*.c)
TEST_SRC  := $(filter-out $(if $(filter 1,$(SERVER)),,$(SERVER_TEST_SRC)),$(wildcard tests/test_*.c))
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
GPU_TEST_SRC := $(wildcard tests/gpu_test_*.c)
GPU_TEST_BIN := $(GPU_TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_SRC := $(wildcard bench/bench_*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

# What this build is, for the start line and for hmoe --version.
CC_NAME   := $(firstword $(CC)) $(shell $(CC) -dumpfullversion 2>/dev/null || $(CC) -dumpversion 2>/dev/null)
CUDA_DESC := $(if $(filter 1,$(CUDA)),CUDA on (sm_$(subst $(space),+sm_,$(strip $(CUDA_ARCH)))$(if $(filter 1,$(CUDA_PTX)), + PTX $(CUDA_PTX_ARCH))),CUDA off)
BUILD_DESC := $(CUDA_DESC), $(CC_NAME) $(OPT)$(if $(filter 1,$(SAN)), ASan+UBSan)
ifeq ($(MAKELEVEL),0)
ifeq ($(filter clean,$(MAKECMDGOALS)),)
$(info hmoe: building with $(BUILD_DESC) into $(BUILD)/, -j$(NPROC)$(if $(GPU_CC), (GPU sm_$(GPU_CC) found),$(if $(filter 1,$(CUDA)), (no GPU found))); change with CUDA=0, CUDA_ARCH=all|"90 120", CC=clang, SAN=1, -jN)
ifneq ($(SERVER),1)
$(info hmoe: building without `hmoe serve` (SERVER=0, or pkg-config finds no libmicrohttpd + jansson): install libmicrohttpd-dev libjansson-dev)
endif
endif
endif

.PHONY: all test sanitize sanitize-server test-gpu gpu-tests bench demo fuzz clean FORCE
all: hmoe

# ./hmoe is one file whichever flavour (SAN=1 or not) built it last: the stamp changes when the
# flavour does, so that switching back relinks it.
FLAVOUR_STAMP := build/.hmoe-flavour
$(FLAVOUR_STAMP): FORCE
	@mkdir -p $(dir $@)
	@echo '$(BUILD) $(BUILD_DESC)' | cmp -s - $@ || echo '$(BUILD) $(BUILD_DESC)' > $@

hmoe: $(CLI_OBJ) $(SERVER_OBJ) $(LIB) $(FLAVOUR_STAMP)
	$(CC) -o $@ $(CLI_OBJ) $(SERVER_OBJ) $(LIB) $(SERVER_LIBS) $(LDLIBS)

# The commit and build options baked into hmoe --version (and bench's build_commit): rewritten
# only when they change; "unknown" outside a git checkout (a tarball).
GIT_COMMIT := $(or $(shell git rev-parse --short=12 HEAD 2>/dev/null),unknown)
GIT_COUNT  := $(or $(shell git rev-list --count HEAD 2>/dev/null),0)
GIT_DIRTY  := $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),-dirty)
BUILD_INFO := $(BUILD)/gen/build_info.h
$(BUILD_INFO): FORCE
	@mkdir -p $(dir $@)
	@printf '#define HMOE_BUILD_COMMIT "%s"\n#define HMOE_BUILD_NUMBER %s\n#define HMOE_BUILD_OPTIONS "%s"\n' \
	    '$(GIT_COMMIT)$(GIT_DIRTY)' '$(GIT_COUNT)' '$(BUILD_DESC)' > $@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
$(BUILD)/src/cli/cli_version.o: $(BUILD_INFO)
$(BUILD)/src/cli/cli_version.o: CFLAGS += -I$(BUILD)/gen

$(LIB): $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -c -o $@ $<

$(BUILD)/%_avxvnni.o: %_avxvnni.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) $(AVXVNNI_FLAGS) -c -o $@ $<

$(BUILD)/%_amx_avx512.o: %_amx_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) $(AMX_FLAGS) -c -o $@ $<

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

$(BUILD)/tests/test_server_%: tests/test_server_%.c $(SERVER_OBJ) $(LIB) tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SERVER_CFLAGS) -Itests -o $@ $< $(filter-out %/http.o %/server.o,$(SERVER_OBJ)) $(LIB) \
	    $(SERVER_LIBS) $(LDLIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# The suite: unit tests against $(SHARED)/fixtures (tests/fixtures in the repository) plus CLI
# checks through ./hmoe.
test: hmoe $(TEST_BIN)
	HMOE_SHARED=$(SHARED) BUILD=$(BUILD) ./tests/run.sh

# ASan + UBSan: a separate object tree (build/san), the same suite; leaks are reported too.
sanitize:
	$(MAKE) SAN=1 test

# The server's tests alone on the ASan + UBSan build (./hmoe is then the sanitized one).
SERVER_TEST_BIN := $(patsubst tests/%.c,build/san/tests/%,$(SERVER_TEST_SRC))
sanitize-server:
	$(MAKE) SAN=1 hmoe $(SERVER_TEST_BIN)
	HMOE_SHARED=$(SHARED) ./tests/run.sh $(SERVER_TEST_BIN) $(wildcard tests/test_server*.sh)

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

# Fuzzing: clang's libFuzzer with address and undefined-behaviour sanitizers. Three targets:
# fuzz_gguf (the GGUF parser and every accessor), fuzz_model (vocabulary load + tokenize
# round, model config validation and tensor binding) and fuzz_jinja (chat template compile + render). `make fuzz-run` runs each for FUZZ_TIME
# seconds; new inputs go to build/fuzz/corpus-*, never into the tracked corpus
# (tests/data/fuzz-corpus is read as seeds), and the seeds are real-size: the fixture models'
# 130 KB headers for the parser, the whole moe-tiny models for fuzz_model.
FUZZ_CC ?= clang
FUZZ_TIME ?= 60
FUZZ_FLAGS := -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
              -D_DEFAULT_SOURCE -Iinclude -Isrc -DHMOE_HAVE_CUDA=0
FUZZ_DIR := $(BUILD)/fuzz
.PHONY: fuzz-run fuzz-seeds
fuzz: $(FUZZ_DIR)/fuzz_gguf $(FUZZ_DIR)/fuzz_model $(FUZZ_DIR)/fuzz_jinja $(if $(filter 1,$(SERVER)),$(FUZZ_DIR)/fuzz_server $(FUZZ_DIR)/fuzz_grammar) fuzz-seeds
# types.c points at the reference kernels, so the whole (CPU-only, portable) kernels dir comes along.
$(FUZZ_DIR)/fuzz_gguf: tests/fuzz_gguf.c $(wildcard src/gguf/*.c) $(wildcard src/kernels/*.c) src/util/err.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^
# fuzz_model needs the whole library: built once more by clang with the sanitizers and the
# fuzzer's coverage hooks, in its own object tree.
FUZZ_LIB := $(FUZZ_DIR)/obj/libhmoe.a
$(FUZZ_LIB): FORCE
	$(MAKE) --no-print-directory CC=$(FUZZ_CC) CUDA=0 SAN=1 SAN_EXTRA=-fsanitize=fuzzer-no-link BUILD=$(FUZZ_DIR)/obj $@
$(FUZZ_DIR)/fuzz_model: tests/fuzz_model.c $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fopenmp -o $@ $< $(FUZZ_LIB) -lm -lpthread
# fuzz_jinja: the chat template interpreter alone (it needs only the JSON reader and errors).
$(FUZZ_DIR)/fuzz_jinja: tests/fuzz_jinja.c $(wildcard src/text/jinja/*.c) src/util/json.c src/util/err.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^ -lm
# fuzz_server: request bodies through every endpoint's reader (the server's sources built with the fuzzer
# flags, the tiny fixture model's vocabulary and template); seeds in tests/data/fuzz-server.
$(FUZZ_DIR)/fuzz_server: tests/fuzz_server.c $(SERVER_SRC) $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(SERVER_CFLAGS) -fopenmp -o $@ tests/fuzz_server.c $(SERVER_SRC) $(FUZZ_LIB) \
	    $(SERVER_LIBS) -lm -lpthread
# fuzz_grammar: the server's JSON grammar alone (a schema, then the bytes of an answer).
$(FUZZ_DIR)/fuzz_grammar: tests/fuzz_grammar.c tests/json_grammar_check.h src/server/grammar_json.c src/util/err.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(SERVER_CFLAGS) -Itests -o $@ tests/fuzz_grammar.c src/server/grammar_json.c src/util/err.c \
	    $(SERVER_LIBS)
FUZZ_SEED_MODELS := $(wildcard $(SHARED)/fixtures/models/*.gguf)
fuzz-seeds:
	@mkdir -p $(FUZZ_DIR)/seeds-gguf $(FUZZ_DIR)/seeds-model $(FUZZ_DIR)/corpus-gguf $(FUZZ_DIR)/corpus-model $(FUZZ_DIR)/corpus-jinja
	@for f in $(FUZZ_SEED_MODELS); do head -c 131072 $$f > $(FUZZ_DIR)/seeds-gguf/$$(basename $$f .gguf).head; done
	@cp $(SHARED)/fixtures/moe-tiny/*.gguf $(FUZZ_DIR)/seeds-model/
fuzz-run: fuzz
	$(FUZZ_DIR)/fuzz_gguf -max_total_time=$(FUZZ_TIME) -max_len=140000 -dict=tests/data/fuzz_gguf.dict \
	    $(FUZZ_DIR)/corpus-gguf $(FUZZ_DIR)/seeds-gguf tests/data/fuzz-corpus tests/data/gguf-good tests/data/gguf-bad
	$(FUZZ_DIR)/fuzz_model -max_total_time=$(FUZZ_TIME) -max_len=1400000 -rss_limit_mb=4096 \
	    $(FUZZ_DIR)/corpus-model $(FUZZ_DIR)/seeds-model
	$(FUZZ_DIR)/fuzz_jinja -max_total_time=$(FUZZ_TIME) -max_len=40000 -timeout=10 -dict=tests/data/fuzz_jinja.dict \
	    $(FUZZ_DIR)/corpus-jinja tests/jinja/templates
	$(if $(filter 1,$(SERVER)),mkdir -p $(FUZZ_DIR)/corpus-server && $(FUZZ_DIR)/fuzz_server \
	    -max_total_time=$(FUZZ_TIME) -max_len=65536 $(FUZZ_DIR)/corpus-server tests/data/fuzz-server)

clean:
	rm -rf $(BUILD) hmoe

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SERVER_OBJ:.o=.d) $(wildcard $(BUILD)/tests/*.d)
