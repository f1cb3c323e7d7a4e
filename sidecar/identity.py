"""Who is asking: a verified bearer token, or (dev mode, loopback only) headers.

The tenant, groups, roles and scopes of the asker come from here and nowhere
else; a request body never names its own tenant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePublicKey
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from fastapi import HTTPException, Request

from sidecar.settings import Settings


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
        self.key: str | bytes | None = None
        self.algorithms: list[str] = []
        if settings.jwt_hs256_secret is not None:
            self.key = settings.jwt_hs256_secret.get_secret_value()
            self.algorithms = ["HS256"]
        elif settings.jwt_public_key_file is not None:
            self.key = settings.jwt_public_key_file.read_bytes()
            # One algorithm family per key: an RSA key never verifies an HMAC token.
            self.algorithms = ["ES256"] if _is_ec(self.key) else ["RS256"]
        if not self.dev and self.key is None:
            raise ValueError(
                "no identity provider: set WHOSE_JWT_HS256_SECRET or "
                "WHOSE_JWT_PUBLIC_KEY_FILE, or run `whose serve --dev` on loopback"
            )

    def __call__(self, request: Request) -> Identity:
        if self.dev and "x-whose-asker" in request.headers:
            return self._from_headers(request)
        token = _bearer(request)
        if token is None:
            raise _unauthenticated("missing_token")
        if self.key is None:
            raise _unauthenticated("token_not_accepted")
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

    def _from_token(self, token: str) -> Identity:
        assert self.key is not None
        try:
            claims = jwt.decode(
                token,
                self.key,
                algorithms=self.algorithms,
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
        if not isinstance(sub, str) or not sub or not isinstance(tenant, str) or not tenant:
            raise _unauthenticated("invalid_token")
        return Identity(
            id=sub,
            tenant=tenant,
            groups=_names(claims.get("groups", [])),
            roles=_names(claims.get("roles", [])),
            scopes=_names(claims.get("scopes", [])),
        )


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    # qdrant-client and Qdrant's own JWT access control send the token as api-key.
    api_key = request.headers.get("api-key", "").strip()
    return api_key or None


def _is_ec(pem: bytes) -> bool:
    try:
        return isinstance(load_pem_public_key(pem), EllipticCurvePublicKey)
    except ValueError:
        return False
