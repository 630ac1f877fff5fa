# Thin wrapper over CMake. `make test` works on a fresh machine: it installs the Debian packages,
# configures, builds and runs every test (GPU tests report skipped without a GPU). `make test-asan`
# runs the unit and op tests under AddressSanitizer + UndefinedBehaviorSanitizer.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all deps configure build test test-asan consumer debs demo bench bench-mlp format clean

all: build

deps:
	./scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# The library under the sanitizers through its unit and op tests (every op, layer, optimizer,
# reader and the loss scaling) and the fuzz corpora's replays; the CLI and the long training runs
# are left to `make test`.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g" \
	  -DMIXPREC_SANITIZE=address,undefined -DMIXPREC_CUDA=OFF -DMIXPREC_BUILD_BENCH=OFF \
	  -DMIXPREC_BUILD_EXAMPLES=OFF -DMIXPREC_BUILD_TOOLS=OFF $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j$(JOBS) --target mixprec_unit_tests mixprec_op_tests \
	  mixprec_tfevents_sample mixprec_fuzz_replays
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure --no-tests=error -j$(JOBS) -L "unit|ops"

# mixprec used from another project: static and shared installs in temporary prefixes,
# examples/consumer built with find_package and pkg-config, and run (a CI stage, .ci/run).
consumer: deps
	JOBS=$(JOBS) scripts/ci-consumer.sh

# Debian packages libmixprec, libmixprec-dev, mixprec in build-deb/.
debs: deps
	JOBS=$(JOBS) scripts/build-debs.sh

# Seed 001's comparison on Fashion-MNIST: the 784-512-512-10 MLP trained 5 epochs under each policy
# (CPU defaults: --units 512 --batch-size 256), then one table. DEMO_ARGS adds options.
demo: build
	./$(BUILD)/tools/mixprec/mixprec compare --model mlp --dataset fashion_mnist \
	  --policies float32,mixed_float16,mixed_bfloat16 $(DEMO_ARGS)

bench: build
	./$(BUILD)/bench/cpu_ops_bench --json bench/results/cpu-ops.json

# mixprec vs PyTorch 1.13 CPU (Debian python3-torch) on the seed MLP -> bench/results/cpu-mlp.json
bench-mlp: build
	BUILD=$(BUILD) scripts/bench-cpu-mlp.sh

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
