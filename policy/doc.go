// Package policy is reef's NetworkPolicy: the Kubernetes API objects
// (NetworkPolicies, Pods, Namespaces) and this node's endpoints turned,
// purely, into the desired state of reef's nftables table inet reef, and
// the explanation `reef policy show` prints.
//
// Compile selects and resolves: which of this node's pods each policy
// selects, which addresses each rule's peers stand for (pods by selector,
// ipBlocks minus their excepts), what its ports mean (numbers, ranges,
// named ports resolved against the pods' containerPorts). Table renders
// the result as table inet reef, in the model of the nftables engine
// (package nft), whose Diff and Kernel apply it in one atomic batch:
//
//	chain egress  (hook forward, priority filter): traffic from pods
//	chain ingress (hook forward, priority filter + 1): traffic to pods
//	    ct state established,related accept
//	    ip saddr != @eg-isolated4 accept          (daddr in ingress)
//	    ip saddr @sel4.<ns>.<policy> jump eg.<ns>.<policy>
//	    ...                                       one per policy of the direction
//	    drop
//	chain eg.<ns>.<policy>: one accept rule per (rule, port) of the policy
//
// An accept ends only its own base chain, so a packet between two pods is
// checked by the egress chain (its source) and the ingress chain (its
// destination) in turn; a drop in either is final. Only the forward path
// is filtered: a pod's traffic with its own node (kubelet's probes) goes
// through the input and output hooks and is always allowed, as the
// NetworkPolicy docs require. Peers are sets, one per distinct peer list
// (shared by the rules that have it), so a pod that comes, goes
// or changes labels changes set elements, never a rule; a policy that
// comes, goes or changes changes the table's shape, which nft.DiffInPlace
// applies in place, its own sets and chains only, in one batch. Both
// address families have their
// sets and rules from the start; IPv6 pods add elements.
package policy
