package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/reefcni/reef/internal/kubeclient"
	"github.com/reefcni/reef/lbipam"
)

// startLBIPAM starts LoadBalancer address assignment (package lbipam) when
// the config asks for it, and is nil when it does not: this daemon then
// contends for the Lease, and assigns while it holds it.
func startLBIPAM(ctx context.Context, cfg Config, hooks testHooks, log *slog.Logger) (*lbipam.Controller, error) {
	if !cfg.assignsLoadBalancerIPs() {
		return nil, nil
	}
	rc, err := kubeclient.Config(cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := lbipam.New(rc, cfg.Kubernetes.NodeName, cfg.BGP.ServiceLoadBalancerIPs, log)
	if err != nil {
		return nil, fmt.Errorf("LoadBalancer address assignment: %w", err)
	}
	if hooks.lbResync > 0 {
		c.Resync = hooks.lbResync
	}
	go c.Run(ctx)
	return c, nil
}
