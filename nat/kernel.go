package nat

import (
	"errors"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/ndpfilter"
	"github.com/reefcni/reef/nat/nft"
)

// ErrNoTable is returned (wrapped) by AddPod when reef's ARP table or its
// set is not in the kernel: a table deleted by hand, which the reconcile
// loop recreates with every pod's element.
var ErrNoTable = errors.New("reef's nftables table or set is missing")

// Kernel is the nftables engine (nft.Kernel) with reef's pods' elements:
// CNI ADD and DEL add and remove one pod's own (AddPod, DelPod).
type Kernel struct{ *nft.Kernel }

// NewKernel returns a Kernel for the caller's network namespace (the
// daemon's, the node's), or for another given by nftables.WithNetNSFd
// (tests).
func NewKernel(opts ...nftables.ConnOption) *Kernel { return &Kernel{nft.NewKernel(opts...)} }

// AddPod adds one pod's elements, in a batch of its own: its ARP-filter
// element (IPv4), its NDP-filter element (IPv6) and, if it has hostPorts,
// theirs in table inet reef-hostport.
// Adding elements that are there already succeeds. If one of reef's tables
// is missing the error wraps ErrNoTable, and nothing was added.
func (k *Kernel) AddPod(p Pod) error {
	if err := p.check(); err != nil {
		return err
	}
	var all []nft.ElemEdit
	for _, edits := range p.edits() {
		all = append(all, edits...)
	}
	err := k.EditElems(all, true)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w: %w", err, ErrNoTable)
	}
	return err
}

// DelPod removes one pod's elements. An element, set or table that is not
// there is success: DEL is repeated. The ARP element, the NDP element and
// the hostPort elements go in batches of their own, so that one missing
// table does not keep the others' elements in place.
func (k *Kernel) DelPod(p Pod) error {
	if err := p.check(); err != nil {
		return err
	}
	for _, edits := range p.edits() {
		if err := k.EditElems(edits, false); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	return nil
}

// CheckPod lists what of the pod's elements the kernel lacks (a table,
// a set, an element missing, or a map element that leads elsewhere), one
// line each; none is a pod whose elements are all there. It only reads.
func (k *Kernel) CheckPod(p Pod) ([]string, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	var ids []nft.TableID
	for _, edits := range p.edits() {
		ids = append(ids, edits[0].Table)
	}
	tables, err := k.Read(ids)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, edits := range p.edits() {
		i := slices.IndexFunc(tables, func(t nft.Table) bool { return t.ID == edits[0].Table })
		if i < 0 {
			missing = append(missing, fmt.Sprintf("table %s is missing", edits[0].Table))
			continue
		}
		for _, e := range edits {
			j := slices.IndexFunc(tables[i].Sets, func(s nft.Set) bool { return s.Name == e.Set.Name })
			if j < 0 {
				missing = append(missing, fmt.Sprintf("set %s of table %s is missing", e.Set.Name, e.Table))
				continue
			}
			for _, el := range e.Elems {
				if !slices.Contains(tables[i].Sets[j].Elems, el) {
					missing = append(missing, fmt.Sprintf("element %s of set %s in table %s is missing", el, e.Set.Name, e.Table))
				}
			}
		}
	}
	return missing, nil
}

// edits are the pod's elements, table by table: its ARP-filter element,
// its NDP-filter element and its hostPorts, each for the addresses and
// ports it has.
func (p Pod) edits() [][]nft.ElemEdit {
	var out [][]nft.ElemEdit
	if p.ip4().IsValid() {
		out = append(out, []nft.ElemEdit{arpfilter.Edit(p.arp())})
	}
	if p.ip6().IsValid() {
		out = append(out, []nft.ElemEdit{ndpfilter.Edit(p.ndp())})
	}
	if len(p.Ports) > 0 {
		out = append(out, hostport.Edits(p.hostPorts()))
	}
	return out
}

// OwnTables lists package nat's tables (Ours) in every family: what
// `reef cleanup` removes.
func (k *Kernel) OwnTables() ([]nft.TableID, error) { return k.Tables(Ours) }
