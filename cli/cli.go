// Package cli is the `reef` command line: `reef daemon` and the commands an
// operator runs against a running daemon.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/reefcni/reef/daemon"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/version"
)

// DefaultConfigPath is where `reef daemon` reads its configuration.
const DefaultConfigPath = "/etc/reef/config.yaml"

// UsageError is a bad command line: exit status 2, as with the flag
// package's own ExitOnError, so that a script tells it from the status 1
// of a command that ran and found problems (reef ipam check, reef routes).
// A request for help (-h) is one too, with status 0.
type UsageError struct {
	msg   string
	shown bool  // already printed, by the flag package or with the usage
	err   error // flag.ErrHelp for -h
}

func (e UsageError) Error() string { return e.msg }

func (e UsageError) Unwrap() error { return e.err }

// flagError is the UsageError of a failed FlagSet.Parse, which has printed
// the error (or, for -h, the help) already.
func flagError(err error) UsageError {
	return UsageError{msg: err.Error(), shown: true, err: err}
}

// Report prints the error a command line ended with on stderr, unless it
// was printed already, and returns the exit status: 0 for nil and for -h,
// 2 for a bad command line, ExitStoreDamaged for a damaged store, else 1.
func Report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var usage UsageError
	if !errors.As(err, &usage) || !usage.shown {
		fmt.Fprintln(stderr, "reef:", err)
	}
	if errors.As(err, &usage) {
		return 2
	}
	return ExitCode(err)
}

const usage = `usage: reef <command> [flags]

commands:
  daemon               run the node daemon (systemd starts this)
  status               show this node, its blocks and the daemon's state
  ipam show            show pools and their use (--show-blocks, --show-allocations)
  ipam check           compare the store, the kernel and the cluster (exit 1: problems found)
  ipam release IP      free a leaked allocation (--handle H; --force for a live sandbox)
  node forget NODE     free the blocks of a node gone for good (its address or name)
  peer reset ADDRESS   let a BGP peer cut off by its prefix limit connect again
  policy show [NS/POD] what decides each direction of this node's pods: cluster tiers, NetworkPolicies
  kubeconfig           write /etc/reef/kubeconfig for reef's service account (docs/policy.md)
  routes               the routes and veths reef wants next to the kernel's (exit 1: not in sync)
  diagnose [-o FILE]   one tar.gz for a bug report: status, IPAM, routes, nftables, links, config (no passwords), log
  store recover        rebuild a damaged store from the kernel (daemon stopped; docs/ipam.md)
  store init           once on each voter of a new cluster, before its first start (never after a wipe)
  cleanup [--yes]      remove reef's tables, routes, links and state from this node (package purge)
  version              print the version

Run "reef <command> -h" for the flags of a command.
`

// Run runs one command line.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return UsageError{msg: "no command", shown: true}
	}
	switch args[0] {
	case "daemon":
		return runDaemon(ctx, args[1:], stderr)
	case "status":
		return runStatus(ctx, args[1:], stdout, stderr)
	case "ipam":
		if len(args) >= 2 {
			switch args[1] {
			case "show":
				return runIPAMShow(ctx, args[2:], stdout, stderr)
			case "check":
				return runIPAMCheck(ctx, args[2:], stdout, stderr)
			case "release":
				return runIPAMRelease(ctx, args[2:], stdout, stderr)
			}
		}
		fmt.Fprint(stderr, usage)
		return UsageError{msg: unknownSub(args)}
	case "node":
		if len(args) < 2 || args[1] != "forget" {
			fmt.Fprint(stderr, usage)
			return UsageError{msg: unknownSub(args)}
		}
		return runNodeForget(ctx, args[2:], stdout, stderr)
	case "peer":
		if len(args) < 2 || args[1] != "reset" {
			fmt.Fprint(stderr, usage)
			return UsageError{msg: unknownSub(args)}
		}
		return runPeerReset(ctx, args[2:], stdout, stderr)
	case "policy":
		if len(args) < 2 || args[1] != "show" {
			fmt.Fprint(stderr, usage)
			return UsageError{msg: unknownSub(args)}
		}
		return runPolicyShow(ctx, args[2:], stdout, stderr)
	case "kubeconfig":
		return runKubeconfig(ctx, args[1:], stdout, stderr)
	case "routes":
		return runRoutes(ctx, args[1:], stdout, stderr)
	case "diagnose":
		return runDiagnose(ctx, args[1:], stdout, stderr)
	case "store":
		if len(args) >= 2 {
			switch args[1] {
			case "recover":
				return runStoreRecover(args[2:], stdout, stderr)
			case "init":
				return runStoreInit(args[2:], stdout, stderr)
			}
		}
		fmt.Fprint(stderr, usage)
		return UsageError{msg: unknownSub(args)}
	case "cleanup":
		return runCleanup(args[1:], cleanupStdin, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "reef %s (commit %s), GoBGP %s\n", version.Version, version.Commit, version.GoBGP())
		return nil
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "reef: unknown command %q\n\n%s", args[0], usage)
	return UsageError{msg: "unknown command", shown: true}
}

// unknownSub is the error of "reef ipam bogus" and the like: args[0] is
// the command, args[1] (if any) the sub-command it does not have.
func unknownSub(args []string) string {
	if len(args) < 2 {
		return fmt.Sprintf("%s: give a command, such as %s", args[0], map[string]string{"ipam": "reef ipam show", "node": "reef node forget NODE", "peer": "reef peer reset ADDRESS",
			"policy": "reef policy show", "store": "reef store recover"}[args[0]])
	}
	return fmt.Sprintf("unknown %s command %q", args[0], args[1])
}

// noOperands fails on what a command without operands was given besides
// its flags: the flag package stops at the first word that is not a flag,
// so "reef daemon config.yaml --node-name n1" would otherwise ignore the
// file and the flag after it and run on the defaults.
func noOperands(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return UsageError{msg: fmt.Sprintf("%s: unexpected arguments: %s (flags go before them; a file is given as --config FILE)", fs.Name(), strings.Join(fs.Args(), " "))}
	}
	return nil
}

func runDaemon(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("reef daemon", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerConfig(fs, "configuration file (missing: defaults)")
	nf := registerNode(fs)
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	if err := nf.apply(&cfg); err != nil {
		return err
	}
	if err := cfg.Finish(); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return fmt.Errorf("logLevel: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	defer startProfile(stderr)()
	return daemon.Run(ctx, cfg, log)
}

// configFlags are the flags of the commands that read /etc/reef/config.yaml.
type configFlags struct {
	fs       *flag.FlagSet
	path     *string
	stateDir *string
	socket   *string
}

func registerConfig(fs *flag.FlagSet, usage string) configFlags {
	return configFlags{fs: fs,
		path:     fs.String("config", DefaultConfigPath, usage),
		stateDir: fs.String("state-dir", "", "override stateDir"),
		socket:   fs.String("socket", "", "override socket")}
}

// load reads the configuration with the flags' overrides, after Parse. Only
// an explicitly named file must exist; the default path may be absent (a
// single node on the defaults). The caller applies its own overrides, then
// cfg.Finish.
func (c configFlags) load() (daemon.Config, error) {
	cfg, err := daemon.LoadConfig(*c.path, flagGiven(c.fs, "config"))
	if err != nil {
		return cfg, err
	}
	c.override(&cfg)
	return cfg, nil
}

// override applies --state-dir and --socket.
func (c configFlags) override(cfg *daemon.Config) {
	if *c.stateDir != "" {
		cfg.StateDir = *c.stateDir
	}
	if *c.socket != "" {
		cfg.Socket = *c.socket
	}
}

// flagGiven says whether the command line gave the flag name, after Parse.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	if fs != nil {
		fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	}
	return given
}

// nodeFlags override the node's name and address, for the commands that
// act as this node without a daemon to ask.
type nodeFlags struct{ name, address *string }

func registerNode(fs *flag.FlagSet) nodeFlags {
	return nodeFlags{name: fs.String("node-name", "", "override nodeName"), address: fs.String("node-address", "", "override nodeAddress")}
}

func (n nodeFlags) apply(cfg *daemon.Config) error {
	if *n.name != "" {
		cfg.NodeName = *n.name
	}
	if *n.address != "" {
		a, err := netip.ParseAddr(*n.address)
		if err != nil {
			return fmt.Errorf("flag --node-address: value %q is not an IP address", *n.address)
		}
		cfg.NodeAddress = a
	}
	return nil
}

// client flags shared by the commands that talk to the daemon.
type clientFlags struct {
	fs     *flag.FlagSet
	socket string
	config string
	output string
	// dialErr is the last connect to the socket's failure (nil: it
	// connected), which gRPC's error carries only as text.
	dialErr atomic.Pointer[error]
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.socket, "socket", "", "daemon socket (default: the config file's socket, else /run/reef/reef.sock)")
	fs.StringVar(&c.config, "config", DefaultConfigPath, "configuration file, for its socket (missing: defaults)")
	fs.StringVar(&c.output, "o", "table", "output: table or json")
}

// resolveSocket sets socket, when no --socket was given, to the config
// file's (only its paths are read: daemon.LoadConfigPaths), where the
// daemon serves it. A config file named by --config must be read; the
// default one, when it cannot be (absent, not readable by this user),
// leaves the default socket.
func (c *clientFlags) resolveSocket() error {
	if c.socket != "" {
		return nil
	}
	explicit := flagGiven(c.fs, "config")
	cfg, err := daemon.LoadConfigPaths(c.config, explicit)
	switch {
	case err != nil && explicit:
		return err
	case err != nil:
		cfg = daemon.DefaultConfig()
	}
	c.socket = cfg.Socket
	return nil
}

func (c *clientFlags) dial() (*grpc.ClientConn, error) {
	if err := c.resolveSocket(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(c.socket); err != nil {
		return nil, socketError(c.socket, err)
	}
	// The dialer opens the socket; the target is only a name. "unix://"
	// and the path read a relative --socket's first directory as the
	// URL's authority, which gRPC refuses ("invalid (non-empty)
	// authority").
	return grpc.NewClient("passthrough:///reef", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, "unix", c.socket)
			c.dialErr.Store(&err)
			return conn, err
		}))
}

// callTimeout bounds a call to the daemon (tests shorten it).
var callTimeout = 10 * time.Second

// socketError says why the daemon's socket cannot be used, and what to do:
// no socket or no daemon behind it (a crash leaves the file), or a user
// the socket does not admit.
func socketError(socket string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("reef daemon socket %s: %w: it admits root only; run reef as root (sudo)", socket, err)
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("reef daemon socket %s: %w: no daemon serves it (is the daemon running? `systemctl status reef`, `journalctl -u reef`)", socket, err)
	}
	return fmt.Errorf("reef daemon socket %s: %w (is the daemon running? `systemctl status reef`)", socket, err)
}

// callError is the error of a failed call under ctx: socketError when gRPC
// could not connect to the socket, a daemon that did not answer before
// ctx's deadline said so, else err naming the socket.
func (c *clientFlags) callError(ctx context.Context, err error) error {
	switch {
	case status.Code(err) == codes.Unavailable:
		if d := c.dialErr.Load(); d != nil && *d != nil {
			return socketError(c.socket, *d)
		}
	case errors.Is(ctx.Err(), context.DeadlineExceeded): // the call's own deadline, not one inside the daemon
		return fmt.Errorf("reef daemon at %s did not answer within %s: it is stuck or busy (`systemctl status reef`, `journalctl -u reef`): %w", c.socket, callTimeout, err)
	}
	return fmt.Errorf("reef daemon at %s: %w", c.socket, err)
}

// node connects to the daemon's Node API; done closes the connection and
// the call's deadline.
func (c *clientFlags) node(ctx context.Context) (client reefv1.NodeClient, callCtx context.Context, done func(), err error) {
	conn, err := c.dial()
	if err != nil {
		return nil, nil, nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	return reefv1.NewNodeClient(conn), callCtx, func() { cancel(); conn.Close() }, nil
}

// ask dials the daemon at c's socket and makes one call, under the
// node's call timeout; a failed call's error names the socket.
func ask[Rep any](ctx context.Context, c *clientFlags, call func(ctx context.Context, client reefv1.NodeClient) (Rep, error)) (Rep, error) {
	var none Rep
	client, ctx, done, err := c.node(ctx)
	if err != nil {
		return none, err
	}
	defer done()
	rep, err := call(ctx, client)
	if err != nil {
		return none, c.callError(ctx, err)
	}
	return rep, nil
}

func (c *clientFlags) validate() error {
	if c.output != "table" && c.output != "json" {
		return UsageError{msg: fmt.Sprintf("-o %q: use table or json", c.output)}
	}
	return nil
}

func printJSON(w io.Writer, m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	var pretty any // re-indent: protojson's spacing is deliberately unstable
	if err := json.Unmarshal(b, &pretty); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(pretty)
}

func parse(fs *flag.FlagSet, args []string, c *clientFlags) error {
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	return c.validate()
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := flag.NewFlagSet("reef status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	if err := parse(fs, args, &c); err != nil {
		return err
	}
	st, err := ask(ctx, &c, func(ctx context.Context, client reefv1.NodeClient) (*reefv1.StatusReply, error) {
		return client.Status(ctx, &reefv1.StatusRequest{})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return printJSON(stdout, st)
	}
	state := "starting"
	switch {
	case st.GetReady() && st.GetNotReady() != "":
		state = "running but not ready: " + st.GetNotReady()
	case st.GetReady():
		state = "ready"
	}
	fmt.Fprintf(stdout, "reef %s is %s\n", st.GetVersion(), state)
	addrs := st.GetNodeAddress()
	if a6 := st.GetNodeAddressV6(); a6 != "" && addrs != "" {
		addrs += ", " + a6
	} else if a6 != "" {
		// An IPv6-only node: known in the block protocol by its router ID.
		addrs = a6 + " (identity " + st.GetIdentity() + ")"
	}
	iface := st.GetInterface()
	if i6 := st.GetInterface6(); i6 != "" {
		iface += ", IPv6 " + i6
	}
	fmt.Fprintf(stdout, "node:       %s  %s on %s (pod MTU %d)\n", st.GetNodeName(), addrs, iface, st.GetMtu())
	if v := st.GetVxlan(); v != "" {
		fmt.Fprintf(stdout, "vxlan:      over %s\n", v)
	}
	for _, m := range st.GetVxlanNotBuilt() {
		fmt.Fprintf(stdout, "NOT BUILT:  VXLAN to %s: its blocks get no route\n", m)
	}
	fmt.Fprintf(stdout, "up since:   %s\n", time.Unix(st.GetStartedUnix(), 0).UTC().Format(time.RFC3339))
	fmt.Fprintf(stdout, "store:      %s\n", st.GetStorePath())
	for _, w := range st.GetRuntimeWarnings() {
		fmt.Fprintf(stdout, "WARNING:    %s\n", w)
	}
	fmt.Fprintf(stdout, "endpoints:  %d\n", st.GetEndpoints())
	for _, hp := range st.GetHostPorts() {
		fmt.Fprintf(stdout, "hostPort:   %s\n", hp)
	}
	for _, bw := range st.GetBandwidth() {
		fmt.Fprintf(stdout, "bandwidth:  %s\n", bw)
	}
	if st.GetLastReconcileUnix() > 0 {
		res := "ok"
		if st.GetLastReconcileError() != "" {
			res = "error: " + st.GetLastReconcileError()
		}
		fmt.Fprintf(stdout, "reconcile:  %s ago, %s\n", time.Since(time.Unix(st.GetLastReconcileUnix(), 0)).Round(time.Second), res)
	}
	printPolicy(stdout, st)
	printLBIPAM(stdout, st)
	fmt.Fprintf(stdout, "\nblocks of this node:\n")
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BLOCK\tPOOL\tSTATE\tUSED")
	for _, b := range st.GetBlocks() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\n", b.GetCidr(), b.GetPool(), b.GetState(), b.GetUsed(), b.GetSize())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	printPeers(stdout, st)
	return nil
}

func runIPAMShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := flag.NewFlagSet("reef ipam show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	showBlocks := fs.Bool("show-blocks", false, "list every block with owner and use")
	showAllocs := fs.Bool("show-allocations", false, "list every address held on this node, with its pod")
	if err := parse(fs, args, &c); err != nil {
		return err
	}
	rep, err := ask(ctx, &c, func(ctx context.Context, client reefv1.NodeClient) (*reefv1.IPAMReply, error) {
		return client.IPAM(ctx, &reefv1.IPAMRequest{ShowBlocks: *showBlocks, ShowAllocations: *showAllocs})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return printJSON(stdout, rep)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tBLOCK SIZE\tBLOCKS OWNED\tBLOCKS IN CLUSTER\tIPS IN USE\tIPS TOTAL")
	for _, p := range rep.GetPools() {
		cidr := p.GetCidr()
		if p.GetRetired() {
			cidr += " (retired)"
		}
		fmt.Fprintf(tw, "%s\t/%d\t%d\t%d of %d\t%d (%.1f%%)\t%d\n", cidr, p.GetBlockSize(), p.GetBlocksOwned(), p.GetBlocksKnown(), p.GetBlocksTotal(),
			p.GetUsed(), 100*float64(p.GetUsed())/float64(max(p.GetSize(), 1)), p.GetSize())
	}
	if *showBlocks {
		fmt.Fprintln(tw, "\nBLOCK\tOWNER\tSTATE\tIPS IN USE\tCLAIMED")
		for _, b := range rep.GetBlocks() {
			used := fmt.Sprintf("%d of %d", b.GetUsed(), b.GetSize())
			if strings.HasPrefix(b.GetState(), "remote") {
				used = "-" // counted by its owner
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.GetCidr(), ownerName(b), b.GetState(), used,
				time.Unix(b.GetClaimedUnix(), 0).UTC().Format(time.RFC3339))
		}
	}
	if *showAllocs {
		fmt.Fprintln(tw, "\nIP\tPOD\tCONTAINER\tVETH\tSTATE\tHOSTPORTS\tBANDWIDTH")
		for _, a := range rep.GetAllocations() {
			ports, bw := strings.Join(a.GetHostPorts(), ", "), a.GetBandwidth()
			if ports == "" {
				ports = "-"
			}
			if bw == "" {
				bw = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%.12s\t%s\t%s\t%s\t%s\n", a.GetIp(), a.GetPod(), a.GetContainerId(), a.GetHostVeth(), a.GetState(), ports, bw)
		}
	}
	return tw.Flush()
}
