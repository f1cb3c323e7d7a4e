"""Keys that verify tokens: one configured key, a JWKS file, or an identity provider.

Every key is bound to the one algorithm it verifies, whatever a token's header
says. A JWKS is read strictly: only signature keys are used, a key's own `alg`
is honoured, and anything ambiguous (two keys under one `kid`, several keys
without kids, a symmetric key, a short RSA key, a private key) is refused.

A remote key set (a JWKS URL, or the `jwks_uri` of an OpenID Provider's
discovery document) is fetched on demand, cached, refreshed when it is older
than its lifetime or a token names a `kid` it lacks, and never fetched more
often than the refresh interval allows, so tokens with made-up kids cannot
turn the sidecar into a load generator against the identity provider.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
import jwt
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PublicKey
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key

log = logging.getLogger("whose.identity")

# RFC 7518 §3.3: RSA keys of 2048 bits or more.
MIN_RSA_BITS = 2048
# The asymmetric algorithms a key may verify; HMAC only through the configured
# secret (never from a key set, which is public), and never "none".
RSA_ALGORITHMS = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"})
EC_ALGORITHMS = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}
ASYMMETRIC_ALGORITHMS = RSA_ALGORITHMS | set(EC_ALGORITHMS.values()) | {"EdDSA"}
# A kid is an opaque name; bounded like the other names a token carries.
MAX_KID_CHARS = 200


class KeyRefused(ValueError):
    """A key, or a whole key set, that may not verify tokens (the message says why)."""


class KeysUnavailable(Exception):
    """No key set could be had yet (the identity provider has not answered)."""


class UnknownKey(Exception):
    """The key set has no key for the token's kid."""


class FetchFailed(Exception):
    """An identity provider's document could not be fetched or read."""


@dataclass(frozen=True)
class VerifyKey:
    kid: str | None
    # A cryptography public key, or the bytes of the configured HMAC secret.
    key: Any
    algorithm: str


def strict_json(raw: bytes | str) -> Any:
    """JSON as RFC 8259 says it: UTF-8, no NaN or Infinity, no duplicate member names.

    Python keeps the last of two equal member names; another parser may keep the
    first. A document both sides read differently is refused rather than guessed at.
    """
    text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    return json.loads(text, object_pairs_hook=_unique_members, parse_constant=_no_constant)


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for name, value in pairs:
        if name in members:
            raise ValueError(f"duplicate member {name!r}")
        members[name] = value
    return members


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class KeySet:
    """Keys by kid. A single key without a kid is the key for every token."""

    def __init__(self, keys: Sequence[VerifyKey]) -> None:
        if not keys:
            raise KeyRefused("no usable signature key")
        if len(keys) > 1 and any(k.kid is None for k in keys):
            raise KeyRefused("several keys: every key needs a kid")
        self.by_kid: dict[str | None, VerifyKey] = {}
        for key in keys:
            if key.kid in self.by_kid:
                # Which of the two verifies a token would be an accident of order.
                raise KeyRefused(f"two usable keys share kid {key.kid!r}")
            self.by_kid[key.kid] = key

    def find(self, kid: str | None) -> VerifyKey | None:
        if None in self.by_kid:
            return self.by_kid[None]
        return self.by_kid.get(kid)

    def kids(self) -> list[str | None]:
        return list(self.by_kid)


def _public_key_algorithm(public: Any, what: str) -> str:
    """The default algorithm for a public key, by type and curve; refuses weak keys."""
    if isinstance(public, RSAPublicKey):
        if public.key_size < MIN_RSA_BITS:
            raise KeyRefused(
                f"{what}: RSA key of {public.key_size} bits (at least {MIN_RSA_BITS} needed)"
            )
        return "RS256"
    if isinstance(public, EllipticCurvePublicKey):
        crv = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}.get(
            public.curve.name
        )
        if crv is None:
            raise KeyRefused(f"{what}: unsupported EC curve {public.curve.name}")
        return EC_ALGORITHMS[crv]
    if isinstance(public, Ed25519PublicKey | Ed448PublicKey):
        return "EdDSA"
    raise KeyRefused(f"{what}: not an RSA, EC or Ed25519/Ed448 public key")


def pem_key(pem: bytes, what: str) -> VerifyKey:
    """A PEM public key, verifying the algorithm its type and curve call for."""
    try:
        public = load_pem_public_key(pem)
    except (ValueError, TypeError) as exc:
        raise KeyRefused(f"{what}: not a PEM public key (BEGIN PUBLIC KEY): {exc}") from None
    return VerifyKey(None, public, _public_key_algorithm(public, what))


def jwk_key(data: Any) -> VerifyKey | None:
    """One JWK as a verification key; None for a key that is not for signatures."""
    if not isinstance(data, dict):
        raise KeyRefused("a JWKS entry is not a JSON object")
    kid = data.get("kid")
    what = f"JWKS key {kid!r}"
    if kid is not None and not (isinstance(kid, str) and 0 < len(kid) <= MAX_KID_CHARS):
        raise KeyRefused(f"{what}: kid must be a non-empty string of at most {MAX_KID_CHARS}")
    use, ops = data.get("use"), data.get("key_ops")
    # An encryption key in the same set (RFC 7517 §4.2, §4.3) is not ours to verify with.
    if use is not None and use != "sig":
        return None
    if ops is not None and not (isinstance(ops, list) and "verify" in ops):
        return None
    kty = data.get("kty")
    if kty == "oct":
        raise KeyRefused(f"{what}: symmetric (oct) keys are refused; a key set is public")
    alg = data.get("alg")
    if alg is not None and alg not in ASYMMETRIC_ALGORITHMS:
        raise KeyRefused(f"{what}: alg {alg!r} is not one of {sorted(ASYMMETRIC_ALGORITHMS)}")
    try:
        # PyJWK picks RS256 / ES256-384-512 by curve / EdDSA when the JWK names no alg.
        jwk = jwt.PyJWK(data)
    except (jwt.PyJWTError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise KeyRefused(f"{what}: {exc}") from None
    public = jwk.key
    default = _public_key_algorithm(public, what)  # a private or weak key stops here
    algorithm = jwk.algorithm_name
    if algorithm not in ASYMMETRIC_ALGORITHMS:
        raise KeyRefused(f"{what}: no supported algorithm for kty {kty!r}")
    family_ok = (
        algorithm in RSA_ALGORITHMS
        if isinstance(public, RSAPublicKey)
        else algorithm == default  # an EC key verifies its curve's ES*; an OKP key EdDSA
    )
    if not family_ok:
        raise KeyRefused(f"{what}: alg {algorithm} does not fit the key ({default})")
    return VerifyKey(kid, public, algorithm)


@dataclass(frozen=True)
class ParsedKeys:
    keys: KeySet
    # Keys that were refused one by one (the rest of the set is usable).
    refused: tuple[str, ...]


def parse_jwks(raw: bytes | str) -> ParsedKeys:
    """A JWKS document as a KeySet; raises KeyRefused when the set as a whole is unusable."""
    try:
        document = strict_json(raw)
    except (ValueError, RecursionError) as exc:
        raise KeyRefused(f"not a JSON document: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise KeyRefused('not a JWKS: expected {"keys": [...]}')
    usable: list[VerifyKey] = []
    refused: list[str] = []
    for entry in document["keys"]:
        try:
            key = jwk_key(entry)
        except KeyRefused as exc:
            refused.append(str(exc))
            continue
        if key is not None:
            usable.append(key)
    if not usable and refused:
        raise KeyRefused(f"no usable signature key: {'; '.join(refused)}")
    return ParsedKeys(KeySet(usable), tuple(refused))


def jwks_file(raw: str, what: str) -> KeySet:
    """A configured JWKS file: every key in it must be usable (a refusal stops start-up)."""
    try:
        parsed = parse_jwks(raw)
    except KeyRefused as exc:
        raise KeyRefused(f"{what}: {exc}") from None
    if parsed.refused:
        raise KeyRefused(f"{what}: {'; '.join(parsed.refused)}")
    return parsed.keys


class KeySource(Protocol):
    async def key_for(self, kid: str | None) -> VerifyKey:
        """The key for a token's kid; raises UnknownKey or KeysUnavailable."""
        ...


class StaticKeys:
    """Keys read at start-up (a secret, a PEM file, a JWKS file)."""

    def __init__(self, keys: KeySet) -> None:
        self.keys = keys

    async def key_for(self, kid: str | None) -> VerifyKey:
        found = self.keys.find(kid)
        if found is None:
            raise UnknownKey(kid)
        return found


def check_fetch_url(url: str, what: str) -> str:
    """An https URL, or http on loopback (a local or test identity provider).

    Keys fetched over plain HTTP from another host could be swapped in transit,
    and whoever swaps them can sign any identity.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return url
    if parts.scheme == "http" and _is_loopback(host):
        return url
    raise KeyRefused(f"{what} must be an https:// URL (http:// only on loopback): {url!r}")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class FetchLimits:
    max_age_s: float
    min_refresh_s: float
    timeout_s: float
    max_bytes: int


class RemoteKeys:
    """The key set of an identity provider: a JWKS URL, or OpenID Connect discovery.

    - Nothing is fetched at start-up: a provider that is down when the sidecar
      starts costs 401 `keys_unavailable` until it answers, not a failed start.
    - Keys older than `max_age_s` are fetched again before use; a token whose kid is
      unknown fetches again at once. Either way, at most one fetch starts per
      `min_refresh_s`, and concurrent requests share it.
    - A failed or refused fetch keeps the keys that were good: a provider outage does
      not lock out tokens its current keys signed.
    """

    def __init__(
        self,
        limits: FetchLimits,
        *,
        jwks_url: str | None = None,
        issuer: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (jwks_url is None) == (issuer is None):
            raise ValueError("RemoteKeys needs a JWKS URL or an OpenID issuer, not both")
        self.limits = limits
        self.issuer = issuer
        self.jwks_url = check_fetch_url(jwks_url, "the JWKS URL") if jwks_url else None
        if issuer is not None:
            check_fetch_url(issuer, "the OpenID issuer")
        self.clock = clock
        self.keys: KeySet | None = None
        self.fetched_at = -math.inf
        self.attempted_at = -math.inf
        self._discovered: str | None = None
        self._lock = asyncio.Lock()

    async def key_for(self, kid: str | None) -> VerifyKey:
        keys = self.keys
        if keys is not None:
            found = keys.find(kid)
            # Fresh keys, or stale ones while another request is fetching: a refresh
            # in flight must not hold up every request behind the provider's latency.
            if found is not None and (not self._stale() or self._lock.locked()):
                return found
        await self._refresh()
        if self.keys is None:
            raise KeysUnavailable
        found = self.keys.find(kid)
        if found is None:
            raise UnknownKey(kid)
        return found

    def _stale(self) -> bool:
        return self.clock() - self.fetched_at >= self.limits.max_age_s

    async def _refresh(self) -> None:
        async with self._lock:
            now = self.clock()
            # Rate limit: what just waited for the lock sees the fetch that held it.
            if now - self.attempted_at < self.limits.min_refresh_s:
                return
            self.attempted_at = now
            try:
                parsed = parse_jwks(await self._fetch_jwks())
            except (FetchFailed, KeyRefused) as exc:
                # Re-discover next time: the provider may have moved its jwks_uri.
                self._discovered = None
                kept = "keeping the cached keys" if self.keys else "no keys yet"
                log.warning("identity provider keys not refreshed (%s): %s", kept, exc)
                return
            for reason in parsed.refused:
                log.warning("identity provider key skipped: %s", reason)
            if self.keys is None or self.keys.kids() != parsed.keys.kids():
                log.info("identity provider keys: kids %s", parsed.keys.kids())
            self.keys = parsed.keys
            self.fetched_at = self.clock()

    async def _fetch_jwks(self) -> bytes:
        timeout = aiohttp.ClientTimeout(total=self.limits.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            url = self.jwks_url or self._discovered
            if url is None:
                url = self._discovered = await self._discover(session)
            return await self._get(session, url)

    async def _discover(self, session: aiohttp.ClientSession) -> str:
        assert self.issuer is not None
        # OpenID Connect Discovery 1.0 §4: the issuer with any trailing "/" removed.
        url = self.issuer.rstrip("/") + "/.well-known/openid-configuration"
        try:
            document = strict_json(await self._get(session, url))
        except (ValueError, RecursionError) as exc:
            raise FetchFailed(f"{url}: not a JSON document: {exc}") from None
        if not isinstance(document, dict):
            raise FetchFailed(f"{url}: not a JSON object")
        # §4.3: the document must name exactly the configured issuer, or it speaks
        # for another provider (and its keys would sign for ours).
        if document.get("issuer") != self.issuer:
            raise FetchFailed(f"{url}: issuer {document.get('issuer')!r} is not {self.issuer!r}")
        jwks_uri = document.get("jwks_uri")
        if not isinstance(jwks_uri, str):
            raise FetchFailed(f"{url}: no jwks_uri")
        try:
            return check_fetch_url(jwks_uri, "jwks_uri")
        except KeyRefused as exc:
            raise FetchFailed(f"{url}: {exc}") from None

    async def _get(self, session: aiohttp.ClientSession, url: str) -> bytes:
        limit = self.limits.max_bytes
        try:
            # No redirects: a redirect could leave https or the provider's host.
            async with session.get(
                url, allow_redirects=False, headers={"Accept": "application/json"}
            ) as response:
                if response.status != 200:
                    raise FetchFailed(f"{url}: HTTP {response.status}")
                if response.content_length is not None and response.content_length > limit:
                    raise FetchFailed(f"{url}: {response.content_length} bytes (limit {limit})")
                body = bytearray()
                async for chunk in response.content.iter_any():
                    body += chunk
                    if len(body) > limit:
                        raise FetchFailed(f"{url}: larger than {limit} bytes")
                return bytes(body)
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
            raise FetchFailed(f"{url}: {type(exc).__name__}: {exc}") from None
