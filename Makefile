# The two commands (README, docs/development.md): `make demo` (runs the autoscaler against a
# local real control plane) and `make test` (unit + integration tests). Everything else
# supports those.
#
# Every target that needs the package runs in the project's venv, $(VENV): made on first use
# from a python3 >= 3.11 found on PATH, filled and kept in step with pyproject.toml by
# scripts/pyenv.sh (`make install`), whatever ran before and whether or not a venv is
# activated. pip never runs on the system's interpreter. PYTHON=... (a venv's python, or an
# interpreter that already has everything) overrides; BASE_PYTHON=... picks what the venv is
# made from.
VENV ?= .venv
PYTHON ?= $(VENV)/bin/python
PYTEST_ARGS ?=
# Test processes for make test / make integration (pytest-xdist, whole files per process:
# the integration tests mostly wait on polls and windows, ~4% of a core serially). Each
# process starts its own control plane. TEST_WORKERS=0 runs them in this one process.
TEST_WORKERS ?= 3
XDIST = -n $(TEST_WORKERS) --dist loadfile
DEMO_ARGS ?=
# K8S_VERSION=v1.37.2 (command line or environment): the Kubernetes release that make demo,
# test, integration, api-paths and e2e build and run (tests/controlplane/build.sh, cached per
# version). Unset: the one default, tests/controlplane/go/go.mod's (docs/kubernetes-versions.md).

# Recipes and the scripts they run (`python3 -m ...`, console scripts, pytest's subprocesses)
# find that interpreter's environment first on PATH, as if it were activated.
ifneq ($(findstring /,$(PYTHON)),)
export PATH := $(abspath $(dir $(PYTHON))):$(PATH)
endif

.PHONY: help install controlplane apiserver test-tools test-plan test unit integration api-paths lint demo bench bench-quick bench-container e2e \
	chart-test image image-test image-reproducible image-lock image-zstd sign verify actionlint \
	chart-publish push deploy cluster-e2e dns-bench kind-node-image monitoring-test clean

help:
	@echo "The two commands (README.md: what they need, how long they take, cold and warm):"
	@echo "  make demo          the real autoscaler against kube-apiserver + etcd built here, step by"
	@echo "                     step (DEMO_ARGS=--steps=N: the first N steps); then it cleans up"
	@echo "  make test          unit + integration tests; says first what it builds (once, from Go"
	@echo "                     modules: the control plane, helm, promtool, kubectl)"
	@echo "  make unit          tests/unit and tests/repo; builds nothing (the chart and alert-rule"
	@echo "                     tests run once helm and promtool are built, else they skip)"
	@echo "  make lint          ruff + mypy --strict + actionlint (.github/workflows)"
	@echo ""
	@echo "Developing:"
	@echo "  make install       the venv $(VENV): made and filled (editable) when missing or stale;"
	@echo "                     every target that needs the package runs it first"
	@echo "  make integration   the integration tests only (a real kube-apiserver + etcd)"
	@echo "  make api-paths K8S_VERSION=v1.32.13  the integration tests of the API paths that"
	@echo "                     change across Kubernetes releases, against that one"
	@echo "  make apiserver     build kube-apiserver + etcd (what make demo and make test start)"
	@echo "  make controlplane  the same, plus the upstream autoscaler the benchmarks compare with"
	@echo "  make test-tools    build helm and promtool (make test builds them)"
	@echo "  make chart-test    the Helm chart's tests (builds helm)"
	@echo "  make monitoring-test  the alert rules with promtool (builds promtool)"
	@echo "  make actionlint    lint .github/workflows (part of make lint)"
	@echo "  make clean         remove build outputs and the test and lint caches (not $(VENV), .cache/)"
	@echo ""
	@echo "Variables:"
	@echo "  TEST_WORKERS=N     test processes for make test / integration (default $(TEST_WORKERS); 0: one)"
	@echo "  PYTEST_ARGS='...'  more pytest arguments (e.g. PYTEST_ARGS='-k explain -x')"
	@echo "  DEMO_ARGS=--steps=N  walk only the demo's first N steps"
	@echo "  PYTHON=PATH        an interpreter to use instead of $(VENV) (a venv is filled; any"
	@echo "                     other must have everything already)"
	@echo "  BASE_PYTHON=PATH   what $(VENV) is made from (default: the first Python >= 3.11 on PATH)"
	@echo "  K8S_VERSION=vX.Y.Z the Kubernetes release of the control plane, for any target"
	@echo "                     (default and the tested ones: docs/kubernetes-versions.md)"
	@echo ""
	@echo "Benchmarks, image, release, clusters:"
	@echo "  make bench         benchmarks at 1k/15k/65k/130k nodes vs upstream (long); bench-quick: 1k/5k"
	@echo "  make bench-container  our image vs upstream's binary in a scratch image (podman; host lock)"
	@echo "  make image         build the multi-platform OCI image index (docs/container-image.md)"
	@echo "  make push IMAGE=registry/name:tag   push the index to any OCI registry"
	@echo "  make deploy IMAGE=... KUBECONFIG=...   apply manifests/ with that image (WAIT=0: no"
	@echo "                     rollout wait); overlays and the chart: docs/migration.md"
	@echo "  make image-test    push to a local registry, pull and run amd64 + arm64 (+ quick checks of"
	@echo "                     the others, under qemu) as a kubelet would (root; host lock)"
	@echo "  make image-reproducible  the code layer, manifests and index made again from a fresh"
	@echo "                     wheel must give the same digests (the rest: image/lock.json)"
	@echo "  make image-zstd    the zstd variant of the index (about 20% smaller to pull)"
	@echo "  make image-lock    write image/lock.json from a build (an input changed on purpose)"
	@echo "  make sign IMAGE=name@sha256:... KEY=cosign.key  sign the index and every manifest, attest"
	@echo "                     SBOM + SLSA provenance (cosign; no KEY: keyless, the release workflow)"
	@echo "  make verify IMAGE=... KEY=cosign.pub  cosign verify + verify-attestation, SBOM vs image"
	@echo "  make chart-publish CHART_REPO=oci://registry/path  push the chart as an OCI artifact"
	@echo "  make cluster-e2e   a real single-node cluster here (kubelet, containerd, kube-proxy, ...):"
	@echo "                     the manifest and the chart as Pods scaling CoreDNS (root; docs/development.md)"
	@echo "  make dns-bench     DNS under a load spike on that node: upstream, ours, ours + load, an HPA (root)"
	@echo "  make kind-node-image  a kind node image built here (podman; root; cached by its inputs)"
	@echo "  make e2e           kind end-to-end: a cluster (Docker, or rootful podman with the image"
	@echo "                     above), the manifest, CoreDNS scaled, a worker joins, Kubernetes'"
	@echo "                     own DNS-autoscaling spec, host left clean"

# Every time (silent and quick when ready): the stamp ($(VENV)/.cpa-installed) lives in the
# venv it describes and is checked against it, so a removed or stale venv recovers.
install:
	@bash scripts/pyenv.sh "$(PYTHON)" "$(VENV)"

controlplane:
	bash tests/controlplane/build.sh

# kube-apiserver + etcd only: without the upstream autoscaler the benchmarks compare with.
APISERVER_BUILD = CPA_SKIP_UPSTREAM=1 bash tests/controlplane/build.sh >/dev/null
apiserver:
	@$(APISERVER_BUILD)

# The control plane built before pytest starts its test processes (whose output xdist does
# not show): a first build's progress is seen, and made once. Without Go the integration
# tests skip with their reason; a failed build is theirs to report.
TEST_PLANE = @command -v go >/dev/null 2>&1 && { $(APISERVER_BUILD) || \
	echo "make: the control plane did not build; the integration tests will fail" >&2; } || true

# helm and promtool (built once from their Go modules) for the chart and alert-rule tests,
# which would skip without them.
test-tools:
	@bash scripts/install-helm.sh >/dev/null
	@bash scripts/install-promtool.sh >/dev/null

# What make test will build and how long it took when measured (README.md), before it starts.
test-plan:
	@bash scripts/test-plan.sh "$(TEST_WORKERS)"

test: test-plan install test-tools
	$(TEST_PLANE)
	$(PYTHON) -m pytest -q $(XDIST) --durations=30 $(PYTEST_ARGS)

# Builds nothing: the chart (helm) and alert-rule (promtool) tests of tests/repo run when
# those are built (make test, test-tools, chart-test, monitoring-test), else they skip.
unit: install
	$(PYTHON) -m pytest -q tests/unit tests/repo $(PYTEST_ARGS)

integration: install
	$(TEST_PLANE)
	$(PYTHON) -m pytest -q $(XDIST) -m integration tests/integration $(PYTEST_ARGS)

# The integration tests marked api_paths (first list and its fallbacks, watch resume, Scale
# writes, Lease, ConfigMap writes, the load axis' Pod list): what CI runs against the oldest
# and newest Kubernetes supported (docs/kubernetes-versions.md).
api-paths: install
	$(TEST_PLANE)
	$(PYTHON) -m pytest -q $(XDIST) -m "integration and api_paths" tests/integration $(PYTEST_ARGS)

lint: install
	$(PYTHON) -m ruff check .
	$(PYTHON) -m mypy --strict cpa tests bench
	$(PYTHON) -m mypy --strict -p ocibuild
	@$(MAKE) --no-print-directory actionlint

# The workflows (.github/workflows), with actionlint built from its Go module once
# (scripts/pinned-tool.sh).
actionlint:
	"$$(bash scripts/pinned-tool.sh actionlint)" -no-color

demo: install apiserver
	$(PYTHON) scripts/demo.py $(DEMO_ARGS)

bench: install controlplane
	$(PYTHON) -m bench.run

# Podman networks and namespaces: run it under the host lock on a shared machine.
bench-container: install controlplane
	$(PYTHON) -m bench.container $(BENCH_ARGS)

bench-quick: install controlplane
	$(PYTHON) -m bench.run --quick

# install: image/ocibuild fetches the wheels with the venv's pip (`python3 -m pip download`).
image: install
	bash image/build.sh

# The index `make image` wrote, pushed with crane (image/tools.sh builds it once).
push: install
	@test -n "$(IMAGE)" || { echo "usage: make push IMAGE=registry/name:tag"; exit 2; }
	bash image/push.sh "$(IMAGE)"

# kubectl apply -k of manifests/ with the image swapped (kustomize `images:`). KUBECONFIG,
# KUBECTL and WAIT (seconds for the rollout, 0: none) reach scripts/deploy.sh from the
# command line (make exports command-line variables to the recipe).
deploy:
	@test -n "$(IMAGE)" || { echo "usage: make deploy IMAGE=registry/name:tag|@sha256:... [KUBECONFIG=...]"; exit 2; }
	bash scripts/deploy.sh "$(IMAGE)"

# Uses the index `make image` wrote (building it when missing); podman pulls it from a
# local registry. Changes the host (netns, binfmt_misc): run under the host lock.
image-test: install apiserver
	bash -c '. image/env.sh && image_setup && bash image/build.sh >/dev/null && exec $(PYTHON) -m pytest -q -s tests/image $(PYTEST_ARGS)'

image-reproducible: install
	bash image/reproducible.sh

# The zstd variant (docs/container-image.md): the same images, layers in zstd (about 20%
# less to pull), in .cache/image/out-zstd, tagged <version>-zstd; `make push` it with
# CPA_IMAGE_OUT=.cache/image/out-zstd. gzip stays the default.
# ZSTD_PLATFORMS: a subset (default: every platform `make image` built).
image-zstd: install
	@test -f .cache/image/out/digests.json || { echo "run \`make image\` first"; exit 2; }
	PYTHONPATH=image python3 -m ocibuild recompress --out .cache/image/out \
		--dest .cache/image/out-zstd --compression zstd --platforms "$(ZSTD_PLATFORMS)"

image-lock: install
	CPA_IMAGE_LOCK=update CPA_IMAGE_FORCE=1 bash image/build.sh >/dev/null

chart-publish:
	@test -n "$(CHART_REPO)" || { echo "usage: make chart-publish CHART_REPO=oci://registry/path"; exit 2; }
	bash scripts/publish-chart.sh "$(CHART_REPO)"

# KEY: a cosign key pair's private (sign) or public (verify) half; none: keyless.
sign: install
	@test -n "$(IMAGE)" || { echo "usage: make sign IMAGE=registry/name@sha256:... [KEY=cosign.key]"; exit 2; }
	bash image/sign.sh sign "$(IMAGE)" "$(KEY)"

verify: install
	@test -n "$(IMAGE)" || { echo "usage: make verify IMAGE=registry/name@sha256:... [KEY=cosign.pub]"; exit 2; }
	bash image/sign.sh verify "$(IMAGE)" "$(KEY)"

# Builds (once) the node binaries, helm and the images, then runs tests/cluster (not part of
# `make test`: it needs root and changes the host while it runs, then puts it back).
cluster-e2e: install
	bash tests/cluster/run.sh

# DNS served under a spike on cluster-e2e's node, four ways of scaling CoreDNS one after
# another (root; minutes; not part of `make test`; docs/performance.md).
dns-bench: install
	bash scripts/dns-bench.sh

# Podman's image store: run it under the host lock on a shared machine (docs/kind.md).
kind-node-image: install
	bash image/kind-node/build.sh

# Creates and deletes a kind cluster (podman/Docker, iptables, mounts): host lock.
e2e: install
	bash scripts/e2e-kind.sh

chart-test: install
	bash scripts/install-helm.sh
	$(PYTHON) -m pytest -q tests/repo/test_chart.py

# The alert rules (promtool check/test rules) and the dashboard's queries.
monitoring-test: install
	bash scripts/install-promtool.sh
	$(PYTHON) -m pytest -q tests/repo/test_monitoring.py

clean:
	rm -rf build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
