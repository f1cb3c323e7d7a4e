#!/usr/bin/env bash
# Build the pinned OPA from the Go module proxy into bin/ (git-ignored).
# Pinned at or above v1.21.3, where a bundle-signing advisory was fixed.
set -euo pipefail
version="${1:?usage: install-opa.sh vX.Y.Z}"
root="$(cd "$(dirname "$0")/.." && pwd)"
built_version() {
  # awk reads all of `opa version`; `grep -q` would exit at the first line and, under
  # pipefail, fail the pipeline with SIGPIPE (141) whenever opa was still writing.
  "$root/bin/opa" version 2>/dev/null | awk '$1 == "Version:" { print "v" $2 }'
}
if [ -x "$root/bin/opa" ] && [ "$(built_version)" = "$version" ]; then
  exit 0
fi
command -v go >/dev/null || { echo "install-opa: Go is required to build OPA" >&2; exit 1; }
echo "building OPA $version from the Go module proxy (first run only, ~2 minutes)..." >&2
mkdir -p "$root/bin"
if ! GOBIN="$root/bin" GOFLAGS=-mod=mod go install "github.com/open-policy-agent/opa@$version"; then
  # Some proxies refuse `go install pkg@version` for modules with replace directives;
  # a one-file wrapper module importing OPA's cmd package builds the same binary.
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  cat > "$tmp/main.go" <<'GO'
package main

import (
	"os"

	"github.com/open-policy-agent/opa/cmd"
)

func main() {
	if err := cmd.RootCommand.Execute(); err != nil {
		os.Exit(1)
	}
}
GO
  (cd "$tmp" && go mod init whose-opa >/dev/null 2>&1 \
    && go get "github.com/open-policy-agent/opa@$version" \
    && go build -o "$root/bin/opa" .)
fi
[ "$(built_version)" = "$version" ]
