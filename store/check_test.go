package store

import (
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestCheck: an address the index gives to no record, a record whose
// address the index does not give it, and the release of the orphan.
func TestCheck(t *testing.T) {
	s := openTest(t, "node-a")
	a, _, _, err := allocAuto(s, Endpoint{Handle: "net.a"}, portPool)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s.Check(); err != nil || len(p) != 0 {
		t.Fatalf("Check of a clean store: %v, %v", p, err)
	}
	orphan := a.IP.Next()
	if err := s.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketAddrs).Put(addrKey(orphan), []byte("net.gone")); err != nil {
			return err
		}
		return tx.Bucket(bucketAddrs).Delete(addrKey(a.IP))
	}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{}
	for _, x := range p {
		kinds[x.Kind] = x.Detail
	}
	if len(p) != 2 || !strings.Contains(kinds[ProblemOrphanAddress], "net.gone") || !strings.Contains(kinds[ProblemUnindexed], "net.a") {
		t.Errorf("Check: %+v", p)
	}
	if _, err := s.ReleaseOrphanAddress(a.IP); err == nil {
		t.Error("ReleaseOrphanAddress of a free address succeeded")
	}
	if h, err := s.ReleaseOrphanAddress(orphan); err != nil || h != "net.gone" {
		t.Errorf("ReleaseOrphanAddress: %q, %v", h, err)
	}
	if p, _ := s.Check(); len(p) != 1 {
		t.Errorf("Check after the release: %+v, want only the unindexed endpoint", p)
	}
}

func TestBandwidthString(t *testing.T) {
	b := Bandwidth{IngressRate: 10_000_000, IngressBurst: 80_000, EgressRate: 1_500_000_000, EgressBurst: 1500}
	if got, want := b.String(), "in 10Mbit/s (burst 80kbit), out 1.5Gbit/s (burst 1.5kbit)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := (Bandwidth{EgressRate: 999, EgressBurst: 8}).String(), "in -, out 999bit/s (burst 8bit)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// TestCheckAddressItsHolderDoesNotHold: an index entry whose holder has a
// record that does not hold the address (a dual-stack record rewritten
// without its second address) is an orphan: Check reports it and
// ReleaseOrphanAddress frees it, but not the address the record holds.
func TestCheckAddressItsHolderDoesNotHold(t *testing.T) {
	s := openProto(t)
	claimConfirmed(t, s, dual4)
	claimConfirmed(t, s, dual6)
	ep, _, err := s.Allocate(Endpoint{Handle: "net.a", HostVeth: "reefa"}, dual4, dual6)
	if err != nil {
		t.Fatal(err)
	}
	leaked := ep.Second.IP
	if err := s.db.Update(func(tx *bolt.Tx) error {
		e := ep
		e.Second = Assignment{}
		return putEndpoint(tx.Bucket(bucketEndpoints), e)
	}); err != nil {
		t.Fatal(err)
	}
	p, err := s.Check()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 1 || p[0].Kind != ProblemOrphanAddress || p[0].IP != leaked || p[0].Handle != "net.a" || !strings.Contains(p[0].Detail, "does not hold it") {
		t.Errorf("Check: %+v, want one %s problem for %s held by net.a", p, ProblemOrphanAddress, leaked)
	}
	if _, err := s.ReleaseOrphanAddress(ep.IP); err == nil || !strings.Contains(err.Error(), "belongs to endpoint net.a") {
		t.Errorf("ReleaseOrphanAddress of the address net.a holds: %v", err)
	}
	if h, err := s.ReleaseOrphanAddress(leaked); err != nil || h != "net.a" {
		t.Errorf("ReleaseOrphanAddress(%s): %q, %v", leaked, h, err)
	}
	if h := addrHolder(t, s, leaked); h != "" {
		t.Errorf("%s still held by %q", leaked, h)
	}
	if h := addrHolder(t, s, ep.IP); h != "net.a" {
		t.Errorf("%s held by %q, want net.a", ep.IP, h)
	}
	if p, err := s.Check(); err != nil || len(p) != 0 {
		t.Errorf("Check after the release: %+v %v", p, err)
	}
}
