package packaging

import (
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/reefcni/reef/daemon"
)

// defaultLine matches the lines of config.yaml that show a default:
// "#key: value" or a nested "#  key: value", not prose ("# text").
var defaultLine = regexp.MustCompile(`^#(\S|\s{2,}\S)`)

func readConfig(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func finished(t *testing.T, c daemon.Config, what string) daemon.Config {
	t.Helper()
	if err := c.Finish(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

var configCmp = []cmp.Option{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreUnexported(daemon.Config{}),
}

// TestConfigShowsTheDefaults: the packaged /etc/reef/config.yaml changes
// nothing as shipped, and its commented defaults are the real defaults,
// so uncommenting one line and editing it changes only that key.
func TestConfigShowsTheDefaults(t *testing.T) {
	text := readConfig(t)
	want := finished(t, daemon.DefaultConfig(), "defaults")

	asShipped, err := daemon.ParseConfig("config.yaml", []byte(text))
	if err != nil {
		t.Fatalf("config.yaml as shipped: %v", err)
	}
	if d := cmp.Diff(want, finished(t, asShipped, "as shipped"), configCmp...); d != "" {
		t.Errorf("config.yaml as shipped is not the defaults (-want +got):\n%s", d)
	}

	var lines []string
	n := 0
	for _, l := range strings.Split(text, "\n") {
		if defaultLine.MatchString(l) {
			l, n = l[1:], n+1
		}
		lines = append(lines, l)
	}
	if n < 10 {
		t.Fatalf("only %d default lines (\"#key: value\") found; the convention changed?", n)
	}
	uncommented := strings.Join(lines, "\n")
	got, err := daemon.ParseConfig("config.yaml (uncommented)", []byte(uncommented))
	if err != nil {
		t.Fatalf("the commented defaults do not parse:\n%v\n%s", err, uncommented)
	}
	if d := cmp.Diff(want, finished(t, got, "uncommented"), configCmp...); d != "" {
		t.Errorf("the commented values in config.yaml are not the defaults (-want +got):\n%s", d)
	}
}

// TestConfigDocumentsEveryKey: each key the daemon reads appears in the
// packaged config, as a default or an example, so an operator finds it
// there. A new key in daemon.Config needs a line in packaging/config.yaml.
func TestConfigDocumentsEveryKey(t *testing.T) {
	text := readConfig(t)
	var missing []string
	var walk func(tp reflect.Type, prefix string)
	walk = func(tp reflect.Type, prefix string) {
		for i := range tp.NumField() {
			f := tp.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !regexp.MustCompile(`(?m)^#\s*(- )?` + regexp.QuoteMeta(name) + `:`).MatchString(text) {
				missing = append(missing, prefix+name)
			}
			ft := f.Type
			if ft.Kind() == reflect.Slice {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == tp.PkgPath() {
				walk(ft, prefix+name+".")
			}
		}
	}
	walk(reflect.TypeOf(daemon.Config{}), "")
	if len(missing) > 0 {
		t.Errorf("packaging/config.yaml does not mention these keys of daemon.Config; add a commented default (\"#key: value\") with a line on what it does: %s",
			strings.Join(missing, ", "))
	}
}

// TestConflist: the packaged conflist is one line, and it parses as libcni
// (the runtime's library) reads it. It names 1.0.0 and lists 1.1.0 in
// cniVersions: containerd 1.6 (Debian 12) refuses a 1.1.0 result, and a
// CNI 1.1 runtime picks the highest version it knows from the list.
func TestConflist(t *testing.T) {
	const want = `{"cniVersion":"1.0.0","cniVersions":["1.0.0","1.1.0"],"name":"k8s-pod-network","plugins":[{"type":"reef-cni","capabilities":{"portMappings":true,"bandwidth":true}}]}` + "\n"
	b, err := os.ReadFile("cni/10-reef.conflist")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("cni/10-reef.conflist is %q, want %q", b, want)
	}
	list, err := libcni.ConfListFromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	if list.Name != "k8s-pod-network" || len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "reef-cni" {
		t.Errorf("conflist parsed as name %q with %d plugins", list.Name, len(list.Plugins))
	}
	if list.CNIVersion != "1.1.0" {
		t.Errorf("libcni picked cniVersion %s from the conflist, want 1.1.0 (GC and STATUS)", list.CNIVersion)
	}
}

// iniKeys returns "Section.Key=Value" for each setting of an ini file.
func iniKeys(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	section := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			section = l[1 : len(l)-1]
		default:
			out = append(out, section+"."+l)
		}
	}
	return out
}

// TestNetworkManagers: the drop-ins that keep systemd-networkd and
// NetworkManager away from reef's routes and devices say exactly that, in
// the sections those programs read (networkd.conf(5), NetworkManager.conf(5)).
func TestNetworkManagers(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"networkd.conf.d/reef.conf", []string{"Network.ManageForeignRoutes=no", "Network.ManageForeignRoutingPolicyRules=no"}},
		{"NetworkManager/conf.d/reef.conf", []string{"keyfile.unmanaged-devices=interface-name:reef*;interface-name:vxlan.reef"}},
	} {
		if d := cmp.Diff(tc.want, iniKeys(t, tc.path)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.path, d)
		}
	}
}

// TestRtProtos: the name `ip route` prints for reef's routes.
func TestRtProtos(t *testing.T) {
	b, err := os.ReadFile("rt_protos.d/reef.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^238\s+reef$`).Match(b) {
		t.Errorf("rt_protos.d/reef.conf does not map 238 to reef:\n%s", b)
	}
}
