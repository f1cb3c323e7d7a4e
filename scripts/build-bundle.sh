#!/usr/bin/env bash
# Build the policy bundle OPA's bundle plugin downloads: rego/ (policies and the
# directory / config data, without the *_test.rego files), signed with an RSA key.
#
#   scripts/build-bundle.sh SIGNING_KEY.pem OUT.tar.gz [REVISION]
#
# OPA verifies the signature with the public half (the `keys` section of
# deploy/opa/config.yaml) and refuses to activate a bundle that does not verify.
# Make a key pair once (keep the private key in your secret store, not in git):
#   openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:3072 -out bundle-signing.pem
#   openssl pkey -in bundle-signing.pem -pubout -out bundle-verify.pem
set -euo pipefail
key="${1:?usage: build-bundle.sh SIGNING_KEY.pem OUT.tar.gz [REVISION]}"
out="${2:?usage: build-bundle.sh SIGNING_KEY.pem OUT.tar.gz [REVISION]}"
root="$(cd "$(dirname "$0")/.." && pwd)"
opa="${OPA:-$root/bin/opa}"
policy_dir="${POLICY_DIR:-$root/rego}"
# The revision names exactly what was shipped: it is in every decision log entry and
# in the sidecar's decision-cache keys, so two different policies must never share
# one. Without an explicit REVISION it is the commit plus a digest of the shipped
# files (an uncommitted edit changes the digest; `git describe --dirty` alone does not).
content_digest() {
  (cd "$policy_dir" && find . -type f ! -name '*_test.rego' -print0 | LC_ALL=C sort -z |
    xargs -0 sha256sum | sha256sum | cut -c1-12)
}
if [ -n "${3:-}" ]; then
  revision="$3"
else
  commit="$(git -C "$root" describe --always --dirty 2>/dev/null || echo local)"
  revision="$commit-$(content_digest)"
fi
[ -f "$key" ] || { echo "build-bundle: signing key $key not found" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
key="$(cd "$(dirname "$key")" && pwd)/$(basename "$key")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
# Built from inside the policy folder so that file names in the bundle are relative.
cd "$policy_dir"
"$opa" build --bundle . --ignore '*_test.rego' \
  --signing-alg RS256 --signing-key "$key" --revision "$revision" --output "$out"
echo "built $out (revision $revision)" >&2
