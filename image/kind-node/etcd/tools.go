//go:build tools

// Package tools pins etcd's server command; ../build.sh runs `go build` of it with this
// module's go.mod and go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
