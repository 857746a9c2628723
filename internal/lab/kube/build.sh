#!/bin/sh
# Builds the lab's Kubernetes from the Go module proxy into $GOBIN. Each
# binary is skipped when $GOBIN has it at the asked version.
#
# KUBE_BUILD=api (the default; make deps-kube): kube-apiserver and etcd, the
# Kubernetes API of the NetworkPolicy tests (internal/lab/kubeapi.go).
# KUBE_BUILD=cluster (make deps-k8s): what a real cluster adds (issue 27):
# containerd 2 and its runc shim, as containerd2 and containerd2-shim-runc-v2,
# then kubelet, kube-proxy, kube-controller-manager, kube-scheduler, kubectl,
# agnhost and e2e.test. Kubernetes 1.36 on wants containerd 2 (the
# RuntimeConfig CRI call); Debian 12 has 1.6, which the CRI lab runs. The
# names keep ours from shadowing Debian's containerd and shim, found through
# PATH, where $GOBIN usually comes first: a containerd2 config names its shim
# with runtime_path.
#
# None is built with `go install pkg@version`: it refuses a module whose
# go.mod has replace directives, and it cannot rename (containerd2).
# k8s.io/kubernetes is not meant to be a dependency: its go.mod requires its
# staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0 and replaces
# them with ./staging/src/..., which a module download does not have.
# go.etcd.io/etcd/server/v3 replaces its siblings (api, client, pkg) with
# ../api and the like. So each is built in a wrapper module, written here
# into a temporary directory, that replaces each of those with its published
# release: v0.X.Y for kubernetes v1.X.Y, the same version for etcd (and
# nothing for containerd, whose go.mod has no replace). One wrapper serves
# every Kubernetes binary, so their dependencies resolve once.
set -eu
KUBE_VERSION=${KUBE_VERSION:?}
KUBE_BUILD=${KUBE_BUILD:-api}
GOBIN=${GOBIN:?}
GO=${GO:-go}
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0
case $KUBE_BUILD in
api) ETCD_VERSION=${ETCD_VERSION:?} ;;
cluster) CONTAINERD_VERSION=${CONTAINERD_VERSION:?} ;;
*)
	echo "build.sh: KUBE_BUILD is api or cluster, not $KUBE_BUILD" >&2
	exit 1
	;;
esac

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

# build WRAPPER NAME PKG VERSION LDFLAGS [GO-VERB]: go build (or the verb,
# e.g. "test -c") of PKG at VERSION in the wrapper module into $GOBIN/NAME,
# saying how long it took.
build() {
	start=$(date +%s)
	(cd "$work/$1" &&
		"$GO" get "$3@$4" &&
		"$GO" ${6:-build} -trimpath -ldflags "-s -w $5" -o "$GOBIN/$2" "$3")
	echo "built $2 in $(($(date +%s) - start)) s"
}

# The Kubernetes build (hack/lib/version.sh) stamps the version into the
# binary; without it kube-apiserver says v0.0.0-master, on /version too. With
# -trimpath, go version -m leaves the -ldflags out, so the binary is asked.
minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
stamp=
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	stamp="$stamp -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# kube NAME PKG [LDFLAGS [GO-VERB]]: builds PKG of k8s.io/kubernetes at
# $KUBE_VERSION into $GOBIN/NAME, in the one wrapper of them all.
kube() {
	echo "building $1 $KUBE_VERSION (minutes, once)"
	[ -d "$work/kubernetes" ] || wrapper kubernetes k8s.io/kubernetes "$KUBE_VERSION" "v0.${KUBE_VERSION#v1.}"
	build kubernetes "$1" "$2" "$KUBE_VERSION" "$stamp ${3:-}" "${4:-}"
}

# stamped NAME: whether $GOBIN/NAME says it is Kubernetes $KUBE_VERSION.
stamped() {
	"$GOBIN/$1" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"
}

if [ "$KUBE_BUILD" = api ]; then
	stamped kube-apiserver || kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver

	if ! "$GO" version -m "$GOBIN/etcd" 2>/dev/null | grep -q "go.etcd.io/etcd/server/v3[[:space:]]*$ETCD_VERSION\b"; then
		echo "building etcd $ETCD_VERSION"
		wrapper etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "$ETCD_VERSION"
		build etcd etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" ""
	fi
	exit 0
fi

# containerd's Makefile stamps these; Revision (a git commit) is not in a
# module download and stays empty. The tags are its release build's. Without
# cgo the btrfs snapshotter drops out by its own build constraint; devmapper
# and zfs build (they exec dmsetup and zfs), and a lab config disables them.
ctrd=github.com/containerd/containerd/v2
cstamp="-X $ctrd/version.Version=$CONTAINERD_VERSION -X $ctrd/version.Package=$ctrd"
if ! "$GOBIN/containerd2" --version 2>/dev/null | grep -q " $CONTAINERD_VERSION\b"; then
	echo "building containerd2 $CONTAINERD_VERSION"
	[ -d "$work/containerd" ] || wrapper containerd "$ctrd" "$CONTAINERD_VERSION" "$CONTAINERD_VERSION"
	build containerd containerd2 "$ctrd/cmd/containerd" "$CONTAINERD_VERSION" "$cstamp" "build -tags=urfave_cli_no_docs"
fi
if ! "$GOBIN/containerd2-shim-runc-v2" -v 2>/dev/null | grep -q "Version: *$CONTAINERD_VERSION\b"; then
	echo "building containerd2-shim-runc-v2 $CONTAINERD_VERSION"
	[ -d "$work/containerd" ] || wrapper containerd "$ctrd" "$CONTAINERD_VERSION" "$CONTAINERD_VERSION"
	build containerd containerd2-shim-runc-v2 "$ctrd/cmd/containerd-shim-runc-v2" "$CONTAINERD_VERSION" "$cstamp" "build -tags=urfave_cli_no_docs,no_grpc"
fi

for bin in kubelet kube-proxy kube-controller-manager kube-scheduler; do
	stamped $bin || kube $bin k8s.io/kubernetes/cmd/$bin
done
"$GOBIN/kubectl" version --client 2>/dev/null | grep -qx "Client Version: $KUBE_VERSION" ||
	kube kubectl k8s.io/kubernetes/cmd/kubectl
# agnhost states its own version (test/images/agnhost/VERSION, the image
# tag the tests ask for), so its module version is read instead.
if ! "$GO" version -m "$GOBIN/agnhost" 2>/dev/null | grep -q "k8s.io/kubernetes[[:space:]]*$KUBE_VERSION\b"; then
	dir=$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	kube agnhost k8s.io/kubernetes/test/images/agnhost "-X main.Version=$(cat "$dir/test/images/agnhost/VERSION")"
fi
# The suite is a test binary; it prints version.Get() for --version.
"$GOBIN/e2e.test" --version 2>/dev/null | grep -qx "$KUBE_VERSION" ||
	kube e2e.test k8s.io/kubernetes/test/e2e "" "test -c"
# ginkgo, the runner that spreads e2e.test over several processes, at the
# version k8s.io/kubernetes pins (its go.mod), as hack/ginkgo-e2e.sh runs it.
ginkgo=$(cd "$work" && "$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
ginkgo=$(sed -n 's#^[[:space:]]*github.com/onsi/ginkgo/v2 \(v[^[:space:]]*\).*#\1#p' "$ginkgo")
"$GOBIN/ginkgo" version 2>/dev/null | grep -qx "Ginkgo Version ${ginkgo#v}" ||
	(cd "$work" && GOBIN="$GOBIN" "$GO" install "github.com/onsi/ginkgo/v2/ginkgo@$ginkgo" && echo "built ginkgo $ginkgo")
