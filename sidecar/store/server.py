"""Production backend: a Qdrant server or cluster through qdrant-client (async).

The tenant field gets an `is_tenant` keyword index, so Qdrant can co-locate
each tenant's points. Tests run this backend against qdrant-client's local
mode (a pure-Python stand-in for a server), which is never a default.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from sidecar.filters import (
    DATETIME_FIELDS,
    FLOAT_FIELDS,
    KEYWORD_FIELDS,
    TENANT_FIELD,
    TEXT_FIELDS,
    Scope,
    point_id,
    to_qdrant,
)
from sidecar.record import Stored
from sidecar.store import (
    Page,
    StoreUnavailable,
    dense,
    records,
)

log = logging.getLogger(__name__)


class ServerStore:
    def __init__(self, client: AsyncQdrantClient, collection: str, vector_size: int) -> None:
        self.client = client
        self.collection = collection
        self.vector_size = vector_size
        self._ensured = False

    async def open(self) -> None:
        # A sidecar that starts while Qdrant is down reports not-ready (/readyz) and
        # answers 503 until Qdrant is back, instead of failing to start.
        try:
            await self._ensure_collection()
        except StoreUnavailable as exc:
            log.warning("Qdrant unreachable at start-up; will retry: %s", exc)

    async def _ensure_collection(self) -> None:
        if self._ensured:
            return
        with _unavailable_on_error():
            indexed: Collection[str] = ()
            if await self.client.collection_exists(self.collection):
                indexed = (await self.client.get_collection(self.collection)).payload_schema
            else:
                await self.client.create_collection(
                    self.collection,
                    vectors_config=qm.VectorParams(
                        size=self.vector_size, distance=qm.Distance.COSINE
                    ),
                )
            # A collection made by an earlier version gains the indexes added since
            # (a server in strict mode refuses filters on fields without one).
            for name, schema in _indexes():
                if name not in indexed:
                    await self.client.create_payload_index(self.collection, name, schema, wait=True)
            self._ensured = True

    async def close(self) -> None:
        await self.client.close()

    async def ping(self) -> None:
        await self._ensure_collection()
        with _unavailable_on_error():
            await self.client.get_collection(self.collection)

    async def search(
        self,
        vector: list[float],
        scope: Scope,
        limit: int,
        exclude: Collection[str] = (),
        *,
        score_threshold: float | None = None,
        with_vector: bool = False,
    ) -> list[Stored]:
        await self._ensure_collection()
        with _unavailable_on_error():
            response = await self.client.query_points(
                self.collection,
                query=vector,
                query_filter=to_qdrant(scope, exclude),
                limit=limit,
                score_threshold=score_threshold,
                with_payload=True,
                with_vectors=with_vector,
            )
        return records([(p.payload, p.score, dense(p.vector)) for p in response.points])

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Stored]:
        await self._ensure_collection()
        with _unavailable_on_error():
            found = await self.client.retrieve(
                self.collection,
                ids=[point_id(tenant, rid) for rid in record_ids],
                with_payload=True,
                with_vectors=with_vector,
            )
        return records(
            [
                (r.payload, None, dense(r.vector))
                for r in found
                if r.payload is not None and r.payload.get(TENANT_FIELD) == tenant
            ]
        )

    async def find(
        self, scope: Scope, limit: int, *, offset: str | None = None, with_vector: bool = False
    ) -> Page:
        await self._ensure_collection()
        with _unavailable_on_error():
            found, next_offset = await self.client.scroll(
                self.collection,
                scroll_filter=to_qdrant(scope),
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=with_vector,
            )
        page = records([(r.payload, None, dense(r.vector)) for r in found])
        return Page(page, None if next_offset is None else str(next_offset))

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], list[float]]]) -> None:
        points = [
            qm.PointStruct(id=point_id(tenant, payload["id"]), vector=vector, payload=payload)
            for payload, vector in items
        ]
        await self._ensure_collection()
        with _unavailable_on_error():
            await self.client.upsert(self.collection, points=points, wait=True)

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        await self._ensure_collection()
        with _unavailable_on_error():
            await self.client.set_payload(
                self.collection, payload=fields, points=[point_id(tenant, record_id)], wait=True
            )


@contextmanager
def _unavailable_on_error() -> Iterator[None]:
    # Whatever the client raises (connection, timeout, server error) is the store's
    # unavailability to our callers: 503, never a 500 and never a partial answer.
    try:
        yield
    except Exception as exc:
        raise StoreUnavailable(str(exc)) from exc


Index = qm.PayloadSchemaType | qm.KeywordIndexParams | qm.TextIndexParams


def _indexes() -> list[tuple[str, Index]]:
    tenant_index = qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)
    indexes: list[tuple[str, Index]] = [(TENANT_FIELD, tenant_index)]
    indexes += [(name, qm.PayloadSchemaType.KEYWORD) for name in KEYWORD_FIELDS]
    indexes += [(name, qm.PayloadSchemaType.DATETIME) for name in DATETIME_FIELDS]
    indexes += [(name, qm.PayloadSchemaType.FLOAT) for name in FLOAT_FIELDS]
    text = qm.TextIndexParams(
        type=qm.TextIndexType.TEXT,
        tokenizer=qm.TokenizerType.WORD,
        lowercase=True,
        phrase_matching=True,
    )
    indexes += [(name, text) for name in TEXT_FIELDS]
    return indexes
