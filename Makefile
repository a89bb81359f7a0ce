# snapflow developer tasks. `make test` installs what the tests need.
SHELL := /bin/bash
GO ?= go
TOOLS := $(CURDIR)/.tools

.PHONY: test proto vet

test:
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

# proto regenerates messages/*.pb.go (protoc from Debian's protobuf-compiler,
# protoc-gen-go as a go tool pinned in go.mod).
proto:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler" >&2; exit 1; }
	protoc --plugin=protoc-gen-go="$$($(GO) tool -n protoc-gen-go)" --go_out=. --go_opt=paths=source_relative messages/*.proto
