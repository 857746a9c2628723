package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/store"
	"github.com/reefcni/reef/version"
)

// nodeService answers the operator CLI.
type nodeService struct {
	reefv1.UnimplementedNodeServer
	d *Daemon
}

// blockProto is b as the CLI shows it; addr6 is this node's IPv6 address,
// the next hop of its own IPv6 blocks, which the store does not keep with
// them.
func blockProto(b store.Block, addr6 netip.Addr) *reefv1.Block {
	out := &reefv1.Block{Cidr: b.CIDR.String(), Pool: b.Pool.String(), Owner: b.Owner,
		Size: int32(b.Size), Used: int32(b.Used), ClaimedUnix: b.Claimed.Unix(), State: string(b.State)}
	if b.OwnerAddr.IsValid() {
		out.OwnerAddress = b.OwnerAddr.String()
	}
	if !b.Own() {
		out.OwnerIncarnation = fmt.Sprintf("%08x", b.OwnerInc)
	}
	if b.OwnerAddr6.IsValid() {
		out.OwnerAddressV6 = b.OwnerAddr6.String()
	} else if b.Own() && b.CIDR.Addr().Is6() && addr6.IsValid() {
		out.OwnerAddressV6 = addr6.String()
	}
	return out
}

func (n *nodeService) Status(ctx context.Context, _ *reefv1.StatusRequest) (*reefv1.StatusReply, error) {
	d := n.d
	eps, err := d.store.Endpoints()
	if err != nil {
		return nil, err
	}
	own, err := d.store.OwnBlocks()
	if err != nil {
		return nil, err
	}
	last, lastErr := d.rec.Last()
	iface, iface6 := interfaces(d.uplink, d.uplink6)
	out := &reefv1.StatusReply{
		NodeName:          d.cfg.NodeName,
		NodeAddress:       addrString(d.uplink.Address),
		Identity:          d.identity.String(),
		NodeAddressV6:     addrString(d.uplink6.Address),
		Interface:         iface,
		Interface6:        iface6,
		Ready:             d.cni.Ready(),
		NotReady:          d.notReady(),
		Version:           version.Version + " (" + version.Commit + ")",
		StartedUnix:       d.started.Unix(),
		Mtu:               int32(d.mtu),
		Endpoints:         int32(len(eps)),
		StorePath:         d.store.Path(),
		LastReconcileUnix: last.Unix(),
	}
	for _, p := range checkRuntime(d.cfg.CNIConfDir, d.cfg.CNIBinDir) {
		out.RuntimeWarnings = append(out.RuntimeWarnings, p.Message)
	}
	for _, ep := range eps {
		pod := ep.PodNamespace + "/" + ep.PodName
		if ep.PodName == "" {
			pod = "container " + ep.ContainerID
		}
		for _, m := range ep.PortMappings {
			out.HostPorts = append(out.HostPorts, fmt.Sprintf("%s (%s)", m, pod))
		}
		if ep.Bandwidth != nil {
			out.Bandwidth = append(out.Bandwidth, pod+": "+ep.Bandwidth.String())
		}
	}
	if last.IsZero() {
		out.LastReconcileUnix = 0
	}
	if lastErr != nil {
		out.LastReconcileError = lastErr.Error()
	}
	net := d.rec.netInfo()
	out.Vxlan = net.vxlanStatus()
	all, err := d.store.Blocks()
	if err == nil {
		for _, m := range net.vxlanNotBuilt(net.ofPools(all)) {
			out.VxlanNotBuilt = append(out.VxlanNotBuilt, m.node+": "+m.why)
		}
	}
	for _, b := range own {
		out.Blocks = append(out.Blocks, blockProto(b, d.uplink6.Address))
	}
	if d.speaker != nil {
		n.peerStatus(ctx, out, net, net.ofPools(all))
	}
	if d.blocks != nil {
		dec := d.blocks.Last()
		protoStatus(out, dec)
	}
	if d.policy != nil {
		out.Policy = policyStatusProto(d.policy.status())
	}
	if d.lbIPAM != nil {
		s := d.lbIPAM.Status()
		out.LbIpam = &reefv1.LBIPAMStatus{Leader: s.Leader, Holder: s.Holder, Assigned: int32(s.Assigned), Error: s.LastErr}
		for _, p := range d.cfg.BGP.ServiceLoadBalancerIPs {
			out.LbIpam.Pools = append(out.LbIpam.Pools, p.String())
		}
	}
	return out, nil
}

// peerStatus adds the BGP sessions to out: external peers, then the mesh
// and reflector sessions, each with how its blocks (of blocks, the
// store's) are reached over net (reconciler.netInfo), and what the
// import filter dropped.
func (n *nodeService) peerStatus(ctx context.Context, out *reefv1.StatusReply, net netInfo, blocks []store.Block) {
	d := n.d
	externalUp := false
	for _, e := range d.speaker.ExternalStatus(ctx) {
		externalUp = externalUp || e.Established
		ep := &reefv1.ExternalPeer{Address: e.Address.String(), Asn: e.ASN, State: e.State, Sent: e.Sent, Received: e.Received,
			Dropped: e.Dropped, MaxPrefixes: e.MaxPrefixes, Hostname: e.Hostname, Bfd: e.BFD}
		if e.Established {
			ep.SinceUnix = e.Since.Unix()
		}
		out.ExternalPeers = append(out.ExternalPeers, ep)
	}
	for _, p := range d.speaker.Status(ctx) {
		if p.Type == bgp.PeerExternal {
			continue // listed above
		}
		pp := &reefv1.Peer{Address: p.Address.String(), Hostname: p.Hostname, State: p.State,
			Received: p.Received, Accepted: p.Accepted, Dynamic: p.Dynamic, Reached: net.reached(p.Address, blocks, externalUp), Type: string(p.Type)}
		if p.Established {
			pp.SinceUnix = p.Since.Unix()
		}
		if p.CutOff {
			pp.State = "cut off: sent more than the session's prefix limit; closed until `reef peer reset " + pp.Address + "` or a restart"
		}
		out.Peers = append(out.Peers, pp)
	}
	out.BgpDropped = d.speaker.Dropped()
	for _, s := range d.speaker.StandIns(ctx) {
		out.StandIns = append(out.StandIns, s.String())
	}
	out.BlocksMarked = d.speaker.BlocksMarked()
	announced, withheld := d.speaker.ServiceCIDRs()
	for _, p := range announced {
		out.ServiceCidrs = append(out.ServiceCidrs, p.String())
	}
	for _, p := range withheld {
		out.ServiceCidrsWithheld = append(out.ServiceCidrsWithheld, p.String())
	}
	d.services.status(out)
}

func policyStatusProto(s policyStatus) *reefv1.PolicyStatus {
	out := &reefv1.PolicyStatus{Server: s.API.Server, Synced: s.API.Synced, ApiReachable: s.API.Reachable, ApiSinceUnix: s.API.Since.Unix(),
		ApiError: s.API.LastError, Policies: int32(s.Policies), IsolatedIngress: int32(s.Isolated[0]), IsolatedEgress: int32(s.Isolated[1])}
	if !s.API.TokenExpires.IsZero() {
		out.TokenExpiresUnix = s.API.TokenExpires.Unix()
	}
	for _, sk := range s.Skipped {
		out.Skipped = append(out.Skipped, sk.Key()+": "+sk.Reason)
		if sk.Cluster {
			out.ClusterPolicyCount++
		}
	}
	out.ClusterPolicies = s.API.Cluster
	out.ClusterPolicyCount += int32(s.Cluster)
	for _, n := range s.NotEnforced {
		out.ClusterNotEnforced = append(out.ClusterNotEnforced, n.String())
	}
	out.ClusterConditionsError = s.API.ConditionError
	if s.LastErr != nil {
		out.LastError = s.LastErr.Error()
	}
	return out
}

// Routes compares the routes and veths reef wants with the kernel's.
func (n *nodeService) Routes(ctx context.Context, _ *reefv1.RoutesRequest) (*reefv1.RoutesReply, error) {
	want, have, err := n.d.rec.compareRoutes()
	if err != nil && want.Routes == nil {
		return nil, err
	}
	// An owner the kernel has no route to leaves its blocks out of want:
	// shown as extra or missing, and the reason is in reef status.
	out := &reefv1.RoutesReply{}
	for _, e := range n.d.rec.compareEntries(want, have) {
		out.Entries = append(out.Entries, &reefv1.RouteEntry{Kind: e.Kind, Object: e.Object, State: e.State, Want: e.Want, Have: e.Have})
	}
	return out, nil
}

// PolicyShow explains the policies of this node's pods.
func (n *nodeService) PolicyShow(ctx context.Context, req *reefv1.PolicyShowRequest) (*reefv1.PolicyShowReply, error) {
	p := n.d.policy
	if p == nil {
		return nil, status.Error(codes.FailedPrecondition, errPolicyOff.Error())
	}
	views, err := p.explain(req.GetPod())
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(views)
	if err != nil {
		return nil, err
	}
	return &reefv1.PolicyShowReply{Json: b}, nil
}

// Forget frees the blocks of a node gone for good.
func (n *nodeService) Forget(ctx context.Context, req *reefv1.ForgetRequest) (*reefv1.ForgetReply, error) {
	if n.d.blocks == nil {
		return nil, status.Error(codes.FailedPrecondition, "the block protocol is not running")
	}
	addr, err := n.resolveNode(req.GetNode())
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	freed, nodes, err := n.d.blocks.Forget(addr)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	out := &reefv1.ForgetReply{NodeAddress: addr.String()}
	for _, nd := range nodes {
		out.Incarnations = append(out.Incarnations, fmt.Sprintf("%08x", nd.Inc))
	}
	for _, p := range freed {
		out.Blocks = append(out.Blocks, p.String())
	}
	return out, nil
}

// PeerReset lets a BGP peer that its prefix limit cut off connect again.
func (n *nodeService) PeerReset(ctx context.Context, req *reefv1.PeerResetRequest) (*reefv1.PeerResetReply, error) {
	if n.d.speaker == nil {
		return nil, status.Error(codes.FailedPrecondition, "BGP is not running on this node")
	}
	addr, err := netip.ParseAddr(req.GetAddress())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "peer %q: not an IP address", req.GetAddress())
	}
	was, cutOff, err := n.d.speaker.PeerReset(ctx, addr)
	switch {
	case errors.Is(err, bgp.ErrNoPeer):
		return nil, status.Errorf(codes.NotFound, "%v (bgp.peers, bgp.routeReflectors, bgp.externalPeers, or a session through bgp.peerPrefixes; reef status lists them)", err)
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &reefv1.PeerResetReply{Address: was.Address.String(), CutOff: cutOff, State: was.State, Type: string(was.Type), Dynamic: was.Dynamic}, nil
}

// resolveNode takes a node address, or a name that a block's owner or a
// BGP peer announced.
func (n *nodeService) resolveNode(name string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(name); err == nil {
		return a, nil
	}
	blocks, err := n.d.store.Blocks()
	if err != nil {
		return netip.Addr{}, err
	}
	for _, b := range blocks {
		if !b.Own() && b.Owner == name && b.OwnerAddr.IsValid() {
			return b.OwnerAddr, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no node named %q owns a block known here; give its address", name)
}

func (n *nodeService) IPAM(ctx context.Context, req *reefv1.IPAMRequest) (*reefv1.IPAMReply, error) {
	blocks, err := n.d.store.Blocks()
	if err != nil {
		return nil, err
	}
	out := &reefv1.IPAMReply{}
	type pool struct {
		store.Pool
		retired bool
	}
	var pools []pool
	for _, p := range n.d.cfg.Pools {
		pools = append(pools, pool{Pool: store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}})
	}
	for _, p := range n.d.blocks.retired {
		pools = append(pools, pool{Pool: p, retired: true})
	}
	for _, p := range pools {
		pp := &reefv1.Pool{Cidr: p.CIDR.String(), BlockSize: int32(p.BlockSize), Retired: p.retired,
			// An IPv6 pool's addresses and blocks are counted up to what
			// the fields hold (blocks: the 2^32 the protocol uses).
			Size:        int64(1) << min(p.CIDR.Addr().BitLen()-p.CIDR.Bits(), 62),
			BlocksTotal: int32(min(blockproto.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}.NumBlocks(), math.MaxInt32))}
		for _, b := range blocks {
			if b.Pool != p.CIDR {
				continue
			}
			pp.BlocksKnown++
			if b.State == store.BlockConfirmed {
				pp.BlocksOwned++
			}
			pp.Used += int64(b.Used) // remote blocks count none here
		}
		out.Pools = append(out.Pools, pp)
	}
	if req.GetShowBlocks() {
		for _, b := range blocks {
			out.Blocks = append(out.Blocks, blockProto(b, n.d.uplink6.Address))
		}
	}
	if req.GetShowAllocations() {
		eps, err := n.d.store.Endpoints()
		if err != nil {
			return nil, err
		}
		// One row per address: a dual-stack pod has two, with one handle.
		for _, ep := range eps {
			for _, ip := range ep.Addrs() {
				a := &reefv1.Allocation{Ip: ip.String(), Handle: ep.Handle,
					ContainerId: ep.ContainerID, Pod: ep.PodNamespace + "/" + ep.PodName, HostVeth: ep.HostVeth,
					Netns: ep.Netns, State: string(ep.State)}
				for _, m := range ep.PortMappings {
					a.HostPorts = append(a.HostPorts, m.String())
				}
				if ep.Bandwidth != nil {
					a.Bandwidth = ep.Bandwidth.String()
				}
				out.Allocations = append(out.Allocations, a)
			}
		}
	}
	return out, nil
}

// protoStatus fills the block protocol's part of reef status from the last
// decision.
func protoStatus(out *reefv1.StatusReply, d blockproto.Decision) {
	s := d.Status
	out.Incarnation = fmt.Sprintf("%08x", d.State.Self.Inc)
	out.VoterHash = s.VoterHash
	out.VotersMajority = int32(s.Majority)
	out.QuorumUp, out.QuorumKnown = int32(len(s.Reached)), int32(len(s.Voters))
	for _, v := range s.Voters {
		out.Voters = append(out.Voters, v.String())
	}
	for _, v := range s.Missing {
		out.VotersMissing = append(out.VotersMissing, v.String())
	}
	for _, o := range s.OtherLists {
		out.VotersDisagree = append(out.VotersDisagree, o.String())
	}
	if err := s.CanClaim(); err != nil {
		out.ClaimBlocked = err.Error()
	}
	out.Conflicts = s.Conflicts
	out.Gone = s.Gone
	out.VoterRestricted = s.Restricted
	out.VotersUnsettled = s.Unsettled
	out.VotersUnresolved = s.Unresolved
	out.BlocksConfirmed = int32(s.Confirmed)
	out.View = fmt.Sprintf("%08x", s.View)
	out.VotesHeld = int32(len(d.State.Grants))
	for _, p := range s.Pending {
		pc := &reefv1.PendingClaim{Block: p.Block.String()}
		for _, g := range p.Grants {
			pc.GrantedBy = append(pc.GrantedBy, g.String())
		}
		out.PendingClaims = append(out.PendingClaims, pc)
	}
}

// addrString is a's text, "" when a is invalid (not "invalid IP").
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
