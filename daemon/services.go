package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/metrics"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/services"
)

// serviceAnnouncer is the daemon's side of bgp.serviceExternalIPs and
// bgp.serviceLoadBalancerIPs: it watches Services and EndpointSlices
// (package services), computes which Service addresses this node
// announces (services.Desired, pure) and hands them to the speaker, which
// adds the new ones and withdraws the rest. One goroutine does it, woken
// by the informers' events (coalesced) and by a timer that retries what
// the speaker refused. Nothing is announced before the informers have
// listed once; after that, the caches and so the announcements stay as
// last known while the API is away.
type serviceAnnouncer struct {
	watch   *services.Watcher
	speaker *bgp.Speaker
	cfg     services.Config
	log     *slog.Logger
	kick    chan struct{}

	mu       sync.Mutex
	plan     services.Plan
	withheld []netip.Addr // planned, but no next hop of their family
	lastErr  error        // of the last SetServiceAddresses
}

// Timing of the loop: after an event it waits serviceSettle for the rest
// of a burst (a rollout changes many EndpointSlices at once; no decision
// depends on it), and it recomputes every serviceRetry anyway, so that
// what the speaker refused is tried again.
const (
	serviceSettle = 50 * time.Millisecond
	serviceRetry  = 30 * time.Second
)

// newServiceAnnouncer starts the watch and the loop when
// bgp.serviceExternalIPs or bgp.serviceLoadBalancerIPs is set (the config
// check makes sure the API is configured then) and the node has external
// peers to announce them to, and is nil otherwise. (A node without
// external peers may still assign LoadBalancer addresses, docs/lbipam.md:
// it announces none, and need not watch every Service and EndpointSlice.)
func newServiceAnnouncer(ctx context.Context, cfg Config, sp *bgp.Speaker, log *slog.Logger) (*serviceAnnouncer, error) {
	b := cfg.BGP
	if len(b.ServiceExternalIPs) == 0 && len(b.ServiceLoadBalancerIPs) == 0 || cfg.Kubernetes.Kubeconfig == "" || len(b.ExternalPeers) == 0 {
		return nil, nil
	}
	a := &serviceAnnouncer{speaker: sp, log: log.With("component", "services"), kick: make(chan struct{}, 1),
		cfg: services.Config{ExternalIPs: b.ServiceExternalIPs, LoadBalancerIPs: b.ServiceLoadBalancerIPs, Node: cfg.Kubernetes.NodeName}}
	w, err := services.New(cfg.Kubernetes.Kubeconfig, a.log, a.trigger)
	if err != nil {
		return nil, err
	}
	a.watch = w
	w.Run(ctx)
	go a.run(ctx)
	a.log.Info("announcing Service addresses: watching Services and EndpointSlices in the Kubernetes API", "server", w.Status().Server,
		"node", a.cfg.Node, "serviceExternalIPs", b.ServiceExternalIPs, "serviceLoadBalancerIPs", b.ServiceLoadBalancerIPs)
	return a, nil
}

// serviceAddressCIDRs are the CIDRs the speaker keeps Service addresses
// in (bgp.Config.ServiceAddressCIDRs).
func (b BGPConfig) serviceAddressCIDRs() []netip.Prefix {
	return slices.Concat(b.ServiceExternalIPs, b.ServiceLoadBalancerIPs)
}

// trigger asks the loop for a pass; it never blocks (informer goroutines
// call it).
func (a *serviceAnnouncer) trigger() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

func (a *serviceAnnouncer) run(ctx context.Context) {
	t := time.NewTicker(serviceRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.kick:
			select {
			case <-ctx.Done():
				return
			case <-time.After(serviceSettle):
			}
			select { // the events of the settle time are in this pass
			case <-a.kick:
			default:
			}
		case <-t.C:
		}
		a.sync()
	}
}

// sync computes the plan from the caches and applies it; before the
// informers have listed once it does nothing (an empty cache would
// withdraw what a restarted daemon's routers still hold).
func (a *serviceAnnouncer) sync() {
	svcs, eps, synced := a.watch.Objects()
	if !synced {
		return
	}
	plan := services.Desired(a.cfg, svcs, eps)
	before := a.speaker.ServiceAddresses()
	withheld, err := a.speaker.SetServiceAddresses(plan.Addrs())
	after := a.speaker.ServiceAddresses()

	a.mu.Lock()
	old, oldWithheld := a.plan, a.withheld
	a.plan, a.withheld, a.lastErr = plan, withheld, err
	a.mu.Unlock()

	had, has, wasWithheld := setOf(before), setOf(after), setOf(oldWithheld)
	for _, addr := range after {
		if !had[addr] {
			a.log.Info("Service address announced", "address", addr, "why", reasons(plan.Announce[addr]))
		}
	}
	for _, addr := range before {
		if !has[addr] {
			a.log.Info("Service address withdrawn", "address", addr, "was", reasons(old.Announce[addr]))
		}
	}
	if err != nil {
		a.log.Error("announce Service addresses; retried in the next pass", "error", err)
	}
	for _, addr := range withheld {
		if !wasWithheld[addr] {
			a.log.Warn("Service address not announced: the node has no IPv6 address (nodeAddressV6) to be its next hop", "address", addr)
		}
	}
}

func setOf(addrs []netip.Addr) map[netip.Addr]bool {
	m := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		m[a] = true
	}
	return m
}

func reasons(rs []services.Reason) string {
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return strings.Join(out, "; ")
}

// announced are the plan's addresses the speaker holds, one entry per
// address and Service behind it, sorted by address: what `reef status`
// and the metrics show.
func (a *serviceAnnouncer) announced() []*reefv1.ServiceAddress {
	if a == nil {
		return nil
	}
	held := a.speaker.ServiceAddresses()
	a.mu.Lock()
	plan := a.plan
	a.mu.Unlock()
	var out []*reefv1.ServiceAddress
	for _, addr := range held {
		for _, r := range plan.Announce[addr] {
			out = append(out, &reefv1.ServiceAddress{Address: addr.String(), Service: r.Service, Source: r.Source, Reason: r.Policy,
				LocalEndpoints: int32(r.LocalEndpoints)})
		}
	}
	return out
}

// status fills the Service address fields of `reef status`.
func (a *serviceAnnouncer) status(out *reefv1.StatusReply) {
	if a == nil {
		return
	}
	out.ServiceAddresses = a.announced()
	a.mu.Lock()
	plan, withheld, lastErr := a.plan, a.withheld, a.lastErr
	a.mu.Unlock()
	for _, s := range plan.Skipped {
		out.ServiceAddressesSkipped = append(out.ServiceAddressesSkipped, s.String())
	}
	for _, addr := range withheld {
		for _, r := range plan.Announce[addr] {
			out.ServiceAddressesSkipped = append(out.ServiceAddressesSkipped,
				services.Skipped{Service: r.Service, Source: r.Source, Address: addr.String(), Why: "no IPv6 address (nodeAddressV6) to be its next hop"}.String())
		}
	}
	if lastErr != nil && !errors.Is(lastErr, bgp.ErrNoExternalPeers) {
		out.ServiceAddressesSkipped = append(out.ServiceAddressesSkipped, "last pass: "+lastErr.Error())
	}
	st := a.watch.Status()
	switch {
	case st.LastError != "":
		out.ServiceAddressesWatch = fmt.Sprintf("failing since %s (%s ago): %s; the addresses stay announced as last known",
			st.ErrorSince.UTC().Format(time.RFC3339), time.Since(st.ErrorSince).Round(time.Second), st.LastError)
	case !st.Synced:
		out.ServiceAddressesWatch = "waiting for the first list of Services and EndpointSlices from " + st.Server + "; nothing announced yet"
	default:
		out.ServiceAddressesWatch = "synced with " + st.Server
	}
}

// metrics are the announced addresses for the scrape.
func (a *serviceAnnouncer) metrics() []metrics.ServiceAddress {
	var out []metrics.ServiceAddress
	for _, s := range a.announced() {
		out = append(out, metrics.ServiceAddress{Address: s.GetAddress(), Service: s.GetService(), Source: s.GetSource(), Reason: s.GetReason()})
	}
	return out
}
