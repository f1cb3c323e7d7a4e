"""Identity: a verified token, or dev headers only in dev mode."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fastapi import HTTPException
from starlette.requests import Request

from sidecar.identity import Authenticator, Identity
from sidecar.settings import Settings

SECRET = "a-test-secret-of-at-least-32-bytes!!"


def request(headers: dict[str, str]) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw})


def token(claims: dict[str, Any], key: str = SECRET, algorithm: str = "HS256") -> str:
    base = {"sub": "alice", "tenant": "acme", "exp": int(time.time()) + 60}
    return jwt.encode(base | claims, key, algorithm=algorithm)


def reason(auth: Authenticator, headers: dict[str, str]) -> str:
    with pytest.raises(HTTPException) as refused:
        auth(request(headers))
    assert refused.value.status_code == 401
    return str(refused.value.detail["reason"])  # type: ignore[index]


@pytest.fixture
def auth() -> Authenticator:
    return Authenticator(Settings(jwt_hs256_secret=SECRET, jwt_issuer="idp", jwt_audience="whose"))


def good(**claims: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token({'iss': 'idp', 'aud': 'whose'} | claims)}"}


def test_verified_token_gives_identity_with_claims(auth: Authenticator) -> None:
    who = auth(request(good(groups=["group:launch-team"], roles=["auditor"])))
    assert who == Identity("alice", "acme", groups=("launch-team",), roles=("auditor",))


def test_token_in_api_key_header_is_accepted(auth: Authenticator) -> None:
    bearer = good()["Authorization"].removeprefix("Bearer ")
    assert auth(request({"api-key": bearer})).id == "alice"


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        ({"exp": int(time.time()) - 10}, "token_expired"),
        ({"nbf": int(time.time()) + 600}, "invalid_token"),
        ({"iss": "someone-else"}, "invalid_token"),
        ({"aud": "another-service"}, "invalid_token"),
        ({"tenant": ""}, "invalid_token"),
        ({"tenant": "  "}, "invalid_token"),
        ({"sub": "  "}, "invalid_token"),
        ({"sub": " alice"}, "invalid_token"),
    ],
)
def test_bad_claims_are_refused(auth: Authenticator, claims: dict[str, Any], expected: str) -> None:
    headers = {"Authorization": f"Bearer {token({'iss': 'idp', 'aud': 'whose'} | claims)}"}
    assert reason(auth, headers) == expected


def test_token_for_another_service_is_refused_even_without_configured_audience() -> None:
    lenient = Authenticator(Settings(jwt_hs256_secret=SECRET))
    assert lenient(request({"Authorization": f"Bearer {token({})}"})).id == "alice"
    foreign = token({"aud": "some-other-service"})
    assert reason(lenient, {"Authorization": f"Bearer {foreign}"}) == "invalid_token"


def test_missing_tenant_claim_is_refused(auth: Authenticator) -> None:
    claims = {"sub": "alice", "exp": int(time.time()) + 60, "iss": "idp", "aud": "whose"}
    forged = jwt.encode(claims, SECRET, algorithm="HS256")
    assert reason(auth, {"Authorization": f"Bearer {forged}"}) == "invalid_token"


def test_wrong_key_and_alg_none_are_refused(auth: Authenticator) -> None:
    wrong_key = token({"iss": "idp", "aud": "whose"}, key="another-secret-of-32-bytes-or-more!")
    unsigned = token({"iss": "idp", "aud": "whose"}, key="", algorithm="none")
    for forged in (wrong_key, unsigned):
        assert reason(auth, {"Authorization": f"Bearer {forged}"}) == "invalid_token"


def test_dev_headers_are_ignored_outside_dev_mode(auth: Authenticator) -> None:
    assert reason(auth, {"X-Whose-Asker": "bob", "X-Whose-Tenant": "acme"}) == "missing_token"


def test_dev_headers_in_dev_mode() -> None:
    dev = Authenticator(Settings(dev=True))
    who = dev(request({"X-Whose-Asker": "bob", "X-Whose-Tenant": "acme", "X-Whose-Groups": "a, b"}))
    assert who == Identity("bob", "acme", groups=("a", "b"))
    assert reason(dev, {"X-Whose-Asker": "bob"}) == "missing_dev_identity"


def test_no_identity_provider_refuses_to_start() -> None:
    with pytest.raises(ValueError, match="no identity provider"):
        Authenticator(Settings())


# --- asymmetric keys, JWKS, and algorithm confusion ---------------------------------


def _rsa() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _public_pem(private: Any) -> bytes:
    return private.public_key().public_bytes(  # type: ignore[no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _signed(private: Any, algorithm: str, headers: dict[str, str] | None = None) -> str:
    claims = {"sub": "alice", "tenant": "acme", "exp": int(time.time()) + 60}
    return jwt.encode(claims, private, algorithm=algorithm, headers=headers)


@pytest.mark.parametrize(
    ("make_key", "algorithm"),
    [(_rsa, "RS256"), (lambda: ec.generate_private_key(ec.SECP256R1()), "ES256")],
)
def test_public_key_verifies_its_own_algorithm(
    tmp_path: Path, make_key: Any, algorithm: str
) -> None:
    private = make_key()
    pem = tmp_path / "key.pem"
    pem.write_bytes(_public_pem(private))
    auth = Authenticator(Settings(jwt_public_key_file=pem))
    assert auth(request({"Authorization": f"Bearer {_signed(private, algorithm)}"})).id == "alice"


def test_hs_rs_confusion_is_refused(tmp_path: Path) -> None:
    # The classic attack: sign HS256 with the server's *public* key as the HMAC secret.
    private = _rsa()
    public = _public_pem(private)
    pem = tmp_path / "key.pem"
    pem.write_bytes(public)
    auth = Authenticator(Settings(jwt_public_key_file=pem))
    forged = _hmac_with(public)
    assert reason(auth, {"Authorization": f"Bearer {forged}"}) == "invalid_token"


def _hmac_with(secret: bytes) -> str:
    # PyJWT itself refuses to HMAC-sign with a PEM; build the token by hand, as an attacker would.
    header = base64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {"sub": "alice", "tenant": "acme", "exp": int(time.time()) + 60}
    body = base64url(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{base64url(signature)}"


def base64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_jwks_picks_the_key_by_kid_and_refuses_unknown_kids(tmp_path: Path) -> None:
    first, second = _rsa(), _rsa()
    jwks = {
        "keys": [
            json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(first.public_key())) | {"kid": "one"},
            json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(second.public_key())) | {"kid": "two"},
        ]
    }
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    auth = Authenticator(Settings(jwt_jwks_file=path))
    for private, kid in ((first, "one"), (second, "two")):
        good_token = _signed(private, "RS256", {"kid": kid})
        assert auth(request({"Authorization": f"Bearer {good_token}"})).id == "alice"
    wrong_kid = _signed(first, "RS256", {"kid": "two"})
    unknown_kid = _signed(first, "RS256", {"kid": "three"})
    for token_ in (wrong_kid, unknown_kid):
        assert reason(auth, {"Authorization": f"Bearer {token_}"}) == "invalid_token"


def test_jwks_with_a_symmetric_key_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "s"}]}))
    with pytest.raises(ValueError, match="only RSA and EC public keys"):
        Authenticator(Settings(jwt_jwks_file=path))


@pytest.mark.parametrize("secret", ["", "short", "x" * 31])
def test_a_short_hs256_secret_refuses_to_start(secret: str) -> None:
    with pytest.raises(ValueError, match="at least 32 bytes"):
        Authenticator(Settings(jwt_hs256_secret=secret))


def test_no_issuer_and_no_audience_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    Authenticator(Settings(jwt_hs256_secret=SECRET))
    assert "WHOSE_JWT_AUDIENCE" in caplog.text
    caplog.clear()
    Authenticator(Settings(jwt_hs256_secret=SECRET, jwt_audience="whose"))
    assert caplog.text == ""
