# The entry points of allocbench. Each target installs what it needs when it can
# (.ci/deps.sh) and configures the build on first use.
#   make          configure and build into build/
#   make test     build, then run every test (GPU tests skip where no GPU is usable)
#   make bench    build, run the benchmark matrix on --device auto, draw the figures
#   make plots    redraw the figures from the CSVs in results/latest
#   make clean    remove the build
# SANITIZE=1 builds into build-sanitize with AddressSanitizer and UBSan.

SANITIZE ?= 0
ifeq ($(SANITIZE),1)
BUILD ?= build-sanitize
CMAKE_FLAGS += -DAB_SANITIZE=ON
else
BUILD ?= build
endif
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
RESULTS ?= results/latest

.PHONY: all build test bench plots clean deps-build deps-bench

all: build

deps-build:
	@.ci/deps.sh build

deps-bench:
	@.ci/deps.sh bench

$(BUILD)/CMakeCache.txt: | deps-build
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: deps-build $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

bench: deps-bench build
	@mkdir -p $(RESULTS)
	@for s in $$($(BUILD)/allocbench list --strategies); do \
	  $(BUILD)/allocbench run -w random -s $$s --device auto --out $(RESULTS) --format csv --quiet | tail -n 1 || exit 1; \
	done
	@echo "results in $(RESULTS)/summary.csv"

plots:
	@echo "no figures yet"

clean:
	rm -rf build build-sanitize
