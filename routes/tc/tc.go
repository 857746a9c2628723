package tc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// tcWriter applies one SetBandwidth and records what it changed.
type tcWriter struct {
	h       netlinksafe.Handle
	tick    float64
	changes []string
}

func (b *tcWriter) changed(format string, a ...any) {
	b.changes = append(b.changes, fmt.Sprintf(format, a...))
}

// rootQdisc returns the root qdisc someone set on link: nil for the
// kernel's default (handle 0, noqueue or pfifo_fast), which is nobody's.
func rootQdisc(h netlinksafe.Handle, link netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if a := q.Attrs(); a.Parent == netlink.HANDLE_ROOT && a.Handle != 0 {
			return q, nil
		}
	}
	return nil, nil
}

// ingressQdisc returns the qdisc at link's ingress hook (ingress or
// clsact), nil if there is none.
func ingressQdisc(h netlinksafe.Handle, link netlink.Link) (netlink.Qdisc, error) {
	qs, err := h.QdiscList(link)
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %s: %w", link.Attrs().Name, err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_INGRESS {
			return q, nil
		}
	}
	return nil, nil
}

// setRootTbf makes link's root qdisc the tbf want, or removes a root tbf if
// want is nil. A root of another kind is replaced when a limit is wanted
// (the link is reef's) and left alone otherwise.
func (b *tcWriter) setRootTbf(link netlink.Link, want *tbfParams) error {
	name := link.Attrs().Name
	cur, err := rootQdisc(b.h, link)
	if err != nil {
		return err
	}
	tbf, isTbf := cur.(*netlink.Tbf)
	if want == nil {
		if !isTbf {
			return nil
		}
		if err := b.h.QdiscDel(tbf); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete tbf on %s: %w", name, err)
		}
		b.changed("tbf on %s removed, was %s", name, describeQdisc(cur, b.tick))
		return nil
	}
	if isTbf && tbfOf(tbf) == *want && tbf.Peakrate == 0 {
		return nil
	}
	q := &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       want.Rate, Buffer: want.Buffer, Limit: want.Limit,
	}
	switch {
	case isTbf:
		// Same kind: the kernel changes it in place, keeping its queue.
		q.Handle = tbf.Handle
		err = b.h.QdiscReplace(q)
	case cur != nil:
		// Another kind may hold handle 1:, which a tbf cannot replace.
		if err := b.h.QdiscDel(cur); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s qdisc on %s: %w", cur.Type(), name, err)
		}
		err = b.h.QdiscAdd(q)
	default:
		err = b.h.QdiscAdd(q)
	}
	if err != nil {
		return fmt.Errorf("set tbf %s on %s: %w", want.describe(b.tick), name, err)
	}
	b.changed("tbf on %s: %s, was %s", name, want.describe(b.tick), describeQdisc(cur, b.tick))
	return nil
}

// setEgress limits what the pod sends: the ifb with its tbf first, then the
// redirect to it, so that no packet is redirected to a device not ready.
func (b *tcWriter) setEgress(veth netlink.Link, want tbfParams) error {
	name := veth.Attrs().Name
	cur, err := ingressQdisc(b.h, veth)
	if err != nil {
		return err
	}
	if cur != nil && cur.Type() != "ingress" {
		return fmt.Errorf("veth %s has a %s qdisc at ingress, not reef's: refusing to replace it", name, cur.Type())
	}
	ifb, err := b.ensureIFB(veth)
	if err != nil {
		return err
	}
	if err := b.setRootTbf(ifb, &want); err != nil {
		return err
	}
	if cur == nil {
		q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: veth.Attrs().Index, Handle: ingressParent, Parent: netlink.HANDLE_INGRESS}}
		if err := b.h.QdiscAdd(q); err != nil {
			return fmt.Errorf("add ingress qdisc on %s: %w", name, err)
		}
		b.changed("ingress qdisc on %s added", name)
	}
	return b.setRedirect(veth, ifb)
}

// ensureIFB finds or creates the pod's ifb and repairs its alias, MTU and
// state. An ifb of that name that names another veth is refused.
func (b *tcWriter) ensureIFB(veth netlink.Link) (netlink.Link, error) {
	vname, mtu := veth.Attrs().Name, veth.Attrs().MTU
	name := IFBName(vname)
	l, err := b.h.LinkByName(name)
	created := false
	if isNotFound(err) {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MTU, attrs.Flags = name, mtu, net.FlagUp
		if err := b.h.LinkAdd(&netlink.Ifb{LinkAttrs: attrs}); err != nil {
			return nil, fmt.Errorf("create ifb %s for %s: %w", name, vname, err)
		}
		b.changed("ifb %s for %s created", name, vname)
		created = true
		if l, err = b.h.LinkByName(name); err != nil {
			return nil, fmt.Errorf("find ifb %s: %w", name, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("find ifb %s: %w", name, err)
	}
	a := l.Attrs()
	if l.Type() != "ifb" {
		return nil, fmt.Errorf("link %s is a %s, not the ifb of %s: refusing to use it", name, l.Type(), vname)
	}
	// What a new ifb lacks is part of its creation, not a repair.
	fix := func(format string, args ...any) {
		if !created {
			b.changed(format, args...)
		}
	}
	switch a.Alias {
	case vname:
	case "":
		// Nobody claims it. The kernel takes no alias when it creates a
		// link, so this is also what a SetBandwidth stopped right after
		// the creation leaves.
		if err := b.h.LinkSetAlias(l, vname); err != nil {
			return nil, fmt.Errorf("set alias %s on ifb %s: %w", vname, name, err)
		}
		fix("ifb %s: alias %s, was none", name, vname)
	default:
		return nil, fmt.Errorf("ifb %s belongs to veth %s, not %s: refusing to take it over", name, a.Alias, vname)
	}
	if a.MTU != mtu {
		if err := b.h.LinkSetMTU(l, mtu); err != nil {
			return nil, fmt.Errorf("set MTU %d on ifb %s: %w", mtu, name, err)
		}
		fix("ifb %s: mtu %d, was %d", name, mtu, a.MTU)
	}
	if a.Flags&net.FlagUp == 0 {
		if err := b.h.LinkSetUp(l); err != nil {
			return nil, fmt.Errorf("set ifb %s up: %w", name, err)
		}
		fix("ifb %s set up", name)
	}
	return l, nil
}

// isRedirect reports whether f is reef's filter: u32 matching every packet
// of every protocol, with one action, mirred egress redirect to ifindex.
func isRedirect(f netlink.Filter, ifindex int) bool {
	u, ok := f.(*netlink.U32)
	if !ok || u.Protocol != unix.ETH_P_ALL || u.Sel == nil || u.Sel.Flags&nl.TC_U32_TERMINAL == 0 || u.Police != nil || len(u.Actions) != 1 {
		return false
	}
	for _, k := range u.Sel.Keys {
		if k.Mask != 0 {
			return false
		}
	}
	m, ok := u.Actions[0].(*netlink.MirredAction)
	return ok && m.MirredAction == netlink.TCA_EGRESS_REDIR && m.Ifindex == ifindex && m.Attrs().Action == netlink.TC_ACT_STOLEN
}

func describeFilters(fs []netlink.Filter) string {
	if len(fs) == 0 {
		return "none"
	}
	var ds []string
	for _, f := range fs {
		d := f.Type()
		if u, ok := f.(*netlink.U32); ok {
			for _, act := range u.Actions {
				if m, ok := act.(*netlink.MirredAction); ok {
					d += fmt.Sprintf(" redirect to ifindex %d", m.Ifindex)
				} else {
					d += " " + act.Type()
				}
			}
		}
		ds = append(ds, d)
	}
	return strings.Join(ds, ", ")
}

// setRedirect makes reef's redirect the only filter on veth's ingress.
func (b *tcWriter) setRedirect(veth, ifb netlink.Link) error {
	name, ifbName, ifindex := veth.Attrs().Name, ifb.Attrs().Name, ifb.Attrs().Index
	fs, err := b.h.FilterList(veth, ingressParent)
	if err != nil {
		return fmt.Errorf("list filters on ingress of %s: %w", name, err)
	}
	if len(fs) == 1 && isRedirect(fs[0], ifindex) {
		return nil
	}
	// A u32 filter lists one entry per key node; deleting by priority and
	// protocol with handle 0 removes the whole filter at once.
	type tp struct {
		prio, proto uint16
		kind        string
	}
	done := map[tp]bool{}
	for _, f := range fs {
		a := f.Attrs()
		k := tp{a.Priority, a.Protocol, f.Type()}
		if done[k] {
			continue
		}
		done[k] = true
		del := &netlink.GenericFilter{
			FilterAttrs: netlink.FilterAttrs{LinkIndex: veth.Attrs().Index, Parent: ingressParent, Priority: a.Priority, Protocol: a.Protocol},
			FilterType:  f.Type(),
		}
		if err := b.h.FilterDel(del); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s filter prio %d on ingress of %s: %w", f.Type(), a.Priority, name, err)
		}
	}
	f := &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: veth.Attrs().Index, Parent: ingressParent, Priority: redirectPriority, Protocol: unix.ETH_P_ALL},
		// A nil Sel is netlink's match-all: one empty key, terminal.
		Actions: []netlink.Action{netlink.NewMirredAction(ifindex)},
	}
	if err := b.h.FilterAdd(f); err != nil {
		return fmt.Errorf("add redirect from %s to %s: %w", name, ifbName, err)
	}
	b.changed("redirect %s -> %s, was %s", name, ifbName, describeFilters(fs))
	return nil
}

// clearEgress removes the redirect, then the ifb, if they are there.
func (b *tcWriter) clearEgress(veth netlink.Link) error {
	name := veth.Attrs().Name
	cur, err := ingressQdisc(b.h, veth)
	if err != nil {
		return err
	}
	if cur != nil && cur.Type() == "ingress" {
		if err := b.h.QdiscDel(cur); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete ingress qdisc on %s: %w", name, err)
		}
		b.changed("ingress qdisc on %s removed", name)
	}
	removed, err := DeletePodIFB(b.h, name)
	if err != nil {
		return err
	}
	if removed {
		b.changed("ifb %s of %s removed", IFBName(name), name)
	}
	return nil
}

// DeletePodIFB removes hostVeth's ifb if it is there and names hostVeth; an
// ifb of that name that names another veth is that pod's and stays. Its
// caller is the pods' owner (routes.Pods: Up, Down), under the pod's
// locks.
func DeletePodIFB(h netlinksafe.Handle, hostVeth string) (removed bool, err error) {
	name := IFBName(hostVeth)
	l, err := h.LinkByName(name)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find ifb %s: %w", name, err)
	}
	if l.Type() != "ifb" || l.Attrs().Alias != hostVeth {
		return false, nil
	}
	if err := h.LinkDel(l); err != nil {
		if errors.Is(err, unix.ENODEV) || errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("delete ifb %s of %s: %w", name, hostVeth, err)
	}
	return true, nil
}

func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return err != nil && (errors.As(err, &nf) || errors.Is(err, unix.ENODEV))
}
