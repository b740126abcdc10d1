# allot: top-level entry points. The build itself is CMake + Ninja.
#   make            build (RelWithDebInfo) into build/
#   make demo       install missing packages, build, run the whole product on
#                   one machine: allotd, two emulated agents, a workload
#                   (ARGS=--exit-when-done: exit 0 when it has finished)
#   make demo-sim   the placement demo of allot-sim
#   make test       install missing packages, build, run every unit test
#   make test-data  checks against the real traces in ../shared/data
#   make test-asan  unit tests under AddressSanitizer + UBSan
#   make fuzz       libFuzzer (clang) on each parser, FUZZ_SECONDS (60) each
#   make bench      placement, scheduling-cycle and simulator benchmarks
#   make bench-cycle  one scheduling cycle at daemon scale (latency, memory)
#   make bench-api      allotd's durable submissions with 1, 8, 64 clients
#   make bench-api-pg   the same on SQLite and on PostgreSQL, side by side
#   make bench-cluster  allotd filling 1,024 emulated nodes with 5,000 jobs
#   make bench-agent    job start/stop latency through allotd and one agent
#   make bench-takeover allotd's restart/takeover time with 20,000 running jobs,
#                       SQLite and PostgreSQL side by side
#   make bench-shim     liballot-cuda.so's cost per launch and allocation
#   make bench-tenants  allot apply on 10,000 tenants (AGAINST=DIR: another build)
#   make check      clang-format, clang-tidy, cppcheck, source rules
#   make install    build, then install allot-sim into $(PREFIX)/bin
#                   (PREFIX=/usr/local by default; DESTDIR is honoured)

BUILD     ?= build
ASAN      ?= build-asan
JOBS      ?= $(shell nproc)
DATA      ?= $(abspath ../shared/data)
CMAKE_GEN  = cmake -S . -G Ninja -Wno-dev
PREFIX    ?= /usr/local

.PHONY: all build deps demo demo-sim test test-data test-asan fuzz bench bench-cycle bench-api bench-api-pg bench-cluster bench-agent bench-takeover bench-shim bench-tenants check format install clean

all: build

deps:
	@./scripts/install-deps

$(BUILD)/build.ninja:
	@$(CMAKE_GEN) -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: $(BUILD)/build.ninja
	@ninja -C $(BUILD) -j$(JOBS) --quiet

demo: deps build
	@python3 scripts/demo.py --build $(BUILD) $(ARGS)

demo-sim: deps build
	@$(BUILD)/allot-sim demo

test: deps build
	@cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

test-data: deps build
	@./tests/data-checks.sh $(BUILD) $(DATA)

test-asan: deps
	@$(CMAKE_GEN) -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DALLOT_SANITIZE=ON >/dev/null
	@ninja -C $(ASAN) -j$(JOBS) --quiet
	@cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j$(JOBS)

# libFuzzer on a copy of each committed corpus (docs/fuzzing.md)
FUZZ         ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS  = jobspec tenants http cli_input sacct

fuzz: deps
	@command -v clang >/dev/null || { echo "make fuzz needs clang" >&2; exit 1; }
	@CC=clang $(CMAKE_GEN) -B $(FUZZ) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DALLOT_FUZZ=ON >/dev/null
	@ninja -C $(FUZZ) -j$(JOBS) --quiet $(addprefix fuzz-,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
		rm -rf $(FUZZ)/corpus/$$t; mkdir -p $(FUZZ)/corpus/$$t $(FUZZ)/artifacts/$$t; \
		cp tests/fuzz/corpus/$$t/* $(FUZZ)/corpus/$$t/; \
		echo "fuzz-$$t: $(FUZZ_SECONDS) s"; \
		if ! $(FUZZ)/fuzz-$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -close_fd_mask=2 \
			-artifact_prefix=$(FUZZ)/artifacts/$$t/ $(FUZZ)/corpus/$$t >$(FUZZ)/fuzz-$$t.log 2>&1; then \
			tail -n 40 $(FUZZ)/fuzz-$$t.log; \
			echo "fuzz-$$t failed: the input is in $(FUZZ)/artifacts/$$t/ (docs/fuzzing.md)" >&2; \
			exit 1; \
		fi; \
		grep -E '^#[0-9]+' $(FUZZ)/fuzz-$$t.log | tail -n 1; \
	done
	@echo "New inputs are in $(FUZZ)/corpus/TARGET. To keep those that add coverage:"
	@echo "  $(FUZZ)/fuzz-TARGET -merge=1 tests/fuzz/corpus/TARGET $(FUZZ)/corpus/TARGET"

bench: deps build
	@$(BUILD)/bench-placement
	@$(BUILD)/bench-cycle --config tuned
	@$(BUILD)/bench-cycle --config lean
	@$(BUILD)/bench-api
	@$(BUILD)/bench-cluster
	@python3 bench/agent.py --build $(BUILD)
	@if [ -d $(DATA)/openb ]; then ./bench/fill.sh $(BUILD) $(DATA); fi

bench-cycle: deps build
	@$(BUILD)/bench-cycle --config tuned
	@$(BUILD)/bench-cycle --config lean

bench-api: deps build
	@$(BUILD)/bench-api

# the same on SQLite and on PostgreSQL side by side (a throwaway server)
bench-api-pg: deps build
	@python3 scripts/pg_sandbox.py -- $(BUILD)/bench-api --pg env

bench-cluster: deps build
	@$(BUILD)/bench-cluster

bench-agent: deps build
	@python3 bench/agent.py --build $(BUILD)

# SQLite, then a throwaway PostgreSQL server: one line each
bench-takeover: deps build
	@python3 bench/takeover.py --build $(BUILD)
	@python3 bench/takeover.py --build $(BUILD) --pg sandbox

bench-shim: deps build
	@$(BUILD)/bench-shim

# allot apply on a tree of 10,000 tenants (AGAINST=DIR: another build beside it)
bench-tenants: deps build
	@python3 bench/tenants.py --build $(BUILD) $(if $(AGAINST),--against $(AGAINST))

check: deps build
	@./scripts/check-source
	@clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')
	@cppcheck --quiet --error-exitcode=1 --enable=warning,portability \
		--suppress=missingIncludeSystem --inline-suppr --include=scripts/cppcheck-defs.h \
		-Iinclude -Isrc/sim src
	@clang-tidy --quiet -p $(BUILD) $$(git ls-files 'src/*.c') 2>/dev/null

install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN)
