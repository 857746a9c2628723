package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
)

// speaker runs a bare GoBGP speaker for tests and benchmarks: it peers with
// the given nodes and announces arbitrary paths, good or bad, until killed.
// Each --announce is "prefix nexthop [asn:data1:data2 ...]" (IPv4
// unicast). With --reef-blocks N it also announces what a reef node that
// owns N confirmed blocks of --pool would: its record and the N confirmed
// claims in IPv4 VPN (bgp.EncodeRecord, bgp.EncodeClaim; RD type 1, label
// 0, next hop the speaker, as bgp/table.go builds them) and the N blocks
// in IPv4 unicast (bgp.EncodeUnicast, next hop the speaker).
func speaker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab speaker", flag.ContinueOnError)
	asn := fs.Uint("asn", 64512, "AS number")
	routerID := fs.String("router-id", "", "router ID and local address")
	peers := fs.String("peers", "", "comma-separated peer addresses")
	var announce multiFlag
	fs.Var(&announce, "announce", `a path: "prefix nexthop [asn:d1:d2 ...]" (repeatable)`)
	file := fs.String("announce-file", "", "file with one path per line, same format")
	reefBlocks := fs.Int("reef-blocks", 0, "announce a reef node's record and this many confirmed blocks of --pool, owned by the speaker")
	poolFlag := fs.String("pool", "10.244.0.0/16", "--reef-blocks: the pool")
	blockSize := fs.Int("block-size", 26, "--reef-blocks: the pool's block length")
	votersFlag := fs.String("voters", "", "--reef-blocks: comma-separated voter list of the record and claims (default: the speaker alone)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file != "" {
		lines, err := readLines(*file)
		if err != nil {
			return err
		}
		announce = append(announce, lines...)
	}
	var paths []*apiutil.Path
	for _, a := range announce {
		p, err := parsePath(a)
		if err != nil {
			return err
		}
		paths = append(paths, p)
	}
	if *reefBlocks > 0 {
		ps, err := speakerReefPaths(uint32(*asn), *routerID, *poolFlag, *blockSize, *reefBlocks, *votersFlag)
		if err != nil {
			return err
		}
		paths = append(paths, ps...)
	}
	if err := startSpeaker(ctx, uint32(*asn), *routerID, *peers, paths); err != nil {
		return err
	}
	fmt.Printf("speaker %s: announcing %d paths to %s\n", *routerID, len(paths), *peers)
	<-ctx.Done()
	return nil
}

// speakerReefPaths is a reef node's record and n confirmed blocks of the
// pool, owned by the speaker routerID, with the voters (comma-separated;
// "": the speaker alone).
func speakerReefPaths(asn uint32, routerID, poolFlag string, blockSize, n int, votersFlag string) ([]*apiutil.Path, error) {
	id, err := netip.ParseAddr(routerID)
	if err != nil {
		return nil, fmt.Errorf("--router-id: %w", err)
	}
	pool, err := netip.ParsePrefix(poolFlag)
	if err != nil {
		return nil, fmt.Errorf("--pool: %w", err)
	}
	voters := []netip.Addr{id}
	if votersFlag != "" {
		voters = nil
		for _, v := range strings.Split(votersFlag, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("--voters: %w", err)
			}
			voters = append(voters, a)
		}
	}
	return reefPaths(asn, id, blockproto.Pool{CIDR: pool, BlockSize: blockSize}, n, voters)
}

// startSpeaker starts a GoBGP server as routerID, with a session to each
// of peers (comma-separated) in the families of a reef node's sessions,
// and announces paths.
func startSpeaker(ctx context.Context, asn uint32, routerID, peers string, paths []*apiutil.Path) error {
	s := server.NewBgpServer()
	go s.Serve()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: routerID, ListenPort: -1,
	}}); err != nil {
		return err
	}
	// The families of a reef node's sessions (bgp/speaker.go afiSafis):
	// IPv4 unicast and IPv4 VPN.
	family := func(safi api.Family_Safi) *api.AfiSafi {
		return &api.AfiSafi{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: safi}, Enabled: true}}
	}
	for _, p := range strings.Split(peers, ",") {
		if p == "" {
			continue
		}
		if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: p, PeerAsn: asn},
			Transport: &api.Transport{LocalAddress: routerID},
			Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
			AfiSafis:  []*api.AfiSafi{family(api.Family_SAFI_UNICAST), family(api.Family_SAFI_MPLS_VPN)},
		}}); err != nil {
			return fmt.Errorf("add peer %s: %w", p, err)
		}
	}
	for i := 0; i < len(paths); i += 500 {
		if _, err := s.AddPath(apiutil.AddPathRequest{Paths: paths[i:min(i+500, len(paths))]}); err != nil {
			return fmt.Errorf("announce: %w", err)
		}
	}
	return nil
}

// reefPaths are the paths of a reef node at id (a fresh incarnation, born
// an hour ago) that owns the first n blocks of pool, confirmed, under the
// voter list voters: one record and n claims in IPv4 VPN, n blocks in IPv4
// unicast.
func reefPaths(asn uint32, id netip.Addr, pool blockproto.Pool, n int, voters []netip.Addr) ([]*apiutil.Path, error) {
	if n > pool.NumBlocks() {
		return nil, fmt.Errorf("--reef-blocks %d: pool %s has %d blocks of /%d", n, pool.CIDR, pool.NumBlocks(), pool.BlockSize)
	}
	self := blockproto.Node{Addr: id, Inc: rand.Uint32()}
	voters = blockproto.Voters(voters)
	hash := blockproto.VoterHash(voters)
	nh, err := bgppkt.NewPathAttributeNextHop(id)
	if err != nil {
		return nil, err
	}
	rec, err := bgp.EncodeRecord(asn, blockproto.Record{Node: self, Born: uint32(time.Now().Add(-time.Hour).Unix()), VoterHash: hash, Voters: voters})
	if err != nil {
		return nil, err
	}
	p, err := speakerVPNPath(rec, nh)
	if err != nil {
		return nil, err
	}
	out := []*apiutil.Path{p}
	for i := range n {
		blk := pool.Block(i)
		rt, err := bgp.EncodeClaim(asn, blockproto.Claim{Block: blk, Owner: self, State: blockproto.Confirmed, VoterHash: hash})
		if err != nil {
			return nil, err
		}
		p, err := speakerVPNPath(rt, nh)
		if err != nil {
			return nil, err
		}
		uc, err := bgppkt.NewIPAddrPrefix(blk)
		if err != nil {
			return nil, err
		}
		out = append(out, p, &apiutil.Path{Family: bgppkt.RF_IPv4_UC, Nlri: uc, Attrs: []bgppkt.PathAttributeInterface{
			bgppkt.NewPathAttributeOrigin(0), nh, speakerLCs(bgp.EncodeUnicast(asn, bgp.UnicastBlock{Block: blk, Owner: self}))}})
	}
	return out, nil
}

// speakerVPNPath is rt as bgp/table.go's vpnPath builds it: RD type 1,
// label 0, next hop nh, the large communities, no route target.
func speakerVPNPath(rt bgp.VPNRoute, nh *bgppkt.PathAttributeNextHop) (*apiutil.Path, error) {
	rd, err := bgppkt.NewRouteDistinguisherIPAddressAS(rt.RD.Addr, rt.RD.Number)
	if err != nil {
		return nil, err
	}
	nlri, err := bgppkt.NewLabeledVPNIPAddrPrefix(rt.Prefix, *bgppkt.NewMPLSLabelStack(0), rd)
	if err != nil {
		return nil, err
	}
	return &apiutil.Path{Family: bgppkt.RF_IPv4_VPN, Nlri: nlri,
		Attrs: []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(0), nh, speakerLCs(rt.Communities)}}, nil
}

func speakerLCs(lcs []bgp.LargeCommunity) *bgppkt.PathAttributeLargeCommunities {
	vals := make([]*bgppkt.LargeCommunity, len(lcs))
	for i, lc := range lcs {
		vals[i] = bgppkt.NewLargeCommunity(lc.ASN, lc.Data1, lc.Data2)
	}
	return bgppkt.NewPathAttributeLargeCommunities(vals)
}

func parsePath(s string) (*apiutil.Path, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return nil, fmt.Errorf("path %q: want prefix nexthop [lc...]", s)
	}
	prefix, err := netip.ParsePrefix(f[0])
	if err != nil {
		return nil, err
	}
	nh, err := netip.ParseAddr(f[1])
	if err != nil {
		return nil, err
	}
	nlri, err := bgppkt.NewIPAddrPrefix(prefix)
	if err != nil {
		return nil, err
	}
	nhAttr, err := bgppkt.NewPathAttributeNextHop(nh)
	if err != nil {
		return nil, err
	}
	attrs := []bgppkt.PathAttributeInterface{bgppkt.NewPathAttributeOrigin(0), nhAttr}
	var lcs []*bgppkt.LargeCommunity
	for _, c := range f[2:] {
		parts := strings.Split(c, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("large community %q: want a:b:c", c)
		}
		var v [3]uint32
		for i, p := range parts {
			n, err := strconv.ParseUint(p, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("large community %q: %w", c, err)
			}
			v[i] = uint32(n)
		}
		lcs = append(lcs, bgppkt.NewLargeCommunity(v[0], v[1], v[2]))
	}
	if len(lcs) > 0 {
		attrs = append(attrs, bgppkt.NewPathAttributeLargeCommunities(lcs))
	}
	return &apiutil.Path{Family: bgppkt.RF_IPv4_UC, Nlri: nlri, Attrs: attrs}, nil
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}
