# kubelab: two commands on a fresh machine.
#   make up    bring up the Docker lab (nodes, labadm init, joins) and print how to use kubectl
#   make test  lint, type-check and run the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_DIR ?= .lab

.PHONY: help venv images lint typecheck test test-fast soak bench bench-idle bench-storage bench-ingress up down status stop start verify up-local down-local status-local clean

help:
	@echo "make up        bring up the Docker lab (3 control-plane nodes behind haproxy, 2 workers; CONFIG=cluster.yaml) and print how to use kubectl"
	@echo "make down      remove it (every container, volume and network it made)"
	@echo "make status    its nodes, roles, addresses and readiness"
	@echo "make stop      stop the lab's containers; make start brings the same cluster back"
	@echo "make verify    testinfra checks of every node over SSH (INVENTORY=... for Vagrant's or your hosts)"
	@echo "make up-local  a control plane as local processes in $(LAB_DIR)/ (3-member store, apiserver), no Docker"
	@echo "make test      lint, type-check and run the test suite"
	@echo "make test-fast unit tests, Raft transcripts and a few simulation seeds (the edit-test loop)"
	@echo "make soak      long deterministic-simulation soak (many more seeds)"
	@echo "make images    build the node and workload images (cached by their inputs)"
	@echo "make bench     run the benchmarks in bench/ and print their figures"
	@echo "make bench-idle  the running lab's CPU at rest, 300 s (make up first)"
	@echo "make bench-storage  a claim Bound + its pod Running on the running lab (make up first)"
	@echo "make bench-ingress  an Ingress change to served, on the running lab (make up first)"

# Real etcd 3.4 (Debian's etcd-server) is the store's oracle in differential tests and
# its peer in benchmarks.
SYSTEM_STAMP := $(VENV)/.system-packages

# The image builder (lab/images.py) needs debootstrap and a C compiler (the pause image);
# the lab pushes images into its registry with skopeo.
# ansible/ runs on Debian's ansible (7.x, with community.docker and community.general:
# PyPI's ansible-core has no collections, and none can be fetched here); the Vagrantfile
# on Debian's vagrant, without recommends (with them it pulls ~107 packages).
SYSTEM_PACKAGES := etcd-server etcd-client debootstrap gcc libc6-dev binutils skopeo ansible openssh-client
SYSTEM_PACKAGES_NO_RECOMMENDS := vagrant
SYSTEM_COMMANDS := etcd etcdctl debootstrap gcc strip skopeo ansible-playbook ssh vagrant

$(SYSTEM_STAMP):
	@mkdir -p $(VENV)
	@missing=""; for c in $(SYSTEM_COMMANDS); do command -v $$c >/dev/null || missing="$$missing $$c"; done; \
	if [ -n "$$missing" ]; then \
	  echo "==> missing$$missing: installing Debian packages: $(SYSTEM_PACKAGES)"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root for apt-get (or install $(SYSTEM_PACKAGES) $(SYSTEM_PACKAGES_NO_RECOMMENDS))"; exit 1; fi; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SYSTEM_PACKAGES_NO_RECOMMENDS) >/dev/null; \
	fi
	@etcd --version | head -1
	@touch $@

$(STAMP): pyproject.toml $(SYSTEM_STAMP)
	@echo "==> [1/2] creating virtualenv $(VENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "==> [2/2] installing kubelab and its development dependencies"
	@$(BIN)/pip install --quiet --upgrade pip
	@$(BIN)/pip install --quiet --progress-bar on -e '.[dev]'
	@touch $@

venv: $(STAMP)

# The lab's images (node, busybox, pause, nginx), rebuilt only when their inputs change.
images: $(STAMP)
	$(BIN)/python -m lab.images build

lint: $(STAMP)
	$(BIN)/ruff check kubelab controlplane agents lab tests bench
	$(BIN)/ruff format --check kubelab controlplane agents lab tests bench
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/pytest -q -p no:cacheprovider; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "no tests were collected: failing"; exit 1; fi; exit $$rc

# The edit-test loop (under 2 minutes here): unit tests, Raft transcripts and a dozen
# simulation seeds; no real processes or containers. `make test` runs everything.
test-fast: $(STAMP)
	KUBELAB_SIM_RANDOM_SEEDS=12 $(BIN)/pytest -q -p no:cacheprovider -m "not slow" \
	  tests/unit tests/raft tests/sim

soak: $(STAMP)
	KUBELAB_SIM_SEEDS=$${KUBELAB_SIM_SEEDS:-2000} $(BIN)/pytest -q -m slow tests/sim

bench: $(STAMP)
	$(BIN)/python -m bench.raft_runtime
	$(BIN)/python -m bench.store
	$(BIN)/python -m bench.apiserver
	$(BIN)/python -m bench.pods
	$(BIN)/python -m bench.pods --runtime docker
	$(BIN)/python -m bench.services

bench-idle: $(STAMP)
	$(BIN)/python -m bench.idle --prefix kubelab-$(LAB_NAME)

bench-storage: $(STAMP)
	$(BIN)/python -m bench.storage --kubeconfig $(LAB_DIR)/admin.conf

bench-ingress: $(STAMP)
	$(BIN)/python -m bench.ingress --kubeconfig $(LAB_DIR)/admin.conf

CONFIG ?=
up: $(STAMP)
	$(BIN)/labctl up --dir $(LAB_DIR) $(if $(CONFIG),--config $(CONFIG))

down: $(STAMP)
	$(BIN)/labctl down --dir $(LAB_DIR) $(if $(CONFIG),--config $(CONFIG))

status: $(STAMP)
	$(BIN)/labctl status --dir $(LAB_DIR) $(if $(CONFIG),--config $(CONFIG))

# The lab's containers stopped and started again: the same cluster comes back.
stop: $(STAMP)
	$(BIN)/labctl stop --dir $(LAB_DIR) $(if $(CONFIG),--config $(CONFIG))

start: $(STAMP)
	$(BIN)/labctl start --dir $(LAB_DIR) $(if $(CONFIG),--config $(CONFIG))

# testinfra checks of node state over SSH, on every node of the inventory: the Docker
# lab's (written by `make up`), Vagrant's, or one of your own hosts (ansible/).
LAB_NAME ?= kubelab
INVENTORY ?= $(LAB_DIR)/$(LAB_NAME)/inventory.ini
verify: $(STAMP)
	@test -f $(INVENTORY) || { echo "no inventory $(INVENTORY): make up first, or INVENTORY=..."; exit 1; }
	$(BIN)/pytest -q -p no:cacheprovider tests/infra --inventory $(INVENTORY) $(if $(KUBECONFIG_FILE),--kubeconfig $(KUBECONFIG_FILE))

up-local: $(STAMP)
	$(BIN)/python -m lab.localcluster up --dir $(LAB_DIR)/store --members 3
	$(BIN)/python -m lab.localplane up --dir $(LAB_DIR)

down-local: $(STAMP)
	$(BIN)/python -m lab.localplane down --dir $(LAB_DIR)
	$(BIN)/python -m lab.localcluster down --dir $(LAB_DIR)/store

status-local: $(STAMP)
	$(BIN)/python -m lab.localcluster status --dir $(LAB_DIR)/store

clean:
	rm -rf $(VENV) $(LAB_DIR) .mypy_cache .ruff_cache .pytest_cache .import_linter_cache
