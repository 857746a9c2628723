package lab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// BirdBinary is Debian's bird2 daemon (make deps-test installs it).
const BirdBinary = "/usr/sbin/bird"

// BirdAddress is the underlay address of the i-th (0-based) BIRD route
// reflector, far above the nodes' .11 onwards.
func BirdAddress(i int) netip.Addr {
	b := Underlay.Addr().As4()
	b[3] = byte(201 + i)
	return netip.AddrFrom4(b)
}

// BirdConfig is the BIRD 2 configuration of a route reflector for reef
// (docs/bgp.md explains it line by line, and a test checks that the docs
// show exactly this): router ID and cluster ID = its own address, iBGP in
// asn, the clients accepted from the range clients (dynamic BGP: BIRD
// waits for them to connect), every family of reef's sessions (IPv4
// unicast, IPv4 VPN, IPv6 VPN) reflected as it came, next hops unchanged. hold is the BGP hold time (keepalive: a third
// of it).
func BirdConfig(self netip.Addr, asn uint32, clients netip.Prefix, hold time.Duration) string {
	return BirdConfigAt(self, self, asn, clients, hold)
}

// BirdConfigAt is BirdConfig for a reflector whose sessions run from
// local, which need not be its router ID: an IPv6 address, for IPv6-only
// clients (clients an IPv6 prefix), the router ID staying 32 bits.
func BirdConfigAt(self, local netip.Addr, asn uint32, clients netip.Prefix, hold time.Duration) string {
	conf := fmt.Sprintf(`# A BIRD 2 route reflector for reef (docs/bgp.md).
router id %[1]s;
log stderr { info, remote, warning, error, auth, fatal, bug };

# The interfaces: BIRD needs them to see that the clients are on a
# directly connected subnet.
protocol device {
  scan time 10;
}

# reef's block protocol: IPv4 VPN paths, one per speaker and subject (the
# route distinguisher is the speaker's address), and IPv6 VPN paths for
# the claims and grants of IPv6 blocks. They have no route target and no
# protocol exports them to the kernel: BIRD only stores and reflects them.
vpn4 table reefvpn;
vpn6 table reefvpn6;

template bgp reef_client {
  local %[6]s as %[2]d;
  direct;                       # the clients share a subnet with the reflector
  rr client;                    # reflect between the clients (RFC 4456)
  rr cluster id %[1]s;
  hold time %[3]d;
  keepalive time %[4]d;
  connect retry time 5;
  error wait time 1, 10;        # after a session fails, take it in again soon
  graceful restart on;          # clients keep our paths while we restart
  ipv4 {                        # confirmed blocks, next hop = owner
    import all;
    export all;
    next hop keep;              # never rewrite the owner's next hop
    gateway direct;
    receive limit 16384 action restart;   # reef's prefix limits (docs/bgp.md)
  };
  vpn4 mpls {                   # claims, grants, records, forgets
    table reefvpn;
    import all;
    export all;
    next hop keep;
    gateway direct;
    receive limit 131072 action restart;
  };
  vpn6 mpls {                   # claims and grants of IPv6 blocks
    table reefvpn6;
    import all;
    export all;
    next hop keep;
    extended next hop on;       # the next hop is the speaker's IPv4 address, IPv4-mapped
    gateway direct;
    receive limit 131072 action restart;
  };
}

protocol bgp reef from reef_client {
  neighbor range %[5]s as %[2]d;  # iBGP: the clients' AS is ours
  dynamic name "client";
}
`, self, asn, int(hold/time.Second), max(1, int(hold/time.Second)/3), clients, local)
	if local.Is6() {
		// The VPN next hops are the clients' identities (IPv4, and
		// IPv4-mapped in IPv6 VPN), on no subnet of an IPv6-only
		// reflector: "gateway direct" refuses them ("Invalid NEXT_HOP
		// attribute - address ... not directly reachable").
		conf = strings.ReplaceAll(conf, "    next hop keep;\n    gateway direct;\n    receive limit 131072",
			"    next hop keep;\n    gateway recursive;            # identities on no subnet of ours: stored and reflected\n    receive limit 131072")
		conf = strings.ReplaceAll(conf, "IPv4-mapped\n    gateway direct;", "IPv4-mapped\n    gateway recursive;")
	}
	return conf
}

// Bird is a BIRD 2 route reflector in a namespace of its own on the
// underlay.
type Bird struct {
	Lab     *Lab
	Name    string
	Netns   string
	Address netip.Addr
	Conf    string // path of bird.conf
	Sock    string // birdc's control socket
	stop    func()
	runs    int
}

// AddBird creates a namespace on the underlay at address addr and writes
// the configuration of a BIRD route reflector for the clients in clients;
// Start runs it.
func (l *Lab) AddBird(name string, addr netip.Addr, clients netip.Prefix) (*Bird, error) {
	return l.AddBirdAt(name, addr, addr, clients)
}

// AddBirdAt is AddBird for a reflector with router ID id at addr, which
// may be an IPv6 address on Underlay6 (for IPv6-only clients).
func (l *Lab) AddBirdAt(name string, id, addr netip.Addr, clients netip.Prefix) (*Bird, error) {
	if _, err := os.Stat(BirdBinary); err != nil {
		return nil, fmt.Errorf("lab: BIRD 2 not installed (make deps-test installs bird2): %w", err)
	}
	ns, err := l.AddHost(name, addr)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(l.Dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	b := &Bird{Lab: l, Name: name, Netns: ns, Address: addr, Conf: filepath.Join(dir, "bird.conf"), Sock: filepath.Join(dir, "bird.ctl")}
	if err := os.WriteFile(b.Conf, []byte(BirdConfigAt(id, addr, 64512, clients, 3*time.Second)), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.Command(BirdBinary, "-p", "-c", b.Conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bird -p -c %s: %v: %s", b.Conf, err, out)
	}
	return b, nil
}

// Start runs BIRD in the foreground in its namespace (Lab.Close kills
// it) and waits until birdc answers.
func (b *Bird) Start() error {
	if b.stop != nil {
		return fmt.Errorf("%s: BIRD already running", b.Name)
	}
	os.Remove(b.Sock)
	b.runs++
	stop, err := b.Lab.Spawn(b.Netns, fmt.Sprintf("%s-%d.log", b.Name, b.runs), BirdBinary, "-f", "-c", b.Conf, "-s", b.Sock)
	if err != nil {
		return err
	}
	b.stop = stop
	if err := poll.Until(10*time.Second, func() error { _, err := b.Birdc("show", "status"); return err }); err != nil {
		return fmt.Errorf("%s: birdc does not answer on %s: %v\n%s", b.Name, b.Sock, err, b.Log())
	}
	return nil
}

// Kill kills BIRD (SIGKILL: its sessions end without a NOTIFICATION).
func (b *Bird) Kill() {
	if b.stop != nil {
		b.stop()
		b.stop = nil
	}
}

// Log is the log of BIRD's latest run.
func (b *Bird) Log() string {
	out, _ := os.ReadFile(filepath.Join(b.Lab.Dir, fmt.Sprintf("%s-%d.log", b.Name, b.runs)))
	return string(out)
}

// Birdc runs a birdc command against this BIRD.
func (b *Bird) Birdc(args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", b.Sock}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("birdc %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// BirdPath is one path of a BIRD table, as `birdc show route all` shows it.
type BirdPath struct {
	Net      string // "10.244.0.0/26", or for VPN "192.168.77.11:2 10.244.0.0/26"
	Protocol string // the BGP session it came from ("client3")
	From     netip.Addr
	NextHop  netip.Addr
	Large    []string // BGP.large_community, "(64512, 100, 0)" each
}

var (
	// 10.251.0.112/28      unicast [client1 08:32:58.310] * (100) [i]
	// 192.168.77.16:1 192.168.77.16/32 unicast [client4 08:32:58.283] * (100) [i]
	birdNet = regexp.MustCompile(`^(\S+(?: \S+/\d+)?)\s+\S+\s+\[(\S+)`)
	// an alternative path of the same net: the same without the net
	birdAlt       = regexp.MustCompile(`^\s+\S+\s+\[(\S+)`)
	birdLarge     = regexp.MustCompile(`\(\d+, \d+, \d+\)`)
	birdProtocol  = regexp.MustCompile(`^(\S+)\s+BGP\s`)
	birdNeighbour = regexp.MustCompile(`^\s+Neighbor address:\s+(\S+)`)
)

// Neighbours maps the names of BIRD's BGP sessions to the peers'
// addresses.
func (b *Bird) Neighbours() (map[string]netip.Addr, error) {
	out, err := b.Birdc("show", "protocols", "all")
	if err != nil {
		return nil, err
	}
	m := map[string]netip.Addr{}
	var name string
	for _, line := range strings.Split(out, "\n") {
		if p := birdProtocol.FindStringSubmatch(line); p != nil {
			name = p[1]
		} else if n := birdNeighbour.FindStringSubmatch(line); n != nil && name != "" {
			m[name], _ = netip.ParseAddr(n[1])
		}
	}
	return m, nil
}

// Paths lists the paths of a table (master4, reefvpn), each with the
// address of the peer it came from.
func (b *Bird) Paths(table string) ([]BirdPath, error) {
	out, err := b.Birdc("show", "route", "table", table, "all")
	if err != nil {
		return nil, err
	}
	peers, err := b.Neighbours()
	if err != nil {
		return nil, err
	}
	var paths []BirdPath
	var net string
	for _, line := range strings.Split(out, "\n") {
		if m := birdNet.FindStringSubmatch(line); m != nil {
			net = m[1]
			paths = append(paths, BirdPath{Net: net, Protocol: m[2], From: peers[m[2]]})
			continue
		}
		if m := birdAlt.FindStringSubmatch(line); m != nil && net != "" {
			paths = append(paths, BirdPath{Net: net, Protocol: m[1], From: peers[m[1]]})
			continue
		}
		if len(paths) == 0 {
			continue
		}
		p := &paths[len(paths)-1]
		field, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		switch field {
		case "BGP.next_hop":
			if f := strings.Fields(val); len(f) > 0 {
				p.NextHop, _ = netip.ParseAddr(f[0])
			}
		case "BGP.large_community":
			p.Large = birdLarge.FindAllString(val, -1)
		}
	}
	return paths, nil
}
