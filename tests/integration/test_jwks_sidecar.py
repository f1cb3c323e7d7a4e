"""End to end: `whose serve` verifying tokens with keys from a real local identity
provider (OpenID Connect discovery), over HTTP, through rotation and outage.

`start_sidecar` runs `whose serve --dev`; dev mode also verifies tokens when a key
source is configured, and the requests here carry only `Authorization: Bearer`.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest

from tests.conftest import REPO, free_port, start_sidecar, stop
from tests.integration.idp_server import LocalIdp, SigningKey

MAX_AGE_S = 1.0
MIN_REFRESH_S = 0.3


@pytest.fixture(scope="module")
def idp() -> Iterator[LocalIdp]:
    server = LocalIdp().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def first_key(idp: LocalIdp) -> SigningKey:
    key = SigningKey.rsa("first")
    idp.publish(key)
    return key


def provider_env(idp: LocalIdp) -> dict[str, str]:
    return {
        "WHOSE_JWT_OIDC": "true",
        "WHOSE_JWT_ISSUER": idp.url,
        "WHOSE_JWT_AUDIENCE": "whose",
        "WHOSE_JWT_JWKS_MAX_AGE_S": str(MAX_AGE_S),
        "WHOSE_JWT_JWKS_MIN_REFRESH_S": str(MIN_REFRESH_S),
    }


@pytest.fixture(scope="module")
def sidecar(
    idp: LocalIdp, first_key: SigningKey, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    base, process = start_sidecar(tmp_path_factory.mktemp("jwks-sidecar"), provider_env(idp))
    yield base
    stop(process)


def recall(base: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{base}/v1/recall", json={"query": "launch"}, headers=headers, timeout=10)


def bearer(raw_token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw_token}"}


def refusal(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    body = response.json()
    assert body["error"] == "unauthenticated"
    return str(body["reason"])


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def hand_signed(key: SigningKey, payload: str) -> str:
    header = json.dumps({"alg": key.algorithm, "kid": key.kid, "typ": "JWT"})
    signing_input = f"{b64(header.encode())}.{b64(payload.encode())}"
    alg = jwt.get_algorithm_by_name(key.algorithm)
    return f"{signing_input}.{b64(alg.sign(signing_input.encode(), key.private))}"


def test_a_provider_token_opens_the_api(sidecar: str, idp: LocalIdp, first_key: SigningKey) -> None:
    response = recall(sidecar, bearer(first_key.token(idp.url)))
    assert response.status_code == 200, response.text


def test_refusals_are_401_with_a_reason_never_500(
    sidecar: str, idp: LocalIdp, first_key: SigningKey
) -> None:
    exp = int(time.time()) + 600
    claims = f'"iss":"{idp.url}","aud":"whose","sub":"alice","exp":{exp}'
    cases = {
        "missing_token": {},
        "invalid_token": bearer("e30.e30."),
        "token_too_large": bearer(first_key.token(idp.url, pad="x" * 9000)),
        "unknown_key": bearer(SigningKey.rsa("nobody-knows").token(idp.url)),
    }
    for expected, headers in cases.items():
        assert refusal(recall(sidecar, headers)) == expected, expected
    ambiguous = [
        # Validly signed by the provider's key, and ambiguous.
        hand_signed(first_key, "{" + claims + ',"tenant":"acme","tenant":"globex"}'),
        first_key.token(idp.url, exp=str(exp)),
        first_key.token(idp.url, sub="group:launch-team"),
        first_key.token(idp.url, groups="launch-team,ops"),
        first_key.token(idp.url, aud=[]),
    ]
    for raw in ambiguous:
        assert refusal(recall(sidecar, bearer(raw))) == "invalid_token"
    dev = {"X-Whose-Asker": "group:launch-team", "X-Whose-Tenant": "acme"}
    assert refusal(recall(sidecar, dev)) == "invalid_dev_identity"


def test_rotation_needs_no_restart(sidecar: str, idp: LocalIdp, first_key: SigningKey) -> None:
    second = SigningKey.ec("second")
    idp.publish(first_key, second)
    time.sleep(MIN_REFRESH_S + 0.1)  # past the rate limit the refusals above started
    assert recall(sidecar, bearer(second.token(idp.url))).status_code == 200
    idp.publish(second)
    time.sleep(MAX_AGE_S + 0.2)
    assert refusal(recall(sidecar, bearer(first_key.token(idp.url)))) == "unknown_key"
    assert recall(sidecar, bearer(second.token(idp.url))).status_code == 200
    idp.publish(first_key, second)  # for the tests after this one


def test_provider_down_cached_keys_keep_working(
    sidecar: str, idp: LocalIdp, first_key: SigningKey
) -> None:
    time.sleep(MIN_REFRESH_S + 0.1)
    assert recall(sidecar, bearer(first_key.token(idp.url))).status_code == 200
    idp.stop()
    try:
        time.sleep(MAX_AGE_S + 0.2)
        for _ in range(3):
            assert recall(sidecar, bearer(first_key.token(idp.url))).status_code == 200
        stranger = SigningKey.rsa("while-down")
        assert refusal(recall(sidecar, bearer(stranger.token(idp.url)))) == "unknown_key"
    finally:
        idp.start()


def test_sidecar_starts_while_the_provider_is_down(tmp_path: Path) -> None:
    idp = LocalIdp()  # its port refuses connections until start()
    base, process = start_sidecar(tmp_path, provider_env(idp))
    try:
        key = SigningKey.rsa("late")
        assert refusal(recall(base, bearer(key.token(idp.url)))) == "keys_unavailable"
        idp.start()
        idp.publish(key)
        # Refreshed at most every MIN_REFRESH_S: poll rather than sleep a quiet machine's time.
        deadline = time.monotonic() + 60
        while (answer := recall(base, bearer(key.token(idp.url)))).status_code != 200:
            assert refusal(answer) == "keys_unavailable"
            assert time.monotonic() < deadline, "keys never refreshed"
            time.sleep(MIN_REFRESH_S)
    finally:
        stop(process)
        idp.stop()
    log = (tmp_path / "sidecar.log").read_text()
    assert "identity provider keys not refreshed (no keys yet)" in log


# --- the docs' snippet (docs/identity.md) --------------------------------------------------

README_ISSUER = "https://login.example.com/realms/acme"


def readme_snippet() -> dict[str, str]:
    """The `export` lines of docs/identity.md's "Use your identity provider" block."""
    text = (REPO / "docs" / "identity.md").read_text()
    section = text.split("### Use your identity provider", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block is not None
    env = dict(re.findall(r"^export (WHOSE_\w+)=(\S+)$", block.group(1), re.M))
    assert "whose serve" in block.group(1)
    return env


def test_the_readme_snippet_works_as_written(tmp_path: Path) -> None:
    env = readme_snippet()
    assert env["WHOSE_JWT_ISSUER"] == README_ISSUER
    # The provider here is local: its issuer stands in for the example's, nothing else changes.
    idp = LocalIdp().start()
    try:
        key = SigningKey.rsa("readme")
        idp.publish(key)
        base, process = start_sidecar(tmp_path, env | {"WHOSE_JWT_ISSUER": idp.url})
        try:
            assert recall(base, bearer(key.token(idp.url))).status_code == 200
            assert refusal(recall(base, bearer(key.token(README_ISSUER)))) == "invalid_token"
        finally:
            stop(process)
    finally:
        idp.stop()


def test_several_key_sources_refuse_to_start(tmp_path: Path) -> None:
    env = {
        "WHOSE_JWT_HS256_SECRET": "a-test-secret-of-at-least-32-bytes!!",
        "WHOSE_JWT_JWKS_URL": "https://login.example.com/certs",
        "PATH": "/usr/bin:/bin",
    }
    command = [sys.executable, "-m", "sidecar", "serve", "--port", str(free_port())]
    log = tmp_path / "sidecar.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--data-dir", str(tmp_path)], env=env, cwd=REPO, stdout=out, stderr=out
        )
    try:
        # A sidecar that started anyway (one source silently winning) is stopped, not killed,
        # so that its OPA goes with it.
        assert process.wait(timeout=60) == 2
    finally:
        if process.poll() is None:
            stop(process)
    text = log.read_text()
    assert "several identity key sources" in text
    assert "WHOSE_JWT_HS256_SECRET, WHOSE_JWT_JWKS_URL" in text
