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
	pod := Pod{IPs: []netip.Addr{addr("10.244.0.5")}, Ports: []Mapping{
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

// TestElemsDualStack: a dual-stack pod's hostPort on every address leads
// to both its addresses, each in its family's map; one on a host address
// leads to its address of that family only.
func TestElemsDualStack(t *testing.T) {
	v4, v6 := addr("10.244.0.5"), addr("fd00:10:244::5")
	pod := Pod{IPs: []netip.Addr{v4, v6}, Ports: []Mapping{
		{Proto: unix.IPPROTO_TCP, Port: 80, PodPort: 8080},
		{Proto: unix.IPPROTO_UDP, HostIP: addr("fd00::1"), Port: 53, PodPort: 53},
		{Proto: unix.IPPROTO_UDP, HostIP: addr("192.168.1.5"), Port: 54, PodPort: 53},
	}}
	es := Elems(pod)
	want := map[string][]nft.Elem{
		"hostports4":    {{Proto: unix.IPPROTO_TCP, Port: 80, Value: netip.AddrPortFrom(v4, 8080)}},
		"hostports6":    {{Proto: unix.IPPROTO_TCP, Port: 80, Value: netip.AddrPortFrom(v6, 8080)}},
		"hostports4-ip": {{From: addr("192.168.1.5"), To: addr("192.168.1.5"), Proto: unix.IPPROTO_UDP, Port: 54, Value: netip.AddrPortFrom(v4, 53)}},
		"hostports6-ip": {{From: addr("fd00::1"), To: addr("fd00::1"), Proto: unix.IPPROTO_UDP, Port: 53, Value: netip.AddrPortFrom(v6, 53)}},
		"hairpin4":      {{From: v4, To: v4}},
		"hairpin6":      {{From: v6, To: v6}},
	}
	if len(es) != len(want) {
		t.Errorf("elements in sets %v, want %d sets", es, len(want))
	}
	for set, w := range want {
		if len(es[set]) != len(w) || es[set][0] != w[0] {
			t.Errorf("set %s: %v, want %v", set, es[set], w)
		}
	}
	if n := len(Edits(pod)); n != 6 {
		t.Errorf("%d edits, want one per set: 6", n)
	}
}
