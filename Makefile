# Aileron: build, run and test. `make run` and `make test` are all a fresh
# machine needs (see README.md).
GO      ?= go
BIN     ?= bin/aileron
# Stamp the commit into the binary (aileron version) when this is a git
# checkout; a tarball builds without it.
BUILDFLAGS ?= -trimpath $(shell git rev-parse --git-dir >/dev/null 2>&1 && echo -buildvcs=auto || echo -buildvcs=false)

.PHONY: build run test test-deps bench soak lint fuzz demo clean

build:
	$(GO) build $(BUILDFLAGS) -o $(BIN) ./cmd/aileron

# Starts the daemon on the embedded defaults (state in $$AILERON_HOME or ~/.aileron).
run: build
	./$(BIN) daemon

# Installs what the tests need (Debian packages via apt-get when missing),
# then runs every test, fuzz seed corpora included, under the race detector.
test: test-deps
	$(GO) vet ./...
	GO=$(GO) bash scripts/test.sh

test-deps:
	bash scripts/test-deps.sh

# Throughput and latency, direct vs through the proxy (and vs mitmdump when
# installed), printed as one table of ratios.
bench: build
	bash scripts/bench.sh

# Mixed HTTP/1.1 and HTTP/2 traffic (allowed with a credential injected,
# denied, held for approval) for SOAKTIME; fails if the daemon's
# goroutines, threads, descriptors or resident memory grow.
SOAKTIME ?= 10m
soak: build
	$(GO) build -o bin/aileron-bench ./bench
	./bin/aileron-bench --aileron $(BIN) --soak $(SOAKTIME)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Runs every fuzz target of the module (found by name, so none is missed)
# for FUZZTIME each (default 30s).
FUZZTIME ?= 30s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash scripts/fuzz.sh

# An offline walk-through on loopback (see README.md): a key added on the
# wire that the agent never holds, a denial, an approval held and sent
# once, the audit trail read and verified. Needs only Go;
# examples/demo/demo_test.go runs it.
demo: build
	bash examples/demo/run.sh

clean:
	rm -rf bin
