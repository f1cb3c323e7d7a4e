"""Production backend: a Qdrant server or cluster through qdrant-client (async).

At start the collection is created if missing (shards, replication and write
consistency from settings) with the payload indexes the sidecar filters on; the
tenant field gets an `is_tenant` keyword index, so Qdrant co-locates each
tenant's points. An existing collection only gains the indexes it lacks.

Failures (docs/operations.md, "Qdrant: timeouts, retries, failover"): every
call has a timeout; a transient failure (connection refused or reset, timeout,
a 5xx or 429 answer) is tried again a bounded number of times, on the next
node when several URLs are configured. Reads are always idempotent. Writes
(an upsert of points with fixed ids, a payload update of fixed fields) are
idempotent too, but they run under a chain lock with a lifetime: they are tried
again only when the request provably never reached Qdrant (the connection
could not be made), so a repeated write can never land after its lock
expired. A write that may or may not have been applied answers 503; the chain
is then mended like any write cut short, or, when Qdrant applies it after the
lock was let go, like a fork (docs/design.md §4). Whatever still
fails is StoreUnavailable: 503 `store_unavailable`, and the next request tries
again, so a Qdrant that comes back needs no sidecar restart.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

import httpx
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm
from qdrant_client.common.client_exceptions import ResourceExhaustedResponse
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from sidecar.embed.lexical import ENCODER
from sidecar.record import Stored
from sidecar.store import (
    Found,
    Page,
    Search,
    StoreUnavailable,
    Vectors,
    hybrid,
    planner,
    probes,
    records,
    rescore,
)
from sidecar.store.layout import VectorLayout
from sidecar.store.schema import (
    DATETIME_FIELDS,
    FLOAT_FIELDS,
    KEYWORD_FIELDS,
    LINKED_FIELDS,
    MADE_WITH,
    TENANT_FIELD,
    TEXT_FIELDS,
    point_id,
)
from sidecar.store.scope import Scope, to_qdrant
from sidecar.store.vectors import (
    LAYOUT_KEY,
    LEXICAL,
    SPEC_KEY,
    IndexMismatch,
    IndexSpec,
    check,
    dense,
    lexical,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# The first wait before trying again, doubling (with jitter) up to the last.
_FIRST_WAIT_S = 0.05
_LAST_WAIT_S = 0.5


@dataclass(frozen=True)
class Layout:
    """How a collection the sidecar creates is spread over a cluster. `shards` None
    leaves it to Qdrant (one shard per node in a cluster, one on a single node)."""

    shards: int | None = None
    replication: int = 1
    write_consistency: int = 1


# From this many points asked, a search over several shards asks each for fewer, on the
# chance that the nearest points are spread evenly (Qdrant's undersampling): a neighbour
# can go missing, and the neighbourhood's proof with it.
UNDERSAMPLED_FROM = 128


@dataclass(frozen=True)
class _QueryBounds:
    """What a collection lets one query ask, where the neighbourhood's searches could
    go beyond it: its shards (undersampling) and strict mode's limits (a query past
    them is refused, 400)."""

    shards: int = 1
    max_limit: int | None = None
    max_hnsw_ef: int | None = None
    exact_allowed: bool = True

    @classmethod
    def of(cls, info: qm.CollectionInfo) -> _QueryBounds:
        strict = info.config.strict_mode_config
        on = strict is not None and bool(strict.enabled)
        return cls(
            shards=info.config.params.shard_number or 1,
            max_limit=strict.max_query_limit if on and strict else None,
            max_hnsw_ef=strict.search_max_hnsw_ef if on and strict else None,
            exact_allowed=not (on and strict and strict.search_allow_exact is False),
        )

    def admit(self, size: int, beam: int) -> bool:
        """Whether the neighbourhood (`size` points, a beam of `beam`) and the exact
        search among it can be asked as they must be; if not, the search goes the way
        an unproven one does."""
        return (
            (self.shards == 1 or size < UNDERSAMPLED_FROM)
            and (self.max_limit is None or size <= self.max_limit)
            and (self.max_hnsw_ef is None or beam <= self.max_hnsw_ef)
            and self.exact_allowed
        )


def _search_params(tuning: Search, exact: bool) -> qm.SearchParams | None:
    """Exact, or a walk with the configured beam (None: the server's own), as the
    embedded store asks (edge.py `_search_params`)."""
    if not exact and tuning.hnsw_ef is None:
        return None
    return qm.SearchParams(hnsw_ef=tuning.hnsw_ef, exact=exact)


# `Search.neighbourhood_above` on this backend (services.py): the neighbourhood and its
# proof are two more round trips here, which at 100k records cost about what the
# server's exact search of 20 000 points does (bench/search_plan.py --server;
# docs/performance.md, round twelve), so at or below that a search is exact at once.
NEIGHBOURHOOD_ABOVE = 20_000


class ServerStore:
    def __init__(
        self,
        clients: list[AsyncQdrantClient],
        collection: str,
        vector_size: int,
        layout: Layout | None = None,
        retries: int = 2,
        search: Search | None = None,
        index: IndexSpec | None = None,
        *,
        vectors: VectorLayout | None = None,
        metadata: dict[str, Any] | None = None,
        creates: bool = True,
        owns_clients: bool = True,
    ) -> None:
        """`clients`: one per node URL, tried in turn when one fails. `index`: the
        vectors this sidecar makes, checked against the collection's record of them.
        `vectors`: the points' vectors (default: the whose collection's); a stack
        collection's layout is checked against the one in the collection's metadata
        instead, beside which `metadata` is recorded when it is created. `creates`:
        whether a missing collection is created when first used (a stack collection
        is created only by `create`, store/stacks.py: one dropped stays dropped).
        `owns_clients`: whether `close` closes the clients (not when they are shared
        by the stack collections of one registry)."""
        if not clients:
            raise ValueError("a server store needs at least one Qdrant URL")
        self.clients = clients
        self.collection = collection
        self.vectors = vectors or VectorLayout.whose(vector_size)
        self.metadata = metadata or {}
        self.creates = creates
        self.owns_clients = owns_clients
        self.vector_size = vector_size
        self.index = index or IndexSpec.hashing(vector_size)
        self.layout = layout or Layout()
        # What the collection lets one query ask (read with the collection).
        self._bounds = _QueryBounds()
        self.attempts = 1 + retries
        self.search_tuning = search or Search()
        # Where the planner's neighbourhood declined lately, per filter (planner.py).
        self.proofs = planner.Proofs()
        self._current = 0
        self._ensured = False

    @classmethod
    def connect(
        cls,
        urls: list[str],
        collection: str,
        vector_size: int,
        *,
        api_key: str | None = None,
        timeout_s: int = 5,
        layout: Layout | None = None,
        retries: int = 2,
        search: Search | None = None,
        index: IndexSpec | None = None,
        vectors: VectorLayout | None = None,
        metadata: dict[str, Any] | None = None,
        creates: bool = True,
    ) -> ServerStore:
        # No compatibility check: it is a blocking request at construction, and it
        # warns across two minor versions; the tests run against the server we ship.
        clients = [
            AsyncQdrantClient(
                url=url, api_key=api_key, timeout=timeout_s, check_compatibility=False
            )
            for url in urls
        ]
        return cls(
            clients,
            collection,
            vector_size,
            layout,
            retries,
            search,
            index,
            vectors=vectors,
            metadata=metadata,
            creates=creates,
        )

    async def open(self) -> None:
        # A sidecar that starts while Qdrant is down reports not-ready (/readyz) and
        # answers 503 until Qdrant is back, instead of failing to start. A collection
        # made for other vectors refuses the start (IndexMismatch).
        try:
            await self._create_or_check()
        except StoreUnavailable as exc:
            log.warning("Qdrant unreachable at start-up; will retry: %s", exc)

    async def _ensure_collection(self) -> None:
        try:
            await self._create_or_check()
        except IndexMismatch as exc:
            # Found only now (Qdrant was down at start): fail closed on every request.
            log.error("%s", exc)
            raise StoreUnavailable(str(exc)) from None

    async def _create_or_check(self) -> None:
        if self._ensured:
            return
        exists = await self._call(lambda c: c.collection_exists(self.collection))
        if not exists:
            if not self.creates:
                raise StoreUnavailable(f"the Qdrant collection {self.collection} is missing")
            await self.create()
        info = await self._call(lambda c: c.get_collection(self.collection))
        if self.vectors.computes_lexical:
            await self._check_index(info)
        else:
            self._check_layout(info)
        # The indexes `create` did not make (a stack's collection: all but MADE_WITH),
        # and those a collection made by an earlier version lacks (a server in strict
        # mode refuses filters on fields without one).
        await self._make_indexes([i for i in _indexes() if i[0] not in info.payload_schema])
        self._bounds = _QueryBounds.of(info)
        self._ensured = True

    async def _make_indexes(self, indexes: list[tuple[str, _Index]]) -> None:
        """Asked all at once: Qdrant makes them one after another anyway, each with a
        flush of those made before it (whose's 34 on an empty collection: 0.75 s
        together, 0.99 s one by one; about half of it the disk's)."""
        await asyncio.gather(
            *(
                self._call(
                    lambda c, name=name, schema=schema: c.create_payload_index(  # type: ignore[misc]
                        self.collection, name, schema, wait=True
                    )
                )
                for name, schema in indexes
            )
        )

    def _check_layout(self, info: qm.CollectionInfo) -> None:
        """A stack collection holds the vectors it was created with."""
        recorded = VectorLayout.from_json((info.config.metadata or {}).get(LAYOUT_KEY))
        if recorded != self.vectors:
            held = recorded.describe() if recorded is not None else "no recorded layout"
            raise IndexMismatch(
                f"the Qdrant collection {self.collection} holds {held}, "
                f"not {self.vectors.describe()}"
            )

    async def _check_index(self, info: qm.CollectionInfo) -> None:
        recorded = IndexSpec.from_json((info.config.metadata or {}).get(SPEC_KEY))
        if recorded is None and await self._adoptable(info):
            # An empty collection made by hand with these vectors: it is ours now.
            metadata = {SPEC_KEY: self.index.as_json()}
            await self._call(
                lambda c: c.update_collection(self.collection, metadata=metadata),
                idempotent=False,
            )
            recorded = self.index
        check(f"the Qdrant collection {self.collection}", recorded, self.index)

    async def _adoptable(self, info: qm.CollectionInfo) -> bool:
        """Empty, with the dense vector (this dimension, cosine) and the lexical one,
        scored as stored (an IDF modifier would weigh terms by the other records)."""
        params = info.config.params
        dense_params = params.vectors
        lexical_params = (params.sparse_vectors or {}).get(LEXICAL)
        if not (
            isinstance(dense_params, qm.VectorParams)
            and dense_params.size == self.index.dim
            and dense_params.distance == qm.Distance.COSINE
            and lexical_params is not None
            and lexical_params.modifier in (None, qm.Modifier.NONE)
        ):
            return False
        counted = await self._call(lambda c: c.count(self.collection, exact=True))
        return counted.count == 0

    async def create(self) -> bool:
        """Create the collection (shards and replication from `layout`); False if it
        exists already (another worker or replica created it first, or the name is
        taken)."""
        created = True

        async def make(client: AsyncQdrantClient) -> None:
            nonlocal created
            try:
                await self._create(client)
            except UnexpectedResponse as exc:
                if exc.status_code != 409:
                    raise
                created = False

        await self._call(make, idempotent=False)
        if created and not self.vectors.computes_lexical:
            # A stack's collection: what answers need now, where a caller expects set-up
            # to cost (PUT /collections), and the rest on its first use, so that no one
            # request bears all 34 (1 s here, past qdrant-client's 5 s on a loaded
            # machine). Left to the first use if Qdrant fails them now.
            try:
                await self._make_indexes([i for i in _indexes() if i[0] in MADE_WITH])
            except StoreUnavailable as exc:
                log.warning("indexes of %s left to its first use: %s", self.collection, exc)
        return created

    async def _create(self, client: AsyncQdrantClient) -> None:
        vectors: Any
        if self.vectors.computes_lexical:
            vectors = qm.VectorParams(size=self.index.dim, distance=qm.Distance.COSINE)
            metadata: dict[str, Any] = {SPEC_KEY: self.index.as_json()}
        else:
            vectors = self.vectors.vectors_config() or {}
            metadata = {LAYOUT_KEY: self.vectors.as_json()}
        await client.create_collection(
            self.collection,
            vectors_config=vectors,
            # No IDF modifier: it would weigh every term by the other records
            # (store/hybrid.py, store/layout.py).
            sparse_vectors_config=self.vectors.sparse_config(as_sent=False) or None,
            metadata=metadata | self.metadata,
            shard_number=self.layout.shards,
            replication_factor=self.layout.replication,
            write_consistency_factor=self.layout.write_consistency,
        )

    async def recorded(self) -> dict[str, Any] | None:
        """The collection's metadata, or None when there is no such collection."""
        described = await self.described()
        return described[0] if described is not None else None

    async def described(self) -> tuple[dict[str, Any], dict[str, str]] | None:
        """The collection's metadata and its payload indexes (path: type), or None
        when there is no such collection."""

        async def read(client: AsyncQdrantClient) -> tuple[dict[str, Any], dict[str, str]] | None:
            try:
                info = await client.get_collection(self.collection)
            except UnexpectedResponse as exc:
                if exc.status_code == 404:
                    return None
                raise
            indexes = {
                path: str(index.data_type.value if index.data_type else "")
                for path, index in (info.payload_schema or {}).items()
            }
            return dict(info.config.metadata or {}), indexes

        return await self._call(read)

    async def collections(self) -> list[str]:
        """The names of every collection on the server."""
        found = await self._call(lambda c: c.get_collections())
        return [c.name for c in found.collections]

    async def drop(self) -> None:
        """Delete the collection, points and all (a stack collection dropped)."""
        await self._call(lambda c: c.delete_collection(self.collection), idempotent=False)
        self._ensured = False

    async def close(self) -> None:
        if self.owns_clients:
            for client in self.clients:
                await client.close()

    async def ping(self) -> None:
        await self._ensure_collection()
        # One attempt: a readiness probe must answer within its own timeout.
        await self._call(lambda c: c.get_collection(self.collection), attempts=1)

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
        await self._ensure_collection()
        query_filter = to_qdrant(scope, exclude)
        terms = ENCODER.query(text) if text is not None else []
        if vector is None and not terms:
            return []
        query: Any
        prefetch: list[qm.Prefetch] | None = None
        if not terms:
            assert vector is not None
            proven, params = await self._plan(
                vector, query_filter, scope, limit, score_threshold, with_vector, bool(exclude)
            )
            if proven is not None:
                return records([(p.payload, p.score, dense(p.vector)) for p in proven])
            query, using = vector, None
        elif vector is None:
            query, using, params = hybrid.server_lexical(terms), LEXICAL, None
        else:
            dense_params = await self._params(query_filter)
            prefetch, query = hybrid.server_fused(
                vector,
                terms,
                query_filter,
                limit,
                dense_params,
                self.search_tuning.lexical_weight,
            )
            using, params = None, None
        response = await self._call(
            lambda c: c.query_points(
                self.collection,
                query=query,
                using=using,
                prefetch=prefetch,
                query_filter=query_filter,
                limit=limit,
                score_threshold=score_threshold,
                with_payload=True,
                with_vectors=with_vector,
                search_params=params,
            )
        )
        return records([(p.payload, p.score, dense(p.vector)) for p in response.points])

    async def probe(
        self,
        probe: probes.Probe,
        using: str,
        scope: Scope,
        limit: int,
        exclude: Collection[str] = (),
        *,
        score_threshold: float | None = None,
        with_vectors: frozenset[str] = frozenset(),
    ) -> list[Found]:
        self.vectors.require({using} | with_vectors)
        await self._ensure_collection()
        query_filter = to_qdrant(scope, exclude)
        params = await self._params(query_filter)
        fetched = with_vectors | {using} if probes.rescored_exactly(probe) else with_vectors
        response = await self._call(
            lambda c: c.query_points(
                self.collection,
                query=probes.server(probe),
                using=using or None,
                query_filter=query_filter,
                limit=limit,
                score_threshold=score_threshold,
                with_payload=True,
                with_vectors=sorted(fetched) or False,
                search_params=params,
            )
        )
        return rescore(_found(response.points, fetched), probe, using, with_vectors)

    async def ordered(
        self,
        scope: Scope,
        limit: int,
        order_by: qm.OrderBy,
        exclude: Collection[str] = (),
        *,
        with_vectors: frozenset[str] = frozenset(),
    ) -> list[Found]:
        self.vectors.require(with_vectors)
        await self._ensure_collection()
        scroll_filter = to_qdrant(scope, exclude)
        found, _ = await self._call(
            lambda c: c.scroll(
                self.collection,
                scroll_filter=scroll_filter,
                limit=limit,
                order_by=order_by,
                with_payload=True,
                with_vectors=sorted(with_vectors) or False,
            )
        )
        return _found(found, with_vectors)

    async def fetch(
        self, tenant: str, record_ids: list[UUID], names: frozenset[str]
    ) -> list[Found]:
        self.vectors.require(names)
        await self._ensure_collection()
        ids: list[qm.ExtendedPointId] = [point_id(tenant, rid) for rid in record_ids]
        found = await self._call(
            lambda c: c.retrieve(
                self.collection, ids=ids, with_payload=True, with_vectors=sorted(names) or False
            )
        )
        mine = [r for r in found if r.payload is not None and r.payload.get(TENANT_FIELD) == tenant]
        return _found(mine, names)

    async def _plan(
        self,
        vector: list[float],
        query_filter: qm.Filter,
        scope: Scope,
        limit: int,
        score_threshold: float | None,
        with_vector: bool,
        excluding: bool = False,
    ) -> tuple[list[qm.ScoredPoint] | None, qm.SearchParams | None]:
        """The way the planner says (planner.py), as the embedded store takes it
        (edge.py `_nearest`): the `limit` nearest points the filter (`scope`'s)
        admits when the neighbourhood proved them, else how to search for them."""
        tuning = self.search_tuning
        estimate = await self._estimate(query_filter) if tuning.exact_below > 0 else None
        way = planner.way(tuning, limit, estimate)
        if way == "neighbourhood":
            assert estimate is not None
            key = planner.remembered(tuning, estimate, scope, excluding)
            if self.proofs.worth_trying(key):
                near = await self._nearest_by_neighbourhood(
                    vector, query_filter, scope.tenant, limit, score_threshold, with_vector
                )
                self.proofs.heard(key, near is not None)
                if near is not None:
                    return near, None
            way = planner.unproven(tuning, estimate)
        return None, _search_params(tuning, exact=way == "exact")

    async def _nearest_by_neighbourhood(
        self,
        vector: list[float],
        query_filter: qm.Filter,
        tenant: str,
        limit: int,
        score_threshold: float | None,
        with_vector: bool,
    ) -> list[qm.ScoredPoint] | None:
        """The `limit` nearest points the filter admits, scored exactly among the
        query's own neighbourhood and proven by it (planner.py), else None: two more
        round trips, where a scan of every admitted point would be one long one."""
        tuning = self.search_tuning
        size = planner.neighbourhood(limit)
        tenants = qm.FieldCondition(key=TENANT_FIELD, match=qm.MatchValue(value=tenant))
        beam = planner.beam(tuning, size)
        if not self._bounds.admit(size, beam):
            return None
        around = await self._call(
            lambda c: c.query_points(
                self.collection,
                query=vector,
                query_filter=qm.Filter(must=[tenants]),
                limit=size,
                with_payload=False,
                with_vectors=False,
                search_params=qm.SearchParams(hnsw_ef=beam),
            )
        )
        if len(around.points) < size:
            return None
        ids: list[qm.ExtendedPointId] = [p.id for p in around.points]
        among = qm.Filter(must=[qm.HasIdCondition(has_id=ids), query_filter])
        # One more than wanted: a tie at the cut is declined (planner.proven).
        admitted = await self._call(
            lambda c: c.query_points(
                self.collection,
                query=vector,
                query_filter=among,
                limit=limit + 1,
                score_threshold=score_threshold,
                with_payload=True,
                with_vectors=with_vector,
                search_params=qm.SearchParams(exact=True),
            )
        )
        scores = [p.score for p in admitted.points]
        neighbours = [p.score for p in around.points]
        if planner.proven(scores, neighbours, size, limit, score_threshold):
            return admitted.points[:limit]
        return None

    async def _estimate(self, query_filter: qm.Filter) -> int:
        """The points the filter matches, as the payload indexes estimate them."""
        counted = await self._call(
            lambda c: c.count(self.collection, count_filter=query_filter, exact=False)
        )
        return counted.count

    async def _params(self, query_filter: qm.Filter) -> qm.SearchParams | None:
        """Exact search when the filter matches few enough points (Qdrant's estimate
        from the payload indexes: one more round trip, no scan): see `Search`."""
        tuning = self.search_tuning
        exact = False
        if tuning.exact_below > 0:
            exact = await self._estimate(query_filter) <= tuning.exact_below
        return _search_params(tuning, exact)

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Stored]:
        await self._ensure_collection()
        ids: list[qm.ExtendedPointId] = [point_id(tenant, rid) for rid in record_ids]
        found = await self._call(
            lambda c: c.retrieve(
                self.collection, ids=ids, with_payload=True, with_vectors=with_vector
            )
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
        scroll_filter = to_qdrant(scope)
        found, next_offset = await self._call(
            lambda c: c.scroll(
                self.collection,
                scroll_filter=scroll_filter,
                limit=limit,
                offset=offset,
                with_payload=True,
                with_vectors=with_vector,
            )
        )
        page = records([(r.payload, None, dense(r.vector)) for r in found])
        return Page(page, None if next_offset is None else str(next_offset))

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], Vectors]]) -> None:
        lexical_too = self.vectors.computes_lexical
        points = [_point(tenant, payload, vectors, lexical_too) for payload, vectors in items]
        await self._ensure_collection()
        await self._call(
            lambda c: c.upsert(self.collection, points=points, wait=True), idempotent=False
        )

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        await self._ensure_collection()
        points: list[qm.ExtendedPointId] = [point_id(tenant, record_id)]
        await self._call(
            lambda c: c.set_payload(self.collection, payload=fields, points=points, wait=True),
            idempotent=False,
        )

    async def delete(self, tenant: str, record_ids: list[UUID]) -> None:
        if not record_ids:
            return
        await self._ensure_collection()
        points: list[qm.ExtendedPointId] = [point_id(tenant, rid) for rid in record_ids]
        await self._call(
            lambda c: c.delete(
                self.collection, points_selector=qm.PointIdsList(points=points), wait=True
            ),
            idempotent=False,
        )

    async def clear(self, tenant: str, record_id: UUID, fields: list[str]) -> None:
        await self._ensure_collection()
        points: list[qm.ExtendedPointId] = [point_id(tenant, record_id)]
        await self._call(
            lambda c: c.delete_payload(self.collection, keys=fields, points=points, wait=True),
            idempotent=False,
        )

    async def tenants(self, limit: int) -> list[str]:
        await self._ensure_collection()
        found = await self._call(
            lambda c: c.facet(self.collection, key=TENANT_FIELD, limit=limit, exact=True)
        )
        return sorted(str(hit.value) for hit in found.hits)

    async def create_index(self, field: str, schema: qm.PayloadSchemaType) -> None:
        await self._ensure_collection()
        await self._call(
            lambda c: c.create_payload_index(self.collection, field, schema, wait=True)
        )

    async def drop_index(self, field: str) -> None:
        await self._ensure_collection()
        info = await self._call(lambda c: c.get_collection(self.collection))
        if field in info.payload_schema:
            await self._call(lambda c: c.delete_payload_index(self.collection, field, wait=True))

    async def _call(
        self,
        fn: Callable[[AsyncQdrantClient], Awaitable[T]],
        *,
        idempotent: bool = True,
        attempts: int | None = None,
    ) -> T:
        """`fn(client)` on the current node, tried again within the bounds above.

        Whatever the client raises in the end (connection, timeout, server error)
        is the store's unavailability to our callers: 503, never a 500 and never
        a partial answer."""
        again = _transient if idempotent else _never_sent
        retrying = AsyncRetrying(
            stop=stop_after_attempt(attempts or self.attempts),
            wait=wait_exponential_jitter(
                multiplier=_FIRST_WAIT_S, max=_LAST_WAIT_S, jitter=_FIRST_WAIT_S
            ),
            retry=retry_if_exception(again),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    index = self._current
                    try:
                        return await fn(self.clients[index])
                    except Exception as exc:
                        self._failed(index, exc)
                        raise
        except Exception as exc:
            raise StoreUnavailable(_describe(exc)) from exc
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _failed(self, index: int, exc: Exception) -> None:
        if isinstance(exc, UnexpectedResponse) and exc.status_code == 404:
            # The collection went away (a Qdrant restarted on empty storage): the
            # next call creates it again, as a first start would.
            self._ensured = False
        if _transient(exc) and index == self._current and len(self.clients) > 1:
            # Concurrent failures on one node move on once, not once each.
            self._current = (index + 1) % len(self.clients)
            log.warning("Qdrant node %d failed (%s); trying the next", index, _describe(exc))


def _found(points: list[Any], names: frozenset[str]) -> list[Found]:
    """The records among the points a query, scroll or retrieve returned."""
    found = []
    for point in points:
        record = Stored.from_payload(point.payload, getattr(point, "score", None))
        if record is not None:
            vectors = probes.vectors_out(point.vector, names)
            found.append(Found(record, vectors, getattr(point, "order_value", None)))
    return found


def _transient(exc: BaseException) -> bool:
    """A failure that the same request may not meet again."""
    if isinstance(exc, ResponseHandlingException):
        return isinstance(exc.source, httpx.TransportError)
    if isinstance(exc, ResourceExhaustedResponse):
        return True
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code is not None and exc.status_code >= 500
    return False


def _never_sent(exc: BaseException) -> bool:
    """A failure before the request left this process: nothing can have been applied."""
    return isinstance(exc, ResponseHandlingException) and isinstance(
        exc.source, httpx.ConnectError | httpx.ConnectTimeout
    )


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ResponseHandlingException):
        return f"{type(exc.source).__name__}: {exc.source}"
    if isinstance(exc, UnexpectedResponse):
        return f"HTTP {exc.status_code}: {exc.content[:200]!r}"
    return f"{type(exc).__name__}: {exc}"


def _point(
    tenant: str, payload: dict[str, Any], vectors: Vectors, lexical_too: bool
) -> qm.PointStruct:
    """The point: its vectors as given, and in the whose collection the lexical one
    computed from the record."""
    named: dict[str, Any] = dict(vectors)
    if lexical_too:
        sparse = lexical(payload)
        named[LEXICAL] = qm.SparseVector(indices=sparse.indices, values=sparse.values)
    return qm.PointStruct(id=point_id(tenant, payload["id"]), vector=named, payload=payload)


_Index = (
    qm.PayloadSchemaType
    | qm.KeywordIndexParams
    | qm.DatetimeIndexParams
    | qm.FloatIndexParams
    | qm.TextIndexParams
)


def _indexes() -> list[tuple[str, _Index]]:
    tenant_index = qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True)
    indexes: list[tuple[str, _Index]] = [(TENANT_FIELD, tenant_index)]
    for n in KEYWORD_FIELDS:
        keyword = qm.KeywordIndexParams(
            type=qm.KeywordIndexType.KEYWORD, enable_hnsw=n in LINKED_FIELDS
        )
        indexes.append((n, keyword))
    for n in DATETIME_FIELDS:
        instant = qm.DatetimeIndexParams(
            type=qm.DatetimeIndexType.DATETIME, enable_hnsw=n in LINKED_FIELDS
        )
        indexes.append((n, instant))
    for n in FLOAT_FIELDS:
        number = qm.FloatIndexParams(type=qm.FloatIndexType.FLOAT, enable_hnsw=n in LINKED_FIELDS)
        indexes.append((n, number))
    for n in TEXT_FIELDS:
        text = qm.TextIndexParams(
            type=qm.TextIndexType.TEXT,
            tokenizer=qm.TokenizerType.WORD,
            lowercase=True,
            phrase_matching=True,
            enable_hnsw=n in LINKED_FIELDS,
        )
        indexes.append((n, text))
    return indexes
