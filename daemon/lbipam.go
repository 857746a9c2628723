package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/reefcni/reef/lbipam"
)

// startLBIPAM starts LoadBalancer address assignment (package lbipam) when
// the config asks for it, and is nil when it does not: this daemon then
// contends for the Lease, and assigns while it holds it.
func startLBIPAM(ctx context.Context, cfg Config, log *slog.Logger) (*lbipam.Controller, error) {
	if !cfg.assignsLoadBalancerIPs() {
		return nil, nil
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubernetes.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", cfg.Kubernetes.Kubeconfig, err)
	}
	rc.UserAgent = "reef"
	c, err := lbipam.New(rc, cfg.Kubernetes.NodeName, cfg.BGP.ServiceLoadBalancerIPs, log)
	if err != nil {
		return nil, fmt.Errorf("LoadBalancer address assignment: %w", err)
	}
	go c.Run(ctx)
	return c, nil
}
