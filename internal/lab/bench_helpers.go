package lab

// Pid returns the process id of the node's daemon, or 0 when it is not
// running. nsenter execs the daemon in place, so this is the daemon itself
// (for reading /proc/<pid>/status).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}
