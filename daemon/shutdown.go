package daemon

import (
	"context"
	"time"
)

// gracefulShutdown moves the routers' traffic off this node before the
// daemon stops, while the node still forwards: its blocks go to the other
// nodes marked, and those that have BFD routers stand in for them there
// (bgp.Speaker.PlannedStop), so that the routers keep a path to this
// node's pods when its BFD session goes down; the Service CIDRs go to the
// external peers marked GRACEFUL_SHUTDOWN (bgp.Speaker.GracefulShutdown).
// Then the daemon waits bgp.gracefulShutdownTime for the routers to act
// on it. It is bounded: a router that never answers costs the stop at
// most that time and 5 s more.
func (d *Daemon) gracefulShutdown() {
	settle := d.cfg.BGP.GracefulShutdownTime
	if d.speaker == nil || settle <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settle+5*time.Second)
	defer cancel()
	start := time.Now()
	standIns, err := d.speaker.PlannedStop(ctx)
	if err != nil {
		d.log.Warn("planned stop: the other nodes may not stand in for this node's blocks", "error", err, "took", time.Since(start).Round(time.Millisecond))
	}
	peers, err := d.speaker.GracefulShutdown(ctx, settle)
	switch {
	case err != nil:
		d.log.Warn("planned stop: the routers may still send Service traffic here", "error", err, "took", time.Since(start).Round(time.Millisecond))
	case len(peers) > 0:
		d.log.Info("planned stop: Service traffic drained to the other nodes", "peers", peers, "took", time.Since(start).Round(time.Millisecond))
	case len(standIns) > 0:
		// No Service prefix to drain: the wait is the stand-ins' alone.
		select {
		case <-ctx.Done():
		case <-time.After(settle):
		}
	}
	if len(standIns) > 0 {
		d.log.Info("planned stop: blocks marked for the other nodes to stand in at their BFD routers", "peers", standIns, "took", time.Since(start).Round(time.Millisecond))
	}
}
