package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/cniserver"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// IPAMCheck is `reef ipam check`: the store's records against each other
// (store.Check), against the kernel (sandboxes, veths, routes) and against
// the cluster (blocks another node holds too). It changes nothing.
func (n *nodeService) IPAMCheck(ctx context.Context, _ *reefv1.IPAMCheckRequest) (*reefv1.IPAMCheckReply, error) {
	c := ipamChecker{d: n.d, out: &reefv1.IPAMCheckReply{}}
	if err := c.store(); err != nil {
		return nil, err
	}
	if err := c.endpointsAndRoutes(); err != nil {
		return nil, err
	}
	blocks, err := c.blocks()
	if err != nil {
		return nil, err
	}
	c.cluster(blocks)
	return c.out, nil
}

// ipamChecker gathers the problems of IPAMCheck.
type ipamChecker struct {
	d   *Daemon
	out *reefv1.IPAMCheckReply
}

func (c *ipamChecker) add(kind, object, detail, fix string) {
	c.out.Problems = append(c.out.Problems, &reefv1.IPAMProblem{Kind: kind, Object: object, Detail: detail, Fix: fix})
}

// store: the records against each other.
func (c *ipamChecker) store() error {
	d, add := c.d, c.add
	problems, err := d.store.Check()
	if err != nil {
		return err
	}
	for _, p := range problems {
		switch p.Kind {
		case store.ProblemOrphanAddress:
			add(p.Kind, p.IP.String(), p.Detail, "reef ipam release "+p.IP.String())
		case store.ProblemUnindexed:
			add(p.Kind, p.Handle, p.Detail, "reef ipam release --handle "+p.Handle+" (the runtime's DEL does the same)")
		default:
			add(p.Kind, p.Handle, p.Detail, "delete the pod: its address is not this node's to give")
		}
	}
	return nil
}

// endpointsAndRoutes: each endpoint against its sandbox and veth, and the
// routes and veths reef wants against the kernel's.
func (c *ipamChecker) endpointsAndRoutes() error {
	d, add, out := c.d, c.add, c.out
	eps, err := d.store.Endpoints()
	if err != nil {
		return err
	}
	want, have, cmpErr := d.rec.compareRoutes()
	for _, ep := range eps {
		if ep.State == store.EndpointReserved {
			continue
		}
		out.Endpoints++
		pod := podOf(ep)
		switch {
		case ep.State != store.EndpointReady:
			add("add-never-finished", ep.AddrsString(), fmt.Sprintf("%s holds %s in state %s: its ADD never finished", pod, ep.AddrsString(), ep.State),
				"nothing: the next reconcile pass frees it")
		case !cniserver.SandboxAlive(ep):
			add("no-live-sandbox", ep.AddrsString(), fmt.Sprintf("%s holds %s, but its network namespace %s is gone", pod, ep.AddrsString(), ep.Netns),
				"reef ipam release "+ep.IP.String()+" (the reconcile pass also frees it on its second pass that finds it gone)")
		case ep.HostVeth != "" && have.Links != nil && !have.Links[ep.HostVeth]:
			add("veth-missing", ep.AddrsString(), fmt.Sprintf("%s holds %s, but its veth %s is gone", pod, ep.AddrsString(), ep.HostVeth),
				"recreate the pod (the runtime's DEL then ADD)")
		}
	}
	if cmpErr != nil && want.Routes == nil {
		return cmpErr
	}
	for _, e := range d.rec.compareEntries(want, have) {
		switch {
		case e.State == routes.EntryInSync:
		case e.Kind == "link" && e.State == routes.EntryExtra:
			add("veth-nobody-owns", e.Object, "veth "+e.Object+" is reef's by its name, and no endpoint has it", "nothing: the next reconcile pass deletes it")
		case e.Kind == "route" && e.State == routes.EntryInTheWay:
			add("route-in-the-way", e.Object, fmt.Sprintf("route %s: reef wants %q, and a route of another protocol holds its place (%s): reef does not overwrite it", e.Object, e.Want, e.Have),
				"if "+e.Object+" belongs to reef's pools, delete that route (ip route del "+e.Have+"); the next reconcile pass then adds reef's")
		case e.Kind == "route" && e.State == routes.EntryExtra:
			add("route-nobody-owns", e.Object, "route "+e.Have+" has reef's protocol, and nothing reef wants is routed so", "nothing: the next reconcile pass deletes it")
		case e.Kind == "route":
			add("route-"+e.State, e.Object, fmt.Sprintf("route %s: want %q, the kernel has %q", e.Object, e.Want, e.Have), "nothing: the next reconcile pass repairs it")
		}
	}
	return nil
}

// blocks: this node's blocks another node holds too, as the store has them.
func (c *ipamChecker) blocks() ([]store.Block, error) {
	d, add, out := c.d, c.add, c.out
	blocks, err := d.store.Blocks()
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if b.Own() {
			out.Blocks++
		}
		if b.State == store.BlockLost {
			add("block-conflict", b.CIDR.String(), fmt.Sprintf("block %s was confirmed here, and another node holds it: no new address comes from it here (%d in use)", b.CIDR, b.Used),
				"let the pods of the block go (docs/ipam.md, \"Conflicts\"); reef status shows the other owner")
		}
	}
	return blocks, nil
}

// cluster: what the cluster announces, a block confirmed by more than one
// node (this one's own confirmed blocks included, as announced).
func (c *ipamChecker) cluster(blocks []store.Block) {
	d, add := c.d, c.add
	if d.speaker != nil {
		if t, err := d.speaker.LearnedTable(); err == nil {
			inc, _ := d.store.Incarnation()
			self := blockproto.Node{Addr: d.identity, Inc: inc}
			var own []netip.Prefix
			for _, b := range blocks {
				if b.State == store.BlockConfirmed {
					own = append(own, b.CIDR)
				}
			}
			for _, c := range claimedTwice(t.Claims, own, self) {
				add("block-claimed-twice", c.block.String(), fmt.Sprintf("block %s is announced confirmed by %d nodes: %s", c.block, len(c.owners), strings.Join(c.owners, ", ")),
					"the block protocol resolves it (the loser stops handing out its addresses); reef status on each owner shows which")
			}
		}
	}
}

type twice struct {
	block  netip.Prefix
	owners []string // sorted, this node marked
}

// claimedTwice are the blocks confirmed by more than one node: in the
// claims the cluster announces, and this node's own confirmed blocks
// (own) as self's. Sorted by block.
func claimedTwice(claims []blockproto.Claim, own []netip.Prefix, self blockproto.Node) []twice {
	owners := map[netip.Prefix]map[blockproto.Node]bool{}
	add := func(b netip.Prefix, n blockproto.Node) {
		if owners[b] == nil {
			owners[b] = map[blockproto.Node]bool{}
		}
		owners[b][n] = true
	}
	for _, c := range claims {
		if c.State == blockproto.Confirmed {
			add(c.Block, c.Owner)
		}
	}
	for _, b := range own {
		add(b, self)
	}
	var out []twice
	for block, ns := range owners {
		if len(ns) < 2 {
			continue
		}
		tw := twice{block: block}
		for n := range ns {
			name := n.String()
			if n == self {
				name += " (this node)"
			}
			tw.owners = append(tw.owners, name)
		}
		slices.Sort(tw.owners)
		out = append(out, tw)
	}
	slices.SortFunc(out, func(a, b twice) int { return a.block.Addr().Compare(b.block.Addr()) })
	return out
}

func podOf(ep store.Endpoint) string {
	if ep.PodName == "" {
		return "container " + ep.ContainerID
	}
	return fmt.Sprintf("pod %s/%s (container %.12s)", ep.PodNamespace, ep.PodName, ep.ContainerID)
}

// IPAMRelease is `reef ipam release IP|--handle H [--force]`: it frees an
// allocation as the runtime's DEL would (veth, nftables elements, limits,
// address, record), or an address the index gives to a handle with no
// record holding it. One a live sandbox holds (its network namespace
// exists) is refused without force: that pod would lose its address to
// the next ADD.
func (n *nodeService) IPAMRelease(ctx context.Context, req *reefv1.IPAMReleaseRequest) (*reefv1.IPAMReleaseReply, error) {
	d := n.d
	var ep store.Endpoint
	found := false
	switch {
	case req.GetHandle() != "":
		var err error
		if ep, found, err = d.store.Endpoint(req.GetHandle()); err != nil {
			return nil, err
		}
		if !found {
			return nil, status.Errorf(codes.NotFound, "no endpoint has handle %q (reef ipam show --show-allocations lists them)", req.GetHandle())
		}
	case req.GetIp() != "":
		ip, err := netip.ParseAddr(req.GetIp())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%q is not an IP address", req.GetIp())
		}
		eps, err := d.store.Endpoints()
		if err != nil {
			return nil, err
		}
		for _, e := range eps {
			if e.Holds(ip) {
				ep, found = e, true
			}
		}
		if !found {
			holder, err := d.store.ReleaseOrphanAddress(ip)
			if errors.Is(err, store.ErrNotFound) {
				return nil, status.Errorf(codes.NotFound, "address %s is not allocated on this node", ip)
			}
			if err != nil {
				return nil, err
			}
			d.log.Warn("released an address by hand: its holder had no endpoint record holding it", "ip", ip, "handle", holder)
			return &reefv1.IPAMReleaseReply{Ip: ip.String(), Handle: holder,
				What: fmt.Sprintf("freed %s, which the address index gave to %s, a handle with no endpoint record holding it", ip, holder)}, nil
		}
	default:
		return nil, status.Error(codes.InvalidArgument, "give an IP address or --handle")
	}
	if ep.State == store.EndpointReserved {
		return nil, status.Errorf(codes.FailedPrecondition, "%s is reserved by reef itself (%s), not a pod's", ep.AddrsString(), ep.Handle)
	}
	live := ep.State == store.EndpointReady && cniserver.SandboxAlive(ep)
	if live && !req.GetForce() {
		return nil, status.Errorf(codes.FailedPrecondition,
			"%s holds %s and is live (its network namespace %s exists): releasing it would give its address to the next pod; delete the pod, or use --force",
			podOf(ep), ep.AddrsString(), ep.Netns)
	}
	released, err := d.cni.Release(ep, true)
	if err != nil {
		return nil, fmt.Errorf("release %s of %s: %w", ep.AddrsString(), ep.Handle, err)
	}
	if !released {
		return nil, status.Errorf(codes.Aborted, "%s of %s changed while it was being released (an ADD or DEL of its pod came first): nothing was released; look again with reef ipam show", ep.AddrsString(), podOf(ep))
	}
	d.log.Warn("released an allocation by hand (reef ipam release)", "ip", ep.AddrsString(), "handle", ep.Handle, "forced", live)
	return releaseReply(ep, live), nil
}

// releaseReply is IPAMRelease's answer for endpoint ep, released: Ip is
// its first address (one address, as the field says), and the text names
// each of them.
func releaseReply(ep store.Endpoint, forced bool) *reefv1.IPAMReleaseReply {
	ips := make([]string, 0, 2)
	for _, ip := range ep.Addrs() {
		ips = append(ips, ip.String())
	}
	free := "the address is free"
	if len(ips) > 1 {
		free = "both addresses are free"
	}
	what := fmt.Sprintf("released %s of %s: its veth, nftables elements and record are gone, %s", strings.Join(ips, " and "), podOf(ep), free)
	if forced {
		what += " (forced: the sandbox was live)"
	}
	return &reefv1.IPAMReleaseReply{Ip: ep.IP.String(), Handle: ep.Handle, Pod: ep.PodNamespace + "/" + ep.PodName, What: what}
}
