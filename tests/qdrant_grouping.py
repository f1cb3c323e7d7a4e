"""Every answer Qdrant may give to a grouped query, its rounds asked of Qdrant itself.

Qdrant 1.18 ranks groups by their best point's score alone (`ScoredPoint`'s `Ord`
compares scores only), sorting the groups of a hash map seeded afresh for every request
(lib/shard/src/grouping/aggregator.rs, `best_group_keys` over an `AHashMap`). So groups
whose best points score alike come in an order chosen anew by each request, and two
groups sharing one point (a point with both keys, which joins each) always score alike.
Where such a tie straddles the `limit` best groups, that order decides which of them
count as the best: whether the driver stops (enough of the best are full) or asks
another round, which groups a filling round looks for, and which groups are returned,
and a later round (a DBSF fusion renormalised over what is left) may then score above
everything before it. The Qdrant server, asked one such request 200 times, gave three
different answers (88, 63 and 49 times: docs/design.md "The query engine", Ties).

`answers` replays Qdrant's driver (lib/shard/src/grouping/driver.rs: up to five rounds
finding full groups, then up to five filling the best short ones; each round the query
shaped as `shape_candidates_query` shapes it) with every round's query asked of the
plain Qdrant collection, so the points and scores are Qdrant's own, and follows each
choice of best groups Qdrant could make at every such tie. The choice is taken afresh
after each round (the hash order of the keys already held may in fact persist between
rounds, so this may admit slightly more than one Qdrant process can give); within one
state it is one choice for the stop, the next filling round and the answer, as in Qdrant.
"""

from __future__ import annotations

import copy
import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.query_engine import Answer, Ask, Plain, _substitute

FIND_ROUNDS = 5
FILL_ROUNDS = 5
# A request whose ties fork into more states than this is not followed (an error).
MAX_BRANCHES = 2000

Key = str | int


@dataclass
class _Groups:
    """Qdrant's aggregator: each group's points (raw point id -> score), the full
    groups, each group's best score, every point held."""

    size: int
    members: dict[Key, dict[str, float]] = field(default_factory=dict)
    full: set[Key] = field(default_factory=set)
    best: dict[Key, float] = field(default_factory=dict)
    first: dict[Key, str] = field(default_factory=dict)  # the best point's id
    ids: set[str] = field(default_factory=set)
    # Choose as whose does (by the best point's id, then key), not every way.
    as_whose: bool = False

    def add(self, points: list[dict[str, Any]], key: str) -> None:
        for point in points:
            pid, score = str(point["id"]), float(point["score"])
            for group in _keys((point.get("payload") or {}).get(key)):
                held = self.members.setdefault(group, {})
                if pid not in held:
                    held[pid] = score
                    self.ids.add(pid)
                if len(held) == self.size:
                    self.full.add(group)
                if group not in self.best or (-score, pid) < (-self.best[group], self.first[group]):
                    self.best[group], self.first[group] = score, pid

    def choices(self, groups: int) -> list[frozenset[Key]]:
        """Each set of `groups` best groups some order of the tied ones makes."""
        ranked = sorted(self.best.values(), reverse=True)
        if len(ranked) <= groups:
            return [frozenset(self.best)]
        if self.as_whose:
            order = sorted(self.best, key=lambda k: (-self.best[k], self.first[k], _key_order(k)))
            return [frozenset(order[:groups])]
        cut = ranked[groups - 1]
        above = [k for k, s in self.best.items() if s > cut]
        tied = [k for k, s in self.best.items() if s == cut]
        return [
            frozenset(above) | frozenset(pick)
            for pick in itertools.combinations(tied, groups - len(above))
        ]


def _key_order(key: Key) -> tuple[int, int, str]:
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


def _keys(value: Any) -> list[Key]:
    values = value if isinstance(value, list) else [value]
    keys: list[Key] = []
    for v in values:
        if isinstance(v, str | int) and not isinstance(v, bool) and v not in keys:
            keys.append(v)
    return keys


def _scaled(prefetch: Any, size: int) -> Any:
    if isinstance(prefetch, list):
        return [_scaled(p, size) for p in prefetch]
    inner = {k: v for k, v in prefetch.items() if k != "prefetch"}
    inner["limit"] = prefetch.get("limit", 10) * size
    if "prefetch" in prefetch:
        inner["prefetch"] = _scaled(prefetch["prefetch"], size)
    return inner


def _base(route: str, body: dict[str, Any], groups: int, size: int) -> dict[str, Any]:
    """The grouped request as the query each round asks (`shape_candidates_query`)."""
    grouping = {"group_by", "group_size", "limit", "with_lookup", "with_payload", "with_vector"}
    base = {k: v for k, v in body.items() if k not in grouping}
    if route == "search_groups":
        vector = base.pop("vector")
        if isinstance(vector, dict) and "name" in vector:
            base["using"], vector = vector["name"], vector["vector"]
        base["query"] = vector
    if "prefetch" in base:
        base["prefetch"] = _scaled(base["prefetch"], size)
    base["limit"] = groups * size
    return base


def _round(base: dict[str, Any], key: str, groups: _Groups, matches: list[dict[str, Any]]) -> Any:
    """One round's query: the base, restricted by `matches` on the key (the groups a
    round looks for or leaves out), without the points already held."""
    must: list[Any] = [base["filter"]] if base.get("filter") else []
    must += [{"key": key, "match": m} for m in matches]
    must_not: list[Any] = [{"is_empty": {"key": key}}]
    if groups.ids:
        must_not.append({"has_id": sorted(groups.ids)})
    return {**base, "filter": {"must": must, "must_not": must_not}, "with_payload": [key]}


def _matching(keys: set[Key] | frozenset[Key], kind: str) -> list[dict[str, Any]]:
    """Qdrant's `match except` / `match any`, one per kind of value."""
    ints = sorted(k for k in keys if isinstance(k, int))
    strings = sorted(k for k in keys if isinstance(k, str))
    return [{kind: values} for values in (ints, strings) if values]


async def answers(plain: Plain, request: Ask, *, as_whose: bool = False) -> list[Answer]:
    """Every answer Qdrant may give to the grouped request, normalised as `Plain.ask`
    normalises one; `as_whose`, the one its rounds give when every tie is chosen by
    whose's rule (the best point's id, then the key: ids are UUIDs here, whose strings
    sort as whose's `point_order` sorts them)."""
    ids = {rid: pid for pid, rid in plain.records.items()}
    body = _substitute(request.body, ids, plain.name)
    groups, size = int(body.get("limit", 10)), int(body.get("group_size", 3))
    key = body["group_by"]
    base = _base(request.route, body, groups, size)
    finished: list[tuple[_Groups, frozenset[Key]]] = []

    async with httpx.AsyncClient(
        base_url=f"{plain.url}/collections/{plain.name}", timeout=30
    ) as client:
        asked: dict[str, list[dict[str, Any]]] = {}
        followed = 0

        async def ask(state: _Groups, matches: list[dict[str, Any]]) -> list[dict[str, Any]]:
            query = _round(base, key, state, matches)
            # Branches that reach the same state ask the same round: asked once.
            memo = json.dumps(query, sort_keys=True)
            if memo not in asked:
                response = await client.post("/points/query", json=query)
                response.raise_for_status()
                asked[memo] = response.json()["result"]["points"]
            return asked[memo]

        async def follow(
            state: _Groups, finding: int, filling: int, chosen: frozenset[Key]
        ) -> None:
            # `chosen`: this state's best groups, one choice for the state (Qdrant's
            # order of one hash map's keys): its stop, its next filling round, its answer.
            nonlocal followed
            followed += 1
            if followed > MAX_BRANCHES:
                raise TooManyBranches(request)
            if finding == 0 and filling == 0:
                finished.append((state, chosen))
                return
            if finding > 0:
                matches = _matching(state.full, "except")
            else:
                matches = _matching(chosen - state.full, "any")
            points = await ask(state, matches)
            after = copy.deepcopy(state)
            after.add(points, key)
            for best in after.choices(groups):
                if len(best & after.full) >= groups:
                    finished.append((after, best))
                elif finding > 0 and points:
                    await follow(after, finding - 1, filling, best)
                elif finding > 0:
                    await follow(after, 0, filling, best)
                elif points:
                    await follow(after, 0, filling - 1, best)
                else:
                    finished.append((after, best))

        await follow(_Groups(size, as_whose=as_whose), FIND_ROUNDS, FILL_ROUNDS, frozenset())

    distinct: list[Answer] = []
    for state, best in finished:
        answer = _distilled(plain, state, best, size)
        if answer not in distinct:
            distinct.append(answer)
    return distinct


def _distilled(plain: Plain, state: _Groups, best: frozenset[Key], size: int) -> Answer:
    groups = []
    for group in best:
        hits = sorted(state.members[group].items(), key=lambda h: -h[1])[:size]
        groups.append((group, [(plain._id(pid), score) for pid, score in hits]))
    return sorted(groups, key=lambda g: -g[1][0][1])


class TooManyBranches(Exception):
    """The request's ties fork more ways than the model follows."""
