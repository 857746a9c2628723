package e2e

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/internal/lab"
)

// streamPort is where the long-lived connections of
// TestClusterNetworkPolicyLiveChange are served (serve-ports has 80, 81).
const streamPort = 7000

// echoServer accepts on a pod's address and echoes each connection.
// Its cleanup closes every connection: a peer whose FIN a rule dropped
// would otherwise keep io.Copy waiting.
type echoServer struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func newEchoServer(t *testing.T, pod *lab.KubePod, port int) *echoServer {
	t.Helper()
	var ln net.Listener
	err := ns.WithNetNSPath(lab.NetnsPath(pod.Netns), func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(pod.IP, uint16(port)).String())
		return err
	})
	if err != nil {
		t.Fatalf("listen in %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	s := &echoServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// dialFrom connects from a pod to addr:port, giving up after timeout.
func dialFrom(pod *lab.KubePod, to netip.Addr, port int, timeout time.Duration) (*net.TCPConn, error) {
	var c net.Conn
	err := ns.WithNetNSPath(lab.NetnsPath(pod.Netns), func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(to, uint16(port)).String(), timeout)
		return err
	})
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// stream is a long-lived TCP connection between two pods: the client
// writes a line every 20 ms (traffic, not a wait), the server echoes it,
// and echoed counts the bytes that came back. Any error of the
// connection (a reset, a write that fails) is kept.
type stream struct {
	name   string
	conn   *net.TCPConn
	echoed atomic.Int64
	mu     sync.Mutex
	err    error
	done   chan struct{}
	wg     sync.WaitGroup
}

func openStream(t *testing.T, from, to *lab.KubePod) *stream {
	t.Helper()
	c, err := dialFrom(from, to.IP, streamPort, 3*time.Second)
	if err != nil {
		t.Fatalf("connect %s/%s -> %s/%s:%d: %v", from.Namespace, from.Name, to.Namespace, to.Name, streamPort, err)
	}
	s := &stream{name: fmt.Sprintf("%s/%s -> %s/%s:%d", from.Namespace, from.Name, to.Namespace, to.Name, streamPort), conn: c, done: make(chan struct{})}
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
			if _, err := fmt.Fprintf(c, "%08d\n", i); err != nil {
				s.fail(fmt.Errorf("write: %w", err))
				return
			}
		}
	}()
	go func() {
		defer s.wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			s.echoed.Add(int64(n))
			if err != nil {
				s.fail(fmt.Errorf("read: %w", err))
				return
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *stream) fail(err error) {
	select {
	case <-s.done:
		return // closed by the test
	default:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

func (s *stream) close() {
	select {
	case <-s.done:
		return
	default:
	}
	close(s.done)
	s.conn.Close()
	s.wg.Wait()
}

// retransmits is the kernel's count of the client's retransmitted
// segments: a segment dropped on the way (by a rule that matched it, or
// a table half-made) is sent again.
func (s *stream) retransmits() (uint32, error) {
	rc, err := s.conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var info *unix.TCPInfo
	var serr error
	if err := rc.Control(func(fd uintptr) { info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return 0, err
	}
	if serr != nil {
		return 0, serr
	}
	return info.Total_retrans, nil
}

// flowing waits until each stream has echoed more bytes than when it
// was called, with no error and no retransmission.
func flowing(t *testing.T, what string, ss ...*stream) {
	t.Helper()
	marks := make([]int64, len(ss))
	for i, s := range ss {
		marks[i] = s.echoed.Load()
	}
	eventually(t, 10*time.Second, func() string {
		var bad []string
		for i, s := range ss {
			s.mu.Lock()
			err := s.err
			s.mu.Unlock()
			if err != nil {
				t.Fatalf("%s: the connection %s broke: %v", what, s.name, err)
			}
			if r, err := s.retransmits(); err != nil || r != 0 {
				t.Fatalf("%s: the connection %s: %d segments retransmitted (%v), want 0", what, s.name, r, err)
			}
			if got := s.echoed.Load(); got <= marks[i]+64 {
				bad = append(bad, fmt.Sprintf("%s: %d bytes echoed, was %d", s.name, got, marks[i]))
			}
		}
		return strings.Join(bad, "; ")
	})
}

// TestClusterNetworkPolicyLiveChange: ClusterNetworkPolicy rules changed
// under traffic. Two long-lived TCP connections are open, z/a -> x/b
// (unrelated to every rule) and y/a -> x/a (the pair the rules are
// about), each pod pair across the two nodes. An Admin Deny of y to x is
// created, then an Admin Accept of y on TCP 80 at a better priority, then
// the Deny's priority is changed to beat the Accept, then the Deny is
// deleted. After each change, once the rule is in x's node's kernel, the
// first new connection from y/a to x/a is decided the new way (probed
// once, no retry); both long-lived connections keep flowing with no
// error and no segment retransmitted; the one the Deny is about keeps
// flowing too, because an established connection is accepted before the
// tiers (ct state established,related), while a new connection on the
// same port is denied.
func TestClusterNetworkPolicyLiveChange(t *testing.T) {
	slowSuite(t)
	pl := newPolicyLab(t, 2)
	n1, n2 := pl.Nodes[0], pl.Nodes[1]
	x, y, z := map[string]string{"ns": "x"}, map[string]string{"ns": "y"}, map[string]string{"ns": "z"}
	pl.namespace(t, "x", x)
	pl.namespace(t, "y", y)
	pl.namespace(t, "z", z)
	xa := pl.pod(t, n1, "x", "a", map[string]string{"app": "a"})
	xb := pl.pod(t, n1, "x", "b", map[string]string{"app": "b"})
	ya := pl.pod(t, n2, "y", "a", map[string]string{"app": "a"})
	za := pl.pod(t, n2, "z", "a", map[string]string{"app": "a"})
	newEchoServer(t, xa, streamPort)
	newEchoServer(t, xb, streamPort)

	path, crd := upstreamCNPCRD(t)
	if err := pl.API.ApplyCRDs(path, crd); err != nil {
		t.Fatal(err)
	}
	pl.waitClusterPoliciesOn(t)

	unrelated := openStream(t, za, xb)
	affected := openStream(t, ya, xa)
	flowing(t, "before any cluster policy", unrelated, affected)

	// inKernel waits until n1's Admin ingress chain holds (or, with
	// want false, no longer holds) the rule whose comment has rule.
	inKernel := func(rule string, want bool) {
		t.Helper()
		eventually(t, 10*time.Second, func() string {
			out, _ := pl.Run(n1.Netns, "nft", "list", "table", "inet", "reef")
			if strings.Contains(out, rule) != want {
				return fmt.Sprintf("%s: %q in table inet reef: %t, want %t", n1.Name, rule, !want, want)
			}
			return ""
		})
	}
	// first probes once: the first new connection after the change.
	first := func(step string, wants ...probeWant) {
		t.Helper()
		if msg := pl.expect(t, wants...); msg != "" {
			t.Fatalf("%s: the first new connections: %s", step, msg)
		}
	}

	// 1. An Admin Deny of y to x, every port.
	if err := pl.API.CreateCustom(cnpGVR, "", clusterIngress("deny-y", cnp.AdminTier, 20, x, y, cnp.ClusterNetworkPolicyRuleActionDeny, 0)); err != nil {
		t.Fatal(err)
	}
	inKernel("ClusterNetworkPolicy deny-y (Admin 20) ingress[0] Deny", true)
	first("Deny created", probeWant{ya, xa, "tcp", 80, false}, probeWant{za, xb, "tcp", 80, true})
	if c, err := dialFrom(ya, xa.IP, streamPort, time.Second); err == nil {
		c.Close()
		t.Fatalf("Deny created: a new connection y/a -> x/a:%d was made, want it denied", streamPort)
	}
	flowing(t, "Deny created (the established y/a -> x/a goes on)", unrelated, affected)
	showSteps(t, n1, "x/a", "ingress",
		"Admin 20 deny-y ingress[0]: Deny from every pod in namespaces ns=y",
		"NetworkPolicy: none isolates the pod",
		"otherwise: allowed: no policy isolates the pod (the default)")

	// 2. An Admin Accept of y on TCP 80, at a better priority (10).
	if err := pl.API.CreateCustom(cnpGVR, "", clusterIngress("accept-y-80", cnp.AdminTier, 10, x, y, cnp.ClusterNetworkPolicyRuleActionAccept, 80)); err != nil {
		t.Fatal(err)
	}
	inKernel("ClusterNetworkPolicy accept-y-80 (Admin 10) ingress[0] Accept", true)
	first("Accept at 10 created", probeWant{ya, xa, "tcp", 80, true}, probeWant{ya, xa, "tcp", 81, false})
	flowing(t, "Accept at 10 created", unrelated, affected)

	// 3. The Deny's priority changed to 5: it beats the Accept.
	dc, err := pl.API.Dynamic()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dc.Resource(cnpGVR).Patch(pl.ctx(t), "deny-y", types.MergePatchType, []byte(`{"spec":{"priority":5}}`), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch deny-y's priority: %v", err)
	}
	inKernel("ClusterNetworkPolicy deny-y (Admin 5) ingress[0] Deny", true)
	first("Deny moved to 5", probeWant{ya, xa, "tcp", 80, false}, probeWant{za, xb, "tcp", 80, true})
	flowing(t, "Deny moved to 5", unrelated, affected)
	showSteps(t, n1, "x/a", "ingress",
		"Admin 5 deny-y ingress[0]: Deny from every pod in namespaces ns=y",
		"Admin 10 accept-y-80 ingress[0]: Accept from every pod in namespaces ns=y",
		"NetworkPolicy: none isolates the pod",
		"otherwise: allowed: no policy isolates the pod (the default)")

	// 4. The Deny deleted: the Accept decides TCP 80, the default the rest.
	if err := pl.API.DeleteCustom(cnpGVR, "", "deny-y"); err != nil {
		t.Fatal(err)
	}
	inKernel("ClusterNetworkPolicy deny-y", false)
	first("Deny deleted", probeWant{ya, xa, "tcp", 80, true}, probeWant{ya, xa, "tcp", 81, true})
	c, err := dialFrom(ya, xa.IP, streamPort, 3*time.Second)
	if err != nil {
		t.Fatalf("Deny deleted: a new connection y/a -> x/a:%d: %v", streamPort, err)
	}
	c.Close()
	flowing(t, "Deny deleted", unrelated, affected)
	for _, s := range []*stream{unrelated, affected} {
		t.Logf("%s: %d bytes echoed, no error, no retransmission", s.name, s.echoed.Load())
		s.close()
	}
}

// waitClusterPoliciesOn waits until every node's status says cluster
// policies are "on", as they are once the daemons have found the
// ClusterNetworkPolicy CRD.
func (pl *policyLab) waitClusterPoliciesOn(t *testing.T) {
	t.Helper()
	eventually(t, 20*time.Second, func() string {
		for _, n := range pl.Nodes {
			st, err := n.Status()
			if err != nil {
				return err.Error()
			}
			if c := st.GetPolicy().GetClusterPolicies(); c != "on" {
				return n.Name + ": status says cluster policies are " + c
			}
		}
		return ""
	})
}
