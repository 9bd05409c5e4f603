#!/usr/bin/env bash
# `make kind-node-image`: a kind node image assembled here, for hosts that cannot pull
# kind's kindest/node (no registry) and where `kind build node-image` cannot run (it needs
# the docker CLI and downloads its base image and the component images). See
# docs/kind.md for the contract it meets and how it differs from kindest/node.
#
# What goes in:
# - a Debian bookworm root filesystem (mmdebstrap) with systemd, containerd, runc, the CNI
#   plugins, iptables, conntrack, iproute2 (packages.txt), and files/: the entrypoint, the
#   units kubeadm expects (kubelet with its kubeadm drop-in, containerd), containerd's
#   configuration, the pod network (cpa-cni), kind's manifests;
# - kubeadm, kubelet, kubectl of the Kubernetes release K8S_VERSION names (default: the one
#   tests/controlplane/go/go.mod pins; tests/controlplane/build.sh kind), and crictl
#   (sigs.k8s.io/cri-tools);
# - in the node's containerd (k8s.io namespace), imported here with the node's own
#   containerd: every image `kubeadm config images list` names, each one our binary in a
#   distroless-style image (image/ocibuild/kindnode.py): kube-apiserver,
#   kube-controller-manager, kube-scheduler, kube-proxy (with iptables), etcd (etcd/, the
#   version kubeadm deploys), CoreDNS (scripts/build-coredns.sh, that version) and pause
#   (tests/cluster/standin).
#
# Cached by its inputs: the image's tag is a digest of everything that decides its content
# (this directory, the image writer, the Go modules' go.mod/go.sum and versions, the stand-in's
# source, the Debian suite); when podman has that tag, nothing is built. The last line on
# stdout is the image's name. Needs root, podman and mmdebstrap (installed where missing).
# Changes the host only through podman's image store (and mounts in a private namespace
# while it runs): on a shared machine, run it under the host lock like the other podman work.
#
# Environment: K8S_VERSION (above); KIND_NODE_FORCE=1 rebuilds even when the tag exists.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=image/env.sh
source "$repo/image/env.sh"
log() { printf '[kind-node] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

suite=bookworm
sources=("deb http://deb.debian.org/debian $suite main"
         "deb http://deb.debian.org/debian $suite-updates main"
         "deb http://deb.debian.org/debian-security $suite-security main")
crictl_version=v1.34.0
cache="$repo/.cache/kind-node"
start=$SECONDS

[[ $(id -u) -eq 0 ]] || die "needs root (mmdebstrap installs packages into the tree; rootful podman)"
image_ensure_tools
command -v mmdebstrap >/dev/null || image_ensure_build_tools "linux/$(go env GOARCH)"
image_containers_conf

# ------------------------------------------------------------------ the inputs' digest
default_version="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' \
    "$repo/tests/controlplane/go/go.mod")"
k8s_version="${K8S_VERSION:-$default_version}"
export K8S_VERSION="$k8s_version"
inputs() {
    (cd "$here" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
    (cd "$repo" && sha256sum image/ocibuild/kindnode.py image/ocibuild/oci.py \
        image/ocibuild/rootfs.py image/ocibuild/platforms.py image/env.sh \
        tests/controlplane/build.sh tests/controlplane/go/go.mod tests/controlplane/go/go.sum \
        tests/controlplane/wrapper.sh \
        tests/cluster/standin/go.mod tests/cluster/standin/main.go scripts/build-coredns.sh \
        scripts/go-tool.sh)
    echo "suite=$suite crictl=$crictl_version arch=$(uname -m) kubernetes=$k8s_version"
}
digest="$(inputs | sha256sum | cut -c1-12)"
name="localhost/cpa-kind-node"
tag="$name:$k8s_version-$digest"
if [[ ${KIND_NODE_FORCE:-0} != 1 ]] && podman image exists "$tag"; then
    log "up to date: $tag (KIND_NODE_FORCE=1 rebuilds)"
    echo "$tag"
    exit 0
fi
log "building $tag"

# ------------------------------------------------------------------ the binaries
bin="$(CPA_SKIP_UPSTREAM=1 bash "$repo/tests/controlplane/build.sh" kind | tail -n 1)"
[[ "$("$bin/kubeadm" version -o short)" == "$k8s_version" ]] \
    || die "$bin/kubeadm is not $k8s_version (CPA_BUILD_FORCE=1 bash tests/controlplane/build.sh kind)"
mapfile -t kubeadm_images < <("$bin/kubeadm" config images list --kubernetes-version "$k8s_version")
image_ref() {   # image_ref NAME: the reference kubeadm uses for that image
    printf '%s\n' "${kubeadm_images[@]}" | grep -E "/$1:" || die "kubeadm names no $1 image"
}
etcd_ref="$(image_ref etcd)" coredns_ref="$(image_ref coredns)" pause_ref="$(image_ref pause)"

# etcd: the version kubeadm deploys ("3.6.6-0" -> v3.6.6), from the wrapper module in etcd/
# when it pins that version (the default Kubernetes'), else from one made alike for it.
etcd_version="v${etcd_ref##*:}"
etcd_version="${etcd_version%-*}"
pinned="$(awk '$1 == "require" && $2 == "go.etcd.io/etcd/server/v3" {print $3}' "$here/etcd/go.mod")"
etcd_bin="$repo/.cache/tools/etcd-$etcd_version/etcd"
if [[ ! -x $etcd_bin ]]; then
    mkdir -p "$repo/.cache/tools"
    exec 8>"$repo/.cache/tools/.etcd.lock"
    flock 8
    if [[ ! -x $etcd_bin ]]; then
        etcd_mod="$here/etcd"
        if [[ $pinned != "$etcd_version" ]]; then
            etcd_mod="$repo/.cache/tools/etcd-$etcd_version/module"
            log "kubeadm $k8s_version deploys etcd $etcd_version (etcd/ pins $pinned): its module in $etcd_mod"
            rm -rf "$etcd_mod"
            mkdir -p "$etcd_mod"
            cp "$here/etcd/tools.go" "$etcd_mod/"
            (cd "$etcd_mod" && export GOTOOLCHAIN=local GOFLAGS=-mod=mod \
                && go mod init cpa-kind-node/etcd && go get "go.etcd.io/etcd/server/v3@$etcd_version" \
                && go mod tidy) >&2
        fi
        log "building etcd $etcd_version ($etcd_mod)"
        mkdir -p "$(dirname "$etcd_bin")"
        (cd "$etcd_mod" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 \
            go build -trimpath -ldflags "-s -w" -o "$etcd_bin.tmp" go.etcd.io/etcd/server/v3)
        mv -f "$etcd_bin.tmp" "$etcd_bin"
    fi
    exec 8>&-
fi
coredns_bin="$(COREDNS_VERSION="${coredns_ref##*:}" bash "$repo/scripts/build-coredns.sh" | tail -n 1)"
crictl_bin="$(bash "$repo/scripts/go-tool.sh" crictl sigs.k8s.io/cri-tools/cmd/crictl \
    "$crictl_version" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$crictl_version" | tail -n 1)"
pause_bin="$cache/standin"
mkdir -p "$cache"
(cd "$repo/tests/cluster/standin" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
    go build -trimpath -ldflags "-s -w" -o "$pause_bin" .)
log "parts ready after $((SECONDS - start))s"

# ------------------------------------------------------------------ the root filesystem
work="$cache/work"
rootfs="$work/rootfs"
cleanup() {   # the work dir stays after a failure, for a look (the next build removes it)
    local rc=$?
    if [[ -n ${containerd_pid:-} ]]; then kill "$containerd_pid" 2>/dev/null || true; fi
    if [[ $rc -eq 0 ]]; then rm -rf "$work"; else log "failed; its files: $work"; fi
}
trap cleanup EXIT
rm -rf "$work"
mkdir -p "$work"
phase=$SECONDS
# Root mode runs the packages' maintainer scripts in a chroot with /proc, /sys and /dev
# mounted; in a mount namespace of its own those mounts never show on the host.
unshare --mount --propagation private mmdebstrap --quiet --mode=root --variant=minbase \
    --include="$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')" \
    "$suite" "$rootfs" "${sources[@]}" >&2
log "Debian root filesystem in $((SECONDS - phase))s"

cp -a "$here/files/." "$rootfs/"
# The pause image this kubeadm names (files/ has the default Kubernetes' one).
sed -i -E "s#^( *sandbox_image = ).*#\\1\"$pause_ref\"#" "$rootfs/etc/containerd/config.toml"
grep -q "sandbox_image = \"$pause_ref\"" "$rootfs/etc/containerd/config.toml" \
    || die "could not set sandbox_image = $pause_ref in the node's containerd configuration"
install -m 0755 "$bin/kubeadm" "$bin/kubelet" "$bin/kubectl" "$rootfs/usr/bin/"
install -m 0755 "$crictl_bin" "$rootfs/usr/local/bin/crictl"
# Where kind and third-party CNIs expect the plugins (a directory they may add to).
mkdir -p "$rootfs/opt/cni/bin"
for plugin in "$rootfs"/usr/lib/cni/*; do
    ln -s "/usr/lib/cni/$(basename "$plugin")" "$rootfs/opt/cni/bin/$(basename "$plugin")"
done
units="$rootfs/etc/systemd/system"
mkdir -p "$units/multi-user.target.wants"
for unit in containerd kubelet cpa-cni; do
    ln -sfn "/etc/systemd/system/$unit.service" "$units/multi-user.target.wants/$unit.service"
done
# Masked: what would change the host's kernel (a privileged container shares its sysctls,
# binfmt_misc and modules) or waits for hardware a container does not have.
for unit in systemd-sysctl.service systemd-binfmt.service systemd-modules-load.service \
        proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount \
        systemd-udevd.service systemd-udev-trigger.service systemd-firstboot.service \
        sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount \
        getty.target console-getty.service; do
    ln -sfn /dev/null "$units/$unit"
done
echo "ReadKMsg=no" >>"$rootfs/etc/systemd/journald.conf"
mkdir -p "$rootfs/etc/kubernetes/manifests" "$rootfs/etc/cni/net.d"
echo "$k8s_version" >"$rootfs/kind/version"
: >"$rootfs/etc/machine-id"
dpkg-query --admindir="$rootfs/var/lib/dpkg" -W -f '${Package} ${Version}\n' \
    >"$rootfs/kind/packages.txt"

# ------------------------------------------------------------------ the component images
phase=$SECONDS
epoch="$(git -C "$repo" log -1 --format=%ct 2>/dev/null || echo 0)"
xtables="$(cd "$rootfs" && echo usr/lib/*-linux-gnu/xtables)"
# kube-proxy runs iptables (Debian's nf_tables variant, as the node's own tools do: one
# backend in the node's network namespace) and conntrack. Each name with its
# update-alternatives link, so the image resolves it as the node does.
proxy_extra="$(for tool in iptables iptables-save iptables-restore ip6tables ip6tables-save \
        ip6tables-restore; do
    printf '"/usr/sbin/%s", "/etc/alternatives/%s", "/usr/sbin/%s", ' \
        "$tool" "$tool" "${tool/tables/tables-nft}"
done)"
proxy_extra="[$proxy_extra \"/usr/sbin/conntrack\", \"/$xtables\", \"/etc/protocols\", \"/etc/services\"]"
cat >"$work/images.json" <<JSON
[
 {"ref": "registry.k8s.io/kube-apiserver:$k8s_version", "binary": "$bin/kube-apiserver",
  "path": "/usr/local/bin/kube-apiserver"},
 {"ref": "registry.k8s.io/kube-controller-manager:$k8s_version",
  "binary": "$bin/kube-controller-manager", "path": "/usr/local/bin/kube-controller-manager"},
 {"ref": "registry.k8s.io/kube-scheduler:$k8s_version", "binary": "$bin/kube-scheduler",
  "path": "/usr/local/bin/kube-scheduler"},
 {"ref": "registry.k8s.io/kube-proxy:$k8s_version", "binary": "$bin/kube-proxy",
  "path": "/usr/local/bin/kube-proxy", "extra": $proxy_extra},
 {"ref": "$etcd_ref", "binary": "$etcd_bin", "path": "/usr/local/bin/etcd"},
 {"ref": "$coredns_ref", "binary": "$coredns_bin", "path": "/coredns",
  "entrypoint": ["/coredns"]},
 {"ref": "$pause_ref", "binary": "$pause_bin", "path": "/pause",
  "entrypoint": ["/pause", "pause"]}
]
JSON
PYTHONPATH="$repo/image" python3 -m ocibuild kind-images --tree "$rootfs" \
    --work "$work/images-work" --out "$work/images" --spec "$work/images.json" \
    --epoch "$epoch" >"$work/images.txt"
tar -C "$work/images" -cf "$work/images.tar" .
rm -rf "$work/images" "$work/images-work"
log "component images in $((SECONDS - phase))s: $(du -h "$work/images.tar" | cut -f1)"

# The node's own containerd (same binary, same metadata format) imports them into the
# tree's /var/lib/containerd, as kind's own builder does inside its build container:
# content and image records only (--no-unpack; the CRI plugin unpacks an image the first
# time a container uses it), so nothing is mounted. Its state and sockets live in $work.
phase=$SECONDS
cat >"$work/containerd.toml" <<TOML
version = 2
root = "$rootfs/var/lib/containerd"
state = "$work/containerd-state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$work/containerd.sock"
[ttrpc]
  address = "$work/containerd.ttrpc.sock"
TOML
"$rootfs/usr/bin/containerd" --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
containerd_pid=$!
ctr=("$rootfs/usr/bin/ctr" --address "$work/containerd.sock" --namespace k8s.io)
for _ in $(seq 50); do
    "${ctr[@]}" version >/dev/null 2>&1 && break
    sleep 0.2
done
"${ctr[@]}" images import --all-platforms --no-unpack --digests "$work/images.tar" >/dev/null \
    || { tail -n 20 "$work/containerd.log" >&2; die "ctr images import failed"; }
while read -r ref _digest; do
    "${ctr[@]}" images label "$ref" io.cri-containerd.pinned=pinned >/dev/null
done <"$work/images.txt"
"${ctr[@]}" images list -q | sort >"$rootfs/kind/images.txt"
kill "$containerd_pid"
wait "$containerd_pid" || true
containerd_pid=""
rm -rf "$work/containerd-state" "$work/images.tar"
missing="$(printf '%s\n' "${kubeadm_images[@]}" | sort | comm -23 - <(grep -v '@' "$rootfs/kind/images.txt"))"
[[ -z $missing ]] || die "not in the node's containerd: $missing"
log "imported ${#kubeadm_images[@]} images in $((SECONDS - phase))s"

# ------------------------------------------------------------------ the image
phase=$SECONDS
tar -C "$rootfs" --numeric-owner --xattrs --xattrs-include='*' -cf - . \
    | podman import --quiet \
        --change 'ENTRYPOINT ["/usr/local/bin/cpa-kind-entrypoint", "/sbin/init"]' \
        --change 'STOPSIGNAL SIGRTMIN+3' --change 'ENV container=docker' \
        --change "LABEL org.opencontainers.image.title=cpa-kind-node" \
        --change "LABEL io.cpa-py.kind-node.kubernetes=$k8s_version" \
        - "$tag" >/dev/null
podman tag "$tag" "$name:$k8s_version"
# Earlier builds of this image for this Kubernetes version are replaced: one node image per
# version on disk.
podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$name" \
    | grep -F "$name:$k8s_version-" | grep -vxF "$tag" | xargs -r podman rmi >/dev/null 2>&1 || true
log "podman image in $((SECONDS - phase))s: $(podman image inspect --format '{{.Size}}' "$tag" \
    | awk '{ printf "%.0f MB", $1 / 1e6 }')"
log "built $tag in $((SECONDS - start))s"
echo "$tag"
