package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/reefcni/reef/internal/poll"
)

// The lab's Kubernetes API, for the NetworkPolicy tests: a real etcd and
// kube-apiserver, built by `make deps-kube` (internal/lab/kube/build.sh),
// in a namespace of their own on the underlay, so that the reef daemons
// reach it from their nodes as they would reach a cluster's API. There is
// no controller-manager, scheduler or kubelet: what a test wants to exist
// (namespaces, pods with spec.nodeName, policies), it creates. Two things
// follow from that: a deleted namespace stays Terminating (no namespace
// controller empties it), and a pod with spec.nodeName set waits for a
// kubelet to confirm a graceful delete, so tests delete pods with
// GracePeriodSeconds 0.
var (
	// KubeAPIAddr is the API server's underlay address: above the nodes
	// (.11 on, a hundred of them in the largest bench) and clear of the
	// other hosts the lab and its tests place (.1, .60-.62, .99,
	// .200-.205, .250, .254).
	KubeAPIAddr = netip.MustParseAddr("192.168.77.240")
	// KubeServiceRange is --service-cluster-ip-range; the API server
	// takes its first address for the kubernetes service.
	KubeServiceRange = netip.MustParsePrefix("10.96.0.0/16")
	// KubeServiceRange6 is the IPv6 range of a dual-stack cluster's
	// --service-cluster-ip-range, after KubeServiceRange (IPv4 is the
	// primary family). /112: kube-apiserver refuses an IPv6 range wider
	// than /108.
	KubeServiceRange6 = netip.MustParsePrefix("fd00:10:96::/112")
	// KubeAPIAddr6 is the API's namespace's IPv6 address on the lab's
	// IPv6 underlay (Underlay6) in a dual-stack cluster.
	KubeAPIAddr6 = netip.MustParseAddr("fd77::f0")
)

// KubeAPIPort is the API server's secure port.
const KubeAPIPort = 6443

// KubeBinDir is where `make deps-kube` installs kube-apiserver and etcd:
// $REEF_KUBE_BIN_DIR, or else the Go bin dir ($GOPATH/bin).
func KubeBinDir() string {
	if d := os.Getenv("REEF_KUBE_BIN_DIR"); d != "" {
		return d
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	if gopath == "" {
		gopath = filepath.Join(os.Getenv("HOME"), "go")
	}
	return filepath.Join(gopath, "bin")
}

// KubeAPI is an etcd and a kube-apiserver in the lab namespace Netns,
// kube-apiserver on the underlay at Address, etcd on 127.0.0.1 there.
// This process, in the host's namespace, reaches it through DialIn, as
// AdminConfig does; the nodes reach it directly.
type KubeAPI struct {
	Lab     *Lab
	Netns   string
	Address netip.Addr
	Dir     string // keys, certificates, the token file, etcd's data, the logs

	etcdBin, apiserverBin string
	caPEM                 []byte
	adminToken            string
	// opts.Cluster: the API of a whole cluster (k8s.go): service
	// accounts made by the controller-manager, the Node authorizer, and
	// a client certificate to reach the kubelets.
	opts KubeAPIOptions
	// tokens of the cluster's components by user name (opts.Cluster).
	tokens map[string]string

	mu        sync.Mutex
	etcd      *kubeProc
	apiserver *kubeProc
	closed    bool
}

// KubeAPIOptions shape the lab's Kubernetes API.
type KubeAPIOptions struct {
	// Cluster: the API of a cluster with a controller-manager, a
	// scheduler and kubelets (Lab.StartCluster), not the API alone.
	Cluster bool
	// Nodes are the node names whose kubelets get a token (Cluster).
	Nodes []string
	// DualStack: the service range has both families,
	// KubeServiceRange then KubeServiceRange6.
	DualStack bool
}

// ServiceRanges is --service-cluster-ip-range: KubeServiceRange, and
// KubeServiceRange6 after it when dual is set.
func ServiceRanges(dual bool) string {
	if dual {
		return KubeServiceRange.String() + "," + KubeServiceRange6.String()
	}
	return KubeServiceRange.String()
}

// StartKubeAPI starts the lab's Kubernetes API and waits until it is
// ready; Lab.Close stops it. A lab has one.
func (l *Lab) StartKubeAPI() (*KubeAPI, error) { return l.StartKubeAPIWith(KubeAPIOptions{}) }

// StartKubeAPIWith is StartKubeAPI with options.
func (l *Lab) StartKubeAPIWith(opts KubeAPIOptions) (*KubeAPI, error) {
	bins := KubeBinDir()
	k := &KubeAPI{Lab: l, Netns: l.Prefix + "-kapi", Address: KubeAPIAddr, Dir: filepath.Join(l.Dir, "kube-api"), opts: opts}
	for _, b := range []struct {
		name string
		path *string
	}{{"etcd", &k.etcdBin}, {"kube-apiserver", &k.apiserverBin}} {
		p, err := exec.LookPath(filepath.Join(bins, b.name))
		if err != nil {
			return nil, fmt.Errorf("lab: %s not found in %s (run make deps-kube): %w", b.name, bins, err)
		}
		*b.path = p
	}
	if netnsExists(k.Netns) {
		return nil, fmt.Errorf("lab %s: the Kubernetes API is already started", l.Prefix)
	}
	if err := os.MkdirAll(k.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := k.writeCredentials(); err != nil {
		return nil, fmt.Errorf("kube-api credentials: %w", err)
	}
	if _, err := l.AddHost("kapi", k.Address); err != nil {
		return nil, err
	}
	// Nodes on SubnetB reach the API through the router of
	// AddCrossRouter, which may come later: the way back is set now.
	if err := l.IP(k.Netns, "route", "replace", SubnetB.String(), "via", RouterA.String()); err != nil {
		l.DelNetns(k.Netns)
		return nil, err
	}
	l.mu.Lock()
	l.spawned = append(l.spawned, func() { k.Close() })
	l.mu.Unlock()
	if err := k.startEtcd(); err != nil {
		k.Close()
		l.DelNetns(k.Netns)
		return nil, err
	}
	if err := k.Start(); err != nil {
		k.Close()
		l.DelNetns(k.Netns)
		return nil, err
	}
	return k, nil
}

func (k *KubeAPI) path(name string) string { return filepath.Join(k.Dir, name) }

// Server is the API's URL.
func (k *KubeAPI) Server() string {
	return "https://" + netip.AddrPortFrom(k.Address, KubeAPIPort).String()
}

// CA is the PEM certificate of the CA that signed the API's serving
// certificate.
func (k *KubeAPI) CA() []byte { return append([]byte(nil), k.caPEM...) }

// AdminConfig is a client config of a member of system:masters that
// connects from the API's namespace, so it works from this process.
func (k *KubeAPI) AdminConfig() *rest.Config {
	return &rest.Config{
		Host:            k.Server(),
		BearerToken:     k.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: k.CA()},
		Dial:            DialIn(k.Netns),
		QPS:             200,
		Burst:           400,
		Timeout:         30 * time.Second,
	}
}

// Admin is a clientset of AdminConfig.
func (k *KubeAPI) Admin() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(k.AdminConfig())
}

// WriteKubeconfig writes a kubeconfig (mode 0600) for the API with a
// bearer token, such as one of ServiceAccountToken: what a node's
// kubernetes.kubeconfig names.
func (k *KubeAPI) WriteKubeconfig(path, token string) error {
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"reef-lab": {Server: k.Server(), CertificateAuthorityData: k.CA()}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"reef": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"reef-lab": {Cluster: "reef-lab", AuthInfo: "reef"}},
		CurrentContext: "reef-lab",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// ServiceAccountToken creates the service account namespace/name if it is
// missing and returns a token of it from the TokenRequest API, valid for
// d (at least 10 minutes, the API's floor; 0 is an hour).
func (k *KubeAPI) ServiceAccountToken(namespace, name string, d time.Duration) (string, error) {
	c, err := k.Admin()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := c.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create service account %s/%s: %w", namespace, name, err)
	}
	if d == 0 {
		d = time.Hour
	}
	secs := int64(d / time.Second)
	tr, err := c.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of service account %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// Stop kills kube-apiserver and keeps etcd: the API is gone at once, as
// a crashed or cut-off one is (a SIGTERM'd one drains its clients' watches
// for longer than a test waits), and its data stays for Start.
func (k *KubeAPI) Stop() error {
	k.mu.Lock()
	p := k.apiserver
	k.apiserver = nil
	k.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.stop(syscall.SIGKILL, 10*time.Second)
}

// Start starts kube-apiserver, on the etcd data and the keys it had
// before, and waits until /readyz says ok.
func (k *KubeAPI) Start() error {
	k.mu.Lock()
	if k.closed || k.etcd == nil {
		k.mu.Unlock()
		return errors.New("kube-api: closed")
	}
	if k.apiserver != nil && !k.apiserver.exited() {
		k.mu.Unlock()
		return errors.New("kube-api: kube-apiserver already running")
	}
	p, err := k.spawn("kube-apiserver", k.apiserverBin, k.apiserverArgs()...)
	if err != nil {
		k.mu.Unlock()
		return err
	}
	k.apiserver = p
	k.mu.Unlock()
	return k.waitReady(p, 90*time.Second)
}

// Close stops kube-apiserver and etcd. It is safe to call more than once.
func (k *KubeAPI) Close() error {
	k.mu.Lock()
	procs := []*kubeProc{k.apiserver, k.etcd}
	k.apiserver, k.etcd, k.closed = nil, nil, true
	k.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p != nil {
			errs = append(errs, p.stop(syscall.SIGKILL, 10*time.Second))
		}
	}
	return errors.Join(errs...)
}

// LogTail returns the last lines of kube-apiserver's and etcd's logs.
func (k *KubeAPI) LogTail(lines int) string {
	return "kube-apiserver:\n" + logTail(k.path("kube-apiserver.log"), lines) +
		"\netcd:\n" + logTail(k.path("etcd.log"), lines)
}

func (k *KubeAPI) apiserverArgs() []string {
	issuer := k.Server()
	args := []string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=" + k.Address.String(),
		"--advertise-address=" + k.Address.String(),
		"--secure-port=" + strconv.Itoa(KubeAPIPort),
		"--cert-dir=" + k.path("certs"),
		"--tls-cert-file=" + k.path("apiserver.crt"),
		"--tls-private-key-file=" + k.path("apiserver.key"),
		"--token-auth-file=" + k.path("tokens.csv"),
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + k.path("sa.pub"),
		"--service-account-signing-key-file=" + k.path("sa.key"),
		"--api-audiences=" + issuer,
		"--service-cluster-ip-range=" + ServiceRanges(k.opts.DualStack),
		"--profiling=false",
	}
	if !k.opts.Cluster {
		return append(args,
			"--authorization-mode=RBAC",
			// ServiceAccount admission wants every pod's service account
			// to exist, which the controller-manager would create.
			"--disable-admission-plugins=ServiceAccount",
		)
	}
	return append(args,
		"--client-ca-file="+k.path("ca.crt"),
		// kubeadm's: the Node authorizer and NodeRestriction keep a
		// kubelet to its own node's objects.
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+k.path("apiserver-kubelet-client.crt"),
		"--kubelet-client-key="+k.path("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
	)
}

func (k *KubeAPI) startEtcd() error {
	peer := "http://127.0.0.1:2380"
	p, err := k.spawn("etcd", k.etcdBin,
		"--name=kapi",
		"--data-dir="+k.path("etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=kapi="+peer,
		// Throw-away data: no fsync, as in Kubernetes' own integration tests.
		"--unsafe-no-fsync",
	)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.etcd = p
	k.mu.Unlock()
	hc := &http.Client{Transport: &http.Transport{DialContext: DialIn(k.Netns)}, Timeout: 2 * time.Second}
	defer hc.CloseIdleConnections()
	err = poll.Until(30*time.Second, func() error {
		if p.exited() {
			return poll.Stop(fmt.Errorf("etcd exited: %v", p.exitErr()))
		}
		resp, err := hc.Get("http://127.0.0.1:2379/health")
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("kube-api: etcd not healthy: %v\n%s", err, logTail(p.log, 30))
	}
	return nil
}

func (k *KubeAPI) waitReady(p *kubeProc, timeout time.Duration) error {
	c, err := k.Admin()
	if err != nil {
		return err
	}
	err = poll.Until(timeout, func() error {
		if p.exited() {
			return poll.Stop(fmt.Errorf("kube-apiserver exited: %v", p.exitErr()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := c.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil && string(body) != "ok" {
			err = fmt.Errorf("readyz: %q", body)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("kube-api: kube-apiserver not ready: %v\n%s", err, k.LogTail(30))
	}
	return nil
}

// DialIn returns a dial function whose connections leave from the lab
// namespace netns: how this process, in the host's namespace, reaches a
// server on the underlay. A socket stays in the namespace it was made in.
func DialIn(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.WithNetNSPath(NetnsPath(netns), func(ns.NetNS) error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("dial %s from %s: %w", addr, netns, err)
		}
		return c, nil
	}
}

// kubeProc is etcd or kube-apiserver, run through nsenter, which execs it
// in place: the pid is the server's.
type kubeProc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // of Wait, once done is closed
}

// spawn starts bin in the API's namespace, its output appended to
// <name>.log (a restart continues the log).
func (k *KubeAPI) spawn(name, bin string, args ...string) (*kubeProc, error) {
	return spawnIn(k.Netns, k.path(name+".log"), bin, args...)
}

// spawnIn starts bin in the lab namespace netns, its output appended to
// log.
func spawnIn(netns, log, bin string, args ...string) (*kubeProc, error) {
	p := &kubeProc{log: log, done: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command("nsenter", append([]string{"--net=" + NetnsPath(netns), "--", bin}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *kubeProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *kubeProc) exitErr() error {
	<-p.done
	return p.err
}

// stop signals the process and waits for it, with SIGKILL after timeout.
func (p *kubeProc) stop(sig syscall.Signal, timeout time.Duration) error {
	name := filepath.Base(p.cmd.Args[3])
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("kube-api: %s did not exit within %s of %s", name, timeout, sig)
	}
	if sig == syscall.SIGTERM && p.err != nil {
		return fmt.Errorf("kube-api: %s exited with %v after SIGTERM\n%s", name, p.err, logTail(p.log, 10))
	}
	return nil
}

func logTail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
