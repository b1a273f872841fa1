# costlab: build, run every lab, test. Release builds only (the target/ dir is built for it).

CARGO ?= cargo
COSTLAB := ./target/release/costlab
# Extra options for `make run`, e.g. make run RUN_ARGS="--labs mem,syscall --report /tmp/r"
RUN_ARGS ?=

.PHONY: all deps build labs run test clippy fmt clean-report deb docs

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
	COSTLAB_RETRY_BUDGET=0 COSTLAB_DB=$${COSTLAB_DB:-$$(mktemp -d)/test-history.db} $(CARGO) test --workspace --release --no-fail-fast
	@if [ -d gcbench ]; then cd gcbench && go test ./...; fi
	$(MAKE) docs

# The Debian package: target/debian/costlab_<version>_amd64.deb (cargo-deb; scripts/deb.sh
# writes the man pages and completions it holds), then lintian on it: an error fails, and the
# tags it may still print are explained in contrib/debian/lintian-overrides.
deb: build
	./scripts/deb.sh
	@if command -v lintian >/dev/null 2>&1; then \
		lintian --fail-on error --suppress-tags-from-file contrib/debian/lintian-overrides target/debian/costlab_*_amd64.deb; \
	else \
		echo "make: no lintian; the package is not checked (apt-get install -y lintian)"; \
	fi

# The manual (an mdBook in docs/): built into docs/book/, then every link of it checked, offline.
MDBOOK ?= $(shell command -v mdbook || echo $(HOME)/.cargo/bin/mdbook)
docs:
	$(MDBOOK) build docs
	./scripts/check-links.py docs/book README.md ARCHITECTURE.md

clippy:
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

clean-report:
	rm -rf costlab-report
