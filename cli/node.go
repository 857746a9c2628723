package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reefcni/reef/bgp"
	reefv1 "github.com/reefcni/reef/proto"
)

// ownerName shows a block's owner as "name (address)" when the name is
// known, else the address; the address is followed by the owner's IPv6
// address when its record gave one ("name (address, IPv6 address)").
func ownerName(b *reefv1.Block) string {
	addr := b.GetOwnerAddress()
	if a6 := b.GetOwnerAddressV6(); a6 != "" && addr != "" {
		addr += ", " + a6
	}
	switch {
	case b.GetOwner() != "" && addr != "":
		return b.GetOwner() + " (" + addr + ")"
	case b.GetOwner() != "":
		return b.GetOwner()
	}
	return addr
}

// printPeers prints the BGP neighbours as calicoctl node status does.
func printPeers(w io.Writer, st *reefv1.StatusReply) {
	printVoters(w, st)
	fmt.Fprintln(w, "\nBGP peers:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	// TYPE is the peer's part (mesh, reflector, client: docs/bgp.md), FROM
	// how the session came about (bgp.peers or bgp.routeReflectors, or
	// accepted through bgp.peerPrefixes).
	fmt.Fprintln(tw, "PEER\tHOSTNAME\tTYPE\tFROM\tSTATE\tSINCE\tPREFIXES RECEIVED\tREACHED")
	for _, p := range st.GetPeers() {
		from := "configured"
		if p.GetDynamic() {
			from = "peerPrefixes"
		}
		since := "-"
		if p.GetSinceUnix() > 0 {
			since = time.Since(time.Unix(p.GetSinceUnix(), 0)).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", p.GetAddress(), orDash(p.GetHostname()), orDash(p.GetType()), from, p.GetState(), since,
			p.GetReceived(), orDash(p.GetReached()))
	}
	tw.Flush()
	if n := st.GetBgpDropped(); n > 0 {
		fmt.Fprintf(w, "%d path(s) from peers were refused by the import filter (see the daemon log)\n", n)
	}
	printExternalPeers(w, st)
}

// printExternalPeers lists bgp.externalPeers: what each was sent (this
// node's blocks, the Service CIDRs) and what each sent, all dropped, by
// reason.
func printExternalPeers(w io.Writer, st *reefv1.StatusReply) {
	if len(st.GetExternalPeers()) == 0 {
		return
	}
	fmt.Fprintln(w, "\nExternal BGP peers (they get this node's confirmed blocks; reef installs nothing they send):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PEER\tASN\tSTATE\tSINCE\tBFD\tBLOCKS SENT\tROUTES RECEIVED\tDROPPED\tLIMIT")
	for _, p := range st.GetExternalPeers() {
		since := "-"
		if p.GetSinceUnix() > 0 {
			since = time.Since(time.Unix(p.GetSinceUnix(), 0)).Round(time.Second).String()
		}
		var dropped []string
		for _, r := range bgp.DropReasons {
			if n := p.GetDropped()[r]; n > 0 {
				dropped = append(dropped, fmt.Sprintf("%s %d", r, n))
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%d\n", p.GetAddress(), p.GetAsn(), p.GetState(), since, orDash(p.GetBfd()),
			p.GetSent(), p.GetReceived(), orDash(strings.Join(dropped, ", ")), p.GetMaxPrefixes())
	}
	tw.Flush()
	if cidrs := st.GetServiceCidrs(); len(cidrs) > 0 {
		fmt.Fprintf(w, "Service CIDRs announced to them (bgp.serviceClusterIPs): %s\n", strings.Join(cidrs, ", "))
	}
	if cidrs := st.GetServiceCidrsWithheld(); len(cidrs) > 0 {
		fmt.Fprintf(w, "Service CIDRs NOT announced, no IPv6 address (nodeAddressV6) to be their next hop: %s\n", strings.Join(cidrs, ", "))
	}
	printStandIns(w, st)
	printServiceAddresses(w, st)
}

// printServiceAddresses lists the Service addresses announced to the
// external peers (bgp.serviceExternalIPs, bgp.serviceLoadBalancerIPs) and
// why, those left out and why, and the state of the API watch.
func printServiceAddresses(w io.Writer, st *reefv1.StatusReply) {
	watch := st.GetServiceAddressesWatch()
	if watch == "" {
		return
	}
	addrs := st.GetServiceAddresses()
	fmt.Fprintf(w, "Service addresses announced to them (bgp.serviceExternalIPs, bgp.serviceLoadBalancerIPs): %d; API watch %s\n", countAddresses(addrs), watch)
	if len(addrs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ADDRESS\tSERVICE\tSOURCE\tWHY")
		for _, a := range addrs {
			why := "externalTrafficPolicy Cluster: every node announces it"
			if a.GetReason() == "local" {
				why = fmt.Sprintf("externalTrafficPolicy Local: %d ready endpoint(s) on this node", a.GetLocalEndpoints())
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", a.GetAddress(), a.GetService(), a.GetSource(), why)
		}
		tw.Flush()
	}
	for _, s := range st.GetServiceAddressesSkipped() {
		fmt.Fprintf(w, "  NOT announced: %s\n", s)
	}
}

// countAddresses counts the distinct addresses of entries (one entry per
// address and Service behind it).
func countAddresses(entries []*reefv1.ServiceAddress) int {
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.GetAddress()] = true
	}
	return len(seen)
}

// printVoters prints the block protocol's view (docs/ipam.md): the voters,
// which of them this node reaches, why it cannot claim, its pending claims.
func printVoters(w io.Writer, st *reefv1.StatusReply) {
	if len(st.GetVoters()) == 0 {
		return
	}
	fmt.Fprintf(w, "\nBlock protocol: incarnation %s, voters %v (a claim needs %d votes; %d reached, itself included); votes held: %d\n",
		st.GetIncarnation(), st.GetVoters(), st.GetVotersMajority(), st.GetQuorumUp(), st.GetVotesHeld())
	if g := st.GetGone(); g != "" {
		fmt.Fprintf(w, "  THIS NODE TAKES NO PART: %s\n", g)
	} else if b := st.GetClaimBlocked(); b != "" {
		fmt.Fprintf(w, "  cannot claim a block: %s\n", b)
	}
	if r := st.GetVoterRestricted(); r != "" {
		fmt.Fprintf(w, "  VOTES ONLY FOR CONFIRMED OWNERS: %s\n", r)
	}
	if u := st.GetVotersUnsettled(); u != "" {
		fmt.Fprintf(w, "  voter list not settled: %s\n", u)
	} else {
		fmt.Fprintf(w, "  voter list settled here: %d confirmed blocks, view %s (the next one-voter change may start once every node says so with this view)\n",
			st.GetBlocksConfirmed(), st.GetView())
	}
	for _, d := range st.GetVotersDisagree() {
		fmt.Fprintf(w, "  warning: node %s (bgp.voters must be the same on every node)\n", d)
	}
	for _, p := range st.GetPendingClaims() {
		fmt.Fprintf(w, "  pending claim %s: votes from %v\n", p.GetBlock(), p.GetGrantedBy())
	}
	for _, c := range st.GetConflicts() {
		fmt.Fprintf(w, "  CONFLICT: %s\n", c)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runNodeForget(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := flag.NewFlagSet("reef node forget", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagError(err)
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "usage: reef node forget NODE [--socket PATH | --config FILE] [-o json]   (NODE: its address, or its name)")
		return UsageError{msg: "reef node forget takes one node"}
	}
	if err := c.validate(); err != nil {
		return err
	}
	client, ctx, done, err := c.node(ctx)
	if err != nil {
		return err
	}
	defer done()
	rep, err := client.Forget(ctx, &reefv1.ForgetRequest{Node: pos[0]})
	if status.Code(err) == codes.Unavailable || ctx.Err() != nil {
		return c.callError(ctx, err)
	}
	if err != nil {
		return fmt.Errorf("forget %s: %w", pos[0], err)
	}
	if c.output == "json" {
		return printJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "forgot node %s: %d block(s) free for other nodes: %s\n", rep.GetNodeAddress(), len(rep.GetBlocks()), strings.Join(rep.GetBlocks(), " "))
	fmt.Fprintln(stdout, "the other nodes learn it over BGP; a forgotten node must not come back with its old state (wipe its stateDir first)")
	return nil
}

// parseInterspersed parses flags that may come after positional arguments
// ("reef node forget node3 -o json") and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// printStandIns says which blocks of restarting nodes this node announces
// to its BFD routers for them, and whether its own are marked for the
// other nodes to do so (docs/bgp.md, "Stand-ins").
func printStandIns(w io.Writer, st *reefv1.StatusReply) {
	if st.GetBlocksMarked() {
		fmt.Fprintln(w, "This node's blocks are marked GRACEFUL_SHUTDOWN for the other nodes to stand in for them at their BFD routers (a planned stop, or a start after one until its own BFD routers have them)")
	}
	if s := st.GetStandIns(); len(s) > 0 {
		fmt.Fprintf(w, "Standing in for restarting nodes (their blocks, next hop the owner): %s\n", strings.Join(s, ", "))
	}
}
