package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/blockproto"
)

var recPool = Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}

// recoverSetup writes a store with one confirmed block and n endpoints,
// closes it and returns its path, the endpoints and the block.
func recoverSetup(t *testing.T, n int) (string, []Endpoint, netip.Prefix) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	blk := claimConfirmed(t, s, recPool)
	var eps []Endpoint
	for i := range n {
		h := fmt.Sprintf("k8s-pod-network.c%02d", i)
		ep, _, err := s.Allocate(Endpoint{Handle: h, ContainerID: fmt.Sprintf("c%02d", i), IfName: "eth0",
			HostVeth: fmt.Sprintf("reefveth%02d", i), PodNamespace: "default", PodName: fmt.Sprintf("p%02d", i), State: EndpointReady}, recPool)
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path, eps, blk
}

func kernelPods(eps []Endpoint) []KernelPod {
	var out []KernelPod
	for _, ep := range eps {
		out = append(out, KernelPod{Veth: ep.HostVeth, IP: ep.IP, MTU: 1450})
	}
	return out
}

func TestRecoverKeepsEveryAddressInUse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		damage   func(t *testing.T, path string)
		complete bool // the records can be read back
	}{
		{"zero-length", func(t *testing.T, path string) { truncate(t, path, 0) }, false},
		{"meta pages overwritten", func(t *testing.T, path string) { overwritePages(t, path, 0, 1) }, false},
		{"the freelist overwritten", func(t *testing.T, path string) { overwritePages(t, path, pagesOf(t, path, "freelist")...) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path, eps, blk := recoverSetup(t, 5)
			id, ok, err := ReadIdentity(path)
			if err != nil || !ok {
				t.Fatalf("identity file: %v %v", ok, err)
			}
			tc.damage(t, path)
			// The kernel still has pods 0-3; pod 4 was deleted meanwhile.
			in := RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool},
				Pods: kernelPods(eps[:4]), Blackholes: []netip.Prefix{blk}, Identity: &id, Now: time.Unix(1800000000, 0)}
			rep, err := Recover(path, in)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if _, err := os.Stat(rep.MovedTo); err != nil {
				t.Errorf("damaged file not kept at %s: %v", rep.MovedTo, err)
			}
			s, err := Open(path, Options{Node: "node-a", Address: protoSelf})
			if err != nil {
				t.Fatalf("Open of the recovered store: %v", err)
			}
			defer s.Close()
			if inc, born := s.Incarnation(); inc != id.Incarnation || born != id.Born {
				t.Errorf("incarnation %08x/%d, want the old %08x/%d", inc, born, id.Incarnation, id.Born)
			}
			own, _ := s.OwnBlocks()
			if len(own) != 1 || own[0].CIDR != blk || own[0].State != BlockConfirmed || own[0].Used != 4 {
				t.Errorf("own blocks %+v, want %s confirmed with 4 used", own, blk)
			}
			for _, ep := range eps[:4] {
				got, err := s.EndpointsWithVeth(ep.HostVeth)
				if err != nil || len(got) != 1 || got[0].IP != ep.IP {
					t.Errorf("veth %s: %+v %v, want one endpoint with %s", ep.HostVeth, got, err, ep.IP)
					continue
				}
				if tc.complete != (got[0].ContainerID == ep.ContainerID) {
					t.Errorf("veth %s: container ID %q, complete=%v", ep.HostVeth, got[0].ContainerID, tc.complete)
				}
				if !tc.complete && !strings.HasPrefix(got[0].Handle, RecoveredHandlePrefix) {
					t.Errorf("veth %s: handle %q", ep.HostVeth, got[0].Handle)
				}
			}
			if ps, _ := s.LoadProtocol(); !ps.Recovered || ps.Restricted {
				t.Errorf("LoadProtocol: Recovered %v, Restricted %v; want recovered only", ps.Recovered, ps.Restricted)
			}
			if isNew, err := s.New(); err != nil || isNew {
				t.Errorf("a recovered store (the same incarnation) is new: %v %v", isNew, err)
			}
			// A new pod gets an unused address: pod 4's, which no pod holds.
			ep, _, err := s.Allocate(Endpoint{Handle: "k8s-pod-network.new"}, recPool)
			if err != nil {
				t.Fatal(err)
			}
			for _, old := range eps[:4] {
				if ep.IP == old.IP {
					t.Fatalf("new pod got %s, which %s holds", ep.IP, old.HostVeth)
				}
			}
		})
	}
}

func TestRecoverWithoutIncarnation(t *testing.T) {
	path, eps, blk := recoverSetup(t, 2)
	truncate(t, path, 0)
	in := RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool}, Pods: kernelPods(eps), Blackholes: []netip.Prefix{blk}}
	_, err := Recover(path, in)
	if err == nil || !strings.Contains(err.Error(), "--incarnation") {
		t.Fatalf("Recover without any incarnation: %v, want a refusal naming --incarnation", err)
	}
	// Nothing in use: a new incarnation is safe.
	rep, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool}})
	if err != nil || rep.Incarnation == 0 || !strings.HasPrefix(rep.IncarnationFrom, "new") {
		t.Fatalf("Recover of an empty node: %+v %v", rep, err)
	}
}

// A block only a pod's address shows (no blackhole: lost blocks have
// none) comes back lost, and so does one the file says is lost: their pods
// keep their addresses, no new one is handed out from them.
func TestRecoverKeepsLostBlocksLost(t *testing.T) {
	path, eps, blk := recoverSetup(t, 2)
	id, _, _ := ReadIdentity(path)
	truncate(t, path, 0)
	rep, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool},
		Pods: kernelPods(eps), Identity: &id, IdentityFrom: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Blocks) != 1 || rep.Blocks[0].CIDR != blk || rep.Blocks[0].State != BlockLost {
		t.Fatalf("blocks %+v, want %s lost", rep.Blocks, blk)
	}
	s := openProtoAt(t, path)
	defer s.Close()
	if _, _, err := s.Allocate(Endpoint{Handle: "k8s-pod-network.new"}, recPool); !errors.Is(err, ErrNoFreeAddress) {
		t.Fatalf("Allocate from a lost block: %v, want ErrNoFreeAddress", err)
	}
}

func TestRecoverSalvagesLostStateAndForgets(t *testing.T) {
	path, eps, blk := recoverSetup(t, 1)
	s := openProtoAt(t, path)
	inc, _ := s.Incarnation()
	self := blockproto.Node{Addr: protoSelf, Inc: inc}
	apply(t, s, blockproto.Changes{Lose: []netip.Prefix{blk}, Forget: []blockproto.Node{self}})
	s.Close()
	overwritePages(t, path, pagesOf(t, path, "freelist")...) // damaged, but the buckets read
	id, _, _ := ReadIdentity(path)
	if _, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool},
		Pods: kernelPods(eps), Blackholes: []netip.Prefix{blk}, Identity: &id, IdentityFrom: "test"}); err != nil {
		t.Fatal(err)
	}
	s = openProtoAt(t, path)
	defer s.Close()
	ps, err := s.LoadProtocol()
	if err != nil {
		t.Fatal(err)
	}
	if ps.Own[blk].State != blockproto.OwnLost {
		t.Errorf("block %s is %s, want lost as the file had it", blk, ps.Own[blk].State)
	}
	if !ps.Forgotten[self] {
		t.Error("the forget of this node was not kept")
	}
}

// TestRecoverNothingInUseIsANewIncarnation: with nothing in use a new
// incarnation is drawn, and the store is new (Store.New) with no voter
// list, as from an empty state dir: the daemon brings a voter up
// restricted.
func TestRecoverNothingInUseIsANewIncarnation(t *testing.T) {
	path, _, _ := recoverSetup(t, 1)
	s := openProtoAt(t, path)
	if err := s.RunUnder(blockproto.VoterList{Voters: []netip.Addr{protoSelf, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}}, false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	id, _, _ := ReadIdentity(path)
	truncate(t, path, 0)
	rep, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool}, Identity: &id, IdentityFrom: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Recovered || rep.Incarnation == id.Incarnation {
		t.Fatalf("report %+v: want a new incarnation, not marked recovered", rep)
	}
	s = openProtoAt(t, path)
	defer s.Close()
	if ps, _ := s.LoadProtocol(); ps.Recovered {
		t.Error("a new incarnation is marked recovered")
	}
	if isNew, err := s.New(); err != nil || !isNew {
		t.Errorf("the new incarnation's store is not new: %v %v", isNew, err)
	}
	if _, ok, err := s.VoterList(); err != nil || ok {
		t.Errorf("the new incarnation's store keeps a voter list: %v %v", ok, err)
	}
}

func TestRecoverRefusesDisagreeingIncarnations(t *testing.T) {
	path, eps, blk := recoverSetup(t, 1)
	overwritePages(t, path, pagesOf(t, path, "freelist")...)
	other := Identity{Node: "node-a", Address: protoSelf, Incarnation: 0x1234, Born: 1}
	_, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool},
		Pods: kernelPods(eps), Blackholes: []netip.Prefix{blk}, Identity: &other, IdentityFrom: "--incarnation"})
	if err == nil || !strings.Contains(err.Error(), "00001234") {
		t.Fatalf("Recover with an incarnation the file contradicts: %v", err)
	}
}

// A store file gone where identity.json says there was one is not a new
// node: Open refuses to draw a new incarnation over it.
func TestOpenRefusesLostStore(t *testing.T) {
	path, _, _ := recoverSetup(t, 1)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, err := Open(path, Options{Node: "node-a", Address: protoSelf})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "identity.json") || !strings.Contains(err.Error(), "reef store recover") {
		t.Fatalf("Open of a lost store: %v", err)
	}
}

// TestRecoverTwiceInOneSecond: a second recovery at the same time keeps
// its damaged file beside the first's instead of failing on the name.
func TestRecoverTwiceInOneSecond(t *testing.T) {
	path, _, _ := recoverSetup(t, 1)
	s := openProtoAt(t, path)
	s.Close()
	id, _, _ := ReadIdentity(path)
	now := time.Now()
	var moved []string
	for range 2 {
		truncate(t, path, 0)
		rep, err := Recover(path, RecoverInput{Node: "node-a", Address: protoSelf, Pools: []Pool{recPool}, Identity: &id, IdentityFrom: "test", Now: now})
		if err != nil {
			t.Fatalf("recover %d: %v", len(moved)+1, err)
		}
		moved = append(moved, rep.MovedTo)
	}
	if moved[0] == moved[1] {
		t.Errorf("both recoveries kept the damaged file as %s", moved[0])
	}
	for _, m := range moved {
		if _, err := os.Stat(m); err != nil {
			t.Errorf("damaged file kept: %v", err)
		}
	}
}
