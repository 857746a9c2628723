package store

import (
	"encoding/json"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

var (
	dual4 = Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 30}      // blocks of 4
	dual6 = Pool{CIDR: netip.MustParsePrefix("fd00:10:244::/120"), BlockSize: 126} // blocks of 4
)

// addrHolder is the address index's holder of ip, "" for none.
func addrHolder(t *testing.T, s *Store, ip netip.Addr) string {
	t.Helper()
	var h string
	if err := s.db.View(func(tx *bolt.Tx) error {
		h = string(tx.Bucket(bucketAddrs).Get(addrKey(ip)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return h
}

// countAddrs is the number of entries in the address index.
func countAddrs(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	if err := s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketAddrs).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAllocateDualStack(t *testing.T) {
	s := openProto(t)
	b4, b6 := claimConfirmed(t, s, dual4), claimConfirmed(t, s, dual6)

	// The pools in either order: the IPv4 address is the first.
	ep, existed, err := s.Allocate(Endpoint{Handle: "net.a", HostVeth: "reefa"}, dual6, dual4)
	if err != nil || existed {
		t.Fatalf("Allocate: %v (existed %v)", err, existed)
	}
	want := []Assignment{{IP: b4.Addr(), Block: b4, Pool: dual4.CIDR}, {IP: b6.Addr(), Block: b6, Pool: dual6.CIDR}}
	if diff := cmp.Diff(want, ep.Assignments(), netipEqual); diff != "" {
		t.Errorf("assignments (-want +got):\n%s", diff)
	}
	if got := ep.AddrsString(); got != b4.Addr().String()+","+b6.Addr().String() {
		t.Errorf("AddrsString %s", got)
	}
	for _, a := range want {
		if h := addrHolder(t, s, a.IP); h != "net.a" {
			t.Errorf("address index: %s held by %q, want net.a", a.IP, h)
		}
		if !ep.Holds(a.IP) {
			t.Errorf("Holds(%s) false", a.IP)
		}
	}
	if !ep.HasIPv6() {
		t.Error("HasIPv6 false")
	}
	// Read back from the file, and a repeated ADD gets the same.
	got, ok, err := s.Endpoint("net.a")
	if err != nil || !ok {
		t.Fatalf("Endpoint: %v %v", ok, err)
	}
	if diff := cmp.Diff(ep, got, netipEqual); diff != "" {
		t.Errorf("read back (-allocated +read):\n%s", diff)
	}
	again, existed, err := s.Allocate(Endpoint{Handle: "net.a"}, dual4, dual6)
	if err != nil || !existed || again.Second != ep.Second || again.IP != ep.IP {
		t.Errorf("repeated Allocate: %+v existed=%v %v", again, existed, err)
	}
	// What IPAM owns cannot change by SetEndpoint.
	changed := got
	changed.Second.IP = b6.Addr().Next()
	if err := s.SetEndpoint(changed); err == nil || !strings.Contains(err.Error(), "second address") {
		t.Errorf("SetEndpoint with another second address: %v", err)
	}
	if problems, err := s.Check(); err != nil || len(problems) != 0 {
		t.Errorf("Check: %+v %v", problems, err)
	}

	// Release frees both.
	rel, found, err := s.Release("net.a")
	if err != nil || !found || rel.Second.IP != b6.Addr() {
		t.Fatalf("Release: %+v %v %v", rel, found, err)
	}
	if n := countAddrs(t, s); n != 0 {
		t.Errorf("%d addresses in the index after Release, want 0", n)
	}
	// And the next pod gets them again.
	ep2, _, err := s.Allocate(Endpoint{Handle: "net.b"}, dual4, dual6)
	if err != nil || ep2.IP != b4.Addr() || ep2.Second.IP != b6.Addr() {
		t.Errorf("Allocate after Release: %s %v, want %s,%s", ep2.AddrsString(), err, b4.Addr(), b6.Addr())
	}
}

// TestAllocateDualStackWholeOrNothing: when one family's blocks are full,
// the allocation fails naming that pool and takes nothing from the other.
func TestAllocateDualStackWholeOrNothing(t *testing.T) {
	for _, full := range []Pool{dual4, dual6} {
		t.Run(full.CIDR.String(), func(t *testing.T) {
			s := openProto(t)
			claimConfirmed(t, s, dual4)
			claimConfirmed(t, s, dual6)
			// Fill the full pool's block with single-family endpoints.
			for i := range 4 {
				if _, _, err := s.Allocate(Endpoint{Handle: "fill." + string(rune('a'+i))}, full); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := s.Endpoints()
			used := countAddrs(t, s)
			_, _, err := s.Allocate(Endpoint{Handle: "net.x", PortMappings: []PortMapping{{Protocol: "tcp", HostPort: 8080, ContainerPort: 80}}}, dual4, dual6)
			var nf *NoFreeAddressError
			if !errors.Is(err, ErrNoFreeAddress) || !errors.As(err, &nf) || !slices.Equal(nf.Pools, []netip.Prefix{full.CIDR}) {
				t.Fatalf("Allocate with %s full: %v, want a NoFreeAddressError naming it", full.CIDR, err)
			}
			if n := countAddrs(t, s); n != used {
				t.Errorf("address index has %d entries after the failed Allocate, want %d", n, used)
			}
			after, _ := s.Endpoints()
			if len(after) != len(before) {
				t.Errorf("%d endpoints after the failed Allocate, want %d", len(after), len(before))
			}
			if _, ok, _ := s.Endpoint("net.x"); ok {
				t.Error("the failed Allocate left a record")
			}
			// Its hostPort is free for another pod.
			if _, err := s.ClaimPorts("fill.a", []PortMapping{{Protocol: "tcp", HostPort: 8080, ContainerPort: 80}}); err != nil {
				t.Errorf("hostPort 8080 after the failed Allocate: %v", err)
			}
		})
	}
}

// TestAllocateNamesEveryFullPool: on a node with no block of either pool
// (a fresh dual-stack node), the error names both pools, so that the ADD
// waits for a block of each at once rather than one after the other.
func TestAllocateNamesEveryFullPool(t *testing.T) {
	s := openProto(t)
	_, _, err := s.Allocate(Endpoint{Handle: "net.a"}, dual6, dual4)
	var nf *NoFreeAddressError
	if !errors.As(err, &nf) || !slices.Equal(nf.Pools, []netip.Prefix{dual4.CIDR, dual6.CIDR}) {
		t.Fatalf("Allocate with no block: %v, want a NoFreeAddressError naming %s and %s", err, dual4.CIDR, dual6.CIDR)
	}
	if !strings.Contains(err.Error(), dual4.CIDR.String()+" and "+dual6.CIDR.String()) {
		t.Errorf("error %q names not both pools", err)
	}
	if n := countAddrs(t, s); n != 0 {
		t.Errorf("%d addresses taken by the failed Allocate", n)
	}
}

func TestAllocatePoolsRefused(t *testing.T) {
	s := openProto(t)
	other4 := Pool{CIDR: netip.MustParsePrefix("10.245.0.0/24"), BlockSize: 26}
	for _, tc := range []struct {
		pools []Pool
		want  string
	}{
		{nil, "no pool"},
		{[]Pool{dual4, other4}, "one family"},
		{[]Pool{dual4, dual6, other4}, "3 pools"},
	} {
		if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, tc.pools...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Allocate with %v: %v, want %q", tc.pools, err, tc.want)
		}
	}
}

// TestEndpointRecordFormat: a record written before dual-stack (no
// "second") reads as one address, and a one-address record is written
// without "second", as before.
func TestEndpointRecordFormat(t *testing.T) {
	old := `{"handle":"net.a","hostVeth":"reefa","ip":"10.244.0.5","block":"10.244.0.4/30","pool":"10.244.0.0/24","state":"ready","created":"2025-01-02T03:04:05Z"}`
	ep, err := decodeEndpoint("net.a", []byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if ep.Second.IP.IsValid() || len(ep.Addrs()) != 1 || ep.IP != netip.MustParseAddr("10.244.0.5") {
		t.Errorf("old record read as %+v", ep)
	}
	v, err := json.Marshal(ep.record())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(v), "second") {
		t.Errorf("one-address record written with a second address: %s", v)
	}
	ep.Second = Assignment{IP: netip.MustParseAddr("fd00::5"), Block: netip.MustParsePrefix("fd00::4/126"), Pool: netip.MustParsePrefix("fd00::/120")}
	v, _ = json.Marshal(ep.record())
	if !strings.Contains(string(v), `"second":{"ip":"fd00::5","block":"fd00::4/126","pool":"fd00::/120"}`) {
		t.Errorf("dual-stack record: %s", v)
	}
}

// TestRecoverDualStack: a veth with a /32 and a /128 route is one
// endpoint with both addresses, whether its record is read back or not.
func TestRecoverDualStack(t *testing.T) {
	for _, damage := range []struct {
		name     string
		fn       func(t *testing.T, path string)
		complete bool
	}{
		{"zero-length", func(t *testing.T, path string) { truncate(t, path, 0) }, false},
		{"the freelist overwritten", func(t *testing.T, path string) { overwritePages(t, path, pagesOf(t, path, "freelist")...) }, true},
	} {
		t.Run(damage.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "reef.db")
			s := openProtoAt(t, path)
			b4, b6 := claimConfirmed(t, s, dual4), claimConfirmed(t, s, dual6)
			ep, _, err := s.Allocate(Endpoint{Handle: "net.a", ContainerID: "a", HostVeth: "reefa", State: EndpointReady,
				PortMappings: []PortMapping{{Protocol: "tcp", HostPort: 8080, ContainerPort: 80}}}, dual4, dual6)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			id, _, err := ReadIdentity(path)
			if err != nil {
				t.Fatal(err)
			}
			damage.fn(t, path)
			// The kernel's view: two routes to one veth, the hostPort on
			// every address in both families' maps.
			pm := []PortMapping{{Protocol: "tcp", HostPort: 8080, ContainerPort: 80}}
			in := RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{dual4, dual6}, Identity: &id, Now: time.Unix(1800000000, 0),
				Pods:       []KernelPod{{Veth: "reefa", IP: ep.Second.IP, PortMappings: pm}, {Veth: "reefa", IP: ep.IP, PortMappings: pm}},
				Blackholes: []netip.Prefix{b4, b6}}
			rep, err := Recover(path, in)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Endpoints) != 1 || !cmp.Equal(rep.Endpoints[0].IPs, ep.Addrs(), netipEqual) || rep.Endpoints[0].HostPorts != 1 {
				t.Errorf("recovered %+v, want one endpoint with %s and one hostPort", rep.Endpoints, ep.AddrsString())
			}
			s, err = Open(path, Options{Node: "node-a", Address: protoSelf})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := s.EndpointsWithVeth("reefa")
			if err != nil || len(got) != 1 {
				t.Fatalf("endpoints of reefa: %+v %v", got, err)
			}
			if diff := cmp.Diff(ep.Assignments(), got[0].Assignments(), netipEqual); diff != "" {
				t.Errorf("recovered assignments (-want +got):\n%s", diff)
			}
			if damage.complete != (got[0].ContainerID == "a") {
				t.Errorf("container ID %q, complete=%v", got[0].ContainerID, damage.complete)
			}
			if problems, err := s.Check(); err != nil || len(problems) != 0 {
				t.Errorf("Check: %+v %v", problems, err)
			}
			for _, ip := range ep.Addrs() {
				if h := addrHolder(t, s, ip); h != got[0].Handle {
					t.Errorf("address index: %s held by %q, want %s", ip, h, got[0].Handle)
				}
			}
		})
	}
}

// TestRecoverDualStackPartial: when the kernel shows some of a dual-stack
// pod's routes, the pod keeps each recorded address that lies in a kept
// block and that no other pod holds (its route may be all that was lost:
// the pod still has the address on eth0, and another pod must not get it);
// every recorded address the rebuilt store does not hold is in Dropped.
func TestRecoverDualStackPartial(t *testing.T) {
	var other6 netip.Addr // in net.a's IPv6 block, not net.a's
	for _, tc := range []struct {
		name    string
		pods    func(a Endpoint) []KernelPod
		pools   []Pool
		want    func(a Endpoint) []netip.Addr // net.a's addresses after the recovery
		dropped func(a Endpoint) []string     // substrings of rep.Dropped, one each
	}{
		{"only the /32", func(a Endpoint) []KernelPod { return []KernelPod{{Veth: "reefa", IP: a.IP}} }, nil,
			func(a Endpoint) []netip.Addr { return a.Addrs() }, nil},
		{"only the /128", func(a Endpoint) []KernelPod { return []KernelPod{{Veth: "reefa", IP: a.Second.IP}} }, nil,
			func(a Endpoint) []netip.Addr { return a.Addrs() }, nil},
		{"the /128 on another veth", func(a Endpoint) []KernelPod {
			return []KernelPod{{Veth: "reefa", IP: a.IP}, {Veth: "reefb", IP: a.Second.IP}}
		}, nil, func(a Endpoint) []netip.Addr { return []netip.Addr{a.IP} }, nil},
		{"another /128 on the veth", func(a Endpoint) []KernelPod {
			return []KernelPod{{Veth: "reefa", IP: a.IP}, {Veth: "reefa", IP: other6}}
		}, nil, func(a Endpoint) []netip.Addr { return []netip.Addr{a.IP, other6} },
			func(a Endpoint) []string {
				return []string{a.Second.IP.String() + " of " + a.AddrsString() + " (net.a, veth reefa)"}
			}},
		{"the IPv6 pool removed", func(a Endpoint) []KernelPod { return []KernelPod{{Veth: "reefa", IP: a.IP}} }, []Pool{dual4},
			func(a Endpoint) []netip.Addr { return []netip.Addr{a.IP} },
			func(a Endpoint) []string {
				return []string{a.Second.IP.String() + " of " + a.AddrsString() + " (net.a, veth reefa)"}
			}},
		{"the pod gone", func(a Endpoint) []KernelPod { return nil }, nil, nil,
			func(a Endpoint) []string { return []string{a.AddrsString() + " (net.a, veth reefa): its pod is gone"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "reef.db")
			s := openProtoAt(t, path)
			b4, b6 := claimConfirmed(t, s, dual4), claimConfirmed(t, s, dual6)
			a, _, err := s.Allocate(Endpoint{Handle: "net.a", ContainerID: "a", HostVeth: "reefa", State: EndpointReady}, dual4, dual6)
			if err != nil {
				t.Fatal(err)
			}
			other6 = a.Second.IP.Next()
			if !b6.Contains(other6) {
				t.Fatalf("the test's other IPv6 address %s is outside %s", other6, b6)
			}
			s.Close()
			id, _, err := ReadIdentity(path)
			if err != nil {
				t.Fatal(err)
			}
			overwritePages(t, path, pagesOf(t, path, "freelist")...) // damaged, but the records read
			pools := tc.pools
			if pools == nil {
				pools = []Pool{dual4, dual6}
			}
			rep, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: pools, Identity: &id,
				Now: time.Unix(1800000000, 0), Pods: tc.pods(a), Blackholes: []netip.Prefix{b4, b6}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("endpoints %+v, dropped %q", rep.Endpoints, rep.Dropped)
			var want []string
			if tc.dropped != nil {
				want = tc.dropped(a)
			}
			if len(rep.Dropped) != len(want) {
				t.Errorf("dropped %q, want %d entries like %q", rep.Dropped, len(want), want)
			}
			for i := range min(len(want), len(rep.Dropped)) {
				if !strings.Contains(rep.Dropped[i], want[i]) {
					t.Errorf("dropped[%d] %q, want it to contain %q", i, rep.Dropped[i], want[i])
				}
			}
			s, err = Open(path, Options{Node: "node-a", Address: protoSelf})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, ok, err := s.Endpoint("net.a")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if ok {
					t.Errorf("net.a rebuilt as %s, its pod is gone", got.AddrsString())
				}
			} else {
				if diff := cmp.Diff(tc.want(a), got.Addrs(), netipEqual); !ok || diff != "" {
					t.Errorf("net.a's addresses (-want +got):\n%s", diff)
				}
				for _, r := range rep.Endpoints {
					if r.Handle == "net.a" && !cmp.Equal(r.IPs, got.Addrs(), netipEqual) {
						t.Errorf("the report gives net.a %v, the store %s", r.IPs, got.AddrsString())
					}
				}
			}
			if problems, err := s.Check(); err != nil || len(problems) != 0 {
				t.Errorf("Check: %+v %v", problems, err)
			}
			// Every address net.a keeps is refused to the next pod.
			next, _, err := s.Allocate(Endpoint{Handle: "net.b"}, pools...)
			if err != nil {
				t.Fatal(err)
			}
			for _, ip := range next.Addrs() {
				if ok && got.Holds(ip) {
					t.Errorf("the next pod got %s, which net.a holds", ip)
				}
			}
		})
	}
}
