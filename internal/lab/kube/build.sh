#!/bin/sh
# Builds the lab's Kubernetes API, kube-apiserver and etcd, from the Go module
# proxy into $GOBIN (make deps-kube; internal/lab/kubeapi.go runs them).
# Either is skipped when $GOBIN has it at the asked version.
#
# Neither can be built with `go install pkg@version`, which refuses a module
# whose go.mod has replace directives. k8s.io/kubernetes is not meant to be a
# dependency: its go.mod requires its staging modules (k8s.io/api,
# k8s.io/client-go, ...) at v0.0.0 and replaces them with ./staging/src/...,
# which a module download does not have. go.etcd.io/etcd/server/v3 replaces
# its siblings (api, client, pkg) with ../api and the like. So each is built
# in a wrapper module, written here into a temporary directory, that
# replaces each of those with its published release: v0.X.Y for kubernetes
# v1.X.Y, the same version for etcd.
set -eu
KUBE_VERSION=${KUBE_VERSION:?}
ETCD_VERSION=${ETCD_VERSION:?}
GOBIN=${GOBIN:?}
GO=${GO:-go}
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# wrapper NAME MODULE VERSION LOCAL: the main module reef.lab/NAME in
# $work/NAME, requiring MODULE at VERSION, with its go and godebug lines,
# and each module that MODULE's go.mod replaces with a directory replaced
# by that module at LOCAL.
wrapper() {
	mod=$(cd "$work" && "$GO" mod download -json "$2@$3" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	if [ -z "$mod" ]; then
		echo "build.sh: no go.mod for $2@$3" >&2
		exit 1
	fi
	mkdir "$work/$1"
	{
		echo "module reef.lab/$1"
		echo
		sed -n -e '/^go /p' -e '/^godebug /p' "$mod"
		echo
		echo "require $2 $3"
		echo
		echo "replace ("
		sed -n "s#^[[:space:]]*\([^[:space:]]*\) => \.\{1,2\}/.*#\t\1 => \1 $4#p" "$mod"
		echo ")"
	} >"$work/$1/go.mod"
}

# The Kubernetes build (hack/lib/version.sh) stamps the version into the
# binary; without it kube-apiserver says v0.0.0-master, on /version too. With
# -trimpath, go version -m leaves the -ldflags out, so the binary is asked.
if ! "$GOBIN/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"; then
	echo "building kube-apiserver $KUBE_VERSION (several minutes, once)"
	minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	stamp=
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		stamp="$stamp -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	wrapper kube-apiserver k8s.io/kubernetes "$KUBE_VERSION" "v0.${KUBE_VERSION#v1.}"
	(cd "$work/kube-apiserver" &&
		"$GO" get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" &&
		"$GO" build -trimpath -ldflags "-s -w$stamp" -o "$GOBIN/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
fi

if ! "$GO" version -m "$GOBIN/etcd" 2>/dev/null | grep -q "go.etcd.io/etcd/server/v3[[:space:]]*$ETCD_VERSION\b"; then
	echo "building etcd $ETCD_VERSION"
	wrapper etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$ETCD_VERSION"
	(cd "$work/etcd" &&
		"$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" &&
		"$GO" build -trimpath -ldflags '-s -w' -o "$GOBIN/etcd" go.etcd.io/etcd/server/v3)
fi
