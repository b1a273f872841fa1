# costlab: build, run every lab, test. Release builds only (the target/ dir is built for it).

CARGO ?= cargo
COSTLAB := ./target/release/costlab
# Extra options for `make run`, e.g. make run RUN_ARGS="--labs mem,syscall --report /tmp/r"
RUN_ARGS ?=

.PHONY: all deps build labs run test clippy fmt clean-report

all: build

build:
	$(CARGO) build --release

# What the labs need besides the binary: the gc lab's Go program, all its builds (plain,
# without bounds checks, layout-shifted), and its Java program (javac), into target/gcbench/.
# Nothing is fetched; without Go the gc lab is reported as skipped, without a JDK its Java
# runtimes are.
labs: build
	@if command -v go >/dev/null 2>&1; then \
		$(COSTLAB) gc build; \
	else \
		echo "make: no Go toolchain; the gc lab will be skipped (apt-get install -y golang-go)"; \
	fi
	@if ! command -v javac >/dev/null 2>&1; then \
		echo "make: no JDK; costlab gc --runtime java-* will be skipped (apt-get install -y default-jdk-headless)"; \
	fi

run: build labs
	$(COSTLAB) run $(RUN_ARGS)

# What the tests and bench scripts need that a fresh machine may lack (chromium, sysbench, ...).
deps:
	./scripts/install-deps.sh

# Every test, Rust and Go, after the checks ARCHITECTURE.md promises (formatting, clippy with
# warnings denied, which holds `undocumented_unsafe_blocks`). Tests store their runs in a
# throwaway history, never the user's.
test: deps
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	COSTLAB_RETRY_BUDGET=0 COSTLAB_DB=$${COSTLAB_DB:-$$(mktemp -d)/test-history.db} $(CARGO) test --workspace --release
	@if [ -d gcbench ]; then cd gcbench && go test ./...; fi

clippy:
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

clean-report:
	rm -rf costlab-report
