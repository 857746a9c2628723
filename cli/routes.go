package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	reefv1 "github.com/reefcni/reef/proto"
)

// runRoutes is `reef routes`: the routes (proto reef) and node-side veths
// reef wants, next to the kernel's, each in sync, missing, extra or
// differing. It exits non-zero when something is not in sync: the next
// reconcile pass repairs that, and until then the command says what.
func runRoutes(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := flag.NewFlagSet("reef routes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reef routes [flags]\n\nThe routes and veths reef wants next to the kernel's; exit status 1 when any is not in sync.")
		fs.PrintDefaults()
	}
	c.register(fs)
	if err := parse(fs, args, &c); err != nil {
		return err
	}
	client, ctx, done, err := c.node(ctx)
	if err != nil {
		return err
	}
	defer done()
	rep, err := client.Routes(ctx, &reefv1.RoutesRequest{})
	if err != nil {
		return fmt.Errorf("reef daemon at %s: %w", c.socket, err)
	}
	off := 0
	for _, e := range rep.GetEntries() {
		if e.GetState() != "in-sync" {
			off++
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
	if off > 0 {
		return fmt.Errorf("%d of %d routes and links are not in sync (the next reconcile pass repairs them)", off, len(rep.GetEntries()))
	}
	return nil
}
