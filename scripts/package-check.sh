#!/usr/bin/env bash
# The release packaging check: `goreleaser check`, a snapshot release into
# dist/ (tar.gz archives for linux and darwin, amd64 and arm64, checksums,
# deb and rpm packages), then e2e TestPackageContents on that dist/ (what
# the packages install, their config flags, the stamped version, the
# archives, the checksums).
#
# Slow, so not part of scripts/test.sh: the snapshot cross-compiles eight
# binaries, and the first run installs goreleaser $GORELEASER_VERSION with
# `go install` (a large module graph from the Go module proxy, built
# locally: allow well over ten minutes on two cores).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO"

GORELEASER_VERSION="${GORELEASER_VERSION:-v2.15.1}"

need_go
gr="$(command -v goreleaser || true)"
if [ -z "$gr" ]; then
	gr="$(go env GOPATH)/bin/goreleaser"
fi
if [ ! -x "$gr" ]; then
	say "installing goreleaser $GORELEASER_VERSION (go install; this takes a while once)"
	go install "github.com/goreleaser/goreleaser/v2@$GORELEASER_VERSION"
fi

say "goreleaser check"
"$gr" check

say "goreleaser release --snapshot --clean (into dist/)"
"$gr" release --snapshot --clean

bash scripts/test-tools.sh rpm || [ "$?" = 3 ]
command -v dpkg-deb >/dev/null 2>&1 || die "dpkg-deb is missing (Debian/Ubuntu: apt-get install dpkg)"

say "package contents"
TASKD_TEST_DIST="$REPO/dist" go test -count=1 -run '^TestPackageContents$' -v ./e2e/
