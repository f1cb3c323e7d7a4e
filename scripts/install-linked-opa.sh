#!/usr/bin/env bash
# Build OPA's evaluator as a C shared library (bin/libwhoseopa.so, git-ignored) from the
# pinned OPA module (native/linkedopa/go.mod and go.sum), for sidecar/policy/linked_opa.py.
# Rebuilt when the Go source or the pins change; a no-op otherwise.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src="$root/native/linkedopa"
out="$root/bin/libwhoseopa.so"
stamp="$root/bin/.libwhoseopa.sha256"
wanted="$(cat "$src"/*.go "$src/go.mod" "$src/go.sum" | sha256sum | cut -d' ' -f1)"
if [ -f "$out" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
  exit 0
fi
command -v go >/dev/null || { echo "install-linked-opa: Go is required to build OPA's evaluator" >&2; exit 1; }
echo "building OPA's evaluator as a shared library (first run only, a few minutes)..." >&2
mkdir -p "$root/bin"
# -mod=readonly: the pins in go.mod/go.sum are used as they are, never updated.
(cd "$src" && GOFLAGS=-mod=readonly CGO_ENABLED=1 go build -buildmode=c-shared -trimpath \
  -ldflags="-s -w" -o "$out.tmp" .)
rm -f "$out.tmp.h" "$out.h"  # the generated C header: ctypes does not need it
mv "$out.tmp" "$out"
echo "$wanted" > "$stamp"
