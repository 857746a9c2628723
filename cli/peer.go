package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	reefv1 "github.com/reefcni/reef/proto"
)

const peerResetUsage = "usage: reef peer reset ADDRESS [--socket PATH | --config FILE] [-o json]   (ADDRESS: the BGP peer's, as reef status lists it)"

// runPeerReset is `reef peer reset ADDRESS`: a BGP session that its
// prefix limit cut off may connect again (as `birdc enable`, `gobgp
// neighbor X enable`); one that is not cut off is left alone.
func runPeerReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := flag.NewFlagSet("reef peer reset", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	addr, err := parsePeerReset(fs, &c, args)
	if err != nil {
		var usage UsageError
		if errors.As(err, &usage) && !usage.shown {
			fmt.Fprintln(stderr, peerResetUsage)
		}
		return err
	}
	client, ctx, done, err := c.node(ctx)
	if err != nil {
		return err
	}
	defer done()
	rep, err := client.PeerReset(ctx, &reefv1.PeerResetRequest{Address: addr.String()})
	if st, ok := status.FromError(err); ok && err != nil && st.Code() != codes.Unavailable && st.Code() != codes.Unknown && ctx.Err() == nil {
		// The daemon's answer (no such peer, no BGP): its words, not gRPC's.
		return fmt.Errorf("peer reset: %s", st.Message())
	}
	if err != nil {
		return c.callError(ctx, err)
	}
	if c.output == "json" {
		return printJSON(stdout, rep)
	}
	if !rep.GetCutOff() {
		fmt.Fprintf(stdout, "BGP peer %s is not cut off by its prefix limit (state %s): nothing to do\n", rep.GetAddress(), rep.GetState())
		return nil
	}
	fmt.Fprintf(stdout, "BGP peer %s may connect again; its prefix limit still holds: a peer that sends more is cut off again\n", rep.GetAddress())
	return nil
}

// parsePeerReset reads the command line of reef peer reset: one address,
// flags before or after it.
func parsePeerReset(fs *flag.FlagSet, c *clientFlags, args []string) (netip.Addr, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return netip.Addr{}, flagError(err)
	}
	if len(pos) != 1 {
		return netip.Addr{}, UsageError{msg: "reef peer reset takes one address"}
	}
	addr, err := netip.ParseAddr(pos[0])
	if err != nil {
		return netip.Addr{}, UsageError{msg: fmt.Sprintf("reef peer reset: %q is not an IP address (give the peer's address, as reef status lists it)", pos[0])}
	}
	if err := c.validate(); err != nil {
		return netip.Addr{}, err
	}
	return addr, nil
}
