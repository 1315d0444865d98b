# Quick start:  make plan   (install missing packages, build, run the planner)
#               make test   (build and run every test)
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
PACKAGES = cmake g++ make libboost-graph-dev nlohmann-json3-dev libcli11-dev libeigen3-dev \
           doctest-dev libopenmpi-dev openmpi-bin libbenchmark-dev
SUDO = $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: plan test build deps bench clean

plan: build
	$(BUILD)/foldplan plan

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# Installs only the Debian packages that are missing.
deps:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

bench: build
	for b in $(BUILD)/*_bench; do $$b; done

clean:
	rm -rf $(BUILD)
