package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/reefcni/reef/internal/poll"
)

// Prometheus is Debian's prometheus run in a lab namespace, scraping the
// lab's nodes every second.
type Prometheus struct {
	Lab    *Lab
	Netns  string
	Listen string // its API, inside Netns
	stop   func()
	client *http.Client
}

// PrometheusSample is one series of an instant query.
type PrometheusSample struct {
	Metric map[string]string
	Value  float64
}

// HTTPClientIn is an HTTP client whose connections are opened in netns.
func HTTPClientIn(netns string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.WithNetNSPath(NetnsPath(netns), func(ns.NetNS) error {
				var err error
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}}
}

// StartPrometheus runs prometheus in netns with targets (host:port) as job
// "reef", and rule files (copied into its directory), and waits for its
// API.
func (l *Lab) StartPrometheus(netns string, targets []string, rules ...string) (*Prometheus, error) {
	if _, err := exec.LookPath("prometheus"); err != nil {
		return nil, fmt.Errorf("prometheus not installed (apt-get install prometheus; make test installs it): %w", err)
	}
	dir := filepath.Join(l.Dir, "prometheus-"+netns)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	var ruleNames []string
	for _, r := range rules {
		b, err := os.ReadFile(r)
		if err != nil {
			return nil, err
		}
		name := filepath.Join(dir, filepath.Base(r))
		if err := os.WriteFile(name, b, 0o644); err != nil {
			return nil, err
		}
		ruleNames = append(ruleNames, fmt.Sprintf("%q", name))
	}
	quoted := make([]string, len(targets))
	for i, t := range targets {
		quoted[i] = fmt.Sprintf("%q", t)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%s]
scrape_configs:
  - job_name: reef
    static_configs:
      - targets: [%s]
`, strings.Join(ruleNames, ", "), strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	p := &Prometheus{Lab: l, Netns: netns, Listen: "127.0.0.1:9090", client: HTTPClientIn(netns)}
	var err error
	p.stop, err = l.Spawn(netns, "prometheus-"+netns+".log", "prometheus", "--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+p.Listen)
	if err != nil {
		return nil, err
	}
	if err := poll.Until(30*time.Second, func() error {
		resp, err := p.client.Get("http://" + p.Listen + "/-/ready")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("/-/ready: %s", resp.Status)
		}
		return nil
	}); err != nil {
		p.stop()
		log, _ := os.ReadFile(filepath.Join(l.Dir, "prometheus-"+netns+".log"))
		return nil, fmt.Errorf("prometheus in %s not ready: %v: %s", netns, err, tail(string(log), 10))
	}
	return p, nil
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// Stop ends prometheus.
func (p *Prometheus) Stop() { p.stop() }

// Query runs an instant query through the HTTP API. A query Prometheus
// refuses (an unknown function, a syntax error) is an error.
func (p *Prometheus) Query(expr string) ([]PrometheusSample, error) {
	resp, err := p.client.Get("http://" + p.Listen + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("query %q: %w: %s", expr, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", expr, r.Error)
	}
	var out []PrometheusSample
	for _, s := range r.Data.Result {
		var v float64
		if str, ok := s.Value[1].(string); ok {
			fmt.Sscan(str, &v)
		}
		out = append(out, PrometheusSample{Metric: s.Metric, Value: v})
	}
	return out, nil
}

// RuleHealth is each loaded rule's health ("ok", "err", "unknown" before
// its first evaluation) and its last error, by rule name.
func (p *Prometheus) RuleHealth() (map[string]string, error) {
	resp, err := p.client.Get("http://" + p.Listen + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			out[rule.Name] = strings.TrimSpace(rule.Health + " " + rule.LastError)
		}
	}
	return out, nil
}
