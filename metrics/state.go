package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// State is the node as a scrape sees it, read when it asks.
type State struct {
	Peers  []Peer
	Blocks map[string]int // this node's view of every block, by state: pending, confirmed, lost, remote
	Pools  []Pool
	// PendingDeletes is the DELs queued while the daemon was away and not
	// yet run.
	PendingDeletes int
	// InvalidPaths counts paths dropped because they are not reef blocks,
	// since the start.
	InvalidPaths uint64
	// ServiceCIDRs are bgp.serviceClusterIPs: true for those announced to
	// the external peers, false for those withheld (no next hop of their
	// family).
	ServiceCIDRs map[string]bool
	// ServiceAddresses are the Service addresses this node announces to
	// its external peers (bgp.serviceExternalIPs,
	// bgp.serviceLoadBalancerIPs), one per address and Service behind it.
	ServiceAddresses []ServiceAddress
	// BFD are the external peers with bgp.externalPeers[].bfd: true for
	// those whose BFD session is up.
	BFD map[string]bool
	// StandIns are the blocks of other nodes this node stands in for at
	// its BFD routers now, BlocksMarked its own blocks marked for the
	// other nodes to stand in for (docs/bgp.md, "Stand-ins"); both by
	// family (ipv4, ipv6), nil without BGP.
	StandIns, BlocksMarked map[string]int
	// VoterLists is how many voter lists this node sees announced, its
	// own included: 1 while every node agrees, 0 before the first step.
	VoterLists int
	// VoterListSettled: this node sees the voter list settled
	// (blockproto.Status.Unsettled empty). VoterRestricted: this voter
	// votes only for confirmed owners (its store is new).
	VoterListSettled, VoterRestricted bool
	// RuntimeProblems are the kinds of reason the container runtime will
	// not use reef (reef status says what to do); RuntimeKinds every kind,
	// so that each series is there at 0.
	RuntimeProblems, RuntimeKinds []string
	// LBIPAM is LoadBalancer address assignment on this node; nil when
	// the node takes no part in it.
	LBIPAM *LBIPAM
}

// LBIPAM is LoadBalancer address assignment as this node sees it.
type LBIPAM struct {
	Leader   bool
	Assigned int // addresses in the record after the leader's last round
}

// Peer is one BGP session.
type Peer struct {
	Address            string
	Type               string // mesh, reflector, client, external
	Up                 bool
	Since              time.Time // established since; zero when down
	Received, Accepted uint64    // paths in the last table read
	Dropped            map[string]uint64
	// UpdatesIn and UpdatesOut are UPDATE messages received and sent in
	// the session's life; Updates false: not known.
	UpdatesIn, UpdatesOut uint64
	Updates               bool
	// CutOff: its prefix limit closed the session, which stays closed
	// until `reef peer reset` or a restart.
	CutOff bool
}

// ServiceAddress is one Service address announced, and why.
type ServiceAddress struct {
	Address, Service string
	Source           string // externalIP or loadBalancer
	Reason           string // cluster (externalTrafficPolicy Cluster) or local (a ready endpoint here)
}

// Pool is one pool on this node.
type Pool struct {
	CIDR     string
	InUse    int // addresses allocated on this node
	Capacity int // addresses in this node's confirmed blocks
	Blocks   int // blocks in the pool
	Claimed  int // blocks any node known here owns or claims
	Waiting  int // this node's claims waiting for the voters
}

var (
	descSessionUp = prometheus.NewDesc("reef_bgp_session_up",
		"1 when the BGP session with the peer is established, else 0.", []string{"peer", "type"}, nil)
	descPeerCutOff = prometheus.NewDesc("reef_bgp_peer_cut_off",
		"1 while the BGP session with the peer is closed for sending more than its prefix limit: it stays closed until `reef peer reset PEER` or a restart of the daemon; else 0. A peer accepted through bgp.peerPrefixes that is neither connected nor cut off has no series.", []string{"peer", "type"}, nil)
	descSessionUptime = prometheus.NewDesc("reef_bgp_session_uptime_seconds",
		"How long the BGP session with the peer has been established; 0 when it is down.", []string{"peer", "type"}, nil)
	descPathsReceived = prometheus.NewDesc("reef_bgp_paths_received",
		"Paths the peer sends, in the last table read (both families).", []string{"peer", "type"}, nil)
	descPathsAccepted = prometheus.NewDesc("reef_bgp_paths_accepted",
		"Paths from the peer that passed reef's import filter, in the last table read.", []string{"peer", "type"}, nil)
	descPathsDropped = prometheus.NewDesc("reef_bgp_paths_dropped",
		"Paths from the peer that reef's import filter dropped, in the last table read, by reason.", []string{"peer", "type", "reason"}, nil)
	descUpdatesIn = prometheus.NewDesc("reef_bgp_updates_received_total",
		"UPDATE messages received from the peer in the current session (GoBGP's count; it restarts with the session).", []string{"peer", "type"}, nil)
	descUpdatesOut = prometheus.NewDesc("reef_bgp_updates_sent_total",
		"UPDATE messages sent to the peer in the current session (GoBGP's count; it restarts with the session).", []string{"peer", "type"}, nil)
	descInvalid = prometheus.NewDesc("reef_bgp_invalid_paths_total",
		"Paths dropped because they are not reef blocks (a rogue or misconfigured speaker), since the daemon started.", nil, nil)
	descServiceCIDR = prometheus.NewDesc("reef_bgp_service_cidr_announced",
		"1 for a Service CIDR of bgp.serviceClusterIPs this node announces to its external peers, 0 for one it cannot (an IPv6 CIDR without nodeAddressV6).", []string{"cidr"}, nil)
	descServiceAddress = prometheus.NewDesc("reef_bgp_service_address_announced",
		"1 for a Service address (bgp.serviceExternalIPs, bgp.serviceLoadBalancerIPs) this node announces to its external peers, per Service behind it; reason: cluster (externalTrafficPolicy Cluster: every node announces it) or local (Local: this node has a ready endpoint). An address this node does not announce has no series.",
		[]string{"address", "service", "source", "reason"}, nil)
	descBFDUp = prometheus.NewDesc("reef_bgp_bfd_up",
		"1 when the BFD session with the external peer is up, else 0 (down, init or admin down); only peers with bgp.externalPeers[].bfd.", []string{"peer"}, nil)
	descStandIns = prometheus.NewDesc("reef_bgp_stand_ins",
		"Blocks of other nodes that this node announces to its BFD routers for them while they restart (docs/bgp.md, \"Stand-ins\"), by family; a block sent to two routers counts once.", []string{"family"}, nil)
	descBlocksMarked = prometheus.NewDesc("reef_bgp_blocks_marked",
		"This node's blocks announced marked GRACEFUL_SHUTDOWN (65535:0) for the other nodes to stand in for them, by family: a planned stop, or a start after one until its BFD routers have its blocks.", []string{"family"}, nil)
	descBlocks = prometheus.NewDesc("reef_blocks",
		"Blocks this node knows, by state: pending and confirmed (its own claims and blocks), lost (its confirmed blocks another node won), remote (other nodes').", []string{"state"}, nil)
	descInUse = prometheus.NewDesc("reef_pool_addresses_in_use",
		"Addresses of the pool allocated on this node.", []string{"pool"}, nil)
	descCapacity = prometheus.NewDesc("reef_pool_addresses_capacity",
		"Addresses in this node's confirmed blocks of the pool.", []string{"pool"}, nil)
	descPoolBlocks = prometheus.NewDesc("reef_pool_blocks",
		"Blocks of the pool that nodes can claim: all of an IPv4 pool's, the first 2^32 of an IPv6 pool's.", []string{"pool"}, nil)
	descPoolClaimed = prometheus.NewDesc("reef_pool_blocks_claimed",
		"Blocks of the pool that some node known here owns or claims.", []string{"pool"}, nil)
	descWaiting = prometheus.NewDesc("reef_pool_claims_waiting",
		"This node's claims of the pool's blocks waiting for a majority of the voters.", []string{"pool"}, nil)
	descPendingDeletes = prometheus.NewDesc("reef_cni_pending_deletes",
		"DELs queued while the daemon was away and not yet run.", nil, nil)
	descVoterLists = prometheus.NewDesc("reef_block_voter_lists",
		"Voter lists this node sees announced, its own included: 1 while every node agrees; above 1 this node claims no block (reef status names the lists and the nodes behind each).", nil, nil)
	descVoterListSettled = prometheus.NewDesc("reef_block_voter_list_settled",
		"1 when this node sees the voter list settled: no other list, every voter reached, no pending claim, and on a voter a vote held for every confirmed block; a change of bgp.voters waits until every node shows 1 (docs/ipam.md).", nil, nil)
	descVoterRestricted = prometheus.NewDesc("reef_block_voter_restricted",
		"1 when this node is a voter whose store is new (a wiped state dir, or reef store recover): it votes only for confirmed owners until it is taken out of bgp.voters and added back (reef status says how).", nil, nil)
	descLBLeader = prometheus.NewDesc("reef_lb_ipam_leader",
		"1 when this node holds the Lease and assigns LoadBalancer addresses (docs/lbipam.md), 0 on a standby; no series when assignment is off.", nil, nil)
	descLBAssigned = prometheus.NewDesc("reef_lb_ipam_addresses_assigned",
		"LoadBalancer addresses in the record after this node's last round as leader.", nil, nil)
	descRuntime = prometheus.NewDesc("reef_runtime_config_problem",
		"1 when the container runtime will not use reef for this reason (reef status says what to do), else 0.", []string{"problem"}, nil)
)

type stateCollector struct{ state func() State }

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessionUp, descPeerCutOff, descSessionUptime, descPathsReceived, descPathsAccepted, descPathsDropped, descUpdatesIn, descUpdatesOut, descInvalid, descServiceCIDR, descServiceAddress, descBFDUp, descStandIns, descBlocksMarked,
		descBlocks, descInUse, descCapacity, descPoolBlocks, descPoolClaimed, descWaiting, descPendingDeletes, descVoterLists, descVoterListSettled, descVoterRestricted, descRuntime,
		descLBLeader, descLBAssigned} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.state()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	collectPeers(ch, gauge, s.Peers, time.Now())
	ch <- prometheus.MustNewConstMetric(descInvalid, prometheus.CounterValue, float64(s.InvalidPaths))
	collectAnnounced(gauge, s)
	collectBlocks(gauge, s)
	for _, k := range s.RuntimeKinds {
		gauge(descRuntime, b2f(slices.Contains(s.RuntimeProblems, k)), k)
	}
}

// gaugeFunc sends one gauge of d.
type gaugeFunc func(d *prometheus.Desc, v float64, labels ...string)

// collectPeers sends the series of each BGP peer's session.
func collectPeers(ch chan<- prometheus.Metric, gauge gaugeFunc, peers []Peer, now time.Time) {
	for _, p := range peers {
		uptime := 0.0
		if p.Up && !p.Since.IsZero() {
			uptime = now.Sub(p.Since).Seconds()
		}
		gauge(descSessionUp, b2f(p.Up), p.Address, p.Type)
		gauge(descPeerCutOff, b2f(p.CutOff), p.Address, p.Type)
		gauge(descSessionUptime, uptime, p.Address, p.Type)
		gauge(descPathsReceived, float64(p.Received), p.Address, p.Type)
		gauge(descPathsAccepted, float64(p.Accepted), p.Address, p.Type)
		for reason, n := range p.Dropped {
			gauge(descPathsDropped, float64(n), p.Address, p.Type, reason)
		}
		if p.Updates {
			ch <- prometheus.MustNewConstMetric(descUpdatesIn, prometheus.CounterValue, float64(p.UpdatesIn), p.Address, p.Type)
			ch <- prometheus.MustNewConstMetric(descUpdatesOut, prometheus.CounterValue, float64(p.UpdatesOut), p.Address, p.Type)
		}
	}
}

// collectAnnounced sends what this node announces to its external peers:
// Service CIDRs and addresses, BFD sessions, stand-ins and marked blocks.
func collectAnnounced(gauge gaugeFunc, s State) {
	for cidr, up := range s.ServiceCIDRs {
		gauge(descServiceCIDR, b2f(up), cidr)
	}
	for _, a := range s.ServiceAddresses {
		gauge(descServiceAddress, 1, a.Address, a.Service, a.Source, a.Reason)
	}
	for peer, up := range s.BFD {
		gauge(descBFDUp, b2f(up), peer)
	}
	if s.StandIns != nil || s.BlocksMarked != nil {
		for _, fam := range []string{"ipv4", "ipv6"} {
			gauge(descStandIns, float64(s.StandIns[fam]), fam)
			gauge(descBlocksMarked, float64(s.BlocksMarked[fam]), fam)
		}
	}
}

// collectBlocks sends the block protocol's and the address pools' series,
// the pending DELs and LoadBalancer address assignment.
func collectBlocks(gauge gaugeFunc, s State) {
	for _, st := range []string{"pending", "confirmed", "lost", "remote"} {
		gauge(descBlocks, float64(s.Blocks[st]), st)
	}
	for _, p := range s.Pools {
		gauge(descInUse, float64(p.InUse), p.CIDR)
		gauge(descCapacity, float64(p.Capacity), p.CIDR)
		gauge(descPoolBlocks, float64(p.Blocks), p.CIDR)
		gauge(descPoolClaimed, float64(p.Claimed), p.CIDR)
		gauge(descWaiting, float64(p.Waiting), p.CIDR)
	}
	gauge(descPendingDeletes, float64(s.PendingDeletes))
	if lb := s.LBIPAM; lb != nil {
		gauge(descLBLeader, b2f(lb.Leader))
		gauge(descLBAssigned, float64(lb.Assigned))
	}
	gauge(descVoterLists, float64(s.VoterLists))
	if s.VoterLists > 0 {
		gauge(descVoterListSettled, b2f(s.VoterListSettled))
		gauge(descVoterRestricted, b2f(s.VoterRestricted))
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
