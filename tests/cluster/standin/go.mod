// The stand-in images of the cluster e2e (tests/cluster): a pod sandbox ("pause") and a
// CoreDNS stand-in, one static binary without dependencies. See main.go.
module cpa-tests/standin

go 1.25.0
