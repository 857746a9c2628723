#!/bin/sh
# gobgp.sh sync|check: third_party/gobgp is the GoBGP module that go.mod
# requires, with third_party/gobgp.diff applied and without the parts a
# library user never builds (cmd, docs, test, tools, proto); go.mod's
# replace makes every go command build it (third_party/README.md says why).
#
#   sync   rewrites third_party/gobgp from the module proxy's copy and the diff
#   check  fails when third_party/gobgp is not exactly that: an edit made to
#          the copy instead of to the diff, or a GoBGP upgrade without a sync
#
# The diff is applied with `git apply`, which refuses a diff whose context no
# longer matches: after a GoBGP upgrade that touched these lines, sync stops
# and says so, so that whoever upgrades GoBGP looks at the patch again.
set -eu
mode=${1:-check}
go=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
mod=github.com/osrg/gobgp/v4
ver=$(sed -n "s|^[[:space:]]*$mod \(v[^ ]*\).*|\1|p" "$root/go.mod" | head -n1)
[ -n "$ver" ] || { echo "third_party/gobgp.sh: go.mod does not require $mod" >&2; exit 1; }
dir=$(cd "$root" && GOFLAGS=-mod=mod $go mod download -json "$mod@$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir" ] || { echo "third_party/gobgp.sh: go mod download $mod@$ver gave no directory" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -R "$dir" "$tmp/gobgp"
chmod -R u+w "$tmp/gobgp"
rm -rf "$tmp/gobgp/cmd" "$tmp/gobgp/docs" "$tmp/gobgp/test" "$tmp/gobgp/tools" "$tmp/gobgp/proto" \
	"$tmp/gobgp/.github" "$tmp/gobgp/CODEOWNERS" "$tmp/gobgp/CONTRIBUTING.md"
# The copy is inside reef's checkout: the ceiling keeps git from taking the
# diff's paths relative to reef's repository instead of the copy.
if ! (cd "$tmp/gobgp" && GIT_CEILING_DIRECTORIES="$tmp" git apply "$here/gobgp.diff"); then
	echo "third_party/gobgp.sh: gobgp.diff does not apply to $mod $ver: GoBGP changed; update third_party/gobgp.diff" >&2
	exit 1
fi

case $mode in
sync)
	rm -rf "$here/gobgp"
	mv "$tmp/gobgp" "$here/gobgp"
	echo "third_party/gobgp: $mod $ver with third_party/gobgp.diff"
	;;
check)
	if ! diff -r "$tmp/gobgp" "$here/gobgp" >"$tmp/out" 2>&1; then
		head -n 40 "$tmp/out" >&2
		echo "third_party/gobgp is not $mod $ver with third_party/gobgp.diff applied: change the diff, then run sh third_party/gobgp.sh sync" >&2
		exit 1
	fi
	;;
*)
	echo "usage: gobgp.sh sync|check" >&2
	exit 2
	;;
esac
