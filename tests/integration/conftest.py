"""Fixtures for the integration tests: a policy client on the session's real OPA."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sidecar.policy import PolicyClient


@pytest.fixture
async def policy(opa_url: str) -> AsyncIterator[PolicyClient]:
    client = PolicyClient(opa_url, 2.0)
    await client.start()
    yield client
    await client.close()
