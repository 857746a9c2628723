package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestDiagnoseKernelCommands: the bundle reads reef's routes and tables of
// both families: the IPv6 routes of proto 238 beside the IPv4 ones, the
// masquerade of both in inet reef-nat, ip6 reef-ndp beside arp reef, and
// NetworkPolicy's inet reef.
func TestDiagnoseKernelCommands(t *testing.T) {
	got := map[string]string{}
	for _, c := range kernelCommands(2000) {
		if _, dup := got[c.name]; dup {
			t.Errorf("two files named %s", c.name)
		}
		got[c.name] = strings.Join(c.argv, " ")
	}
	want := map[string]string{
		"ip-routes.txt":                   "ip route show table all proto 238",
		"ip6-routes.txt":                  "ip -6 route show table all proto 238",
		"journal.txt":                     "journalctl -u reef -n 2000 --no-pager -o short-iso-precise",
		"nftables-inet-reef-nat.txt":      "nft list table inet reef-nat",
		"nftables-ip6-reef-ndp.txt":       "nft list table ip6 reef-ndp",
		"nftables-arp-reef.txt":           "nft list table arp reef",
		"nftables-inet-reef.txt":          "nft list table inet reef",
		"nftables-inet-reef-hostport.txt": "nft list table inet reef-hostport",
	}
	for name, cmd := range want {
		if got[name] != cmd {
			t.Errorf("%s: %q, want %q", name, got[name], cmd)
		}
	}
	var tables []string
	for name := range got {
		if strings.HasPrefix(name, "nftables-") {
			tables = append(tables, name)
		}
	}
	slices.Sort(tables)
	if len(tables) != 5 {
		t.Errorf("nftables files %v, want reef's 5 tables", tables)
	}
}
