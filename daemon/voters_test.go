package daemon

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/store"
)

// TestVoterListAtStart: a node that ran alone and confirmed a block is
// refused a cluster's list, with the file, line and key; one with nothing
// held takes it; a one-voter change passes, two voters at once do not.
func TestVoterListAtStart(t *testing.T) {
	self := netip.MustParseAddr("192.168.10.20")
	st := openVoterStore(t, self)
	parse := func(yaml string) Config { return parseVoterConfig(t, yaml) }
	alone := parse("nodeName: n1\n")
	l, err := voterList(alone, nodeAddrs{self}, st)
	if err != nil || !l.Alone || !slices.Equal(l.Voters, []netip.Addr{self}) {
		t.Fatalf("alone: %+v, %v", l, err)
	}
	three := "nodeName: n1\nbgp:\n  peers: [192.168.10.21, 192.168.10.22]\n  voters: [192.168.10.20, 192.168.10.21, 192.168.10.22]\n"
	// Nothing held yet: joining a cluster is fine.
	if _, err := voterList(parse(three), nodeAddrs{self}, st); err != nil {
		t.Fatalf("a lone node that holds nothing joins: %v", err)
	}
	if _, err := voterList(alone, nodeAddrs{self}, st); err != nil {
		t.Fatalf("back alone, holding nothing: %v", err)
	}
	pool := netip.MustParsePrefix("10.244.0.0/24")
	block := netip.MustParsePrefix("10.244.0.0/26")
	if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: block, Pool: pool}}, Confirm: []netip.Prefix{block}}); err != nil {
		t.Fatal(err)
	}
	_, err = voterList(parse(three), nodeAddrs{self}, st)
	if err == nil || !strings.HasPrefix(err.Error(), "config /etc/reef/config.yaml: line 4: bgp.voters: value [192.168.10.20 192.168.10.21 192.168.10.22]: this node ran alone") {
		t.Fatalf("a lone node with a block joins a cluster: %v", err)
	}
	// Alone again, then as a founder of a cluster of one voter, which
	// grows by one voter at a time.
	if _, err := voterList(alone, nodeAddrs{self}, st); err != nil {
		t.Fatal(err)
	}
	one := "nodeName: n1\nbgp:\n  peers: [192.168.10.21]\n  voters: [192.168.10.20]\n"
	if _, err := voterList(parse(one), nodeAddrs{self}, st); err != nil {
		t.Fatalf("the same list with peers: %v", err)
	}
	two := "nodeName: n1\nbgp:\n  peers: [192.168.10.21]\n  voters: [192.168.10.20, 192.168.10.21]\n"
	if _, err := voterList(parse(two), nodeAddrs{self}, st); err != nil {
		t.Fatalf("one voter added: %v", err)
	}
	other := "nodeName: n1\nbgp:\n  peers: [192.168.10.21]\n  voters: [192.168.10.22, 192.168.10.23]\n"
	if _, err := voterList(parse(other), nodeAddrs{self}, st); err == nil || !strings.Contains(err.Error(), "4 voters at once") {
		t.Fatalf("four voters changed: %v", err)
	}
	if l, _, _ := st.VoterList(); !slices.Equal(l.Voters, []netip.Addr{self, netip.MustParseAddr("192.168.10.21")}) {
		t.Fatalf("a refused list was recorded: %+v", l)
	}
}

// TestVoterListRestriction: a voter whose store is new (a wiped state dir)
// starts restricted, and stays so across restarts under the same list and
// while it is out of the list; added back, it is not. A store that `reef
// store init` made, one of an older reef, and a new non-voter are not
// restricted; a new store that ran alone first is, once it is a voter.
func TestVoterListRestriction(t *testing.T) {
	self := netip.MustParseAddr("192.168.10.20")
	parse := func(yaml string) Config {
		t.Helper()
		c, err := ParseConfig("/etc/reef/config.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	three := parse("nodeName: n1\nbgp:\n  peers: [192.168.10.21, 192.168.10.22]\n  voters: [192.168.10.20, 192.168.10.21, 192.168.10.22]\n")
	two := parse("nodeName: n1\nbgp:\n  peers: [192.168.10.21, 192.168.10.22]\n  voters: [192.168.10.21, 192.168.10.22]\n")
	alone := parse("nodeName: n1\n")
	open := func(path string) *store.Store {
		t.Helper()
		st, err := store.Open(path, store.Options{Node: "n1", Address: self})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	start := func(st *store.Store, cfg Config, restricted, lifted bool) {
		t.Helper()
		v, err := voterList(cfg, nodeAddrs{self}, st)
		if err != nil {
			t.Fatal(err)
		}
		if v.Restricted != restricted || v.Lifted != lifted {
			t.Fatalf("voters %v: restricted %v lifted %v, want %v %v", v.Voters, v.Restricted, v.Lifted, restricted, lifted)
		}
		ps, err := st.LoadProtocol()
		if err != nil || ps.Restricted != restricted {
			t.Fatalf("the store's restriction: %v %v, want %v", ps.Restricted, err, restricted)
		}
	}

	// A wiped voter: restricted, through a restart, and while out of the
	// list; added back, it is lifted.
	st := open(filepath.Join(t.TempDir(), "reef.db"))
	start(st, three, true, false)
	start(st, three, true, false)
	start(st, two, true, false)
	start(st, two, true, false)
	start(st, three, false, true)
	start(st, three, false, false)
	st.Close()

	// A founder after `reef store init`.
	path := filepath.Join(t.TempDir(), "reef.db")
	if _, err := store.Init(path, store.Options{Node: "n1", Address: self}, blockproto.VoterList{Voters: three.BGP.Voters}); err != nil {
		t.Fatal(err)
	}
	st = open(path)
	start(st, three, false, false)
	st.Close()

	// A store of an older reef: no voter list kept, not marked new.
	path = filepath.Join(t.TempDir(), "reef.db")
	open(path).Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("meta")).Delete([]byte("new-store")) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st = open(path)
	start(st, three, false, false)
	st.Close()

	// A new store that ran alone first: still new when it joins as a voter.
	st = open(filepath.Join(t.TempDir(), "reef.db"))
	start(st, alone, false, false)
	start(st, three, true, false)
	st.Close()

	// A new non-voter, added to the list later: never restricted.
	st = open(filepath.Join(t.TempDir(), "reef.db"))
	start(st, two, false, false)
	start(st, three, false, false)
	st.Close()
}

// TestVoterListChangeGivesUpPending: a claim pending when the list changes
// is given up at start (a claim is made, voted for, counted and confirmed
// under one list: blockproto/model/voters.pml, SWITCH_KEEPS_PENDING); a
// confirmed block stays, and a start under the same list gives up nothing.
func TestVoterListChangeGivesUpPending(t *testing.T) {
	self := netip.MustParseAddr("192.168.10.20")
	st := openVoterStore(t, self)
	parse := func(yaml string) Config { return parseVoterConfig(t, yaml) }
	three := parse("nodeName: n1\nbgp:\n  peers: [192.168.10.21, 192.168.10.22]\n  voters: [192.168.10.20, 192.168.10.21, 192.168.10.22]\n")
	four := parse("nodeName: n1\nbgp:\n  peers: [192.168.10.21, 192.168.10.22]\n  voters: [192.168.10.20, 192.168.10.21, 192.168.10.22, 192.168.10.23]\n")
	if _, err := voterList(three, nodeAddrs{self}, st); err != nil {
		t.Fatal(err)
	}
	pool := netip.MustParsePrefix("10.244.0.0/24")
	pending, confirmed := netip.MustParsePrefix("10.244.0.64/26"), netip.MustParsePrefix("10.244.0.0/26")
	if err := st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: pending, Pool: pool}, {Block: confirmed, Pool: pool}},
		Confirm: []netip.Prefix{confirmed}}); err != nil {
		t.Fatal(err)
	}
	if vs, err := voterList(three, nodeAddrs{self}, st); err != nil || len(vs.Released) != 0 {
		t.Fatalf("the same list: released %v, %v", vs.Released, err)
	}
	vs, err := voterList(four, nodeAddrs{self}, st)
	if err != nil || !slices.Equal(vs.Released, []netip.Prefix{pending}) {
		t.Fatalf("one voter added: released %v, %v; want %s", vs.Released, err, pending)
	}
	ps, err := st.LoadProtocol()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ps.Own[pending]; ok || !ps.Released[pending] {
		t.Errorf("the pending claim is not given up: own %v, released %v", ps.Own, ps.Released)
	}
	if ps.Own[confirmed].State != blockproto.OwnConfirmed {
		t.Errorf("the confirmed block %s is %v", confirmed, ps.Own[confirmed].State)
	}
}

// openVoterStore is a new store of node n1 at self, closed when the test ends.
func openVoterStore(t *testing.T, self netip.Addr) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "n1", Address: self})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// parseVoterConfig parses yaml as /etc/reef/config.yaml.
func parseVoterConfig(t *testing.T, yaml string) Config {
	t.Helper()
	c, err := ParseConfig("/etc/reef/config.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
