package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// RuntimeProblem is a reason the container runtime will not use reef, with
// what to do.
type RuntimeProblem struct {
	Kind    string // one of RuntimeProblemKinds
	Message string
}

// RuntimeProblemKinds are the kinds of RuntimeProblem.
var RuntimeProblemKinds = []string{"conflist-shadowed", "conflist-not-reef", "plugin-missing"}

// checkRuntime reads the runtime's CNI conf dir and bin dir as containerd
// does: the network configs are the files ending .conf, .conflist or
// .json, in name order, and with its default max_conf_num = 1 only the
// first is used. It warns when that first one is not reef's, when none
// names reef-cni, and when reef-cni is not in the bin dir.
func checkRuntime(confDir, binDir string) []RuntimeProblem {
	var out []RuntimeProblem
	entries, err := os.ReadDir(confDir)
	if err != nil {
		return []RuntimeProblem{{"conflist-not-reef", fmt.Sprintf("cannot read the CNI config dir %s (cniConfDir): %v; install reef's conflist there (/etc/cni/net.d/10-reef.conflist of the package)", confDir, err)}}
	}
	var confs []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".conf", ".conflist", ".json":
			if !e.IsDir() {
				confs = append(confs, e.Name())
			}
		}
	}
	slices.Sort(confs)
	first, reef := "", ""
	for _, name := range confs {
		b, err := os.ReadFile(filepath.Join(confDir, name))
		if err != nil {
			continue
		}
		if first == "" {
			first = name
		}
		if namesReef(b) {
			reef = name
			break
		}
	}
	switch {
	case reef == "":
		msg := fmt.Sprintf("no network config in %s names the plugin reef-cni, so the runtime does not use reef", confDir)
		if first != "" {
			msg += fmt.Sprintf(" (it uses %s)", first)
		}
		out = append(out, RuntimeProblem{"conflist-not-reef", msg + "; install reef's conflist (10-reef.conflist of the package) and remove the other"})
	case first != reef:
		out = append(out, RuntimeProblem{"conflist-shadowed", fmt.Sprintf(
			"%s sorts before reef's %s in %s: containerd uses only the first network config (max_conf_num = 1), so pods get that network, not reef's; remove %s (or move it out of %s) and restart containerd",
			first, reef, confDir, first, confDir)})
	}
	if fi, err := os.Stat(filepath.Join(binDir, "reef-cni")); err != nil || fi.Mode()&0o111 == 0 {
		out = append(out, RuntimeProblem{"plugin-missing", fmt.Sprintf(
			"%s is missing or not executable (cniBinDir): the runtime cannot run reef's plugin; reinstall the package, or point cniBinDir at containerd's bin_dir", filepath.Join(binDir, "reef-cni"))})
	}
	return out
}

// namesReef reports whether a network config (a conflist, or a single
// .conf) has a plugin of type reef-cni.
func namesReef(b []byte) bool {
	var c struct {
		Type    string `json:"type"`
		Plugins []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	if json.Unmarshal(b, &c) != nil {
		return false // the runtime cannot read it either
	}
	if c.Type == "reef-cni" {
		return true
	}
	return slices.ContainsFunc(c.Plugins, func(p struct {
		Type string `json:"type"`
	}) bool {
		return p.Type == "reef-cni"
	})
}
