#!/usr/bin/env bash
# End-to-end test in a kind cluster: build the image, run it as the cluster's DNS
# autoscaler (manifests/kube-dns-autoscaler.yaml, image swapped) and check that CoreDNS
# gets the replica count the addon's parameters give for this cluster.
#
#   scripts/e2e-kind.sh            # or: make e2e
#
# Needs docker (with a reachable engine), kind and kubectl. Without docker or kind it
# prints "skipped: ..." and exits 0, so it is safe in any CI job.
#
# Environment:
#   KIND_CLUSTER=cpa-e2e      cluster name; an existing cluster of that name is reused
#                             and left running
#   KIND_WORKERS=2            worker nodes of a new cluster (plus one control plane)
#   KIND_NODE_IMAGE=          node image for a new cluster (default: kind's own)
#   KEEP_CLUSTER=0            1 = keep a cluster this script created
#   IMAGE=cluster-proportional-autoscaler-py:e2e   tag to build and load
#   BASE_IMAGE=               base image build-arg (the Dockerfile's default:
#                             debian:bookworm-slim)
#   TIMEOUT=180               seconds to wait for each condition
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cluster="${KIND_CLUSTER:-cpa-e2e}"
workers="${KIND_WORKERS:-2}"
image="${IMAGE:-cluster-proportional-autoscaler-py:e2e}"
timeout="${TIMEOUT:-180}"
keep="${KEEP_CLUSTER:-0}"
manifest="${repo_root}/manifests/kube-dns-autoscaler.yaml"

log() { printf '[e2e] %s\n' "$*" >&2; }
die() { printf '[e2e] FAIL: %s\n' "$*" >&2; exit 1; }

# --- prerequisites (absent tools are a skip, not a failure) ----------------------------
for tool in docker kind; do
  if ! command -v "${tool}" >/dev/null 2>&1; then
    echo "skipped: docker/kind not found (${tool} is not on PATH)"
    exit 0
  fi
done
if ! docker info >/dev/null 2>&1; then
  echo "skipped: docker/kind not found (docker is installed but no engine is reachable)"
  exit 0
fi
command -v kubectl >/dev/null 2>&1 || die "kubectl is required"

# --- cluster ---------------------------------------------------------------------------
created=0
workdir="$(mktemp -d)"
cleanup() {
  local rc=$?
  if [[ ${rc} -ne 0 ]] && [[ -n "${KUBECONFIG:-}" ]] && [[ -f "${KUBECONFIG}" ]]; then
    log "diagnostics:"
    kubectl -n kube-system get deploy,pods -o wide >&2 || true
    kubectl -n kube-system logs deploy/kube-dns-autoscaler --tail=50 >&2 || true
  fi
  if [[ ${created} -eq 1 ]] && [[ "${keep}" != "1" ]]; then
    log "deleting kind cluster ${cluster}"
    kind delete cluster --name "${cluster}" >/dev/null 2>&1 || true
  fi
  rm -rf "${workdir}"
  exit "${rc}"
}
trap cleanup EXIT

export KUBECONFIG="${workdir}/kubeconfig"
if kind get clusters 2>/dev/null | grep -qx "${cluster}"; then
  log "reusing kind cluster ${cluster}"
  kind export kubeconfig --name "${cluster}" --kubeconfig "${KUBECONFIG}" >/dev/null
else
  {
    echo "kind: Cluster"
    echo "apiVersion: kind.x-k8s.io/v1alpha4"
    echo "nodes:"
    echo "  - role: control-plane"
    for ((i = 0; i < workers; i++)); do echo "  - role: worker"; done
  } >"${workdir}/kind.yaml"
  log "creating kind cluster ${cluster} (1 control plane + ${workers} workers)"
  node_image_args=()
  if [[ -n "${KIND_NODE_IMAGE:-}" ]]; then node_image_args=(--image "${KIND_NODE_IMAGE}"); fi
  created=1
  kind create cluster --name "${cluster}" --config "${workdir}/kind.yaml" \
    --kubeconfig "${KUBECONFIG}" --wait "${timeout}s" ${node_image_args[@]+"${node_image_args[@]}"}
fi

# --- image -----------------------------------------------------------------------------
build_args=()
if [[ -n "${BASE_IMAGE:-}" ]]; then
  build_args=(--build-arg "BASE_IMAGE=${BASE_IMAGE}")
fi
log "building ${image}"
docker build -t "${image}" \
  --build-arg "VCS_REF=$(git -C "${repo_root}" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  ${build_args[@]+"${build_args[@]}"} "${repo_root}"
log "loading ${image} into ${cluster}"
kind load docker-image "${image}" --name "${cluster}"

# --- install: replace kube-system's DNS autoscaler (kind ships none) --------------------
if kubectl -n kube-system get deployment kube-dns-autoscaler >/dev/null 2>&1; then
  log "replacing the existing kube-system/kube-dns-autoscaler"
  kubectl -n kube-system delete deployment kube-dns-autoscaler --wait=true
fi
# A stale ConfigMap from an earlier run would override --default-params.
kubectl -n kube-system delete configmap kube-dns-autoscaler --ignore-not-found
sed -E "s#^([[:space:]]*image:[[:space:]]*).*cluster-proportional-autoscaler.*#\\1${image}#" \
  "${manifest}" >"${workdir}/manifest.yaml"
grep -q "image: ${image}" "${workdir}/manifest.yaml" || die "could not swap the image in ${manifest}"
kubectl apply -f "${workdir}/manifest.yaml"
kubectl -n kube-system rollout status deployment/kube-dns-autoscaler --timeout="${timeout}s"

# --- expected replicas -----------------------------------------------------------------
# The addon's defaults: linear coresPerReplica 256, nodesPerReplica 16,
# preventSinglePointFailure, includeUnschedulableNodes (so every node counts).
nodes="$(kubectl get nodes --no-headers | wc -l | tr -d ' ')"
cores="$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.allocatable.cpu}{"\n"}{end}' \
  | awk '/m$/ { sub(/m$/, ""); s += $1; next } { s += $1 * 1000 } END { printf "%d", (s + 999) / 1000 }')"
ceil_div() { echo $(( ($1 + $2 - 1) / $2 )); }
from_cores="$(ceil_div "${cores}" 256)"
from_nodes="$(ceil_div "${nodes}" 16)"
if (( from_cores < 1 )); then from_cores=1; fi
if (( from_nodes < 1 )); then from_nodes=1; fi
if (( nodes > 1 && from_nodes < 2 )); then from_nodes=2; fi  # preventSinglePointFailure
expected=$(( from_cores > from_nodes ? from_cores : from_nodes ))
log "cluster: ${nodes} nodes, ${cores} cores -> expecting ${expected} CoreDNS replicas"

wait_replicas() {
  local want="$1" got="" deadline=$(( SECONDS + timeout ))
  while (( SECONDS < deadline )); do
    got="$(kubectl -n kube-system get deployment coredns -o jsonpath='{.spec.replicas}')"
    if [[ "${got}" == "${want}" ]]; then
      log "coredns spec.replicas = ${got}"
      return 0
    fi
    sleep 2
  done
  die "coredns spec.replicas = ${got:-?}, expected ${want} after ${timeout}s"
}

wait_replicas "${expected}"
kubectl -n kube-system get configmap kube-dns-autoscaler -o jsonpath='{.data.linear}' | grep -q coresPerReplica \
  || die "the autoscaler did not create its ConfigMap from --default-params"

# --- a live parameter change: ladder mode, no restart ----------------------------------
ladder_replicas=$(( expected + 1 ))
log "switching the ConfigMap to ladder mode (${ladder_replicas} replicas)"
kubectl -n kube-system create configmap kube-dns-autoscaler \
  --from-literal=ladder="{\"nodesToReplicas\":[[1,${ladder_replicas}]]}" \
  --dry-run=client -o yaml | kubectl replace -f -
wait_replicas "${ladder_replicas}"

# --- the container really runs as nobody on a read-only root ----------------------------
uid="$(kubectl -n kube-system exec deploy/kube-dns-autoscaler -- id -u)"
[[ "${uid}" == "65534" ]] || die "autoscaler runs as uid ${uid}, expected 65534"
if kubectl -n kube-system exec deploy/kube-dns-autoscaler -- touch /probe-write 2>/dev/null; then
  die "root filesystem is writable"
fi

log "PASS"
