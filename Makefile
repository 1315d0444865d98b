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
# Left out of the sanitized suite to keep CI under 20 minutes; the Release
# suite (make test) runs every one of them. Under ASan each MPI rank costs
# about a second of start-up and each foldplan run three times its Release
# time, and these tests are little more than such runs, on code that other
# tests run sanitized:
# - foldbench's real bf16 GEMM dispatch (minutes under ASan; its GEMM kernels
#   are covered by validate_expert_gemm_test);
# - the calibration loop end to end, cli_calibrate_e2e (calibrate, collective
#   and compare run sanitized in cli_calibrate_test and cli_compare_test,
#   foldbench's sweep in validate_foldbench_ok);
# - foldbench's refusals of a plan file, on every rank before any collective
#   (missing_groups, bad_plan, bad_tp_degree): validate_plan_input_test has
#   its reader refuse the same defects sanitized (and the plan fuzz target
#   feeds it); bad_ep_degree, the one that once overran a buffer, stays;
# - foldbench's flag refusals and --timeout values (bad_args,
#   timeout_values): flag parsing before any MPI call; validate_watchdog_test
#   runs the watchdog sanitized on the same timeout values;
# - a rank that hangs or dies (hang, timeout_off, rank_dies): what they check
#   is how soon the job ends, which ASan only stretches; the watchdog is
#   validate_watchdog_test's;
# - a corrupted element caught (corrupt): the collectives and their check
#   run sanitized in validate_foldbench_ok and _etp2, every element right;
# - foldplan validate under mpirun (cli_validate_launch): the command it
#   builds is cli_validate_command_test's, foldbench's run _ok's;
# - the trainer exports parsed by Python (cli_export_parse) and the report
#   drawn by chromium (cli_report_browser): they check the text foldplan
#   prints, the same in both builds, whose code runs sanitized in
#   planner_export_test, cli_golden_test and cli_report_test.
# Also, cli_mutation_test runs one mutant in four under ASan (it says so).
# SAN_CTEST_ARGS= runs everything.
SAN_CTEST_ARGS ?= -E '^(validate_foldbench_(gemm|bad_plan|bad_tp_degree|missing_groups|bad_args|timeout_values|hang|timeout_off|rank_dies|corrupt)|cli_(calibrate_e2e|validate_launch|export_parse|report_browser))$$'
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
