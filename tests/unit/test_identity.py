"""Identity: a verified token, or dev headers only in dev mode."""

from __future__ import annotations

import time
from typing import Any

import jwt
import pytest
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
