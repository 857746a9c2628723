package daemon

import (
	"context"
	"time"
)

// gracefulShutdown moves the routers' traffic to the Service CIDRs off
// this node before the daemon stops (bgp.Speaker.GracefulShutdown): the
// CIDRs go to the external peers marked GRACEFUL_SHUTDOWN, and the daemon
// waits bgp.gracefulShutdownTime for the routers to act on it, while the
// node still forwards. It is bounded: a router that never answers costs
// the stop at most that time and 5 s more.
func (d *Daemon) gracefulShutdown() {
	settle := d.cfg.BGP.GracefulShutdownTime
	if d.speaker == nil || settle <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settle+5*time.Second)
	defer cancel()
	start := time.Now()
	peers, err := d.speaker.GracefulShutdown(ctx, settle)
	switch {
	case err != nil:
		d.log.Warn("planned stop: the routers may still send Service traffic here", "error", err, "took", time.Since(start).Round(time.Millisecond))
	case len(peers) > 0:
		d.log.Info("planned stop: Service traffic drained to the other nodes", "peers", peers, "took", time.Since(start).Round(time.Millisecond))
	}
}
