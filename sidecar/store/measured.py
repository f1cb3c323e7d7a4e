"""A Store that times every call of the store it wraps (whose_store_call_seconds)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any
from uuid import UUID

from qdrant_client.http import models as qm

from sidecar import metrics
from sidecar.record import Stored
from sidecar.store import Found, Page, Store, Vectors
from sidecar.store.layout import VectorLayout
from sidecar.store.probes import Probe
from sidecar.store.scope import Scope


@asynccontextmanager
async def _timed(op: str) -> AsyncIterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        metrics.STORE_SECONDS.labels(op).observe(time.perf_counter() - started)


class MeasuredStore:
    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @property
    def vectors(self) -> VectorLayout:
        return self.inner.vectors

    async def open(self) -> None:
        await self.inner.open()

    async def close(self) -> None:
        await self.inner.close()

    async def ping(self) -> None:
        async with _timed("ping"):
            await self.inner.ping()

    async def search(
        self,
        vector: list[float] | None,
        scope: Scope,
        limit: int,
        exclude: Collection[str] = (),
        *,
        text: str | None = None,
        score_threshold: float | None = None,
        with_vector: bool = False,
    ) -> list[Stored]:
        async with _timed("search"):
            return await self.inner.search(
                vector,
                scope,
                limit,
                exclude,
                text=text,
                score_threshold=score_threshold,
                with_vector=with_vector,
            )

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Stored]:
        async with _timed("get"):
            return await self.inner.get(tenant, record_ids, with_vector=with_vector)

    async def probe(
        self,
        probe: Probe,
        using: str,
        scope: Scope,
        limit: int,
        exclude: Collection[str] = (),
        *,
        score_threshold: float | None = None,
        with_vectors: frozenset[str] = frozenset(),
    ) -> list[Found]:
        async with _timed("probe"):
            return await self.inner.probe(
                probe,
                using,
                scope,
                limit,
                exclude,
                score_threshold=score_threshold,
                with_vectors=with_vectors,
            )

    async def ordered(
        self,
        scope: Scope,
        limit: int,
        order_by: qm.OrderBy,
        exclude: Collection[str] = (),
        *,
        with_vectors: frozenset[str] = frozenset(),
    ) -> list[Found]:
        async with _timed("ordered"):
            return await self.inner.ordered(
                scope, limit, order_by, exclude, with_vectors=with_vectors
            )

    async def fetch(
        self, tenant: str, record_ids: list[UUID], names: frozenset[str]
    ) -> list[Found]:
        async with _timed("fetch"):
            return await self.inner.fetch(tenant, record_ids, names)

    async def find(
        self, scope: Scope, limit: int, *, offset: str | None = None, with_vector: bool = False
    ) -> Page:
        async with _timed("find"):
            return await self.inner.find(scope, limit, offset=offset, with_vector=with_vector)

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], Vectors]]) -> None:
        async with _timed("put"):
            await self.inner.put(tenant, items)

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        async with _timed("update"):
            await self.inner.update(tenant, record_id, fields)

    async def delete(self, tenant: str, record_ids: list[UUID]) -> None:
        async with _timed("delete"):
            await self.inner.delete(tenant, record_ids)

    async def clear(self, tenant: str, record_id: UUID, fields: list[str]) -> None:
        async with _timed("clear"):
            await self.inner.clear(tenant, record_id, fields)

    async def tenants(self, limit: int) -> list[str]:
        async with _timed("tenants"):
            return await self.inner.tenants(limit)

    async def create_index(self, field: str, schema: qm.PayloadSchemaType) -> None:
        async with _timed("create_index"):
            await self.inner.create_index(field, schema)

    async def drop_index(self, field: str) -> None:
        async with _timed("drop_index"):
            await self.inner.drop_index(field)
