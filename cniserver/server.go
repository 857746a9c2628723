// Package cniserver is the daemon's CNI service: it validates what the
// reef-cni shim forwards, allocates addresses in the store, wires the pod
// through the routes package and answers in the CNI version asked for. A
// failed ADD undoes every step it took.
package cniserver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"

	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/internal/keyed"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// Config is what the CNI service needs of the daemon's configuration.
type Config struct {
	Pools []store.Pool // the first is the default
	MTU   int          // of both ends of every veth
	// TestPauseAfterVeth: see veth.Spec. Zero outside tests.
	TestPauseAfterVeth time.Duration
	// DeferredDir queues the DELs done in the kernel while the store could
	// not be written (a pendingdel queue on another file system than the
	// state dir: the socket's), for a daemon restarted before the store
	// took writes again; "" keeps them in memory only.
	DeferredDir string
}

// Server implements the CNI gRPC service.
type Server struct {
	reefv1.UnimplementedCNIServer

	cfg  Config
	deps Deps

	ready      atomic.Bool
	containers keyed.Mutex
	deferred   sync.Map // handle -> true: DEL done but the store not written (ReleaseDeferred)
}

// Pods is the owner of the pods' kernel objects (*routes.Pods): the veth
// pair, the node's routes to the pod, the veth's sysctls, its tc and ifb.
// ADD tells it that the pod now exists (Up; then Limit, which may run
// beside the ADD's other work), DEL and every other release that it is
// gone (Down, which may be repeated). The server never writes these
// objects itself, and shares no lock with the owner.
type Pods interface {
	Up(spec veth.Spec) (veth.Pair, error)
	Limit(hostVeth string, bw tc.Bandwidth) ([]string, error)
	Down(hostVeth string, still func() bool) error
}

// Deps are the server's collaborators, all given to New.
type Deps struct {
	Store *store.Store
	Log   *slog.Logger
	// Pods is the owner of the pods' kernel objects (see Pods): ADD,
	// DEL and every release of an endpoint ask it.
	Pods Pods
	// NeedBlock is called, without locks, when pools (one, or both of a
	// dual-stack pod's) have no free address in this node's confirmed
	// blocks. It returns once a new block may be there (the ADD then
	// tries again), or a CNI error saying why no block can be had: a pool
	// is exhausted, or the node cannot reach enough of the cluster to
	// claim one. nil: "no block protocol running".
	NeedBlock func(ctx context.Context, pools []store.Pool) *types.Error
	// PodFilter adds a pod's ARP-filter element and hostPorts after
	// wiring and removes them before teardown (see PodFilter); nil does
	// nothing.
	PodFilter PodFilter
	// Policy covers a pod with its NetworkPolicies during ADD (see
	// PolicyGate); nil: NetworkPolicy is off.
	Policy PolicyGate
	// Activity logs every operation that writes a pod's kernel objects or
	// its record, for the reconcile pass, which leaves what they touch
	// alone instead of locking them out (package activity). nil: a log of
	// the server's own.
	Activity *activity.Log
	// Trigger asks for a whole reconcile pass (ErrRepairLater); nil: none.
	Trigger func()
	// Unavailable says why no ADD can succeed although the daemon is
	// ready, and no wait helps (the cluster forgot this node); "" when
	// ADD may. STATUS fails with it. nil: never.
	Unavailable func() string
	// Observe is told of every CNI operation served: its command, its
	// result ("ok" or the CNI error code) and how long it took (the
	// daemon's metrics); nil: nobody.
	Observe func(command, result string, took time.Duration)
}

// New returns a server that refuses ADD until SetReady(true).
func New(cfg Config, d Deps) *Server {
	if d.NeedBlock == nil {
		d.NeedBlock = func(context.Context, []store.Pool) *types.Error {
			return types.NewError(types.ErrTryAgainLater, "no block protocol running", "")
		}
	}
	if d.PodFilter == nil {
		d.PodFilter = noPodFilter{}
	}
	if d.Activity == nil {
		d.Activity = &activity.Log{}
	}
	return &Server{cfg: cfg, deps: d}
}

// SetReady opens (or closes) the server for ADD; STATUS follows it.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// Ready reports whether ADD is served.
func (s *Server) Ready() bool { return s.ready.Load() }

func reply(result []byte, err *types.Error) *reefv1.CNIReply {
	if err != nil {
		return &reefv1.CNIReply{Error: &reefv1.CNIError{Code: uint32(err.Code), Msg: err.Msg, Details: err.Details}}
	}
	return &reefv1.CNIReply{Result: result}
}

// observed is reply, told to Observe with the command and the time since
// began.
func (s *Server) observed(command string, began time.Time, result []byte, err *types.Error) *reefv1.CNIReply {
	if s.deps.Observe != nil {
		res := "ok"
		if err != nil {
			res = strconv.FormatUint(uint64(err.Code), 10)
		}
		s.deps.Observe(command, res, time.Since(began))
	}
	return reply(result, err)
}

// Add allocates and wires one pod attachment.
func (s *Server) Add(ctx context.Context, in *reefv1.CNIRequest) (*reefv1.CNIReply, error) {
	began := time.Now()
	out, err := s.add(ctx, in)
	return s.observed("ADD", began, out, err), nil
}

// Del removes one pod attachment; it succeeds for anything already gone.
func (s *Server) Del(ctx context.Context, in *reefv1.CNIRequest) (*reefv1.CNIReply, error) {
	began := time.Now()
	return s.observed("DEL", began, nil, s.Delete(in)), nil
}

// Check compares the kernel with the attachment's record.
func (s *Server) Check(ctx context.Context, in *reefv1.CNIRequest) (*reefv1.CNIReply, error) {
	began := time.Now()
	return s.observed("CHECK", began, nil, s.check(in)), nil
}

// GC releases every attachment of the network not in the valid list.
func (s *Server) GC(ctx context.Context, in *reefv1.CNIRequest) (*reefv1.CNIReply, error) {
	began := time.Now()
	return s.observed("GC", began, nil, s.gc(in)), nil
}

// Status answers whether ADD can be served now: code 50 while the
// daemon starts, and while Unavailable says why no ADD can succeed.
func (s *Server) Status(ctx context.Context, in *reefv1.CNIRequest) (*reefv1.CNIReply, error) {
	began := time.Now()
	if _, err := parseRequest("STATUS", in); err != nil {
		return s.observed("STATUS", began, nil, err), nil
	}
	if !s.Ready() {
		return s.observed("STATUS", began, nil, types.NewError(types.ErrPluginNotAvailable, NotReadyReason, "")), nil
	}
	if s.deps.Unavailable != nil {
		if why := s.deps.Unavailable(); why != "" {
			return s.observed("STATUS", began, nil, types.NewError(types.ErrPluginNotAvailable, why, "")), nil
		}
	}
	return s.observed("STATUS", began, nil, nil), nil
}

// NotReadyReason is why a starting daemon does not serve ADD yet (STATUS,
// and the metrics listener's /readyz).
const NotReadyReason = "reef daemon is starting: it serves ADD once queued DELs are drained and the first reconcile is done"

// RecoverInterceptor turns a panic in a handler into a CNI error, so that no
// input can crash the daemon; the stack goes to the log.
func RecoverInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic in handler", "method", info.FullMethod, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
				if _, isCNI := req.(*reefv1.CNIRequest); isCNI {
					resp, err = reply(nil, types.NewError(types.ErrInternal, "reef daemon hit an internal error; see `journalctl -u reef`", fmt.Sprint(r))), nil
					return
				}
				resp, err = nil, fmt.Errorf("internal error: %v", r)
			}
		}()
		return handler(ctx, req)
	}
}
