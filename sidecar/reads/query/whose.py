"""The leaf-search interface over today's whose collection (the memory records).

A `WhoseCollection` is one request's view of the sidecar's own collection through the
Qdrant dialect: its points are the tenant's current records (search, scroll) or any
version (retrieve, purpose `get`), their ids are record ids, their vectors the dense
one ("") and the lexical BM25 one (`lexical`, store/vectors.py), their payloads the
stored records. It searches through the store (the `Store` protocol's `probe`,
`ordered`, `find`, `fetch`: both backends) under the scope and the policy's pushdown,
and decides every candidate through this request's disclosure (reads/gate.py), with
the reader's over-fetch loop (`Reader.rounds`); so it keeps the guarantees
reads/query/collection.py lists.

`item` of each hit is the record and its decision; `shown` words the final hits
(links kept only to versions the asker may get, the attribution sentence) for the
transport to shape as Qdrant points.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from uuid import UUID

from qdrant_client.http import models as qm

from sidecar.errors import QueryRefused
from sidecar.policy.contract import Decision, DisclosureQuestion
from sidecar.policy.pushdown import Pushdown
from sidecar.reads.gate import Disclosure
from sidecar.reads.query.collection import Budget, Dense, Hit, Page, PointId, Schema, Where
from sidecar.reads.reader import Reader, Shown
from sidecar.record import Stored, uuid_text
from sidecar.store import Found
from sidecar.store.probes import Probe
from sidecar.store.schema import (
    DATETIME_FIELDS,
    FLOAT_FIELDS,
    KEYWORD_FIELDS,
    TENANT_FIELD,
    TEXT_FIELDS,
    point_id,
)
from sidecar.store.scope import Scope
from sidecar.store.vectors import DENSE, LEXICAL

Decided = tuple[Stored, Decision]


def schema(vector_size: int) -> Schema:
    indexes: dict[str, qm.PayloadSchemaType] = {TENANT_FIELD: qm.PayloadSchemaType.KEYWORD}
    indexes |= {k: qm.PayloadSchemaType.KEYWORD for k in KEYWORD_FIELDS}
    indexes |= {k: qm.PayloadSchemaType.DATETIME for k in DATETIME_FIELDS}
    indexes |= {k: qm.PayloadSchemaType.FLOAT for k in FLOAT_FIELDS}
    indexes |= {k: qm.PayloadSchemaType.TEXT for k in TEXT_FIELDS}
    return Schema(
        dense={DENSE: Dense(vector_size, qm.Distance.COSINE)},
        sparse=frozenset({LEXICAL}),
        indexes=indexes,
    )


@dataclass
class WhoseCollection:
    reader: Reader
    disclosure: Disclosure
    # The caller's filter as the dialect runs it (http/qdrant/caller_filter.py, given by
    # the transport: the core does not import it).
    check: Callable[[qm.Filter], qm.Filter]
    collection: str
    vector_size: int
    now: datetime
    _pushed: Pushdown | None = None

    @property
    def name(self) -> str:
        return self.collection

    @property
    def schema(self) -> Schema:
        return schema(self.vector_size)

    @property
    def tenant(self) -> str:
        return self.disclosure.question.asker.tenant

    def check_filter(self, flt: qm.Filter) -> qm.Filter:
        return self.check(flt)

    async def _scope(self, where: Where) -> Scope | None:
        """Current versions in the tenant, within `where`, narrowed by the pushdown;
        None when `where` admits nothing."""
        if self._pushed is None:
            self._pushed = await self.disclosure.pushdown()
        must: list[qm.Condition] = [*where.filters, *where.conditions]
        if where.only is not None:
            points = [point_id(self.tenant, p) for p in _record_ids(where.only)]
            if not points:
                return None
            must.append(qm.HasIdCondition(has_id=points))
        caller = qm.Filter(must=must) if must else None
        return self._pushed.narrow(Scope(tenant=self.tenant, current_at=self.now, caller=caller))

    async def search(
        self,
        probe: Probe,
        using: str,
        where: Where,
        limit: int,
        *,
        score_threshold: float | None,
        vectors: frozenset[str],
        budget: Budget,
    ) -> list[Hit[Decided]]:
        scope = await self._scope(where)
        if scope is None:
            return []
        excluded = self._excluded(where)
        store = self.reader.store

        async def fetch(batch: int, seen: frozenset[str]) -> list[Found]:
            return await store.probe(
                probe,
                using,
                scope,
                batch,
                [*excluded, *seen],
                score_threshold=score_threshold,
                with_vectors=vectors,
            )

        found = await self.reader.rounds(
            self.disclosure,
            fetch,
            _record,
            limit,
            adaptive=False,
            cap=budget.left,
            whole_ties=True,
            bounded_rounds=False,
        )
        budget.spend(found.examined, found.truncated)
        return [self._hit(f, d) for f, d in found.allowed[:limit]]

    async def scroll(
        self,
        where: Where,
        limit: int,
        *,
        order_by: qm.OrderBy | None,
        offset: PointId | None,
        vectors: frozenset[str],
        budget: Budget,
    ) -> Page[Decided]:
        scope = await self._scope(where)
        if scope is None:
            return Page([])
        excluded = self._excluded(where)
        if order_by is not None:
            return await self._ordered(scope, excluded, limit, order_by, vectors, budget)
        return await self._by_id(scope, excluded, limit, offset, budget)

    async def _ordered(
        self,
        scope: Scope,
        excluded: list[str],
        limit: int,
        order_by: qm.OrderBy,
        vectors: frozenset[str],
        budget: Budget,
    ) -> Page[Decided]:
        store = self.reader.store

        async def fetch(batch: int, seen: frozenset[str]) -> list[Found]:
            return await store.ordered(
                scope, batch, order_by, [*excluded, *seen], with_vectors=vectors
            )

        ascending = order_by.direction != qm.Direction.DESC
        found = await self.reader.rounds(
            self.disclosure,
            fetch,
            _by_value,
            limit,
            adaptive=False,
            cap=budget.left,
            smaller_better=ascending,
            whole_ties=True,
            bounded_rounds=False,
        )
        budget.spend(found.examined, found.truncated)
        return Page([self._hit(f, d) for f, d in found.allowed[:limit]])

    async def _by_id(
        self,
        scope: Scope,
        excluded: list[str],
        limit: int,
        offset: PointId | None,
        budget: Budget,
    ) -> Page[Decided]:
        """Reader.scroll's rule: the next offset is the next allowed point, or (when
        the budget stops the page after some were shown) the point just after the
        last one shown; never a point the asker may not see."""
        cursor = None if offset is None else _cursor(offset)
        shown: list[Hit[Decided]] = []
        next_offset: str | None = None
        store = self.reader.store
        while True:
            batch = min(max(2 * limit, 64), budget.left)
            if batch <= 0:
                budget.spend(0, True)
                next_offset = _just_after(self.tenant, shown[-1]) if shown else None
                break
            page = await store.find(scope, batch, offset=cursor)
            records = [r for r in page.records if r.id not in excluded]
            decisions = await self.disclosure.decide(records)
            budget.spend(len(page.records), False)
            for record in records:
                decision = decisions[record.id]
                if not decision.allow:
                    continue
                if len(shown) == limit:
                    next_offset = point_id(self.tenant, record.id)
                    break
                shown.append(self._hit(Found(record, {}), decision))
            cursor = page.next_offset
            if next_offset is not None or cursor is None:
                break
        return Page(shown, next_offset)

    async def retrieve(
        self, ids: Sequence[PointId], *, vectors: frozenset[str]
    ) -> list[Hit[Decided]]:
        wanted = _record_ids(frozenset(ids))
        found = await self.reader.store.fetch(self.tenant, wanted, vectors)
        ask = replace(self.disclosure.question, purpose="get", as_of=None)
        async with self.disclosure.follow_up(ask, f"{self.disclosure.route}.ids") as by_id:
            # Asked even when nothing was found: a missing point and a forbidden one take
            # the same path (and fail the same way when the policy is down).
            decisions = await by_id.decide([f.record for f in found])
        allowed = {f.record.id: self._hit(f, decisions[f.record.id]) for f in found}
        allowed = {k: h for k, h in allowed.items() if h.item[1].allow}
        return [allowed[str(p)] for p in ids if str(p) in allowed]

    def _hit(self, found: Found, decision: Decision) -> Hit[Decided]:
        return _hit(found, decision)

    def _excluded(self, where: Where) -> list[str]:
        """The record ids a leaf leaves out (the ids a query used as examples)."""
        return [str(p) for p in _record_ids(where.exclude)]

    async def shown(self, hits: Sequence[Hit[Decided]]) -> list[Shown]:
        """The final hits as the answer shows them: each record's version links kept
        only to versions the asker may get, worded (answers/wording.py)."""
        return await self.reader.shown(self.disclosure, [h.item for h in hits])


def _cursor(offset: PointId) -> str:
    """A scroll offset: a point id this collection's scroll returned (a UUID)."""
    try:
        return uuid_text(offset)
    except ValueError:
        raise QueryRefused(
            "bad_request", "offset must be a next_page_offset this endpoint returned"
        ) from None


def _record_ids(points: frozenset[PointId]) -> list[UUID]:
    """The record ids among point ids (an integer id names no record here)."""
    ids = []
    for point in points:
        if isinstance(point, str):
            try:
                ids.append(UUID(point))
            except ValueError:
                continue
    return sorted(ids)


def _record(found: Found) -> Stored:
    return found.record


def _by_value(found: Found) -> Stored:
    """The record ranked by the value it was ordered by (the over-fetch loop ranks by
    score, then id)."""
    value = found.order_value
    return replace(found.record, score=None if value is None else float(value))


def _hit(found: Found, decision: Decision) -> Hit[Decided]:
    record = found.record
    return Hit(
        record.id,
        record.score if record.score is not None else 1.0,
        record.payload,
        found.vectors,
        (record, decision),
        found.order_value,
    )


def _just_after(tenant: str, hit: Hit[Decided]) -> str:
    record_id = hit.item[0].id
    return str(uuid.UUID(int=(uuid.UUID(point_id(tenant, record_id)).int + 1) % 2**128))


@asynccontextmanager
async def opened(
    reader: Reader,
    question: DisclosureQuestion,
    route: str,
    check: Callable[[qm.Filter], qm.Filter],
    collection: str,
    vector_size: int,
) -> AsyncIterator[WhoseCollection]:
    """The collection for one request: one disclosure (one audit entry) for all its
    leaves, a follow-up one for its reads by id."""
    async with reader.gate.begin(question, route) as disclosure:
        yield WhoseCollection(reader, disclosure, check, collection, vector_size, question.now)
