package daemon

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/bgp"
)

// TestExternalPeersBFD: bgp.externalPeers[].bfd reaches the speaker as
// its timers, the multiplier defaulted to 3, and no bfd as none.
func TestExternalPeersBFD(t *testing.T) {
	c, err := ParseConfig("/etc/reef/config.yaml", []byte("bgp:\n  externalPeers:\n"+
		"    - {address: 192.168.10.1, asn: 65000, bfd: {minInterval: 300ms}}\n"+
		"    - {address: 192.168.10.2, asn: 65000, bfd: {minInterval: 50ms, multiplier: 5}}\n"+
		"    - {address: 192.168.10.3, asn: 65000}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []*bgp.BFD
	for _, p := range c.BGP.externalPeers() {
		got = append(got, p.BFD)
	}
	want := []*bgp.BFD{{MinInterval: 300 * time.Millisecond, Multiplier: 3}, {MinInterval: 50 * time.Millisecond, Multiplier: 5}, nil}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the speaker's BFD timers (-want +got):\n%s", d)
	}
}
