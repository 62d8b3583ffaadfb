# Strata's Makefile. Tools are pinned and installed into bin/; the test
# environment's binaries (Kubernetes, etcd, registry, crane) are built from
# source into .infra/bin by hack/setup-infra.sh. Both folders are ignored.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT    := $(shell pwd)
BIN     := $(ROOT)/bin
INFRA   := $(ROOT)/.infra
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -X github.com/strata-dev/strata/internal/version.Version=$(VERSION)

CONTROLLER_GEN_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION  ?= v2.15.0

CONTROLLER_GEN := $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT  := $(BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)

export KUBEBUILDER_ASSETS := $(INFRA)/bin
export PATH := $(INFRA)/bin:$(PATH)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC under config/.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=strata-controller paths="./controllers/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=strata-daemon paths="./rollout/..." output:rbac:artifacts:config=config/rbac/daemon

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -s -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run --build-tags e2e ./...

.PHONY: verify
verify: generate manifests ## Regenerate and fail on any diff; check that the daemon links no buildkit; lint.
	@if [ -n "$$(git status --porcelain -- api config)" ]; then \
		echo "generated files are out of date; run 'make generate manifests' and commit:"; \
		git status --porcelain -- api config; git diff --stat -- api config; exit 1; fi
	@test -z "$$(gofmt -s -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -s -l $$(git ls-files '*.go'); exit 1; }
	hack/check-daemon-deps.sh
	$(MAKE) lint

##@ Build

.PHONY: build
build: ## Build the binaries into bin/.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

##@ Test

.PHONY: infra
infra: ## Build and cache the test environment's binaries under .infra/.
	hack/setup-infra.sh envtest

.PHONY: test
test: infra ## Run unit and envtest integration tests.
	go test -count=1 ./...

.PHONY: bench-memory
bench-memory: infra ## Print the peak RSS of 4 concurrent configuration-layer builds of the worst inputs (goal: under 200 MB).
	go test ./test/memory -run '^$$' -bench PeakRSS -benchtime 1x -count 1

##@ Cluster

# A real one-node cluster on this machine (etcd, kube-apiserver,
# controller-manager, scheduler, containerd, kubelet, registry on
# 127.0.0.1:5000); state under .infra/cluster, see hack/cluster/.

.PHONY: cluster-infra
cluster-infra: ## Build and install the cluster's binaries (Kubernetes, containerd, ...).
	hack/setup-infra.sh cluster

.PHONY: images
images: cluster-infra ## Build the local images (test images; strata-controller, strata-daemon from the working tree) into the registry.
	hack/cluster/images.sh

.PHONY: cluster-up
cluster-up: cluster-infra ## Start the test cluster (idempotent); kubeconfig in .infra/cluster/kubeconfig.
	hack/cluster/up.sh

.PHONY: cluster-down
cluster-down: ## Stop the test cluster and undo its host changes (idempotent).
	hack/cluster/down.sh

.PHONY: deploy
deploy: cluster-infra ## Install Strata (config/testcluster, images from the working tree) on the running test cluster.
	hack/cluster/deploy.sh

.PHONY: demo
demo: cluster-infra ## The whole product on this machine: cluster, Strata from its manifests, 3 simulated nodes updated to a built image.
	hack/cluster/up.sh
	hack/cluster/deploy.sh
	@mkdir -p $(INFRA)/cluster/demo
	go build -o $(INFRA)/cluster/demo/demo ./hack/demo
	$(INFRA)/cluster/demo/demo up

.PHONY: demo-down
demo-down: ## Stop the demo's simulated nodes and the test cluster, and undo their host changes.
	hack/cluster/down.sh

.PHONY: test-demo
test-demo: cluster-infra ## Run make demo non-interactively, then roll out an edit of its MachineConfig as a user would; always tear down.
	rc=0; $(MAKE) demo && $(INFRA)/cluster/demo/demo check || rc=$$?; $(MAKE) demo-down || rc=1; exit $$rc

.PHONY: test-e2e
test-e2e: cluster-infra ## Run the e2e suite on the test cluster, then tear it down (always).
	hack/cluster/e2e.sh

.PHONY: bench-build
bench-build: cluster-infra ## Time a configuration-only change with each build strategy on a 1 GiB base (starts and stops the test cluster).
	hack/cluster/up.sh
	rc=0; go run ./hack/benchbuild $(BENCH_ARGS) || rc=$$?; \
	[ -n "$${STRATA_E2E_KEEP_CLUSTER:-}" ] || hack/cluster/down.sh || rc=1; exit $$rc

# The cluster is stopped afterwards unless STRATA_E2E_KEEP_CLUSTER is set.
.PHONY: bench-rollout
bench-rollout: cluster-infra ## Time one change under each disruption (Restart, SoftReboot, Reboot, kernel argument) on 10 simulated nodes; fails on a missed goal (starts and stops the test cluster).
	rc=0; { hack/cluster/up.sh && hack/cluster/deploy.sh && go run ./hack/benchrollout $(BENCH_ARGS); } || rc=$$?; \
	[ -n "$${STRATA_E2E_KEEP_CLUSTER:-}" ] || hack/cluster/down.sh || rc=1; exit $$rc

##@ Tools

.PHONY: tools
tools: $(CONTROLLER_GEN) $(GOLANGCI_LINT) ## Install the pinned code generators and linters into bin/.

$(CONTROLLER_GEN):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(BIN)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(BIN)/golangci-lint $@
