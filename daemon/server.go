package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/reefcni/reef/cniserver"
	reefv1 "github.com/reefcni/reef/proto"
)

// Limits of the daemon's socket. docs/cni.md ("Limits") lists them with
// what a client sees past each; a change here belongs there too.
const (
	// maxCNICalls is how many CNI calls run at once; the rest wait for a
	// slot, in order, within their deadline. A node's restart brings
	// kubelet's storm of a few hundred ADDs and DELs at once: they all get
	// served, 64 at a time, which keeps both cores busy (an ADD waits on
	// netlink and on the store's one writer as much as it computes)
	// without 250 goroutines, netns handles and netlink sockets at once.
	maxCNICalls = 64
	// maxNodeCalls is the same for the CLI's Node service, counted
	// apart, so that `reef status` and the watchdog's own status call
	// answer during a storm of CNI calls.
	maxNodeCalls = 8
	// callTimeout is the server's deadline on every call (the client's,
	// when shorter, wins): below the shim's 2 minutes, so that a call
	// that waited too long ends with the daemon's own "try again later"
	// rather than the shim's deadline. ADD's wait for a new block (30 s)
	// fits well inside it.
	callTimeout = 90 * time.Second
	// handshakeTimeout drops a connection that has not sent the HTTP/2
	// preface and its SETTINGS by then: a client that connects and sends
	// nothing holds a file descriptor and a goroutine for this long, never
	// a call slot. gRPC clients send both at once; 10 s leaves room for a
	// starved shim on a loaded node.
	handshakeTimeout = 10 * time.Second
	// maxConnectionIdle closes (GOAWAY, then close 5 s later) a
	// connection that has had no call for this long. Every reef client
	// makes one call or a few and goes; a gRPC client that stays just
	// reconnects.
	maxConnectionIdle = 30 * time.Second
	// maxConnectionAge, then maxConnectionAgeGrace for the calls still
	// running, bound a connection's life, so that a stream whose message
	// never comes (HEADERS without DATA: it is not idle, and holds no
	// slot) does not keep it forever. The grace outlasts callTimeout.
	maxConnectionAge      = 2 * time.Minute
	maxConnectionAgeGrace = callTimeout + 10*time.Second
	// keepaliveTime and keepaliveTimeout: a connection silent for the
	// first is pinged, and closed if the ping is not answered within the
	// second (a peer that froze, rather than one that idles).
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 10 * time.Second
	// maxStreams bounds the calls in flight on one connection; a client
	// that wants more waits for its own streams (gRPC clients queue them).
	maxStreams = 16
)

// newServer is the daemon's gRPC server with its limits and interceptors,
// and the CNI and Node services registered. Run and FuzzSocket build it
// here, so that the fuzz target meets what the socket serves.
func newServer(log *slog.Logger, cni reefv1.CNIServer, node reefv1.NodeServer) *grpc.Server {
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(reefv1.MaxMessageSize),
		grpc.MaxConcurrentStreams(maxStreams),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			MaxConnectionIdle:     maxConnectionIdle,
			MaxConnectionAge:      maxConnectionAge,
			MaxConnectionAgeGrace: maxConnectionAgeGrace,
			Time:                  keepaliveTime,
			Timeout:               keepaliveTimeout,
		}),
		grpc.ChainUnaryInterceptor(
			limitCalls(log, callTimeout, maxCNICalls, maxNodeCalls),
			cniserver.RecoverInterceptor(log),
		),
	)
	reefv1.RegisterCNIServer(srv, cni)
	reefv1.RegisterNodeServer(srv, node)
	return srv
}

// limitCalls gives every call the server's deadline and a slot of its
// service (CNI or the rest), waiting for one while the deadline allows. A
// CNI call that gets none is told "try again later" in its CNI reply, the
// way the shim reports it; any other call gets gRPC's Unavailable.
func limitCalls(log *slog.Logger, timeout time.Duration, cniSlots, otherSlots int) grpc.UnaryServerInterceptor {
	cni, other := make(chan struct{}, cniSlots), make(chan struct{}, otherSlots)
	cniPrefix := "/" + reefv1.CNI_ServiceDesc.ServiceName + "/"
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		slots := other
		if strings.HasPrefix(info.FullMethod, cniPrefix) {
			slots = cni
		}
		began := time.Now()
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			waited := time.Since(began).Round(time.Millisecond)
			msg := fmt.Sprintf("reef daemon is busy: all %d call slots stayed taken for the %s this call waited; try again later", cap(slots), waited)
			log.Warn("call got no slot before its deadline", "method", info.FullMethod, "slots", cap(slots), "waited", waited)
			if _, isCNI := req.(*reefv1.CNIRequest); isCNI {
				return &reefv1.CNIReply{Error: &reefv1.CNIError{Code: uint32(types.ErrTryAgainLater), Msg: msg, Details: ctx.Err().Error()}}, nil
			}
			return nil, status.Error(codes.Unavailable, msg)
		}
		defer func() { <-slots }()
		return handler(ctx, req)
	}
}
