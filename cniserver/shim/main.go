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
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	cniversion "github.com/containernetworking/cni/pkg/version"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/reefcni/reef/cniserver/pendingdel"
	reefv1 "github.com/reefcni/reef/proto"
	reefversion "github.com/reefcni/reef/version"
)

// DefaultSocket is the daemon's socket unless the netconf names another.
const DefaultSocket = "/run/reef/reef.sock"

// callTimeout bounds one call to the daemon. An ADD on a fresh node may wait
// for a block claim; anything slower than this is better retried by the
// runtime than left hanging.
var callTimeout = 2 * time.Minute

// connectTimeout bounds the wait for a connection to the daemon's socket
// (connected, HTTP/2 handshake done), inside callTimeout: gRPC's own first
// attempt gives up after 20 s, but a channel that keeps connecting (a
// connection that closes right after its handshake, a starved process)
// would hold a fail-fast call until callTimeout. A daemon that takes no
// connection in 20 s is not reachable: a DEL is queued, as when the socket
// is not there, and any other call is told to try again later.
var connectTimeout = 20 * time.Second

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
		fmt.Sprintf("reef-cni %s (commit %s)", reefversion.Version, reefversion.Commit))
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
	if err := checkInput(a); err != nil {
		return err
	}
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
	if err := awaitConnection(ctx, conn, connectTimeout); err != nil {
		return callError(conf.Socket, command, status.Error(codes.Unavailable, err.Error()), func() string { return "unknown" })
	}

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
		return callError(conf.Socket, command, err, func() string { return daemonVersion(conn) })
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

// awaitConnection connects conn and waits, at most timeout, until it is
// READY or has failed (TRANSIENT_FAILURE: the call that follows fails at
// once with gRPC's reason). Past timeout, or ctx, the daemon is taken for
// unreachable; the call is never sent, so a DEL may be queued safely.
func awaitConnection(ctx context.Context, conn *grpc.ClientConn, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready || s == connectivity.TransientFailure {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("no connection to the daemon's socket within %s (channel %s)", timeout, s)
		}
	}
}

// checkInput refuses, before anything is sent, what the daemon would
// refuse anyway or gRPC could not carry: a netconf over the daemon's limit
// (a runtime retries code 11 for ever; this is code 7, permanent), and CNI
// variables that are not UTF-8 (protobuf strings must be).
func checkInput(a *skel.CmdArgs) error {
	if n := len(a.StdinData); n > reefv1.MaxNetconfSize {
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("reef-cni: the network configuration on stdin is %d bytes; reef accepts at most %d: shorten the plugin's config in the conflist", n, reefv1.MaxNetconfSize), "")
	}
	for _, v := range []struct{ name, value string }{
		{"CNI_CONTAINERID", a.ContainerID}, {"CNI_NETNS", a.Netns}, {"CNI_IFNAME", a.IfName},
		{"CNI_ARGS", a.Args}, {"CNI_PATH", a.Path},
	} {
		if !utf8.ValidString(v.value) {
			return types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("reef-cni: %s %q is not valid UTF-8", v.name, v.value), "")
		}
	}
	return nil
}

// callError turns the gRPC error of a call into the CNI error the runtime
// acts on. Only a daemon that cannot be reached (Unavailable) or did not
// answer in time is "try again later"; a request the daemon refused for
// what it is gets a permanent code and says what to fix. version asks the
// daemon for its version, for the one error that needs it.
func callError(socket, command string, err error, version func() string) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable:
		if command == "STATUS" {
			return types.NewError(types.ErrPluginNotAvailable,
				fmt.Sprintf("reef daemon not reachable at %s; check `systemctl status reef`", socket), err.Error())
		}
		return unreachable(socket, err)
	case codes.DeadlineExceeded, codes.Canceled:
		return types.NewError(types.ErrTryAgainLater,
			fmt.Sprintf("reef daemon at %s did not answer the %s call within %s; try again later, and see `journalctl -u reef` if it lasts", socket, command, callTimeout), err.Error())
	case codes.ResourceExhausted:
		// The daemon's only ResourceExhausted is gRPC's message size limit;
		// being busy is code 11 in the reply.
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("reef daemon at %s refused the %s call as too large: a request may be at most %d bytes; shorten the plugin's config in the conflist", socket, command, reefv1.MaxMessageSize), st.Message())
	case codes.InvalidArgument:
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("reef daemon at %s refused the %s call as invalid", socket, command), st.Message())
	case codes.Unimplemented:
		return types.NewError(reefv1.CodeVersionMismatch,
			fmt.Sprintf("reef daemon at %s (version %s) does not serve %s, which reef-cni %s sends: restart reef (`systemctl restart reef`) so that daemon and reef-cni are the same version",
				socket, version(), command, reefversion.Version), st.Message())
	}
	return types.NewError(types.ErrInternal,
		fmt.Sprintf("reef daemon at %s failed the %s call (gRPC %s); see `journalctl -u reef`", socket, command, st.Code()), st.Message())
}

// daemonVersion asks the daemon for its version, "unknown" if it does not
// say within a few seconds.
func daemonVersion(conn *grpc.ClientConn) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := reefv1.NewNodeClient(conn).Status(ctx, &reefv1.StatusRequest{})
	if err != nil || st.GetVersion() == "" {
		return "unknown"
	}
	return st.GetVersion()
}

func unreachable(socket string, err error) error {
	return &unreachableError{cniErr: types.NewError(types.ErrTryAgainLater,
		fmt.Sprintf("reef daemon not reachable at %s, try again later; check `systemctl status reef`", socket),
		err.Error())}
}
