package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestShimStaysSmall: reef-cni links the CNI types, gRPC and the generated
// API only. The runtime execs it for every CNI call, so it must not pull in
// GoBGP, nftables, bbolt or netlink (docs/design.md, "Components and layout").
func TestShimStaysSmall(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/osrg/gobgp", "github.com/google/nftables", "go.etcd.io/bbolt",
			"github.com/vishvananda/netlink", "github.com/reefcni/reef/store", "github.com/reefcni/reef/routes", "github.com/reefcni/reef/daemon"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("reef-cni depends on %s", dep)
			}
		}
	}
}
