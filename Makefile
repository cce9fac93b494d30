# The two commands of the README: `make demo` runs the main job, `make test`
# runs the tests. Both set up what they need (Go modules download on first use).
GO ?= go

.PHONY: demo test bench fuzz check redis-server

demo:
	$(GO) run ./examples/fanout

# Packages run in parallel. The few real-time tests (loopback examples, four
# OS processes sharing a Redis quota) bound what they measure loosely enough
# for a loaded two-core machine, and the processes start together once all
# are ready; everything else runs in virtual time (testing/synctest).
test: redis-server
	$(GO) test -race -count=1 ./...
	cd redisstore && $(GO) test -race -count=1 ./...

# The redisstore tests start their own redis-server on free loopback ports.
# Install Debian's package when it is missing (as root), and stop the system
# service the package may start: the tests do not use it. Without root, say
# how to install it; the Redis tests then skip (outside CI, where they fail).
redis-server:
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing redis-server for the redisstore tests"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null && \
	    { service redis-server stop >/dev/null 2>&1 || true; }; \
	  else \
	    echo "redis-server is missing, the redisstore tests will skip. Install it with" >&2; \
	    echo "  sudo apt-get install -y redis-server   (Debian/Ubuntu), or  brew install redis   (macOS)" >&2; \
	  fi; }

# Package micro-benchmarks; the side-by-side comparison with peer libraries
# lives in the separate bench/ module (see bench/README.md).
bench: redis-server
	$(GO) test -run '^$$' -bench . -benchmem ./...
	cd redisstore && $(GO) test -run '^$$' -bench . -benchmem ./...
	cd bench && $(GO) run ./cmd/compare

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzBucket -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 60s ./internal/header

check:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
	cd otel && $(GO) vet ./...
	cd redisstore && $(GO) vet ./...
