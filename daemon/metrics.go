package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/cniserver/pendingdel"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/store"
)

// newMetrics is the daemon's metrics when `metrics:` is set, else nil
// (every call on a nil *metrics.Metrics does nothing); state is what a
// scrape reads.
func newMetrics(cfg Config) *metrics.Metrics {
	if cfg.Metrics == "" {
		return nil
	}
	return metrics.New()
}

// serveMetrics serves /metrics, /healthz and /readyz on `metrics:` until
// ctx ends. A listener that cannot be had is logged, and the daemon serves
// pods without it: pods matter more than their monitoring.
func (d *Daemon) serveMetrics(ctx context.Context, m *metrics.Metrics) {
	if m == nil {
		return
	}
	lis, err := net.Listen("tcp", d.cfg.Metrics)
	if err != nil {
		d.log.Error("metrics listener: reef serves pods without /metrics, /healthz and /readyz; free the address or change metrics: in the config",
			"metrics", d.cfg.Metrics, "error", err)
		return
	}
	srv := &http.Server{Handler: m.Handler(d.metricsState, d.ready), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	d.log.Info("serving metrics", "address", lis.Addr().String(), "paths", "/metrics /healthz /readyz")
	go d.readBGPCounters(ctx)
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("metrics listener stopped", "error", err)
		}
	}()
}

// ready is /readyz's answer: whether the daemon serves ADD, and why not.
// It is not while it starts (CNI STATUS says so too), nor, with
// NetworkPolicy on, until the informers have synced: every ADD answers
// "try again later" until then. CNI STATUS does not fail for that: the
// node would turn NotReady, and its pods be evicted, for an API that is
// away or refuses reef. Nor while its store refuses writes (store.Writable:
// a state dir gone read-only; a full one only until an empty commit is
// taken): every ADD fails with code 5 then; STATUS does not fail for it
// either.
func (d *Daemon) ready() (bool, string) {
	if !d.cni.Ready() {
		return false, cniserver.NotReadyReason
	}
	if d.blocks != nil {
		if why := d.blocks.unavailable(); why != "" {
			return false, why
		}
	}
	if d.store != nil {
		if err := d.store.Writable(); err != nil {
			return false, err.Error()
		}
	}
	if d.policy != nil {
		if why := d.policy.notSynced(); why != "" {
			return false, why
		}
	}
	return true, ""
}

// notReady is why a started daemon does not serve ADD (reef status), or "".
func (d *Daemon) notReady() string {
	if !d.cni.Ready() {
		return ""
	}
	_, why := d.ready()
	return why
}

// metricsState is what a scrape reads: the BGP sessions, the blocks and
// pools as the store has them, the DEL queue.
func (d *Daemon) metricsState() metrics.State {
	var s metrics.State
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sp := d.speaker; sp != nil {
		d.bgpMetrics(ctx, sp, &s)
	}
	if d.lbIPAM != nil {
		st := d.lbIPAM.Status()
		s.LBIPAM = &metrics.LBIPAM{Leader: st.Leader, Assigned: st.Assigned}
	}
	if d.blocks != nil {
		if st := d.blocks.Last().Status; len(st.Voters) > 0 {
			s.VoterLists = 1 + len(st.OtherLists)
			s.VoterListSettled = st.Unsettled == ""
			s.VoterRestricted = st.Restricted != ""
		}
	}
	d.blockMetrics(&s)
	s.RuntimeKinds = RuntimeProblemKinds
	for _, p := range checkRuntime(d.cfg.CNIConfDir, d.cfg.CNIBinDir) {
		s.RuntimeProblems = append(s.RuntimeProblems, p.Kind)
	}
	for _, dir := range []string{d.cfg.PendingDeleteDir, DeferredDir(d.cfg)} {
		if entries, bad, err := pendingdel.List(dir); err == nil {
			s.PendingDeletes += len(entries) + len(bad)
		}
	}
	return s
}

// bgpMetrics fills s with the sessions, the dropped paths, the Service
// CIDRs and addresses, the BFD states and the stand-ins.
func (d *Daemon) bgpMetrics(ctx context.Context, sp *bgp.Speaker, s *metrics.State) {
	var counters bgpCounters // zero before the first read: those series are left out
	if c := d.bgpCounters.Load(); c != nil {
		counters = *c
	}
	for _, p := range sp.Status(ctx) {
		mp := metrics.Peer{Address: p.Address.String(), Type: string(p.Type), Up: p.Established, Since: p.Since,
			Received: p.Received, Accepted: p.Accepted, CutOff: p.CutOff}
		if u, ok := counters.updates[p.Address]; ok {
			mp.UpdatesIn, mp.UpdatesOut, mp.Updates = u.Received, u.Sent, true
		}
		if p.Type == bgp.PeerExternal {
			mp.Dropped = counters.externalDropped[p.Address]
		} else if p.Received >= p.Accepted {
			mp.Dropped = map[string]uint64{"import-filter": p.Received - p.Accepted}
		}
		s.Peers = append(s.Peers, mp)
	}
	s.InvalidPaths = sp.Dropped()
	announced, withheld := sp.ServiceCIDRs()
	s.ServiceCIDRs = map[string]bool{}
	for _, p := range announced {
		s.ServiceCIDRs[p.String()] = true
	}
	for _, p := range withheld {
		s.ServiceCIDRs[p.String()] = false
	}
	s.ServiceAddresses = d.services.metrics()
	v4, v6 := sp.StandInBlocks(ctx)
	s.StandIns = map[string]int{"ipv4": v4, "ipv6": v6}
	v4, v6 = sp.MarkedBlocks()
	s.BlocksMarked = map[string]int{"ipv4": v4, "ipv6": v6}
	if st := sp.BFDStates(ctx); len(st) > 0 {
		s.BFD = map[string]bool{}
		for a, state := range st {
			s.BFD[a.String()] = state == bgp.BFDUp
		}
	}
}

// blockMetrics fills s with the store's blocks by state and each pool's
// use.
func (d *Daemon) blockMetrics(s *metrics.State) {
	s.Blocks = map[string]int{}
	blocks, err := d.store.Blocks()
	if err == nil {
		for _, b := range blocks {
			s.Blocks[string(b.State)]++
		}
	}
	for _, p := range d.cfg.Pools {
		mp := metrics.Pool{CIDR: p.CIDR.String(), Blocks: blockproto.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}.NumBlocks()}
		for _, b := range blocks {
			if b.Pool != p.CIDR {
				continue
			}
			mp.Claimed++
			switch b.State {
			case store.BlockConfirmed:
				mp.Capacity += b.Size
				mp.InUse += b.Used
			case store.BlockPending:
				mp.Waiting++
			case store.BlockLost:
				mp.InUse += b.Used
			}
		}
		s.Pools = append(s.Pools, mp)
	}
}

// bgpCounters are what the metrics need from GoBGP beyond the sessions:
// each peer's UPDATE counters, and the external peers' routes dropped by
// reason (their Adj-RIB-In).
type bgpCounters struct {
	updates         map[netip.Addr]bgp.Updates
	externalDropped map[netip.Addr]map[string]uint64
}

// bgpCountersEvery is how often they are read: GoBGP answers ListPeer and
// the Adj-RIB reads in its main loop, so they are read in the background,
// not once per scrape (a scrape then costs the same with 50 peers as
// with none).
const bgpCountersEvery = 10 * time.Second

func (d *Daemon) readBGPCounters(ctx context.Context) {
	t := time.NewTicker(bgpCountersEvery)
	defer t.Stop()
	for {
		if sp := d.speaker; sp != nil {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c := bgpCounters{externalDropped: map[netip.Addr]map[string]uint64{}}
			c.updates, _ = sp.UpdateCounts(cctx) // nil on an error: those series are left out
			if len(d.cfg.BGP.ExternalPeers) > 0 {
				for _, e := range sp.ExternalStatus(cctx) {
					c.externalDropped[e.Address] = e.Dropped
				}
			}
			cancel()
			d.bgpCounters.Store(&c)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
