"""Keys from an identity provider: a real HTTP server on loopback that rotates keys,
goes down, answers slowly or wrongly, and counts what it is asked.

The Authenticator is the sidecar's own; only its settings are small (cache
lifetimes of a fraction of a second) so that expiry can be watched happen.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.requests import Request

from sidecar.auth.identity import Identity
from sidecar.auth.tokens import Authenticator
from sidecar.errors import Unauthenticated
from sidecar.settings import Settings
from tests.integration.idp_server import ISSUED_FOR, LocalIdp, SigningKey


@pytest.fixture
def idp() -> Iterator[LocalIdp]:
    server = LocalIdp().start()
    yield server
    server.stop()


def remote(idp: LocalIdp, *, oidc: bool = False, **settings: Any) -> Authenticator:
    source: dict[str, Any] = {"jwt_oidc": True} if oidc else {"jwt_jwks_url": idp.jwks_url}
    defaults: dict[str, Any] = {
        "jwt_issuer": idp.url,
        "jwt_audience": ISSUED_FOR,
        "jwt_jwks_max_age_s": 300,
        "jwt_jwks_min_refresh_s": 0,
        "jwt_jwks_timeout_s": 2,
    }
    return Authenticator(Settings(**(defaults | source | settings)))


def request(raw_token: str) -> Request:
    headers = [(b"authorization", f"Bearer {raw_token}".encode())]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers})


async def accepted(auth: Authenticator, raw_token: str) -> Identity:
    return await auth(request(raw_token))


async def refused(auth: Authenticator, raw_token: str) -> str:
    with pytest.raises(Unauthenticated) as caught:
        await auth(request(raw_token))
    return caught.value.reason


async def test_rotation_new_key_at_once_old_key_refused_after_its_cache_lifetime(
    idp: LocalIdp,
) -> None:
    old, new = SigningKey.rsa("2026-01"), SigningKey.ec("2026-02")
    idp.publish(old)
    auth = remote(idp, jwt_jwks_max_age_s=0.5)
    assert (await accepted(auth, old.token(idp.url))).id == "alice"
    assert idp.count() == 1

    # The provider adds a key: its first token fetches the set again, no restart.
    idp.publish(old, new)
    assert (await accepted(auth, new.token(idp.url, sub="bob"))).id == "bob"
    assert idp.count() == 2

    # The provider drops the old key: cached keys are used for their lifetime...
    idp.publish(new)
    assert (await accepted(auth, old.token(idp.url))).id == "alice"
    assert idp.count() == 2
    # ...and once it is over, the set is fetched again and the old key is gone.
    await asyncio.sleep(0.6)
    assert await refused(auth, old.token(idp.url)) == "unknown_key"
    assert idp.count() == 3
    assert (await accepted(auth, new.token(idp.url))).id == "alice"


async def test_unknown_kids_fetch_at_most_once_per_refresh_interval(idp: LocalIdp) -> None:
    known = SigningKey.rsa("known")
    idp.publish(known)
    auth = remote(idp, jwt_jwks_min_refresh_s=60)
    assert (await accepted(auth, known.token(idp.url))).id == "alice"
    # Made-up kids, as a flood of forged tokens would carry: none reaches the provider.
    stranger = SigningKey.rsa("unused")
    for i in range(20):
        stranger.kid = f"made-up-{i}"
        assert await refused(auth, stranger.token(idp.url)) == "unknown_key"
    assert idp.count() == 1
    # Even a real new key waits for the interval (the price of the rate limit).
    fresh = SigningKey.rsa("fresh")
    idp.publish(known, fresh)
    assert await refused(auth, fresh.token(idp.url)) == "unknown_key"
    assert idp.count() == 1


async def test_concurrent_unknown_kids_share_one_fetch(idp: LocalIdp) -> None:
    first = SigningKey.rsa("first")
    idp.publish(first)
    auth = remote(idp, jwt_jwks_min_refresh_s=0.5)
    await accepted(auth, first.token(idp.url))
    await asyncio.sleep(0.6)
    second = SigningKey.rsa("second")
    idp.publish(first, second)
    idp.state.delay_s = 0.3  # so that all of them are waiting while the fetch runs
    tokens = [second.token(idp.url, sub=f"user-{i}") for i in range(10)]
    who = await asyncio.gather(*(accepted(auth, t) for t in tokens))
    assert sorted(w.id for w in who) == sorted(f"user-{i}" for i in range(10))
    assert idp.count() == 2


async def test_provider_down_cached_keys_keep_working_unknown_kid_is_401(
    idp: LocalIdp, caplog: pytest.LogCaptureFixture
) -> None:
    key = SigningKey.rsa("k1")
    idp.publish(key)
    auth = remote(idp, jwt_jwks_max_age_s=0.3, jwt_jwks_min_refresh_s=0.1)
    assert (await accepted(auth, key.token(idp.url))).id == "alice"
    idp.stop()
    await asyncio.sleep(0.4)  # the cached set is past its lifetime: a fetch is attempted
    with caplog.at_level(logging.WARNING, logger="whose.identity"):
        assert (await accepted(auth, key.token(idp.url))).id == "alice"
    assert "keeping the cached keys" in caplog.text
    assert await refused(auth, SigningKey.rsa("k2").token(idp.url)) == "unknown_key"
    # Back up with a new key: accepted without a restart.
    rotated = SigningKey.rsa("k2")
    idp.start()
    idp.publish(key, rotated)
    await asyncio.sleep(0.15)
    assert (await accepted(auth, rotated.token(idp.url))).id == "alice"


async def test_provider_down_at_start_is_keys_unavailable_until_it_answers() -> None:
    idp = LocalIdp()  # not started: its port refuses connections
    auth = remote(idp, jwt_jwks_min_refresh_s=0.2)
    key = SigningKey.rsa("k")
    assert await refused(auth, key.token(idp.url)) == "keys_unavailable"
    idp.start()
    try:
        idp.publish(key)
        # Within the refresh interval the last failure stands; after it, a fetch.
        assert await refused(auth, key.token(idp.url)) == "keys_unavailable"
        assert idp.count() == 0
        await asyncio.sleep(0.25)
        assert (await accepted(auth, key.token(idp.url))).id == "alice"
        assert idp.count() == 1
    finally:
        idp.stop()


def _duplicate_kid_set(key: SigningKey) -> bytes:
    impostor = SigningKey.rsa(key.kid)
    return json.dumps({"keys": [key.jwk(), impostor.jwk()]}).encode()


@pytest.mark.parametrize(
    "breakage",
    [
        "http-500",
        "not-json",
        "duplicate-member",
        "too-large",
        "duplicate-kid",
        "no-keys",
        "redirect",
        "only-an-oct-key",
    ],
)
async def test_a_bad_answer_keeps_the_good_keys(idp: LocalIdp, breakage: str) -> None:
    key = SigningKey.rsa("good")
    idp.publish(key)
    auth = remote(idp, jwt_jwks_max_age_s=0.2, jwt_jwks_max_bytes=4096)
    assert (await accepted(auth, key.token(idp.url))).id == "alice"
    state = idp.state
    if breakage == "http-500":
        state.status = 500
    elif breakage == "not-json":
        state.jwks_body = b"<html>maintenance</html>"
    elif breakage == "duplicate-member":
        state.jwks_body = b'{"keys": [], "keys": ' + json.dumps([key.jwk()]).encode() + b"}"
    elif breakage == "too-large":
        state.jwks_body = json.dumps({"keys": [key.jwk()], "pad": "x" * 5000}).encode()
    elif breakage == "duplicate-kid":
        state.jwks_body = _duplicate_kid_set(key)
    elif breakage == "no-keys":
        state.jwks_body = b'{"keys": []}'
    elif breakage == "redirect":
        state.redirect_to = "https://elsewhere.example/jwks.json"
    elif breakage == "only-an-oct-key":
        state.jwks_body = b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "good"}]}'
    await asyncio.sleep(0.25)
    before = idp.count()
    assert (await accepted(auth, key.token(idp.url))).id == "alice"
    assert idp.count() == before + 1  # the refresh was tried, and refused
    assert await refused(auth, SigningKey.rsa("other").token(idp.url)) == "unknown_key"


async def test_a_bad_first_answer_is_keys_unavailable(idp: LocalIdp) -> None:
    key = SigningKey.rsa("k")
    idp.state.jwks_body = _duplicate_kid_set(key)
    auth = remote(idp)
    assert await refused(auth, key.token(idp.url)) == "keys_unavailable"


async def test_a_refused_key_in_a_fetched_set_is_skipped_the_rest_used(
    idp: LocalIdp, caplog: pytest.LogCaptureFixture
) -> None:
    key = SigningKey.rsa("good")
    oct_key = {"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", "kid": "sym"}
    idp.state.jwks_body = json.dumps({"keys": [key.jwk(), oct_key]}).encode()
    auth = remote(idp)
    with caplog.at_level(logging.WARNING, logger="whose.identity"):
        assert (await accepted(auth, key.token(idp.url))).id == "alice"
    assert "symmetric (oct) keys are refused" in caplog.text


async def test_a_slow_provider_times_out_without_blocking_the_event_loop(
    idp: LocalIdp,
) -> None:
    key = SigningKey.rsa("k")
    idp.publish(key)
    idp.state.delay_s = 3
    auth = remote(idp, jwt_jwks_timeout_s=0.4)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    started = time.monotonic()
    try:
        assert await refused(auth, key.token(idp.url)) == "keys_unavailable"
    finally:
        task.cancel()
    elapsed = time.monotonic() - started
    assert 0.35 < elapsed < 2
    # The loop kept running other work during the fetch.
    assert ticks >= 15


async def test_the_key_alg_from_the_provider_is_honoured(idp: LocalIdp) -> None:
    key = SigningKey.rsa("k", algorithm="RS384")
    idp.publish(key)
    auth = remote(idp)
    assert (await accepted(auth, key.token(idp.url))).id == "alice"
    downgraded = SigningKey("k", key.private, "RS256")
    assert await refused(auth, downgraded.token(idp.url)) == "invalid_token"


# --- OpenID Connect discovery -----------------------------------------------------------


async def test_discovery_finds_the_keys_from_the_issuer(idp: LocalIdp) -> None:
    key = SigningKey.rsa("k")
    idp.publish(key)
    auth = remote(idp, oidc=True)
    assert (await accepted(auth, key.token(idp.url))).id == "alice"
    assert idp.count("/.well-known/openid-configuration") == 1
    assert idp.count() == 1
    # Tokens of another issuer are refused even when this provider's key signed them.
    assert await refused(auth, key.token("https://other.example")) == "invalid_token"


async def test_discovery_with_a_trailing_slash_issuer(idp: LocalIdp) -> None:
    key = SigningKey.rsa("k")
    idp.publish(key)
    idp.state.issuer = idp.url + "/"
    auth = remote(idp, oidc=True, jwt_issuer=idp.url + "/")
    assert (await accepted(auth, key.token(idp.url + "/"))).id == "alice"


@pytest.mark.parametrize("issuer", ["https://evil.example", "{url}/", "{url}/other", ""], ids=repr)
async def test_a_discovery_document_for_another_issuer_is_refused(
    idp: LocalIdp, issuer: str, caplog: pytest.LogCaptureFixture
) -> None:
    key = SigningKey.rsa("k")
    idp.publish(key)
    idp.state.issuer = issuer.format(url=idp.url)
    auth = remote(idp, oidc=True)
    with caplog.at_level(logging.WARNING, logger="whose.identity"):
        assert await refused(auth, key.token(idp.url)) == "keys_unavailable"
    assert "is not" in caplog.text
    # The keys of a provider that speaks for another issuer are never fetched.
    assert idp.count() == 0


async def test_a_discovered_jwks_uri_over_plain_http_off_loopback_is_refused(
    idp: LocalIdp,
) -> None:
    key = SigningKey.rsa("k")
    idp.publish(key)
    idp.state.jwks_uri = "http://keys.example.com/jwks.json"
    auth = remote(idp, oidc=True)
    assert await refused(auth, key.token(idp.url)) == "keys_unavailable"


async def test_discovery_is_tried_again_after_a_failure(idp: LocalIdp) -> None:
    key = SigningKey.rsa("k")
    idp.publish(key)
    idp.state.issuer = "https://evil.example"
    auth = remote(idp, oidc=True, jwt_jwks_min_refresh_s=0.1)
    assert await refused(auth, key.token(idp.url)) == "keys_unavailable"
    idp.state.issuer = None
    await asyncio.sleep(0.15)
    assert (await accepted(auth, key.token(idp.url))).id == "alice"
    assert idp.count("/.well-known/openid-configuration") == 2
