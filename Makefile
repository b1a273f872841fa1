# costlab: build, run every lab, test. Release builds only (the target/ dir is built for it).

CARGO ?= cargo
COSTLAB := ./target/release/costlab
# Extra options for `make run`, e.g. make run RUN_ARGS="--labs mem,syscall --report /tmp/r"
RUN_ARGS ?=

.PHONY: all build labs run test clippy fmt clean-report

all: build

build:
	$(CARGO) build --release

# What the labs need besides the binary: the gc lab's Go program, when it is there.
labs:
	@if [ -d gcbench ]; then \
		if command -v go >/dev/null 2>&1; then \
			(cd gcbench && go build -o gcbench .); \
		else \
			echo "make: no Go toolchain; the gc lab will be skipped (apt-get install -y golang-go)"; \
		fi; \
	fi

run: build labs
	$(COSTLAB) run $(RUN_ARGS)

# Tests store their runs in a throwaway history, never the user's.
test:
	COSTLAB_DB=$${COSTLAB_DB:-$$(mktemp -d)/test-history.db} $(CARGO) test --release
	@if [ -d gcbench ]; then cd gcbench && go test ./...; fi

clippy:
	$(CARGO) clippy --release --all-targets -- -D warnings

fmt:
	$(CARGO) fmt

clean-report:
	rm -rf costlab-report
