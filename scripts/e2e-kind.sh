#!/usr/bin/env bash
# `make e2e`: the autoscaler in a kind cluster, as a user with a laptop runs it
# (docs/kind.md).
#
#   1. a kind cluster of one node, with Docker or rootful podman
#      (KIND_EXPERIMENTAL_PROVIDER=podman): from KIND_NODE_IMAGE, or with podman from the
#      node image `make kind-node-image` builds here (kind's own kindest/node with Docker);
#   2. our image from `make image`, loaded into the nodes (`kind load image-archive`);
#   3. manifests/kube-dns-autoscaler.yaml applied unchanged but for the image; CoreDNS
#      (kubeadm's Deployment) must get the replicas the addon's parameters give for the
#      cluster: 1 for one node;
#   4. a worker joins (a node container made as kind makes its workers, then `kubeadm
#      join`): the count must follow to 2 (preventSinglePointFailure), and CoreDNS's second
#      pod runs on the new node;
#   5. a live switch of the ConfigMap to ladder mode; the autoscaler's process seen from its
#      node: uid 65534, read-only root;
#   6. Kubernetes' own spec for this job, "[sig-autoscaling] [Feature:KubeDNSAutoscaler] DNS
#      horizontal autoscaling ... should scale kube-dns pods in both nonfaulty and faulty
#      scenarios", built from the k8s.io/kubernetes module of the cluster's version
#      (tests/kind/k8s-e2e) and run with --ginkgo.focus on it: exactly that spec must run
#      and pass; its steps are printed;
#   7. the cluster deleted; as root with podman, the host checked against a snapshot
#      taken before (tests/kind/host_check.py): no container, volume, network, iptables
#      chain, link, mount, cgroup or changed sysctl may be left.
#
# Every step prints its time. Without Docker or podman, or as a non-root podman user, it
# fails saying what is missing (this is a test: it never skips).
#
# Environment:
#   KIND_EXPERIMENTAL_PROVIDER  docker | podman (default: docker when its engine answers,
#                             else podman)
#   KIND_CLUSTER=cpa-e2e      cluster name (an existing cluster of that name is an error)
#   KIND_NODE_IMAGE=          node image (default: see 1.)
#   K8S_VERSION=              the cluster's Kubernetes release (default: the one
#                             tests/controlplane/go/go.mod pins); the node image, kubectl and
#                             the e2e spec are built for it (with Docker: kindest/node:<it>)
#   KIND=, KUBECTL=           the binaries (default: built from their Go modules, or on PATH)
#   KEEP_CLUSTER=0            1 = leave the cluster running: its kubeconfig is kept under
#                             .cache/kind/<cluster>/ and the commands that delete it and put
#                             the host back are printed (a run killed by SIGKILL leaves its
#                             host snapshot there too: the next run puts the host back first)
#   IMAGE=localhost/cluster-proportional-autoscaler-py:e2e   our image's name on the nodes
#   TIMEOUT=180               seconds to wait for each condition
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cluster="${KIND_CLUSTER:-cpa-e2e}"
image="${IMAGE:-localhost/cluster-proportional-autoscaler-py:e2e}"
timeout="${TIMEOUT:-180}"
keep="${KEEP_CLUSTER:-0}"
k8s_version_given="${K8S_VERSION:-}"
k8s_version="${K8S_VERSION:-$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' \
    "$repo/tests/controlplane/go/go.mod")}"
export K8S_VERSION="$k8s_version"   # every build below: the node image, kubectl, the e2e spec
# The spec of Kubernetes' own suite run in step 6 (a regular expression for --ginkgo.focus).
k8s_spec='DNS horizontal autoscaling .*should scale kube-dns pods in both nonfaulty and faulty scenarios'
manifest="$repo/manifests/kube-dns-autoscaler.yaml"
start=$SECONDS
step_start=$SECONDS

log() { printf '[e2e] %s\n' "$*" >&2; }
die() { printf '[e2e] FAIL: %s\n' "$*" >&2; exit 1; }
step() {   # step DONE-MESSAGE: logs it with the time since the previous step
    log "$1 ($((SECONDS - step_start)) s)"
    step_start=$SECONDS
}

# --- the engine ------------------------------------------------------------------------
provider="${KIND_EXPERIMENTAL_PROVIDER:-}"
if [[ -z $provider ]]; then
    if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
        provider=docker
    elif command -v podman >/dev/null 2>&1; then
        provider=podman
    else
        die "no container engine: install Docker, or podman (run as root: kind's nodes need rootful podman here)"
    fi
fi
case $provider in
    docker) docker info >/dev/null 2>&1 || die "docker: no engine answers (docker info)" ;;
    podman)
        command -v podman >/dev/null 2>&1 || die "podman is not installed"
        [[ $(id -u) -eq 0 ]] || die "podman: run as root (rootful podman; rootless needs cgroup delegation, see docs/kind.md)"
        # shellcheck source=image/env.sh
        source "$repo/image/env.sh"
        image_containers_conf   # runc, cgroupfs, ulimits within the hard limits
        # Debian's podman only recommends what kind's nodes need of it: iptables, which
        # its network backend (netavark) runs to set up every network ("netavark: No such
        # file or directory" without it), and aardvark-dns, which answers the nodes'
        # names (a worker joins "<cluster>-control-plane:6443"). nftables: the host check
        # deletes with nft the tables netavark made on a host that had none.
        wanted=()
        command -v iptables >/dev/null 2>&1 || wanted+=(iptables)
        [[ -x /usr/lib/podman/aardvark-dns ]] || wanted+=(aardvark-dns)
        command -v nft >/dev/null 2>&1 || wanted+=(nftables)
        if [[ ${#wanted[@]} -gt 0 ]]; then
            command -v apt-get >/dev/null 2>&1 \
                || die "podman: install ${wanted[*]} (netavark's firewall; names on its networks)"
            log "installing ${wanted[*]} (Debian packages)"
            DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
                "${wanted[@]}" >&2
        fi
        # A network of the cluster's own (kind's default "kind" may hold other clusters):
        # created by kind, removed at the end.
        export KIND_EXPERIMENTAL_PODMAN_NETWORK="${KIND_EXPERIMENTAL_PODMAN_NETWORK:-$cluster}"
        ;;
    *) die "KIND_EXPERIMENTAL_PROVIDER=$provider: docker or podman" ;;
esac
export KIND_EXPERIMENTAL_PROVIDER=$provider
engine=$provider
network="${KIND_EXPERIMENTAL_PODMAN_NETWORK:-kind}"

# --- the tools -------------------------------------------------------------------------
kind_bin="${KIND:-}"
if [[ -z $kind_bin ]]; then
    kind_bin="$(bash "$repo/scripts/go-tool.sh" kind sigs.k8s.io/kind v0.33.0 | tail -n 1)"
fi
kubectl_bin="${KUBECTL:-}"
if [[ -z $kubectl_bin ]]; then
    kubectl_bin="$(CPA_SKIP_UPSTREAM=1 bash "$repo/tests/controlplane/build.sh" node | tail -n 1)/kubectl"
fi
kind() { "$kind_bin" "$@"; }
kubectl() { "$kubectl_bin" "$@"; }
if kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    die "a kind cluster named $cluster exists already: delete it (kind delete cluster --name $cluster; the next run puts the host back) or set KIND_CLUSTER"
fi
node_image="${KIND_NODE_IMAGE:-}"
if [[ -z $node_image && $provider == podman ]]; then
    node_image="$(bash "$repo/image/kind-node/build.sh" | tail -n 1)"
elif [[ -z $node_image && -n $k8s_version_given ]]; then
    node_image="kindest/node:$k8s_version"
fi
ref="$(bash "$repo/image/build.sh" | tail -n 1)"   # oci:<layout>:<tag>
e2e_test="$(bash "$repo/tests/kind/k8s-e2e/build.sh" | tail -n 1)"
step "tools and images ready: kind $("$kind_bin" version | cut -d' ' -f2), provider $provider, Kubernetes $k8s_version, node image ${node_image:-the default of kind}"

# --- the host: one test cluster at a time; its snapshot (root + podman) ----------------
# As root, the lock `make cluster-e2e` holds (tests/cluster/hostlock.sh): the host check
# below puts back sysctls and removes chains and cgroups that appear during the run, which
# would be that cluster's if it ran at the same time. Held until this script exits.
if [[ $(id -u) -eq 0 ]]; then
    # shellcheck source=tests/cluster/hostlock.sh
    source "$repo/tests/cluster/hostlock.sh"
    host_lock_claim "make e2e (kind cluster $cluster)" || die "the host is busy (above)"
fi
workdir="$(mktemp -d)"
# The kubeconfig and the host snapshot outlive the run in one place: a kept cluster's are
# used by hand later, and a killed run's snapshot (SIGKILL: no cleanup) puts the host back
# at the next run's start, its sysctls included.
state="$repo/.cache/kind/$cluster"
mkdir -p "$state"
rm -f "$state/kubeconfig"
host_check=0
if [[ $provider == podman ]]; then
    if [[ -f $state/host.pickle ]]; then
        log "a run of $cluster did not finish (killed, or its kept cluster deleted by hand): putting the host back as its snapshot says"
        if [[ $network == "$cluster" ]] && podman network exists "$network" 2>/dev/null; then
            podman network rm "$network" >/dev/null
        fi
        (cd "$repo" && python3 -m tests.kind.host_check restore "$state/host.pickle" \
            --engine podman) >&2 \
            || die "the host still differs from before that run (above): put it back by hand, then remove $state/host.pickle"
        rm -f "$state/host.pickle"
    fi
    (cd "$repo" && python3 -m tests.kind.host_check snapshot "$state/host.pickle" \
        --engine podman >/dev/null)
    [[ $keep == 1 ]] || host_check=1
fi
made_modules=0
if [[ ! -d /lib/modules ]]; then
    # kind mounts the host's /lib/modules into every node; podman refuses a missing source.
    mkdir /lib/modules
    made_modules=1
fi

created=0
cleanup() {
    local rc=$?
    trap - EXIT
    if [[ $rc -ne 0 && -f $state/kubeconfig ]]; then
        log "diagnostics:"
        kubectl get nodes -o wide >&2 || true
        kubectl -n kube-system get deploy,pods -o wide >&2 || true
        kubectl -n kube-system logs deploy/kube-dns-autoscaler --tail=50 >&2 || true
    fi
    if [[ $created -eq 1 && $keep != 1 ]]; then
        step_start=$SECONDS
        kind delete cluster --name "$cluster" >/dev/null 2>&1 || rc=1
        if [[ $provider == podman ]] && podman network exists "$network" 2>/dev/null; then
            podman network rm "$network" >/dev/null || rc=1
        fi
        step "deleted the cluster"
    fi
    if [[ $made_modules -eq 1 && $keep != 1 ]]; then rmdir /lib/modules 2>/dev/null || true; fi
    if [[ $host_check -eq 1 ]]; then
        (cd "$repo" && python3 -m tests.kind.host_check restore "$state/host.pickle" \
            --engine podman) >&2 || rc=1
    fi
    [[ $keep == 1 ]] || rm -rf "$state"
    if [[ $created -eq 1 && $keep == 1 ]]; then
        log "the cluster is kept: export KUBECONFIG=$KUBECONFIG"
        log "  delete it and put the host back (sysctls, netavark's chains) with:"
        if [[ $provider == podman ]]; then
            log "  KIND_EXPERIMENTAL_PROVIDER=podman $kind_bin delete cluster --name $cluster && podman network rm $network"
            log "  (cd $repo && python3 -m tests.kind.host_check restore $state/host.pickle --engine podman && rm $state/host.pickle)"
            log "  (or delete it only: the next make e2e puts the host back first)"
        else
            log "  $kind_bin delete cluster --name $cluster"
        fi
    fi
    rm -rf "$workdir"
    if declare -F host_lock_release >/dev/null; then host_lock_release; fi
    log "$( ((rc == 0)) && echo PASS || echo FAIL) in $((SECONDS - start)) s"
    exit "$rc"
}
trap cleanup EXIT

# --- 1. the cluster --------------------------------------------------------------------
export KUBECONFIG="$state/kubeconfig"
cat >"$workdir/kind.yaml" <<'YAML'
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
nodes:
  - role: control-plane
YAML
created=1
kind create cluster --name "$cluster" --config "$workdir/kind.yaml" --kubeconfig "$KUBECONFIG" \
    --wait "${timeout}s" ${node_image:+--image "$node_image"}
step "cluster $cluster created (1 node)"

# --- 2. our image on the nodes ---------------------------------------------------------
layout="${ref#oci:}"
layout="${layout%:*}"
PYTHONPATH="$repo/image" python3 -m ocibuild kind-archive --layout "$layout" \
    --tag "${ref##*:}" --name "$image" --out "$workdir/image.tar" >/dev/null
kind load image-archive "$workdir/image.tar" --name "$cluster"
step "loaded $image (from $ref)"

# --- 3. the manifest, unchanged but for the image ----------------------------------------
sed -E "s#^([[:space:]]*image:[[:space:]]*).*cluster-proportional-autoscaler.*#\\1${image}#" \
    "$manifest" >"$workdir/manifest.yaml"
[[ $(diff "$manifest" "$workdir/manifest.yaml" | grep -c '^>') -eq 1 ]] \
    && grep -q "image: $image" "$workdir/manifest.yaml" \
    || die "could not swap (only) the image in $manifest"
kubectl apply -f "$workdir/manifest.yaml" >/dev/null
kubectl -n kube-system rollout status deployment/kube-dns-autoscaler --timeout="${timeout}s" >/dev/null
step "manifest applied, autoscaler Ready"

# The addon's parameters: linear, coresPerReplica 256, nodesPerReplica 16,
# preventSinglePointFailure, includeUnschedulableNodes (so every node counts).
expected_replicas() {
    local nodes cores from_cores from_nodes
    nodes="$(kubectl get nodes --no-headers | wc -l | tr -d ' ')"
    cores="$(kubectl get nodes -o jsonpath='{range .items[*]}{.status.allocatable.cpu}{"\n"}{end}' \
        | awk '/m$/ { sub(/m$/, ""); s += $1; next } { s += $1 * 1000 } END { printf "%d", (s + 999) / 1000 }')"
    from_cores=$(( (cores + 255) / 256 ))
    from_nodes=$(( (nodes + 15) / 16 ))
    (( from_cores < 1 )) && from_cores=1
    (( from_nodes < 1 )) && from_nodes=1
    (( nodes > 1 && from_nodes < 2 )) && from_nodes=2
    log "cluster: $nodes nodes, $cores cores -> $(( from_cores > from_nodes ? from_cores : from_nodes )) CoreDNS replicas"
    echo $(( from_cores > from_nodes ? from_cores : from_nodes ))
}
wait_replicas() {
    local want="$1" got="" deadline=$(( SECONDS + timeout ))
    while (( SECONDS < deadline )); do
        got="$(kubectl -n kube-system get deployment coredns -o jsonpath='{.spec.replicas}')"
        [[ $got == "$want" ]] && return 0
        sleep 1
    done
    die "coredns spec.replicas = ${got:-?}, expected $want after ${timeout}s"
}
wait_replicas "$(expected_replicas)"
kubectl -n kube-system get configmap kube-dns-autoscaler -o jsonpath='{.data.linear}' \
    | grep -q coresPerReplica || die "the autoscaler did not create its ConfigMap from --default-params"
step "CoreDNS scaled to $(kubectl -n kube-system get deployment coredns -o jsonpath='{.spec.replicas}'); ConfigMap created"

# --- 4. a worker joins -----------------------------------------------------------------
# kind cannot add a node to a cluster, so the node container is made as kind makes its
# workers (same image, network, labels, mounts; kind's delete removes it with the rest),
# and kubeadm joins it with a token from the control plane.
control_plane="$cluster-control-plane"
worker="$cluster-worker"
engine_image="$($engine inspect --format '{{.Config.Image}}' "$control_plane")"
run_args=(--name "$worker" --hostname "$worker" --detach --tty --privileged
          --label "io.x-k8s.kind.cluster=$cluster" --label "io.x-k8s.kind.role=worker"
          --tmpfs /tmp --tmpfs /run --volume /lib/modules:/lib/modules:ro
          --cgroupns=private -e "container=$engine")
if [[ $engine == podman ]]; then
    volume="$(podman volume create --label "$worker=true")"
    run_args+=(--net "$network" --volume "$volume:/var:suid,exec,dev")
else
    run_args+=(--net "$(docker inspect --format '{{range $k, $v := .NetworkSettings.Networks}}{{$k}}{{end}}' "$control_plane")"
               --volume /var --security-opt seccomp=unconfined --security-opt apparmor=unconfined
               --restart=on-failure:1 --init=false)
fi
$engine run "${run_args[@]}" "$engine_image" >/dev/null
deadline=$(( SECONDS + timeout ))
until [[ "$($engine exec "$worker" systemctl is-system-running 2>/dev/null || true)" =~ ^(running|degraded)$ ]]; do
    (( SECONDS < deadline )) || die "$worker: systemd did not come up in ${timeout}s"
    sleep 1
done
join="$($engine exec "$control_plane" kubeadm token create --print-join-command)"
# shellcheck disable=SC2086 # the join command's words
$engine exec "$worker" $join --skip-phases=preflight \
    --cri-socket unix:///run/containerd/containerd.sock >"$workdir/join.log" 2>&1 \
    || { tail -n 30 "$workdir/join.log" >&2; die "kubeadm join of $worker failed"; }
kind load image-archive "$workdir/image.tar" --name "$cluster" --nodes "$worker"
step "$worker joined"
wait_replicas "$(expected_replicas)"
step "CoreDNS followed to 2 replicas"
kubectl wait --for=condition=Ready "node/$worker" --timeout="${timeout}s" >/dev/null
kubectl -n kube-system rollout status deployment/coredns --timeout="${timeout}s" >/dev/null
kubectl -n kube-system get pods -l k8s-app=kube-dns -o wide >&2
step "$worker Ready; both CoreDNS pods Ready"

# --- 5. a live parameter change, and the container's identity --------------------------
log "switching the ConfigMap to ladder mode (3 replicas)"
kubectl -n kube-system create configmap kube-dns-autoscaler \
    --from-literal=ladder='{"nodesToReplicas":[[1,3]]}' --dry-run=client -o yaml \
    | kubectl replace -f - >/dev/null
wait_replicas 3
step "ladder: CoreDNS at 3 replicas"
# The image has no shell and no tools (nothing to exec but the autoscaler), so the process
# is looked at from its node: its uid, and its root mount.
pod_node="$(kubectl -n kube-system get pods -l k8s-app=kube-dns-autoscaler \
    -o jsonpath='{.items[0].spec.nodeName}')"
cid="$($engine exec "$pod_node" crictl ps --name autoscaler -q | head -n 1)"
pid="$($engine exec "$pod_node" crictl inspect -o go-template --template '{{.info.pid}}' "$cid")"
uid="$($engine exec "$pod_node" awk '/^Uid:/ { print $2 }' "/proc/$pid/status")"
[[ $uid == 65534 ]] || die "autoscaler runs as uid $uid, expected 65534"
root_opts="$($engine exec "$pod_node" awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo")"
[[ $root_opts == ro* ]] || die "the autoscaler's root filesystem is mounted $root_opts, expected ro"
step "autoscaler runs as 65534 on a read-only root"

# --- 6. Kubernetes' own spec -------------------------------------------------------------
# The spec changes the ConfigMap's parameters three times, deletes the ConfigMap and expects
# it back, deletes the autoscaler's Pod and expects scaling to go on; it puts the
# parameters back at its end. --ginkgo.v prints each of its steps.
log "Kubernetes' own spec, from k8s.io/kubernetes $k8s_version: $k8s_spec"
rc=0
"$e2e_test" --kubeconfig="$KUBECONFIG" --kubectl-path="$kubectl_bin" --provider=skeleton \
    --ginkgo.focus="$k8s_spec" --ginkgo.v --ginkgo.no-color --ginkgo.timeout=15m \
    >"$workdir/k8s-e2e.log" 2>&1 || rc=$?
grep -E '^ *STEP: |^Ran [0-9]+ of [0-9]+ Specs|^(SUCCESS|FAIL)!' "$workdir/k8s-e2e.log" \
    | sed -E 's/^ +//; s/^/[e2e]   /' >&2 || true
if [[ $rc -ne 0 ]] || ! grep -qE '^Ran 1 of [0-9]+ Specs' "$workdir/k8s-e2e.log"; then
    tail -n 60 "$workdir/k8s-e2e.log" >&2
    die "Kubernetes' own DNS-autoscaling spec failed (exit $rc) or did not run exactly once"
fi
step "Kubernetes' own spec passed: $(grep -oE 'Ran 1 of [0-9]+ Specs in [0-9.]+ seconds' "$workdir/k8s-e2e.log")"
