package lab

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// BFD and graceful shutdown at the ToR (docs/bgp.md, "BFD" and "Planned
// restarts"): what the lab adds to ToRBirdConfig and ToRFRRConfig when a
// test asks for them (ToROptions), as separate pieces so that the page can
// show them beside the base configurations.

// ToROptions are the ToR's settings beyond the base configuration.
type ToROptions struct {
	Password string        // TCP MD5 key of every session; "": none
	Hold     time.Duration // BGP hold time; 0: 3s
	// BFD, if set, runs BFD with every node at this interval (receive and
	// transmit) and BFDMultiplier (0: 3).
	BFD           time.Duration
	BFDMultiplier int
	// GracefulShutdown honours RFC 8326's GRACEFUL_SHUTDOWN community
	// (65535:0) from the nodes: local preference 0.
	GracefulShutdown bool
}

func (o ToROptions) hold() time.Duration {
	if o.Hold == 0 {
		return 3 * time.Second
	}
	return o.Hold
}

func (o ToROptions) multiplier() int {
	if o.BFDMultiplier == 0 {
		return 3
	}
	return o.BFDMultiplier
}

// BirdBFD is the BFD protocol of a BIRD ToR: one session per BGP session
// that asks for it (BirdBFDOn), on any interface.
func BirdBFD(interval time.Duration, multiplier int) string {
	ms := interval.Milliseconds()
	return fmt.Sprintf(`
# BFD with the nodes (RFC 5880, 5881): a node that stops answering for
# %d intervals is dead, and its BGP session goes down with its routes.
protocol bfd {
  interface "*" {
    min rx interval %d ms;
    min tx interval %d ms;
    multiplier %d;
  };
}
`, multiplier, ms, ms, multiplier)
}

// BirdBFDOn is what a BIRD ToR's reef_node template gets for BFD.
const BirdBFDOn = "  bfd on;                       # BFD down: the session goes down, no graceful restart\n"

// BirdGracefulShutdown is the first line of every import filter of a
// BIRD ToR that honours GRACEFUL_SHUTDOWN (RFC 8326): a node that is
// about to stop marks its routes, and they lose to every other node's.
const BirdGracefulShutdown = "  if (65535, 0) ~ bgp_community then bgp_local_pref = 0;   # RFC 8326 GRACEFUL_SHUTDOWN\n"

// FRRBFD is the BFD profile of an FRR ToR, bfdd's part of frr.conf (bfdd
// must run).
func FRRBFD(interval time.Duration, multiplier int) string {
	ms := interval.Milliseconds()
	return fmt.Sprintf(`bfd
 profile reef
  detect-multiplier %d
  receive-interval %d
  transmit-interval %d
 exit
exit
!
`, multiplier, ms, ms)
}

// FRRBFDOn is what an FRR ToR's router bgp gets for BFD.
const FRRBFDOn = " neighbor reef bfd profile reef\n"

// FRRGracefulShutdown gives local preference 0 to the nodes' routes that
// carry GRACEFUL_SHUTDOWN (RFC 8326), then goes on to reef-in's entries,
// which decide what is taken.
const FRRGracefulShutdown = `bgp community-list standard reef-gshut seq 5 permit graceful-shutdown
!
route-map reef-in permit 5
 match community reef-gshut
 set local-preference 0
 on-match next
exit
!
`

// withToROptions adds BFD and graceful shutdown to a base configuration of
// kind.
func withToROptions(kind, conf string, o ToROptions) (string, error) {
	edit := func(old, new string) error {
		if !strings.Contains(conf, old) {
			return fmt.Errorf("lab: the %s ToR config has no %q to add to", kind, old)
		}
		conf = strings.Replace(conf, old, new, -1)
		return nil
	}
	switch kind {
	case "bird":
		if o.GracefulShutdown {
			if err := edit("  if net ~ [", BirdGracefulShutdown+"  if net ~ ["); err != nil {
				return "", err
			}
		}
		if o.BFD > 0 {
			if err := edit("  graceful restart on;", BirdBFDOn+"  graceful restart on;"); err != nil {
				return "", err
			}
			conf = strings.Replace(conf, "\ntemplate bgp reef_node {", BirdBFD(o.BFD, o.multiplier())+"\ntemplate bgp reef_node {", 1)
		}
	case "frr":
		if o.GracefulShutdown {
			if err := edit("route-map reef-out deny 10\n", FRRGracefulShutdown+"route-map reef-out deny 10\n"); err != nil {
				return "", err
			}
		}
		if o.BFD > 0 {
			// FRRBFD goes to bfdd (StartToRWith).
			if err := edit(" neighbor reef timers", FRRBFDOn+" neighbor reef timers"); err != nil {
				return "", err
			}
		}
	}
	return conf, nil
}

// ToRSession is a ToR's view of its BGP session with a node.
type ToRSession struct {
	Established bool
	// LastError is why the session last went down, as the router says it
	// (BIRD's "Last error", FRR's lastResetDueTo); "" if it never did.
	LastError string
}

// ToRPath is one of the ToR's BGP paths to a prefix.
type ToRPath struct {
	From      netip.Addr // the node it came from
	LocalPref int
	GShut     bool // carries GRACEFUL_SHUTDOWN (65535:0)
}

var (
	birdBGPState  = regexp.MustCompile(`(?m)^\s+BGP state:\s+(\S+)`)
	birdLastError = regexp.MustCompile(`(?m)^\s+Last error:\s+(.+)$`)
	// 192.168.77.11   eth0      Up        10:27:05.236    0.300    0.900
	birdBFDLine = regexp.MustCompile(`^(\S+)\s+\S+\s+(Up|Down|Init|AdminDown)\b`)
)

// BFDSessions are the router's BFD sessions: the node's address -> state
// (up, down, init, admindown), from `birdc show bfd sessions`.
func (b *birdToR) BFDSessions() (map[netip.Addr]string, error) {
	out, err := b.Birdc("show", "bfd", "sessions")
	if err != nil {
		return nil, err
	}
	m := map[netip.Addr]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := birdBFDLine.FindStringSubmatch(line); f != nil {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				m[a] = strings.ToLower(f[2])
			}
		}
	}
	return m, nil
}

// Session is the router's BGP session with node, from `birdc show
// protocols all`.
func (b *birdToR) Session(node netip.Addr) (ToRSession, error) {
	peers, err := b.Neighbours()
	if err != nil {
		return ToRSession{}, err
	}
	for name, a := range peers {
		if a != node {
			continue
		}
		out, err := b.Birdc("show", "protocols", "all", name)
		if err != nil {
			return ToRSession{}, err
		}
		var s ToRSession
		if m := birdBGPState.FindStringSubmatch(out); m != nil {
			s.Established = m[1] == "Established"
		}
		if m := birdLastError.FindStringSubmatch(out); m != nil {
			s.LastError = strings.TrimSpace(m[1])
		}
		return s, nil
	}
	return ToRSession{}, fmt.Errorf("BIRD has no BGP session with %s", node)
}

var (
	birdLocalPref = regexp.MustCompile(`(?m)^\s+BGP\.local_pref:\s+(\d+)`)
	birdCommunity = regexp.MustCompile(`(?m)^\s+BGP\.community:\s+(.*)$`)
)

// PathsTo are the router's BGP paths to exactly prefix, sorted by node.
func (b *birdToR) PathsTo(prefix netip.Prefix) ([]ToRPath, error) {
	peers, err := b.Neighbours()
	if err != nil {
		return nil, err
	}
	table := "master4"
	if prefix.Addr().Is6() {
		table = "master6"
	}
	out, err := b.Birdc("show", "route", "table", table, prefix.String(), "all")
	if err != nil {
		return nil, err
	}
	// One block per path: it starts with the net (the first) or with
	// spaces and "unicast [nodeN".
	var paths []ToRPath
	var cur *ToRPath
	for _, line := range strings.Split(out, "\n") {
		if m := birdAlt.FindStringSubmatch(line); m != nil || birdNet.MatchString(line) {
			name := ""
			if m != nil {
				name = m[1]
			} else {
				name = birdNet.FindStringSubmatch(line)[2]
			}
			paths = append(paths, ToRPath{From: peers[name], LocalPref: -1})
			cur = &paths[len(paths)-1]
			continue
		}
		if cur == nil {
			continue
		}
		if m := birdLocalPref.FindStringSubmatch(line); m != nil {
			cur.LocalPref, _ = strconv.Atoi(m[1])
		}
		if m := birdCommunity.FindStringSubmatch(line); m != nil && strings.Contains(strings.ReplaceAll(m[1], " ", ""), "(65535,0)") {
			cur.GShut = true
		}
	}
	slices.SortFunc(paths, func(a, b ToRPath) int { return a.From.Compare(b.From) })
	return paths, nil
}

// BFDSessions are the router's BFD sessions, from `show bfd peers json`.
func (f *frrToR) BFDSessions() (map[netip.Addr]string, error) {
	out, err := f.Vtysh("show bfd peers json")
	if err != nil {
		return nil, err
	}
	var peers []struct {
		Peer   string `json:"peer"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &peers); err != nil {
		return nil, fmt.Errorf("show bfd peers json: %v: %s", err, out)
	}
	m := map[netip.Addr]string{}
	for _, p := range peers {
		if a, err := netip.ParseAddr(p.Peer); err == nil {
			m[a] = strings.ToLower(p.Status)
		}
	}
	return m, nil
}

// Session is the router's BGP session with node, from `show bgp neighbors
// json`.
func (f *frrToR) Session(node netip.Addr) (ToRSession, error) {
	out, err := f.Vtysh("show bgp neighbors " + node.String() + " json")
	if err != nil {
		return ToRSession{}, err
	}
	var m map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return ToRSession{}, fmt.Errorf("show bgp neighbors %s json: %v: %s", node, err, out)
	}
	n, ok := m[node.String()]
	if !ok {
		return ToRSession{}, fmt.Errorf("FRR has no BGP session with %s: %s", node, out)
	}
	// The why of the last reset is spread over lastResetDueTo ("BGP
	// Notification send"), lastNotificationReason ("Cease/BFD Down") and
	// the like.
	var why []string
	for _, k := range []string{"lastResetDueTo", "lastNotificationReason", "lastErrorCodeSubcode"} {
		if v, ok := n[k]; ok {
			why = append(why, fmt.Sprintf("%s: %v", k, v))
		}
	}
	return ToRSession{Established: n["bgpState"] == "Established", LastError: strings.Join(why, "; ")}, nil
}

// PathsTo are the router's BGP paths to exactly prefix, sorted by node.
func (f *frrToR) PathsTo(prefix netip.Prefix) ([]ToRPath, error) {
	fam := "ipv4"
	if prefix.Addr().Is6() {
		fam = "ipv6"
	}
	out, err := f.Vtysh(fmt.Sprintf("show bgp %s unicast %s json", fam, prefix))
	if err != nil {
		return nil, err
	}
	var r struct {
		Paths []struct {
			LocPrf    *int `json:"locPrf"`
			Community *struct {
				String string `json:"string"`
			} `json:"community"`
			Peer struct {
				PeerID string `json:"peerId"`
			} `json:"peer"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("show bgp %s unicast %s json: %v: %s", fam, prefix, err, out)
	}
	var paths []ToRPath
	for _, p := range r.Paths {
		a, err := netip.ParseAddr(p.Peer.PeerID)
		if err != nil {
			return nil, fmt.Errorf("show bgp %s unicast %s json: peer %q: %v", fam, prefix, p.Peer.PeerID, err)
		}
		tp := ToRPath{From: a, LocalPref: 100}
		if p.LocPrf != nil {
			tp.LocalPref = *p.LocPrf
		}
		if p.Community != nil {
			tp.GShut = strings.Contains(p.Community.String, "graceful-shutdown") || strings.Contains(p.Community.String, "65535:0")
		}
		paths = append(paths, tp)
	}
	slices.SortFunc(paths, func(a, b ToRPath) int { return a.From.Compare(b.From) })
	return paths, nil
}

// Request is one request of a client that must not wait out a lost
// packet: it connects from netns to a TCPServer at dst and reads its
// answer, all within timeout. With a timeout under the kernel's first SYN
// retransmission (1 s), a request whose SYN the network dropped fails
// instead of being rescued by the retransmission, so a blackhole of any
// length shows as failed requests.
func (l *Lab) Request(netns string, dst netip.AddrPort, timeout time.Duration) error {
	var c net.Conn
	err := ns.WithNetNSPath(NetnsPath(netns), func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", dst.String(), timeout)
		return err
	})
	if err != nil {
		return fmt.Errorf("connect from %s to %s: %w", netns, dst, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		return fmt.Errorf("read the answer of %s in %s: %w", dst, netns, err)
	}
	return nil
}
