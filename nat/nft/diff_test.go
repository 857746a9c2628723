package nft

import (
	"slices"
	"testing"

	"github.com/google/nftables"
)

// TestDiffInPlaceDeletesBaseChainsFirst: chains a table no longer wants go
// base chains first, so that no deleted chain is still jumped to by one
// deleted after it (the kernel says EBUSY), whatever their names.
func TestDiffInPlaceDeletesBaseChainsFirst(t *testing.T) {
	id := TableID{Family: nftables.TableFamilyINet, Name: "reef"}
	have := Table{ID: id, Chains: []Chain{
		{Name: "a-regular"},
		{Name: "keep", Hooked: true, Hook: *nftables.ChainHookForward},
		{Name: "z-base", Hooked: true, Hook: *nftables.ChainHookInput},
		{Name: "b-regular"},
	}}
	want := Table{ID: id, Chains: []Chain{{Name: "keep", Hooked: true, Hook: *nftables.ChainHookForward}}}
	var dels []string
	for _, c := range DiffInPlace([]Table{want}, []Table{have}).Changes {
		if c.Kind == DelChain {
			dels = append(dels, c.Chain)
		}
	}
	if w := []string{"z-base", "a-regular", "b-regular"}; !slices.Equal(dels, w) {
		t.Errorf("deleted chains in the order %v, want %v", dels, w)
	}
}
