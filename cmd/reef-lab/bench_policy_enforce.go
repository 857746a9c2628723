package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
	"github.com/reefcni/reef/policy"
)

// bench-policy's ADD, enforcement and memory figures.

// adds times ADDs through libcni on node1 (policy on) and, if withOff,
// on node3 (policy off), alternating; every pod's object is created
// before the timed ADD, as kubelet's is long before its sandbox.
func (b *policyBench) adds(n int, withOff bool) (on, off []time.Duration, err error) {
	var pods []*lab.Pod
	defer func() {
		for _, p := range pods {
			p.Del()
			p.Remove()
		}
	}()
	var objs []string
	for i := range n {
		name := fmt.Sprintf("add-%d-%d", b.seq, i)
		objs = append(objs, name)
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name, Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%100)}},
			Spec: corev1.PodSpec{NodeName: b.on[0].Name, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if _, err := b.c.CoreV1().Pods("bench").Create(b.ctx, p, metav1.CreateOptions{}); err != nil {
			return nil, nil, err
		}
	}
	b.seq++
	// The objects a second before their sandboxes, as kubelet's are long
	// before: the scenario, not a wait. reef shows no count of the pods its
	// informer holds to wait for; an ADD whose pod it has not seen yet
	// waits for it (podWait), and the figure would show that.
	time.Sleep(time.Second)
	for i := range n {
		p, err := b.on[0].NewPodNetns("bench", objs[i])
		if err != nil {
			return nil, nil, err
		}
		pods = append(pods, p)
		t0 := time.Now()
		if err := p.Add(); err != nil {
			return nil, nil, err
		}
		on = append(on, time.Since(t0))
		if !withOff {
			continue
		}
		q, err := b.off.NewPodNetns("bench", objs[i])
		if err != nil {
			return nil, nil, err
		}
		pods = append(pods, q)
		t0 = time.Now()
		if err := q.Add(); err != nil {
			return nil, nil, err
		}
		off = append(off, time.Since(t0))
	}
	return on, off, nil
}

// enforcement creates policies one at a time, each selecting a pod on
// each node, and times Create -> its chain in both nodes' table; each is
// deleted before the next.
func (b *policyBench) enforcement(n int) ([]time.Duration, error) {
	var targets []*lab.KubePod
	for i, node := range b.on {
		p, err := b.api.RunPod(node, "bench", fmt.Sprintf("target-%d", i), map[string]string{"role": "target"}, nil)
		if err != nil {
			return nil, err
		}
		targets = append(targets, p)
	}
	defer func() {
		for _, p := range targets {
			b.api.DeletePod(p)
			p.Remove()
		}
	}()
	conns, closeAll, err := b.nftConns()
	defer closeAll()
	if err != nil {
		return nil, err
	}
	var out []time.Duration
	for i := range n {
		d, err := b.enforceOne(conns, i)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// nftConns opens an nftables connection in each policy-on node's
// namespace; closeAll closes what was opened, also after an error.
func (b *policyBench) nftConns() (conns []*nftables.Conn, closeAll func(), err error) {
	var files []*os.File
	closeAll = func() {
		for _, f := range files {
			f.Close()
		}
	}
	conns = make([]*nftables.Conn, len(b.on))
	for i, node := range b.on {
		f, err := os.Open(lab.NetnsPath(node.Netns))
		if err != nil {
			return nil, closeAll, err
		}
		files = append(files, f)
		if conns[i], err = nftables.New(nftables.WithNetNSFd(int(f.Fd()))); err != nil {
			return nil, closeAll, err
		}
	}
	return conns, closeAll, nil
}

// hasChain says whether table inet reef holds the chain name.
func hasChain(c *nftables.Conn, name string) bool {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(chains, func(ch *nftables.Chain) bool { return ch.Table.Name == policy.TableID.Name && ch.Name == name })
}

// enforceOne creates the i-th measured policy, times Create -> its chain
// on every node (the slowest node's time), then deletes it and waits for
// the chain to go.
func (b *policyBench) enforceOne(conns []*nftables.Conn, i int) (time.Duration, error) {
	name := fmt.Sprintf("measured-%d", i)
	chain := "in.bench." + name
	pol := benchNetpol("bench", name, map[string]string{"role": "target"}, i)
	t0 := time.Now()
	if _, err := b.c.NetworkingV1().NetworkPolicies("bench").Create(b.ctx, pol, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	failed := false
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Asked every millisecond: the time to the chain is
			// measured by the call that sees it.
			err := poll.Every(time.Millisecond, 30*time.Second, func() error {
				if !hasChain(c, chain) {
					return errors.New("no chain")
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = true
				return
			}
			worst = max(worst, time.Since(t0))
		}()
	}
	wg.Wait()
	if failed {
		return 0, fmt.Errorf("policy %s not enforced on every node after 30s", name)
	}
	if err := b.c.NetworkingV1().NetworkPolicies("bench").Delete(b.ctx, name, metav1.DeleteOptions{}); err != nil {
		return 0, err
	}
	for _, c := range conns {
		if err := poll.Until(30*time.Second, func() error {
			if hasChain(c, chain) {
				return fmt.Errorf("chain %s still in table inet reef after its policy's deletion", chain)
			}
			return nil
		}); err != nil {
			return 0, err
		}
	}
	return worst, nil
}

// settledMemory waits until node1 has seen the given number of policies
// and cluster policies, then a minute more, and reads its memory; series
// gets the samples on the way.
func (b *policyBench) settledMemory(policies, clusters int, series *[]string) (lab.Memory, error) {
	if err := b.waitLoaded(policies, clusters); err != nil {
		return lab.Memory{}, err
	}
	// The RSS of a daemon that has just compiled a burst of changes holds
	// freed heap the runtime returns to the kernel over the next minute
	// (its background scavenger); the figure is the settled one, after a
	// minute, with the samples on the way in the report.
	var m lab.Memory
	var waited time.Duration
	for _, at := range []time.Duration{5 * time.Second, 15 * time.Second, 30 * time.Second, 60 * time.Second} {
		time.Sleep(at - waited) // samples at set times: the measurement, not a wait
		waited = at
		var err error
		if m, err = b.on[0].Memory(); err != nil {
			return m, err
		}
		*series = append(*series, fmt.Sprintf("%s (RSS %s) after %s", meshMiB(m.Anon), meshMiB(m.RSS), at))
	}
	return m, nil
}
