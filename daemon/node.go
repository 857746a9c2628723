package daemon

import (
	"context"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/store"
	"github.com/reefcni/reef/version"
)

// nodeService answers the operator CLI.
type nodeService struct {
	reefv1.UnimplementedNodeServer
	d *Daemon
}

func blockProto(b store.Block) *reefv1.Block {
	return &reefv1.Block{Cidr: b.CIDR.String(), Pool: b.Pool.String(), Owner: b.Owner,
		Size: int32(b.Size), Used: int32(b.Used), ClaimedUnix: b.Claimed.Unix()}
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
	out := &reefv1.StatusReply{
		NodeName:          d.cfg.NodeName,
		NodeAddress:       d.uplink.Address.String(),
		Interface:         d.uplink.Interface,
		Ready:             d.cni.Ready(),
		Version:           version.Version + " (" + version.Commit + ")",
		StartedUnix:       d.started.Unix(),
		Mtu:               int32(d.mtu),
		Endpoints:         int32(len(eps)),
		StorePath:         d.store.Path(),
		LastReconcileUnix: last.Unix(),
	}
	if last.IsZero() {
		out.LastReconcileUnix = 0
	}
	if lastErr != nil {
		out.LastReconcileError = lastErr.Error()
	}
	for _, b := range own {
		out.Blocks = append(out.Blocks, blockProto(b))
	}
	return out, nil
}

func (n *nodeService) IPAM(ctx context.Context, req *reefv1.IPAMRequest) (*reefv1.IPAMReply, error) {
	blocks, err := n.d.store.Blocks()
	if err != nil {
		return nil, err
	}
	out := &reefv1.IPAMReply{}
	for _, p := range n.d.cfg.Pools {
		pp := &reefv1.Pool{Cidr: p.CIDR.String(), BlockSize: int32(p.BlockSize),
			Size: int64(1) << (32 - p.CIDR.Bits()), BlocksTotal: int32(1) << (p.BlockSize - p.CIDR.Bits())}
		for _, b := range blocks {
			if b.Pool == p.CIDR {
				pp.BlocksOwned++
				pp.Used += int64(b.Used)
			}
		}
		out.Pools = append(out.Pools, pp)
	}
	if req.GetShowBlocks() {
		for _, b := range blocks {
			out.Blocks = append(out.Blocks, blockProto(b))
		}
	}
	if req.GetShowAllocations() {
		eps, err := n.d.store.Endpoints()
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			out.Allocations = append(out.Allocations, &reefv1.Allocation{Ip: ep.IP.String(), Handle: ep.Handle,
				ContainerId: ep.ContainerID, Pod: ep.PodNamespace + "/" + ep.PodName, HostVeth: ep.HostVeth,
				Netns: ep.Netns, State: string(ep.State)})
		}
	}
	return out, nil
}
