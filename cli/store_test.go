package cli

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/store"
)

// TestPrintRecoveryAligns: the endpoint list's columns line up whatever
// the addresses: a dual-stack pod's two beside an IPv4 pod's one and a
// tunnel address.
func TestPrintRecoveryAligns(t *testing.T) {
	a := netip.MustParseAddr
	rep := store.RecoverReport{MovedTo: "/var/lib/reef/reef.db.damaged-x", Endpoints: []store.RecoveredEndpoint{
		{IPs: []netip.Addr{a("10.244.0.5"), a("fd00:10:244::5")}, Veth: "reef1234567890a", Handle: "k8s-pod-network.c1", Complete: true},
		{IPs: []netip.Addr{a("10.244.0.6")}, Veth: "reefb", Handle: "recovered.reefb"},
		{IPs: []netip.Addr{a("10.244.0.1")}, Handle: "reef-vxlan", Complete: true},
	}}
	var out bytes.Buffer
	printRecovery(&out, "/var/lib/reef/reef.db", rep)
	var rows []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "  10.244.") {
			rows = append(rows, l)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("%d endpoint rows, want 3:\n%s", len(rows), out.String())
	}
	// The handle column starts at the same offset in every row.
	col := -1
	for i, r := range rows {
		h := strings.Index(r, rep.Endpoints[i].Handle)
		if col == -1 {
			col = h
		}
		if h != col {
			t.Errorf("handle of row %d at column %d, want %d:\n%s", i, h, col, strings.Join(rows, "\n"))
		}
	}
	if !strings.Contains(rows[0], "10.244.0.5,fd00:10:244::5 reef1234567890a ") {
		t.Errorf("dual-stack row %q", rows[0])
	}
}
