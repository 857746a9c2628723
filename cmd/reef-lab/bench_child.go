package main

// The runtime side of `reef-lab bench`. libcni execs plugins in the calling
// process's network namespace, and ptp creates its host-side veths and
// routes there, so bench never calls libcni itself: it re-execs this binary
// under `nsenter --net=<node netns>` with benchChildEnv set, hands it one
// batch of ADDs or DELs as JSON on stdin and reads the timings as JSON from
// stdout. reef's batches run the same way, so both plugins are timed from
// the same kind of process in the same kind of namespace.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	reefv1 "github.com/reefcni/reef/proto"
)

// benchChildEnv marks the re-exec'd child; main never sees it.
const benchChildEnv = "REEF_LAB_BENCH_CHILD"

func init() {
	if os.Getenv(benchChildEnv) == "" {
		return
	}
	os.Unsetenv(benchChildEnv) // keep it out of the plugins' environment
	if err := benchChild(); err != nil {
		fmt.Fprintln(os.Stderr, "reef-lab bench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childJob is one timed batch.
type childJob struct {
	// Mode "libcni" drives the conflist through libcni as a runtime does;
	// "grpc" sends the same requests straight to the reef daemon's socket
	// over one kept connection (no exec, no shim), to split reef's cost.
	Mode       string          `json:"mode"`
	Op         string          `json:"op"` // ADD or DEL
	Workers    int             `json:"workers"`
	PluginDirs []string        `json:"pluginDirs"`
	CacheDir   string          `json:"cacheDir"`
	Conflist   json.RawMessage `json:"conflist"`
	Socket     string          `json:"socket,omitempty"` // grpc mode
	Pods       []childPod      `json:"pods"`
}

type childPod struct {
	ContainerID string `json:"containerID"`
	Netns       string `json:"netns"` // path
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
}

type childResult struct {
	Lat  []int64 `json:"lat"`  // ns per pod, in the order of Pods
	Wall int64   `json:"wall"` // ns from the first call to the last return
}

func (p childPod) runtimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.ContainerID,
		NetNS:       p.Netns,
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID},
		},
	}
}

func benchChild() error {
	var job childJob
	if err := json.NewDecoder(os.Stdin).Decode(&job); err != nil {
		return fmt.Errorf("decode job: %w", err)
	}
	var call func(ctx context.Context, p childPod) error
	switch job.Mode {
	case "libcni":
		c, err := libcniCall(job)
		if err != nil {
			return err
		}
		call = c
	case "grpc":
		c, closeFn, err := grpcCall(job)
		if err != nil {
			return err
		}
		defer closeFn()
		call = c
	default:
		return fmt.Errorf("unknown mode %q", job.Mode)
	}
	workers := max(job.Workers, 1)
	res := childResult{Lat: make([]int64, len(job.Pods))}
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errMu   sync.Mutex
		errs    []error
		stopped atomic.Bool
	)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(job.Pods) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				t0 := time.Now()
				err := call(ctx, job.Pods[i])
				res.Lat[i] = int64(time.Since(t0))
				cancel()
				if err != nil {
					stopped.Store(true)
					errMu.Lock()
					errs = append(errs, fmt.Errorf("%s %s: %w", job.Op, job.Pods[i].Name, err))
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	res.Wall = int64(time.Since(start))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func libcniCall(job childJob) (func(context.Context, childPod) error, error) {
	list, err := libcni.ConfListFromBytes(job.Conflist)
	if err != nil {
		return nil, err
	}
	cni := libcni.NewCNIConfigWithCacheDir(job.PluginDirs, job.CacheDir, nil)
	switch job.Op {
	case "ADD":
		return func(ctx context.Context, p childPod) error {
			r, err := cni.AddNetworkList(ctx, list, p.runtimeConf())
			if err != nil {
				return err
			}
			res, err := types100.NewResultFromResult(r)
			if err != nil {
				return err
			}
			if len(res.IPs) == 0 {
				return errors.New("no IP in the result")
			}
			return nil
		}, nil
	case "DEL":
		return func(ctx context.Context, p childPod) error {
			return cni.DelNetworkList(ctx, list, p.runtimeConf())
		}, nil
	}
	return nil, fmt.Errorf("unknown op %q", job.Op)
}

// grpcCall sends what the shim would forward for the conflist's only
// plugin: its config with name and cniVersion injected, as libcni does.
func grpcCall(job childJob) (func(context.Context, childPod) error, func(), error) {
	list, err := libcni.ConfListFromBytes(job.Conflist)
	if err != nil {
		return nil, nil, err
	}
	var conf map[string]any
	if err := json.Unmarshal(list.Plugins[0].Bytes, &conf); err != nil {
		return nil, nil, err
	}
	conf["name"], conf["cniVersion"] = list.Name, list.CNIVersion
	netconf, err := json.Marshal(conf)
	if err != nil {
		return nil, nil, err
	}
	conn, err := grpc.NewClient("unix://"+job.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	// Connect before the clock starts: the batch times requests, not dialing.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			conn.Close()
			return nil, nil, fmt.Errorf("connect to %s: %s", job.Socket, st)
		}
	}
	client := reefv1.NewCNIClient(conn)
	call := func(ctx context.Context, p childPod) error {
		var args []string
		for _, kv := range p.runtimeConf().Args {
			args = append(args, kv[0]+"="+kv[1])
		}
		req := &reefv1.CNIRequest{ContainerId: p.ContainerID, Netns: p.Netns, Ifname: "eth0",
			Args: strings.Join(args, ";"), Path: strings.Join(job.PluginDirs, ":"), Netconf: netconf}
		var reply *reefv1.CNIReply
		var err error
		if job.Op == "ADD" {
			reply, err = client.Add(ctx, req)
		} else {
			reply, err = client.Del(ctx, req)
		}
		if err != nil {
			return err
		}
		if e := reply.GetError(); e != nil {
			return fmt.Errorf("CNI error %d: %s: %s", e.GetCode(), e.GetMsg(), e.GetDetails())
		}
		return nil
	}
	return call, func() { conn.Close() }, nil
}
