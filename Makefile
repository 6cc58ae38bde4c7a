# Makefile - one-command entry points: deps, build, test, demo, bench.
#
# Everything the project needs comes from Debian's packages (make deps); the
# build is CMake + Ninja with clang-22 against Debian's LLVM/MLIR 22.

LLVM_PREFIX ?= /usr/lib/llvm-22
BUILD_DIR   ?= build
JOBS        ?= $(shell nproc)
CMAKE_FLAGS ?=

APT_PACKAGES := libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22 \
                libclang-rt-22-dev lld-22 cmake ninja-build libfmt-dev libspdlog-dev \
                doctest-dev libopenblas-dev libzstd-dev python3 python3-numpy \
                python3-torch \
                libgraphviz-dev libcairo2-dev pkg-config \
                pybind11-dev libdlpack-dev python3-dev python3-pytest \
                python3-matplotlib libopenmpi-dev openmpi-bin

.PHONY: all deps build test test-sanitized fuzz fuzz-models demo demo-training bench install clean

all: build

deps:
	@./tools/scripts/install-deps.sh $(APT_PACKAGES)

$(BUILD_DIR)/build.ninja:
	cmake -G Ninja -S . -B $(BUILD_DIR) \
	  -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER=$(LLVM_PREFIX)/bin/clang \
	  -DCMAKE_CXX_COMPILER=$(LLVM_PREFIX)/bin/clang++ \
	  -DLLVM_DIR=$(LLVM_PREFIX)/lib/cmake/llvm \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir \
	  -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/bin/lit \
	  $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The ASan + UBSan build of the MLIR-free parts and their tests runs first,
# so the main ctest summary stays the last thing `make test` prints.
test: build test-sanitized
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

# The MLIR-free parts (front end, plugin API, runtime) and their unit tests,
# built with -fsanitize=address,undefined.
ASAN_BUILD_DIR ?= build-asan

$(ASAN_BUILD_DIR)/build.ninja:
	cmake -G Ninja -S . -B $(ASAN_BUILD_DIR) \
	  -DCMAKE_C_COMPILER=$(LLVM_PREFIX)/bin/clang \
	  -DCMAKE_CXX_COMPILER=$(LLVM_PREFIX)/bin/clang++ \
	  -DLLVM_DIR=$(LLVM_PREFIX)/lib/cmake/llvm \
	  -DENERGY_FRONTEND_ONLY=ON -DENERGY_SANITIZE=ON

test-sanitized: deps $(ASAN_BUILD_DIR)/build.ninja
	cmake --build $(ASAN_BUILD_DIR) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD_DIR) --output-on-failure -j $(JOBS)

# libFuzzer over the readers of outside input, each for FUZZ_TIME seconds:
# the front end (seeded from examples/), the safetensors reader, the manifest
# reader and the plugin-info checks (seeded from tools/fuzz/seeds/). Stops
# at the first fuzzer that finds a crash, hang or sanitizer report, whose
# reproducer lands in $(FUZZ_BUILD_DIR)/artifacts/. Not part of `make test`.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_TIME      ?= 60
FUZZERS        := frontend safetensors manifest plugin-info

$(FUZZ_BUILD_DIR)/build.ninja:
	cmake -G Ninja -S . -B $(FUZZ_BUILD_DIR) \
	  -DCMAKE_C_COMPILER=$(LLVM_PREFIX)/bin/clang \
	  -DCMAKE_CXX_COMPILER=$(LLVM_PREFIX)/bin/clang++ \
	  -DCMAKE_CXX_FLAGS="-O1 -g" \
	  -DLLVM_DIR=$(LLVM_PREFIX)/lib/cmake/llvm \
	  -DENERGY_FRONTEND_ONLY=ON -DENERGY_BUILD_FUZZER=ON

fuzz: deps $(FUZZ_BUILD_DIR)/build.ninja
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target $(FUZZERS:%=%-fuzzer)
	mkdir -p $(FUZZ_BUILD_DIR)/artifacts $(FUZZERS:%=$(FUZZ_BUILD_DIR)/corpus/%)
	cp examples/*.energy $(FUZZ_BUILD_DIR)/corpus/frontend/
	for fuzzer in safetensors manifest plugin-info; do \
	  cp tools/fuzz/seeds/$$fuzzer/* $(FUZZ_BUILD_DIR)/corpus/$$fuzzer/ || exit 1; \
	done
	for fuzzer in $(FUZZERS); do \
	  dict=tools/fuzz/$$fuzzer.dict; \
	  echo "== $$fuzzer-fuzzer, $(FUZZ_TIME) s"; \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    $(FUZZ_BUILD_DIR)/bin/$$fuzzer-fuzzer $(FUZZ_BUILD_DIR)/corpus/$$fuzzer \
	    $$([ -f $$dict ] && echo -dict=$$dict) -max_total_time=$(FUZZ_TIME) \
	    -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD_DIR)/artifacts/$$fuzzer- || exit 1; \
	done

# Differential fuzzing of the compiler: random models (tools/fuzz-models)
# for FUZZ_MODELS_TIME seconds, each compiled and checked by `energy-run
# --check` (compiled against the interpreter, gradients against finite
# differences); failures are reduced and land in $(FUZZ_MODELS_OUT). The
# models are compiled in FUZZ_MODELS_DTYPE (f64, or f32 compared within
# 1e-3); with FUZZ_MODELS_TARGET=cuda, for the GPU, their PTX checked by
# ptxas (no GPU needed; FUZZ_MODELS_DTYPE=bf16 there for the tensor-core
# and cuDNN plans); with FUZZ_MODELS_TARGET=device-loops, compiled
# with the loops CUDA artifacts get and checked on the CPU. Not part of
# `make test` (which checks fixed samples of 50 in f64, 30 in f32, 4 for
# the GPU and 20 with the GPU's loops: ENERGY_FUZZ_SAMPLE, _F32, _CUDA,
# _DEVICE_LOOPS).
FUZZ_MODELS_TIME  ?= 300
FUZZ_MODELS_SEED  ?= $(shell date +%s)
FUZZ_MODELS_DTYPE ?= f64
FUZZ_MODELS_TARGET ?= cpu
FUZZ_MODELS_OUT   ?= $(BUILD_DIR)/fuzz-models

fuzz-models: build
	/usr/bin/python3 tools/fuzz-models/fuzz_models.py --energy-run $(BUILD_DIR)/bin/energy-run \
	  --seconds $(FUZZ_MODELS_TIME) --seed $(FUZZ_MODELS_SEED) --jobs $(JOBS) \
	  --dtype $(FUZZ_MODELS_DTYPE) --target $(FUZZ_MODELS_TARGET) \
	  --out $(FUZZ_MODELS_OUT)

demo: build
	@./tools/scripts/demo.sh $(BUILD_DIR)

# The training demonstrations of docs/models.md (minutes, not part of `make
# test`): the argmax task of paper 003 and the character-level language model
# against PyTorch, figures under $(BUILD_DIR)/demos. DEMO_ARGS passes options
# to the char-LM demo, e.g. DEMO_ARGS="--epochs 4" (default: two epochs).
DEMO_PACKAGES := python3-torch bible-kjv bible-kjv-text
DEMO_ARGS     ?=

demo-training: build
	@./tools/scripts/install-deps.sh $(DEMO_PACKAGES)
	/usr/bin/python3 examples/training/argmax_demo.py --build-dir $(BUILD_DIR) \
	  --figure $(BUILD_DIR)/demos/argmax-training.svg
	/usr/bin/python3 examples/training/char_lm_demo.py --build-dir $(BUILD_DIR) \
	  --figure $(BUILD_DIR)/demos/char_lm-training.svg $(DEMO_ARGS)

# Ours against the anchors (PyTorch, scikit-learn, OpenBLAS sgemm) in one run
# on the same inputs; writes docs/benchmarks.md (bench/README.md). Not part of
# `make test`. BENCH_ARGS passes options to bench/run_all.py, e.g.
#   make bench BENCH_ARGS="--only gmm --gmm-n 10000"
BENCH_PACKAGES  := python3-torch python3-sklearn time
BENCH_WAIT_IDLE ?= 45
BENCH_RETRIES   ?= 2
BENCH_ARGS      ?=

bench: build
	@./tools/scripts/install-deps.sh $(BENCH_PACKAGES)
	cmake --build $(BUILD_DIR) -j $(JOBS) --target softmax-contract-bench || \
	  echo "make bench: softmax-contract-bench not built; going on without it"
	/usr/bin/python3 bench/run_all.py --build-dir $(BUILD_DIR) --wait-idle $(BENCH_WAIT_IDLE) \
	  --retries $(BENCH_RETRIES) --doc docs/benchmarks.md $(BENCH_ARGS)

# The tools, the runtime library and headers, the kernel support library and
# the CMake package (find_package(energy CONFIG) -> energy::runtime) under
# PREFIX; needs write access there (sudo make install for /usr/local).
PREFIX ?= /usr/local

install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD_DIR)
