"""Scroll, count and facet over disclosable points only.

- `scroll`: a page of allowed points in the collection's id order from `offset`, and
  where the next page starts (never a point the asker may not see, nor one that tells
  how many of those there are: the collection's cursor rule); or by `order_by`, paged
  by `start_from` as in Qdrant (no next offset, no `offset`).
- `count`: the allowed points among those the filter matches. Always exact (Qdrant's
  `exact: false` is an estimate from the indexes, which count every point); bounded:
  it examines at most `max_count_scan` candidates, and past that answers the count
  among those (`truncated`).
- `facet`: for each value of the key, how many allowed points the filter matches hold
  it (each point once per value), the most common first (ties by value), `limit` of
  them. Always exact, so `exact` is accepted and changes nothing; bounded like count by
  `max_facet_scan` examined candidates, past which the counts are among those
  examined (`truncated`). The key needs an index that facets in Qdrant (keyword,
  integer, uuid, bool), and a value counts when it is of the index's type.

Each scans pages of `Collection.scroll`, so what it counts is what the asker may see;
with an exact pushdown the candidates it examines are those too, and where the bound
stops it depends on them alone (docs/security.md, "Pushdown off" for the rest).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from qdrant_client.http import models as qm

from sidecar.reads.query.collection import Budget, Collection, Page, PointId, T, Where
from sidecar.reads.query.paths import values_at
from sidecar.reads.query.plan import (
    DEFAULT_LIMIT,
    RANGE_INDEXES,
    Bounds,
    refused,
    too_costly,
    vector_names,
)

# Points one page of a count or facet scan asks for: each call stays short, so other
# requests are answered between them.
SCAN_PAGE = 250
FACET_INDEXES = (
    qm.PayloadSchemaType.KEYWORD,
    qm.PayloadSchemaType.INTEGER,
    qm.PayloadSchemaType.UUID,
    qm.PayloadSchemaType.BOOL,
)

FacetValue = str | int | bool


@dataclass(frozen=True)
class Counted:
    count: int
    truncated: bool = False


@dataclass(frozen=True)
class FacetHit:
    value: FacetValue
    count: int


@dataclass(frozen=True)
class Faceted:
    hits: list[FacetHit]
    truncated: bool = False


@dataclass
class _Scan:
    budget: Budget
    cursor: PointId | None = None
    done: bool = False
    seen: int = field(default=0)


async def scroll(collection: Collection[T], request: qm.ScrollRequest, bounds: Bounds) -> Page[T]:
    limit = DEFAULT_LIMIT if request.limit is None else request.limit
    if limit < 1:
        raise refused("Validation error in JSON body: limit must be 1 or larger")
    if request.shard_key is not None:
        raise refused("not supported by whose: shard_key")
    order_by = request.order_by
    if isinstance(order_by, str):
        order_by = qm.OrderBy(key=order_by)
    if limit > bounds.max_limit:
        if order_by is not None:
            # An ordered scroll has no next page to say where the rest begins.
            raise too_costly("limit", f"limit may be at most {bounds.max_limit}")
        # A page may be shorter than asked: the next page offset says where the rest
        # begins, and clients page on it (Haystack scrolls 10,000 at a time).
        limit = bounds.max_limit
    if order_by is not None:
        if request.offset is not None:
            raise refused(
                "Wrong input: Cannot use an `offset` when using `order_by`. The alternative "
                "for paging is to use `order_by.start_from` and a filter to exclude the IDs "
                "that you've already seen for the `order_by.start_from` value"
            )
        if collection.schema.indexes.get(order_by.key) not in RANGE_INDEXES:
            raise refused(
                f"Wrong input: No range index for `order_by` key: `{order_by.key}`. Please "
                "create one to use `order_by`."
            )
    names = vector_names(request.with_vector, collection.schema)
    where = _where(collection, request.filter)
    offset = None if request.offset is None else _cursor(request.offset)
    budget = Budget(bounds.max_candidates)
    page = await collection.scroll(
        where, limit, order_by=order_by, offset=offset, vectors=names, budget=budget
    )
    if names and any(not names <= h.vectors.keys() for h in page.hits):
        ids = [h.id for h in page.hits]
        fetched = {h.id: h for h in await collection.retrieve(ids, vectors=names)}
        hits = [replace(h, vectors=fetched[h.id].vectors) for h in page.hits if h.id in fetched]
        page = Page(hits, page.next_offset)
    return replace(page, truncated=budget.truncated)


async def count(collection: Collection[T], request: qm.CountRequest, bounds: Bounds) -> Counted:
    where = _where(collection, request.filter)
    scan = _Scan(Budget(bounds.max_count_scan))
    counted = 0
    while not scan.done:
        counted += len(await _next(collection, where, scan))
    return Counted(counted, scan.budget.truncated)


async def facet(collection: Collection[T], request: qm.FacetRequest, bounds: Bounds) -> Faceted:
    key = request.key
    index = collection.schema.indexes.get(key)
    if index not in FACET_INDEXES:
        raise refused(
            f"Wrong input: No appropriate index for faceting: `{key}`. Please create one to "
            "facet on this field."
        )
    limit = DEFAULT_LIMIT if request.limit is None else request.limit
    if limit < 1:
        raise refused("Validation error in JSON body: limit must be 1 or larger")
    if limit > bounds.max_facet_limit:
        raise too_costly(
            "facet_limit", f"a facet may return at most {bounds.max_facet_limit} values"
        )
    if request.shard_key is not None:
        raise refused("not supported by whose: shard_key")
    where = _where(collection, request.filter)
    scan = _Scan(Budget(bounds.max_facet_scan))
    counts: dict[FacetValue, int] = {}
    while not scan.done:
        for hit in await _next(collection, where, scan):
            for value in _facet_values(values_at(hit.payload, key), index):
                counts[value] = counts.get(value, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], _value_order(item[0])))
    return Faceted([FacetHit(v, n) for v, n in ranked[:limit]], scan.budget.truncated)


async def _next(collection: Collection[T], where: Where, scan: _Scan) -> list[Any]:
    page = await collection.scroll(
        where,
        SCAN_PAGE,
        order_by=None,
        offset=scan.cursor,
        vectors=frozenset(),
        budget=scan.budget,
    )
    scan.cursor = page.next_offset
    scan.done = page.next_offset is None or scan.budget.left <= 0
    return page.hits


def _facet_values(values: list[Any], index: qm.PayloadSchemaType | None) -> set[FacetValue]:
    """The values an index of this type facets on, each once per point."""
    kept: set[FacetValue] = set()
    for value in values:
        if (
            (index == qm.PayloadSchemaType.BOOL and isinstance(value, bool))
            or (
                index == qm.PayloadSchemaType.INTEGER
                and isinstance(value, int)
                and not isinstance(value, bool)
            )
            or (
                index in (qm.PayloadSchemaType.KEYWORD, qm.PayloadSchemaType.UUID)
                and isinstance(value, str)
            )
        ):
            kept.add(value)
    return kept


def _value_order(value: FacetValue) -> tuple[int, float, str]:
    if isinstance(value, bool):
        return (2, float(value), "")
    if isinstance(value, int):
        return (1, float(value), "")
    return (0, 0.0, value)


def _where(collection: Collection[T], flt: qm.Filter | None) -> Where:
    return Where(() if flt is None else (collection.check_filter(flt),))


def _cursor(raw: Any) -> PointId:
    if isinstance(raw, int):
        return raw
    return str(raw)
