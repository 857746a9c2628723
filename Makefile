# reef: `sudo make demo` and `sudo make test` are the quick start (README.md).
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo none)
LDFLAGS   := -s -w -X github.com/reefcni/reef/version.Version=$(VERSION) -X github.com/reefcni/reef/version.Commit=$(COMMIT)
# GoBGP is built from third_party/gobgp, the module with third_party/gobgp.diff
# applied, through go.mod's replace: every go command, with or without make,
# builds the same code (third_party/README.md).
GOBUILD   := CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)'
GOBIN_DIR := $(shell $(GO) env GOPATH)/bin

.PHONY: all build proto test test-unit test-e2e fuzz demo lab bench deps-test deps-proto clean vet package deps-package model deps-model gobgp-check gobgp-sync

all: build

# third_party/gobgp must be exactly the module go.mod requires with
# third_party/gobgp.diff applied; gobgp-sync rewrites it after a change to
# either.
gobgp-check:
	@GO=$(GO) sh third_party/gobgp.sh check
gobgp-sync:
	GO=$(GO) sh third_party/gobgp.sh sync

build:
	$(GOBUILD) -o $(BIN)/reef .
	$(GOBUILD) -tags reeftest -o $(BIN)/reef-test .
	$(GOBUILD) -o $(BIN)/reef-cni ./cniserver/shim
	$(GOBUILD) -o $(BIN)/reef-lab ./cmd/reef-lab

# Debian packages the lab and tests use; installed only when missing.
# rpm and systemd: the package tests read the .rpm and run systemd-analyze.
TEST_PKGS := iproute2 iputils-ping nftables containernetworking-plugins tcpdump rpm systemd
# arping: the e2e test of the pods' ARP filter (nftables table arp reef).
TEST_PKGS += iputils-arping
# containerd (it pulls runc): the CRI lab (e2e/cri_test.go, make demo-cri, bench-cri).
TEST_PKGS += containerd
# bird2, frr: BIRD 2 and FRR as the route reflectors of e2e/rr_test.go and the
# ToRs of e2e/tor_test.go (docs/bgp.md); gobgpd: the flooding external peer of
# e2e/flood_test.go, and the router that reads the graceful-restart R bit in
# e2e/restartflag_test.go.
TEST_PKGS += bird2 frr gobgpd
# busybox-static, bind9-dnsutils, netcat-openbsd, conntrack, wget: what the images
# of the lab's Kubernetes cluster hold besides agnhost (internal/lab/k8simages).
TEST_PKGS += busybox-static bind9-dnsutils netcat-openbsd conntrack wget
# iperf3: a long-lived connection across a NetworkPolicy update (e2e/policy_test.go),
# and the bandwidth limits (e2e/bandwidth_test.go).
TEST_PKGS += iperf3
# prometheus (with promtool): it scrapes the lab's nodes (e2e/metrics_test.go).
TEST_PKGS += prometheus
deps-test:
	@missing=""; for p in $(TEST_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi
	@mkdir -p /etc/iproute2/rt_protos.d
	@[ -f /etc/iproute2/rt_protos.d/reef.conf ] || cp packaging/rt_protos.d/reef.conf /etc/iproute2/rt_protos.d/reef.conf

# crictl, the CRI client of kubelet's own tests, for the CRI lab; pinned, built once.
CRICTL_VERSION := v1.37.0
CRICTL         := $(GOBIN_DIR)/crictl
.PHONY: deps-cri demo-cri
deps-cri: deps-test
	@$(GO) version -m $(CRICTL) 2>/dev/null | grep -q 'sigs.k8s.io/cri-tools[[:space:]]*$(CRICTL_VERSION)' || \
	  GOFLAGS= GOBIN=$(GOBIN_DIR) $(GO) install sigs.k8s.io/cri-tools/cmd/crictl@$(CRICTL_VERSION)

# kube-apiserver and etcd, the lab's Kubernetes API of the NetworkPolicy
# tests (internal/lab/kubeapi.go); pinned, built once from the Go module
# proxy (several minutes), a quick no-op when the binaries are there at
# these versions.
KUBE_VERSION := v1.37.2
ETCD_VERSION := v3.7.3
.PHONY: deps-kube
deps-kube:
	@KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) GOBIN=$(GOBIN_DIR) GO=$(GO) sh internal/lab/kube/build.sh

# What a real cluster in the lab adds (issue 27): containerd 2 as containerd2
# (Kubernetes 1.36 on wants it; Debian 12 has 1.6, which the CRI lab keeps)
# with its shim containerd2-shim-runc-v2, and kubelet, kube-proxy,
# kube-controller-manager, kube-scheduler, kubectl, agnhost and e2e.test at
# KUBE_VERSION; pinned, built once like deps-kube (the first time takes long;
# e2e.test the longest).
CONTAINERD_VERSION := v2.4.2
.PHONY: deps-k8s
deps-k8s: deps-kube deps-cri deps-test
	@KUBE_BUILD=cluster KUBE_VERSION=$(KUBE_VERSION) CONTAINERD_VERSION=$(CONTAINERD_VERSION) GOBIN=$(GOBIN_DIR) GO=$(GO) sh internal/lab/kube/build.sh
	@$(GO) run ./internal/lab/k8simages/cmd -out $(K8S_IMAGES)

# The images of the lab's Kubernetes cluster, built here (no registry is
# reachable) and cached: pause, agnhost, CoreDNS and the other images the
# network tests of e2e.test use (internal/lab/k8simages).
K8S_IMAGES := /tmp/reef-k8s-images

# The upstream e2e suite against reef in the lab's Kubernetes cluster
# (docs/conformance.md, whose top part it rewrites); E2E_FOCUS and E2E_SKIP override
# the selection. Hours: make test runs a slice (e2e TestKubernetesCluster/ConformanceSlice).
# Then the network-policy-api suite (conformance-policy, below), even when
# the first failed; make fails if either did.
.PHONY: conformance conformance-dualstack demo-k8s
# The cluster shown: pods of a Deployment on the three nodes with their reef
# addresses, a NetworkPolicy and its effect; tears down.
demo-k8s: build deps-k8s
	$(BIN)/reef-lab demo-k8s --bin $(CURDIR)/$(BIN) --images $(K8S_IMAGES)

conformance: build deps-k8s
	$(BIN)/reef-lab conformance --bin $(CURDIR)/$(BIN) --images $(K8S_IMAGES) --out docs/conformance.md; s=$$?; \
	  $(POLICY_CONFORMANCE) || exit 1; exit $$s

# The upstream dual-stack tests ([Feature:IPv6DualStack]) on the cluster
# made dual-stack; rewrites the "## Dual-stack" section of
# docs/conformance.md (issue 29).
conformance-dualstack: build deps-k8s
	$(BIN)/reef-lab conformance --dual-stack --bin $(CURDIR)/$(BIN) --images $(K8S_IMAGES) --out docs/conformance.md

# The network-policy-api conformance suite (sigs.k8s.io/network-policy-api
# at go.mod's version, its ClusterNetworkPolicy tests) against reef in the
# lab's cluster, alone; rewrites the "## network-policy-api conformance"
# section of docs/conformance.md (make conformance runs it too, after the
# Kubernetes suite). About 20 minutes; not part of make test.
.PHONY: conformance-policy
POLICY_CONFORMANCE = $(BIN)/reef-lab conformance-policy --bin $(CURDIR)/$(BIN) --images $(K8S_IMAGES) --out docs/conformance.md
conformance-policy: build deps-k8s
	$(POLICY_CONFORMANCE)

deps-proto:
	@command -v protoc >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null)
	@[ -x $(GOBIN_DIR)/protoc-gen-go ] || GOFLAGS= $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
	@[ -x $(GOBIN_DIR)/protoc-gen-go-grpc ] || GOFLAGS= $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2

proto: deps-proto
	PATH=$(GOBIN_DIR):$$PATH protoc --go_out=. --go_opt=paths=source_relative \
	  --go-grpc_out=. --go-grpc_opt=paths=source_relative proto/reef.proto

vet: gobgp-check
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' ':!third_party'))" || (gofmt -l $$(git ls-files '*.go' ':!third_party'); echo "gofmt: files above need formatting"; exit 1)

# Unit tests need no root; the e2e tests drive the real binaries in network
# namespaces and need root.
# The voter-list property tests run a tenth of their seeds under -race;
# the second line runs their 2,000 (blockproto/lists_test.go).
test-unit:
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)
	$(GO) test -count=1 -run '^TestProperty' ./blockproto/
	$(GO) test -tags reeftest -count=1 -run 'Hooks' ./daemon/

# First the cluster's images under Debian's containerd, each tool the upstream
# tests exec in them (internal/lab/k8simages, about 20 s once they are cached).
# The e2e run's whole -v log goes to bin/e2e.log; the console gets it all
# when a test fails, and in any case the slowest tests with their wall
# times (what make test's 30-minute budget is spent on).
test-e2e: build deps-test deps-cri deps-kube deps-k8s
	REEF_K8SIMAGES_TEST=1 $(GO) test -count=1 -run TestImagesRunInContainerd ./internal/lab/k8simages/
	@echo "REEF_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -v -count=1 -timeout 40m -parallel 4 ./e2e/ > $(BIN)/e2e.log"
	@REEF_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -v -count=1 -timeout 40m -parallel 4 ./e2e/ > $(BIN)/e2e.log 2>&1; s=$$?; \
	  if [ $$s -ne 0 ]; then grep -v -E '^=== (RUN|PAUSE|CONT|NAME)' $(BIN)/e2e.log; else tail -n 1 $(BIN)/e2e.log; fi; \
	  echo "slowest e2e tests, wall seconds (the whole log: $(BIN)/e2e.log):"; \
	  grep -E '^--- (PASS|FAIL|SKIP)' $(BIN)/e2e.log | sed -E 's/^--- ([A-Z]+): (.*) \(([0-9.]+)s\)$$/\3 \1 \2/' | sort -rn | head -n 20; \
	  exit $$s

# The slower variants of e2e tests that make test runs a slice of (e2e:
# slowSuite): the IPv6 ToR tests with FRR and IPv6-only pools, the chaos
# with one family (make test runs it dual-stack), the FRR reflectors, IPv4
# and dual-stack (make test runs the BIRD ones, 17 s each here), the Service CIDRs and the
# Service addresses through FRR (make test runs BIRD; the FRR one also stops
# the API), the Service addresses with traffic through kube-proxy in the
# lab's cluster (BIRD and FRR as the ToR), BFD and the planned stop's drain with FRR (make test runs
# BIRD), the reef route reflectors with IPv6 pools (make test
# runs BIRD's dual-stack and reef's IPv4 ones), the NetworkPolicy truth
# tables with IPv4, IPv6-only and dual-stack pods (make test runs 14 cases
# IPv4, TestNetpolSlice, and 4 dual-stack, TestNetpolDualStackSlice), the
# lab's Kubernetes cluster made dual-stack, VXLAN over an IPv6 underlay
# across two subnets (make test runs it on one, TestVXLANIPv6Underlay) and
# beside nodes with an IPv4 underlay; ClusterNetworkPolicy rules changed
# under long-lived connections (TestClusterNetworkPolicyLiveChange, about 20 s);
# the ClusterNetworkPolicy stories with the API stopped and reef restarted on a
# node (TestClusterNetworkPolicyStoriesAPIAway, 34 to 51 s; make test runs the
# stories, TestClusterNetworkPolicyStories);
# node peers and named ports with dual-stack pods and nodes
# (TestClusterNetworkPolicyNodesNamedPortsDualStack, 18 s; make test runs IPv4);
# those need the Kubernetes binaries. The package upgrade on IPv6-only nodes
# (TestPackageUpgradeIPv6Only: 22 s here with the packages built, which
# the test binary does once for all its package tests, 40 to 120 s; make
# test runs TestPackage's dual-stack upgrade). The package upgrade under
# Service traffic with FRR (TestPackageUpgradeServiceFRR, 29 s here with
# the packages built; make test runs BIRD's, 19 to 23 s beside
# TestPackage, whose packages it shares).
# The planned restart behind reef route reflectors
# (TestPlannedRestartReflectorsBird and TestPlannedRestartReflectorsFRR, 21 to
# 29 s here; make test runs the full-mesh ones).
SLOW_E2E := ^(TestRestartOverNewSessionNotRestarting|TestSocketIdleConnections|TestToRFRR|TestPodSet200|TestPlannedRestartIPv6Bird|TestToRDualStackBird|TestCRIFiftyPods|TestPackageUpgradeServiceFRR|TestPolicyHostPort|TestServiceCIDRsFRR|TestClusterNetworkPolicyLiveChange|TestClusterNetworkPolicyStoriesAPIAway|TestClusterNetworkPolicyNodesNamedPortsDualStack|TestServiceAddressesFRR|TestKubernetesServiceAddresses|TestKubernetesServiceAddressesFRR|TestBFDFRR|TestGracefulShutdownFRR|TestPlannedRestartFRR|TestToRIPv6Bird|TestToRIPv6FRR|TestToRDualStackFRR|TestToRIPv6OnlyFRR|TestToRIPv6OnlyBirdRestart|TestBlocksChaosIPv4|TestBlocksChaosIPv6|TestBlocksChaosIPv6Only|TestReflectorsFRR|TestReflectorsFRRDualStack|TestIPv6Reflectors|TestIPv6OnlyReflectors|TestIPv6OnlyReflectorsBird|TestIPv6OnlyReflectorsFRR|TestNetpolTruthTables|TestNetpolTruthTablesIPv6|TestNetpolTruthTablesDualStack|TestKubernetesDualStack|TestLoadBalancerIPAMDualStack|TestVXLANIPv6UnderlayCrossSubnet|TestVXLANMixedUnderlays|TestPackageUpgradeIPv6Only|TestPlannedRestartIPv6FRR|TestPlannedRestartIPv6OnlyBird|TestPlannedRestartReflectorsBird|TestPlannedRestartReflectorsFRR|TestPlannedRestartSlowFirstPassBird|TestCrashRestartSlowFirstPassFRR|TestDynamicPeerFloodStaysCutOff|TestEncapModeSwitchRolling|TestUplinkMTUChanged)$$
.PHONY: test-e2e-slow
test-e2e-slow: build deps-test deps-kube deps-k8s
	REEF_E2E_SLOW=1 REEF_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 40m -run '$(SLOW_E2E)' ./e2e/

# The failover figures of docs/bgp.md, "BFD" (TestBFDFigures, e2e/bfd_figures_test.go):
# a few minutes of lab runs that assert nothing about the times.
.PHONY: bfd-figures
bfd-figures: build deps-test
	REEF_BFD_FIGURES=3 REEF_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 30m -run '^TestBFDFigures$$' -v ./e2e/

# Failover figures (BENCHMARKS.md, "## Failover", 19 minutes here under
# load, with the package upgrades, whose 4 packages it builds first):
# rewrites only that section, without the ~100 min of make bench, which
# runs it last.
FAILOVER_BENCH = REEF_FAILOVER_FIGURES=3 REEF_FAILOVER_OUT=$(CURDIR)/BENCHMARKS.md REEF_BIN_DIR=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 60m -run '^TestFailoverFigures$$' -v ./e2e/
.PHONY: bench-failover
bench-failover: build deps-test
	$(FAILOVER_BENCH)

# spin, the model checker of blockproto/model/; installed only when missing.
deps-model:
	@command -v spin >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq spin >/dev/null)

# The spin model of the block protocol: it must hold, and each weakened
# variant of it must fail (blockproto/model/blocks.pml).
model: deps-model
	bash blockproto/model/check.sh

# Each fuzz target, bounded by executions rather than time: a -fuzztime
# duration can end while a worker minimizes a new input, and go test then
# fails with "context deadline exceeded" though nothing broke. make test runs
# a slice (FUZZTIME=5000x, about a minute and a half for all seven; every go test also
# runs their seed corpora); make fuzz runs 40000x each and the voter-list
# property tests on SIM_SEEDS seeds other than make test-unit's. Longer:
# FUZZTIME=2000000x SIM_SEEDS=50000 make fuzz.
FUZZ_TARGETS := FuzzParseConfig:./daemon/ FuzzSocket:./daemon/ FuzzParseRequest:./cniserver/ FuzzDecodeVPN:./bgp/ FuzzCompile:./policy/ FuzzDesired:./services/ FuzzAssign:./lbipam/
FUZZTIME ?= 40000x
SIM_SEEDS ?= 2000
.PHONY: fuzz fuzz-targets
fuzz:
	REEF_SIM_SEED0=100001 REEF_SIM_SEEDS=$(SIM_SEEDS) $(GO) test -count=1 -run '^TestProperty' ./blockproto/
	$(MAKE) fuzz-targets FUZZTIME=$(FUZZTIME)

fuzz-targets:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "go test -fuzz $${t%%:*} -fuzztime $(FUZZTIME) $${t#*:}"; \
	  $(GO) test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 200x "$${t#*:}"; \
	done

# The README's test command; CI runs it through .ci/run.
test: vet test-unit model test-e2e
	$(MAKE) fuzz-targets FUZZTIME=5000x

demo: build deps-test
	$(BIN)/reef-lab demo --bin $(CURDIR)/$(BIN)

lab: build deps-test
	$(BIN)/reef-lab up --bin $(CURDIR)/$(BIN)

# containerd's CRI drives reef-cni, pods made and removed with crictl
# (docs/cri.md); tears everything down and exits by itself.
demo-cri: build deps-cri
	$(BIN)/reef-lab demo-cri --bin $(CURDIR)/$(BIN)

# iperf3 for reef-lab bench-tput (pod-to-pod TCP throughput); installed only when missing.
BENCH_PKGS := iperf3
.PHONY: deps-bench
deps-bench:
	@missing=""; for p in $(BENCH_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# reef's nftables dataplane (nat/): Go benchmarks with 1,000 pods, in a
# throw-away netns; make bench appends them to BENCHMARKS.md ("## nftables").
NAT_BENCH := $(GO) test -run '^$$' -bench . -benchtime 200x -count 3 ./nat/
# bench-mesh: the multi-node figures (3/10-node convergence, a new block at a
# BIRD 2 ToR, the 50-node mesh, 2,000 remote blocks, 100 nodes through 2
# route reflectors);
# bench-sim: the block protocol simulated for 10, 100 and 1,000 nodes in one
# process (a few minutes of both cores at 1,000);
# bench-k8s: pod startup latency in the lab's Kubernetes cluster, reef and
# ptp + host-local + portmap (20 minutes here); the failover figures
# (bench-failover). Each writes its section.
bench: build deps-test deps-bench deps-cri deps-kube deps-k8s
	$(BIN)/reef-lab bench --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(NAT_BENCH) > $(BIN)/bench-nat.txt; s=$$?; cat $(BIN)/bench-nat.txt; exit $$s
	{ printf '\n## nftables\n\nGo benchmarks of nat/, 1,000 pods in the sets, in a throw-away network namespace\n(docs/nat.md explains them), from `sudo make bench`, which runs\n\n    %s\n\n' "$(NAT_BENCH)"; \
	  grep -E '^(cpu:|Benchmark)' $(BIN)/bench-nat.txt | sed 's/^/    /'; \
	  printf '\n1-minute load average after the run: %s (other work on the machine shows in the figures).\n' "$$(cut -d' ' -f1 /proc/loadavg)"; } >> BENCHMARKS.md
	$(BIN)/reef-lab bench-mesh --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-sim --out BENCHMARKS.md
	$(BIN)/reef-lab bench-tput --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-policy --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-hostport --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-metrics --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-storm --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-cri --bin $(CURDIR)/$(BIN) --out BENCHMARKS.md
	$(BIN)/reef-lab bench-k8s --bin $(CURDIR)/$(BIN) --images $(K8S_IMAGES) --out BENCHMARKS.md
	$(FAILOVER_BENCH)

# The .deb and .rpm (packaging/, docs/install.md). The binaries in them are
# stamped with the package version; nfpm is pinned and built once.
DIST         ?= dist
PKG_VERSION  ?= $(shell packaging/version.sh)
PKG_VERSION  := $(PKG_VERSION)
PKG_LDFLAGS  := -s -w -X github.com/reefcni/reef/version.Version=$(PKG_VERSION) -X github.com/reefcni/reef/version.Commit=$(COMMIT)
NFPM_VERSION := v2.45.2
NFPM         := $(GOBIN_DIR)/nfpm
deps-package:
	@$(GO) version -m $(NFPM) 2>/dev/null | grep -q 'github.com/goreleaser/nfpm/v2[[:space:]]*$(NFPM_VERSION)' || \
	  GOFLAGS= GOBIN=$(GOBIN_DIR) $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)

package: deps-package
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(PKG_LDFLAGS)' -o $(DIST)/bin/reef .
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(PKG_LDFLAGS)' -o $(DIST)/bin/reef-cni ./cniserver/shim
	REEF_PKG_VERSION=$(PKG_VERSION) REEF_PKG_BIN=$(DIST)/bin $(NFPM) package -f packaging/nfpm.yaml -p deb -t $(DIST)/reef_$(PKG_VERSION)_amd64.deb
	REEF_PKG_VERSION=$(PKG_VERSION) REEF_PKG_BIN=$(DIST)/bin $(NFPM) package -f packaging/nfpm.yaml -p rpm -t $(DIST)/reef-$(PKG_VERSION).x86_64.rpm

clean:
	rm -rf $(BIN) dist build
