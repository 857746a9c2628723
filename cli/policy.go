package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/policy/kube"
	reefv1 "github.com/reefcni/reef/proto"
)

// printPolicy is the NetworkPolicy part of `reef status`.
// printLBIPAM prints LoadBalancer address assignment, when this node
// takes part in it (docs/lbipam.md).
func printLBIPAM(w io.Writer, st *reefv1.StatusReply) {
	lb := st.GetLbIpam()
	if lb == nil {
		return
	}
	role := "standby, the Lease is held by " + orDash(lb.GetHolder())
	if lb.GetLeader() {
		role = fmt.Sprintf("leader, %d addresses assigned", lb.GetAssigned())
	}
	fmt.Fprintf(w, "lb-ipam:    %s; pools %s\n", role, strings.Join(lb.GetPools(), ", "))
	if e := lb.GetError(); e != "" {
		fmt.Fprintf(w, "            last round failed: %s\n", e)
	}
}

func printPolicy(w io.Writer, st *reefv1.StatusReply) {
	p := st.GetPolicy()
	if p == nil {
		fmt.Fprintln(w, "policy:     off (kubernetes.kubeconfig is not set; docs/policy.md)")
		return
	}
	since := time.Unix(p.GetApiSinceUnix(), 0).UTC().Format(time.RFC3339)
	api := "reachable"
	if !p.GetApiReachable() {
		api = fmt.Sprintf("UNREACHABLE since %s (%s); enforcing the policies last known", since, p.GetApiError())
	}
	if !p.GetSynced() {
		fmt.Fprintf(w, "policy:     on, not synced yet: ADD answers \"try again later\"; API %s %s\n", p.GetServer(), api)
		return
	}
	fmt.Fprintf(w, "policy:     on, %d NetworkPolicies; %d pods isolated for ingress, %d for egress; API %s %s\n",
		p.GetPolicies(), p.GetIsolatedIngress(), p.GetIsolatedEgress(), p.GetServer(), api)
	if e := p.GetTokenExpiresUnix(); e > 0 {
		left := time.Until(time.Unix(e, 0))
		switch {
		case left <= 0:
			fmt.Fprintf(w, "            the kubeconfig's token EXPIRED at %s: make a new one (docs/policy.md)\n", time.Unix(e, 0).UTC().Format(time.RFC3339))
		case left < 30*24*time.Hour:
			fmt.Fprintf(w, "            the kubeconfig's token expires in %s: make a new one (docs/policy.md)\n", left.Round(time.Hour))
		}
	}
	switch c := p.GetClusterPolicies(); {
	case c == "on":
		fmt.Fprintf(w, "            ClusterNetworkPolicy on, %d policies\n", p.GetClusterPolicyCount())
	case c != "":
		fmt.Fprintf(w, "            ClusterNetworkPolicy %s\n", c)
	}
	for _, s := range p.GetSkipped() {
		fmt.Fprintf(w, "            skipped (not enforced): %s\n", s)
	}
	for _, s := range p.GetClusterNotEnforced() {
		fmt.Fprintf(w, "            ClusterNetworkPolicy not enforced as written: %s\n", s)
	}
	if e := p.GetClusterConditionsError(); e != "" {
		fmt.Fprintf(w, "            ClusterNetworkPolicy status conditions not written: %s\n", e)
	}
	if e := p.GetLastError(); e != "" {
		fmt.Fprintf(w, "            last apply failed: %s\n", e)
	}
}

func runPolicyShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := flag.NewFlagSet("reef policy show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reef policy show [NAMESPACE/POD] [flags]\n\nFor each of this node's pods, what decides each direction: the ClusterNetworkPolicy Admin tier, the NetworkPolicies that select it (and what they allow), the Baseline tier, the default.")
		fs.PrintDefaults()
	}
	c.register(fs)
	var pod string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		pod, args = args[0], args[1:]
	}
	if err := parse(fs, args, &c); err != nil {
		return err
	}
	if pod == "" && fs.NArg() > 0 {
		pod = fs.Arg(0)
	}
	if pod != "" && !strings.Contains(pod, "/") {
		return UsageError{msg: fmt.Sprintf("pod %q: want NAMESPACE/NAME", pod)}
	}
	rep, err := ask(ctx, &c, func(ctx context.Context, client reefv1.NodeClient) (*reefv1.PolicyShowReply, error) {
		return client.PolicyShow(ctx, &reefv1.PolicyShowRequest{Pod: pod})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		_, err := fmt.Fprintf(stdout, "%s\n", rep.GetJson())
		return err
	}
	var views []policy.PodView
	if err := json.Unmarshal(rep.GetJson(), &views); err != nil {
		return fmt.Errorf("decode the daemon's answer: %w", err)
	}
	printPodViews(stdout, views)
	return nil
}

// printPodViews is the text of `reef policy show`: per pod, its
// isolation, the order that decides each direction (the
// ClusterNetworkPolicy tiers around the NetworkPolicies), then the
// NetworkPolicies that select it with their rules.
func printPodViews(w io.Writer, views []policy.PodView) {
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(w)
		}
		iso := func(b bool, dir string) string {
			if b {
				return dir + ": isolated by a NetworkPolicy"
			}
			return dir + ": no NetworkPolicy isolates it"
		}
		fmt.Fprintf(w, "pod %s  %s\n  %s\n  %s\n", v.Pod, strings.Join(v.IPs, ", "), iso(v.IsolatedIngress, "ingress"), iso(v.IsolatedEgress, "egress"))
		printOrder(w, "ingress", "from", v.IngressOrder)
		printOrder(w, "egress", "to", v.EgressOrder)
		for _, p := range v.Policies {
			fmt.Fprintf(w, "  policy %s (%s)\n", p.Name, strings.Join(p.Types, ", "))
			printRules(w, "ingress", "from", p.Ingress, p.Types)
			printRules(w, "egress", "to", p.Egress, p.Types)
		}
	}
}

// printOrder prints what decides one direction, first match first.
func printOrder(w io.Writer, dir, prep string, o policy.OrderView) {
	fmt.Fprintf(w, "  %s, decided by the first that matches:\n", dir)
	rule := func(r policy.ClusterRuleView) {
		name := ""
		if r.Name != "" {
			name = " " + r.Name
		}
		fmt.Fprintf(w, "    %s %d %s %s%s: %s %s %s\n", r.Tier, r.Priority, r.Policy, r.Rule, name, r.Action, prep, strings.Join(r.Peers, "; "))
		if r.Note != "" {
			fmt.Fprintf(w, "      note:      %s\n", r.Note)
		}
		fmt.Fprintf(w, "      addresses: %s\n", strings.Join(r.Addresses, ", "))
		fmt.Fprintf(w, "      ports:     %s\n", strings.Join(r.Ports, ", "))
	}
	for _, r := range o.Admin {
		rule(r)
	}
	if len(o.NetworkPolicies) == 0 {
		fmt.Fprintln(w, "    NetworkPolicy: none isolates the pod")
	} else {
		fmt.Fprintf(w, "    NetworkPolicy: %s (rules below)\n", strings.Join(o.NetworkPolicies, ", "))
	}
	for _, r := range o.Baseline {
		rule(r)
	}
	for _, r := range o.BaselineNotReached {
		fmt.Fprintf(w, "    Baseline %s: not reached (a NetworkPolicy isolates the pod)\n", r)
	}
	fmt.Fprintf(w, "    otherwise: %s\n", o.Otherwise)
}

func printRules(w io.Writer, dir, prep string, rules []policy.RuleView, types []string) {
	covered := false
	for _, t := range types {
		covered = covered || strings.EqualFold(t, dir)
	}
	if !covered {
		return
	}
	if len(rules) == 0 {
		fmt.Fprintf(w, "    %s: allows nothing\n", dir)
	}
	for i, r := range rules {
		fmt.Fprintf(w, "    %s[%d]: %s %s\n", dir, i, prep, strings.Join(r.Peers, "; "))
		fmt.Fprintf(w, "      addresses: %s\n", strings.Join(r.Addresses, ", "))
		fmt.Fprintf(w, "      ports:     %s\n", strings.Join(r.Ports, ", "))
	}
}

func runKubeconfig(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reef kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o kube.KubeconfigOptions
	fs.StringVar(&o.Admin, "admin-kubeconfig", "/etc/kubernetes/admin.conf", "an admin's kubeconfig (kubeadm's on a control-plane node)")
	fs.StringVar(&o.Out, "out", "/etc/reef/kubeconfig", "the kubeconfig to write (mode 0600), for kubernetes.kubeconfig")
	fs.DurationVar(&o.Duration, "duration", 365*24*time.Hour, "the token's lifetime; reef warns 30 days before it ends")
	fs.StringVar(&o.Server, "server", "", "the API server URL the nodes use (default: the admin kubeconfig's)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: reef kubeconfig [flags]\n\nWrites a kubeconfig for reef's service account (apply /usr/share/reef/rbac.yaml first), with a token from the TokenRequest API.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	if o.Duration < time.Hour {
		return UsageError{msg: fmt.Sprintf("--duration %s: want 1h or more", o.Duration)}
	}
	exp, err := kube.WriteKubeconfig(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s for service account %s/%s; its token expires %s (reef status and the log warn 30 days before)\n",
		o.Out, kube.ServiceAccountNamespace, kube.ServiceAccountName, exp.UTC().Format(time.RFC3339))
	return nil
}
