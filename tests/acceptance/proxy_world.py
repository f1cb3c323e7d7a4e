"""A sidecar with verified JWT identity and a small collection, for the proxy tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt

from sidecar.embed.hashing import HashingEmbedder
from tests.conftest import Backend
from tests.factories import served

SECRET = "proxy-tests-hs256-secret-of-32-bytes!!"
ISSUER, AUDIENCE = "https://idp.test", "whose"
JWT_ENV = {
    "WHOSE_JWT_HS256_SECRET": SECRET,
    "WHOSE_JWT_ISSUER": ISSUER,
    "WHOSE_JWT_AUDIENCE": AUDIENCE,
}
COLLECTION = "whose_memories"
embed = HashingEmbedder(384).embed


def token(sub: str, tenant: str = "acme", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": sub, "tenant": tenant, "iss": ISSUER, "aud": AUDIENCE, "iat": now}
    return jwt.encode(body | {"exp": now + 600} | claims, SECRET, algorithm="HS256")


def record(holder: str, text: str, audience: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "content": f"{holder} believes {text}",
        "proposition": {"text": text, "key": f"k.{uuid.uuid4().hex[:6]}"},
        "observer_id": holder,
        "source_id": f"{holder}-notes",
        "source": {"kind": "conversation", "speaker": holder},
        "modality": "believed",
        "audience": audience,
        "valid_at": "2026-10-01T00:00:00Z",
        "vector": embed(text),
    } | extra


def seed(base: str) -> dict[str, dict[str, Any]]:
    """Alice's private note, a team note, a scoped note only Alice and Carol may read."""
    world = {
        "private": record("alice", "the launch is October 17", ["alice"]),
        "team": record("bob", "the launch party is on the roof", ["group:launch-team"]),
        "scoped": record(
            "carol", "the launch budget is 2M", ["group:launch-team"], access_scope="launch-core"
        ),
    }
    with httpx.Client(base_url=base) as http:
        for name, body in world.items():
            holder = body["observer_id"]
            response = http.post(
                "/v1/memories", json=body, headers={"Authorization": f"Bearer {token(holder)}"}
            )
            assert response.status_code == 201, (name, response.text)
            # The id a writer chooses names the record in its own namespace: keep the
            # stored one (writes.record_id).
            body["id"] = response.json()["records"][0]["id"]
    return world


def served_world(
    data_dir: Path, backend: Backend
) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """The proxy tests' sidecar on `backend` (verified JWTs) with `seed`'s world in it:
    a module fixture's body (`yield from`), the sidecar reaped when the module ends."""
    with served(data_dir, JWT_ENV | backend.env()) as base:
        yield base, seed(base)
