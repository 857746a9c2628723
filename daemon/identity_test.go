package daemon

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/blockproto"
)

// TestResolveVoters: voters written as IPv4 addresses are identities;
// this node's own addresses are this node; an IPv6 voter is named by the
// one record that announces it as its address, and kept; none, two, or a
// record that contradicts what was learned leave it unresolved, with why.
func TestResolveVoters(t *testing.T) {
	a := netip.MustParseAddr
	self := a("10.255.0.1")
	mine := nodeAddrs{self, netip.Addr{}, a("fd76::1")}
	voters := []netip.Addr{a("fd76::1"), a("fd76::2"), a("fd76::3"), a("192.168.10.4")}
	rec := func(id string, addr6 string) blockproto.Record {
		return blockproto.Record{Node: blockproto.Node{Addr: a(id), Inc: 7}, Addr6: a(addr6)}
	}
	for _, tc := range []struct {
		name       string
		known      map[netip.Addr]netip.Addr
		recs       []blockproto.Record
		ids        []netip.Addr
		unresolved []string // substrings, in order
		learned    map[netip.Addr]netip.Addr
	}{
		{name: "no records", ids: []netip.Addr{self, a("192.168.10.4")},
			unresolved: []string{"fd76::2 (no record", "fd76::3 (no record"}},
		{name: "records name them", recs: []blockproto.Record{rec("10.255.0.2", "fd76::2"), rec("10.255.0.3", "fd76::3")},
			ids:     []netip.Addr{self, a("10.255.0.2"), a("10.255.0.3"), a("192.168.10.4")},
			learned: map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.3")}},
		{name: "learned, record gone", known: map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.3")},
			ids:     []netip.Addr{self, a("10.255.0.2"), a("10.255.0.3"), a("192.168.10.4")},
			learned: map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.3")}},
		{name: "two identities, one address", recs: []blockproto.Record{rec("10.255.0.2", "fd76::2"), rec("10.255.0.9", "fd76::2"), rec("10.255.0.3", "fd76::3")},
			ids:        []netip.Addr{self, a("10.255.0.3"), a("192.168.10.4")},
			unresolved: []string{"fd76::2 (10.255.0.2, 10.255.0.9 all announce it"},
			learned:    map[netip.Addr]netip.Addr{a("fd76::3"): a("10.255.0.3")}},
		{name: "contradicts what was learned", known: map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.3")},
			recs:       []blockproto.Record{rec("10.255.0.9", "fd76::2")},
			ids:        []netip.Addr{self, a("10.255.0.3"), a("192.168.10.4")},
			unresolved: []string{"fd76::2 (known as 10.255.0.2, but 10.255.0.9 announce it"},
			learned:    map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.3")}},
		{name: "an identity that is another voter's IPv4 address", recs: []blockproto.Record{rec("192.168.10.4", "fd76::2"), rec("10.255.0.3", "fd76::3")},
			ids:        []netip.Addr{self, a("10.255.0.3")},
			unresolved: []string{"fd76::2 (its identity 192.168.10.4 is also that of voter 192.168.10.4"},
			learned:    map[netip.Addr]netip.Addr{a("fd76::2"): a("192.168.10.4"), a("fd76::3"): a("10.255.0.3")}},
		{name: "two IPv6 voters of one identity", recs: []blockproto.Record{rec("10.255.0.2", "fd76::2"), rec("10.255.0.2", "fd76::3")},
			ids: []netip.Addr{self, a("192.168.10.4")},
			unresolved: []string{"fd76::2 (its identity 10.255.0.2 is also that of voter fd76::3",
				"fd76::3 (its identity 10.255.0.2 is also that of voter fd76::2"},
			learned: map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.2")}},
		{name: "an IPv4 voter that an IPv6-only node announces as its router ID", recs: []blockproto.Record{rec("10.255.0.2", "fd76::2"), rec("10.255.0.3", "fd76::3"),
			{Node: blockproto.Node{Addr: a("192.168.10.4"), Inc: 9}, Addr6: a("fd76::9"), IPv6Only: true}},
			ids:        []netip.Addr{self, a("10.255.0.2"), a("10.255.0.3")},
			unresolved: []string{"192.168.10.4 (an IPv6-only node announces it as its bgp.routerID"},
			learned:    map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.2"), a("fd76::3"): a("10.255.0.3")}},
		{name: "this node's identity", recs: []blockproto.Record{rec("10.255.0.1", "fd76::2"), rec("10.255.0.3", "fd76::3")},
			ids:        []netip.Addr{a("10.255.0.3"), a("192.168.10.4")},
			unresolved: []string{"fd76::2 (its identity 10.255.0.1 is also that of voter fd76::1"},
			learned:    map[netip.Addr]netip.Addr{a("fd76::2"): a("10.255.0.1"), a("fd76::3"): a("10.255.0.3")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids, unresolved, learned := resolveVoters(voters, self, mine, tc.known, tc.recs)
			if !slices.Equal(blockproto.Voters(tc.ids), ids) {
				t.Errorf("identities = %v, want %v", ids, blockproto.Voters(tc.ids))
			}
			if len(unresolved) != len(tc.unresolved) {
				t.Fatalf("unresolved = %q, want %d like %q", unresolved, len(tc.unresolved), tc.unresolved)
			}
			for i, u := range unresolved {
				if !strings.HasPrefix(u, tc.unresolved[i]) {
					t.Errorf("unresolved[%d] = %q, want it to start with %q", i, u, tc.unresolved[i])
				}
			}
			if len(learned) != len(tc.learned) || !maps.Equal(learned, tc.learned) && len(tc.learned) > 0 {
				t.Errorf("learned = %v, want %v", learned, tc.learned)
			}
		})
	}
}

// TestChooseUplinkV6Only: an IPv6-only node's uplink is the configured
// interface, else that of nodeAddressV6, else that of the IPv6 default
// route, its address chosen as on any uplink; no IPv6 anywhere is an error.
func TestChooseUplinkV6Only(t *testing.T) {
	links := []LinkInfo{{Index: 1, Name: "lo", Kind: "loopback", Up: true, MTU: 65536}, {Index: 2, Name: "eth0", Kind: "device", Up: true, MTU: 1500},
		{Index: 3, Name: "eth1", Kind: "device", Up: true, MTU: 9000}}
	p := netip.MustParsePrefix
	addrs := []Addr6Info{{LinkIndex: 2, Prefix: p("fd76::5/64"), Global: true, Flags: unix.IFA_F_PERMANENT},
		{LinkIndex: 3, Prefix: p("fd77::5/64"), Global: true, Flags: unix.IFA_F_PERMANENT}}
	for _, tc := range []struct {
		name, iface string
		want        netip.Addr
		defaults    []RouteInfo
		wantIface   string
		wantAddr    string
		wantErr     string
	}{
		{name: "default route", defaults: []RouteInfo{{LinkIndex: 3}}, wantIface: "eth1", wantAddr: "fd77::5"},
		{name: "interface", iface: "eth0", defaults: []RouteInfo{{LinkIndex: 3}}, wantIface: "eth0", wantAddr: "fd76::5"},
		{name: "nodeAddressV6", want: netip.MustParseAddr("fd76::5"), wantIface: "eth0", wantAddr: "fd76::5"},
		{name: "first with an address", wantIface: "eth0", wantAddr: "fd76::5"},
		{name: "no such interface", iface: "eth9", wantErr: "interface eth9 does not exist"},
		{name: "address elsewhere", want: netip.MustParseAddr("fd78::1"), wantErr: "nodeAddressV6 fd78::1 is not on any interface"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, up6, err := chooseUplinkV6Only(links, addrs, tc.defaults, tc.iface, tc.want)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if up.Interface != tc.wantIface || up6.Address.String() != tc.wantAddr || up.Address.IsValid() {
				t.Errorf("uplink %s (IPv4 %s), IPv6 %s; want %s, no IPv4, %s", up.Interface, up.Address, up6.Address, tc.wantIface, tc.wantAddr)
			}
		})
	}
}

// TestIPv6OnlyConfigProblems: what an IPv6-only node refuses, naming the
// key: an IPv4 pool, no IPv6 pool, an IPv4 peer; and what it
// takes, VXLAN (over its IPv6 underlay) included.
func TestIPv6OnlyConfigProblems(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"ok", "pools: [{cidr: 'fd00:10::/56', vxlanMode: Never}]\nbgp: {routerID: 10.255.0.1, peers: ['fd77::2'], voters: ['fd77::2']}\n", ""},
		{"default pool", "bgp: {routerID: 10.255.0.1}\n", `pools[0].cidr: value "10.244.0.0/16" is IPv4, but this node has no IPv4 address`},
		{"vxlan, the default CrossSubnet", "pools: [{cidr: 'fd00:10::/56'}]\nbgp: {routerID: 10.255.0.1, peers: ['fd77::2'], voters: ['fd77::2']}\n", ""},
		{"vxlan Always", "pools: [{cidr: 'fd00:10::/56', vxlanMode: Always}]\nbgp: {routerID: 10.255.0.1}\n", ""},
		{"IPv6 router", "pools: [{cidr: 'fd00:10::/56', vxlanMode: Never}]\nbgp: {routerID: 10.255.0.1, externalPeers: [{address: 'fd77::fe', asn: 65000}]}\n", ""},
		{"IPv4 router", "pools: [{cidr: 'fd00:10::/56', vxlanMode: Never}]\nbgp: {routerID: 10.255.0.1, externalPeers: [{address: 10.0.0.254, asn: 65000}]}\n", `bgp.externalPeers[0].address: value "10.0.0.254" is an IPv4 address, but this node has no IPv4 address`},
		{"IPv4 peer", "pools: [{cidr: 'fd00:10::/56', vxlanMode: Never}]\nbgp: {routerID: 10.255.0.1, peers: [10.0.0.2], voters: [10.0.0.2]}\n", "bgp.peers: has IPv4 address 10.0.0.2, but this node has no IPv4 address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseConfig("/etc/reef/config.yaml", []byte(tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			err = ipv6OnlyProblems(cfg)
			if err == nil {
				up6 := Uplink6{Address: netip.MustParseAddr("fd77::1")}
				err = checkPeerFamilies(cfg, Uplink{Interface: "eth0"}, up6)
			}
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("err = %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
