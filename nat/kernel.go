package nat

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
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
// element and, if it has hostPorts, theirs in table inet reef-hostport.
// Adding elements that are there already succeeds. If one of reef's tables
// is missing the error wraps ErrNoTable, and nothing was added.
func (k *Kernel) AddPod(p Pod) error {
	err := k.podBatch(p, true)
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w: %w", err, ErrNoTable)
	}
	return err
}

// DelPod removes one pod's elements. An element, set or table that is not
// there is success: DEL is repeated. The ARP element and the hostPort
// elements go in batches of their own, so that one missing table does not
// keep the other's elements in place.
func (k *Kernel) DelPod(p Pod) error {
	arp := p
	arp.Ports = nil
	if err := k.podBatch(arp, false); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	if len(p.Ports) == 0 {
		return nil
	}
	if err := k.podBatch(p, false); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return nil
}

// podBatch adds (or deletes) one pod's elements in a batch of its own.
// Deleting, a pod with Ports deletes only those.
func (k *Kernel) podBatch(p Pod, add bool) error {
	if err := p.check(); err != nil {
		return err
	}
	var edits []nft.ElemEdit
	if (add || len(p.Ports) == 0) && p.ip4().IsValid() {
		edits = append(edits, arpfilter.Edit(p.arp()))
	}
	if len(p.Ports) > 0 {
		edits = append(edits, hostport.Edits(p.hostPorts())...)
	}
	return k.EditElems(edits, add)
}

// OwnTables lists package nat's tables (Ours) in every family: what
// `reef cleanup` removes.
func (k *Kernel) OwnTables() ([]nft.TableID, error) { return k.Tables(Ours) }
