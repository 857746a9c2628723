package reefv1

// Limits and codes that the reef-cni shim and the daemon share: the shim
// links this package and nothing else of reef (docs/cni.md, "Limits").
const (
	// MaxNetconfSize bounds the network configuration of one CNI call.
	// A plugin's config is a few hundred bytes; with a prevResult and
	// runtimeConfig (hostPorts, bandwidth) a few KiB. The shim refuses a
	// larger stdin before it dials, the daemon a larger CNIRequest.netconf,
	// both with CNI code 7.
	MaxNetconfSize = 1 << 20
	// MaxMessageSize is what the daemon's gRPC server reads of one message:
	// the netconf at its limit plus the CNI environment, which the kernel
	// bounds at 128 KiB a variable. Past it a caller gets the gRPC status
	// ResourceExhausted, which the shim reports as CNI code 7.
	MaxMessageSize = 2 << 20
	// CodeVersionMismatch is the CNI error code (reef's own, 100 and up)
	// of a call that shim and daemon do not agree on: a method the daemon
	// does not serve, or request fields it does not know. Restarting the
	// daemon after an upgrade, so both are the same version, fixes it.
	CodeVersionMismatch = 104
)
