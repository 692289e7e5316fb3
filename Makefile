SHELL := /bin/bash
# Plinth: build, test, lab demo and benchmarks. `make help` lists targets.
GO      ?= go
BIN     ?= bin
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# Build tags: ceph links librados/librbd into the agent's Ceph driver (plinth-drivers-ceph) (needs cgo and
# librados-dev, librbd-dev from `make deps`); pacific selects go-ceph's Ceph 16 API.
# TAGS= builds without Ceph support: the agent's Ceph steps then fail saying so.
TAGS ?= ceph,pacific
# Packages whose tests CI runs with the race detector.
RACE_PKGS := ./pkg/consensus/... ./pkg/plan/... ./pkg/state/...
LAB_DIR ?= /var/tmp/plinth-lab
# The newest site bundle make bundle wrote (expanded when a recipe runs, after bundle).
BUNDLE = $(firstword $(shell ls -t dist/plinth-bundle-*.tar 2>/dev/null))

.PHONY: help build deps k8s-bins packages test-packages bundle bundle-parts test test-go test-unit test-race test-flanneld test-e2e chaos test-chaos fuzz vet demo demo-charts demo-down bench bench-consensus bench-agent bench-gossip bench-scale bench-network bench-ovs bench-ceph bench-lab bench-kube clean

help: ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

build: ## build bin/plinth-coordinator, bin/plinth-agent with its bin/plinth-drivers and bin/plinth-drivers-ceph, bin/plinth-lab and the lab's bin/runc-lab
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN)/plinth-coordinator ./cmd/coordinator
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/plinth-agent ./cmd/agent
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN)/plinth-drivers ./cmd/drivers
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN)/plinth-drivers-ceph ./cmd/drivers-ceph
	$(GO) build -tags "$(TAGS)" -ldflags "$(LDFLAGS)" -o $(BIN)/plinth-lab ./cmd/lab
	$(GO) build -o $(BIN)/runc-lab ./cmd/runc-lab

deps: ## install the host packages tests need (idempotent)
	./scripts/install-deps.sh

k8s-bins: ## build and cache kubeadm, kube-apiserver, kube-controller-manager, kubectl for the tests (scripts/build-k8s.sh)
	./scripts/build-k8s.sh

# Debian version of the packages: VERSION=... given to make is used as is (it must be
# a Debian version, e.g. 1.2.3); otherwise packaging/ derives it from git describe.
PKG_VERSION_FLAG := $(if $(filter command line environment,$(origin VERSION)),-version "$(VERSION)")

packages: build ## dist/plinth-agent_<v>_amd64.deb and dist/plinth-coordinator_<v>_amd64.deb (nfpm, packaging/)
	$(GO) -C packaging run . -repo "$(CURDIR)" -bin "$(abspath $(BIN))" -out "$(CURDIR)/dist" $(PKG_VERSION_FLAG)

test-packages: build ## packaging/'s tests: build both packages from bin/, lintian, dpkg install/upgrade/purge in a scratch root
	$(GO) -C packaging test -count=1 -timeout 15m ./...

bundle: packages ## the offline site bundle dist/plinth-bundle-<version>.tar (scripts/build-bundle.sh; cold: minutes, warm: seconds)
	./scripts/build-bundle.sh

bundle-parts: ## build and cache the bundle's parts but Plinth's packages (Kubernetes, etcd, CNI, CoreDNS, flannel, images); no archive
	$(NICE) ./scripts/build-bundle.sh --parts

vet:
	$(GO) vet -tags "$(TAGS)" ./...

test-race: ## consensus, planner and FSM tests with -race
	$(GO) test -tags "$(TAGS)" -race -count=1 $(RACE_PKGS)

test-unit: ## every other package's tests (real netlink, memberlist, TLS...)
	$(GO) test -tags "$(TAGS)" -count=1 -timeout 15m $$($(GO) list -tags "$(TAGS)" ./... | grep -v -E '/pkg/(consensus|plan|state)$$|/test/e2e$$')

test-flanneld: ## the bundle's flanneld (its own module): as root, against a real kube-apiserver and etcd in a netns
	$(GO) -C deploy/bundle/flanneld test -count=1 -timeout 5m ./...

# E2E_OUTPUT keeps of `go test -v` what a reader needs: test starts and ends, every
# file:line message (from helpers too, not only _test.go files), and the result.
E2E_OUTPUT = 2>&1 | grep -E '^(=== RUN|--- |\s+[[:alnum:]_.-]+\.go:[0-9]+:| {8}|PASS|FAIL|ok)' ; exit $${PIPESTATUS[0]}

test-e2e: bundle demo-charts ## multi-process tests: coordinator clusters and (as root) the lab on booted hosts
	PLINTH_BUNDLE=$(abspath $(BUNDLE)) $(GO) test -tags "$(TAGS)" -count=1 -timeout 30m -v ./test/e2e/ $(E2E_OUTPUT)

CHAOS_ROUNDS ?= 100
CHAOS_SEED ?= 0
SNAPSHOT_KILLS ?= 20
chaos: bundle ## randomised faults over the lab, invariants checked each round (CHAOS_ROUNDS=100; CHAOS_SEED=N replays a seed), and SNAPSHOT_KILLS=20 kill -9s in each snapshot phase
	PLINTH_BUNDLE=$(abspath $(BUNDLE)) PLINTH_CHAOS_ROUNDS=$(CHAOS_ROUNDS) PLINTH_CHAOS_SEED=$(CHAOS_SEED) PLINTH_SNAPSHOT_KILLS=$(SNAPSHOT_KILLS) $(GO) test -tags "$(TAGS)" -count=1 -timeout 300m -v -run '^(TestChaos|TestSnapshotKills)$$' ./test/e2e/ $(E2E_OUTPUT)

test-chaos: ## the short chaos run make test includes (10 rounds)
	$(MAKE) --no-print-directory chaos CHAOS_ROUNDS=10 SNAPSHOT_KILLS=0

fuzz: ## fuzz the manifest decoder briefly
	$(GO) test -tags "$(TAGS)" -run '^$$' -fuzz FuzzDecode -fuzztime 15s ./pkg/api/

# make test: the Go tests leave much of the CPU idle while they wait on booted hosts,
# Ceph and dpkg, so the bundle's parts (cold: about 9 minutes of compiling) build
# beside them at nice 19, taking only what the tests leave. SERIAL=1 keeps the
# suites themselves one at a time.
test: deps k8s-bins ## the full default suite (what CI runs)
	@echo "make test: $$(date +%T) Go tests, the bundle's parts beside them"
	$(MAKE) --no-print-directory -j2 test-go bundle-parts NICE="nice -n 19"
	@echo "make test: $$(date +%T) flanneld, end-to-end, chaos, fuzz"
	$(MAKE) --no-print-directory SERIAL=1 test-flanneld test-e2e test-chaos fuzz
	@echo "make test: $$(date +%T) done"

ifdef SERIAL
.NOTPARALLEL:
endif

test-go:
	$(MAKE) --no-print-directory SERIAL=1 vet test-race test-unit test-packages

demo: bundle demo-charts ## run the lab: booted hosts installed from the site bundle, until the site is Ready and its demo application runs
	$(BIN)/plinth-lab up --dir $(LAB_DIR) --bin $(BIN) --bundle $(BUNDLE)

demo-charts: ## pack examples/apps/*/charts/ into the archives the applications name (deterministic; gitignored)
	$(GO) run ./examples/apps

demo-down: ## remove every host, namespace, mount, cgroup, process and file the demo made
	@if [ -x $(BIN)/plinth-lab ]; then $(BIN)/plinth-lab down --dir $(LAB_DIR); else $(GO) run ./cmd/lab down --dir $(LAB_DIR); fi

bench: bench-consensus bench-agent bench-gossip bench-scale bench-network bench-ovs bench-ceph bench-lab bench-kube ## all benchmarks (figures, not assertions)

bench-consensus: ## failover time and write throughput vs a 3-member etcd
	./scripts/bench-consensus.sh

bench-scale: ## site of 100/300/1000 hosts (real coordinators and agents without gossip, SIMULATED drivers): apply -> steps done, leader CPU/RSS, lag, Raft sizes, wake-ups; Ansible at 200
	./scripts/bench-scale.sh -gossip=false $(BENCH_SCALE_ARGS)

bench-agent: ## idle agent: binary sizes, RSS and CPU of this tree's plinth-agent (drivers in plinth-drivers and plinth-drivers-ceph) next to a baseline build (BASE=ref) and a bare-Go floor exchanging the same gossip packets (bench/wakefloor), one coordinator on loopback, the gossip pool filled to 50 members (bench/gossipfill)
	./scripts/bench-agent.sh

bench-gossip: ## failure detection at size: 50 members, a crashed one declared dead, the lan profile next to memberlist's defaults
	$(GO) test -run '^$$' -bench DeadDetection50 -benchtime 8x -timeout 30m ./pkg/membership/

bench-ovs: ## OVS-DPDK host config: driver vs the equivalent ovs-vsctl calls
	$(GO) test -run '^$$' -bench HostConfig -benchtime 10x ./pkg/ovs/

bench-lab: ## lab on booted hosts: rootfs, boot, install, up -> enrolled, apply -> Ready, idle RSS/CPU, memory per host, dead-agent detection
	./scripts/bench-lab.sh

bench-kube: ## lab Kubernetes: apply -> every node Ready per phase, memory per host, ratio to kubeadm init/join run directly (the demo's addresses: not beside make demo)
	./scripts/bench-lab.sh -kube -manifest $(CURDIR)/examples/lab/site.yaml

bench-ceph: ## Ceph: default OpenStack pools and users, driver vs the ceph/rbd CLI
	$(GO) test -tags "$(TAGS)" -run '^$$' -bench OpenStackPools -benchtime 3x ./pkg/ceph/librados/

bench-helm: ## pkg/helmrelease installing 20 small charts vs the helm CLI (built from the module proxy), ratio
	./scripts/bench-helm.sh

bench-network: ## host.network driver vs an equivalent ip -batch script
	$(GO) test -tags "$(TAGS)" -run '^$$' -bench Network50 -benchtime 20x ./pkg/host/

clean:
	rm -rf $(BIN)
