package daemon

import (
	"context"
	"fmt"
	"time"

	sdaemon "github.com/coreos/go-systemd/v22/daemon"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	reefv1 "github.com/reefcni/reef/proto"
)

// watchdogGrace is added to two reconcile intervals before a loop that has
// not finished a pass counts as stuck: a pass over many pods takes a while.
const watchdogGrace = 30 * time.Second

// runWatchdog pings systemd's watchdog (WatchdogSec= in reef.service) at
// half its interval for as long as ctx lives, but only while the daemon
// proves it works; when it stops pinging, systemd kills and restarts it.
// Without WATCHDOG_USEC (not under systemd, or no WatchdogSec) it returns
// at once.
func (d *Daemon) runWatchdog(ctx context.Context) {
	interval, err := sdaemon.SdWatchdogEnabled(false)
	if err != nil {
		d.log.Warn("systemd watchdog settings unreadable; not pinging it", "error", err)
		return
	}
	if interval == 0 {
		return
	}
	d.log.Info("pinging the systemd watchdog", "every", interval/2)
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A call must come back well before systemd's deadline.
		callCtx, cancel := context.WithTimeout(ctx, interval/4)
		statusErr := d.selfStatus(callCtx)
		cancel()
		last, _ := d.rec.Last()
		if err := watchdogVerdict(time.Now(), statusErr, d.cni.Ready(), last, d.cfg.ReconcileInterval); err != nil {
			if ctx.Err() == nil {
				d.log.Error("not pinging the systemd watchdog; systemd restarts the daemon if this lasts", "error", err)
			}
			continue
		}
		sdNotify(d.log, sdaemon.SdNotifyWatchdog)
	}
}

// selfStatus calls the Node Status method over the daemon's own socket, the
// way `reef status` does: it proves the socket accepts, the gRPC server
// answers and the store can be read.
func (d *Daemon) selfStatus(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+d.cfg.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = reefv1.NewNodeClient(conn).Status(ctx, &reefv1.StatusRequest{})
	return err
}

// watchdogVerdict says why the daemon must not ping the watchdog, or nil.
// The socket must answer; once the daemon is ready, the reconcile loop
// must have finished a pass within two intervals (plus watchdogGrace).
// Before it is ready, the start-up work (queued DELs, the first pass) is
// bounded by systemd's TimeoutStartSec instead.
func watchdogVerdict(now time.Time, statusErr error, ready bool, lastPass time.Time, interval time.Duration) error {
	if statusErr != nil {
		return fmt.Errorf("own socket does not answer a status call: %w", statusErr)
	}
	if !ready {
		return nil
	}
	limit := 2*interval + watchdogGrace
	if lastPass.IsZero() {
		return fmt.Errorf("ready, but the reconcile loop never finished a pass")
	}
	if age := now.Sub(lastPass); age > limit {
		return fmt.Errorf("reconcile loop finished its last pass %s ago (limit %s): stuck", age.Round(time.Second), limit)
	}
	return nil
}
