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
