# Quick start:  make plan   (install missing packages, build, run the planner)
#               make test   (build and run every test)
# CI (.ci/run) also runs `make sanitize`: the suite under ASan + UBSan and a
# short run of every fuzz target. `make fuzz` fuzzes for long (FUZZ_SECONDS).
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PACKAGES = cmake ninja-build g++ make libboost-graph-dev nlohmann-json3-dev libcli11-dev libeigen3-dev \
           doctest-dev libopenmpi-dev openmpi-bin libbenchmark-dev clang libclang-rt-dev chromium python3 python3-yaml
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# A new build folder is configured for Ninja: unlike CMake's Makefiles it
# compiles a target's files while the libraries it links are still being
# built, and checks an up-to-date build at once. A folder already configured
# keeps its generator (cmake refuses to switch one).
GENERATOR = $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja)

SAN_BUILD ?= build-sanitize
FUZZ_SECONDS ?= 600
SMOKE_SECONDS ?= 10
# The sanitized suite is the whole suite: every test the Release one runs,
# foldbench's MPI cases and the calibration loop under mpirun, the trainer
# exports parsed by Python and the report drawn by chromium included. CI's
# budget is 40 minutes on 2 cores, so the tests are cut to what each checks
# (measured sanitized on 2 cores): foldbench's cases run 2 ranks where the
# world does not matter and one timed iteration where the data is the point
# (doc/validate.md "Tests"; the real-GEMM dispatch at --max-seq 16, 39 s);
# cli_trainer_exports checks each trainer and model on one of its two
# clusters in turn (221 s; 559 s with both); cli_mutation_test runs one
# mutant in four; cli_calibrate_e2e runs alone as in Release (96 s).
# SAN_CTEST_ARGS passes more to ctest (e.g. -R or -E to pick tests).
SAN_CTEST_ARGS ?=
# Open MPI keeps allocations alive to exit: suppressed by name, leak
# detection stays on for everything else.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1 \
          UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
          LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizer/lsan.supp:print_suppressions=0

.PHONY: plan test build deps bench clean sanitize sanitize-build fuzz

plan: build
	$(BUILD)/foldplan plan

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

build: deps
	cmake -S . -B $(BUILD) $(call GENERATOR,$(BUILD)) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# Installs only the Debian packages that are missing.
deps:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# One clang build serves the sanitized suite and the fuzz targets.
sanitize-build: deps
	CXX=clang++ cmake -S . -B $(SAN_BUILD) $(call GENERATOR,$(SAN_BUILD)) -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only" -DFOLDPLAN_FUZZ=ON -DFOLDPLAN_BUILD_BENCH=OFF
	cmake --build $(SAN_BUILD) -j $(JOBS)

sanitize: sanitize-build
	cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) $(SAN_CTEST_ARGS)
	$(SAN_ENV) fuzz/run.sh $(SAN_BUILD) $(SMOKE_SECONDS) $(JOBS)

fuzz: sanitize-build
	$(SAN_ENV) fuzz/run.sh $(SAN_BUILD) $(FUZZ_SECONDS) $(JOBS)

bench: build
	for b in $(BUILD)/*_bench; do $$b; done

clean:
	rm -rf $(BUILD)
