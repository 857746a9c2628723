package nft

import (
	"net/netip"
	"os/exec"
	"testing"

	"github.com/google/nftables"

	"github.com/reefcni/reef/internal/netnstest"
)

// TestGenerationsInKernel: in a throw-away network namespace, a Mark
// holds across the commits of two Kernels that follow the same
// Generations (a policy batch, a pod's elements, a batch of elements that
// are there, a batch that fails: the last two commit nothing) and stops holding at the first commit of anyone else:
// the nft binary, a Kernel that follows none, a Generations of its own.
// A Mark taken after that holds again; one of another namespace's
// Generations never holds here.
func TestGenerationsInKernel(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed (the nftables package; make test installs it)")
	}
	n := netnstest.New(t)
	opt := nftables.WithNetNSFd(int(n.Fd()))
	gens := NewGenerations(opt)
	t.Cleanup(func() { gens.Close() })
	policyK, podK := NewKernel(opt).Follow(gens), NewKernel(opt).Follow(gens)
	id := TableID{Family: nftables.TableFamilyINet, Name: "reefgen"}
	set := Set{Name: "addrs", KeyType: nftables.TypeIPAddr.Name, KeyLen: 4}
	table := Table{ID: id, Sets: []Set{set}, Chains: []Chain{{Name: "c", Rules: []Rule{markRule(1)}}}}
	elem := func(s string) []Elem { a := netip.MustParseAddr(s); return []Elem{{From: a, To: a}} }
	edit := func(k *Kernel, a string, add bool) error {
		return k.EditElems([]ElemEdit{{Table: id, Set: set, Elems: elem(a)}}, add)
	}

	m := policyK.Mark()
	if !policyK.Unchanged(m) {
		t.Fatal("a Mark with no commit since: Unchanged false")
	}
	if err := policyK.Apply(Diff([]Table{table}, nil)); err != nil {
		t.Fatal(err)
	}
	if err := edit(podK, "10.0.0.1", true); err != nil {
		t.Fatal(err)
	}
	if err := edit(podK, "10.0.0.1", true); err != nil { // there already: a batch that commits nothing
		t.Fatal(err)
	}
	if err := edit(podK, "10.0.0.9", false); err == nil { // not there: the batch fails, nothing is committed
		t.Fatal("deleting an element that is not there succeeded")
	}
	if err := edit(policyK, "10.0.0.2", true); err != nil {
		t.Fatal(err)
	}
	if !policyK.Unchanged(m) || !podK.Unchanged(m) {
		t.Fatal("after reef's own commits only: Unchanged false")
	}

	other := map[string]func(){
		"nft": func() { netnstest.Run(t, n, "nft", "delete", "element", "inet", "reefgen", "addrs", "{ 10.0.0.1 }") },
		"a Kernel that follows none": func() {
			if err := edit(NewKernel(opt), "10.0.0.3", true); err != nil {
				t.Fatal(err)
			}
		},
		"a Kernel of other Generations": func() {
			g := NewGenerations(opt)
			defer g.Close()
			if err := edit(NewKernel(opt).Follow(g), "10.0.0.4", true); err != nil {
				t.Fatal(err)
			}
		},
	}
	for _, who := range []string{"nft", "a Kernel that follows none", "a Kernel of other Generations"} {
		m := policyK.Mark()
		other[who]()
		if policyK.Unchanged(m) {
			t.Errorf("after a commit of %s: Unchanged true", who)
		}
		// reef's next batch does not mend the chain; from the second
		// round on it adds an element that is there and commits nothing,
		// leaving the other's generation one past reef's last.
		if err := edit(podK, "10.0.0.5", true); err != nil {
			t.Fatal(err)
		}
		if policyK.Unchanged(m) {
			t.Errorf("after a commit of %s and one of reef's: Unchanged true", who)
		}
		if m2 := policyK.Mark(); !policyK.Unchanged(m2) {
			t.Errorf("a Mark after the commit of %s: Unchanged false", who)
		}
	}

	elsewhere := netnstest.New(t)
	g2 := NewGenerations(nftables.WithNetNSFd(int(elsewhere.Fd())))
	defer g2.Close()
	if m := policyK.Mark(); g2.Unchanged(m) {
		t.Error("another namespace's Generations: Unchanged true for this one's Mark")
	}
	if (&Kernel{}).Unchanged(policyK.Mark()) {
		t.Error("a Kernel that follows no Generations: Unchanged true")
	}
}
