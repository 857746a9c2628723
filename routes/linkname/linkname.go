// Package linkname is the mark of reef's links: the name prefix of every
// node-side veth and ifb reef creates. Package routes (the veth pairs),
// routes/tc (the ifbs) and routes/sysctl (the veths' settings) refuse a
// link without it.
package linkname

// Prefix starts the name of every link reef creates: node-side veths and
// ifbs. A link without it is never reef's to change or delete.
const Prefix = "reef"

// Ours reports whether name carries Prefix (and more).
func Ours(name string) bool { return len(name) > len(Prefix) && name[:len(Prefix)] == Prefix }
