"""The Qdrant dialect's reads, as one surface: Qdrant's query API over a collection of
the caller's tenant, every answer over the points the asker may see.

The transport (http/qdrant/routes.py) parses a body with qdrant-client's models and
calls one method here; each opens the collection for one request (one disclosure, one
audit entry: reads/query/whose.py), runs the query engine (reads/query/) or a scan over
it, and returns `Point`s, each with the record as worded for the asker (`Shown`) for
the transport to shape. Refusals are the error tree's, noted once at this door (memory.py
`door`), like the memory surface's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from qdrant_client.http import models as qm

from sidecar.auth.identity import Identity
from sidecar.door import door
from sidecar.policy.contract import DisclosureQuestion
from sidecar.reads.gate import Disclosure
from sidecar.reads.query import scans, whose
from sidecar.reads.query.collection import Hit, Lookup, PointId, Schema
from sidecar.reads.query.engine import QueryEngine
from sidecar.reads.query.groups import query_groups
from sidecar.reads.query.plan import Bounds, vector_names
from sidecar.reads.query.stack import StackView
from sidecar.reads.query.whose import Decided, WhoseCollection
from sidecar.reads.reader import Reader, Shown
from sidecar.stack_paths import StackPaths, Stacks
from sidecar.store.layout import DenseSpace, VectorLayout
from sidecar.store.probes import Vector
from sidecar.store.stacks import missing
from sidecar.store.vectors import DENSE
from sidecar.writes.versions import Versions


@dataclass(frozen=True)
class Asked:
    """Who asks, of which collection, by which route (the audit entry's), and how the
    transport runs a caller's filter (its dialect's checks: the core does not know them)."""

    who: Identity
    collection: str
    route: str
    check: Callable[[qm.Filter], qm.Filter]


@dataclass(frozen=True)
class Point:
    """One disclosed point: the engine's id, score, order value and vectors, and the
    record as the answer words it for the asker."""

    id: PointId
    score: float
    vectors: Mapping[str, Vector]
    shown: Shown
    order_value: int | float | None = None

    def vector(self) -> Any:
        """The vectors as Qdrant answers them: the unnamed dense one alone as a list,
        else by name (a sparse one as indices and values); None without any."""
        if not self.vectors:
            return None
        if set(self.vectors) == {DENSE}:
            return _json(self.vectors[DENSE])
        return {name: _json(v) for name, v in self.vectors.items()}


@dataclass(frozen=True)
class Points:
    points: list[Point]
    truncated: bool = False


@dataclass(frozen=True)
class Group:
    key: int | str
    points: list[Point]
    lookup: Point | None = None


@dataclass(frozen=True)
class Groups:
    groups: list[Group]
    truncated: bool = False


@dataclass(frozen=True)
class Scrolled:
    points: list[Point]
    next_offset: PointId | None
    truncated: bool = False


@door
class PointReads:
    def __init__(
        self,
        reader: Reader,
        engine: QueryEngine,
        collection: str,
        vector_size: int,
        versions: Versions,
        stacks: Stacks | None = None,
    ):
        self.reader = reader
        self.engine = engine
        self.collection = collection
        self.vector_size = vector_size
        self.versions = versions
        self.stacks = stacks

    @property
    def bounds(self) -> Bounds:
        return self.engine.bounds

    async def names(self, who: Identity) -> list[str]:
        """The collections of the asker's tenant: whose's own, and the stack's."""
        stacks = await self.stacks.collections.names(who.tenant) if self.stacks else []
        return [self.collection, *stacks]

    async def exists(self, who: Identity, name: str) -> bool:
        return name == self.collection or await self._stack(who, name) is not None

    async def info(self, who: Identity, name: str) -> qm.CollectionInfo:
        """A collection's configuration as Qdrant answers it: its vectors (a stack's as
        it created them); never a point count (it would count points the asker may not
        see)."""
        if name == self.collection:
            # The embedder's vector, as a client writing into it sends one.
            own = {DENSE: DenseSpace(self.vector_size, qm.Distance.COSINE)}
            return VectorLayout(own, single=True).as_info()
        return (await self._known_stack(who, name)).info.layout.as_info()

    async def schema(self, who: Identity, name: str) -> Schema:
        if name == self.collection:
            return whose.schema(self.vector_size)
        return (await self._known_stack(who, name)).schema

    async def vectors_asked(
        self, who: Identity, name: str, with_vector: qm.WithVector | None
    ) -> frozenset[str]:
        """The vectors a read by id asks to have returned (a name the collection lacks:
        refused, as Qdrant)."""
        return vector_names(with_vector, await self.schema(who, name))

    async def query(self, asked: Asked, request: qm.QueryRequest) -> Points:
        async with self._opened(asked) as (coll, lookup):
            answer = await self.engine.query(coll, request, lookup)
            return Points(await _points(coll, answer.hits), answer.truncated)

    async def query_batch(self, asked: Asked, requests: Sequence[qm.QueryRequest]) -> list[Points]:
        async with self._opened(asked) as (coll, lookup):
            answers = await self.engine.query_batch(coll, requests, lookup)
            return [Points(await _points(coll, a.hits), a.truncated) for a in answers]

    async def groups(self, asked: Asked, request: qm.QueryGroupsRequest) -> Groups:
        async with self._opened(asked) as (coll, lookup):
            grouped = await query_groups(self.engine, coll, request, lookup)
            hits = [h for g in grouped.groups for h in g.hits]
            lookups = [g.lookup for g in grouped.groups if g.lookup is not None]
            shown = iter(await _points(coll, [*hits, *lookups]))
            groups = [Group(g.key, [next(shown) for _ in g.hits]) for g in grouped.groups]
            for i, g in enumerate(grouped.groups):
                if g.lookup is not None:
                    groups[i] = Group(g.key, groups[i].points, next(shown))
            return Groups(groups, grouped.truncated)

    async def scroll(self, asked: Asked, request: qm.ScrollRequest) -> Scrolled:
        async with self._opened(asked) as (coll, _):
            page = await scans.scroll(coll, request, self.bounds)
            return Scrolled(await _points(coll, page.hits), page.next_offset, page.truncated)

    async def count(self, asked: Asked, request: qm.CountRequest) -> scans.Counted:
        async with self._opened(asked) as (coll, _):
            return await scans.count(coll, request, self.bounds)

    async def facet(self, asked: Asked, request: qm.FacetRequest) -> scans.Faceted:
        async with self._opened(asked) as (coll, _):
            return await scans.facet(coll, request, self.bounds)

    async def retrieve(
        self, asked: Asked, ids: Sequence[PointId], with_vector: qm.WithVector | None
    ) -> list[Point]:
        """The points asked for that the asker may see; an id the asker may not see is
        missing, exactly as one that does not exist. In the whose collection an id is a
        record's (any version) or, for its writer, the current version of a document it
        wrote under that id (writes/versions.py); in a stack collection, the id the
        stack chose (reads/query/stack.py)."""
        vectors = await self.vectors_asked(asked.who, asked.collection, with_vector)
        if asked.collection != self.collection:
            async with self._opened(asked, purpose="get") as (coll, _):
                assert isinstance(coll, StackView)
                return await _points(coll, await coll.by_ids(ids, vectors=vectors))
        records = [r for r in map(record_id, ids) if r is not None]
        named = await self.versions.aliases(asked.who, records)
        wanted = list(dict.fromkeys(r for found in named.values() for r in found))
        question = _question(asked.who, "get")
        answer = await self.reader.by_ids(question, asked.route, wanted, bool(vectors))
        return [
            Point(s.record.id, 1.0, _dense(s.record.vector) if vectors else {}, s)
            for s in answer.shown
        ]

    async def _stack(self, who: Identity, name: str) -> StackPaths | None:
        if self.stacks is None or name == self.collection:
            return None
        return await self.stacks.paths(who.tenant, name)

    async def _known_stack(self, who: Identity, name: str) -> StackPaths:
        paths = await self._stack(who, name)
        if paths is None:
            raise missing(name)
        return paths

    @asynccontextmanager
    async def _opened(
        self, asked: Asked, purpose: str = "recall"
    ) -> AsyncIterator[tuple[WhoseCollection, Lookup[Decided]]]:
        """The collection asked about, opened for one request: one disclosure (one audit
        entry) for all its leaves; `lookup_from` and `with_lookup` resolve only among
        the collections of the caller's tenant, under the same disclosure."""
        question = _question(asked.who, purpose)
        if asked.collection == self.collection:
            opening = whose.opened(
                self.reader, question, asked.route, asked.check, self.collection, self.vector_size
            )
        else:
            paths = await self._known_stack(asked.who, asked.collection)
            opening = _stack_opened(paths, question, asked)
        async with opening as coll:

            async def lookup(name: str) -> WhoseCollection | None:
                if name == asked.collection:
                    return coll
                if name == self.collection:
                    return whose.WhoseCollection(
                        self.reader,
                        coll.disclosure,
                        asked.check,
                        self.collection,
                        self.vector_size,
                        coll.now,
                    )
                other = await self._stack(asked.who, name)
                return None if other is None else _view(other, coll.disclosure, asked, coll.now)

            yield coll, lookup


@asynccontextmanager
async def _stack_opened(
    paths: StackPaths, question: DisclosureQuestion, asked: Asked
) -> AsyncIterator[StackView]:
    async with paths.reader.gate.begin(question, asked.route) as disclosure:
        yield _view(paths, disclosure, asked, question.now)


def _view(paths: StackPaths, disclosure: Disclosure, asked: Asked, now: datetime) -> StackView:
    return StackView(
        paths.reader,
        disclosure,
        asked.check,
        paths.info.name,
        0,
        now,
        layout_schema=paths.schema,
    )


def record_id(raw: PointId) -> UUID | None:
    try:
        return UUID(int=raw) if isinstance(raw, int) else UUID(str(raw))
    except ValueError:
        return None


def _json(vector: Vector) -> Any:
    if isinstance(vector, qm.SparseVector):
        return vector.model_dump(mode="json")
    return list(vector)


def _dense(vector: list[float] | None) -> dict[str, Vector]:
    return {} if vector is None else {DENSE: vector}


def _question(who: Identity, purpose: str) -> DisclosureQuestion:
    return DisclosureQuestion(asker=who, audience=[], purpose=purpose, now=datetime.now(UTC))


async def _points(coll: WhoseCollection, hits: Sequence[Hit[Decided]]) -> list[Point]:
    shown = await coll.shown(hits)
    return [
        Point(h.id, h.score, h.vectors, s, h.order_value) for h, s in zip(hits, shown, strict=True)
    ]
