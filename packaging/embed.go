// Package packaging holds the files that the .deb and .rpm install
// (nfpm.yaml lists them). Its tests check them against the code that reads
// them; the packages themselves are tested in e2e/package_test.go. The one
// Go export is RBAC, for the lab that applies it as an operator would.
package packaging

import _ "embed"

// RBAC is kubernetes/rbac.yaml, installed as /usr/share/reef/rbac.yaml.
//
//go:embed kubernetes/rbac.yaml
var RBAC []byte
