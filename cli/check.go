package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	reefv1 "github.com/reefcni/reef/proto"
)

// clientCommand is the flag set of a command that asks the daemon: its
// usage line ("reef <name> <operands> [flags]" and what it does) and the
// client flags (--socket, -o).
func clientCommand(name, operands, about string, stderr io.Writer) (*flag.FlagSet, *clientFlags) {
	c := &clientFlags{}
	fs := flag.NewFlagSet("reef "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: reef %s %s\n\n%s\n", name, strings.TrimSpace(operands+" [flags]"), about)
		fs.PrintDefaults()
	}
	c.register(fs)
	return fs, c
}

// runRoutes is `reef routes`: the routes (proto reef) and node-side veths
// reef wants, next to the kernel's, each in sync, missing, extra or
// differing. It exits non-zero when something is not in sync: the next
// reconcile pass repairs that, and until then the command says what.
func runRoutes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientCommand("routes", "", "The routes and veths reef wants next to the kernel's; exit status 1 when any is not in sync.", stderr)
	if err := parse(fs, args, c); err != nil {
		return err
	}
	rep, err := ask(ctx, c, func(ctx context.Context, client reefv1.NodeClient) (*reefv1.RoutesReply, error) {
		return client.Routes(ctx, &reefv1.RoutesRequest{})
	})
	if err != nil {
		return err
	}
	off, blocked := 0, 0
	for _, e := range rep.GetEntries() {
		if e.GetState() != "in-sync" {
			off++
		}
		if e.GetState() == "in-the-way" {
			blocked++
		}
	}
	if c.output == "json" {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KIND\tOBJECT\tSTATE\tWANT\tHAVE")
		dash := func(s string) string {
			if s == "" {
				return "-"
			}
			return s
		}
		for _, e := range rep.GetEntries() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.GetKind(), e.GetObject(), e.GetState(), dash(e.GetWant()), dash(e.GetHave()))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case blocked > 0:
		return fmt.Errorf("%d of %d routes and links are not in sync; %d of them have a route of another protocol in their place (HAVE), which reef does not overwrite and no pass repairs: delete it if its destination belongs to reef's pools",
			off, len(rep.GetEntries()), blocked)
	case off > 0:
		return fmt.Errorf("%d of %d routes and links are not in sync (the next reconcile pass repairs them)", off, len(rep.GetEntries()))
	}
	return nil
}

// runIPAMCheck is `reef ipam check`: exit status 0 only when clean.
func runIPAMCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientCommand("ipam check", "", "Compares the store, the kernel and the cluster; exit status 0 only when they agree.", stderr)
	if err := parse(fs, args, c); err != nil {
		return err
	}
	rep, err := ask(ctx, c, func(ctx context.Context, client reefv1.NodeClient) (*reefv1.IPAMCheckReply, error) {
		return client.IPAMCheck(ctx, &reefv1.IPAMCheckRequest{})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		for _, p := range rep.GetProblems() {
			fmt.Fprintf(stdout, "%s %s: %s\n  fix: %s\n", p.GetKind(), p.GetObject(), p.GetDetail(), p.GetFix())
		}
		if len(rep.GetProblems()) == 0 {
			fmt.Fprintf(stdout, "ok: %d endpoints and %d blocks of this node agree with the kernel and the cluster\n", rep.GetEndpoints(), rep.GetBlocks())
		}
	}
	if n := len(rep.GetProblems()); n > 0 {
		return fmt.Errorf("%d problem(s) found", n)
	}
	return nil
}

// runIPAMRelease is `reef ipam release IP|--handle H [--force]`.
func runIPAMRelease(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := clientCommand("ipam release", "IP|--handle HANDLE [--force]", "Frees a leaked allocation, as the runtime's DEL would; refuses one a live sandbox holds unless --force.", stderr)
	handle := fs.String("handle", "", "the allocation's handle (reef ipam show --show-allocations, reef ipam check)")
	force := fs.Bool("force", false, "release even if the pod's sandbox is live")
	var ip string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		ip, args = args[0], args[1:]
	}
	if err := parse(fs, args, c); err != nil {
		return err
	}
	if ip == "" && fs.NArg() > 0 {
		ip = fs.Arg(0)
	}
	if (ip == "") == (*handle == "") {
		fs.Usage()
		return UsageError{msg: "give an IP address or --handle, not both"}
	}
	rep, err := ask(ctx, c, func(ctx context.Context, client reefv1.NodeClient) (*reefv1.IPAMReleaseReply, error) {
		return client.IPAMRelease(ctx, &reefv1.IPAMReleaseRequest{Ip: ip, Handle: *handle, Force: *force})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return printJSON(stdout, rep)
	}
	fmt.Fprintln(stdout, rep.GetWhat())
	return nil
}
