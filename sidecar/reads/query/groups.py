"""Grouped queries (`query/groups`, `search/groups`) over disclosable points only.

As Qdrant does it (lib/collection/src/grouping/, 1.18): the query runs with a limit of
groups times group size (each prefetch's limit multiplied by the group size), only over
points that hold the `group_by` key, and its points are added to their groups (a
point with several values joins each). Up to five rounds look for enough full groups,
each leaving out the groups already full and the points already held; then up to five
rounds fill the best groups still short, each restricted to them. The best `limit`
groups by their best point are returned, each with its best `group_size` points.

Every round is a query of the engine (reads/query/engine.py), so its points are points
the asker may see; which groups exist, what they hold and how many, all come from
those alone. Groups are ordered by their best point (score, then id), then by key;
a group's points by score, then id. (Qdrant orders groups tied by score as a hash map
seeded per request does, so which tied group counts among the best, and hence how
many rounds run, is its choice anew each time; ours is one of its choices, always the
same: docs/design.md "Ties".)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic

from qdrant_client.http import models as qm

from sidecar.errors import QueryMissing, QueryRefused
from sidecar.reads.query.collection import Budget, Collection, Hit, Lookup, PointId, T, point_order
from sidecar.reads.query.engine import Narrowing, QueryEngine, Run
from sidecar.reads.query.paths import values_at
from sidecar.reads.query.plan import (
    DEFAULT_LIMIT,
    Mmr,
    Order,
    canonical_id,
    refused,
    too_costly,
    unsupported,
    vector_names,
)

# Qdrant's rounds: to find enough full groups, then to fill the best ones.
FIND_ROUNDS = 5
FILL_ROUNDS = 5
DEFAULT_GROUP_SIZE = 3

GroupKey = str | int
GROUP_INDEXES = (
    qm.PayloadSchemaType.KEYWORD,
    qm.PayloadSchemaType.INTEGER,
    qm.PayloadSchemaType.UUID,
)


@dataclass(frozen=True)
class Group(Generic[T]):
    key: GroupKey
    hits: list[Hit[T]]
    # The point of the `with_lookup` collection whose id is the key, if the asker may
    # see it.
    lookup: Hit[T] | None = None


@dataclass(frozen=True)
class Grouped(Generic[T]):
    groups: list[Group[T]]
    truncated: bool = False


async def query_groups(
    engine: QueryEngine,
    collection: Collection[T],
    request: qm.QueryGroupsRequest,
    lookup: Lookup[T],
) -> Grouped[T]:
    bounds = engine.bounds
    groups = DEFAULT_LIMIT if request.limit is None else request.limit
    size = DEFAULT_GROUP_SIZE if request.group_size is None else request.group_size
    if groups < 1 or size < 1:
        raise refused("Validation error in JSON body: limit and group_size must be 1 or larger")
    if groups > bounds.max_groups:
        raise too_costly("groups", f"a grouped query may return at most {bounds.max_groups} groups")
    if size > bounds.max_group_size:
        raise too_costly("group_size", f"a group may hold at most {bounds.max_group_size} points")
    if collection.schema.indexes.get(request.group_by) not in GROUP_INDEXES:
        # A grouping filters on its key in every round: on a field without an index the
        # store would read every point's payload (the caller's filters are held to
        # indexed fields for the same reason).
        raise refused(
            f"Wrong input: No keyword, integer or uuid index for `group_by` key: "
            f"`{request.group_by}`. Please create one to group by it."
        )
    planned = engine.plan(collection, request, limit_factor=size, root_limit=groups * size)
    if isinstance(planned.root.query, Mmr | Order):
        raise unsupported("grouping an mmr or order_by query")
    with_lookup = _with_lookup(request.with_lookup)
    # Only the found points' ids go into the rounds' filters; their vectors at the end.
    rounds = replace(planned, with_vector=frozenset())
    budget = Budget(bounds.max_candidates)
    key = request.group_by
    groups_of = _Aggregator[T](groups, size, key)
    present = qm.Filter(must_not=[qm.IsEmptyCondition(is_empty=qm.PayloadField(key=key))])

    run = Run(collection, lookup, budget)

    async def round_of(conditions: Sequence[qm.Condition]) -> bool:
        narrowing = Narrowing((present, *conditions), frozenset(groups_of.ids))
        hits = await run.evaluate(rounds, narrowing)
        groups_of.add(hits)
        return bool(hits)

    filled = False
    for _ in range(FIND_ROUNDS):
        if not await round_of(_except(key, groups_of.full_keys())):
            break
        if groups_of.filled_best() >= groups:
            filled = True
            break
    if not filled:
        for _ in range(FILL_ROUNDS):
            if not await round_of(_any(key, groups_of.unfilled_best())):
                break
            if groups_of.filled_best() >= groups:
                break
    found = groups_of.distill()
    names = vector_names(request.with_vector, collection.schema)
    shown = await run.with_vectors([h for g in found for h in g.hits], names)
    kept = {h.id: h for h in shown}
    found = [replace(g, hits=[kept[h.id] for h in g.hits if h.id in kept]) for g in found]
    if with_lookup is not None:
        found = await _looked_up(found, with_lookup, lookup, collection)
    return Grouped(found, budget.truncated)


class _Aggregator(Generic[T]):
    """Qdrant's groups aggregator, with the tie rule."""

    def __init__(self, groups: int, size: int, key: str) -> None:
        self.groups = groups
        self.size = size
        self.key = key
        self.members: dict[GroupKey, dict[PointId, Hit[T]]] = {}
        self.full: set[GroupKey] = set()
        self.best: dict[GroupKey, Hit[T]] = {}
        self.ids: set[PointId] = set()

    def add(self, hits: list[Hit[T]]) -> None:
        for hit in hits:
            for key in _group_keys(hit.payload, self.key):
                group = self.members.setdefault(key, {})
                if hit.id not in group:
                    group[hit.id] = hit
                    self.ids.add(hit.id)
                if len(group) == self.size:
                    self.full.add(key)
                best = self.best.get(key)
                if best is None or _better(hit, best):
                    self.best[key] = hit

    def best_keys(self) -> list[GroupKey]:
        ordered = sorted(
            self.best,
            key=lambda k: (-self.best[k].score, point_order(self.best[k].id), _key_order(k)),
        )
        return ordered[: self.groups]

    def filled_best(self) -> int:
        return sum(k in self.full for k in self.best_keys())

    def unfilled_best(self) -> list[GroupKey]:
        return [k for k in self.best_keys() if k not in self.full]

    def full_keys(self) -> list[GroupKey]:
        return sorted(self.full, key=_key_order)

    def distill(self) -> list[Group[T]]:
        groups = []
        for key in self.best_keys():
            hits = sorted(self.members[key].values(), key=lambda h: (-h.score, point_order(h.id)))
            groups.append(Group(key, hits[: self.size]))
        return groups


def _better(hit: Hit[Any], other: Hit[Any]) -> bool:
    return (-hit.score, point_order(hit.id)) < (-other.score, point_order(other.id))


def _key_order(key: GroupKey) -> tuple[int, int, str]:
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


def _group_keys(payload: Any, key: str) -> list[GroupKey]:
    """The point's values at the key that can name a group (strings and integers),
    each once."""
    keys: list[GroupKey] = []
    for value in values_at(payload, key):
        if isinstance(value, bool) or not isinstance(value, str | int):
            continue
        if value not in keys:
            keys.append(value)
    return keys


def _split(keys: list[GroupKey]) -> tuple[list[int], list[str]]:
    return [k for k in keys if isinstance(k, int)], [k for k in keys if isinstance(k, str)]


def _except(key: str, full: list[GroupKey]) -> list[qm.Condition]:
    """Qdrant's `match except` per kind of value, for the groups already full."""
    ints, strings = _split(full)
    conditions: list[qm.Condition] = []
    for values in (ints, strings):
        if values:
            conditions.append(
                qm.FieldCondition(key=key, match=qm.MatchExcept.model_validate({"except": values}))
            )
    return conditions


def _any(key: str, unfilled: list[GroupKey]) -> list[qm.Condition]:
    """Qdrant's `match any` per kind of value, for the best groups still short."""
    ints, strings = _split(unfilled)
    conditions: list[qm.Condition] = []
    for values in (ints, strings):
        if values:
            conditions.append(qm.FieldCondition(key=key, match=qm.MatchAny(any=values)))
    return conditions


@dataclass(frozen=True)
class _WithLookup:
    collection: str
    with_vectors: qm.WithVector | None


def _with_lookup(raw: qm.WithLookupInterface | None) -> _WithLookup | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return _WithLookup(raw, None)
    return _WithLookup(raw.collection, raw.with_vectors)


async def _looked_up(
    groups: list[Group[T]],
    wanted: _WithLookup,
    lookup: Lookup[T],
    collection: Collection[T],
) -> list[Group[T]]:
    """Each group with the point of the lookup collection its key names, if the
    asker may see one (purpose `get`); keys that are not point ids name none."""
    source = collection if wanted.collection == collection.name else await lookup(wanted.collection)
    if source is None:
        raise QueryMissing("collection", f"Not found: Collection {wanted.collection} not found")
    ids: dict[GroupKey, PointId] = {}
    for group in groups:
        point = _as_point_id(group.key)
        if point is not None:
            ids[group.key] = point
    names = vector_names(wanted.with_vectors, source.schema)
    found = {
        h.id: h for h in await source.retrieve(list(dict.fromkeys(ids.values())), vectors=names)
    }
    return [replace(g, lookup=found.get(ids[g.key]) if g.key in ids else None) for g in groups]


def _as_point_id(key: GroupKey) -> PointId | None:
    if isinstance(key, int):
        return key if key >= 0 else None
    try:
        return canonical_id(key)
    except QueryRefused:  # not a UUID: it names no point
        return None
