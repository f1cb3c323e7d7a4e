"""Who is asking: a verified bearer token, or (dev mode, loopback only) headers.

The tenant, groups, roles and scopes of the asker come from here and nowhere
else; a request body never names its own tenant.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, TypeGuard

import jwt
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from fastapi import HTTPException, Request

from sidecar.settings import Settings

log = logging.getLogger("whose.identity")

# RFC 7518 §3.2: an HS256 key at least as long as the hash output.
_MIN_HS256_SECRET_BYTES = 32


@dataclass(frozen=True)
class Identity:
    id: str
    tenant: str
    groups: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    def policy_view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant,
            "groups": list(self.groups),
            "roles": list(self.roles),
            "scopes": list(self.scopes),
        }


def _unauthenticated(reason: str) -> HTTPException:
    # The reason code says what to fix without telling an attacker what is close.
    return HTTPException(
        status_code=401,
        detail={"error": "unauthenticated", "reason": reason},
        headers={"WWW-Authenticate": "Bearer"},
    )


def _names(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list):
        return ()
    names = (str(item).strip() for item in raw)
    # Groups are matched by bare name; accept "group:x" too.
    return tuple(name.removeprefix("group:") for name in names if name)


class Authenticator:
    """Turns a request into an Identity, or refuses it with 401."""

    def __init__(self, settings: Settings) -> None:
        self.dev = settings.dev
        self.issuer = settings.jwt_issuer
        self.audience = settings.jwt_audience
        # Each key carries the one algorithm it may verify: an RSA or EC public key
        # never verifies an HMAC token (no HS/RS confusion), and "none" is never listed.
        self.keys: dict[str | None, tuple[Any, str]] = {}
        if settings.jwt_hs256_secret is not None:
            secret = settings.jwt_hs256_secret.get_secret_value()
            if len(secret.encode()) < _MIN_HS256_SECRET_BYTES:
                # RFC 7518 §3.2: a shorter HMAC key can be brute-forced from one token.
                raise ValueError(
                    f"WHOSE_JWT_HS256_SECRET must be at least {_MIN_HS256_SECRET_BYTES} bytes"
                )
            self.keys[None] = (secret, "HS256")
        elif settings.jwt_public_key_file is not None:
            pem = settings.jwt_public_key_file.read_bytes()
            self.keys[None] = (pem, "ES256" if _is_ec(pem) else "RS256")
        elif settings.jwt_jwks_file is not None:
            self.keys = _jwks(settings.jwt_jwks_file.read_text())
        if not self.dev and not self.keys:
            raise ValueError(
                "no identity provider: set WHOSE_JWT_HS256_SECRET, WHOSE_JWT_PUBLIC_KEY_FILE "
                "or WHOSE_JWT_JWKS_FILE, or run `whose serve --dev` on loopback"
            )
        if self.keys and self.issuer is None and self.audience is None:
            log.warning(
                "neither WHOSE_JWT_ISSUER nor WHOSE_JWT_AUDIENCE is set: any token the key "
                "verifies is accepted, including one issued for another service"
            )

    def __call__(self, request: Request) -> Identity:
        if self.dev and "x-whose-asker" in request.headers:
            return self._from_headers(request)
        token = _bearer(request)
        if token is None:
            raise _unauthenticated("missing_token")
        return self._from_token(token)

    def _from_headers(self, request: Request) -> Identity:
        asker = request.headers.get("x-whose-asker", "").strip()
        tenant = request.headers.get("x-whose-tenant", "").strip()
        if not asker or not tenant:
            raise _unauthenticated("missing_dev_identity")
        return Identity(
            id=asker,
            tenant=tenant,
            groups=_names(request.headers.get("x-whose-groups", "")),
            roles=_names(request.headers.get("x-whose-roles", "")),
        )

    def _key_for(self, token: str) -> tuple[Any, str]:
        if None in self.keys:
            return self.keys[None]
        try:
            kid = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError:
            raise _unauthenticated("invalid_token") from None
        if kid not in self.keys:
            raise _unauthenticated("invalid_token")
        return self.keys[kid]

    def _from_token(self, token: str) -> Identity:
        if not self.keys:
            raise _unauthenticated("token_not_accepted")
        key, algorithm = self._key_for(token)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=self.issuer,
                audience=self.audience,
                # With no audience configured, a token that names one is refused:
                # it was issued for some other service.
                options={"require": ["exp", "sub", "tenant"]},
            )
        except jwt.ExpiredSignatureError:
            raise _unauthenticated("token_expired") from None
        except jwt.PyJWTError:
            raise _unauthenticated("invalid_token") from None
        sub, tenant = claims.get("sub"), claims.get("tenant")
        if not _is_name(sub) or not _is_name(tenant):
            raise _unauthenticated("invalid_token")
        return Identity(
            id=sub,
            tenant=tenant,
            groups=_names(claims.get("groups", [])),
            roles=_names(claims.get("roles", [])),
            scopes=_names(claims.get("scopes", [])),
        )


def _is_name(claim: Any) -> TypeGuard[str]:
    # A blank subject or tenant would name nobody (or everybody's empty default).
    return isinstance(claim, str) and claim == claim.strip() and bool(claim)


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    # qdrant-client and Qdrant's own JWT access control send the token as api-key.
    api_key = request.headers.get("api-key", "").strip()
    return api_key or None


def _jwks(text: str) -> dict[str | None, tuple[Any, str]]:
    """Public keys of a JWKS document, by kid; symmetric ("oct") keys are refused."""
    keys: dict[str | None, tuple[Any, str]] = {}
    jwks = jwt.PyJWKSet.from_json(text).keys
    for jwk in jwks:
        algorithm = {"RSA": "RS256", "EC": "ES256"}.get(jwk.key_type or "")
        if algorithm is None:
            raise ValueError(f"JWKS key {jwk.key_id!r}: only RSA and EC public keys are accepted")
        if jwk.key_id is None and len(jwks) > 1:
            raise ValueError("JWKS with several keys: every key needs a kid")
        keys[jwk.key_id] = (jwk.key, algorithm)
    return keys


def _is_ec(pem: bytes) -> bool:
    try:
        return isinstance(load_pem_public_key(pem), EllipticCurvePublicKey)
    except ValueError:
        return False
