// Command reef-cni is reef's CNI plugin: a shim that forwards each CNI
// invocation to the reef daemon over its unix socket and prints the reply.
// It links the CNI types, gRPC and the generated API only, so that the
// runtime's exec of it stays cheap; all the work is done by the daemon.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reefcni/reef/cniserver/pendingdel"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/version"
)

// DefaultSocket is the daemon's socket unless the netconf names another.
const DefaultSocket = "/run/reef/reef.sock"

// callTimeout bounds one call to the daemon. An ADD on a fresh node may wait
// for a block claim; anything slower than this is better retried by the
// runtime than left hanging.
const callTimeout = 2 * time.Minute

// netconf is the part of the network configuration the shim itself reads.
type netconf struct {
	Socket           string `json:"socket"`
	PendingDeleteDir string `json:"pendingDeleteDir"`
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    func(a *skel.CmdArgs) error { return forward(a, "ADD") },
		Del:    cmdDel,
		Check:  func(a *skel.CmdArgs) error { return forward(a, "CHECK") },
		GC:     func(a *skel.CmdArgs) error { return forward(a, "GC") },
		Status: func(a *skel.CmdArgs) error { return forward(a, "STATUS") },
	}, cniversion.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"),
		fmt.Sprintf("reef-cni %s (commit %s)", version.Version, version.Commit))
}

func parseNetconf(stdin []byte) (netconf, error) {
	var c netconf
	if err := json.Unmarshal(stdin, &c); err != nil {
		return c, types.NewError(types.ErrDecodingFailure, "reef-cni: cannot decode the network configuration", err.Error())
	}
	if c.Socket == "" {
		c.Socket = DefaultSocket
	}
	if c.PendingDeleteDir == "" {
		c.PendingDeleteDir = pendingdel.DefaultDir
	}
	return c, nil
}

// cmdDel must succeed while the daemon is down or being upgraded, or the
// runtime keeps the pod in Terminating: the DEL is queued on disk and done by
// the daemon when it starts.
func cmdDel(a *skel.CmdArgs) error {
	err := forward(a, "DEL")
	var unreachable *unreachableError
	if !errors.As(err, &unreachable) {
		return err
	}
	conf, _ := parseNetconf(a.StdinData) // forward already decoded it
	qerr := pendingdel.Put(conf.PendingDeleteDir, pendingdel.Entry{
		ContainerID: a.ContainerID,
		Netns:       a.Netns,
		IfName:      a.IfName,
		Args:        a.Args,
		Path:        a.Path,
		Netconf:     a.StdinData,
		Queued:      time.Now().UTC(),
	})
	if qerr != nil {
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("reef daemon not reachable at %s and the DEL could not be queued; check `systemctl status reef`", conf.Socket),
			qerr.Error())
	}
	fmt.Fprintf(os.Stderr, "reef-cni: daemon not reachable at %s; DEL of %s queued in %s for when it starts\n",
		conf.Socket, a.ContainerID, conf.PendingDeleteDir)
	return nil
}

// unreachableError is a CNI "try again later" that says the daemon could not
// be reached at all (as opposed to an error the daemon returned).
type unreachableError struct{ cniErr *types.Error }

func (e *unreachableError) Error() string { return e.cniErr.Error() }

// Unwrap lets skel find the *types.Error and print it as CNI JSON.
func (e *unreachableError) Unwrap() error { return e.cniErr }

func forward(a *skel.CmdArgs, command string) error {
	conf, err := parseNetconf(a.StdinData)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+conf.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return unreachable(conf.Socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()

	client := reefv1.NewCNIClient(conn)
	req := &reefv1.CNIRequest{
		ContainerId: a.ContainerID,
		Netns:       a.Netns,
		Ifname:      a.IfName,
		Args:        a.Args,
		Path:        a.Path,
		Netconf:     a.StdinData,
	}
	var reply *reefv1.CNIReply
	switch command {
	case "ADD":
		reply, err = client.Add(ctx, req)
	case "DEL":
		reply, err = client.Del(ctx, req)
	case "CHECK":
		reply, err = client.Check(ctx, req)
	case "GC":
		reply, err = client.GC(ctx, req)
	case "STATUS":
		reply, err = client.Status(ctx, req)
	}
	if err != nil {
		if status.Code(err) == codes.Unavailable {
			if command == "STATUS" {
				return types.NewError(types.ErrPluginNotAvailable,
					fmt.Sprintf("reef daemon not reachable at %s; check `systemctl status reef`", conf.Socket), err.Error())
			}
			return unreachable(conf.Socket, err)
		}
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("reef daemon at %s failed the %s call; check `journalctl -u reef`", conf.Socket, command), err.Error())
	}
	if e := reply.GetError(); e != nil {
		return types.NewError(uint(e.GetCode()), e.GetMsg(), e.GetDetails())
	}
	if len(reply.GetResult()) > 0 {
		if _, err := os.Stdout.Write(reply.GetResult()); err != nil {
			return types.NewError(types.ErrIOFailure, "reef-cni: write result", err.Error())
		}
	}
	return nil
}

func unreachable(socket string, err error) error {
	return &unreachableError{cniErr: types.NewError(types.ErrTryAgainLater,
		fmt.Sprintf("reef daemon not reachable at %s, try again later; check `systemctl status reef`", socket),
		err.Error())}
}
