package cniserver

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestCheckPrevResult: CHECK fails when the runtime's prevResult lacks an
// address of the attachment, the IPv6 one of a dual-stack pod included
// (code 101), and when there is no prevResult, or one it cannot read
// (code 7).
func TestCheckPrevResult(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("fd00:10:244::5")
	dual := []netip.Addr{v4, v6}
	for _, tc := range []struct {
		name    string
		netconf string
		ips     []netip.Addr
		want    string // "" for success, else a substring of the error
	}{
		{"no prevResult", `{"cniVersion":"1.1.0","name":"net"}`, dual, "code 7: CHECK needs prevResult"},
		{"null prevResult", `{"cniVersion":"1.1.0","name":"net","prevResult":null}`, dual, "code 7: CHECK needs prevResult"},
		{"prevResult not an object", `{"prevResult":"x"}`, dual, "code 7: prevResult in the network configuration is not a CNI result"},
		{"address not a CIDR", `{"prevResult":{"ips":[{"address":"10.244.0.5"}]}}`, dual, `code 7: prevResult: address "10.244.0.5"`},
		{"both addresses", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"},{"address":"fd00:10:244::5/128"}]}}`, dual, ""},
		{"the IPv6 address missing", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"}]}}`, dual, "code 101: prevResult does not contain the attachment's address fd00:10:244::5"},
		{"the IPv4 address missing", `{"prevResult":{"ips":[{"address":"fd00:10:244::5/128"}]}}`, dual, "address 10.244.0.5"},
		{"another IPv6 address", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"},{"address":"fd00:10:244::6/128"}]}}`, dual, "address fd00:10:244::5"},
		{"an IPv4 pod", `{"prevResult":{"ips":[{"address":"10.244.0.5/32"}]}}`, []netip.Addr{v4}, ""},
	} {
		err := checkPrevResult([]byte(tc.netconf), tc.ips)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want success", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(fmt.Sprintf("code %d: %s", err.Code, err.Msg), tc.want)):
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
