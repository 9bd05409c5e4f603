#!/usr/bin/env bash
# `make deploy IMAGE=REGISTRY/NAME:TAG|REGISTRY/NAME@sha256:... [KUBECONFIG=...]`:
# kubectl apply -k of manifests/ with only the image swapped, through a kustomize overlay
# in a temp dir (the same as `kustomize edit set image` in an overlay of your own).
# Then waits for the rollout (WAIT seconds, default 120) and prints the autoscaler's first log
# lines; WAIT=0 applies and returns without waiting (a cluster that cannot pull yet, or
# tests against an API server without nodes).
#
# Environment: KUBECONFIG (which cluster), KUBECTL (default kubectl), WAIT.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
image="${1:?usage: deploy.sh REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:DIGEST}"
kubectl="${KUBECTL:-kubectl}"
name="$(cat "$repo/image/name.txt")"
overlay="$(mktemp -d)"
trap 'rm -rf "$overlay"' EXIT
if [[ $image == *@* ]]; then
    entry="  - name: $name
    newName: ${image%@*}
    digest: ${image#*@}"
elif [[ ${image##*/} == *:* ]]; then
    entry="  - name: $name
    newName: ${image%:*}
    newTag: \"${image##*:}\""
else
    echo "[deploy] $image: give a tag (NAME:TAG) or a digest (NAME@sha256:...)" >&2
    exit 2
fi
cp -r "$repo/manifests" "$overlay/base"
cat >"$overlay/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [base]
images:
$entry
YAML
wait="${WAIT:-120}"
if [[ ! $wait =~ ^[0-9]+$ ]]; then
    echo "[deploy] WAIT=$wait: give seconds (0: do not wait for the rollout)" >&2
    exit 2
fi
"$kubectl" apply -k "$overlay"
if [[ $wait -gt 0 ]]; then
    "$kubectl" -n kube-system rollout status deployment/kube-dns-autoscaler --timeout="${wait}s"
    "$kubectl" -n kube-system logs deployment/kube-dns-autoscaler --tail=20 || true
fi
