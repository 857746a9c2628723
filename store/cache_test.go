package store

import (
	"net/netip"
	"testing"

	"github.com/reefcni/reef/blockproto"
)

// TestReadCacheFollowsWrites: LoadProtocol and Blocks, read again after
// each kind of write, show the write; what a caller does to a result does
// not reach the next caller.
func TestReadCacheFollowsWrites(t *testing.T) {
	s := openProto(t)
	read := func() (blockproto.State, []Block) {
		t.Helper()
		st, err := s.LoadProtocol()
		if err != nil {
			t.Fatal(err)
		}
		return st, blockList(t, s)
	}
	read() // fill the cache

	b := claimConfirmed(t, s, protoPool)
	st, bs := read()
	if o := st.Own[b]; o.State != blockproto.OwnConfirmed {
		t.Fatalf("after confirming %s, LoadProtocol has it as %+v", b, o)
	}
	if len(bs) != 1 || bs[0].CIDR != b || bs[0].Used != 0 {
		t.Fatalf("after confirming %s, Blocks = %+v", b, bs)
	}

	if _, _, err := s.Allocate(Endpoint{Handle: "h1", ContainerID: "c1", IfName: "eth0"}, protoPool); err != nil {
		t.Fatal(err)
	}
	st, bs = read()
	if st.Own[b].Used != 1 || bs[0].Used != 1 {
		t.Fatalf("after an allocation in %s: LoadProtocol Used %d, Blocks Used %d; want 1 and 1", b, st.Own[b].Used, bs[0].Used)
	}

	// Scribble over both results of a read the cache answers: the next
	// read must not see it.
	st, bs = read()
	delete(st.Own, b)
	st.Grants[protoBlk3] = nodeB
	bs[0].Used = 99
	st, bs = read()
	if _, ok := st.Own[b]; !ok || len(st.Grants) != 0 || bs[0].Used != 1 {
		t.Fatalf("a caller's change to a result reached the next read: Own %v, Grants %v, Blocks %+v", st.Own, st.Grants, bs)
	}

	if _, _, err := s.Release("h1"); err != nil {
		t.Fatal(err)
	}
	apply(t, s, blockproto.Changes{Grant: []blockproto.Grant{{Block: protoBlk3, To: nodeB}}})
	st, bs = read()
	if st.Own[b].Used != 0 || bs[0].Used != 0 || st.Grants[protoBlk3] != nodeB {
		t.Fatalf("after a release and a vote: Used %d/%d, Grants %v", st.Own[b].Used, bs[0].Used, st.Grants)
	}

	if err := s.SetBlockOwnerNames(map[netip.Addr]string{protoPeerB: "node-b"}); err != nil {
		t.Fatal(err)
	}
	if _, bs = read(); len(bs) != 1 {
		t.Fatalf("Blocks after naming owners = %+v", bs)
	}
}

// TestEndpointsCacheFollowsWrites: Endpoints, read again after each kind
// of write to a record (a change, a release, a new one), shows the write;
// what a caller does to a result does not reach the next caller.
func TestEndpointsCacheFollowsWrites(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	s := openTest(t, "node-a")
	for _, h := range []string{"net.a", "net.b"} {
		if _, _, _, err := allocAuto(s, Endpoint{Handle: h, HostVeth: "reef-" + h}, pool); err != nil {
			t.Fatal(err)
		}
	}
	byHandle := func() map[string]Endpoint {
		t.Helper()
		eps, err := s.Endpoints()
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]Endpoint{}
		for _, ep := range eps {
			m[ep.Handle] = ep
		}
		return m
	}
	byHandle() // fill the cache
	if _, err := s.ClaimPorts("net.a", []PortMapping{{Protocol: "tcp", HostPort: 8080, ContainerPort: 80}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEndpoint("net.b", func(ep *Endpoint) bool {
		ep.Bandwidth, ep.State = &Bandwidth{IngressRate: 1000}, EndpointReady
		return true
	}); err != nil {
		t.Fatal(err)
	}
	m := byHandle()
	if a, b := m["net.a"], m["net.b"]; len(a.PortMappings) != 1 || b.Bandwidth == nil || b.State != EndpointReady {
		t.Fatalf("after the writes: net.a %+v, net.b %+v; want a hostPort on a, limits and ready on b", a, b)
	}

	// Scribble over a result the cache answers: the next read must not
	// see it.
	m["net.a"].PortMappings[0].HostPort = 1
	m["net.b"].Bandwidth.IngressRate = 1
	m = byHandle()
	if m["net.a"].PortMappings[0].HostPort != 8080 || m["net.b"].Bandwidth.IngressRate != 1000 {
		t.Fatalf("a caller's change to a result reached the next read: %+v, %+v", m["net.a"].PortMappings, *m["net.b"].Bandwidth)
	}

	if _, _, err := s.Release("net.a"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := allocAuto(s, Endpoint{Handle: "net.c"}, pool); err != nil {
		t.Fatal(err)
	}
	m = byHandle()
	if _, ok := m["net.a"]; ok || len(m) != 2 || !m["net.c"].IP.IsValid() {
		t.Fatalf("after a release and an allocation: %v; want net.b and net.c", m)
	}
}
