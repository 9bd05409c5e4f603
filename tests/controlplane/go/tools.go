//go:build tools

// Package tools pins the commands built for the integration-test control plane:
// the real kube-apiserver and etcd, at the versions Kubernetes itself uses.
// Nothing here is compiled into a program; `go build` of the listed packages
// (see ../build.sh) uses this module's go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
