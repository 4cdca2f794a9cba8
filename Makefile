# fakepds: `make run` starts a PDS on localhost, `make test` runs the tests.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
ADDR ?= localhost:2583
PLC_ADDR ?= localhost:2582
FIXTURES ?= fixtures/social/social.json

.PHONY: run test test-short bench lint

run: ## a PDS on $(ADDR) (PLC on $(PLC_ADDR)) with $(FIXTURES) until Ctrl-C; prints its JSON line first; data dir temporary unless HARNESS_PDS_DIR
	$(GO) run ./harness/cmd/fakepds serve --addr $(ADDR) --plc-addr $(PLC_ADDR) --fixtures $(FIXTURES)

test: ## every test, with the race detector (and pds/jetstream/external, a module of its own)
	$(GO) test -race ./...
	cd pds/jetstream/external && $(GO) test -race ./...

test-short: ## the quick subset
	$(GO) test -short ./...

bench: ## every benchmark; see docs/perf.md for how the figures there were made
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: fuzz
FUZZTIME ?= 30s
fuzz: ## every fuzz target for FUZZTIME each (default 30s), one after another; crashers land in testdata/fuzz/ (scripts/fuzz.sh)
	FUZZTIME=$(FUZZTIME) GO=$(GO) scripts/fuzz.sh

lint: ## gofmt, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	cd pds/jetstream/external && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./...

.PHONY: conformance
conformance: ## the conformance suite on fakepds, the npm reference PDS and (given a Docker engine) the official image; report in docs/conformance.md
	scripts/reference-pds/install.sh
	HARNESS_PDS_BACKEND=reference $(GO) test ./harness/conformance -count=1 -v -backends=all -report=$(CURDIR)/docs/conformance.md

.PHONY: bench-compare
BENCH_COMPARE_FLAGS ?=
bench-compare: ## fakepds beside the npm reference PDS: one client, alternating rounds, ratios and the client's floor (harness/cmd/benchcompare; flags in BENCH_COMPARE_FLAGS, e.g. -rounds 3 -big -growth); output goes in docs/perf.md
	scripts/reference-pds/install.sh
	$(GO) run ./harness/cmd/benchcompare $(BENCH_COMPARE_FLAGS)

.PHONY: soak
soak: ## the reliability tests full size (crash, load, concurrency, stalled clients; minutes): the figures in docs/reliability.md
	FAKEPDS_SOAK=1 $(GO) test ./internal/reliability -count=1 -v -timeout 60m
	FAKEPDS_SOAK=1 $(GO) test ./pds ./pds/firehose -run '^TestStalled' -count=1 -v -timeout 20m
