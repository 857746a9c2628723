// Command cmd builds the container images of the lab's Kubernetes
// cluster and of the upstream e2e network tests into a directory, one
// docker-archive tar per image and one of all (package k8simages):
//
//	go run ./internal/lab/k8simages/cmd -out DIR
//
// then, on each node: ctr -n k8s.io images import DIR/all-images.tar
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/reefcni/reef/internal/lab/k8simages"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "k8simages:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("k8simages", flag.ContinueOnError)
	var opts k8simages.Options
	var pauseArgs string
	fs.StringVar(&opts.Out, "out", "", "directory for the image tars (required)")
	fs.StringVar(&opts.Cache, "cache", "", "cache of built binaries and layers (default: the user cache dir's reef-k8simages)")
	fs.StringVar(&opts.Agnhost, "agnhost", "", "agnhost binary of k8s.io/kubernetes "+k8simages.KubeVersion+" to use (default: $GOBIN/agnhost if it is one, else built)")
	fs.StringVar(&opts.PauseSource, "pause-source", "", "pause.c to build pause from (default: internal/lab/image/pause.c of this module)")
	fs.StringVar(&pauseArgs, "pause-args", "", "space-separated arguments appended to pause's entrypoint")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.Out == "" {
		return errors.New("-out is required")
	}
	opts.PauseArgs = strings.Fields(pauseArgs)
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	tars, err := k8simages.Build(ctx, opts)
	if err != nil {
		return err
	}
	refs := make([]string, 0, len(tars))
	for r := range tars {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	for _, r := range refs {
		fmt.Printf("%s\t%s\n", r, tars[r])
	}
	opts.Log.Info("done", "images", len(tars), "took", time.Since(start).Round(time.Millisecond))
	return nil
}
