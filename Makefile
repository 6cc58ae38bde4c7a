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
                doctest-dev libopenblas-dev libzstd-dev python3

.PHONY: all deps build test demo bench clean

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

test: build
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS)

demo: build
	@./tools/scripts/demo.sh $(BUILD_DIR)

bench: build
	@echo "bench: no benchmarks yet (they arrive with code generation, see docs/benchmarks.md)"

clean:
	rm -rf $(BUILD_DIR)
