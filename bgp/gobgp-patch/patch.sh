#!/bin/sh
# patch.sh DIR: makes DIR/gobgp, a copy of the GoBGP module that go.mod pins
# with two changes (32 map shards per RIB table instead of 2,048; the
# prefix-limit count without a copy of the table), and DIR/go.work, a Go workspace of reef with that copy in GoBGP's place. The
# Makefile builds and tests with GOWORK=DIR/go.work; README.md here says why.
# A plain `go build` without it builds the unpatched GoBGP, which works the
# same and takes more memory.
#
# Each change is a substitution, checked: a GoBGP whose source no longer
# has the lines stops the build here, so that whoever upgrades GoBGP looks at
# this again. Runs again only when go.mod or this script changed.
set -eu
out=$1
go=${GO:-go}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mod=github.com/osrg/gobgp/v4
stamp="$(cat "$root/go.mod" "$0" | cksum)"
if [ -f "$out/go.work" ] && [ "$(cat "$out/.stamp" 2>/dev/null)" = "$stamp" ]; then
	exit 0
fi
ver=$(cd "$root" && GOWORK=off $go list -m -f '{{.Version}}' $mod)
dir=$(cd "$root" && GOWORK=off $go mod download -json $mod@"$ver" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
src=internal/pkg/table/table.go
line='const destinationShardCount = 2048'
if ! grep -qx "$line" "$dir/$src"; then
	echo "bgp/gobgp-patch: '$line' not found in $dir/$src: GoBGP changed; update bgp/gobgp-patch/patch.sh" >&2
	exit 1
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/gobgp.tmp"
cp -R "$dir" "$out/gobgp.tmp"
chmod -R u+w "$out/gobgp.tmp"
sed -i "s|^$line\$|const destinationShardCount = 32 // reef: bgp/gobgp-patch|" "$out/gobgp.tmp/$src"
grep -q 'reef: bgp/gobgp-patch' "$out/gobgp.tmp/$src"
# 2. AdjRib.Count (the prefix limit check, on every UPDATE) counts under the
# shards' locks (walkActive) instead of copying every destination first
# (walk): the same count, without an allocation per path.
adj=internal/pkg/table/adj.go
perl -0pi -e 's/(func \(adj \*AdjRib\) Count\(rfList \[\]bgp\.Family\) int \{\n\tcount := 0\n\tadj\.)walk(\(rfList, func\(d \*destination\) bool \{)/$1walkActive$2 \/\/ reef: bgp\/gobgp-patch/' "$out/gobgp.tmp/$adj"
if ! grep -q 'walkActive(rfList, func(d \*destination) bool { // reef: bgp/gobgp-patch' "$out/gobgp.tmp/$adj"; then
	echo "bgp/gobgp-patch: AdjRib.Count not as expected in $dir/$adj: GoBGP changed; update bgp/gobgp-patch/patch.sh" >&2
	exit 1
fi
rm -rf "$out/gobgp"
mv "$out/gobgp.tmp" "$out/gobgp"
gover=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/go.mod")
printf 'go %s\n\nuse %s\n\nreplace %s %s => %s\n' "$gover" "$root" "$mod" "$ver" "$out/gobgp" >"$out/go.work"
echo "$stamp" >"$out/.stamp"
echo "bgp/gobgp-patch: GoBGP $ver with 32 shards per table in $out/gobgp"
