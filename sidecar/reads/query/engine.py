"""Qdrant's Query API evaluated over disclosable points only.

A request is planned and checked first (reads/query/plan.py: the schema, every filter,
the bounds), before anything is asked of the store. Then it is evaluated as Qdrant's
planner does (lib/shard/src/query/planned_query.rs and the local shard's merge, 1.18),
with one difference that is the point: every leaf is a `Collection` search or scroll,
which returns only points the asker and audience may see (reads/query/collection.py),
and everything above the leaves (rescoring, fusion, MMR, offsets) is computed here from
what the leaves returned. So a point the asker may not see is in no branch, takes no
rank, shifts no fusion score, is no MMR candidate, and counts in no limit.

How each level is computed (Qdrant's semantics, docs/design.md "The query engine"):

- a level without prefetches is a leaf: no query, a scroll in id order (score 1.0); a
  vector query (nearest, recommend, discover, context), a search by its probe; order_by,
  a scroll by the field (score 1.0); MMR, the nearest `candidates_limit` (and at the
  root, MMR's choice of `limit` among them);
- a level with prefetches evaluates them, each under its own and every enclosing
  filter (all under `must`), and then: a vector query rescores their union (a search
  restricted to those points); order_by scrolls the union by the field; fusion (RRF,
  DBSF) fuses the lists, each as its prefetch ranked it; MMR at the root rescores the
  union by nearest to its `candidates_limit` and chooses `limit`, nested it chooses
  `limit` among the union as it is;
- at the root, the first `offset` are skipped (fusion and MMR: of their `limit`, as
  Qdrant does), `score_threshold` keeps what scores at least as much (or, for a
  distance, at most), and ids used as examples are left out of every leaf (unless
  looked up in another collection).

Ties are broken by id (`point_order`), wherever a list is ranked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Generic

from qdrant_client.http import models as qm

from sidecar.errors import QueryMissing
from sidecar.reads.query import scoring
from sidecar.reads.query.collection import (
    Budget,
    Collection,
    Hit,
    Lookup,
    PointId,
    T,
    Where,
)
from sidecar.reads.query.plan import (
    Bounds,
    Context,
    Discover,
    Example,
    Fuse,
    Mmr,
    Near,
    Node,
    Order,
    Plan,
    Recommend,
    check_vector,
    plan,
    too_costly,
)
from sidecar.store import probes
from sidecar.store.probes import Probe, Vector

# A scroll's points (no query, order_by) score this, as in Qdrant.
UNSCORED = 1.0


@dataclass(frozen=True)
class Answer(Generic[T]):
    """A query's points, and whether a bound (the candidates in all) stopped a leaf
    before it had what it wanted."""

    hits: list[Hit[T]]
    truncated: bool = False


@dataclass(frozen=True)
class Narrowing:
    """What every leaf of one evaluation shares: the conditions and exclusions a
    grouping adds (reads/query/groups.py) on top of the query's own."""

    conditions: tuple[qm.Condition, ...] = ()
    exclude: frozenset[PointId] = frozenset()


class QueryEngine:
    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds

    def plan(
        self,
        collection: Collection[T],
        request: qm.QueryRequest | qm.QueryGroupsRequest,
        **kwargs: int,
    ) -> Plan:
        return plan(request, collection.schema, collection.check_filter, self.bounds, **kwargs)

    async def query(
        self, collection: Collection[T], request: qm.QueryRequest, lookup: Lookup[T]
    ) -> Answer[T]:
        planned = self.plan(collection, request)
        budget = Budget(self.bounds.max_candidates)
        run = Run(collection, lookup, budget)
        hits = await run.evaluate(planned, Narrowing())
        return Answer(hits, budget.truncated)

    async def query_batch(
        self, collection: Collection[T], requests: Sequence[qm.QueryRequest], lookup: Lookup[T]
    ) -> list[Answer[T]]:
        """Every query planned (and refused, if one is) before any runs; the batch
        shares one budget of candidates."""
        if len(requests) > self.bounds.max_batch:
            raise too_costly("batch", f"a batch may hold at most {self.bounds.max_batch} queries")
        plans = [self.plan(collection, r) for r in requests]
        total = sum(p.cost for p in plans)
        if total > self.bounds.max_candidates:
            raise too_costly(
                "candidates",
                f"this batch would examine at least {total} candidates; at most "
                f"{self.bounds.max_candidates} are allowed",
            )
        budget = Budget(self.bounds.max_candidates)
        answers = []
        for planned in plans:
            before = budget.truncated
            budget.truncated = False
            hits = await Run(collection, lookup, budget).evaluate(planned, Narrowing())
            answers.append(Answer(hits, budget.truncated))
            budget.truncated = before or budget.truncated
        return answers


@dataclass
class Run(Generic[T]):
    """One query's evaluation."""

    collection: Collection[T]
    lookup: Lookup[T]
    budget: Budget
    vectors: dict[tuple[str | None, PointId, str], Vector] = field(default_factory=dict)
    own: frozenset[PointId] = frozenset()
    resolved: bool = False

    async def evaluate(self, planned: Plan, scope: Narrowing) -> list[Hit[T]]:
        """The plan's points (a grouping evaluates one plan several times, its
        examples fetched once)."""
        if not self.resolved:
            await self._resolve(planned.root)
            self.resolved = True
        scope = replace(scope, exclude=scope.exclude | self.own)
        hits = await self._level(planned.root, (), scope, root=True, offset=planned.offset)
        return await self.with_vectors(hits, planned.with_vector)

    # --- examples: point ids used as vectors ---------------------------------------

    async def _resolve(self, root: Node) -> None:
        """Fetch the vector of every point id used as an example (per collection and
        vector name, one retrieve each), purpose `get`: an id the asker may not see
        is missing. Ids of this collection are left out of every leaf."""
        wanted: dict[tuple[str | None, str], list[PointId]] = {}
        own: set[PointId] = set()
        for node in _walk(root):
            location = node.lookup_from
            other = location.collection if location is not None else None
            if other == self.collection.name:
                other = None
            name = (location.vector if location is not None else None) or node.using
            for example in node.examples:
                if example.point is not None:
                    wanted.setdefault((other, name), []).append(example.point)
                    if other is None:
                        own.add(example.point)
        for (other, name), ids in wanted.items():
            source = self.collection if other is None else await self.lookup(other)
            if source is None:
                raise QueryMissing("collection", f"Not found: Collection {other} not found")
            if not source.schema.has_vector(name):
                raise QueryMissing("vector", f'Not found: Vector with name "{name}" for point')
            found = {h.id: h for h in await source.retrieve(ids, vectors=frozenset({name}))}
            for point in ids:
                hit = found.get(point)
                if hit is None:
                    raise QueryMissing("point", f"Not found: No point with id {point} found")
                if name not in hit.vectors:
                    raise QueryMissing("vector", f'Not found: Vector with name "{name}" for point')
                self.vectors[(other, point, name)] = hit.vectors[name]
        self.own = frozenset(own)

    def _vector(self, node: Node, example: Example) -> Vector:
        if example.vector is not None:
            return example.vector
        assert example.point is not None
        location = node.lookup_from
        other = location.collection if location is not None else None
        if other == self.collection.name:
            other = None
        name = (location.vector if location is not None else None) or node.using
        vector = self.vectors[(other, example.point, name)]
        # A vector looked up elsewhere must fit the vector it is compared with here.
        check_vector(vector, node.using, self.collection.schema)
        return vector

    def _probe(self, node: Node) -> Probe:
        match node.query:
            case Near(e) | Mmr(e, _, _):
                return probes.Nearest(self._vector(node, e))
            case Recommend("average_vector", positive, negative):
                return probes.Nearest(
                    scoring.average(
                        [self._vector(node, e) for e in positive],
                        [self._vector(node, e) for e in negative],
                    )
                )
            case Recommend("best_score" | "sum_scores" as strategy, positive, negative):
                return probes.Recommend(
                    strategy,
                    tuple(self._vector(node, e) for e in positive),
                    tuple(self._vector(node, e) for e in negative),
                )
            case Discover(target, pairs):
                return probes.Discover(self._vector(node, target), self._pairs(node, pairs))
            case Context(pairs):
                return probes.Context(self._pairs(node, pairs))
        raise AssertionError(f"not a vector query: {node.query!r}")

    def _pairs(
        self, node: Node, pairs: tuple[tuple[Example, Example], ...]
    ) -> tuple[probes.Pair, ...]:
        return tuple(
            probes.Pair(self._vector(node, pos), self._vector(node, neg)) for pos, neg in pairs
        )

    # --- levels ----------------------------------------------------------------------

    async def _level(
        self,
        node: Node,
        filters: tuple[qm.Filter, ...],
        scope: Narrowing,
        *,
        root: bool = False,
        offset: int = 0,
        needs: frozenset[str] = frozenset(),
    ) -> list[Hit[T]]:
        if node.filter is not None:
            filters = (*filters, node.filter)
        if not node.prefetches:
            found = await self._leaf(node, filters, scope, root, offset, needs)
        else:
            found = await self._merged(node, filters, scope, root, offset, needs)
        return found[offset : offset + node.limit] if root else found

    async def _leaf(
        self,
        node: Node,
        filters: tuple[qm.Filter, ...],
        scope: Narrowing,
        root: bool,
        offset: int,
        needs: frozenset[str],
    ) -> list[Hit[T]]:
        where = Where(filters, None, scope.exclude, scope.conditions)
        take = node.limit + (offset if root else 0)
        query = node.query
        if query is None or isinstance(query, Order):
            order_by = query.order_by if isinstance(query, Order) else None
            page = await self.collection.scroll(
                where, take, order_by=order_by, offset=None, vectors=needs, budget=self.budget
            )
            return [replace(h, score=UNSCORED) for h in page.hits]
        if isinstance(query, Mmr):
            # Nested, Qdrant returns the nearest candidates as they are (no MMR).
            wanted = needs | {node.using} if root else needs
            candidates = await self._search(node, where, query.candidates_limit, wanted)
            if not root:
                return candidates
            return self._mmr(node, query, candidates, node.limit)
        return await self._search(node, where, take, needs)

    async def _merged(
        self,
        node: Node,
        filters: tuple[qm.Filter, ...],
        scope: Narrowing,
        root: bool,
        offset: int,
        needs: frozenset[str],
    ) -> list[Hit[T]]:
        query = node.query
        inner_needs = (
            frozenset({node.using}) if isinstance(query, Mmr) and not root else frozenset()
        )
        sources = [await self._level(p, filters, scope, needs=inner_needs) for p in node.prefetches]
        take = node.limit + (offset if root else 0)
        union = frozenset(h.id for source in sources for h in source)
        match query:
            case Fuse(method, k, weights):
                if root:
                    # At the root each prefetch contributes its own limit (Qdrant's
                    # collection-level merge), a nested MMR's candidates too.
                    sources = [s[: p.limit] for s, p in zip(sources, node.prefetches, strict=True)]
                fused = (
                    scoring.rrf(sources, k, weights) if method == "rrf" else scoring.dbsf(sources)
                )
                if node.score_threshold is not None:
                    fused = [h for h in fused if h.score >= node.score_threshold]
                return fused if root else fused[: node.limit]
            case Mmr(_, _, candidates_limit):
                if not root:
                    pool = [h for source in sources for h in source]
                    return self._mmr(node, query, pool, node.limit)
                where = Where(only=union)
                candidates = await self._search(node, where, candidates_limit, needs | {node.using})
                return self._mmr(node, query, candidates, node.limit)
            case Order(order_by):
                page = await self.collection.scroll(
                    Where(only=union),
                    take,
                    order_by=order_by,
                    offset=None,
                    vectors=needs,
                    budget=self.budget,
                )
                return [replace(h, score=UNSCORED) for h in page.hits]
        return await self._search(node, Where(only=union), take, needs)

    async def _search(
        self, node: Node, where: Where, limit: int, vectors: frozenset[str]
    ) -> list[Hit[T]]:
        if where.only is not None and not where.only:
            return []
        return await self.collection.search(
            self._probe(node),
            node.using,
            where,
            limit,
            score_threshold=node.score_threshold,
            vectors=vectors,
            budget=self.budget,
        )

    def _mmr(self, node: Node, query: Mmr, candidates: list[Hit[T]], limit: int) -> list[Hit[T]]:
        space = self.collection.schema.dense.get(node.using)
        vector = self._vector(node, query.example)
        distance = space.distance if space is not None else None
        return scoring.mmr(candidates, vector, node.using, distance, query.diversity, limit)

    async def with_vectors(self, hits: list[Hit[T]], names: frozenset[str]) -> list[Hit[T]]:
        """The hits with exactly the vectors asked for: those a leaf did not return
        are fetched (purpose `get`); a point gone meanwhile is dropped."""
        if not names:
            return [replace(h, vectors={}) if h.vectors else h for h in hits]
        missing = [h.id for h in hits if not names <= h.vectors.keys()]
        fetched = {}
        if missing:
            fetched = {h.id: h for h in await self.collection.retrieve(missing, vectors=names)}
        kept = []
        for hit in hits:
            vectors = dict(hit.vectors)
            if hit.id in fetched:
                vectors |= fetched[hit.id].vectors
            elif not names <= hit.vectors.keys():
                continue
            kept.append(replace(hit, vectors={n: v for n, v in vectors.items() if n in names}))
        return kept


def _walk(node: Node) -> list[Node]:
    nodes = [node]
    for p in node.prefetches:
        nodes += _walk(p)
    return nodes
