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
