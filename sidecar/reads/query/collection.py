"""The leaf-search interface: what the query engine asks of one collection.

The engine (reads/query/engine.py) evaluates Qdrant's Query API; everything it reads
comes through a `Collection`, one per request, bound to the question (asker,
audience, purpose) and holding its disclosure (reads/gate.py). A `Collection` answers
four things, each over *disclosable points only*:

- `search`: the `limit` best points by a probe (store/probes.py: nearest, recommend,
  discover, context, each example a vector) on one named vector, within a `Where`;
- `scroll`: points within a `Where` in the collection's id order (a page and where the
  next one starts), or by a payload field's value (`order_by`);
- `retrieve`: points by id (purpose `get`): an id the asker may not see is missing,
  exactly as one that does not exist; also how the engine fetches the vectors of points
  it has already shown (with_vector, MMR, an id used as a query);
- `schema` and `check_filter`: what it holds and how it runs a caller's filter.

Guarantees every implementation gives (the engine's correctness and noninterference
rest on them; docs/design.md, "The query engine"):

1. Every hit is decided by the disclosure gate for this request's question and allowed;
   nothing else comes back, and nothing about a point that is not allowed changes an
   answer (which points, their scores, their order, what `truncated` says), except
   through the bounds under an inexact pushdown (docs/security.md, "Pushdown off").
2. `search` returns the `limit` best allowed points of all the collection holds within
   the `Where` (ties in `point_order` of their ids), best first: largest score first,
   smallest for a nearest probe on a Euclid or Manhattan vector. It over-fetches in
   rounds, excluding what it has seen, until `limit` are allowed and no tie straddles
   the cut, or the candidates run out (reads/reader.py `Reader.rounds`). When its
   candidates cap (or the budget) stops it, the allowed points tied with the last
   candidate it fetched are left out whole: the store chose which of them it returned.
3. A hit's score is a function of the point and the probe alone: the collection's
   distance, or Qdrant's recommend/discover/context score of its vector. (A sparse
   vector with Qdrant's `idf` modifier is not: its weights count other points. Such a
   vector is refused at creation or searched without the modifier.)
4. Every `Where` condition holds, each filter under `must` (never merged into a
   caller's `should`), with the collection's own scope (tenant, policy pushdown).
5. Each call spends at most `budget.left` candidates (examined, i.e. decided) and
   charges what it spent; when the budget stops it, it sets `budget.truncated`.
6. Ids are as the caller sees them: an unsigned integer, or a UUID as a lowercase
   hyphenated string.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from qdrant_client.http import models as qm

from sidecar.store.probes import Probe, Vector

T = TypeVar("T")

# A point id as the caller sees it: an unsigned integer or a canonical UUID string.
PointId = int | str


def point_order(point: PointId) -> tuple[int, int, str]:
    """The tie rule's order of ids: integers first, by value; then UUIDs (whose
    canonical strings sort as their 128-bit values)."""
    if isinstance(point, int):
        return (0, point, "")
    return (1, 0, point)


@dataclass(frozen=True)
class Dense:
    size: int
    distance: qm.Distance


@dataclass(frozen=True)
class Schema:
    """What a collection holds: its dense vectors by name ("" the unnamed one), its
    sparse vectors, and its payload indexes (key → Qdrant's schema type)."""

    dense: Mapping[str, Dense]
    sparse: frozenset[str]
    indexes: Mapping[str, qm.PayloadSchemaType]

    def has_vector(self, name: str) -> bool:
        return name in self.dense or name in self.sparse

    def smaller_better(self, name: str) -> bool:
        space = self.dense.get(name)
        return space is not None and space.distance in (qm.Distance.EUCLID, qm.Distance.MANHATTAN)


@dataclass(frozen=True)
class Where:
    """Where a leaf looks, on top of the collection's own scope. All of it holds:

    - `filters`: the caller's filters on the path from the query's root to this leaf,
      each as `check_filter` returned it, all under `must`;
    - `only`: if set, just these points (a rescoring stage over its prefetches' union);
    - `exclude`: never these (points used as the query's examples; points a grouping
      already holds);
    - `conditions`: conditions the engine itself made (a grouping's `match any` or
      `match except` on the `group_by` key, and that the key is not empty), run as given.
    """

    filters: tuple[qm.Filter, ...] = ()
    only: frozenset[PointId] | None = None
    exclude: frozenset[PointId] = frozenset()
    conditions: tuple[qm.Condition, ...] = ()


@dataclass
class Budget:
    """The candidates one request may still examine, across all its leaves."""

    left: int
    truncated: bool = False

    def spend(self, examined: int, stopped: bool) -> None:
        self.left = max(0, self.left - examined)
        self.truncated = self.truncated or stopped


@dataclass(frozen=True)
class Hit(Generic[T]):
    """One allowed point: its id, score (a leaf's, or a fusion's), its stored payload
    (what `group_by`, `order_by` and facets read), the named vectors asked for, and
    `item`, what the collection needs to shape it (opaque to the engine)."""

    id: PointId
    score: float
    payload: Mapping[str, Any]
    vectors: Mapping[str, Vector]
    item: T
    order_value: int | float | None = None


@dataclass(frozen=True)
class Page(Generic[T]):
    """A scroll page, and where the next one starts: the collection's own cursor (a
    point id for a Qdrant collection), never a point the asker may not see nor one that
    tells how many such points there are; None at the end."""

    hits: list[Hit[T]]
    next_offset: PointId | None = None
    # A bound stopped the page short (set by scans.scroll from its budget).
    truncated: bool = False


class Collection(Protocol[T]):
    """One collection, as one request's asker and audience may see it."""

    @property
    def name(self) -> str:
        """The collection's name as the caller knows it (`lookup_from` naming it is
        this collection)."""
        ...

    @property
    def schema(self) -> Schema: ...

    def check_filter(self, flt: qm.Filter) -> qm.Filter:
        """The caller's filter as this collection runs it: its cost bounded, its keys
        checked against what the caller is shown, its ids mapped into the tenant.
        Raises FilterRefused (errors.py). Called on every filter of a request before
        anything is asked of the store."""
        ...

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
    ) -> list[Hit[T]]:
        """The `limit` best allowed points by `probe` on the vector `using` (see the
        module's guarantees), with the named `vectors`."""
        ...

    async def scroll(
        self,
        where: Where,
        limit: int,
        *,
        order_by: qm.OrderBy | None,
        offset: PointId | None,
        vectors: frozenset[str],
        budget: Budget,
    ) -> Page[T]:
        """Up to `limit` allowed points within `where`: from `offset` on in id order
        (the collection's), or by `order_by` (then `offset` is None, ties in
        `point_order`, and `next_offset` None, as Qdrant does)."""
        ...

    async def retrieve(self, ids: Sequence[PointId], *, vectors: frozenset[str]) -> list[Hit[T]]:
        """The points asked for that the asker may see (purpose `get`), in the order
        asked, with the named `vectors`; the others are absent."""
        ...


# Resolves another collection of the same tenant by name, for `lookup_from` and
# `with_lookup`, as the same asker sees it: None when there is no such collection
# (or it is one the caller may not see), which answers as Qdrant's missing collection.
Lookup = Callable[[str], Awaitable["Collection[T] | None"]]
