# make run   — install missing packages, build, run the embedded default experiment
# make test  — install missing packages, build, run the test suite (ctest)
# make test-asan — the whole suite built with AddressSanitizer + UBSan (build-asan/)
# make fuzz  — libFuzzer targets (clang), FUZZ_SECONDS each (build-fuzz/); make fuzz-ci: 20 s each
# make test-asan-ci — CI's sanitizer subset: the torch-free test binaries of that same clang build
#              (ASan + UBSan), so CI compiles the torch-free code once for both
# make test-torch2 — the second toolchain: PyPI torch 2.x (CUDA build) in a venv under
#              ~/.cache/ears-bench (scripts/setup.sh --torch2), everything built against it with the
#              CUDA Toolkit (build-torch2/, CUDA code paths and NVTX included), the whole suite plus
#              the `parity` tests against transformers / tokenizers
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

FUZZ_SECONDS ?= 60
ASAN_TESTS ?= .
ASAN_TARGETS ?= all
UBSAN_ENV = UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

.PHONY: setup build run test test-asan test-asan-ci build-fuzz fuzz fuzz-ci build-torch2 test-torch2 clean

setup:
	@scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

run: build
	scripts/quickstart.sh $(BUILD)/ears-bench

# ctest -j: most test binaries keep one core busy (CLI processes, small models), so they run
# side by side; none shares a file with another.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# ASAN_TESTS: a ctest -R regex, ASAN_TARGETS: what to build. Leaks are not reported: LibTorch
# keeps global allocations alive until exit. -O1 -g1 (line tables only): an ASan build of the
# LibTorch translation units with full debug info takes several times longer.
test-asan: setup
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -g1" \
	  -DEARS_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS) --target $(ASAN_TARGETS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 $(UBSAN_ENV) ctest --output-on-failure -j $(JOBS) -R '$(ASAN_TESTS)'

# The clang build of the torch-free code (EARS_FUZZ in CMakeLists.txt): ASan + UBSan, the
# libFuzzer targets and the torch-free test binaries (the suite it registers). -g1: line tables, all
# the sanitizers' reports print (full -g made a TU ~16 % slower to build); without the precompiled
# headers (EARS_PCH), so a source that misses an include still fails to compile here.
build-fuzz:
	@scripts/setup.sh --fuzz
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DEARS_FUZZ=ON -DEARS_PCH=OFF
	cmake --build build-fuzz -j $(JOBS)

# Torch-free, so leaks are reported here.
test-asan-ci: build-fuzz
	cd build-fuzz && ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 $(UBSAN_ENV) ctest --output-on-failure -j $(JOBS)

fuzz: build-fuzz
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

fuzz-ci:
	$(MAKE) fuzz FUZZ_SECONDS=20

# The CUDA LibTorch inside the pinned pip torch; TORCH_CUDA_ARCH_LIST (default in CMakeLists.txt)
# spares configure a GPU probe.
build-torch2:
	@venv=$$(scripts/setup.sh --torch2) && \
	cmake -S . -B build-torch2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DEARS_NVTX=ON \
	  -DCMAKE_PREFIX_PATH="$$($$venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
	  -DEARS_PARITY_PYTHON="$$venv/bin/python" $(CMAKE_FLAGS) && \
	cmake --build build-torch2 -j $(JOBS)

# pip's LibTorch does its float32 matmuls in MKL, whose OpenMP team spin-waits after every sgemm,
# however small: two test binaries side by side, two spinning threads each on two cores, took the
# suite 477 s (Xeon, 2 vCPUs); with one intra-op thread per binary, 202 s. The CLI processes the
# tests start still set their own thread count, ThreadsGuard tests still take 2, and `make test`
# runs the suite with LibTorch's default (every core).
test-torch2: build-torch2
	cd build-torch2 && OMP_NUM_THREADS=1 ctest --output-on-failure -j $(JOBS)

clean:
	rm -rf $(BUILD) build-asan build-fuzz build-torch2
