package policy

import (
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// podInfo is a pod as the compiler uses it.
type podInfo struct {
	pod   *Pod
	addrs []netip.Addr
	local bool // one of this node's: addrs are its endpoints'
}

// index is the Input arranged for selection. Once built it is not
// changed, except for its peers and selectors caches: Recompile makes a
// patched copy (index.patched).
type index struct {
	nsLabels map[string]labels.Set
	pods     []podInfo            // every pod with an address, in no order
	byNS     map[string][]podInfo // the same, per namespace
	local    map[string][]netip.Addr
	nodeName string // Input.NodeName
	// all are the API's pods by namespace/name, those without an address
	// included; over are pods Recompile put in since (the ADDs' own),
	// looked up first.
	all, over map[string]*Pod
	peers     map[string][]Range // by Rule.PeerKey: computed once per compile
	// selected are the cluster policies' namespace and pod peers, by
	// their selectors as parsed (selectionKey): computed once per compile.
	// With 50 cluster policies, 48 rules naming every namespace each
	// sorted the same thousand addresses again.
	selected map[string]selection
	sels     *selectors
	// affected are the policies a pod can affect by its namespace: one
	// Compile's, shared by the indexes Recompile patches from it.
	affected *byNamespace
	nodes    []*corev1.Node // for cluster policies' node peers
}

func newIndex(in Input) *index {
	ix := &index{nsLabels: map[string]labels.Set{}, byNS: map[string][]podInfo{}, local: localAddrs(in.Local), nodeName: nodeNameOf(in),
		all: make(map[string]*Pod, len(in.Pods)), peers: map[string][]Range{}, selected: map[string]selection{}, sels: &selectors{},
		nodes: in.Nodes, affected: &byNamespace{}}
	for _, ns := range in.Namespaces {
		if ns != nil {
			ix.nsLabels[ns.Name] = ns.Labels
		}
	}
	for _, p := range in.Pods {
		if p == nil || p.HostNetwork || p.Done {
			continue
		}
		k := p.Namespace + "/" + p.Name
		if _, seen := ix.all[k]; seen {
			continue
		}
		ix.all[k] = p
		if pi, ok := ix.info(k, p); ok {
			ix.pods = append(ix.pods, pi)
		}
	}
	ix.pods = dropStaleAddrs(ix.pods)
	// No order is kept: every result built from the pods is sorted
	// (peers, named ports, selected addresses), so it depends on the set
	// of pods, not on the order the informer lists them in.
	for _, pi := range ix.pods {
		ix.byNS[pi.pod.Namespace] = append(ix.byNS[pi.pod.Namespace], pi)
	}
	return ix
}

// dropStaleAddrs takes out of each pod being deleted (Terminating) whose
// addresses are its status' the addresses that a pod not being deleted
// has in its status too: kubelet's DEL comes after the deletion starts,
// and the node may give the address to a new pod while the old object
// stays, so the address is the new pod's. A pod left with no address is
// dropped. This node's pods (their endpoints') are left alone: Recompile
// patches only those, and every other pod is as the last full compile
// made it.
func dropStaleAddrs(pods []podInfo) []podInfo {
	stale := func(pi podInfo) bool { return pi.pod.Terminating && !pi.local }
	if !slices.ContainsFunc(pods, stale) {
		return pods
	}
	live := map[netip.Addr]bool{}
	for _, pi := range pods {
		if !pi.local && !pi.pod.Terminating {
			for _, a := range pi.addrs {
				live[a] = true
			}
		}
	}
	isLive := func(a netip.Addr) bool { return live[a] }
	out := make([]podInfo, 0, len(pods))
	for _, pi := range pods {
		if stale(pi) && slices.ContainsFunc(pi.addrs, isLive) {
			pi.addrs = slices.DeleteFunc(slices.Clone(pi.addrs), isLive)
			if len(pi.addrs) == 0 {
				continue
			}
		}
		out = append(out, pi)
	}
	return out
}

// nodeNameOf is in.NodeName, or "" while in.Local has an endpoint
// without a name (Input.NodeName).
func nodeNameOf(in Input) string {
	if slices.ContainsFunc(in.Local, func(ep Endpoint) bool { return ep.Name == "" }) {
		return ""
	}
	return in.NodeName
}

func localAddrs(eps []Endpoint) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, ep := range eps {
		if ep.IP.IsValid() && ep.Name != "" {
			k := ep.Namespace + "/" + ep.Name
			m[k] = append(m[k], ep.IP.Unmap())
		}
	}
	return m
}

// info is pod p (key k) as selection sees it: a local pod's addresses
// are its endpoints', another's its status'. ok is false for a pod with
// no address: a pod of this node with no endpoint has none, whatever its
// status says (Input.NodeName).
func (ix *index) info(k string, p *Pod) (podInfo, bool) {
	addrs, local := ix.local[k]
	if !local {
		if ix.nodeName != "" && p.NodeName == ix.nodeName {
			return podInfo{}, false
		}
		addrs = p.IPs // the informer's: read, never changed here
	}
	if len(addrs) == 0 {
		return podInfo{}, false
	}
	if !increasing(addrs) {
		addrs = slices.Clone(addrs)
		slices.SortFunc(addrs, netip.Addr.Compare)
		addrs = slices.Compact(addrs)
	}
	return podInfo{pod: p, addrs: addrs, local: local}, true
}

// patched is the index Recompile compiles against: ix's view of the API
// with pod in it as it is now (nil: unchanged) and local as this node's
// endpoints. It is what newIndex gives for that Input; ix is not changed.
// Its cost is in the pods whose addresses change, not in all pods; those
// are returned (as the API has them) for Recompile.
func (ix *index) patched(local []Endpoint, pod *Pod) (*index, []*Pod) {
	nx := &index{nsLabels: ix.nsLabels, all: ix.all, nodes: ix.nodes, local: localAddrs(local), nodeName: ix.nodeName, peers: map[string][]Range{}, selected: map[string]selection{}, sels: ix.sels, affected: ix.affected,
		over: make(map[string]*Pod, len(ix.over)+1)}
	for k, p := range ix.over {
		nx.over[k] = p
	}
	touched, pods := nx.touched(ix, pod)
	if len(touched) == 0 {
		nx.pods, nx.byNS = ix.pods, ix.byNS
		maps.Copy(nx.selected, ix.selected)
		return nx, pods
	}
	key := func(p *Pod) string { return p.Namespace + "/" + p.Name }
	// Only pods of these namespaces can be touched: the others' keys are
	// not made (a string each, of every pod of the cluster).
	inTouched := map[string]bool{}
	for k := range touched {
		ns, _, _ := strings.Cut(k, "/")
		inTouched[ns] = true
	}
	namespaces := map[string]bool{}
	nx.pods = make([]podInfo, 0, len(ix.pods)+len(touched))
	for _, pi := range ix.pods {
		if inTouched[pi.pod.Namespace] && touched[key(pi.pod)] {
			namespaces[pi.pod.Namespace] = true
			continue
		}
		nx.pods = append(nx.pods, pi)
	}
	var fresh []podInfo
	for k := range touched {
		p := nx.pod(k)
		if p == nil {
			continue // not in the API: no policy selects or names it
		}
		pods = append(pods, p)
		if p.HostNetwork || p.Done {
			continue
		}
		if pi, ok := nx.info(k, p); ok {
			fresh = append(fresh, pi)
			namespaces[p.Namespace] = true
		}
	}
	nx.pods = append(nx.pods, fresh...)
	nx.keepSelections(ix, namespaces, len(nx.pods)-len(fresh) == len(ix.pods), fresh)
	nx.byNS = make(map[string][]podInfo, len(ix.byNS)+1)
	for ns, pods := range ix.byNS {
		if !namespaces[ns] {
			nx.byNS[ns] = pods
		}
	}
	for ns := range namespaces {
		var in []podInfo
		for _, pi := range ix.byNS[ns] {
			if !touched[key(pi.pod)] {
				in = append(in, pi)
			}
		}
		for _, pi := range fresh {
			if pi.pod.Namespace == ns {
				in = append(in, pi)
			}
		}
		if len(in) > 0 {
			nx.byNS[ns] = in
		}
	}
	return nx, pods
}

// touched are the pods whose entry in nx can differ from ix's: pod (put
// into nx), and those whose endpoints came or went or changed; pods are
// those pod was as ix had it, when it differs (its labels may have
// changed).
func (nx *index) touched(ix *index, pod *Pod) (touched map[string]bool, pods []*Pod) {
	touched = map[string]bool{}
	if pod != nil {
		k := pod.Namespace + "/" + pod.Name
		if old := ix.pod(k); old != nil && old != pod {
			pods = append(pods, old)
		}
		nx.over[k] = pod
		touched[k] = true
	}
	for k, a := range nx.local {
		if !slices.Equal(a, ix.local[k]) {
			touched[k] = true
		}
	}
	for k := range ix.local {
		if _, ok := nx.local[k]; !ok {
			touched[k] = true
		}
	}
	return touched, pods
}

// keepSelections copies into nx the selections of ix that select none of
// the namespaces (of the pods whose entries changed): they are the same.
// With added (no touched pod had an entry in ix: ADDs, whose pods had no
// address before), those that do select one get the fresh pods they
// match, their addresses put into the ranges in place: an ADD re-selects
// and sorts no cluster's worth of pods. The others nx computes again.
func (nx *index) keepSelections(ix *index, namespaces map[string]bool, added bool, fresh []podInfo) {
	changed := slices.Collect(maps.Keys(namespaces))
	for k, sel := range ix.selected {
		if !slices.ContainsFunc(changed, func(ns string) bool { return sel.ns.Matches(nsLabels(ix, ns)) }) {
			nx.selected[k] = sel
			continue
		}
		if !added || sel.podSel == nil {
			continue
		}
		for _, pi := range fresh {
			if sel.ns.Matches(nsLabels(nx, pi.pod.Namespace)) && sel.podSel.Matches(labels.Set(pi.pod.Labels)) {
				sel.pods = append(slices.Clip(sel.pods), pi)
				for _, a := range pi.addrs {
					sel.ranges = insertAddr(sel.ranges, a)
				}
			}
		}
		nx.selected[k] = sel
	}
}

// pod is the API's pod namespace/name as the index knows it, or nil.
func (ix *index) pod(k string) *Pod {
	if p, ok := ix.over[k]; ok {
		return p
	}
	return ix.all[k]
}

// increasing reports whether addrs is sorted without duplicates.
func increasing(addrs []netip.Addr) bool {
	for i := 1; i < len(addrs); i++ {
		if !addrs[i-1].Less(addrs[i]) {
			return false
		}
	}
	return true
}

// selectors are the policies' selectors parsed, by the API object's
// address: the informer's objects are never changed, and an entry keeps
// its object alive, so an address means one selector for the cache's
// life (one index and the copies Recompile patches from it).
type selectors struct {
	m sync.Map
	// keys are the keys in index.selected of pairs of them, by
	// their addresses as m's.
	keys sync.Map
}

// key is the selection key of nsSel and podSel (nil: every pod), parsed
// as ns and ps: what they select, as text, made once per pair.
func (s *selectors) key(nsSel, podSel *metav1.LabelSelector, ns, ps labels.Selector) string {
	pair := [2]*metav1.LabelSelector{nsSel, podSel}
	if k, ok := s.keys.Load(pair); ok {
		return k.(string)
	}
	// Empty tells labels.Everything from labels.Nothing, both "".
	k := fmt.Sprintf("%t %q %t %q", ns.Empty(), ns.String(), ps.Empty(), ps.String())
	s.keys.Store(pair, k)
	return k
}

type parsed struct {
	sel labels.Selector
	err error
}

func (ix *index) selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if v, ok := ix.sels.m.Load(s); ok {
		p := v.(parsed)
		return p.sel, p.err
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	ix.sels.m.Store(s, parsed{sel, err})
	return sel, err
}

// selection is what a namespace selector and a pod selector name
// together: the pods, by namespace in name order, and their addresses as
// merged ranges. Shared: never changed.
type selection struct {
	ns     labels.Selector // the namespaces': see patched
	podSel labels.Selector // the pods', in the namespaces
	pods   []podInfo
	ranges []Range
	// name is a hash of the selectors, what says them: a shared peer
	// set's name and comment (ClusterRule.peers).
	name, what string
}

// selection is what nsSel and podSel select, computed once
// per index for each pair of selectors (by what they select, as parsed,
// not by the objects that hold them). podSel nil: every pod.
func (ix *index) selection(nsSel, podSel *metav1.LabelSelector) (selection, error) {
	ns, err := ix.selector(nsSel)
	if err != nil {
		return selection{}, fmt.Errorf("namespaceSelector: %w", err)
	}
	ps := labels.Everything()
	if podSel != nil {
		if ps, err = ix.selector(podSel); err != nil {
			return selection{}, fmt.Errorf("podSelector: %w", err)
		}
	}
	key := ix.sels.key(nsSel, podSel, ns, ps)
	if s, ok := ix.selected[key]; ok {
		return s, nil
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	s := selection{ns: ns, podSel: ps, pods: podsIn(ix, matchingNamespaces(ix, ns), ps), name: fmt.Sprintf("%016x", h.Sum64()),
		what: fmt.Sprintf("pods {%s} of namespaces {%s}", ps, ns)}
	s.ranges = mergeRanges(appendPodRanges(nil, s.pods))
	ix.selected[key] = s
	return s, nil
}
