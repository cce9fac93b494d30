# The two commands of the README: `make demo` runs the main job, `make test`
# runs the tests. Both set up what they need (Go modules download on first use).
GO ?= go

.PHONY: demo test bench fuzz check

demo:
	$(GO) run ./examples/fanout

test:
	$(GO) test -race -count=1 ./...

# Package micro-benchmarks; the side-by-side comparison with peer libraries
# lives in the separate bench/ module (see bench/README.md).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzBucket -fuzztime 60s .
	$(GO) test -run '^$$' -fuzz FuzzParseHeaders -fuzztime 60s .

check:
	test -z "$$(gofmt -l $$(git ls-files '*.go'))"
	$(GO) vet ./...
	cd bench && $(GO) vet ./...
