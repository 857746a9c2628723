package hostport

import (
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/nft"
)

var addr = netip.MustParseAddr

// TestElems: a pod's elements by set, and the same as edits of the
// table's sets (what ADD adds), one per set with elements.
func TestElems(t *testing.T) {
	pod := Pod{IP: addr("10.244.0.5"), Ports: []Mapping{
		{Proto: unix.IPPROTO_TCP, Port: 80, PodPort: 8080},
		{Proto: unix.IPPROTO_TCP, HostIP: addr("fd00::1"), Port: 80, PodPort: 8080}, // another family: not for this pod
	}}
	es := Elems(pod)
	want := nft.Elem{Proto: unix.IPPROTO_TCP, Port: 80, Value: netip.AddrPortFrom(addr("10.244.0.5"), 8080)}
	if len(es["hostports4"]) != 1 || es["hostports4"][0] != want || len(es["hostports6-ip"]) != 0 || len(es["hairpin4"]) != 1 {
		t.Errorf("elements %v", es)
	}
	if got := want.String(); got != "tcp . 80 : 10.244.0.5 . 8080" {
		t.Errorf("String %q", got)
	}
	var sets []string
	for _, e := range Edits(pod) {
		if e.Table != TableID || len(e.Elems) != 1 {
			t.Errorf("edit %+v, want one element of %s", e, TableID)
		}
		sets = append(sets, e.Set.Name)
	}
	if strings.Join(sets, " ") != "hairpin4 hostports4" {
		t.Errorf("edits of sets %v, want hairpin4 and hostports4", sets)
	}
}
