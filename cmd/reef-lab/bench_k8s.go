package main

// reef-lab bench-k8s: pod startup latency as Kubernetes' scalability
// tests measure it (issue 27), in two clusters of the lab brought up in
// the same run, one with reef and one with the reference plugins (ptp,
// host-local, portmap). The pods are created at once through the API,
// and a watch opened before the first one times each pod as
// clusterloader2's PodStartupLatency does (k8sObserve); the report is in
// bench_k8s_report.go.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

const (
	k8sNamespace = "default"
	k8sRunLabel  = "bench-k8s-run"
	// k8sCreators is how many goroutines create a run's pods: enough
	// that the client (QPS 200, burst 400) is not what paces them.
	k8sCreators = 20
	// k8sRunTimeout bounds one run: its pods Running, then gone.
	k8sRunTimeout = 5 * time.Minute
)

// k8sPlugin is one cluster under the benchmark.
type k8sPlugin struct {
	label string
	c     *lab.Cluster
	cs    kubernetes.Interface
}

// k8sScenario is a set of pods created at once: perNode pods on each of
// the first nodes nodes.
type k8sScenario struct {
	name           string
	nodes, perNode int
}

func (s k8sScenario) pods() int { return s.nodes * s.perNode }

// k8sRun is one scenario run on one cluster.
type k8sRun struct {
	plugin, scenario string
	round            int
	pods             []k8sPodTimes
	createSpan       time.Duration // the first Create sent to the last returned
	busy             float64       // the machine's CPU busy fraction from the first Create to the last pod Running
	load             string        // 1-minute load average as the run started
	reopened         int           // watches reopened before every pod was Running (k8sObserver.consume)
}

func benchK8s(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-k8s", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## Pod startup latency (Kubernetes)" section`)
	images := fs.String("images", filepath.Join(os.TempDir(), "reef-k8s-images"), "where the images are built (cached)")
	rounds := fs.Int("rounds", 4, "runs of each scenario per plugin, half in each of its two clusters")
	onNode := fs.Int("pods-one-node", 100, "pods of the one-node scenario")
	perNode := fs.Int("pods-per-node", 30, "pods per node of the three-node scenario")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rounds < 2 {
		return errors.New("bench-k8s: --rounds is at least 2 (one per cluster of each plugin)")
	}
	if err := lab.CheckReferencePlugins(); err != nil {
		return err
	}
	r := &k8sReport{began: time.Now(), loadStart: tputLoad(), command: benchCommand("reef-lab bench-k8s", args),
		others: k8sOtherWork(), nice: k8sNice(), rounds: *rounds, plugins: []string{k8sLabel(false), k8sLabel(true)}}
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-k8s: "+format+"\n", a...) }
	progress("building the images (cached after the first run)")
	tars, err := k8simages.Build(ctx, k8simages.Options{Out: *images})
	if err != nil {
		return err
	}
	pause := tars[k8simages.Pause]
	if pause == "" {
		return fmt.Errorf("bench-k8s: no tar of %s in %s", k8simages.Pause, *images)
	}
	scenarios := []k8sScenario{
		{name: fmt.Sprintf("%d pods on one node", *onNode), nodes: 1, perNode: *onNode},
		{name: fmt.Sprintf("%d pods per node on three", *perNode), nodes: 3, perNode: *perNode},
	}
	for _, s := range scenarios {
		r.scenarios = append(r.scenarios, s.name)
	}
	// One cluster at a time, reef, reference, reference, reef: a drift of
	// the machine's other work over the run weighs on both alike, and
	// only one cluster's kubelets hold inotify instances next to those of
	// other runs on the machine.
	done := map[bool]int{}
	for _, ref := range []bool{false, true, true, false} {
		first := done[ref]
		n := *rounds / 2
		if first > 0 {
			n = *rounds - first
		}
		done[ref] += n
		if err := k8sCluster(ctx, r, *bin, pause, ref, scenarios, first, n, progress); err != nil {
			return err
		}
	}
	r.took, r.loadEnd = time.Since(r.began), tputLoad()
	return printSection(r.markdown(), *out)
}

func k8sLabel(ref bool) string {
	if ref {
		return "ptp+host-local+portmap"
	}
	return "reef"
}

// k8sCluster brings up a cluster with reef or the reference plugins,
// runs a warm-up and then rounds first+1 to first+n of every scenario
// on it, and tears it down.
func k8sCluster(ctx context.Context, r *k8sReport, bin, pause string, ref bool, scenarios []k8sScenario, first, n int,
	progress func(string, ...any)) error {
	if err := k8sWaitInotify(ctx, progress); err != nil {
		return err
	}
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer l.Close()
	p := &k8sPlugin{label: k8sLabel(ref)}
	progress("bringing up a cluster with %s", p.label)
	up := time.Now()
	c, err := l.StartCluster(lab.ClusterOptions{Images: []string{pause}, SandboxImage: k8simages.Pause, Reference: ref})
	if err != nil {
		if c != nil {
			fmt.Fprintln(os.Stderr, c.LogTail(30))
		}
		return fmt.Errorf("bench-k8s: %s cluster: %w", p.label, err)
	}
	if !ref {
		if err := k8sReefInfoLogs(c); err != nil {
			return err
		}
	}
	r.up = append(r.up, time.Since(up))
	p.c = c
	// No client timeout: it would end the runs' watches (each call is
	// bounded by its run's context instead).
	cfg := c.API.AdminConfig()
	cfg.Timeout = 0
	if p.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if err := k8sWaitServiceAccount(ctx, p.cs); err != nil {
		return err
	}
	warm := k8sScenario{name: "warm-up", nodes: 3, perNode: 5}
	progress("%s: warm-up, %d pods (not counted)", p.label, warm.pods())
	if _, err := k8sRunOnce(ctx, p, warm, -1, pause); err != nil {
		return err
	}
	for round := first; round < first+n; round++ {
		for _, s := range scenarios {
			progress("round %d of %d: %s, %s", round+1, r.rounds, p.label, s.name)
			run, err := k8sRunOnce(ctx, p, s, round, pause)
			if err != nil {
				return err
			}
			p50, _ := meshQuantile(run.startups(), 0.5)
			p99, _ := meshQuantile(run.startups(), 0.99)
			progress("  p50 %s, p99 %s, created in %s, CPU busy %.0f%%, load %s", p50.Round(time.Millisecond),
				p99.Round(time.Millisecond), run.createSpan.Round(time.Millisecond), 100*run.busy, run.load)
			r.runs = append(r.runs, run)
		}
	}
	progress("tearing the %s cluster down", p.label)
	return nil
}

// k8sReefInfoLogs restarts the reef daemons at logLevel info, as a
// production node runs them (the lab's nodes log at debug); no pod runs
// yet on the nodes.
func k8sReefInfoLogs(c *lab.Cluster) error {
	for _, n := range c.Nodes {
		cfg, err := os.ReadFile(n.Config)
		if err != nil {
			return err
		}
		if err := os.WriteFile(n.Config, []byte(strings.Replace(string(cfg), "logLevel: debug", "logLevel: info", 1)), 0o644); err != nil {
			return err
		}
		if err := n.Stop(); err != nil {
			return fmt.Errorf("bench-k8s: stop reef on %s: %w", n.Name, err)
		}
		if err := n.Start(); err != nil {
			return fmt.Errorf("bench-k8s: start reef on %s: %w", n.Name, err)
		}
	}
	return nil
}

// k8sWaitServiceAccount waits until the controller-manager has made the
// namespace's default service account, without which the API refuses
// pods.
func k8sWaitServiceAccount(ctx context.Context, cs kubernetes.Interface) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	opts := metav1.ListOptions{FieldSelector: "metadata.name=default"}
	list, err := cs.CoreV1().ServiceAccounts(k8sNamespace).List(ctx, opts)
	if err != nil {
		return fmt.Errorf("bench-k8s: list service accounts: %w", err)
	}
	if len(list.Items) > 0 {
		return nil
	}
	opts.ResourceVersion = list.ResourceVersion
	w, err := cs.CoreV1().ServiceAccounts(k8sNamespace).Watch(ctx, opts)
	if err != nil {
		return fmt.Errorf("bench-k8s: watch service accounts: %w", err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Added {
			return nil
		}
	}
	return fmt.Errorf("bench-k8s: no service account %s/default within a minute", k8sNamespace)
}

// k8sRunOnce creates the scenario's pods at once, times each until the
// watch sees it Running, then deletes them all and waits until the API
// has none left (kubelet deletes a pod's object once its sandbox is
// stopped, CNI DEL included, and its resources reclaimed).
func k8sRunOnce(ctx context.Context, p *k8sPlugin, s k8sScenario, round int, image string) (*k8sRun, error) {
	ctx, cancel := context.WithTimeout(ctx, k8sRunTimeout)
	defer cancel()
	id := fmt.Sprintf("r%d-n%d-%d", round+1, s.nodes, time.Now().UnixNano()%1e6)
	if round < 0 {
		id = fmt.Sprintf("warm-%d", time.Now().UnixNano()%1e6)
	}
	sel := k8sRunLabel + "=" + id
	pods := k8sPods(s, p.c, id)
	open := func(rv string) (watch.Interface, error) {
		return p.cs.CoreV1().Pods(k8sNamespace).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
	}
	w, err := open("")
	if err != nil {
		return nil, fmt.Errorf("bench-k8s: watch pods %s: %w", sel, err)
	}
	obs := newK8sObserver(len(pods))
	go obs.consume(w, open)
	run := &k8sRun{plugin: p.label, scenario: s.name, round: round, load: tputLoad1()}
	cpu0, _ := cpuTimes()
	began := time.Now()
	if err := k8sCreate(ctx, p.cs, pods); err != nil {
		return nil, err
	}
	run.createSpan = time.Since(began)
	select {
	case <-obs.running:
	case <-ctx.Done():
		return nil, fmt.Errorf("bench-k8s: %s, %s: %d of %d pods Running within %s: %s", p.label, s.name,
			obs.countRunning(), len(pods), k8sRunTimeout, k8sWhyNotRunning(p.cs, sel))
	case err := <-obs.failed:
		return nil, fmt.Errorf("bench-k8s: %s, %s: %w", p.label, s.name, err)
	}
	cpu1, _ := cpuTimes()
	run.busy = k8sBusy(cpu0, cpu1)
	run.pods = obs.times()
	run.reopened = obs.reopenedWatches()
	if err := k8sCheckAddresses(p, run.pods); err != nil {
		return nil, err
	}
	grace := int64(30)
	if err := p.cs.CoreV1().Pods(k8sNamespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace},
		metav1.ListOptions{LabelSelector: sel}); err != nil {
		return nil, fmt.Errorf("bench-k8s: delete pods %s: %w", sel, err)
	}
	select {
	case <-obs.gone:
	case <-ctx.Done():
		return nil, fmt.Errorf("bench-k8s: %s, %s: pods not gone within %s: %s", p.label, s.name, k8sRunTimeout, k8sWhyNotRunning(p.cs, sel))
	case err := <-obs.failed:
		return nil, fmt.Errorf("bench-k8s: %s, %s: %w", p.label, s.name, err)
	}
	return run, nil
}

// k8sCheckAddresses makes sure that the plugin under test gave each pod
// its address: one of the pool's for reef, one of its node's range for
// the reference plugins.
func k8sCheckAddresses(p *k8sPlugin, pods []k8sPodTimes) error {
	ranges := map[string]netip.Prefix{}
	for _, n := range p.c.Nodes {
		want := lab.ClusterPool
		if p.label == k8sLabel(true) {
			want = lab.ReferenceRange(n.Node)
		}
		ranges[n.Name] = netip.MustParsePrefix(want)
	}
	for _, t := range pods {
		ip, err := netip.ParseAddr(t.ip)
		if err != nil || !ranges[t.node].Contains(ip) {
			return fmt.Errorf("bench-k8s: %s: a pod on %s Running with address %q, not one of %s", p.label, t.node, t.ip, ranges[t.node])
		}
	}
	return nil
}

// k8sPods are a run's pods: the pause image (as clusterloader2's latency
// pods), pinned to their node by its hostname label, so that they still
// go through the scheduler.
func k8sPods(s k8sScenario, c *lab.Cluster, id string) []*corev1.Pod {
	var pods []*corev1.Pod
	for i := range s.pods() {
		node := c.Nodes[i%s.nodes].Name
		pods = append(pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lat-%s-%03d", id, i), Namespace: k8sNamespace,
				Labels: map[string]string{k8sRunLabel: id}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelHostname: node},
				Containers:   []corev1.Container{{Name: "pause", Image: k8simages.Pause, ImagePullPolicy: corev1.PullNever}},
			},
		})
	}
	return pods
}

// k8sCreate creates the pods from k8sCreators goroutines.
func k8sCreate(ctx context.Context, cs kubernetes.Interface, pods []*corev1.Pod) error {
	next := make(chan *corev1.Pod)
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for range k8sCreators {
		wg.Go(func() {
			for pod := range next {
				if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("bench-k8s: create pod %s: %w", pod.Name, err)
				}
			}
		})
	}
	for _, pod := range pods {
		next <- pod
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// k8sWhyNotRunning counts the selected pods by phase and gives the first
// waiting reason, for a run that timed out.
func k8sWhyNotRunning(cs kubernetes.Interface, sel string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cs.CoreV1().Pods(k8sNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return err.Error()
	}
	phases := map[corev1.PodPhase]int{}
	why := ""
	for _, pod := range list.Items {
		phases[pod.Status.Phase]++
		for _, st := range pod.Status.ContainerStatuses {
			if st.State.Waiting != nil && why == "" {
				why = fmt.Sprintf("; %s: %s %s", pod.Name, st.State.Waiting.Reason, st.State.Waiting.Message)
			}
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Status != corev1.ConditionTrue && cond.Message != "" && why == "" {
				why = fmt.Sprintf("; %s: %s %s", pod.Name, cond.Reason, cond.Message)
			}
		}
	}
	return fmt.Sprintf("%d pods left, by phase %v%s", len(list.Items), phases, why)
}
