"""Fixtures for the integration tests: a policy client on the session's real OPA, and
either store backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.policy.opa import PolicyClient
from sidecar.store import Store
from sidecar.store.edge import EdgeStore
from sidecar.store.server import ServerStore
from tests.conftest import STORE_BACKENDS


@pytest.fixture
async def policy(opa_url: str) -> AsyncIterator[PolicyClient]:
    client = PolicyClient(opa_url, 2.0)
    await client.start()
    yield client
    await client.close()


def backend(
    kind: str,
    folder: Path,
    dim: int,
    optimize_interval_s: float,
    request: pytest.FixtureRequest | None = None,
) -> Store:
    """One of the two store backends, not yet opened: `edge` (Qdrant's engine
    in-process) or `server` (qdrant-client against the session's real Qdrant server,
    in a collection of its own; skipped where there is no server binary)."""
    if kind == "edge":
        return EdgeStore(folder / "edge", dim, optimize_interval_s=optimize_interval_s)
    assert request is not None, "the server backend needs the test's request"
    qdrant = request.getfixturevalue("qdrant_server")
    return ServerStore.connect([qdrant.url], f"test_{uuid.uuid4().hex[:12]}", dim)


# The `params` of a fixture that builds a store on each backend.
BACKENDS = list(STORE_BACKENDS)
