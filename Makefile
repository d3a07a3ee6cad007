# msgexchange — run `make` for the list of targets.
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(CURDIR)/bin/tools:$(PATH)
# The go command takes the toolchain the go.work and go.mod `toolchain`
# lines pin (a patched Go, R-K8) from the Go module proxy, whatever the
# machine's default (GOTOOLCHAIN=local ignores those lines).
export GOTOOLCHAIN := auto
GO ?= go
MODULES := $(shell $(GO) list -m -f '{{.Dir}}' 2>/dev/null)
TEST_TIMEOUT ?= 14m

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

# The version (the chart's appVersion), commit and commit time stamped into
# the binaries `make build` writes, so that `msgx -version`, `msgxctl
# version` and msgx_build_info name them in every build, not only the
# image's (R-N6). The machine's GOFLAGS=-buildvcs=false leaves the Go build
# info without VCS stamps, hence the linker flags.
VERSION ?= $(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' helm/msgexchange/Chart.yaml)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE ?= $(shell git log -1 --format=%cI 2>/dev/null)
STAMP := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.buildDate=$(BUILD_DATE)

build: ## build every binary into bin/, stamped with the version and commit
	@mkdir -p bin
	$(GO) build -ldflags "$(STAMP)" -o bin/msgx ./services/cmd/msgx
	$(GO) build -ldflags "$(STAMP)" -o bin/msgxctl ./services/cmd/msgxctl
	$(GO) build -o bin/devstack ./deploy/devstack

run: ## install and start PostgreSQL, MariaDB, Redis, the dev broker and all services; load samples; print the URL
	@bash scripts/run.sh

stop: ## stop what `make run` started (databases keep running)
	@bash scripts/stop.sh

deps: ## install and start PostgreSQL, MariaDB and Redis where missing
	@bash scripts/deps.sh

test: deps tools image-programs ## run every test (unit, integration, end-to-end, crash, bounded chaos); a missing database, tool or corpus fails it unless MSGX_TEST_ALLOW_SKIP=1
	$(MAKE) --no-print-directory -j4 test-race test-e2e test-norace helm-lint vuln vet-tags
	$(MAKE) --no-print-directory test-timed

# The image test (deploy/internal/ociimage) compiles msgx and msgxctl
# static (CGO_ENABLED=0, -trimpath), a build no other test shares. On a
# machine with a cold build cache, compiling them beside the parallel test
# jobs outran the test's 12 minutes ("compiling msgx for linux/amd64:
# signal: killed"); compiled once before the jobs start, with the image's
# flags, the test finds every package in the cache and only links.
image-programs:
	for p in msgx msgxctl; do CGO_ENABLED=0 GOFLAGS= $(GO) build -trimpath -buildvcs=false -o /dev/null ./services/cmd/$$p || exit 1; done

# The end-to-end package runs every service as its own process, built
# without the race detector, and holds the Kafka-protocol broker inside its
# test process. Under -race the detector would instrument only that broker
# and the harness — the code under test runs elsewhere — at about ten times
# the CPU (three of its tests: 204 s under -race, 15 s without, on two
# cores), so it runs without it; every other package runs under it.
E2E_PKG := msgexchange/services/e2e

# Packages whose own code starts no goroutine (a test checks it) run their
# tests without the race detector: it has nothing to find there, and it
# multiplies their CPU — the SIS decoder's heap- and time-bound tests of
# hostile 10 MiB messages (71 s of one core against 5 s), the chart's
# rendering and rule tests (46 s against 27 s), the image's gzip layers
# (38 s against 12 s) and the vulnerability scan's call graph (37 s
# against 9 s) — on a machine the whole test run keeps busy. Code of
# theirs that other packages call is still race-checked inside those
# packages' race-detecting binaries.
NORACE_SERVICES := ./internal/sis/
NORACE_DEPLOY := ./internal/charttest/ ./internal/ociimage/ ./internal/vulncheck/ ./internal/release/
NORACE_PKGS := $(patsubst ./%/,msgexchange/services/%,$(NORACE_SERVICES)) $(patsubst ./%/,msgexchange/deploy/%,$(NORACE_DEPLOY))

# The workspace's tests under the race detector, every package but the
# end-to-end one and NORACE_PKGS; make test runs the end-to-end tests (all but the timed
# ones), the chart lint and the vulnerability scan beside it (their lines
# among the tests' own, which stay live), then the timed tests alone. Three
# test binaries at a time on two cores: many integration tests mostly wait
# (an outage held for a minute, a lease's expiry, a server's restart), and
# with two the cores stood a third of the run idle (user+sys 24 of 36
# core-minutes).
RACE_PARALLEL ?= 3
test-race:
	$(GO) test -race -vet=all -count=1 -p $(RACE_PARALLEL) -timeout $(TEST_TIMEOUT) $$($(GO) list work | grep -vxF -e '$(E2E_PKG)' $(patsubst %,-e '%',$(NORACE_PKGS)))

test-norace: ## the tests of packages that start no goroutine, without the race detector (the SIS decoder, the chart, image, release and vulnerability-scan checks); make test runs them beside the race-detecting tests
	cd services && $(GO) test -vet=all -count=1 -timeout $(TEST_TIMEOUT) $(NORACE_SERVICES)
	cd deploy && $(GO) test -vet=all -count=1 -timeout $(TEST_TIMEOUT) $(NORACE_DEPLOY)

test-e2e: ## the end-to-end tests without the race detector (every service its own process), all but the timed ones; make test runs them beside the race-detecting tests
	cd services && $(GO) test -vet=all -count=1 -timeout $(TEST_TIMEOUT) -skip '^($(TIMED_TESTS))$$' ./e2e/

# Test files behind a build tag (the long chaos run, the rolling upgrade,
# the soak, the full release, `make run`'s test) are compiled by their own
# make targets only; vetting them in make test keeps a change to a shared
# helper from breaking one unseen (make upgrade-test stopped compiling so
# once, for a stop).
vet-tags: ## vet the test files behind build tags (chaos, upgrade, soak, release, runtest), so that make test fails when one no longer compiles
	cd services && $(GO) vet -tags chaos,upgrade,soak ./e2e/
	cd deploy && $(GO) vet -tags release,runtest ./internal/...

vuln: ## govulncheck every module against a pinned copy of the Go vulnerability database, offline (R-K8)
	bash scripts/vuln.sh

tools: ## build the test tools from the Go module proxy into bin/tools (promtool for the alert rule tests)
	bash scripts/promtool.sh >/dev/null

image: ## build the msgx OCI image (no Docker daemon, no base image pulled) into build/image: OCI layout, docker-load tarball, SBOM
	bash scripts/image.sh

release: ## signed release into build/release: image (cosign signature, SLSA provenance, CycloneDX SBOM attestations), msgxctl for linux/darwin × amd64/arm64, chart .tgz + .prov, SHA256SUMS(.sig); verified offline (MSGX_RELEASE_KEY: the operator's key, see docs/release.md)
	bash scripts/release.sh

release-test: ## R-N6 full release run into a temporary directory, verified offline (by the project's verifier and by the cosign CLI) and broken one byte at a time (make test verifies a small fixture release)
	bash scripts/gotool.sh cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod $$(sed -n 's/^CYCLONEDX_GOMOD_VERSION=//p' scripts/release.sh) >/dev/null
	bash scripts/gotool.sh cosign github.com/sigstore/cosign/v2 github.com/sigstore/cosign/v2/cmd/cosign $$(sed -n 's/^COSIGN_VERSION=//p' scripts/release.sh) >/dev/null
	IMAGE_DEPS_ONLY=1 bash scripts/image.sh
	cd deploy && $(GO) test -tags release -count=1 -v -timeout 30m -run '^TestRelease_R_N6_FullRelease' ./internal/release/

helm-lint: ## lint and render the Helm chart (builds helm from the Go module proxy on first use)
	bash scripts/helm-lint.sh

test-unit: ## run only the tests that need nothing (no database, Redis, tool or corpus): -short skips the others
	$(GO) test -short -count=1 work

fuzz: ## fuzz the SIS decoder for 30s
	cd services && $(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=30s ./internal/sis/

chaos: deps ## R-H7/R-M1/R-M2 fault harness, long run: 3000 messages while 72 seeded faults (every kind: hangs and proxy faults — latency, bandwidth, black hole, reset — included) hit services, databases, Redis and the broker, a table per kind; then each proxy family on every path (make test runs a bounded 640/16: the twelve clean kinds and the four hangs)
	cd services && MSGX_CHAOS_GREY=1 MSGX_CHAOS_SEED=$${MSGX_CHAOS_SEED:-$$(date +%s%N)} MSGX_CHAOS_MESSAGES=$${MSGX_CHAOS_MESSAGES:-3000} MSGX_CHAOS_FAULTS=$${MSGX_CHAOS_FAULTS:-72} $(GO) test -tags chaos -race -count=1 -timeout 90m -run TestChaos -v ./e2e/

run-test: ## R-G1: `make run` in a copy of the working tree on this machine's loopback ports (8080, 8081, 9092, 9095 must be free), checked and stopped again
	cd deploy && $(GO) test -tags runtest -count=1 -v -timeout 30m -run '^TestRun_R_G1_' ./internal/runtest/

upgrade-test: deps ## R-M4 rolling upgrade: builds msgx of the last commit before the newest migration (MSGX_UPGRADE_FROM to choose), runs it under the chaos workload, migrates, replaces each old instance with a new one under load; prints the summary line
	bash scripts/upgrade-test.sh

bench-e2e: deps ## measure end-to-end latency (p50/p99) and throughput through every service as processes (~5 min)
	cd services && $(GO) test -count=1 -v -timeout 30m -run '^$$' -bench '^BenchmarkEndToEnd$$' -benchtime=1x ./e2e/

bench: deps ## R-J1…R-J5 benchmark suite on this machine (every service as a process; 15 to 45 min on 2 cores, most of it R-M5 (its daily job paced to a tenth of the time: R-M5 alone took 30 min on an AMD EPYC, docs/performance.md), whose year of history fills about 12 GB of PostgreSQL), after R-M3's drain after a broker and a MariaDB outage (2 min): prints the tables and writes docs/benchmarks.md
	cd services && MSGX_BENCH=full $(GO) test -count=1 -v -timeout 30m -run '^TestBench_R_M3_DrainAfterOutages$$' ./e2e/
	cd services && MSGX_BENCH=full $(GO) test -count=1 -v -timeout 90m -run '^TestBench_R_J1_R_J2_R_J3_R_J4_R_J5$$' ./e2e/

# The benchmark suite's test.
BENCH_TEST := TestBench_R_J1_R_J2_R_J3_R_J4_R_J5

# The tests that hold a timing to a bound (the benchmark suite at a tenth of
# its sizes, the board's first paint and update latency with 20,000
# flights). make test runs them by themselves after every other test, so
# that what they measure is the system and not the race-detecting tests of
# the other packages running beside them on the same two cores.
TIMED_TESTS := $(BENCH_TEST)|TestBench_R_M3_DrainAfterOutages|TestBoard_R_E3_TwentyThousandLiveFlightsStayResponsive

test-timed: deps ## the tests that hold timings to a bound (bench suite at a tenth of its sizes, R-M3's drain after 5 s outages, the 20,000-flight board), run alone; make test runs them last
	cd services && MSGX_BENCH=short $(GO) test -count=1 -v -timeout 10m -run '^($(TIMED_TESTS))$$' ./e2e/

bench-short: deps ## the suite at a tenth of the sizes; fails only on a gross regression (below 20% of a target the system meets)
	cd services && MSGX_BENCH=short $(GO) test -count=1 -v -timeout 10m -run '^$(BENCH_TEST)$$' ./e2e/

soak: deps ## R-M5 soak: every service as a process for MSGX_SOAK_DURATION (default 1h) at MSGX_SOAK_RATE (default 200) msg/s; slopes of RSS, goroutines, connections, table sizes and Redis memory into docs/benchmarks.md
	cd services && $(GO) test -tags soak -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestSoak_R_M5$$' ./e2e/

# The soak's go test -timeout: its duration and half an hour.
SOAK_TIMEOUT ?= 90m

bench-go: deps ## run the Go benchmarks
	$(GO) test -run='^$$' -bench=. -benchmem work

proto: ## regenerate the protobuf code
	bash scripts/proto-gen.sh

check-generated: proto ## fail when generated code is out of date
	git diff --exit-code -- proto/

docs: contracts ## regenerate the generated docs (configuration reference, contract map)
	$(GO) run ./services/cmd/msgx -doc.configuration > docs/configuration.md

contracts: ## regenerate docs/contracts.md (requirement and seed IDs → tests)
	$(GO) run ./deploy/contractmap -shared ../shared -root . > docs/contracts.md

tidy: ## go mod tidy in every module
	@for d in $(MODULES); do (cd $$d && $(GO) mod tidy); done

gowork-off: ## build each module on its own (GOWORK=off) to prove the dependency direction
	@for d in $(MODULES); do (cd $$d && GOWORK=off $(GO) vet ./...) || exit 1; done

.PHONY: help build run stop deps tools image-programs test test-race test-e2e test-norace vet-tags vuln image release release-test helm-lint contracts docs chaos run-test upgrade-test bench-e2e test-timed test-unit fuzz bench bench-short soak bench-go proto check-generated tidy gowork-off
