#!/bin/sh
# Prints the package version of the work tree, one that dpkg and rpm both
# order by history, and that `make package` stamps into the binaries:
#   v1.2.0 tagged on HEAD          1.2.0
#   3 commits after tag v1.2.0     1.2.0+3.gabc1234
#   tag v1.3.0-rc1                 1.3.0~rc1 (sorts before 1.3.0)
#   no tag yet                     0.0.0+git20250101120000.abc1234 (commit time, UTC)
# ".dirty" is added when tracked files have uncommitted changes.
set -eu
cd "$(dirname "$0")/.."
if ! sha=$(git rev-parse --short=7 HEAD 2>/dev/null); then
	echo 0.0.0
	exit 0
fi
dirty=""
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	dirty=".dirty"
fi
if desc=$(git describe --tags --long --abbrev=7 --match 'v[0-9]*' 2>/dev/null); then
	rest=${desc%-g*}   # v1.2.0-rc1-3
	n=${rest##*-}      # 3
	tag=${rest%-*}     # v1.2.0-rc1
	v=$(echo "${tag#v}" | sed 's/-/~/')
	if [ "$n" = 0 ]; then
		echo "$v$dirty"
	else
		echo "$v+$n.g$sha$dirty"
	fi
else
	ts=$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S)
	echo "0.0.0+git$ts.$sha$dirty"
fi
