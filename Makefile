# snapflow developer tasks. `make test` installs what the tests need.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools

# The MinIO server that the tests start (it runs as a separate process and
# is never linked). MINIO_BIN if set, else `minio` on PATH, else a copy in
# $(TOOLS)/bin that `go install` builds once (about 4 minutes) and reuses.
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
MINIO_TOOL := $(TOOLS)/bin/minio
ifeq ($(strip $(MINIO_BIN)),)
MINIO_BIN := $(or $(shell command -v minio 2>/dev/null),$(MINIO_TOOL))
endif

# `make minio` serves on loopback with these root credentials.
MINIO_ROOT_USER ?= snapflow
MINIO_ROOT_PASSWORD ?= snapflow-secret
MINIO_DEMO_URL := s3://snapflow/demo?endpoint=127.0.0.1:9000&secure=false&create=true

.PHONY: test test-loaded soak proto vet minio-bin minio browser sizes

test: sizes $(MINIO_BIN) browser
	MINIO_BIN="$(MINIO_BIN)" $(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run '^($(IN_PROCESS_CLUSTER_TESTS))$$' ./actors/

# IN_PROCESS_CLUSTER_TESTS run a coordinator and workers in one test process.
# protoactor-go's remote races with itself when several nodes share a process
# (internal/racedetect), so under -race they skip (actors' inProcessCluster);
# `make test` runs them again without the race detector so that they run.
IN_PROCESS_CLUSTER_TESTS := TestClusterEventTimeExact|TestClusterInProcessExact|TestClusterLogAttributesOnce|TestClusterRescaleFromSavepoint|TestClusterWorkerLeavesInProcess|TestLostWatermarkDetected

# test-loaded runs the suite (`make test`) while CPU burners hold every core,
# two per core (BURNERS to change their number), to prove that no test
# depends on the machine's speed. The burners are killed when it ends, pass
# or fail, and each one also stops by itself once the recipe's shell is gone.
# PKGS runs `go test -race -count=1 $(PKGS)` instead of the whole suite, e.g.
# `make test-loaded PKGS=./bench/...`.
BURNERS ?= $(shell echo $$(( $$(nproc) * 2 )))
PKGS ?=

test-loaded: $(MINIO_BIN) browser
	@burners=(); \
	stop() { kill "$${burners[@]}" 2>/dev/null; wait "$${burners[@]}" 2>/dev/null; }; \
	trap 'stop' EXIT; trap 'exit 130' INT TERM HUP; \
	for i in $$(seq $(BURNERS)); do \
		( while kill -0 $$$$ 2>/dev/null; do for j in {1..20000}; do :; done; done ) & burners+=($$!); \
	done; \
	echo "test-loaded: $(BURNERS) CPU burners on $$(nproc) cores"; \
	if [ -n "$(PKGS)" ]; then \
		MINIO_BIN="$(MINIO_BIN)" $(GO) test -race -count=1 $(PKGS); \
	else \
		$(MAKE) --no-print-directory test; \
	fi

# soak is the long fault-injection soak: every topology on the memory store
# and MinIO, 20ms checkpoints, at least 240 injected task failures; then the
# cluster event-time shape (6 workers SIGKILLed), the cluster shape, at least 50 node failures (workers SIGKILLed and SIGSTOPped,
# coordinators SIGKILLed and restarted) across processes, and at least 30
# network partitions cut in Linux network namespaces; then the model test of
# the state backends, 400 sequences of 150 operations on the heap and on disk
# (SNAPFLOW_MODEL_SEEDS and SNAPFLOW_MODEL_OPS change both). Replay a
# failing run with SNAPFLOW_SEED=<seed printed>.
soak: $(MINIO_BIN)
	SNAPFLOW_SOAK=full MINIO_BIN="$(MINIO_BIN)" $(GO) test -race -count=1 -timeout 60m -run '^TestSoak$$' -v ./actors/
	SNAPFLOW_SOAK=full $(GO) test -race -count=1 -timeout 30m -run '^TestClusterEventTime$$' -v ./internal/chaos/
	SNAPFLOW_SOAK=full $(GO) test -race -count=1 -timeout 30m -run '^(TestClusterSoak|TestPartitionSoak)$$' -v ./examples/cluster/
	SNAPFLOW_SOAK=full $(GO) test -race -count=1 -timeout 60m -run '^TestModelBackends$$' -v ./internal/dataflow/

vet:
	$(GO) vet ./...

# sizes fails when a file git tracks is over 1 MiB (MAX_FILE_BYTES): a
# binary or a build output committed by mistake downloads with every clone.
MAX_FILE_BYTES ?= 1048576

sizes:
	@if ! git rev-parse --git-dir >/dev/null 2>&1; then echo "sizes: not a git checkout, skipped"; exit 0; fi; \
	big=$$(git ls-files -z | xargs -0 stat -c '%s %n' 2>/dev/null | awk -v max=$(MAX_FILE_BYTES) '$$1 > max'); \
	if [ -n "$$big" ]; then echo "sizes: tracked files over $(MAX_FILE_BYTES) bytes:" >&2; echo "$$big" >&2; exit 1; fi

# browser installs Chromium, which the dashboard's browser test
# (actors/web) drives headless, through apt when none of $(BROWSERS) is on
# PATH (with `sudo -n` when not root). Where apt cannot install it, the
# test skips, and this only warns, unless CI=true: then both fail.
BROWSERS := chromium chromium-browser google-chrome

browser:
	@for b in $(BROWSERS); do command -v "$$b" >/dev/null 2>&1 && exit 0; done; \
	sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
	if command -v apt-get >/dev/null 2>&1; then \
		echo "browser: installing chromium with apt-get for the dashboard's browser test"; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium && \
		for b in $(BROWSERS); do command -v "$$b" >/dev/null 2>&1 && exit 0; done; \
	else echo "browser: no apt-get to install chromium with" >&2; fi; \
	if [ "$$CI" = true ]; then echo "browser: could not install chromium, and CI=true" >&2; exit 1; fi; \
	echo "browser: chromium is not installed: the dashboard's browser test will skip" >&2

# minio-bin installs the MinIO server into $(TOOLS)/bin unless it is there.
minio-bin: $(MINIO_TOOL)

ifneq ($(MINIO_BIN),$(MINIO_TOOL))
$(MINIO_BIN):
	@echo "MINIO_BIN=$@ does not exist; unset MINIO_BIN to use minio on PATH or $(MINIO_TOOL) (make minio-bin)" >&2; exit 1
endif

$(MINIO_TOOL):
	@echo "building the MinIO server into $@ (about 4 minutes, once)"
	GOBIN="$(TOOLS)/bin" $(GO) install github.com/minio/minio@$(MINIO_VERSION)

# minio runs a MinIO server in the foreground for a person to try snapflow
# with: API on 127.0.0.1:9000, console on 127.0.0.1:9001.
minio: $(MINIO_BIN)
	@mkdir -p "$(TOOLS)/minio-data"
	@echo "MinIO: API http://127.0.0.1:9000, console http://127.0.0.1:9001, data in $(TOOLS)/minio-data"
	@echo "In another shell:"
	@echo "  export AWS_ACCESS_KEY_ID=$(MINIO_ROOT_USER)"
	@echo "  export AWS_SECRET_ACCESS_KEY=$(MINIO_ROOT_PASSWORD)"
	@echo "and use the store URL (e.g. with --store):"
	@echo "  '$(MINIO_DEMO_URL)'"
	@echo "Stop the server with Ctrl-C."
	MINIO_ROOT_USER="$(MINIO_ROOT_USER)" MINIO_ROOT_PASSWORD="$(MINIO_ROOT_PASSWORD)" \
		exec "$(MINIO_BIN)" server --address 127.0.0.1:9000 --console-address 127.0.0.1:9001 "$(TOOLS)/minio-data"

# proto regenerates messages/*.pb.go (protoc from Debian's protobuf-compiler,
# protoc-gen-go as a go tool pinned in go.mod).
proto:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler" >&2; exit 1; }
	protoc --plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" --go_out=. --go_opt=paths=source_relative messages/*.proto
