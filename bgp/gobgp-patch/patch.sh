#!/bin/sh
# patch.sh DIR: makes DIR/gobgp, a copy of the GoBGP module that go.mod pins
# with gobgp.diff applied (32 map shards per RIB table instead of 2,048; the
# prefix-limit count kept as paths come and go instead of walking the
# table; a path's stale flag atomic), and DIR/go.work, a Go workspace of reef with that copy in GoBGP's
# place. The Makefile builds and tests with GOWORK=DIR/go.work; README.md
# here says why. A plain `go build` without it builds the unpatched GoBGP,
# which works the same and takes more memory and CPU.
#
# The diff is applied with `git apply`, which refuses a patch whose context
# no longer matches: a GoBGP upgrade that touched these lines stops the build
# here, so that whoever upgrades GoBGP looks at this again. Runs again only
# when go.mod, gobgp.diff or this script changed.
set -eu
out=$1
go=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mod=github.com/osrg/gobgp/v4
stamp="$(cat "$root/go.mod" "$here/gobgp.diff" "$0" | cksum)"
if [ -f "$out/go.work" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
ver=$(cd "$root" && GOWORK=off $go list -m -f '{{.Version}}' $mod)
dir=$(cd "$root" && GOWORK=off $go mod download -json $mod@"$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/gobgp.tmp"
cp -R "$dir" "$out/gobgp.tmp"
chmod -R u+w "$out/gobgp.tmp"
# DIR is inside reef's own checkout: the ceiling keeps git from taking the
# patch's paths relative to reef's repository instead of the copy.
if ! (cd "$out/gobgp.tmp" && GIT_CEILING_DIRECTORIES="$out" git apply "$here/gobgp.diff"); then
	echo "bgp/gobgp-patch: gobgp.diff does not apply to $mod $ver ($dir): GoBGP changed; update bgp/gobgp-patch/gobgp.diff" >&2
	exit 1
fi
rm -rf "$out/gobgp"
mv "$out/gobgp.tmp" "$out/gobgp"
gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/go.mod")
printf 'go %s\n\nuse %s\n\nreplace %s %s => %s\n' "$gover" "$root" "$mod" "$ver" "$out/gobgp" >"$out/go.work"
echo "$stamp" >"$out/.stamp"
echo "bgp/gobgp-patch: GoBGP $ver with bgp/gobgp-patch/gobgp.diff in $out/gobgp"
