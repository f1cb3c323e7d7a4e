"""A Qdrant query, read and checked before anything is asked of the store.

`plan` turns a `QueryRequest` (qdrant-client's model) into a tree of `Node`s the
engine evaluates (reads/query/engine.py): each input vector checked against the
collection's schema, each filter through the collection's `check_filter`, each kind
the engine does not serve refused by name, and the whole request held to the bounds
(`Bounds`, WHOSE_QUERY_*). Pure: no I/O, and nothing here depends on what is stored.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from qdrant_client.http import models as qm

from sidecar.errors import QueryRefused, QueryTooCostly
from sidecar.reads.query.collection import PointId, Schema
from sidecar.reads.query.scoring import DEFAULT_RRF_K
from sidecar.record import has_usable_length, uuid_text
from sidecar.store.probes import Vector

DEFAULT_LIMIT = 10
RANGE_INDEXES = (
    qm.PayloadSchemaType.INTEGER,
    qm.PayloadSchemaType.FLOAT,
    qm.PayloadSchemaType.DATETIME,
)


@dataclass(frozen=True)
class Bounds:
    """What one request may ask (settings.py, WHOSE_QUERY_*)."""

    max_depth: int = 4
    max_prefetches: int = 16
    max_level_limit: int = 1000
    max_limit: int = 100
    max_candidates: int = 5000
    max_examples: int = 64
    max_batch: int = 16
    max_groups: int = 100
    max_group_size: int = 100
    max_facet_limit: int = 1000
    max_facet_scan: int = 10_000
    max_count_scan: int = 10_000


@dataclass(frozen=True)
class Example:
    """A query's input: a vector as sent, or the id of a point whose vector it is."""

    vector: Vector | None = None
    point: PointId | None = None


@dataclass(frozen=True)
class Near:
    example: Example


@dataclass(frozen=True)
class Recommend:
    strategy: Literal["average_vector", "best_score", "sum_scores"]
    positive: tuple[Example, ...]
    negative: tuple[Example, ...]


@dataclass(frozen=True)
class Discover:
    target: Example
    pairs: tuple[tuple[Example, Example], ...]


@dataclass(frozen=True)
class Context:
    pairs: tuple[tuple[Example, Example], ...]


@dataclass(frozen=True)
class Mmr:
    example: Example
    diversity: float | None
    candidates_limit: int


@dataclass(frozen=True)
class Fuse:
    method: Literal["rrf", "dbsf"]
    k: int = DEFAULT_RRF_K
    weights: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Order:
    order_by: qm.OrderBy


Kind = Near | Recommend | Discover | Context | Mmr | Fuse | Order


@dataclass(frozen=True)
class Node:
    """One level of a query: the root, or a prefetch."""

    prefetches: tuple[Node, ...]
    query: Kind | None
    using: str
    filter: qm.Filter | None
    score_threshold: float | None
    limit: int
    lookup_from: qm.LookupLocation | None

    @property
    def examples(self) -> list[Example]:
        match self.query:
            case Near(e) | Mmr(e, _, _):
                return [e]
            case Recommend(_, positive, negative):
                return [*positive, *negative]
            case Discover(target, pairs):
                return [target, *(e for pair in pairs for e in pair)]
            case Context(pairs):
                return [e for pair in pairs for e in pair]
        return []


@dataclass(frozen=True)
class Plan:
    root: Node
    offset: int
    with_vector: frozenset[str]
    # What the request may examine in all, by the plan's own sizes: checked against
    # Bounds.max_candidates before anything runs.
    cost: int


Check = Callable[[qm.Filter], qm.Filter]


def refused(message: str) -> QueryRefused:
    return QueryRefused("bad_request", message)


def unsupported(what: str) -> QueryRefused:
    return QueryRefused("unsupported", f"not supported by whose: {what}")


def too_costly(bound: str, message: str) -> QueryTooCostly:
    return QueryTooCostly(bound, message)


def plan(
    request: qm.QueryRequest | qm.QueryGroupsRequest,
    schema: Schema,
    check: Check,
    bounds: Bounds,
    *,
    limit_factor: int = 1,
    root_limit: int | None = None,
) -> Plan:
    """The checked plan of a query. A grouped query's (reads/query/groups.py) fetches
    `root_limit` points (groups times group size) and multiplies every prefetch's limit by
    `limit_factor` (the group size), as Qdrant does."""
    if request.shard_key is not None:
        raise unsupported("shard_key")
    offset = getattr(request, "offset", None) or 0
    limit = DEFAULT_LIMIT if request.limit is None else request.limit
    if limit < 1 or offset < 0:
        raise refused(
            "Validation error in JSON body: limit must be 1 or larger, offset 0 or larger"
        )
    if isinstance(request, qm.QueryRequest) and limit + offset > bounds.max_limit:
        raise too_costly("limit", f"limit + offset may be at most {bounds.max_limit}")
    counter = _Counter()
    root = _node(request, schema, check, bounds, counter, depth=0, factor=limit_factor)
    if root_limit is not None:
        root = replace(root, limit=root_limit)
    if counter.examples > bounds.max_examples:
        raise too_costly(
            "examples", f"a query may use at most {bounds.max_examples} vectors and ids as examples"
        )
    with_vector = vector_names(request.with_vector, schema)
    cost = _cost(root, offset)
    if cost > bounds.max_candidates:
        raise too_costly(
            "candidates",
            f"this query would examine at least {cost} candidates; at most "
            f"{bounds.max_candidates} are allowed (lower the limits of its prefetches)",
        )
    return Plan(root, offset, with_vector, cost)


@dataclass
class _Counter:
    nodes: int = 0
    examples: int = 0


def _node(
    raw: qm.QueryRequest | qm.QueryGroupsRequest | qm.Prefetch,
    schema: Schema,
    check: Check,
    bounds: Bounds,
    counter: _Counter,
    depth: int,
    factor: int,
) -> Node:
    if depth > bounds.max_depth:
        raise too_costly("prefetch_depth", f"prefetches nest at most {bounds.max_depth} deep")
    if depth > 0:
        counter.nodes += 1
        if counter.nodes > bounds.max_prefetches:
            raise too_costly(
                "prefetches", f"a query may hold at most {bounds.max_prefetches} prefetches"
            )
    own = DEFAULT_LIMIT if raw.limit is None else raw.limit
    limit = own
    if depth > 0:
        if limit < 1:
            raise refused("Validation error in JSON body: prefetch limit must be 1 or larger")
        limit *= factor
        if limit > bounds.max_level_limit:
            raise too_costly(
                "level_limit", f"a prefetch's limit may be at most {bounds.max_level_limit}"
            )
    raw_prefetches = raw.prefetch
    if raw_prefetches is None:
        listed: list[qm.Prefetch] = []
    elif isinstance(raw_prefetches, list):
        listed = raw_prefetches
    else:
        listed = [raw_prefetches]
    prefetches = tuple(_node(p, schema, check, bounds, counter, depth + 1, factor) for p in listed)
    using = raw.using or ""
    # MMR's candidates default to the level's own limit (before a grouping multiplies it).
    query = _kind(raw.query, own, bounds)
    _validate(query, using, prefetches, raw.score_threshold, schema)
    counter.examples += len(Node((), query, using, None, None, 0, None).examples)
    flt = None if raw.filter is None else check(raw.filter)
    return Node(prefetches, query, using, flt, raw.score_threshold, limit, raw.lookup_from)


def _kind(raw: Any, limit: int, bounds: Bounds) -> Kind | None:
    """The query's kind, its inputs parsed (vectors and point ids), the unsupported
    ones refused by name."""
    match raw:
        case None:
            return None
        case qm.NearestQuery(nearest=nearest, mmr=None):
            return Near(example(nearest))
        case qm.NearestQuery(nearest=nearest, mmr=mmr) if mmr is not None:
            diversity = mmr.diversity
            if diversity is not None and not 0.0 <= diversity <= 1.0:
                raise refused("Validation error in JSON body: mmr.diversity must be in [0, 1]")
            candidates = limit if mmr.candidates_limit is None else mmr.candidates_limit
            if candidates < 1:
                raise refused(
                    "Validation error in JSON body: mmr.candidates_limit must be 1 or larger"
                )
            if candidates > bounds.max_level_limit:
                raise too_costly(
                    "level_limit", f"mmr.candidates_limit may be at most {bounds.max_level_limit}"
                )
            return Mmr(example(nearest), diversity, candidates)
        case qm.RecommendQuery(recommend=reco):
            strategy: Literal["average_vector", "best_score", "sum_scores"] = "average_vector"
            if reco.strategy == qm.RecommendStrategy.BEST_SCORE:
                strategy = "best_score"
            elif reco.strategy == qm.RecommendStrategy.SUM_SCORES:
                strategy = "sum_scores"
            positive = tuple(example(e) for e in reco.positive or [])
            negative = tuple(example(e) for e in reco.negative or [])
            if strategy == "average_vector" and not positive:
                raise refused(
                    "Wrong input: Positive vectors should not be empty with `average` strategy"
                )
            if not positive and not negative:
                raise refused(
                    "Validation error in JSON body: At least one positive or negative vector/id "
                    "must be provided"
                )
            return Recommend(strategy, positive, negative)
        case qm.DiscoverQuery(discover=discover):
            return Discover(example(discover.target), _pairs(discover.context))
        case qm.ContextQuery(context=context):
            return Context(_pairs(context))
        case qm.FusionQuery(fusion=fusion):
            return Fuse("rrf" if fusion == qm.Fusion.RRF else "dbsf")
        case qm.RrfQuery(rrf=rrf):
            weights = None if rrf.weights is None else tuple(rrf.weights)
            if weights is not None and not all(math.isfinite(w) for w in weights):
                raise refused("Wrong input: RRF weights must be finite numbers")
            return Fuse("rrf", DEFAULT_RRF_K if rrf.k is None else rrf.k, weights)
        case qm.OrderByQuery(order_by=order_by):
            return Order(qm.OrderBy(key=order_by) if isinstance(order_by, str) else order_by)
        case qm.FormulaQuery():
            raise unsupported("formula (score boosting) queries")
        case qm.SampleQuery():
            raise unsupported("sample (random) queries")
        case qm.RelevanceFeedbackQuery():
            raise unsupported("relevance feedback queries")
        case qm.TextQuery():
            raise unsupported("text (BM25 over a text index) queries")
    return Near(example(raw))


def _pairs(
    raw: qm.ContextPair | list[qm.ContextPair] | None,
) -> tuple[tuple[Example, Example], ...]:
    listed = [] if raw is None else raw if isinstance(raw, list) else [raw]
    return tuple((example(p.positive), example(p.negative)) for p in listed)


def example(raw: Any) -> Example:
    """A vector input: a dense or sparse vector, or a point id."""
    if isinstance(raw, bool):
        raise refused("Format error in JSON body: not a vector or a point id")
    if isinstance(raw, int):
        if raw < 0:
            raise refused("Format error in JSON body: point ids are unsigned integers or UUIDs")
        return Example(point=raw)
    if isinstance(raw, str | uuid.UUID):
        return Example(point=canonical_id(raw))
    if isinstance(raw, qm.SparseVector):
        return Example(vector=_sparse(raw))
    if isinstance(raw, list) and raw and all(isinstance(x, list) for x in raw):
        raise unsupported("multivectors")
    if isinstance(raw, list):
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in raw):
            raise refused("Format error in JSON body: a vector is a list of numbers")
        if not all(math.isfinite(x) for x in raw):
            raise refused("Wrong input: vector values must be finite numbers")
        if not has_usable_length([float(x) for x in raw]):
            # Its length overflows (or underflows) Qdrant's 32-bit floats: every score
            # would be NaN or 0, whatever the points.
            raise refused("Wrong input: vector length must be non-zero and finite")
        return Example(vector=[float(x) for x in raw])
    if isinstance(raw, qm.Document | qm.Image | qm.InferenceObject):
        raise unsupported("inference (documents, images, objects embedded by the server)")
    raise refused("Format error in JSON body: not a vector or a point id")


def canonical_id(raw: str | uuid.UUID | int) -> PointId:
    if isinstance(raw, int):
        return raw
    try:
        return uuid_text(raw)
    except ValueError:
        raise refused(f"Format error in JSON body: unable to parse UUID: {raw}") from None


def _sparse(vector: qm.SparseVector) -> qm.SparseVector:
    if len(vector.indices) != len(vector.values):
        raise refused("Wrong input: sparse vector indices and values differ in length")
    if len(set(vector.indices)) != len(vector.indices):
        raise refused("Wrong input: sparse vector indices must be unique")
    if any(i < 0 or i >= 2**32 for i in vector.indices):
        raise refused("Wrong input: sparse vector indices are unsigned 32-bit integers")
    if not all(math.isfinite(v) for v in vector.values):
        raise refused("Wrong input: vector values must be finite numbers")
    pairs = sorted(zip(vector.indices, vector.values, strict=True))
    return qm.SparseVector(indices=[i for i, _ in pairs], values=[v for _, v in pairs])


def _validate(
    query: Kind | None,
    using: str,
    prefetches: tuple[Node, ...],
    score_threshold: float | None,
    schema: Schema,
) -> None:
    """Qdrant's own checks of one level (collection_query.rs `validation`, the planner)."""
    if prefetches and query is None:
        raise refused(
            "A query is needed to merge the prefetches. Can't have prefetches without "
            "defining a query."
        )
    if score_threshold is not None:
        if not math.isfinite(score_threshold):
            raise refused("Wrong input: score_threshold must be a finite number")
        if isinstance(query, Order):
            raise refused("Can't use score_threshold with an order_by query.")
        if query is None:
            raise refused(
                "A query is needed to use the score_threshold. Can't have score_threshold "
                "without defining a query."
            )
    if isinstance(query, Fuse):
        if using:
            raise refused("Fusion queries cannot be combined with the 'using' field.")
        if not prefetches:
            raise refused("Wrong input: Validation failed: cannot apply Fusion without prefetches")
        if query.weights is not None and len(query.weights) != len(prefetches):
            raise refused(
                "Wrong input: Number of weights in RRF should match number of pre-fetches: "
                f"got {len(query.weights)}, expected {len(prefetches)}"
            )
        return
    if isinstance(query, Order):
        key = query.order_by.key
        if schema.indexes.get(key) not in RANGE_INDEXES:
            raise refused(
                f"Wrong input: No range index for `order_by` key: `{key}`. Please create one "
                "to use `order_by`."
            )
        return
    if query is None:
        return
    if not schema.has_vector(using):
        raise refused(f"Wrong input: Not existing vector name error: {using}")
    node = Node((), query, using, None, None, 0, None)
    for given in node.examples:
        if given.vector is not None:
            check_vector(given.vector, using, schema)
    if isinstance(query, Recommend):
        kinds = {
            isinstance(e.vector, qm.SparseVector) for e in node.examples if e.vector is not None
        }
        if len(kinds) > 1:
            raise refused("Wrong input: Can't average vectors with different types")


def check_vector(vector: Vector, using: str, schema: Schema) -> None:
    """A vector fits the named vector it is compared with."""
    if isinstance(vector, qm.SparseVector):
        if using not in schema.sparse:
            raise refused(
                f"Wrong input: Conversion between sparse and regular vectors failed ({using})"
            )
        return
    space = schema.dense.get(using)
    if space is None:
        raise refused(
            f"Wrong input: Conversion between sparse and regular vectors failed ({using})"
        )
    if len(vector) != space.size:
        raise refused(
            f"Wrong input: Vector dimension error: expected dim: {space.size}, got {len(vector)}"
        )


def vector_names(raw: qm.WithVector | None, schema: Schema) -> frozenset[str]:
    """The vectors a request asks to have returned."""
    if raw is None or raw is False:
        return frozenset()
    if raw is True:
        return frozenset(schema.dense) | schema.sparse
    for name in raw:
        if not schema.has_vector(name):
            raise refused(f"Wrong input: Not existing vector name error: {name}")
    return frozenset(raw)


def _cost(node: Node, offset: int, root: bool = True) -> int:
    """The fewest candidates a level examines: what each leaf fetches, and what each
    rescoring search over its prefetches' union returns."""
    if not node.prefetches:
        wanted = node.query.candidates_limit if isinstance(node.query, Mmr) else node.limit
        return wanted + offset
    inner = sum(_cost(p, 0, root=False) for p in node.prefetches)
    match node.query:
        case Fuse():
            return inner
        case Mmr(_, _, candidates):
            # At the root a nearest rescoring picks the candidates; nested, MMR runs over
            # the prefetches' points as they are.
            return inner + (min(inner, candidates) if root else 0)
    return inner + min(inner, node.limit + offset)
