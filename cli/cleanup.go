package cli

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/daemon"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/tunnel"
)

// cleanupStdin is where `reef cleanup` reads its confirmation (tests
// replace it).
var cleanupStdin io.Reader = os.Stdin

// vxlanDevice is the VXLAN device of the multi-node dataplane.
const vxlanDevice = "vxlan.reef"

// pendingFile matches the files of the queue of DELs (cniserver/pendingdel):
// entries and their temporary files.
var pendingFile = regexp.MustCompile(`^([0-9a-f]{32}\.json|\.tmp-.*)$`)

// stateFile matches the store's other files in the state dir: the identity
// file and its temporary, and what `reef store recover` leaves.
var stateFile = regexp.MustCompile(`^(identity\.json|\.identity-.*|reef\.db\.damaged-.*|reef\.db\.recovering)$`)

// leftovers is what `reef cleanup` found of reef's on this node.
type leftovers struct {
	tables  []nft.TableID
	links   []netlink.Link
	routes  []netlink.Route
	ipip    []netlink.Addr // reef's addresses on tunl0 (label tunl0:reef)
	db      string         // the store, if present
	state   []string       // the store's other files (identity, damaged copies)
	pending []string       // files of queued DELs
	dirs    []string       // pending-delete dir, state dir: when they hold nothing else
	socket  string         // a socket file no daemon serves
	kept    []string       // dirs that hold files not reef's: left, with reef's files removed
}

func (l *leftovers) empty() bool {
	return len(l.tables) == 0 && len(l.links) == 0 && len(l.routes) == 0 && len(l.ipip) == 0 && l.db == "" && len(l.state) == 0 && len(l.pending) == 0 &&
		len(l.dirs) == 0 && l.socket == ""
}

// runCleanup is `reef cleanup`, for a package purge: it removes what reef
// put on this node: its nftables tables (named "reef", any family), routes
// with its protocol (238) in any table, links named reef* and vxlan.reef,
// its addresses on tunl0 (labelled tunl0:reef; tunl0 is the ipip
// module's and stays), its store and queued DELs, and then the state and
// queue dirs if nothing else is in them. It touches nothing without one of those marks. It
// refuses while a daemon serves the socket or holds the store: a running
// daemon would put it all back.
func runCleanup(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reef cleanup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerConfig(fs, "configuration file, for stateDir, socket and pendingDeleteDir (missing: defaults)")
	yes := fs.Bool("yes", false, "remove without asking")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	cfg, err := cf.load()
	if err == nil {
		err = cfg.Finish()
	}
	if err != nil {
		// Cleanup needs only the paths: a config the daemon refuses for
		// another key must not keep reef's state on the node (an rpm
		// erase runs cleanup with the config still there).
		problems := err
		var unread error
		cfg, unread, err = cf.loadPaths()
		switch {
		case err != nil && strings.Contains(err.Error(), problems.Error()):
			return err // bad YAML: the same error twice
		case err != nil:
			return errors.Join(problems, err)
		case unread != nil:
			fmt.Fprintf(stderr, "%v\nreef cleanup: cannot read this config; cleanup uses --state-dir %s and --socket %s, and %s for the queued DELs\n", unread, cfg.StateDir, cfg.Socket, cfg.PendingDeleteDir)
		default:
			fmt.Fprintf(stderr, "%v\nreef cleanup: the daemon would refuse this config; cleanup reads only its stateDir, socket and pendingDeleteDir\n", problems)
		}
	}

	if err := refuseIfRunning(cfg.Socket, filepath.Join(cfg.StateDir, "reef.db"), "nothing was removed"); err != nil {
		return err
	}
	found, err := findLeftovers(cfg)
	if err != nil {
		return err
	}
	if found.empty() {
		fmt.Fprintln(stdout, "reef cleanup: nothing of reef's found on this node")
		return nil
	}
	fmt.Fprintln(stdout, "reef cleanup will remove:")
	found.print(stdout)
	if !*yes {
		fmt.Fprint(stdout, "Pods on this node lose their network. Remove all of this? [y/N] ")
		line, _ := bufio.NewReader(stdin).ReadString('\n')
		fmt.Fprintln(stdout)
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			return errors.New("cleanup not confirmed: nothing was removed (reef cleanup --yes skips the question)")
		}
	}
	return found.remove(stdout)
}

// refuseIfRunning fails when a daemon answers on the socket or holds the
// store's lock; outcome ends the message ("nothing was removed").
func refuseIfRunning(socket, db, outcome string) error {
	if c, err := net.DialTimeout("unix", socket, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("a reef daemon is serving %s: stop it first (systemctl stop reef); %s", socket, outcome)
	}
	f, err := os.Open(db)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", db, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("%s is locked by a running reef daemon: stop it first (systemctl stop reef); %s", db, outcome)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return nil
}

func isReefLink(name string) bool {
	return name == vxlanDevice || (strings.HasPrefix(name, routes.HostVethPrefix) && len(name) > len(routes.HostVethPrefix))
}

func findLeftovers(cfg daemon.Config) (*leftovers, error) {
	l := &leftovers{}
	var err error
	if l.tables, err = nat.NewKernel().OwnTables(); err != nil {
		return nil, err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	for _, k := range links {
		if isReefLink(k.Attrs().Name) {
			l.links = append(l.links, k)
		}
	}
	l.routes, err = netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Protocol: routes.Protocol, Table: unix.RT_TABLE_UNSPEC},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes proto %d: %w", routes.Protocol, err)
	}
	if l.ipip, err = ipipAddrs(); err != nil {
		return nil, err
	}
	if db := filepath.Join(cfg.StateDir, "reef.db"); fileExists(db) {
		l.db = db
	}
	if entries, err := os.ReadDir(cfg.StateDir); err == nil {
		for _, e := range entries {
			if !e.IsDir() && stateFile.MatchString(e.Name()) {
				l.state = append(l.state, filepath.Join(cfg.StateDir, e.Name()))
			}
		}
	}
	queues := []string{cfg.PendingDeleteDir, daemon.DeferredDir(cfg)}
	for _, dir := range queues {
		if entries, err := os.ReadDir(dir); err == nil {
			for _, e := range entries {
				if !e.IsDir() && pendingFile.MatchString(e.Name()) {
					l.pending = append(l.pending, filepath.Join(dir, e.Name()))
				}
			}
		}
		// The dirs go only if nothing but reef's is in them.
		l.checkDir(dir, func(e os.DirEntry) bool { return !e.IsDir() && pendingFile.MatchString(e.Name()) })
	}
	l.checkDir(cfg.StateDir, func(e os.DirEntry) bool {
		p := filepath.Join(cfg.StateDir, e.Name())
		return p == l.db || slices.Contains(l.state, p) || (p == cfg.PendingDeleteDir && slices.Contains(l.dirs, p))
	})
	if fi, err := os.Lstat(cfg.Socket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		l.socket = cfg.Socket
	}
	return l, nil
}

// ipipAddrs are reef's tunnel addresses on tunl0: those with its label
// (tunnel.IPIPLabel). The device and its other addresses are not reef's.
func ipipAddrs() ([]netlink.Addr, error) {
	l, err := netlink.LinkByName(tunnel.IPIPDevice)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil, nil // no ipip module: no tunl0
	}
	if err != nil {
		return nil, fmt.Errorf("find %s: %w", tunnel.IPIPDevice, err)
	}
	addrs, err := netlinksafe.AddrList(l, unix.AF_INET)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", tunnel.IPIPDevice, err)
	}
	var out []netlink.Addr
	for _, a := range addrs {
		if a.Label == tunnel.IPIPLabel {
			out = append(out, a)
		}
	}
	return out, nil
}

// checkDir adds dir to the dirs to remove if it holds nothing but entries
// ours says are reef's, and to those kept if it holds anything else.
func (l *leftovers) checkDir(dir string, ours func(os.DirEntry) bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !ours(e) {
			l.kept = append(l.kept, dir)
			return
		}
	}
	l.dirs = append(l.dirs, dir)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func routeString(r netlink.Route) string {
	s := "default"
	if r.Dst != nil {
		s = r.Dst.String()
	}
	if r.Type == unix.RTN_BLACKHOLE {
		s = "blackhole " + s
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if r.LinkIndex > 0 {
		if k, err := netlink.LinkByIndex(r.LinkIndex); err == nil {
			s += " dev " + k.Attrs().Name
		}
	}
	if r.Table != unix.RT_TABLE_MAIN {
		s += fmt.Sprintf(" table %d", r.Table)
	}
	return s
}

func (l *leftovers) print(w io.Writer) {
	for _, t := range l.tables {
		fmt.Fprintf(w, "  nftables table %s\n", t)
	}
	if len(l.links) > 0 {
		var names []string
		for _, k := range l.links {
			names = append(names, k.Attrs().Name)
		}
		fmt.Fprintf(w, "  %d link(s): %s\n", len(l.links), strings.Join(names, " "))
	}
	if len(l.routes) > 0 {
		fmt.Fprintf(w, "  %d route(s) with protocol %d (reef), those of the links above included:\n", len(l.routes), routes.Protocol)
		for i, r := range l.routes {
			if i == 10 {
				fmt.Fprintf(w, "    … and %d more\n", len(l.routes)-10)
				break
			}
			fmt.Fprintf(w, "    %s\n", routeString(r))
		}
	}
	for _, a := range l.ipip {
		fmt.Fprintf(w, "  the address %s on %s (label %s)\n", a.IPNet, tunnel.IPIPDevice, a.Label)
	}
	if l.db != "" {
		fmt.Fprintf(w, "  the store %s (every pod address of this node)\n", l.db)
	}
	for _, f := range l.state {
		fmt.Fprintf(w, "  the store's file %s\n", f)
	}
	if len(l.pending) > 0 {
		fmt.Fprintf(w, "  %d queued DEL(s) in %s\n", len(l.pending), filepath.Dir(l.pending[0]))
	}
	for _, d := range l.dirs {
		fmt.Fprintf(w, "  the directory %s\n", d)
	}
	if l.socket != "" {
		fmt.Fprintf(w, "  the socket file %s (no daemon serves it)\n", l.socket)
	}
	for _, d := range l.kept {
		fmt.Fprintf(w, "and will keep the directory %s: it holds files that are not reef's\n", d)
	}
}

// remove goes on after a failure, so that one stuck object does not keep
// the rest, and returns every failure.
func (l *leftovers) remove(w io.Writer) error {
	var errs []error
	// Links first: a veth takes its pod route with it.
	for _, k := range l.links {
		if err := netlink.LinkDel(k); err != nil && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete link %s: %w", k.Attrs().Name, err))
			continue
		}
		fmt.Fprintf(w, "removed link %s\n", k.Attrs().Name)
	}
	n := 0
	for _, r := range l.routes {
		r := r
		if err := netlink.RouteDel(&r); err != nil && !errors.Is(err, unix.ESRCH) && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("delete route %s: %w", routeString(r), err))
			continue
		}
		n++
	}
	if len(l.routes) > 0 {
		fmt.Fprintf(w, "removed %d route(s) with protocol %d\n", n, routes.Protocol)
	}
	if len(l.ipip) > 0 {
		if k, err := netlink.LinkByName(tunnel.IPIPDevice); err != nil {
			errs = append(errs, fmt.Errorf("find %s: %w", tunnel.IPIPDevice, err))
		} else {
			for _, a := range l.ipip {
				// With the label, the kernel deletes the address only if
				// it is still reef's.
				if err := netlink.AddrDel(k, &a); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
					errs = append(errs, fmt.Errorf("delete %s from %s: %w", a.IPNet, tunnel.IPIPDevice, err))
					continue
				}
				fmt.Fprintf(w, "removed address %s from %s\n", a.IPNet, tunnel.IPIPDevice)
			}
		}
	}
	if err := nat.NewKernel().DeleteTables(l.tables); err != nil {
		errs = append(errs, err)
	} else {
		for _, t := range l.tables {
			fmt.Fprintf(w, "removed nftables table %s\n", t)
		}
	}
	files := append(append([]string(nil), l.pending...), l.state...)
	if l.db != "" {
		files = append(files, l.db)
	}
	if l.socket != "" {
		files = append(files, l.socket)
	}
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(w, "removed %s\n", f)
	}
	for _, d := range l.dirs {
		switch err := os.Remove(d); {
		case err == nil || errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(w, "removed %s\n", d)
		case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST):
			fmt.Fprintf(w, "kept %s: something not reef's appeared in it\n", d)
		default:
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// loadPaths is load for `reef cleanup` when the config has problems:
// only its paths (daemon.LoadConfigPaths), with the flags' overrides,
// finished.
//
// A file whose paths cannot be read (bad YAML, a path not absolute) is
// passed over when --state-dir and --socket both say where the state is:
// the defaults with those, and the error as a warning. Otherwise the error
// says to fix the file or give them.
func (c configFlags) loadPaths() (cfg daemon.Config, warning, err error) {
	cfg, err = daemon.LoadConfigPaths(*c.path, flagGiven(c.fs, "config"))
	switch {
	case err != nil && *c.stateDir != "" && *c.socket != "":
		cfg, warning = daemon.DefaultConfig(), err
	case err != nil:
		d := daemon.DefaultConfig()
		return cfg, nil, fmt.Errorf("%w\nreef cleanup cannot tell from it where reef's state is: fix the file, or give the daemon's paths with --state-dir DIR --socket PATH (by default %s and %s)", err, d.StateDir, d.Socket)
	}
	c.override(&cfg)
	if cfg.PendingDeleteDir == "" && filepath.IsAbs(cfg.StateDir) {
		cfg.PendingDeleteDir = filepath.Join(cfg.StateDir, "pending-del")
	}
	for _, p := range []struct{ flag, key, value string }{{"state-dir", "stateDir", cfg.StateDir}, {"socket", "socket", cfg.Socket}} {
		switch {
		case filepath.IsAbs(p.value):
		case flagGiven(c.fs, p.flag):
			return cfg, nil, fmt.Errorf("--%s %q: reef cleanup wants the daemon's absolute path", p.flag, p.value)
		default:
			return cfg, nil, fmt.Errorf("config %s: %s %q must be an absolute path", *c.path, p.key, p.value)
		}
	}
	return cfg, warning, nil
}
