package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// speaker runs a bare GoBGP speaker for tests and benchmarks: it peers with
// the given nodes and announces arbitrary paths, good or bad, until killed.
// Each --announce is "prefix nexthop [asn:data1:data2 ...]".
func speaker(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab speaker", flag.ContinueOnError)
	asn := fs.Uint("asn", 64512, "AS number")
	routerID := fs.String("router-id", "", "router ID and local address")
	peers := fs.String("peers", "", "comma-separated peer addresses")
	var announce multiFlag
	fs.Var(&announce, "announce", `a path: "prefix nexthop [asn:d1:d2 ...]" (repeatable)`)
	file := fs.String("announce-file", "", "file with one path per line, same format")
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
	s := server.NewBgpServer()
	go s.Serve()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: uint32(*asn), RouterId: *routerID, ListenPort: -1,
	}}); err != nil {
		return err
	}
	for _, p := range strings.Split(*peers, ",") {
		if p == "" {
			continue
		}
		if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
			Conf:      &api.PeerConf{NeighborAddress: p, PeerAsn: uint32(*asn)},
			Transport: &api.Transport{LocalAddress: *routerID},
			Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 9, KeepaliveInterval: 3}},
			AfiSafis: []*api.AfiSafi{{Config: &api.AfiSafiConfig{
				Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}},
		}}); err != nil {
			return fmt.Errorf("add peer %s: %w", p, err)
		}
	}
	var paths []*apiutil.Path
	for _, a := range announce {
		p, err := parsePath(a)
		if err != nil {
			return err
		}
		paths = append(paths, p)
	}
	for i := 0; i < len(paths); i += 500 {
		if _, err := s.AddPath(apiutil.AddPathRequest{Paths: paths[i:min(i+500, len(paths))]}); err != nil {
			return fmt.Errorf("announce: %w", err)
		}
	}
	fmt.Printf("speaker %s: announcing %d paths to %s\n", *routerID, len(paths), *peers)
	<-ctx.Done()
	return nil
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
