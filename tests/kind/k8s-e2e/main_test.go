// Package k8se2e is the entry point of Kubernetes' own end-to-end suite for the one spec
// `make e2e` runs: "[sig-autoscaling] [Feature:KubeDNSAutoscaler] DNS horizontal
// autoscaling ... should scale kube-dns pods in both nonfaulty and faulty scenarios", from
// test/e2e/autoscaling/dns_autoscaling.go of the k8s.io/kubernetes module (used from the
// module, not copied). Wired as test/e2e/e2e_test.go wires the whole suite: the same
// flags, the suite's set-up (k8s.io/kubernetes/test/e2e: nodes schedulable, kube-system's
// pods Ready) and its runner, with only the autoscaling specs linked in.
// build.sh makes the module around it (go.mod from wrapper.sh) and `go test -c`s it.
package k8se2e

import (
	"flag"
	"os"
	"testing"

	"k8s.io/kubernetes/test/e2e"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"

	// define and freeze the feature constants, as the suite does
	_ "k8s.io/kubernetes/test/e2e/feature"

	// the specs: sig-autoscaling's, the DNS autoscaling one among them
	_ "k8s.io/kubernetes/test/e2e/autoscaling"

	// reconfigure the framework, as the suite does
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

func TestMain(m *testing.M) {
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

func TestE2E(t *testing.T) {
	e2e.RunE2ETests(t)
}
