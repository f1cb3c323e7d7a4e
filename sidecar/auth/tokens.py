"""Who is asking: a verified bearer token, or (dev mode, loopback only) headers.

The tenant, groups, roles and scopes of the asker come from here and nowhere
else; a request body never names its own tenant.

A validly signed token is still refused when it can be read two ways: duplicate
member names, dates that are not JSON numbers, an empty audience, names with
surrounding whitespace, list claims that are not lists of names. What the
identity provider meant and what the policy sees must be the same thing.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

import jwt
from starlette.requests import Request

from sidecar.auth.identity import (
    GROUP_PREFIX,
    MAX_LIST_ENTRIES,
    Identity,
    Refused,
    dev_identity,
    is_name,
    is_principal,
    person_name,
)
from sidecar.auth.jwks import (
    FetchLimits,
    KeyRefused,
    KeySet,
    KeySource,
    KeysUnavailable,
    RemoteKeys,
    StaticKeys,
    UnknownKey,
    VerifyKey,
    jwks_file,
    pem_key,
    strict_json,
)
from sidecar.errors import Unauthenticated
from sidecar.settings import Settings

log = logging.getLogger("whose.identity")

# RFC 7518 §3.2: an HS256 key at least as long as the hash output.
_MIN_HS256_SECRET_BYTES = 32
_SEGMENT = re.compile(r"[A-Za-z0-9_-]*={0,2}")


def _group(name: str) -> str:
    bare = person_name(name).removeprefix(GROUP_PREFIX)
    if not is_name(bare):
        raise Refused("invalid_token")
    return bare


def _name_list(claims: dict[str, Any], claim: str) -> tuple[str, ...]:
    """An optional list claim: absent, or a JSON array of names; anything else refused."""
    if claim not in claims:
        return ()
    raw = claims[claim]
    if not isinstance(raw, list) or len(raw) > MAX_LIST_ENTRIES:
        raise Refused("invalid_token")
    if not all(is_name(item) for item in raw):
        raise Refused("invalid_token")
    return tuple(raw)


def _is_numeric_date(value: Any) -> bool:
    # RFC 7519 §2 NumericDate: a JSON number. bool is an int to Python, and a
    # numeric string is what PyJWT would quietly convert.
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_audience(value: Any) -> bool:
    if isinstance(value, str):
        return value != ""
    return (
        isinstance(value, list)
        and 0 < len(value) <= MAX_LIST_ENTRIES
        and all(isinstance(item, str) and item != "" for item in value)
    )


def check_claims(claims: dict[str, Any]) -> Identity:
    """The identity a (not yet verified) payload claims, if it is unambiguous."""
    if "exp" not in claims:
        raise Refused("invalid_token")
    for date in ("exp", "nbf", "iat"):
        if date in claims and not _is_numeric_date(claims[date]):
            raise Refused("invalid_token")
    # PyJWT lets an empty audience through when none is configured.
    if "aud" in claims and not _is_audience(claims["aud"]):
        raise Refused("invalid_token")
    sub, tenant = claims.get("sub"), claims.get("tenant")
    if not isinstance(sub, str) or not is_name(tenant):
        raise Refused("invalid_token")
    sub = person_name(sub)
    if not is_principal(sub):
        raise Refused("invalid_token")
    return Identity(
        id=sub,
        tenant=tenant,
        # Groups are matched by bare name; "group:x" is accepted for x.
        groups=tuple(_group(g) for g in _name_list(claims, "groups")),
        roles=_name_list(claims, "roles"),
        scopes=_name_list(claims, "scopes"),
    )


def _segment(segment: str) -> Any:
    if not _SEGMENT.fullmatch(segment):
        raise Refused("invalid_token")
    try:
        bare = segment.rstrip("=")
        raw = base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))
        return strict_json(raw)
    except (binascii.Error, ValueError, RecursionError):
        raise Refused("invalid_token") from None


def parse_token(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Header and payload, read strictly before any signature check.

    PyJWT parses the same bytes again when it verifies; with no duplicate member
    names both readings are the same object.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise Refused("invalid_token")
    header, payload = _segment(parts[0]), _segment(parts[1])
    if not isinstance(header, dict) or not isinstance(payload, dict):
        raise Refused("invalid_token")
    if not isinstance(header.get("alg"), str):
        raise Refused("invalid_token")
    kid = header.get("kid")
    if kid is not None and not (isinstance(kid, str) and kid):
        raise Refused("invalid_token")
    return header, payload


class Authenticator:
    """Turns a request into an Identity, or refuses it (Unauthenticated: 401)."""

    def __init__(self, settings: Settings) -> None:
        self.dev = settings.dev
        self.issuer = settings.jwt_issuer
        self.audience = settings.jwt_audience
        self.max_token_bytes = settings.jwt_max_token_bytes
        self.keys = identity_provider(settings)
        if self.keys is not None and self.issuer is None and self.audience is None:
            log.warning(
                "neither WHOSE_JWT_ISSUER nor WHOSE_JWT_AUDIENCE is set: any token the key "
                "verifies is accepted, including one issued for another service"
            )

    async def __call__(self, request: Request) -> Identity:
        return await self.from_headers(request.headers)

    async def from_headers(self, headers: Mapping[str, str]) -> Identity:
        """The identity the headers carry (HTTP's, or gRPC's metadata: lower-case names),
        verified the same way whichever transport they came by."""
        try:
            token = _bearer(headers)
            if self.dev and _names_a_dev_identity(headers):
                # Two identities in one request: whichever won, the other was a lie the
                # caller told, so neither is believed (issue 35: a token for bob with
                # X-Whose-Asker: alice was answered as alice).
                if token is not None:
                    raise Refused("ambiguous_identity")
                return _from_headers(headers)
            if token is None:
                raise Refused("missing_token")
            return await self.verify(token)
        except Refused as refused:
            # The reason code says what to fix without telling an attacker what is close.
            raise Unauthenticated(refused.reason) from None

    async def verify(self, token: str) -> Identity:
        """The identity of a token, or Refused with the reason."""
        # Before any parsing: a header-sized token costs the same to refuse as a short one.
        if len(token) > self.max_token_bytes:
            raise Refused("token_too_large")
        if self.keys is None:
            raise Refused("token_not_accepted")
        header, payload = parse_token(token)
        identity = check_claims(payload)
        try:
            key = await self.keys.key_for(header.get("kid"))
        except UnknownKey:
            raise Refused("unknown_key") from None
        except KeysUnavailable:
            raise Refused("keys_unavailable") from None
        self._verify_signature(token, key)
        return identity

    def _verify_signature(self, token: str, key: VerifyKey) -> None:
        try:
            jwt.decode(
                token,
                key.key,
                # The key's one algorithm: no "none", no HS/RS confusion, and a JWK's
                # own alg is honoured whatever the token's header says.
                algorithms=[key.algorithm],
                issuer=self.issuer,
                # With no audience configured, a token that names one is refused:
                # it was issued for some other service.
                audience=self.audience,
                options={"require": ["exp", "sub", "tenant"]},
            )
        except jwt.ExpiredSignatureError:
            raise Refused("token_expired") from None
        except jwt.PyJWTError:
            raise Refused("invalid_token") from None
        except (ValueError, TypeError) as exc:
            # A library error on hostile input is still a refusal, never a 500.
            log.warning("token verification failed unexpectedly: %s", type(exc).__name__)
            raise Refused("invalid_token") from None


def identity_provider(settings: Settings) -> KeySource | None:
    """The key source tokens are verified with (None: --dev without one); ValueError
    when there is none to serve with, or more than one, or it is unusable."""
    keys = _key_source(settings)
    if not settings.dev and keys is None:
        raise ValueError(
            "no identity provider: set one of WHOSE_JWT_HS256_SECRET, "
            "WHOSE_JWT_PUBLIC_KEY_FILE, WHOSE_JWT_JWKS_FILE, WHOSE_JWT_JWKS_URL or "
            "WHOSE_JWT_OIDC=true (with WHOSE_JWT_ISSUER), or run `whose serve --dev` "
            "on loopback"
        )
    return keys


def _key_source(settings: Settings) -> KeySource | None:
    """The one configured key source (several are refused: which one wins is a guess)."""
    sources = {
        "WHOSE_JWT_HS256_SECRET": settings.jwt_hs256_secret is not None,
        "WHOSE_JWT_PUBLIC_KEY_FILE": settings.jwt_public_key_file is not None,
        "WHOSE_JWT_JWKS_FILE": settings.jwt_jwks_file is not None,
        "WHOSE_JWT_JWKS_URL": settings.jwt_jwks_url is not None,
        "WHOSE_JWT_OIDC": settings.jwt_oidc,
    }
    chosen = [name for name, configured in sources.items() if configured]
    if len(chosen) > 1:
        raise ValueError(f"several identity key sources are set ({', '.join(chosen)}): keep one")
    limits = FetchLimits(
        max_age_s=settings.jwt_jwks_max_age_s,
        min_refresh_s=settings.jwt_jwks_min_refresh_s,
        timeout_s=settings.jwt_jwks_timeout_s,
        max_bytes=settings.jwt_jwks_max_bytes,
    )
    try:
        if settings.jwt_hs256_secret is not None:
            secret = settings.jwt_hs256_secret.get_secret_value().encode()
            if len(secret) < _MIN_HS256_SECRET_BYTES:
                # RFC 7518 §3.2: a shorter HMAC key can be brute-forced from one token.
                raise ValueError(
                    f"WHOSE_JWT_HS256_SECRET must be at least {_MIN_HS256_SECRET_BYTES} bytes"
                )
            return StaticKeys(KeySet([VerifyKey(None, secret, "HS256")]))
        if settings.jwt_public_key_file is not None:
            pem = settings.jwt_public_key_file.read_bytes()
            return StaticKeys(KeySet([pem_key(pem, "WHOSE_JWT_PUBLIC_KEY_FILE")]))
        if settings.jwt_jwks_file is not None:
            text = settings.jwt_jwks_file.read_text()
            return StaticKeys(jwks_file(text, "WHOSE_JWT_JWKS_FILE"))
        if settings.jwt_jwks_url is not None:
            return RemoteKeys(limits, jwks_url=settings.jwt_jwks_url)
        if settings.jwt_oidc:
            if settings.jwt_issuer is None:
                raise ValueError("WHOSE_JWT_OIDC=true needs WHOSE_JWT_ISSUER")
            return RemoteKeys(limits, issuer=settings.jwt_issuer)
    except KeyRefused as exc:
        raise ValueError(str(exc)) from None
    return None


def _names_a_dev_identity(headers: Mapping[str, str]) -> bool:
    return any(header in headers for header in _DEV_HEADERS)


_DEV_HEADERS = ("x-whose-asker", "x-whose-tenant", "x-whose-groups", "x-whose-roles")


def _from_headers(headers: Mapping[str, str]) -> Identity:
    asker = headers.get("x-whose-asker", "")
    tenant = headers.get("x-whose-tenant", "")
    if not asker.strip() or not tenant.strip():
        raise Refused("missing_dev_identity")
    groups = _header_list(headers, "x-whose-groups")
    return dev_identity(asker, tenant, groups, _header_list(headers, "x-whose-roles"))


def _header_list(headers: Mapping[str, str], header: str) -> tuple[str, ...]:
    # A comma list, as a person types it: "a, b" is a and b.
    names = [item.strip() for item in headers.get(header, "").split(",")]
    names = [name for name in names if name]
    if len(names) > MAX_LIST_ENTRIES or not all(is_name(name) for name in names):
        raise Refused("invalid_dev_identity")
    return tuple(names)


def _bearer(headers: Mapping[str, str]) -> str | None:
    header = headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    # qdrant-client and Qdrant's own JWT access control send the token as api-key.
    api_key = headers.get("api-key", "").strip()
    return api_key or None
