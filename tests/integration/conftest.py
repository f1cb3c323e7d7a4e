"""Fixtures for the integration tests: a policy client on the session's real OPA."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from sidecar.opa import PolicyClient
from sidecar.store import Store
from sidecar.store.edge import EdgeStore
from sidecar.store.server import ServerStore


@pytest.fixture
async def policy(opa_url: str) -> AsyncIterator[PolicyClient]:
    client = PolicyClient(opa_url, 2.0)
    await client.start()
    yield client
    await client.close()


def backend(kind: str, folder: Path, dim: int, optimize_interval_s: float) -> Store:
    """One of the two store backends, not yet opened: `edge` (Qdrant's engine
    in-process) or `server` (qdrant-client against its local mode, the stand-in for a
    Qdrant server, none of which can be had on this machine)."""
    if kind == "edge":
        return EdgeStore(folder / "edge", dim, optimize_interval_s=optimize_interval_s)
    return ServerStore(AsyncQdrantClient(location=":memory:"), "memories", dim)
