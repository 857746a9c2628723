package lab

import (
	"fmt"
	"os"
	"path/filepath"
)

// ReferencePlugins are the reference plugins a cluster with
// ClusterOptions.Reference runs, from RefPluginDir.
var ReferencePlugins = []string{"ptp", "host-local", "portmap"}

// CheckReferencePlugins says which of ReferencePlugins are missing.
func CheckReferencePlugins() error {
	for _, p := range ReferencePlugins {
		if _, err := os.Stat(filepath.Join(RefPluginDir, p)); err != nil {
			return fmt.Errorf("lab: %s/%s missing (apt-get install containernetworking-plugins): %w", RefPluginDir, p, err)
		}
	}
	return nil
}

// ReferenceRange is the host-local range of a node of a Reference
// cluster: a /24 of ClusterPool named after the node's underlay address,
// so that kube-proxy's clusterCIDR covers it as it covers reef's pods.
func ReferenceRange(n *Node) string {
	return fmt.Sprintf("10.244.%d.0/24", n.Address.As4()[3])
}

// referenceCNI is the CNI conf and plugins of a node of a Reference
// cluster: ptp with host-local and portmap in the shape kind gives them,
// cniVersion 1.0.0, host-local's state under the node's dir (its default
// is the host's /var/lib/cni).
func referenceCNI(n *Node) (conflist []byte, plugins []string) {
	conflist = fmt.Appendf(nil, `{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[`+
		`{"type":"ptp","ipMasq":false,"ipam":{"type":"host-local","dataDir":%q,"routes":[{"dst":"0.0.0.0/0"}],"ranges":[[{"subnet":%q}]]}},`+
		`{"type":"portmap","capabilities":{"portMappings":true}}]}`,
		filepath.Join(n.Dir, "host-local"), ReferenceRange(n))
	for _, p := range ReferencePlugins {
		plugins = append(plugins, filepath.Join(RefPluginDir, p))
	}
	return conflist, plugins
}
