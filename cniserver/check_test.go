package cniserver

import (
	"net/netip"
	"strings"
	"testing"
)

// TestCheckPrevResult: CHECK fails when the runtime's prevResult lacks an
// address of the attachment, the IPv6 one of a dual-stack pod included.
func TestCheckPrevResult(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("fd00:10:244::5")
	dual := []netip.Addr{v4, v6}
	for _, tc := range []struct {
		name    string
		netconf string
		ips     []netip.Addr
		want    string // "" for success, else a substring of the error
	}{
		{"no prevResult", `{"cniVersion":"1.1.0","name":"net"}`, dual, ""},
		{"both addresses", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"},{"address":"fd00:10:244::5/128"}]}}`, dual, ""},
		{"the IPv6 address missing", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"}]}}`, dual, "address fd00:10:244::5"},
		{"the IPv4 address missing", `{"prevResult":{"ips":[{"address":"fd00:10:244::5/128"}]}}`, dual, "address 10.244.0.5"},
		{"another IPv6 address", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"},{"address":"fd00:10:244::6/128"}]}}`, dual, "address fd00:10:244::5"},
		{"an IPv4 pod", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"}]}}`, []netip.Addr{v4}, ""},
	} {
		err := checkPrevResult([]byte(tc.netconf), tc.ips)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want success", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
