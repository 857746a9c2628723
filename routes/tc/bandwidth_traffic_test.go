package tc

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/reefcni/reef/internal/netnstest"
)

// Traffic through the limits: a TCP sender in one namespace, a receiver
// in the other, through a 10 Mbit/s limit with a burst of 10 kB, measured
// at the receiver for 2 s, each way. A short unlimited run first shows the
// measurement would see a missing limit.
func TestBandwidthTraffic(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("skipping traffic test in -short mode (takes ~5 s)")
	}
	veth := "reef00000000e01"
	node, _, pod := newPodVeth(t, veth, 1500)
	netnstest.Run(t, node, "ip", "addr", "add", "192.0.2.1/30", "dev", veth)
	netnstest.Run(t, pod, "ip", "addr", "add", "192.0.2.2/30", "dev", "eth0")

	into := func(d time.Duration) float64 { return measure(t, pod, "192.0.2.2", node, d) }    // node -> pod
	fromPod := func(d time.Duration) float64 { return measure(t, node, "192.0.2.1", pod, d) } // pod -> node
	for dir, f := range map[string]func(time.Duration) float64{"into the pod": into, "from the pod": fromPod} {
		r := f(500 * time.Millisecond)
		t.Logf("%s without limits: %.0f Mbit/s", dir, r/1e6)
		if r < 50e6 {
			t.Fatalf("%s without limits: %.1f Mbit/s; the measurement could not tell a limit of 10 from none", dir, r/1e6)
		}
	}

	mustSet(t, node, veth, Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 10e6, EgressBurst: 80e3})
	for _, c := range []struct {
		dir string
		f   func(time.Duration) float64
	}{{"into the pod (tbf on the veth)", into}, {"from the pod (tbf on the ifb)", fromPod}} {
		r := c.f(2 * time.Second)
		t.Logf("%s: %.2f Mbit/s through a 10 Mbit/s limit", c.dir, r/1e6)
		if r > 12e6 {
			t.Errorf("%s: %.2f Mbit/s, want at most 12", c.dir, r/1e6)
		}
		if r < 5e6 {
			t.Errorf("%s: %.2f Mbit/s, want at least 5: the limit should pass traffic", c.dir, r/1e6)
		}
	}
}

// measure sends TCP from the namespace cli to addr in srv as fast as it can
// and returns what the receiver got, in bits per second, over d from its
// first byte.
func measure(t *testing.T, srv ns.NetNS, addr string, cli ns.NetNS, d time.Duration) float64 {
	t.Helper()
	var ln net.Listener
	if err := in(t, srv, func() (err error) { ln, err = net.Listen("tcp4", addr+":0"); return err }); err != nil {
		t.Fatalf("listen in %s: %v", srv.Path(), err)
	}
	defer ln.Close()
	var conn net.Conn
	if err := in(t, cli, func() (err error) { conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second); return err }); err != nil {
		t.Fatalf("dial %s from %s: %v", ln.Addr(), cli.Path(), err)
	}
	defer conn.Close()
	sent := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := conn.Write(buf); err != nil {
				sent <- err
				return
			}
		}
	}()
	rc, err := ln.Accept()
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	defer rc.Close()
	buf := make([]byte, 64<<10)
	if err := rc.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := rc.Read(buf)
	if err != nil {
		t.Fatalf("first read: %v", err)
	}
	_ = n // the first read is the start mark, as is the bucket it drained
	start := time.Now()
	end := start.Add(d)
	var total int
	for {
		if err := rc.SetReadDeadline(end); err != nil {
			t.Fatal(err)
		}
		n, err := rc.Read(buf)
		total += n
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) && err != io.EOF {
				t.Fatalf("read: %v", err)
			}
			break
		}
	}
	elapsed := time.Since(start)
	rc.Close()
	conn.Close()
	<-sent
	return float64(total) * 8 / elapsed.Seconds()
}
