"""Fixtures of the noninterference tests: the prepared policy folder (once per
session) and stores A and B (a pair per test module and store backend)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Backend
from tests.noninterference import profiles
from tests.noninterference.harness import Stores, TenantPool, prepare_policy, start_stores


@pytest.fixture(scope="session")
def tenant_pool(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, TenantPool]:
    folder = tmp_path_factory.mktemp("noninterference-policy") / "rego"
    size = profiles.tenants()
    return prepare_policy(folder, size), TenantPool(size)


@pytest.fixture(scope="module")
def stores(
    request: pytest.FixtureRequest,
    tenant_pool: tuple[Path, TenantPool],
    store_backend: Backend,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stores]:
    """Store A and store B: two sidecars on one store backend, each with its own OPA,
    and the settings the test module's STORE_SETTINGS gives this backend, if any."""
    policy, pool = tenant_pool
    folder = tmp_path_factory.mktemp("noninterference")
    settings = getattr(request.module, "STORE_SETTINGS", {}).get(store_backend.name)
    yield from start_stores(folder, policy, pool, store_backend, settings)
