package kube

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// tokenExpiry is the exp claim of the config's bearer token when it is a
// JWT (a TokenRequest token); zero for a token that does not expire (a
// service account token Secret's, a static token) or cannot be read.
func tokenExpiry(cfg *rest.Config) time.Time {
	tok := cfg.BearerToken
	if tok == "" && cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return time.Time{}
		}
		tok = strings.TrimSpace(string(b))
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == 0 {
		return time.Time{}
	}
	return time.Unix(claims.Exp, 0)
}

// TokenWarnBefore is how long before its expiry a token is warned about,
// at every probe's hour: time for an operator to renew it (docs/policy.md).
const TokenWarnBefore = 30 * 24 * time.Hour

// checkToken logs, about once an hour, that the token expires soon or
// has expired: a token never expires silently.
func (w *Watcher) checkToken() {
	if w.expires.IsZero() {
		return
	}
	w.mu.Lock()
	due := time.Since(w.tokenWarned) >= time.Hour
	if due {
		w.tokenWarned = time.Now()
	}
	w.mu.Unlock()
	if !due {
		return
	}
	switch left := time.Until(w.expires); {
	case left <= 0:
		w.log.Error("the kubeconfig's token has expired: the API refuses reef, and NetworkPolicy stays as last known; make a new kubeconfig (docs/policy.md)",
			"expired", w.expires.Format(time.RFC3339))
	case left < TokenWarnBefore:
		w.log.Warn("the kubeconfig's token expires soon; make a new kubeconfig before then (docs/policy.md)",
			"expires", w.expires.Format(time.RFC3339), "left", left.Round(time.Hour).String())
	}
}
