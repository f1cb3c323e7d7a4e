"""Embedded default: Qdrant's own engine in-process (qdrant-edge-py), on disk.

The engine's calls are synchronous and hold the GIL throughout, so reads run on the
event loop's own thread (a worker thread only added its hop) and so do searches
inside the engine (`WHOSE_SEARCH_THREADS`, default 1: its own pool split a search
across threads while the caller waited); writes, flushes and the optimizer run in a
worker thread. HNSW is built by `optimize()`: once when the store opens (before
serving) and then by a background task after writes.

qdrant-edge 0.9 holds the GIL for the whole of every call, so while it optimizes
the entire process stands still (measured: 5 s for 20k 384-dim points). A request
caught half-way would see its OPA call time out in that stall, so the background
task waits until the sidecar has been quiet: no request in flight (health probes
and metric scrapes aside), none for `optimize_interval_s`. Under constant traffic
new points stay unindexed until a quiet moment or the next start: searches stay
correct, only slower (the payload indexes still narrow them).

A stack collection's shard is made on its first use, inside a request, and each
payload index the engine makes flushes every index made before it: all of whose's
took 0.6-0.8 s with the process standing still (docs/design.md, "Stack
collections"). So the request makes the indexes that change an answer (MADE_WITH),
0.15 s, and a task started with the store makes the others right after, one at a
time (about 20 ms each, 0.4 s in all), each when the store's own calls pause (or
after a second), and all that are left before a write takes the stack past
LATE_INDEXES_UNDER points. Those are keyword indexes, outside `evidence[]`: meanwhile
the engine matches their conditions on the payload alike, only slower
(tests/integration/test_stack_store.py checks each).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Collection
from datetime import date, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import qdrant_edge as qe
from qdrant_client.http import models as qm

from sidecar.embed.lexical import ENCODER
from sidecar.errors import FilterRefused
from sidecar.record import Stored, iso
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
from sidecar.store.scope import (
    AbsentOrAnyOf,
    AnyOf,
    Condition,
    Either,
    EmptyOrAfter,
    Exactly,
    NotAfter,
    Scope,
    condition_to_qdrant,
)
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


class StoreInUse(OSError):
    """Another process has the embedded store's folder open (the engine allows one)."""


def claim(path: Path) -> int:
    """Hold the store folder `path` for this process: an open file descriptor, locked
    until it is closed (or the process ends), that says which process holds it.

    The engine's own WAL lock refuses a second process too, but with a traceback that
    names neither the process nor the setting; this lock is taken first, beside the
    folder, and its file names the holder (pid and command line) for the one line a
    second `whose serve`, `mcp`, `sweep`, `repair` or `reindex` prints instead."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".owner"), os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 1024, 0).decode(errors="replace").strip()
        os.close(fd)
        raise in_use(path, holder) from None
    program = os.path.basename(sys.argv[0])
    # `python -m sidecar` is `whose` by another name.
    program = "whose" if program == "__main__.py" else program
    command = " ".join([program, *sys.argv[1:]])[:300]
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()} ({command})".encode(), 0)
    return fd


def in_use(path: Path, holder: str = "") -> StoreInUse:
    by = f" by {holder}" if holder else " by another process"
    return StoreInUse(
        f"the store {path} is in use{by}: stop it, or give this one another"
        " WHOSE_DATA_DIR (--data-dir); to share one store, use a Qdrant server"
        " (WHOSE_STORE=server)"
    )


def load_shard(path: Path, config: qe.EdgeConfig | None = None) -> qe.EdgeShard:
    """The shard at `path`; with `config`, checked against it (the vectors) and run
    with its settings (the search threads)."""
    try:
        return qe.EdgeShard.load(str(path), config)
    except Exception as exc:
        # The engine's WAL lock, held by a process that took no claim (an older whose).
        if "WouldBlock" in str(exc):
            raise in_use(path) from None
        raise


class EdgeStore:
    def __init__(
        self,
        path: Path,
        vector_size: int,
        optimize_interval_s: float = 10.0,
        quiet_for: Callable[[], float] | None = None,
        search: Search | None = None,
        index: IndexSpec | None = None,
        vectors: VectorLayout | None = None,
    ) -> None:
        """`quiet_for`: seconds since the server last had a request in flight (0 while
        one is); without it, only this store's own calls count. `index`: the vectors
        this sidecar makes (default: the hashing embedder's), checked against the
        store's own record of them at open. `vectors`: the points' vectors (default:
        the whose collection's, `vector_size` and lexical); a stack collection's
        layout is checked against the one recorded beside its shard instead."""
        self.path = path
        self.vectors = vectors or VectorLayout.whose(vector_size)
        self.search_tuning = search or Search()
        # Where the planner's neighbourhood declined lately, per filter (planner.py).
        self.proofs = planner.Proofs()
        # Where the sieve declined lately, per filter (planner.py), remembered alike.
        self.sieves = planner.Proofs()
        # Writes begun and done (`_unwritten`): a search in two engine calls declines
        # if any ran between them.
        self._writes_begun = self._writes_done = 0
        self.vector_size = vector_size
        self.index = index or IndexSpec.hashing(vector_size)
        self.optimize_interval_s = optimize_interval_s
        self._server_quiet_for = quiet_for
        self._calls_in_flight = 0
        self._last_call = time.monotonic()
        self._shard: qe.EdgeShard | None = None
        self._dirty = asyncio.Event()
        self._optimizer: asyncio.Task[None] | None = None
        self._optimizing: asyncio.Future[None] | None = None
        self._claim: int | None = None
        # A stack shard's payload indexes still to make (see above), one at a time.
        self._unindexed: set[str] = set()
        self._indexing = asyncio.Lock()
        self._completing: asyncio.Task[None] | None = None
        self._closing = False
        # Points written since the store was made or opened (those it held then too).
        self._points_written = 0

    async def open(self) -> None:
        self._claim = claim(self.path)
        try:
            self._shard = await asyncio.to_thread(self._open_shard)
        except BaseException:
            self._release()
            raise
        self._optimizer = asyncio.create_task(self._optimize_after_writes())
        if self._unindexed:
            self._completing = asyncio.create_task(self._complete_indexes())
        # Whatever an earlier process stored but did not index, indexed before serving
        # (nothing to do, and instant, when it is all indexed).
        try:
            await self.optimize()
        except StoreUnavailable:
            # Searches work unindexed; the background task tries again when quiet.
            log.exception("optimize at open failed")
            self._dirty.set()

    def _open_shard(self) -> qe.EdgeShard:
        if not self.vectors.computes_lexical:
            shard = self._open_stack_shard()
        else:
            shard = self._open_whose_shard()
        # On a new store the indexes go in before any data, so every segment is built
        # with them; a store made by an earlier version gains the ones added since. A
        # stack shard, opened inside a request, gets MADE_WITH now, the rest from
        # _complete_indexes (see above).
        info = shard.info()
        self._points_written = info.points_count
        indexed = info.payload_schema
        missing = [(name, schema) for name, schema in _indexes() if name not in indexed]
        for name, schema in missing:
            if self.vectors.computes_lexical or name in MADE_WITH:
                shard.update(qe.UpdateOperation.create_field_index(name, schema))
            else:
                self._unindexed.add(name)
        return shard

    def _open_stack_shard(self) -> qe.EdgeShard:
        """A stack collection's shard: its layout recorded beside the engine's files."""
        layout_file = self.path / f"{LAYOUT_KEY}.json"
        config = self.vectors.edge_config(self.search_tuning.threads)
        if (self.path / "edge_config.json").exists():
            recorded = None
            if layout_file.exists():
                recorded = VectorLayout.from_json(json.loads(layout_file.read_text()))
            if recorded != self.vectors:
                held = recorded.describe() if recorded is not None else "no recorded layout"
                raise IndexMismatch(
                    f"the store {self.path} holds {held}, not {self.vectors.describe()}"
                )
            return load_shard(self.path, config)
        shard = qe.EdgeShard.create(str(self.path), config)
        layout_file.write_text(json.dumps(self.vectors.as_json()))
        return shard

    def _open_whose_shard(self) -> qe.EdgeShard:
        spec_file = self.path / f"{SPEC_KEY}.json"
        config = edge_config(self.index, self.search_tuning.threads)
        if (self.path / "edge_config.json").exists():
            recorded = None
            if spec_file.exists():
                recorded = IndexSpec.from_json(json.loads(spec_file.read_text()))
            # Before the engine opens the folder: a refusal leaves no lock behind.
            check(f"the store {self.path}", recorded, self.index)
            shard = load_shard(self.path, config)
        else:
            shard = qe.EdgeShard.create(str(self.path), config)
            spec_file.write_text(json.dumps(self.index.as_json()))
        return shard

    async def close(self) -> None:
        self._closing = True
        if self._completing is not None:
            # Its engine call cannot be cancelled; it stops before the next one.
            await self._completing
        if self._optimizer is not None:
            self._optimizer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._optimizer
        if self._optimizing is not None:
            # A thread cannot be cancelled: let a running optimize finish first.
            with contextlib.suppress(StoreUnavailable):
                await self._optimizing
        if self._shard is not None:
            shard, self._shard = self._shard, None
            await asyncio.to_thread(shard.flush)
            await asyncio.to_thread(shard.close)
        self._release()

    def _release(self) -> None:
        if self._claim is not None:
            fd, self._claim = self._claim, None
            os.close(fd)

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise StoreUnavailable("store is not open")
        return self._shard

    async def ping(self) -> None:
        await self._run(self.shard.info)

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
        flt = _edge_filter(scope, exclude)
        terms = ENCODER.query(text) if text is not None else []
        if vector is None and not terms:
            return []

        def query() -> list[Any]:
            # The estimate, the neighbourhood and the search in one engine call.
            if vector is not None and not terms:
                return self._nearest(
                    vector, flt, scope, limit, score_threshold, with_vector, bool(exclude)
                )
            request = qe.QueryRequest(
                limit=limit,
                filter=flt,
                score_threshold=score_threshold,
                with_payload=True,
                with_vector=with_vector,
                **self._query(vector, terms, flt, limit),
            )
            return list(self.shard.query(request))

        points = await self._read(query)
        return records([(p.payload, p.score, dense(p.vector)) for p in points])

    def _query(
        self, vector: list[float] | None, terms: list[int], flt: qe.Filter, limit: int
    ) -> dict[str, Any]:
        """Lexical, or fused with dense (store/hybrid.py)."""
        if vector is None:
            return {"query": qe.Query.Nearest(hybrid.edge_lexical(terms), using=LEXICAL)}
        prefetches, formula = hybrid.edge_fused(
            vector, terms, flt, limit, self._params(flt), self.search_tuning.lexical_weight
        )
        return {"query": formula, "prefetches": prefetches}

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
        flt = _edge_filter(scope, exclude)
        query = probes.edge(probe, using)
        fetched = with_vectors | {using} if probes.rescored_exactly(probe) else with_vectors

        def run() -> list[Any]:
            request = qe.QueryRequest(
                limit=limit,
                query=query,
                filter=flt,
                score_threshold=score_threshold,
                with_payload=True,
                with_vector=sorted(fetched) or False,
                params=self._params(flt),
            )
            return list(self.shard.query(request))

        return rescore(_found(await self._read(run), fetched), probe, using, with_vectors)

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
        direction = (
            qe.Direction.Desc if order_by.direction == qm.Direction.DESC else qe.Direction.Asc
        )
        raw = order_by.start_from
        start = raw.isoformat() if isinstance(raw, datetime | date) else raw
        request = qe.ScrollRequest(
            limit=limit,
            filter=_edge_filter(scope, exclude),
            with_payload=True,
            with_vector=sorted(with_vectors) or False,
            order_by=qe.OrderBy(order_by.key, direction=direction, start_from=start),
        )
        found, _ = await self._read(self.shard.scroll, request)
        return _found(found, with_vectors)

    async def fetch(
        self, tenant: str, record_ids: list[UUID], names: frozenset[str]
    ) -> list[Found]:
        self.vectors.require(names)
        ids: list[qe.PointId] = [point_id(tenant, rid) for rid in record_ids]
        found = await self._read(self.shard.retrieve, ids, True, sorted(names) or False)
        mine = [r for r in found if r.payload is not None and r.payload.get(TENANT_FIELD) == tenant]
        return _found(mine, names)

    def _nearest(
        self,
        vector: list[float],
        flt: qe.Filter,
        scope: Scope,
        limit: int,
        score_threshold: float | None,
        with_vector: bool,
        excluding: bool = False,
    ) -> list[Any]:
        """The `limit` nearest points `flt` (`scope`'s, leaving some out when
        `excluding`) admits, the way the planner says (planner.py): exact, proven from
        the neighbourhood, or a filtered walk."""
        tuning = self.search_tuning
        way, estimate, points = self._plan(flt, scope.tenant, limit)
        if way == "neighbourhood":
            assert estimate is not None
            key = planner.remembered(tuning, estimate, scope, excluding)
            if self.proofs.worth_trying(key):
                near = self._nearest_by_neighbourhood(
                    vector, flt, scope.tenant, limit, score_threshold, with_vector, points
                )
                self.proofs.heard(key, near is not None)
                if near is not None:
                    return near
            way = planner.unproven(tuning, estimate)
        wider = None if excluding else scope.wider()
        if (
            way == "exact"
            and wider is not None
            and planner.sifts(tuning, limit, estimate)
            and self._alone(scope.tenant, points)
        ):
            # Not `planner.remembered`: the sieve only ever stands before an exact scan
            # of the same filter, so a skip changes the time alone, in any round.
            key = planner.filter_key(scope)
            if self.sieves.worth_trying(key):
                near = self._nearest_by_sieve(
                    vector, flt, wider, limit, score_threshold, with_vector
                )
                self.sieves.heard(key, near is not None)
                if near is not None:
                    return near
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(vector),
            filter=flt,
            score_threshold=score_threshold,
            with_payload=True,
            with_vector=with_vector,
            params=_search_params(tuning, exact=way == "exact"),
        )
        return list(self.shard.query(request))

    def _plan(
        self, flt: qe.Filter, tenant: str, limit: int
    ) -> tuple[planner.Way, int | None, int | None]:
        """The way a search of `flt` for `limit` points takes (planner.py), with the
        estimate and the tenant's points (where counted) it was chosen by."""
        tuning = self.search_tuning
        estimate = self._estimate(flt) if tuning.exact_below > 0 else None
        points = self._points(tenant) if planner.sized(tuning, limit, estimate) else None
        return planner.way(tuning, limit, estimate, points), estimate, points

    def _nearest_by_neighbourhood(
        self,
        vector: list[float],
        flt: qe.Filter,
        tenant: str,
        limit: int,
        score_threshold: float | None,
        with_vector: bool,
        points: int | None = None,
    ) -> list[Any] | None:
        """The `limit` nearest points `flt` admits, scored exactly among the query's
        own neighbourhood and proven by it (planner.py), else None. `points`: the
        tenant's, where counted (a smaller tenant's beam is narrower)."""
        tuning = self.search_tuning
        nearest = qe.Query.Nearest(vector)
        size = planner.neighbourhood(limit)
        tenants = qe.FieldCondition(TENANT_FIELD, match=qe.MatchValue(tenant))
        writes = self._writes()
        around = self.shard.query(
            qe.QueryRequest(
                limit=size,
                query=nearest,
                filter=qe.Filter(must=[tenants]),
                params=qe.SearchParams(hnsw_ef=planner.beam(tuning, size, points)),
                with_payload=False,
                with_vector=False,
            )
        )
        if len(around) < size:
            return None
        admitted = self._admitted_among(around, nearest, flt, limit, score_threshold, with_vector)
        scores = [p.score for p in admitted]
        proof = planner.proven(scores, [p.score for p in around], size, limit, score_threshold)
        if proof and self._unwritten(writes):
            return list(admitted)[:limit]
        return None

    def _nearest_by_sieve(
        self,
        vector: list[float],
        flt: qe.Filter,
        wider: Condition,
        limit: int,
        score_threshold: float | None,
        with_vector: bool,
    ) -> list[Any] | None:
        """The `limit` nearest points `flt` admits, found among the nearest that
        `wider` alone admits and proven by them (planner.py, the sieve), else None."""
        nearest = qe.Query.Nearest(vector)
        size = planner.sieve(limit)
        writes = self._writes()
        wide = self.shard.query(
            qe.QueryRequest(
                limit=size,
                query=nearest,
                filter=qe.Filter(must=[_edge_condition(wider)]),
                params=qe.SearchParams(exact=True),
                score_threshold=score_threshold,
                with_payload=False,
                with_vector=False,
            )
        )
        if not wide:
            return [] if self._unwritten(writes) else None
        admitted = self._admitted_among(wide, nearest, flt, limit, score_threshold, with_vector)
        scores = [p.score for p in admitted]
        if planner.sifted(scores, [p.score for p in wide], size, limit) and self._unwritten(writes):
            return list(admitted)[:limit]
        return None

    def _admitted_among(
        self,
        found: list[Any],
        nearest: qe.Query,
        flt: qe.Filter,
        limit: int,
        score_threshold: float | None,
        with_vector: bool,
    ) -> list[Any]:
        """The nearest of the `found` points `flt` admits, scored exactly: one more than
        `limit`, so that a tie at the cut is seen (planner.proven, planner.sifted)."""
        # The ids first: Qdrant then scores only those points, whatever else the filter
        # admits.
        among = qe.Filter(must=[qe.HasIdCondition({str(p.id) for p in found}), flt])
        return list(
            self.shard.query(
                qe.QueryRequest(
                    limit=limit + 1,
                    query=nearest,
                    filter=among,
                    params=qe.SearchParams(exact=True),
                    score_threshold=score_threshold,
                    with_payload=True,
                    with_vector=with_vector,
                )
            )
        )

    def _alone(self, tenant: str, points: int | None = None) -> bool:
        """Whether every point of the store is the tenant's (`points`: theirs, where
        already counted). The sieve scans under an
        audience condition alone, and audience entries are names other tenants use
        too: their points would be scored in the scan (its time growing with theirs)
        and would decide whether it proves (its time telling where theirs lie), so it
        runs only where there are none (docs/security.md, "Approximate search")."""
        theirs = self._points(tenant) if points is None else points
        return theirs == self._estimate(qe.Filter())

    def _writes(self) -> tuple[int, int]:
        """The writes begun and done so far (`_unwritten`)."""
        return self._writes_begun, self._writes_done

    def _unwritten(self, before: tuple[int, int]) -> bool:
        """Whether no write was in flight at `before` (`_writes()`) or began since. A
        search in two engine calls (the sieve, the neighbourhood) runs on the event
        loop's thread while writes run in workers, which may take the GIL between the
        calls: the second would then judge the first's points by a later state, an
        answer no single scan gives. Such a search declines, and the scan answers."""
        begun, done = before
        return begun == done and self._writes() == before

    def _points(self, tenant: str) -> int:
        """The tenant's points, as its index counts them (a few microseconds)."""
        tenants = qe.FieldCondition(TENANT_FIELD, match=qe.MatchValue(tenant))
        return self._estimate(qe.Filter(must=[tenants]))

    def _estimate(self, flt: qe.Filter) -> int:
        """The points `flt` matches, as the payload indexes estimate them (no scan)."""
        return int(self.shard.count(qe.CountRequest(exact=False, filter=flt)))

    def _params(self, flt: qe.Filter) -> qe.SearchParams | None:
        """Exact search when the filter matches few enough points (the payload indexes'
        estimate, tens of microseconds): see `Search`."""
        tuning = self.search_tuning
        exact = tuning.exact_below > 0 and self._estimate(flt) <= tuning.exact_below
        return _search_params(tuning, exact)

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Stored]:
        ids: list[qe.PointId] = [point_id(tenant, rid) for rid in record_ids]
        found = await self._read(self.shard.retrieve, ids, True, with_vector)
        # The tenant is part of the point id; checking the payload too costs nothing.
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
        request = qe.ScrollRequest(
            offset=offset,
            limit=limit,
            filter=_edge_filter(scope, ()),
            with_payload=True,
            with_vector=with_vector,
        )
        found, next_offset = await self._read(self.shard.scroll, request)
        page = records([(r.payload, None, dense(r.vector)) for r in found])
        return Page(page, None if next_offset is None else str(next_offset))

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], Vectors]]) -> None:
        points = [
            qe.Point(point_id(tenant, payload["id"]), self._vectors(payload, vectors), payload)
            for payload, vectors in items
        ]
        if self._unindexed and self._points_written + len(points) > LATE_INDEXES_UNDER:
            # An index made later is built over every point there is, with the whole
            # process standing still: a stack filled at once waits for them instead.
            await self._complete_indexes(patient=False)
        self._points_written += len(points)
        # One operation: a batch is stored whole or not at all.
        await self._run(self.shard.update, qe.UpdateOperation.upsert_points(points))
        self._dirty.set()

    def _vectors(self, payload: dict[str, Any], vectors: Vectors) -> dict[str, Any]:
        """The point's vectors in the engine's types: as given, and in the whose
        collection the lexical one computed from the record."""
        given: dict[str, Any] = {n: probes.edge_vector(v) for n, v in vectors.items()}
        if self.vectors.computes_lexical:
            sparse = lexical(payload)
            given[LEXICAL] = qe.SparseVector(sparse.indices, sparse.values)
        return given

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        operation = qe.UpdateOperation.set_payload([point_id(tenant, record_id)], fields)
        await self._run(self.shard.update, operation)

    async def delete(self, tenant: str, record_ids: list[UUID]) -> None:
        ids: list[qe.PointId] = [point_id(tenant, rid) for rid in record_ids]
        if ids:
            await self._run(self.shard.update, qe.UpdateOperation.delete_points(ids))
            # Deleted points leave the segment files when the optimizer vacuums them.
            self._dirty.set()

    async def clear(self, tenant: str, record_id: UUID, fields: list[str]) -> None:
        operation = qe.UpdateOperation.delete_payload([point_id(tenant, record_id)], fields)
        await self._run(self.shard.update, operation)

    async def tenants(self, limit: int) -> list[str]:
        request = qe.FacetRequest(key=TENANT_FIELD, limit=limit, exact=True)
        found = await self._run(self.shard.facet, request)
        return sorted(str(hit.value) for hit in found.hits)

    async def create_index(self, field: str, schema: qm.PayloadSchemaType) -> None:
        operation = qe.UpdateOperation.create_field_index(field, _EDGE_SCHEMA[schema])
        await self._run(self.shard.update, operation)

    async def drop_index(self, field: str) -> None:
        if field in (await self._run(self.shard.info)).payload_schema:
            await self._run(self.shard.update, qe.UpdateOperation.delete_field_index(field))

    async def optimize(self) -> None:
        """Build HNSW and merge segments now (the whole process waits: see above)."""
        await self._run(self.shard.optimize)

    async def _complete_indexes(self, patient: bool = True) -> None:
        """Make the indexes still missing, one engine call each (when `patient`, each
        once the store's calls pause); one that fails is tried again later."""
        for name in sorted(self._unindexed):
            if patient:
                await self._until_idle()
            async with self._indexing:
                if self._closing:
                    return
                if name not in self._unindexed:  # made by the other caller
                    continue
                operation = qe.UpdateOperation.create_field_index(name, _INDEXES[name])
                try:
                    await self._run(self.shard.update, operation)
                except StoreUnavailable:
                    log.exception("making the payload index %s failed", name)
                    self._dirty.set()
                    continue
                self._unindexed.discard(name)

    async def _until_idle(self, gap_s: float = 0.02, most_s: float = 1.0) -> None:
        """Until this store's calls have paused for `gap_s`, or `most_s` has passed: an
        index made meanwhile holds up the request calling (the engine holds the GIL),
        and a store in constant use still gets its indexes within seconds."""
        deadline = time.monotonic() + most_s
        while time.monotonic() < deadline and not self._closing:
            seen = self._last_call
            await asyncio.sleep(gap_s)
            if not self._calls_in_flight and self._last_call == seen:
                return

    async def _complete_then_optimize(self) -> None:
        await self._complete_indexes(patient=False)
        if not self._closing:
            await self.optimize()

    async def _optimize_after_writes(self) -> None:
        while True:
            await self._dirty.wait()
            waited = await self._until_quiet()
            self._dirty.clear()
            log.info("optimizing the store after %.0f s of waiting for quiet", waited)
            self._optimizing = asyncio.ensure_future(self._complete_then_optimize())
            try:
                await asyncio.shield(self._optimizing)
            except StoreUnavailable:
                log.exception("background optimize failed")

    async def _until_quiet(self) -> float:
        """Returns, with the seconds it took, once nothing has been in flight for
        `optimize_interval_s`."""
        started = time.monotonic()
        wait = self.optimize_interval_s
        while wait > 0:
            await asyncio.sleep(wait)
            wait = self.optimize_interval_s - self._quiet_for()
        return time.monotonic() - started

    def _quiet_for(self) -> float:
        if self._server_quiet_for is not None:
            # Every store call a server makes is inside a request it counts (and its
            # readiness probe's ping inside one it does not).
            return self._server_quiet_for()
        return 0.0 if self._calls_in_flight else time.monotonic() - self._last_call

    async def _run(self, fn: Any, *args: Any) -> Any:
        """`fn(*args)` in a worker thread, counted as a write (`_unwritten`); engine
        errors become StoreUnavailable."""
        return await self._engine(self._write, (fn, *args), in_thread=True)

    def _write(self, fn: Any, *args: Any) -> Any:
        """`fn(*args)`, counted where it begins and where it ends, on its own thread."""
        self._writes_begun += 1
        try:
            return fn(*args)
        finally:
            self._writes_done += 1

    async def _read(self, fn: Any, *args: Any) -> Any:
        """`fn(*args)` on the event loop's own thread: a read. The engine holds the GIL
        for the whole of a call (bench/edge_gil.py shows it), so a worker thread lets
        nothing else run meanwhile and costs its hop (the submit, the wake-up, the
        loop's self-pipe): docs/performance.md, round five. Writes, flushes, facets
        and the optimizer stay in a thread: not measured, and some run long."""
        return await self._engine(fn, args, in_thread=False)

    async def _engine(self, fn: Any, args: tuple[Any, ...], *, in_thread: bool) -> Any:
        """`fn(*args)`, in a worker thread or not; engine errors become
        StoreUnavailable."""
        self._calls_in_flight += 1
        try:
            if in_thread:
                return await asyncio.to_thread(fn, *args)
            return fn(*args)
        except StoreUnavailable:
            raise
        except Exception as exc:
            raise StoreUnavailable(str(exc)) from exc
        except BaseException as exc:
            # A panic inside the engine surfaces as pyo3's PanicException, a
            # BaseException: answer 503, not 500 (inputs known to cause one are refused
            # before they get here). Cancellation and exits pass through.
            if type(exc).__name__ != "PanicException":
                raise
            raise StoreUnavailable(f"engine panic: {exc}") from exc
        finally:
            self._calls_in_flight -= 1
            self._last_call = time.monotonic()


def _search_params(tuning: Search, exact: bool) -> qe.SearchParams | None:
    """Exact, or a walk with the configured beam (None: the engine's own)."""
    if not exact and tuning.hnsw_ef is None:
        return None
    return qe.SearchParams(hnsw_ef=tuning.hnsw_ef, exact=exact)


def _found(points: list[Any], names: frozenset[str]) -> list[Found]:
    """The records among the points a query, scroll or retrieve returned."""
    found = []
    for point in points:
        record = Stored.from_payload(point.payload, getattr(point, "score", None))
        if record is not None:
            vectors = probes.vectors_out(point.vector, names)
            found.append(Found(record, vectors, point.order_value))
    return found


def edge_config(index: IndexSpec, threads: int | None = None) -> qe.EdgeConfig:
    """The whose shard: the dense vector (unnamed) and the lexical one, scored as
    stored: no IDF modifier, which would weigh every term by the other records
    (store/hybrid.py). `threads`: its search threads (None: the engine's default)."""
    return qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=index.dim, distance=qe.Distance.Cosine),
        sparse_vectors={LEXICAL: qe.EdgeSparseVectorParams()},
        max_search_threads=threads,
    )


_Index = (
    qe.PayloadSchemaType
    | qe.KeywordIndexParams
    | qe.DatetimeIndexParams
    | qe.FloatIndexParams
    | qe.TextIndexParams
)
# A stack's own index (store/stacks.py), in the engine's types.
_EDGE_SCHEMA = {
    qm.PayloadSchemaType.KEYWORD: qe.PayloadSchemaType.Keyword,
    qm.PayloadSchemaType.INTEGER: qe.PayloadSchemaType.Integer,
    qm.PayloadSchemaType.FLOAT: qe.PayloadSchemaType.Float,
    qm.PayloadSchemaType.BOOL: qe.PayloadSchemaType.Bool,
    qm.PayloadSchemaType.DATETIME: qe.PayloadSchemaType.Datetime,
    qm.PayloadSchemaType.UUID: qe.PayloadSchemaType.Uuid,
    qm.PayloadSchemaType.TEXT: qe.PayloadSchemaType.Text,
}


# The points a stack may hold before the rest of its indexes are made, whatever the
# traffic: all 23 took 0.67 s over 1 000 points of 1536 dimensions (the longest
# 78 ms), 1.2 s over 3 000.
LATE_INDEXES_UNDER = 1_000


def _indexes() -> list[tuple[str, _Index]]:
    indexes: list[tuple[str, _Index]] = [(TENANT_FIELD, qe.KeywordIndexParams(is_tenant=True))]
    for n in KEYWORD_FIELDS:
        indexes.append((n, qe.KeywordIndexParams(enable_hnsw=n in LINKED_FIELDS)))
    for n in DATETIME_FIELDS:
        indexes.append((n, qe.DatetimeIndexParams(enable_hnsw=n in LINKED_FIELDS)))
    for n in FLOAT_FIELDS:
        indexes.append((n, qe.FloatIndexParams(enable_hnsw=n in LINKED_FIELDS)))
    for n in TEXT_FIELDS:
        text = qe.TextIndexParams(
            tokenizer=qe.TokenizerType.Word,
            lowercase=True,
            phrase_matching=True,
            enable_hnsw=n in LINKED_FIELDS,
        )
        indexes.append((n, text))
    return indexes


# By name: the indexes a stack shard is given after it is made.
_INDEXES = dict(_indexes())


def _edge_filter(scope: Scope, exclude: Collection[str]) -> qe.Filter:
    """`to_edge(to_qdrant(scope, exclude))`, built as `to_qdrant` builds it but without
    its intermediate models where they can be skipped: each of the sidecar's own
    conditions is translated once per process (`_edge_condition`), the ids' conditions
    are made in the engine's types directly. Rebuilt on every store call (each round of
    a search), it was a sixth of the loop's time a recall (docs/performance.md, round
    five); tests/unit/test_edge_filter.py holds the two ways equal."""
    try:
        must = [_edge_condition(c) for c in scope.conditions()]
        if scope.caller is not None:
            must.append(to_edge(scope.caller))
        if scope.only is not None:
            must.append(_edge_ids(scope.tenant, scope.only))
        must_not: list[qe.ConditionType] | None = (
            [_edge_ids(scope.tenant, exclude)] if exclude else None
        )
        return qe.Filter(must=must, must_not=must_not)
    except Exception as exc:
        # The proxy's checks (http/qdrant/caller_filter.py) admit only what the engine
        # takes; this is the engine's own word.
        raise FilterRefused("invalid_filter", f"invalid filter: {exc}") from None


def _edge_condition(condition: Condition) -> qe.ConditionType:
    """One of the sidecar's own conditions in the engine's types. The small ones are
    kept: they are values (frozen dataclasses), and an asker's pushdown and the tenant
    recur in every request. Large ones (a chunk of ids, a long list of grants) are
    translated each time rather than held, as are any holding an unhashable value.
    The two of `current_at` change with every request: made in the engine's types at
    once, not through qdrant-client's models (two thirds of a filter's time)."""
    match condition:
        case NotAfter(key, instant):
            return qe.FieldCondition(key, range=qe.RangeDateTime(lte=iso(instant)))
        case EmptyOrAfter(key, instant):
            after = qe.FieldCondition(key, range=qe.RangeDateTime(gt=iso(instant)))
            return qe.Filter(should=[qe.IsEmptyCondition(key), after])
    if _values_in(condition) <= _KEPT_VALUES:
        try:
            return _edge_kept(condition)
        except TypeError:
            pass
    return _edge(condition_to_qdrant(condition))


_KEPT_VALUES = 64


@functools.lru_cache(maxsize=2048)
def _edge_kept(condition: Condition) -> qe.ConditionType:
    return _edge(condition_to_qdrant(condition))


def _values_in(condition: Condition) -> int:
    match condition:
        case AnyOf(_, values) | AbsentOrAnyOf(_, values) | Exactly(_, values):
            return len(values)
        case Either(alternatives):
            return sum(_values_in(c) for alt in alternatives for c in alt)
    return 1


def _edge_ids(tenant: str, record_ids: Collection[str]) -> qe.HasIdCondition:
    return qe.HasIdCondition({point_id(tenant, rid) for rid in record_ids})


def to_edge(flt: qm.Filter) -> qe.Filter:
    """A Qdrant filter (qdrant-client's models, see store/scope.py) in the engine's types."""
    min_should = None
    if flt.min_should is not None:
        conditions = [_edge(c) for c in flt.min_should.conditions]
        min_should = qe.MinShould(conditions, flt.min_should.min_count)
    return qe.Filter(
        must=[_edge(c) for c in _listed(flt.must)] or None,
        should=[_edge(c) for c in _listed(flt.should)] or None,
        must_not=[_edge(c) for c in _listed(flt.must_not)] or None,
        min_should=min_should,
    )


def _listed(conditions: Any) -> list[Any]:
    if conditions is None:
        return []
    return conditions if isinstance(conditions, list) else [conditions]


def _edge(condition: Any) -> qe.ConditionType:
    match condition:
        case qm.Filter():
            return to_edge(condition)
        case qm.FieldCondition():
            return _edge_field(condition)
        case qm.IsEmptyCondition():
            return qe.IsEmptyCondition(condition.is_empty.key)
        case qm.IsNullCondition():
            return qe.IsNullCondition(condition.is_null.key)
        case qm.HasIdCondition():
            return qe.HasIdCondition({str(i) for i in condition.has_id})
        case qm.NestedCondition():
            return qe.NestedCondition(condition.nested.key, to_edge(condition.nested.filter))
    raise TypeError(f"no engine equivalent for {type(condition).__name__}")


def _edge_field(condition: qm.FieldCondition) -> qe.FieldCondition:
    values_count = None
    if condition.values_count is not None:
        vc = condition.values_count
        values_count = qe.ValuesCount(lt=vc.lt, gt=vc.gt, lte=vc.lte, gte=vc.gte)
    return qe.FieldCondition(
        condition.key,
        match=_edge_match(condition.match),
        range=_edge_range(condition.range),
        values_count=values_count,
        is_empty=condition.is_empty,
        is_null=condition.is_null,
    )


def _edge_match(match: Any) -> Any:
    match match:
        case None:
            return None
        case qm.MatchValue():
            return qe.MatchValue(match.value)
        case qm.MatchAny():
            return qe.MatchAny(match.any)
        case qm.MatchExcept():
            return qe.MatchExcept(match.except_)
        case qm.MatchText():
            return qe.MatchText(match.text)
        case qm.MatchPhrase():
            return qe.MatchPhrase(match.phrase)
        case qm.MatchTextAny():
            return qe.MatchTextAny(match.text_any)
    raise TypeError(f"no engine equivalent for {type(match).__name__}")


def _edge_range(bounds: Any) -> Any:
    match bounds:
        case None:
            return None
        case qm.DatetimeRange():
            return qe.RangeDateTime(
                gte=_instant(bounds.gte),
                gt=_instant(bounds.gt),
                lte=_instant(bounds.lte),
                lt=_instant(bounds.lt),
            )
        case qm.Range():
            return qe.RangeFloat(gte=bounds.gte, gt=bounds.gt, lte=bounds.lte, lt=bounds.lt)
    raise TypeError(f"no engine equivalent for {type(bounds).__name__}")


def _instant(value: Any) -> str | None:
    # http/qdrant/caller_filter.py gives every bound as a UTC datetime.
    return None if value is None else iso(value)
