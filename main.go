// Command reef is the reef daemon (`reef daemon`) and the operator CLI that
// talks to it over its unix socket.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/reefcni/reef/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(cli.Report(err, os.Stderr))
}
