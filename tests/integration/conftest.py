"""Fixtures for the integration tests: a policy client (the session's real OPA server,
or OPA's evaluator linked in), and either store backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sidecar.policy.engine import PolicyEngine
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.policy.opa import PolicyClient
from sidecar.store import Store
from sidecar.store.edge import EdgeStore
from sidecar.store.server import ServerStore
from tests.conftest import OPA_LIBRARY, POLICY_DIR, STORE_BACKENDS

# How a policy client reaches OPA: `server`, the session's real OPA over HTTP
# (policy/opa.py), or `linked`, OPA's evaluator in this process (policy/linked_opa.py).
# Tests that take `policy` run on both.
EVALUATORS = ("server", "linked")


def policy_client(kind: str, request: pytest.FixtureRequest, folder: Path) -> PolicyEngine:
    """A policy engine on the shipped policy, not yet started."""
    if kind == "server":
        return PolicyClient(request.getfixturevalue("opa_url"), 2.0)
    return LinkedOpa(OPA_LIBRARY, POLICY_DIR, folder / "opa-bundle", 2.0)


@pytest.fixture(params=EVALUATORS)
async def policy(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[PolicyEngine]:
    client = policy_client(request.param, request, tmp_path)
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
