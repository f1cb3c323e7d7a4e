#!/usr/bin/env bash
# Build the pinned kustomize from the Go module proxy into bin/ (git-ignored). The tests
# render deploy/k8s with it and validate what `kubectl apply -k` would really apply.
set -euo pipefail
version="${1:?usage: install-kustomize.sh vX.Y.Z}"
root="$(cd "$(dirname "$0")/.." && pwd)"
module=sigs.k8s.io/kustomize/kustomize/v5
built_version() {
  # `go install` leaves `kustomize version` unstamped; the build info has the module version.
  go version -m "$root/bin/kustomize" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}
command -v go >/dev/null || { echo "install-kustomize: Go is required" >&2; exit 1; }
if [ -x "$root/bin/kustomize" ] && [ "$(built_version)" = "$version" ]; then
  exit 0
fi
echo "building kustomize $version from the Go module proxy (first run only)..." >&2
mkdir -p "$root/bin"
GOBIN="$root/bin" go install "$module@$version"
[ "$(built_version)" = "$version" ]
