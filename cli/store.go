package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/daemon"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
)

// ExitStoreDamaged is the exit status of a daemon that stops on a damaged
// store (EX_DATAERR): reef.service's RestartPreventExitStatus= names it,
// so systemd does not restart into the same error every 2 s.
const ExitStoreDamaged = 65

// ExitCode is the exit status for the error a command ended with.
func ExitCode(err error) int {
	if errors.Is(err, store.ErrDamaged) {
		return ExitStoreDamaged
	}
	return 1
}

// runStoreRecover is `reef store recover`: with the daemon stopped, it
// moves a damaged store aside and rebuilds it from the kernel (reef's veths,
// pod routes, blackholes and tunnel addresses), the identity file and what
// the damaged file still holds (store.Recover).
func runStoreRecover(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reef store recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerConfig(fs, "configuration file, for stateDir, nodeName, the node address and the pools (missing: defaults)")
	nf := registerNode(fs)
	incFlag := fs.String("incarnation", "", "this node's incarnation (8 hex digits), when the identity file is lost too")
	bornFlag := fs.Uint("born", 0, "with --incarnation: when it was drawn, in Unix seconds, if known (default: now)")
	force := fs.Bool("force", false, "rebuild the store even if it is not damaged")
	cfg, path, node, err := stoppedNode(fs, args, cf, nf)
	if err != nil {
		return err
	}
	// A sound store rebuilt would be marked recovered for nothing: no new
	// block until the node is drained and started with an empty state dir.
	if err := store.CheckFile(path); err == nil && !*force {
		return fmt.Errorf("store %s is not damaged (it opens and passes bbolt's consistency check, as reef daemon would find it): "+
			"reef store recover is for a store the daemon refuses as damaged (exit status 65), and would mark this one recovered, "+
			"claiming no new block until the node is drained and started with an empty state dir; nothing was changed (--force rebuilds it anyway)", path)
	}
	up := node.Uplink
	up.Address = node.Identity // the identity is what the store keeps
	in := store.RecoverInput{Node: cfg.NodeName, Address: up.Address, Now: time.Now()}
	for _, p := range cfg.Pools {
		in.Pools = append(in.Pools, store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize})
	}
	switch id, ok, err := store.ReadIdentity(path); {
	case *incFlag != "":
		inc, perr := strconv.ParseUint(*incFlag, 16, 32)
		if perr != nil || inc == 0 {
			return fmt.Errorf("flag --incarnation: value %q is not 8 hex digits", *incFlag)
		}
		// Peers order incarnations of one address by it; they keep the one
		// they know for this incarnation, so now is safe when it is lost.
		born := uint32(*bornFlag)
		if born == 0 {
			born = uint32(time.Now().Unix())
		}
		in.Identity = &store.Identity{Node: cfg.NodeName, Address: up.Address, Incarnation: uint32(inc), Born: born}
		in.IdentityFrom = "--incarnation"
	case err != nil:
		fmt.Fprintf(stderr, "reef store recover: %v; reading the incarnation from the damaged file instead\n", err)
	case ok && id.Address.IsValid() && id.Address != up.Address:
		return fmt.Errorf("the identity file %s is of node address %s, this node has %s: set nodeAddress as it was, or give --incarnation", store.IdentityPath(path), id.Address, up.Address)
	case ok:
		in.Identity, in.IdentityFrom = &id, "identity file "+store.IdentityPath(path)
	}
	if err := readKernelForRecovery(&in); err != nil {
		return err
	}
	rep, err := store.Recover(path, in)
	if err != nil {
		return err
	}
	printRecovery(stdout, path, rep)
	return nil
}

// stoppedNode parses the flags of a `reef store` command, which works on
// a node whose daemon is stopped: the config with the node flags applied,
// the store's path, and the node's uplink and identity. It refuses while
// a daemon serves the socket or holds the store.
func stoppedNode(fs *flag.FlagSet, args []string, cf configFlags, nf nodeFlags) (daemon.Config, string, daemon.NodeUplink, error) {
	if err := fs.Parse(args); err != nil {
		return daemon.Config{}, "", daemon.NodeUplink{}, flagError(err)
	}
	if err := noOperands(fs); err != nil {
		return daemon.Config{}, "", daemon.NodeUplink{}, err
	}
	cfg, err := cf.load()
	if err == nil {
		err = nf.apply(&cfg)
	}
	if err == nil {
		err = cfg.Finish()
	}
	if err != nil {
		return daemon.Config{}, "", daemon.NodeUplink{}, err
	}
	path := filepath.Join(cfg.StateDir, "reef.db")
	if err := refuseIfRunning(cfg.Socket, path, "nothing was changed"); err != nil {
		return daemon.Config{}, "", daemon.NodeUplink{}, err
	}
	node, err := daemon.DetectNode(cfg)
	return cfg, path, node, err
}

// storeInitAbout is `reef store init -h`.
const storeInitAbout = `Creates this node's store as a founding voter of a new cluster, with the
cluster's voter list (bgp.voters) recorded, so that it votes for pending
claims from its first start.

Run it once on each voter of a new cluster, before reef first starts there
(systemctl enable --now reef after it). A voter whose store is new without it
(its state dir wiped, or rebuilt by reef store recover with a new incarnation)
votes only for confirmed owners: the votes its earlier incarnation cast are
lost, and a block may have been confirmed with one of them. Never run it on a
voter whose state dir was wiped: take the node out of bgp.voters on every node
instead, wait until reef status on every node shows that list, and add it back
(docs/ipam.md, "Changing the voter list"). It refuses when a store is already
there. Nodes that are not voters, and a node with no peers, need no init.`

// runStoreInit is `reef store init`: on a voter of a new cluster, before
// its first start, it creates the store with the cluster's voter list
// recorded and no restriction (store.Init).
func runStoreInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reef store init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: reef store init [flags]\n\n%s\n\n", storeInitAbout)
		fs.PrintDefaults()
	}
	cf := registerConfig(fs, "configuration file, for stateDir, nodeName, the node address and bgp.voters")
	nf := registerNode(fs)
	cfg, path, node, err := stoppedNode(fs, args, cf, nf)
	if err != nil {
		return err
	}
	mine := []netip.Addr{node.Identity, node.Uplink6.Address}
	if !node.IPv6Only {
		// A voter may be written as its IPv6 address (docs/design.md,
		// "IPv6-only nodes"); a node without one is simply not that voter.
		if up6, err := daemon.DetectUplink6(node.Uplink, cfg.Interface, cfg.NodeAddressV6); err == nil {
			mine = append(mine, up6.Address)
		}
	}
	voters := blockproto.Voters(cfg.BGP.Voters)
	switch {
	case len(voters) == 0:
		return cfg.KeyError("bgp.voters", "not set: this node runs alone (no peers) and needs no init; reef store init is for the voters of a new cluster")
	case !slices.ContainsFunc(voters, func(v netip.Addr) bool { return v.IsValid() && slices.Contains(mine, v) }):
		return cfg.KeyError("bgp.voters", fmt.Sprintf("value %v: this node (%s) is not a voter, and needs no init; reef store init is for the voters of a new cluster (is nodeAddress right?)",
			voters, node.Identity))
	}
	inc, err := store.Init(path, store.Options{Node: cfg.NodeName, Address: node.Identity}, blockproto.VoterList{Voters: voters})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "reef store init: created %s (incarnation %08x) as a founding voter of %v; it votes for pending claims from its first start\n",
		path, inc, voters)
	return nil
}

// readKernelForRecovery fills in what the kernel shows of reef's: every pod
// address (a reef veth with a /32 or /128 route of reef's protocol), every
// own block (a blackhole of reef's protocol) and the tunnel addresses:
// those on vxlan.reef, and those on tunl0 with reef's label (tunl0 is the
// ipip module's; an address without the label is the operator's, or
// another CNI's).
func readKernelForRecovery(in *store.RecoverInput) error {
	k, err := routes.NewKernel()
	if err != nil {
		return err
	}
	defer k.Close()
	st, err := k.Read()
	if err != nil {
		return err
	}
	for dst, r := range st.Routes {
		switch {
		case r.Kind == routes.Blackhole:
			in.Blackholes = append(in.Blackholes, dst)
		case r.Kind == routes.PodRoute && dst.IsSingleIP() && st.Links[r.Dev]:
			kp := store.KernelPod{Veth: r.Dev, IP: dst.Addr()}
			if l, err := netlink.LinkByName(r.Dev); err == nil {
				kp.MTU = l.Attrs().MTU
			}
			in.Pods = append(in.Pods, kp)
		}
	}
	if err := readPodExtras(in); err != nil {
		return err
	}
	for _, t := range []struct {
		dev             string
		handle, handle6 string // "": no address of that family is reef's
		label           string // "": every address on dev is reef's
	}{
		{tunnel.VXLANDevice, daemon.VXLANTunnelHandle(in.Node), daemon.VXLANTunnelHandle6(in.Node), ""},
		{tunnel.IPIPDevice, daemon.IPIPTunnelHandle(in.Node), "", tunnel.IPIPLabel},
	} {
		l, err := netlink.LinkByName(t.dev)
		if err != nil {
			continue // no such device: no tunnel address
		}
		addrs, err := netlink.AddrList(l, unix.AF_UNSPEC)
		if err != nil {
			return fmt.Errorf("list addresses of %s: %w", t.dev, err)
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			ip = ip.Unmap()
			switch {
			case !ok || ip.IsLinkLocalUnicast():
			case t.label != "" && a.Label != t.label:
			case ip.Is4():
				in.Reserved = append(in.Reserved, store.KernelReserved{Handle: t.handle, IP: ip})
			case t.handle6 != "":
				in.Reserved = append(in.Reserved, store.KernelReserved{Handle: t.handle6, IP: ip})
			}
		}
	}
	return nil
}

// readPodExtras adds each pod's hostPorts, from reef's hostPort table
// (table inet reef-hostport, its maps to pod address and port), and its
// bandwidth limits, from tc on its veth.
func readPodExtras(in *store.RecoverInput) error {
	tables, err := nat.NewKernel().Read([]nft.TableID{hostport.TableID})
	if err != nil {
		return fmt.Errorf("read table %s: %w", hostport.TableID, err)
	}
	ports := map[netip.Addr][]store.PortMapping{}
	for _, t := range tables {
		for _, set := range t.Sets {
			if set.DataType == "" {
				continue // the hairpin sets: no mapping in them
			}
			for _, e := range set.Elems {
				pm := store.PortMapping{Protocol: nft.ProtoName(e.Proto), HostPort: e.Port, ContainerPort: e.Value.Port()}
				if e.From.IsValid() {
					pm.HostIP = e.From
				}
				pod := e.Value.Addr()
				ports[pod] = append(ports[pod], pm)
			}
		}
	}
	for i := range in.Pods {
		p := &in.Pods[i]
		p.PortMappings = ports[p.IP]
		if bw, err := tc.ReadBandwidth(p.Veth); err == nil && bw != (tc.Bandwidth{}) {
			p.Bandwidth = &store.Bandwidth{IngressRate: bw.IngressRate, IngressBurst: bw.IngressBurst, EgressRate: bw.EgressRate, EgressBurst: bw.EgressBurst}
		}
	}
	return nil
}

func printRecovery(w io.Writer, path string, rep store.RecoverReport) {
	fmt.Fprintf(w, "reef store recover: %s rebuilt; the damaged file is %s\n", path, rep.MovedTo)
	fmt.Fprintf(w, "incarnation: %08x (born %s), from %s\n", rep.Incarnation, time.Unix(int64(rep.Born), 0).UTC().Format(time.RFC3339), rep.IncarnationFrom)
	if rep.Salvage != "" {
		fmt.Fprintf(w, "read from the damaged file: not all of it (%s)\n", rep.Salvage)
	} else {
		fmt.Fprintln(w, "read from the damaged file: every record")
	}
	fmt.Fprintf(w, "blocks kept (%d):\n", len(rep.Blocks))
	for _, b := range rep.Blocks {
		fmt.Fprintf(w, "  %s  %s, from %s\n", b.CIDR, b.State, b.From)
	}
	var partial []store.RecoveredEndpoint
	pods := 0
	for _, e := range rep.Endpoints {
		if e.Veth != "" {
			pods++
		}
	}
	fmt.Fprintf(w, "addresses kept: %d of pods, %d reserved (tunnel addresses):\n", pods, len(rep.Endpoints)-pods)
	// The columns as wide as their widest entry: a dual-stack pod's two
	// addresses are far wider than one IPv4 address.
	addrs := make([]string, len(rep.Endpoints))
	ipWidth, vethWidth := 15, 16
	for i, e := range rep.Endpoints {
		ips := make([]string, len(e.IPs))
		for j, ip := range e.IPs {
			ips[j] = ip.String()
		}
		addrs[i] = strings.Join(ips, ",")
		ipWidth, vethWidth = max(ipWidth, len(addrs[i])), max(vethWidth, len(e.Veth))
	}
	for i, e := range rep.Endpoints {
		what := "its record read back whole"
		switch {
		case e.Veth == "":
			what = "reserved"
		case !e.Complete:
			what = "container unknown"
			if e.HostPorts > 0 {
				what += fmt.Sprintf(", %d hostPorts from the kernel", e.HostPorts)
			}
			if e.Limited {
				what += ", bandwidth limits from the kernel"
			}
			partial = append(partial, e)
		}
		fmt.Fprintf(w, "  %-*s %-*s %s (%s)\n", ipWidth, addrs[i], vethWidth, e.Veth, e.Handle, what)
	}
	if len(partial) > 0 {
		fmt.Fprintf(w, "not rebuilt: the container ID, pod name and netns of %d pods (listed above as \"container unknown\"); their hostPorts and limits come from the kernel.\n", len(partial))
		fmt.Fprintln(w, "  Their traffic goes on. The pod's DEL finds the address by its veth and frees it; so does the reconcile pass once the veth is gone.")
	}
	for _, d := range rep.Dropped {
		fmt.Fprintf(w, "freed: %s\n", d)
	}
	if rep.Recovered {
		fmt.Fprintln(w, "this incarnation now claims no new block and votes only for confirmed owners; drain the node and start it with an empty state dir to lift that (docs/ipam.md, \"A damaged store\").")
	} else {
		fmt.Fprintln(w, "this is a new incarnation with a new store: if this node is in bgp.voters, it votes only for confirmed owners until it is taken out of bgp.voters on every node and added back (docs/ipam.md, \"Changing the voter list\").")
	}
	fmt.Fprintln(w, "next: systemctl start reef")
}
