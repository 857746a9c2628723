package lab

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// Debian's gobgpd and its CLI (make deps-test installs gobgpd): a BGP
// daemon of another release than reef's embedded GoBGP (3.10 against
// 4.8), run as a router of its own.
const (
	GobgpdBinary = "/usr/bin/gobgpd"
	GobgpBinary  = "/usr/bin/gobgp"
)

// Gobgpd is gobgpd in a namespace of its own on the underlay, peering
// with nodes.
type Gobgpd struct {
	Lab     *Lab
	Name    string
	Netns   string
	Address netip.Addr
	ASN     uint32
	Conf    string
}

// AddGobgpd creates a namespace on the underlay at addr and writes a
// gobgpd configuration in asn with an eBGP session to each node (AS 64512)
// and an iBGP session to each of feeders, speakers that give it routes to
// pass on; Start runs it.
func (l *Lab) AddGobgpd(name string, addr netip.Addr, asn uint32, nodes, feeders []netip.Addr) (*Gobgpd, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "[global.config]\n  as = %d\n  router-id = %q\n", asn, addr)
	neighbor := func(a netip.Addr, as uint32) {
		fmt.Fprintf(&b, "\n[[neighbors]]\n  [neighbors.config]\n    neighbor-address = %q\n    peer-as = %d\n"+
			"  [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n"+
			"  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"ipv4-unicast\"\n", a, as)
	}
	for _, n := range nodes {
		neighbor(n, 64512)
	}
	for _, f := range feeders {
		neighbor(f, asn)
	}
	return l.AddGobgpdConf(name, addr, asn, b.String())
}

// AddGobgpdConf creates a namespace on the underlay at addr for a gobgpd
// in asn with conf, its TOML configuration; Start runs it.
func (l *Lab) AddGobgpdConf(name string, addr netip.Addr, asn uint32, conf string) (*Gobgpd, error) {
	if _, err := os.Stat(GobgpdBinary); err != nil {
		return nil, fmt.Errorf("lab: gobgpd not installed (make deps-test installs gobgpd): %w", err)
	}
	ns, err := l.AddHost(name, addr)
	if err != nil {
		return nil, err
	}
	if err := l.IP(ns, "link", "set", "lo", "up"); err != nil { // the API listens on 127.0.0.1
		return nil, err
	}
	g := &Gobgpd{Lab: l, Name: name, Netns: ns, Address: addr, ASN: asn, Conf: filepath.Join(l.Dir, name+".toml")}
	if err := os.WriteFile(g.Conf, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	return g, nil
}

// Start runs gobgpd (Lab.Close kills it) and waits until its API answers.
func (g *Gobgpd) Start() error {
	if _, err := g.Lab.Spawn(g.Netns, g.Name+".log", GobgpdBinary, "-f", g.Conf, "-t", "toml", "--api-hosts", "127.0.0.1:50051"); err != nil {
		return err
	}
	if err := poll.Until(10*time.Second, func() error { _, err := g.CLI("global"); return err }); err != nil {
		log, _ := os.ReadFile(filepath.Join(g.Lab.Dir, g.Name+".log"))
		return fmt.Errorf("%s: gobgpd's API does not answer (%v):\n%s", g.Name, err, log)
	}
	return nil
}

// CLI runs the gobgp CLI against this gobgpd.
func (g *Gobgpd) CLI(args ...string) (string, error) {
	out, err := g.Lab.Run(g.Netns, append([]string{GobgpBinary, "-u", "127.0.0.1", "-p", "50051"}, args...)...)
	if err != nil {
		return out, fmt.Errorf("gobgp %s: %w", strings.Join(args, " "), err)
	}
	return out, nil
}

// GobgpNeighbor is what `gobgp neighbor ADDR` says of one peer: the
// session's state, the OPEN and NOTIFICATION messages received from the
// peer (counted over all its sessions since gobgpd started), and the
// graceful-restart capability (64) of the peer's last OPEN.
type GobgpNeighbor struct {
	State                 string // "ESTABLISHED", "ACTIVE", "IDLE", ...
	OpensReceived         int
	NotificationsReceived int
	GracefulRestart       bool // the OPEN had the capability
	RestartFlag           bool // with the Restart State bit (R, RFC 4724) set
}

// Neighbor reads what this gobgpd says of its peer addr.
func (g *Gobgpd) Neighbor(addr netip.Addr) (GobgpNeighbor, error) {
	out, err := g.CLI("neighbor", addr.String())
	if err != nil {
		return GobgpNeighbor{}, fmt.Errorf("%w: %s", err, out)
	}
	return ParseGobgpNeighbor(out)
}

// ParseGobgpNeighbor reads the text of `gobgp neighbor ADDR` (Debian's
// gobgp 3.10). The capability's flags are in the line "Remote: restart
// time 120 sec, restart flag set" under "graceful-restart:".
func ParseGobgpNeighbor(out string) (GobgpNeighbor, error) {
	var n GobgpNeighbor
	var opens, notifications bool
	lines := strings.Split(out, "\n")
	for i, line := range lines {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(strings.TrimSpace(line), "BGP state = "):
			n.State, _, _ = strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "BGP state = "), ",")
		case len(f) == 3 && f[0] == "Opens:":
			n.OpensReceived, opens = atoiOr(f[2], -1), true
		case len(f) == 3 && f[0] == "Notifications:":
			n.NotificationsReceived, notifications = atoiOr(f[2], -1), true
		case len(f) > 1 && f[0] == "graceful-restart:":
			n.GracefulRestart = strings.Contains(line, "received")
			indent := len(line) - len(strings.TrimLeft(line, " \t"))
			for _, sub := range lines[i+1:] {
				if len(sub)-len(strings.TrimLeft(sub, " \t")) <= indent {
					break
				}
				if r, ok := strings.CutPrefix(strings.TrimSpace(sub), "Remote:"); ok {
					n.RestartFlag = strings.Contains(r, "restart flag set")
				}
			}
		}
	}
	if n.State == "" || !opens || !notifications || n.OpensReceived < 0 || n.NotificationsReceived < 0 {
		return n, fmt.Errorf("gobgp neighbor: no state or message counts in:\n%s", out)
	}
	return n, nil
}

func atoiOr(s string, or int) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return or
	}
	return v
}

// FloodFile writes an --announce-file for `reef-lab speaker`: n routes,
// /28s of 100.64.0.0/10 (an address range no lab pool or node uses), next
// hop nh. (Debian's gobgp 3.10 would take them in bulk with `gobgp mrt
// inject`, but it loses part of its stream: 267 and 306 of 500 routes in
// two tries, so routes reach gobgpd over BGP from a feeder instead.)
func FloodFile(path string, n int, nh netip.Addr) error {
	var b strings.Builder
	for i := range n {
		v := uint32(100)<<24 | uint32(64)<<16 + uint32(i)<<4
		fmt.Fprintf(&b, "%s %s\n", netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), 28), nh)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
