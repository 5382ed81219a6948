# The entry points of allocbench. Each target installs what it needs when it can
# (.ci/deps.sh) and configures the build on first use.
#   make          configure and build into build/
#   make test     build, then run every test (GPU tests skip where no GPU is usable)
#   make bench    build, run the benchmark matrix and the micro-benchmarks on --device auto
#                 into RESULTS (default results/latest), then draw the figures and write
#                 RESULTS/report.html, the page of them all (allocbench report); it starts
#                 from an empty RESULTS: what was there is moved to RESULTS.<date> (.<date>.N when
#                 that name is taken: nothing is moved into or onto another folder)
#                 (make fresh-results, its first step)
#   make plots    redraw the figures from the CSVs in RESULTS
#   make fuzz     build the fuzz targets with clang and libFuzzer into build-fuzz and fuzz each
#                 for FUZZ_SECONDS (default 10) from its corpus (tests/fuzz/README.md)
#   make soak     every strategy through SOAK_EVENTS (default 1000000) events of each soak
#                 workload with 1% of device calls failing, SOAK_SEEDS (default 3) fault seeds
#                 (tests/strategies/soak_test.c; `make test` runs a short one)
#   make install  build, then install into PREFIX (default /usr/local; DESTDIR is honoured):
#                 bin/allocbench, bin/allocbench_micro, lib/allocbench/record (the hook of
#                 `allocbench record`), lib/allocbench/plugins, lib/allocbench/plots,
#                 share/allocbench/traces (the micro-benchmarks' default trace)
#   make clean    remove the builds
# SANITIZE=1 builds into build-sanitize with AddressSanitizer and UBSan.
# MATRIX_FLAGS (e.g. --quick) and MICRO_FLAGS (e.g. --benchmark_filter=random) are passed on.

SANITIZE ?= 0
PREFIX ?= /usr/local
# A quiet build: progress, warnings and errors; no directory chatter from the makes that cmake
# runs, and cmake's configure messages only from NOTICE up (the one line of what was found).
MAKEFLAGS += --no-print-directory
QUIET_CMAKE = -DCMAKE_MESSAGE_LOG_LEVEL=NOTICE
ifeq ($(SANITIZE),1)
BUILD ?= build-sanitize
CMAKE_FLAGS += -DAB_SANITIZE=ON
else
BUILD ?= build
endif
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
RESULTS ?= results/latest
MATRIX_FLAGS ?=
MICRO_FLAGS ?=
FUZZ_SECONDS ?= 10
FUZZ_TARGETS ?=
SOAK_EVENTS ?= 1000000
SOAK_SEEDS ?= 3

.PHONY: all build test install bench fresh-results plots fuzz soak clean deps-build deps-bench deps-fuzz

all: build

deps-build:
	@.ci/deps.sh build

deps-bench:
	@.ci/deps.sh bench

deps-fuzz:
	@.ci/deps.sh fuzz

$(BUILD)/CMakeCache.txt: | deps-build
	cmake -S . -B $(BUILD) $(QUIET_CMAKE) $(CMAKE_FLAGS)

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

fresh-results:
	@if [ -n "$$(ls -A $(RESULTS) 2>/dev/null)" ]; then \
	  old=$(RESULTS).$$(date +%Y%m%d-%H%M%S); n=0; base=$$old; \
	  while [ -e "$$old" ] || [ -L "$$old" ]; do n=$$((n + 1)); old=$$base.$$n; done; \
	  mv -T $(RESULTS) $$old && echo "make bench: earlier results moved to $$old"; \
	fi

bench: deps-bench build fresh-results
	$(BUILD)/allocbench matrix --device auto --out $(RESULTS) $(MATRIX_FLAGS)
	@if [ -x $(BUILD)/allocbench_micro ]; then \
	  echo "$(BUILD)/allocbench_micro --device auto --out $(RESULTS) $(MICRO_FLAGS)"; \
	  $(BUILD)/allocbench_micro --device auto --out $(RESULTS) $(MICRO_FLAGS) || exit 1; \
	else \
	  echo "make bench: no micro-benchmarks (Google Benchmark was not found: sudo apt-get install -y libbenchmark-dev)"; \
	fi
	$(BUILD)/allocbench report $(RESULTS)

plots:
	@ALLOCBENCH=$(BUILD)/allocbench plots/draw.sh $(RESULTS)

soak: build
	$(BUILD)/tests/soak_test --events=$(SOAK_EVENTS) --seeds=$(SOAK_SEEDS)

fuzz: deps-fuzz
	@command -v clang >/dev/null || { echo "make fuzz: needs clang and libFuzzer: sudo apt-get install -y clang libclang-rt-dev" >&2; exit 1; }
	@[ -f build-fuzz/CMakeCache.txt ] || cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DAB_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS)
	tests/fuzz/run.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf build build-sanitize build-fuzz
