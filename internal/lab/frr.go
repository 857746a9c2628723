package lab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// The FRR daemons (Debian's frr) and its shell.
const (
	FRRDir = "/usr/lib/frr"
	Vtysh  = "/usr/bin/vtysh"
)

// FRRConfig is the FRR configuration of a route reflector for reef
// (docs/bgp.md shows it, and a test checks that the docs show exactly
// this): router ID and cluster ID = its own address, iBGP in asn, the
// clients accepted from the range clients into the peer group reef, every
// family of reef's sessions (IPv4 unicast, IPv4 VPN, IPv6 VPN) reflected
// with the paths' large communities and next hops as they came, a prefix
// limit on each. hold is the BGP hold time
// (keepalive: a third of it).
func FRRConfig(self netip.Addr, asn uint32, clients netip.Prefix, hold time.Duration) string {
	return fmt.Sprintf(`! An FRR route reflector for reef (docs/bgp.md).
frr defaults traditional
hostname reef-rr-%[1]s
log stdout informational
!
router bgp %[2]d
 bgp router-id %[1]s
 bgp cluster-id %[1]s
 no bgp default ipv4-unicast
 bgp graceful-restart
 neighbor reef peer-group
 neighbor reef remote-as %[2]d
 neighbor reef timers %[4]d %[3]d
 bgp listen range %[5]s peer-group reef
 !
 address-family ipv4 unicast
  neighbor reef activate
  neighbor reef route-reflector-client
  neighbor reef send-community large
  neighbor reef maximum-prefix 16384
 exit-address-family
 !
 address-family ipv4 vpn
  neighbor reef activate
  neighbor reef route-reflector-client
  neighbor reef send-community large
  neighbor reef maximum-prefix 131072
 exit-address-family
 !
 address-family ipv6 vpn
  neighbor reef activate
  neighbor reef route-reflector-client
  neighbor reef send-community large
  neighbor reef maximum-prefix 131072
 exit-address-family
exit
!
`, self, asn, int(hold/time.Second), max(1, int(hold/time.Second)/3), clients)
}

// FRR is an FRR route reflector (zebra and bgpd) in a namespace of its own
// on the underlay.
type FRR struct {
	Lab     *Lab
	Name    string
	Netns   string
	Address netip.Addr
	Dir     string // config, vty sockets, pid files
	Conf    string
	// BFDConf, if set, is bfdd's configuration (its bfd section): bfdd
	// runs too, reading only this file, since each daemon reads its -f file
	// whole and a section bfdd does not know (route-map ... exit) would
	// end its configuration mode early.
	BFDConf string
	stops   []func()
	runs    int
}

// AddFRR creates a namespace on the underlay at address addr and writes
// the configuration of an FRR route reflector for the clients in clients,
// checked with vtysh --dryrun; Start runs it.
func (l *Lab) AddFRR(name string, addr netip.Addr, clients netip.Prefix) (*FRR, error) {
	return l.AddFRRAt(name, addr, addr, clients)
}

// AddFRRAt is AddFRR for a reflector with router ID id at addr, which may
// be an IPv6 address on Underlay6 (for IPv6-only clients); it then waits
// until the namespace's link-local address is valid, which bgpd needs
// (Lab.WaitLinkLocal).
func (l *Lab) AddFRRAt(name string, id, addr netip.Addr, clients netip.Prefix) (*FRR, error) {
	if _, err := os.Stat(filepath.Join(FRRDir, "bgpd")); err != nil {
		return nil, fmt.Errorf("lab: FRR not installed (apt-get install frr): %w", err)
	}
	ns, err := l.AddHost(name, addr)
	if err != nil {
		return nil, err
	}
	f := &FRR{Lab: l, Name: name, Netns: ns, Address: addr, Dir: filepath.Join(l.Dir, name)}
	f.Conf = filepath.Join(f.Dir, "frr.conf")
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(f.Conf, []byte(FRRConfig(id, 64512, clients, 3*time.Second)), 0o644); err != nil {
		return nil, err
	}
	if addr.Is6() {
		if err := l.WaitLinkLocal(ns); err != nil {
			return nil, err
		}
	}
	if out, err := exec.Command(Vtysh, "--dryrun", "-f", f.Conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("vtysh --dryrun -f %s: %v: %s", f.Conf, err, out)
	}
	return f, nil
}

// Start runs zebra and bgpd in the foreground in the FRR's namespace
// (Lab.Close kills them) and waits until bgpd answers vtysh.
func (f *FRR) Start() error {
	if f.stops != nil {
		return fmt.Errorf("%s: FRR already running", f.Name)
	}
	f.runs++
	zsock := filepath.Join(f.Dir, "zserv.api")
	common := []string{"-f", f.Conf, "--vty_socket", f.Dir, "-z", zsock, "-u", "root", "-g", "frrvty", "-P", "0"} // root, in the group FRR wants of vty users
	for _, d := range f.daemons() {
		args := append([]string{filepath.Join(FRRDir, d), "-i", filepath.Join(f.Dir, d+".pid")}, common...)
		if d == "bfdd" {
			args = append(args, "--bfdctl", filepath.Join(f.Dir, "bfdd.sock"))
			args[slices.Index(args, f.Conf)] = f.BFDConf
		}
		stop, err := f.Lab.Spawn(f.Netns, fmt.Sprintf("%s-%s-%d.log", f.Name, d, f.runs), args...)
		if err != nil {
			f.Kill()
			return err
		}
		f.stops = append(f.stops, stop)
		if d != "zebra" {
			continue
		}
		if err := poll.Until(10*time.Second, func() error { _, err := os.Stat(zsock); return err }); err != nil {
			f.Kill()
			return fmt.Errorf("%s: zebra made no socket: %v\n%s", f.Name, err, f.Log())
		}
	}
	if err := poll.Until(10*time.Second, func() error { _, err := f.Vtysh("show bgp summary"); return err }); err != nil {
		return fmt.Errorf("%s: bgpd does not answer vtysh: %v\n%s", f.Name, err, f.Log())
	}
	return nil
}

// Kill kills bgpd and zebra (SIGKILL: sessions end without a
// NOTIFICATION).
func (f *FRR) Kill() {
	for i := len(f.stops) - 1; i >= 0; i-- {
		f.stops[i]()
	}
	f.stops = nil
	for _, d := range f.daemons() {
		os.Remove(filepath.Join(f.Dir, d+".pid"))
		os.Remove(filepath.Join(f.Dir, d+".vty"))
	}
	os.Remove(filepath.Join(f.Dir, "zserv.api"))
}

// daemons are the FRR daemons the lab runs, in start order.
func (f *FRR) daemons() []string {
	if f.BFDConf != "" {
		return []string{"zebra", "bgpd", "bfdd"}
	}
	return []string{"zebra", "bgpd"}
}

// Log is the log of FRR's latest run, zebra's then bgpd's (then bfdd's).
func (f *FRR) Log() string {
	var b strings.Builder
	for _, d := range f.daemons() {
		out, _ := os.ReadFile(filepath.Join(f.Lab.Dir, fmt.Sprintf("%s-%s-%d.log", f.Name, d, f.runs)))
		fmt.Fprintf(&b, "--- %s\n%s", d, out)
	}
	return b.String()
}

// Vtysh runs one vtysh command against this FRR.
func (f *FRR) Vtysh(cmd string) (string, error) {
	out, err := exec.Command(Vtysh, "--vty_socket", f.Dir, "-c", cmd).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("vtysh -c %q: %v: %s", cmd, err, out)
	}
	return string(out), nil
}
