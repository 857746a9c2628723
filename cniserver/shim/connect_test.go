package main

import (
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/reefcni/reef/cniserver/pendingdel"
)

// TestDelQueuedWhenNoConnection: a daemon whose socket takes connections
// but never completes the HTTP/2 handshake (a starved or wedged server)
// is unreachable for a DEL: the DEL is queued once the connection has not
// come within connectTimeout, rather than failed with "try again later"
// at the call's deadline, which is what gRPC alone does when the call's
// deadline comes before its own 20 s connect attempt ends. The call's
// deadline is 5 s here, the connect limit 1 s.
func TestDelQueuedWhenNoConnection(t *testing.T) {
	defer func(c, d time.Duration) { connectTimeout, callTimeout = c, d }(connectTimeout, callTimeout)
	connectTimeout, callTimeout = time.Second, 5*time.Second

	dir := t.TempDir()
	sock, queue := filepath.Join(dir, "reef.sock"), filepath.Join(dir, "pending")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var held []net.Conn // accepted, never answered
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	netconf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"n","type":"reef-cni","socket":%q,"pendingDeleteDir":%q}`, sock, queue)
	err = cmdDel(&skel.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/x", IfName: "eth0", StdinData: []byte(netconf)})
	l.Close()
	for c := range accepted {
		held = append(held, c)
	}
	if err != nil {
		t.Fatalf("DEL against a socket that never answers: %v; want it queued", err)
	}
	if len(held) == 0 {
		t.Fatal("the shim never connected: the test tested nothing")
	}
	entries, _, err := pendingdel.List(queue)
	if err != nil || len(entries) != 1 || entries[0].ContainerID != "c1" {
		t.Fatalf("queue holds %v (%v); want the DEL of c1", entries, err)
	}
}
