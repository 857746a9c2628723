package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

var portPool = Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}

// tcp, udp and sctp build mappings for the tables: host "8080" or
// "192.168.1.5:8080" (any address or one), container port 80.
func tcp(host string) PortMapping  { return mapping("tcp", host) }
func udp(host string) PortMapping  { return mapping("udp", host) }
func sctp(host string) PortMapping { return mapping("sctp", host) }

func mapping(proto, host string) PortMapping {
	m := PortMapping{Protocol: proto, ContainerPort: 80}
	if ap, err := netip.ParseAddrPort(host); err == nil {
		m.HostIP, m.HostPort = ap.Addr(), ap.Port()
		return m
	}
	p, err := strconv.ParseUint(host, 10, 16)
	if err != nil {
		panic("bad host " + host)
	}
	m.HostPort = uint16(p)
	return m
}

// podEndpoint allocates the endpoint of pod name with container id, handle
// "net.<id>".
func podEndpoint(t *testing.T, s *Store, name, id string) Endpoint {
	t.Helper()
	ep, _, _, err := allocAuto(s, Endpoint{
		Handle: "net." + id, Network: "net", ContainerID: id, PodNamespace: "default", PodName: name,
	}, portPool)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// hostPortIndex returns the hostports bucket as "tcp 8080" or "tcp
// 192.168.1.5:8080" -> handle.
func hostPortIndex(t *testing.T, s *Store) map[string]string {
	t.Helper()
	names := map[byte]string{}
	for name, n := range protocolNumbers {
		names[n] = name
	}
	out := map[string]string{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHostPorts).ForEach(func(k, v []byte) error {
			ip, ok := keyHostIP(k)
			if !ok {
				return fmt.Errorf("malformed key %x", k)
			}
			m := PortMapping{Protocol: names[k[0]], HostIP: ip, HostPort: binary.BigEndian.Uint16(k[1:3])}
			out[m.Protocol+" "+m.hostPort()] = string(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// putIndexEntry writes a hostports entry directly, as a crash or a bug
// might have left it.
func putIndexEntry(t *testing.T, s *Store, m PortMapping, handle string) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHostPorts).Put(portKey(m), []byte(handle))
	})
	if err != nil {
		t.Fatal(err)
	}
}

func storedMappings(t *testing.T, s *Store, handle string) []PortMapping {
	t.Helper()
	ep, ok, err := s.Endpoint(handle)
	if err != nil || !ok {
		t.Fatalf("Endpoint(%s) = %v, %v", handle, ok, err)
	}
	return ep.PortMappings
}

func TestPortMappingString(t *testing.T) {
	for _, tc := range []struct {
		m    PortMapping
		want string
	}{
		{tcp("8080"), "tcp 8080 -> 80"},
		{tcp("192.168.1.5:8080"), "tcp 192.168.1.5:8080 -> 80"},
		{udp("[fd00::1]:53"), "udp [fd00::1]:53 -> 80"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestClaimPorts(t *testing.T) {
	s := openTest(t, "node-a")
	a := podEndpoint(t, s, "web", "abc123")
	pms := []PortMapping{tcp("8080"), udp("192.168.1.5:53"), sctp("[fd00::1]:9000")}
	got, err := s.ClaimPorts(a.Handle, pms)
	if err != nil {
		t.Fatalf("ClaimPorts: %v", err)
	}
	want := a
	want.PortMappings = pms
	if diff := cmp.Diff(want, got, netipEqual); diff != "" {
		t.Errorf("returned endpoint (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(pms, storedMappings(t, s, a.Handle), netipEqual); diff != "" {
		t.Errorf("stored mappings (-want +got):\n%s", diff)
	}
	wantIndex := map[string]string{"tcp 8080": a.Handle, "udp 192.168.1.5:53": a.Handle, "sctp [fd00::1]:9000": a.Handle}
	if diff := cmp.Diff(wantIndex, hostPortIndex(t, s)); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}

	// Again: nothing changes.
	if _, err := s.ClaimPorts(a.Handle, pms); err != nil {
		t.Fatalf("repeated ClaimPorts: %v", err)
	}
	if diff := cmp.Diff(pms, storedMappings(t, s, a.Handle), netipEqual); diff != "" {
		t.Errorf("stored mappings after repeat (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantIndex, hostPortIndex(t, s)); diff != "" {
		t.Errorf("index after repeat (-want +got):\n%s", diff)
	}

	// None clears them.
	got, err = s.ClaimPorts(a.Handle, []PortMapping{})
	if err != nil {
		t.Fatalf("ClaimPorts(none): %v", err)
	}
	if got.PortMappings != nil || storedMappings(t, s, a.Handle) != nil {
		t.Errorf("mappings after clearing: returned %v, stored %v; want nil", got.PortMappings, storedMappings(t, s, a.Handle))
	}
	if idx := hostPortIndex(t, s); len(idx) != 0 {
		t.Errorf("index after clearing = %v, want empty", idx)
	}
}

func TestClaimPortsConflicts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		held     PortMapping
		asked    PortMapping
		conflict bool
	}{
		{"any and any", tcp("8080"), tcp("8080"), true},
		{"any held, one asked", tcp("8080"), tcp("192.168.1.5:8080"), true},
		{"one held, any asked", tcp("192.168.1.5:8080"), tcp("8080"), true},
		{"same address", tcp("192.168.1.5:8080"), tcp("192.168.1.5:8080"), true},
		{"v6 held, any asked", udp("[fd00::1]:53"), udp("53"), true},
		{"other container port", tcp("8080"), PortMapping{Protocol: "tcp", HostPort: 8080, ContainerPort: 443}, true},
		{"other address", tcp("192.168.1.5:8080"), tcp("192.168.1.6:8080"), false},
		{"v4 and v6 address", tcp("192.168.1.5:8080"), tcp("[fd00::1]:8080"), false},
		{"tcp and udp", tcp("8080"), udp("8080"), false},
		{"tcp and sctp", tcp("8080"), sctp("8080"), false},
		{"other port", tcp("8080"), tcp("8081"), false},
		{"neighbour port", tcp("8080"), tcp("8079"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, "node-a")
			a := podEndpoint(t, s, "web", "abc123")
			b := podEndpoint(t, s, "db", "def456")
			if _, err := s.ClaimPorts(a.Handle, []PortMapping{tc.held}); err != nil {
				t.Fatal(err)
			}
			if got := tc.held.Overlaps(tc.asked); got != tc.conflict {
				t.Errorf("%v.Overlaps(%v) = %v, want %v", tc.held, tc.asked, got, tc.conflict)
			}
			if got := tc.asked.Overlaps(tc.held); got != tc.conflict {
				t.Errorf("%v.Overlaps(%v) = %v, want %v", tc.asked, tc.held, got, tc.conflict)
			}
			_, err := s.ClaimPorts(b.Handle, []PortMapping{tcp("7000"), tc.asked})
			if !tc.conflict {
				if err != nil {
					t.Fatalf("ClaimPorts: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrPortTaken) {
				t.Fatalf("ClaimPorts error = %v, want ErrPortTaken", err)
			}
			var taken *PortTakenError
			if !errors.As(err, &taken) {
				t.Fatalf("ClaimPorts error %v is no *PortTakenError", err)
			}
			if taken.Holder.Handle != a.Handle || taken.Mapping != tc.asked {
				t.Errorf("PortTakenError names %s held by %s, want %s held by %s", taken.Mapping, taken.Holder.Handle, tc.asked, a.Handle)
			}
			want := fmt.Sprintf("claim ports for net.def456: hostPort %s %s is held by pod default/web (container abc123, handle net.abc123)", tc.asked.Protocol, tc.asked.hostPort())
			if err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
			// A refused claim changes nothing, not even the free port.
			if got := storedMappings(t, s, b.Handle); got != nil {
				t.Errorf("refused claim stored %v", got)
			}
			if diff := cmp.Diff(map[string]string{tc.held.Protocol + " " + tc.held.hostPort(): a.Handle}, hostPortIndex(t, s)); diff != "" {
				t.Errorf("index after refused claim (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPortTakenErrorNamesHolder(t *testing.T) {
	m := tcp("192.168.1.5:8080")
	for _, tc := range []struct {
		holder Endpoint
		want   string
	}{
		{Endpoint{Handle: "h", ContainerID: "abc", PodNamespace: "ns", PodName: "web"}, "hostPort tcp 192.168.1.5:8080 is held by pod ns/web (container abc, handle h)"},
		{Endpoint{Handle: "h", ContainerID: "abc", PodName: "web"}, "hostPort tcp 192.168.1.5:8080 is held by pod web (container abc, handle h)"},
		{Endpoint{Handle: "h", ContainerID: "abc"}, "hostPort tcp 192.168.1.5:8080 is held by container abc (handle h)"},
		{Endpoint{Handle: "h"}, "hostPort tcp 192.168.1.5:8080 is held by endpoint h"},
	} {
		if got := (&PortTakenError{Mapping: m, Holder: tc.holder}).Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestClaimPortsReplaceFreesOld(t *testing.T) {
	s := openTest(t, "node-a")
	a := podEndpoint(t, s, "web", "abc123")
	b := podEndpoint(t, s, "db", "def456")
	if _, err := s.ClaimPorts(a.Handle, []PortMapping{tcp("8080"), udp("53")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimPorts(a.Handle, []PortMapping{tcp("9090"), udp("53")}); err != nil {
		t.Fatalf("re-claim: %v", err)
	}
	if _, err := s.ClaimPorts(b.Handle, []PortMapping{tcp("8080")}); err != nil {
		t.Errorf("claim of the port a gave up: %v", err)
	}
	if _, err := s.ClaimPorts(b.Handle, []PortMapping{udp("53")}); !errors.Is(err, ErrPortTaken) {
		t.Errorf("claim of the port a kept: %v, want ErrPortTaken", err)
	}
	want := map[string]string{"tcp 9090": a.Handle, "udp 53": a.Handle, "tcp 8080": b.Handle}
	if diff := cmp.Diff(want, hostPortIndex(t, s)); diff != "" {
		t.Errorf("index (-want +got):\n%s", diff)
	}
}

func TestReleaseFreesPorts(t *testing.T) {
	s := openTest(t, "node-a")
	a := podEndpoint(t, s, "web", "abc123")
	b := podEndpoint(t, s, "db", "def456")
	pms := []PortMapping{tcp("8080"), udp("192.168.1.5:53")}
	if _, err := s.ClaimPorts(a.Handle, pms); err != nil {
		t.Fatal(err)
	}
	// An entry of the same key held by b (a damaged file) is not a's to free.
	putIndexEntry(t, s, sctp("9000"), b.Handle)
	err := s.db.Update(func(tx *bolt.Tx) error {
		eps := tx.Bucket(bucketEndpoints)
		ep, _, err := getEndpoint(eps, a.Handle)
		if err != nil {
			return err
		}
		ep.PortMappings = append(ep.PortMappings, sctp("9000"))
		return putEndpoint(eps, ep)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, found, err := s.Release(a.Handle)
	if err != nil || !found {
		t.Fatalf("Release = %v, %v", found, err)
	}
	if len(got.PortMappings) != 3 {
		t.Errorf("Release returned mappings %v, want the three released", got.PortMappings)
	}
	if diff := cmp.Diff(map[string]string{"sctp 9000": b.Handle}, hostPortIndex(t, s)); diff != "" {
		t.Errorf("index after Release (-want +got):\n%s", diff)
	}
	if _, err := s.ClaimPorts(b.Handle, pms); err != nil {
		t.Errorf("claim of the released ports: %v", err)
	}
}

func TestClaimPortsDropsStaleEntries(t *testing.T) {
	s := openTest(t, "node-a")
	a := podEndpoint(t, s, "web", "abc123")
	b := podEndpoint(t, s, "db", "def456")
	c := podEndpoint(t, s, "cache", "ghi789")
	if _, err := s.ClaimPorts(c.Handle, []PortMapping{tcp("6379")}); err != nil {
		t.Fatal(err)
	}
	putIndexEntry(t, s, tcp("8080"), "net.gone")           // no record
	putIndexEntry(t, s, tcp("192.168.1.5:8080"), c.Handle) // c does not list it
	putIndexEntry(t, s, udp("8080"), "net.gone")           // does not overlap: left
	err := s.db.Update(func(tx *bolt.Tx) error {
		k := append(portPrefix(tcp("8080")), 1, 2) // no address is 2 bytes long
		return tx.Bucket(bucketHostPorts).Put(k, []byte(b.Handle))
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := s.ClaimPorts(a.Handle, []PortMapping{tcp("8080")}); err != nil {
		t.Fatalf("ClaimPorts over stale entries: %v", err)
	}
	var keys int
	s.db.View(func(tx *bolt.Tx) error {
		keys = tx.Bucket(bucketHostPorts).Stats().KeyN
		return nil
	})
	want := map[string]string{"tcp 8080": a.Handle, "tcp 6379": c.Handle, "udp 8080": "net.gone"}
	if diff := cmp.Diff(want, hostPortIndex(t, s)); diff != "" || keys != len(want) {
		t.Errorf("index after claim, %d keys (-want +got):\n%s", keys, diff)
	}
}

func TestClaimPortsRejectsBadRequests(t *testing.T) {
	s := openTest(t, "node-a")
	a := podEndpoint(t, s, "web", "abc123")
	noCPort := tcp("8080")
	noCPort.ContainerPort = 0
	zoned := tcp("8080")
	zoned.HostIP = netip.MustParseAddr("fe80::1%eth0")
	for _, tc := range []struct {
		name    string
		handle  string
		pms     []PortMapping
		wantSub string
	}{
		{"upper-case protocol", a.Handle, []PortMapping{mapping("TCP", "8080")}, `protocol "TCP" is not tcp, udp or sctp`},
		{"unknown protocol", a.Handle, []PortMapping{tcp("80"), mapping("icmp", "8080")}, `hostPort icmp 8080 -> 80: protocol "icmp"`},
		{"host port 0", a.Handle, []PortMapping{tcp("0")}, "hostPort tcp 0 -> 80: host port is 0"},
		{"container port 0", a.Handle, []PortMapping{noCPort}, "hostPort tcp 8080 -> 0: container port is 0"},
		{"unspecified v4", a.Handle, []PortMapping{tcp("0.0.0.0:8080")}, "host IP 0.0.0.0 stands for every address"},
		{"unspecified v6", a.Handle, []PortMapping{tcp("[::]:8080")}, "host IP :: stands for every address"},
		{"v4 in v6", a.Handle, []PortMapping{tcp("[::ffff:192.168.1.5]:8080")}, "give it as 192.168.1.5"},
		{"zone", a.Handle, []PortMapping{zoned}, "host IP fe80::1%eth0 has a zone"},
		{"overlap in request", a.Handle, []PortMapping{tcp("8080"), udp("8080"), tcp("192.168.1.5:8080")}, "hostPort tcp 192.168.1.5:8080 -> 80 overlaps tcp 8080 -> 80 of the same request"},
		{"same twice", a.Handle, []PortMapping{udp("53"), udp("53")}, "overlaps udp 53 -> 80"},
		{"unknown handle", "net.nope", []PortMapping{tcp("8080")}, "endpoint net.nope not found"},
		{"empty handle", "", nil, "handle is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ClaimPorts(tc.handle, tc.pms)
			if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
				t.Fatalf("ClaimPorts error = %v, want one containing %q", err, tc.wantSub)
			}
			if tc.handle == "net.nope" && !errors.Is(err, ErrNotFound) {
				t.Errorf("error %v is not ErrNotFound", err)
			}
		})
	}
	if got := storedMappings(t, s, a.Handle); got != nil {
		t.Errorf("refused claims stored %v", got)
	}
	if idx := hostPortIndex(t, s); len(idx) != 0 {
		t.Errorf("refused claims left index entries %v", idx)
	}
	if _, ok, _ := s.Endpoint("net.nope"); ok {
		t.Error("ClaimPorts of an unknown handle created a record")
	}
}

// TestClaimPortsParallel: of many handles claiming one port at once,
// exactly one gets it.
func TestClaimPortsParallel(t *testing.T) {
	s := openTest(t, "node-a")
	const n = 8
	var handles []string
	for i := range n {
		handles = append(handles, podEndpoint(t, s, fmt.Sprint("pod-", i), fmt.Sprint("c", i)).Handle)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, h := range handles {
		wg.Go(func() { _, errs[i] = s.ClaimPorts(h, []PortMapping{tcp("8080")}) })
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrPortTaken):
			t.Errorf("ClaimPorts(%s): %v", handles[i], err)
		}
	}
	if won != 1 {
		t.Errorf("%d of %d parallel claims of one port succeeded, want 1", won, n)
	}
}

func TestSetEndpointKeepsPortMappings(t *testing.T) {
	s := openTest(t, "node-a")
	a := podEndpoint(t, s, "web", "abc123")
	pms := []PortMapping{tcp("8080")}
	claimed, err := s.ClaimPorts(a.Handle, pms)
	if err != nil {
		t.Fatal(err)
	}

	ready := claimed
	ready.State = EndpointReady
	ready.Bandwidth = &Bandwidth{IngressRate: 1e6, IngressBurst: 1e5}
	if err := s.SetEndpoint(ready); err != nil {
		t.Fatalf("SetEndpoint with the stored mappings: %v", err)
	}
	got, _, _ := s.Endpoint(a.Handle)
	if diff := cmp.Diff(ready, got, netipEqual); diff != "" {
		t.Errorf("record after SetEndpoint (-want +got):\n%s", diff)
	}

	stale := a // read before ClaimPorts
	stale.State = EndpointReady
	changed := claimed
	changed.PortMappings = []PortMapping{tcp("9090")}
	for name, ep := range map[string]Endpoint{"none": stale, "other": changed} {
		err := s.SetEndpoint(ep)
		if err == nil || !strings.Contains(err.Error(), "change them with ClaimPorts") || !strings.Contains(err.Error(), "stored [tcp 8080 -> 80]") {
			t.Errorf("SetEndpoint with mappings %s: %v, want a refusal naming ClaimPorts", name, err)
		}
	}
	if diff := cmp.Diff(pms, storedMappings(t, s, a.Handle), netipEqual); diff != "" {
		t.Errorf("stored mappings (-want +got):\n%s", diff)
	}

	// An empty slice is none, like nil.
	b := podEndpoint(t, s, "db", "def456")
	b.PortMappings = []PortMapping{}
	if err := s.SetEndpoint(b); err != nil {
		t.Errorf("SetEndpoint with empty mappings: %v", err)
	}
	if got := storedMappings(t, s, b.Handle); got != nil {
		t.Errorf("stored mappings = %#v, want nil", got)
	}
}

// TestAllocateClaimsPorts: Allocate claims the template's ports in its own
// transaction; a port another endpoint holds fails the allocation whole.
func TestAllocateClaimsPorts(t *testing.T) {
	s := openTest(t, "node-a")
	a, _, _, err := allocAuto(s, Endpoint{Handle: "net.a", PodNamespace: "default", PodName: "a", PortMappings: []PortMapping{tcp("8080")}}, portPool)
	if err != nil || len(a.PortMappings) != 1 {
		t.Fatalf("Allocate with a port mapping: %+v, %v", a, err)
	}
	_, _, _, err = allocAuto(s, Endpoint{Handle: "net.b", PortMappings: []PortMapping{tcp("8080")}}, portPool)
	var taken *PortTakenError
	if !errors.As(err, &taken) || taken.Holder.Handle != "net.a" {
		t.Errorf("a second Allocate of tcp 8080: %v, want a PortTakenError naming net.a", err)
	}
	if _, ok, _ := s.Endpoint("net.b"); ok {
		t.Error("the refused Allocate stored a record")
	}
	if _, _, err := s.Release("net.a"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := allocAuto(s, Endpoint{Handle: "net.b", PortMappings: []PortMapping{tcp("8080")}}, portPool); err != nil {
		t.Errorf("Allocate of tcp 8080 after the holder's Release: %v", err)
	}
	if _, _, _, err := allocAuto(s, Endpoint{Handle: "net.c", PortMappings: []PortMapping{{Protocol: "icmp", HostPort: 1, ContainerPort: 1}}}, portPool); err == nil {
		t.Error("Allocate took a mapping of protocol icmp")
	}
}

func TestEndpointJSONRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s, err := Open(path, Options{Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	a := podEndpoint(t, s, "web", "abc123")
	pms := []PortMapping{tcp("8080"), udp("192.168.1.5:53"), sctp("[fd00::1]:9000")}
	a, err = s.ClaimPorts(a.Handle, pms)
	if err != nil {
		t.Fatal(err)
	}
	a.Bandwidth = &Bandwidth{IngressRate: 1_000_000, IngressBurst: 100_000, EgressRate: 2_000_000, EgressBurst: 200_000}
	if err := s.SetEndpoint(a); err != nil {
		t.Fatal(err)
	}
	s.Close()

	var raw []byte
	withRaw(t, path, func(tx *bolt.Tx) error {
		raw = append(raw, tx.Bucket(bucketEndpoints).Get([]byte(a.Handle))...)
		return nil
	})
	for _, want := range []string{
		`"portMappings":[{"protocol":"tcp","hostPort":8080,"containerPort":80},` +
			`{"protocol":"udp","hostIP":"192.168.1.5","hostPort":53,"containerPort":80},` +
			`{"protocol":"sctp","hostIP":"fd00::1","hostPort":9000,"containerPort":80}]`,
		`"bandwidth":{"ingressRate":1000000,"ingressBurst":100000,"egressRate":2000000,"egressBurst":200000}`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("stored record %s\nlacks %s", raw, want)
		}
	}

	s, err = Open(path, Options{Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _, err := s.Endpoint(a.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got, netipEqual); diff != "" {
		t.Errorf("endpoint after reopen (-want +got):\n%s", diff)
	}

	// Without mappings or limits, neither field is written, and a record
	// of schema 3 (which had neither) reads as none.
	b := podEndpoint(t, s, "db", "def456")
	v, err := json.Marshal(b.record())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(v), "portMappings") || strings.Contains(string(v), "bandwidth") {
		t.Errorf("record without mappings or limits = %s", v)
	}
	got, err = decodeEndpoint(b.Handle, v)
	if err != nil || got.PortMappings != nil || got.Bandwidth != nil {
		t.Errorf("decoded %+v, %v; want no mappings or limits", got, err)
	}
}

// TestOpenMigratesSchema3: the hostports bucket appears, endpoints stay and
// can claim ports.
func TestOpenMigratesSchema3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s, err := Open(path, Options{Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	a := podEndpoint(t, s, "web", "abc123")
	s.Close()
	withRaw(t, path, func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketHostPorts); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("3"))
	})

	s, err = Open(path, Options{Node: "node-a"})
	if err != nil {
		t.Fatalf("Open of a schema 3 file: %v", err)
	}
	defer s.Close()
	var schema string
	var bucket bool
	s.db.View(func(tx *bolt.Tx) error {
		schema = string(tx.Bucket(bucketMeta).Get(keySchema))
		bucket = tx.Bucket(bucketHostPorts) != nil
		return nil
	})
	if schema != "4" || !bucket {
		t.Errorf("after migration schema = %q, bucket %s exists = %v; want \"4\", true", schema, bucketHostPorts, bucket)
	}
	got, ok, err := s.Endpoint(a.Handle)
	if err != nil || !ok {
		t.Fatalf("Endpoint after migration = %v, %v", ok, err)
	}
	if diff := cmp.Diff(a, got, netipEqual); diff != "" {
		t.Errorf("endpoint after migration (-want +got):\n%s", diff)
	}
	if _, err := s.ClaimPorts(a.Handle, []PortMapping{tcp("8080")}); err != nil {
		t.Errorf("ClaimPorts after migration: %v", err)
	}
}

// TestAllocateThen: chosen gets the new record, before its write is
// committed (a reader of that moment does not see it yet), and is called
// for a new record only: not for a handle that exists, nor for an
// allocation refused (a port taken, no free address).
func TestAllocateThen(t *testing.T) {
	s := openTest(t, "node-a")
	if _, _, _, err := allocAuto(s, Endpoint{Handle: "net.a", PortMappings: []PortMapping{tcp("8080")}}, portPool); err != nil {
		t.Fatal(err)
	}
	var calls []Endpoint
	seen := true
	chosen := func(ep Endpoint) {
		calls = append(calls, ep)
		done := make(chan bool)
		go func() { // another goroutine's read, as the ADD's cover's
			_, ok, _ := s.Endpoint(ep.Handle)
			done <- ok
		}()
		seen = <-done
	}
	got, existed, err := s.AllocateThen(Endpoint{Handle: "net.b"}, chosen, portPool)
	if err != nil || existed {
		t.Fatalf("AllocateThen: %v, existed %t", err, existed)
	}
	if len(calls) != 1 || calls[0].IP != got.IP || calls[0].Handle != "net.b" {
		t.Fatalf("chosen got %+v, want the record %+v", calls, got)
	}
	if seen {
		t.Error("a reader saw the record while chosen ran: the write was committed before it")
	}
	if _, _, err := s.AllocateThen(Endpoint{Handle: "net.b"}, chosen, portPool); err != nil || len(calls) != 1 {
		t.Errorf("AllocateThen of an existing handle: %v; chosen called %d times in all, want 1", err, len(calls))
	}
	_, _, err = s.AllocateThen(Endpoint{Handle: "net.c", PortMappings: []PortMapping{tcp("8080")}}, chosen, portPool)
	var taken *PortTakenError
	if !errors.As(err, &taken) || len(calls) != 1 {
		t.Errorf("AllocateThen of a port taken: %v; chosen called %d times in all, want 1", err, len(calls))
	}
	if _, _, err := s.AllocateThen(Endpoint{Handle: "net.d"}, chosen, Pool{CIDR: netip.MustParsePrefix("10.99.0.0/24"), BlockSize: 26}); !errors.Is(err, ErrNoFreeAddress) || len(calls) != 1 {
		t.Errorf("AllocateThen with no confirmed block: %v; chosen called %d times in all, want 1", err, len(calls))
	}
}
