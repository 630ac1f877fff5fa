# Thin wrapper over CMake. `make test` works on a fresh machine: it installs the Debian packages,
# configures, builds and runs every CPU test. `make test-asan` does the same under
# AddressSanitizer + UndefinedBehaviorSanitizer.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps configure build test test-asan demo bench format clean

all: build

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
	  -DMIXPREC_SANITIZE=address,undefined -DMIXPREC_BUILD_BENCH=OFF -DMIXPREC_BUILD_EXAMPLES=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS)

# The training demo (mixprec compare on Fashion-MNIST) arrives with the training issue; until then
# this runs the core-engine example: a float16-compute / float32-master-weights custom loop.
demo: build
	./$(BUILD)/examples/core_demo

bench: build
	./$(BUILD)/bench/cpu_ops_bench --json bench/results/cpu-ops.json

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
