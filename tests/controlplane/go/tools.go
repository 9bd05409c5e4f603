//go:build tools

// Package tools pins the commands built for the tests: the real kube-apiserver and
// etcd (integration tests), and the node components plus kubectl of the single-node
// cluster that `make cluster-e2e` runs, and kubeadm for the kind node image, all from
// one Kubernetes release and the etcd it requires.
// Nothing here is compiled into a program; `go build` of the listed packages
// (see ../build.sh) uses this module's go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
