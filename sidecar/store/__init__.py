"""The store: one interface over Qdrant, two backends (in-process edge, server).

Every query is limited by a `Scope` (sidecar/store/scope.py), which cannot be built
without a tenant, and nothing else is trusted to the filter: the policy decides
every record that comes back. Records come back typed (`Stored`, record.py);
a payload that is not a record is left out.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any, Protocol
from uuid import UUID

from qdrant_client.http import models as qm

from sidecar.errors import StoreUnavailable as StoreUnavailable
from sidecar.record import Stored
from sidecar.store import probes
from sidecar.store.layout import VectorLayout
from sidecar.store.probes import Probe, Vector
from sidecar.store.scope import Scope

# A point's vectors by name ("" the unnamed dense one), as a writer sent them.
Vectors = dict[str, Vector]


@dataclass(frozen=True)
class Search:
    """How vector searches run, on either backend (WHOSE_SEARCH_*).

    A filtered HNSW search is approximate, and most so when the records the filter
    admits lie far from the query in the graph (an asker who may read only records
    unlike the question): it can miss permitted nearest neighbours. So a search whose
    filter matches at most `exact_below` points (Qdrant's estimate from the payload
    indexes) is exact: the true nearest permitted records, at the cost of scoring each
    of those points. Larger filtered sets use HNSW with beam width `hnsw_ef` (None:
    Qdrant's default); 0 for `exact_below` leaves the choice to Qdrant alone.
    `neighbourhood`: first try the query's own neighbourhood where the filter admits
    more than `neighbourhood_above` points (store/planner.py); a search it cannot
    prove is exact up to `unproven_exact_below` points. `sieve`: an exact search of
    more than `sieve_above` points first scans under the asker's audience alone and
    proves its answer from what that scan found (store/planner.py; the embedded engine
    only). `threads`: the embedded engine's search threads (a Qdrant server has its
    own setting)."""

    exact_below: int = 0
    hnsw_ef: int | None = None
    # Hybrid search: the BM25 share's weight against the dense score (store/hybrid.py).
    lexical_weight: float = 1.0
    neighbourhood: bool = False
    threads: int = 1
    unproven_exact_below: int = 0
    # At or below it, exact search at once: scoring 10 000 points costs about what the
    # neighbourhood and its proof cost at 100k records of 384 dimensions (2 ms in
    # process on the bench machine; 1.4 ms at 10k, where exact search of 9 000 points
    # costs 1.8 ms), and where the asker's points lie far from the query the
    # neighbourhood is paid for nothing (docs/performance.md, round twelve).
    neighbourhood_above: int = 10_000
    sieve: bool = False
    # Above it, an exact search looks through the sieve first: at 10k records an exact
    # search of 2 000 points cost 0.27 ms whole, 0.34 through the sieve, of 9 000
    # 1.04 against 0.79; at 100k, of 5 000, 1.1 against 0.74 (in process, round
    # fifteen in docs/performance.md).
    sieve_above: int = 4_000


@dataclass(frozen=True)
class Page:
    records: list[Stored]
    # Where the next page starts (an opaque point id), or None at the end.
    next_offset: str | None = None


@dataclass(frozen=True)
class Found:
    """A record a probe, an ordered scroll or a fetch found: with the named vectors
    asked for, and (ordered scrolls) the value it was ordered by."""

    record: Stored
    vectors: dict[str, Vector]
    order_value: int | float | None = None


class Store(Protocol):
    @property
    def vectors(self) -> VectorLayout:
        """Which vectors its points carry: the whose collection's (VectorLayout.whose),
        or a stack collection's own (store/stacks.py)."""
        ...

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None: ...

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
        """Nearest records within scope, best first, leaving out the `exclude` record ids.

        By the dense `vector`, by the lexical match of `text` (BM25), or, given both,
        by the two fused (store/hybrid.py): a score that belongs to each record, the
        same in every round of an over-fetch. Paging by exclusion rather than offset:
        with tied scores an offset can skip or repeat records between two queries;
        exclusion cannot.
        """
        ...

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Stored]:
        """Records of this tenant by record id; unknown ids are left out."""
        ...

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
        """Records within scope scored by `probe` (store/probes.py) on the vector named
        `using` (any name of the layout: in the whose collection "" the dense one,
        "lexical" the BM25 one), best first, leaving out the
        `exclude` record ids: the query engine's leaf search (reads/query/)."""
        ...

    async def ordered(
        self,
        scope: Scope,
        limit: int,
        order_by: qm.OrderBy,
        exclude: Collection[str] = (),
        *,
        with_vectors: frozenset[str] = frozenset(),
    ) -> list[Found]:
        """Records within scope in the order of a payload field's value (Qdrant's
        `order_by`: key, direction, start_from), leaving out the `exclude` record ids."""
        ...

    async def fetch(
        self, tenant: str, record_ids: list[UUID], names: frozenset[str]
    ) -> list[Found]:
        """Records of this tenant by record id, with the named vectors in `names`;
        unknown ids are left out."""
        ...

    async def find(
        self, scope: Scope, limit: int, *, offset: str | None = None, with_vector: bool = False
    ) -> Page:
        """Records within scope by filter alone (no vector), in point-id order, a page at a time."""
        ...

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], Vectors]]) -> None:
        """Store records (payload, named vectors as `vectors` lays them out) of one
        tenant in one operation; in the whose collection the store adds each one's
        lexical vector (store/vectors.py)."""
        ...

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        """Set payload fields of one stored record (supersession only; never content)."""
        ...

    async def delete(self, tenant: str, record_ids: list[UUID]) -> None:
        """Remove records of this tenant, vector and payload, in one operation (erasure
        only, writes/eraser.py); unknown ids are ignored."""
        ...

    async def clear(self, tenant: str, record_id: UUID, fields: list[str]) -> None:
        """Remove payload fields of one stored record (links and ends an erasure
        relinks away, writes/relink.py)."""
        ...

    async def tenants(self, limit: int) -> list[str]:
        """Up to `limit` tenants that hold records (the retention sweep walks them)."""
        ...

    async def create_index(self, field: str, schema: qm.PayloadSchemaType) -> None:
        """A payload index on `field` (a stored path; a stack collection's own, see
        store/stacks.py), made now: filters on it stay inside the engine's search."""
        ...

    async def drop_index(self, field: str) -> None:
        """The payload index on `field` removed (none there: nothing to do)."""
        ...


def rescore(found: list[Found], probe: Probe, using: str, wanted: frozenset[str]) -> list[Found]:
    """`found` with the exact score of a sparse nearest probe (store/probes.py
    `rescored_exactly`), best first, and only the vectors `wanted`."""
    if not probes.rescored_exactly(probe):
        return found
    assert isinstance(probe, probes.Nearest)
    assert isinstance(probe.vector, qm.SparseVector)
    rescored = []
    for f in found:
        own = f.vectors.get(using)
        score = probes.sparse_dot(probe.vector, own) if isinstance(own, qm.SparseVector) else 0.0
        vectors = {n: v for n, v in f.vectors.items() if n in wanted}
        rescored.append(Found(replace(f.record, score=score), vectors, f.order_value))
    return sorted(rescored, key=lambda f: -(f.record.score or 0.0))


def records(
    payloads: list[tuple[dict[str, Any] | None, float | None, list[float] | None]],
) -> list[Stored]:
    """The records among what a backend returned (payload, score, vector)."""
    found = [Stored.from_payload(payload, score, vector) for payload, score, vector in payloads]
    return [record for record in found if record is not None]
