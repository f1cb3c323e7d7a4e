"""Which way a filtered nearest-neighbour search runs, on either backend.

A filter that admits few points is searched exactly (`Search.exact_below`): scoring
them all is cheap and finds the true nearest ones. One that admits many used to be
searched exactly too, up to the bound, scoring every admitted point (9 000 of 10 000
for an asker who may read 90 %), although where the admitted points lie around the
query the nearest of them are among the query's nearest points anyway: the cost of a
recall grew with what the asker may read, and the answer was no better (issue 42).

So above `Search.neighbourhood_above` admitted points (or a third of the tenant's
points, where the embedded store counts fewer: `looked_above`) the search reads the query's own
neighbourhood first: the tenant's `neighbourhood(limit)` nearest points, unfiltered (the
graph's best case), ids only. It then scores exactly, under the filter, just those
points (a search restricted to their ids). Every point outside the neighbourhood is at
most as near as its farthest, so when `limit` of its points are admitted and the last
of them is strictly nearer than that farthest one, they are the `limit` nearest
admitted points of the whole tenant (`proven`): two small searches whatever the filter
admits. (A score threshold proves a shorter answer too, when the neighbourhood's
farthest is already below it.)

Otherwise the admitted points are sparse or far from the query, where a filtered walk
misses (90 % of 100k records, all far from the query: recall@10 0.2-0.6 for any walk
measured, ACORN's too), so the search is exact up to `Search.unproven_exact_below`
points (the scan's bound; above it, a filtered walk, approximate).

Where the neighbourhood declines, it was paid for nothing, and under the same filter
it most likely declines again: the asker's records lie where they lay (an asker who may
read 90 % of 100k records, all far from the question, paid 2-5 ms a search for it). So
the store remembers, per filter (`Proofs`), that it declined, and the next searches
under that filter skip it: one after the first decline, then twice as many after each
further one, up to `MOST_SKIPPED`; a proof forgets it. A far asker then pays for the
neighbourhood once in 33 searches, an asker it proves for almost never skips it. Only
where a skipped search is exact anyway, and never from a later round of an over-fetch
(`remembered`), so what was remembered changes a search's time, and its answer no more
than any choice of way does (the proof's own recall, below).

An exact search itself pays for its filter point by point: with the tenant, the
validity times and the access scopes beside the audience, the engine checks every
condition of every point the audience admits, and that check, not the scoring, was
most of the difference between a scan under the audience alone and one under the whole
filter (0.42 against 0.78 ms at 100k records, 5 000 admitted; 3.5 against 6.8 at
20 000). So above `Search.sieve_above` admitted points an exact search goes through a
sieve first: a scan under the asker's audience alone (`Scope.wider`, one indexed
condition, which every point the whole filter admits meets) for its `sieve(limit)`
nearest, then the whole filter among just those, scored exactly. Every point the whole
filter admits is one the audience admits, in the same order by score, so when `limit`
of the sieve's points pass and the last of them is strictly nearer than the sieve's
farthest (or the sieve held all the audience admits), they are the answer the whole
scan gives (`sifted`, ties declined as above). Where it declines (most of the
audience's nearest records are superseded versions or not yet valid), the whole scan
follows, and declines are remembered as the neighbourhood's are. The audience condition
alone does not name the tenant, and other tenants use the same names, so the store runs
the sieve only where it holds the tenant's points alone (`EdgeStore._alone`): another
tenant's records must neither be scanned for it nor decide, by where they lie, how long
it takes.

The proof holds up to the unfiltered graph search's own recall, which is why that
search has a wide beam of its own (`NEIGHBOURHOOD_BEAM`). The answer never depends on
which way was taken beyond that, so what an asker may not read changes which way is
taken (as the estimate always has, and as what the neighbourhood proved for the same
filter before does: docs/security.md) but not what they are shown.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Literal

from cachetools import LRUCache

from sidecar.store import Search
from sidecar.store.scope import Scope

# The neighbourhood's least size, and its size per point wanted: wide enough that an
# asker who may read a fifth of the records near the query still finds `limit` there.
LEAST_NEIGHBOURHOOD = 100
PER_POINT = 4
# The neighbourhood's own beam, at least: the proof is only as good as the neighbourhood.
# At 100k, in process, a beam of 200 gave recall@10 0.989 at 20 % `random` and 0.996 at
# 90 %, 400 gave 0.998 and 1.000 (2.7 ms a search), 800 1.000 and 1.000 (3.0 ms)
# (bench/search_plan.py --beam; docs/performance.md, round twelve).
NEIGHBOURHOOD_BEAM = 400

# How a dense search runs: exact (every admitted point scored), by the neighbourhood
# first, or a filtered graph walk alone.
Way = Literal["exact", "neighbourhood", "graph"]


# A smaller tenant's graph is searched as well with a narrower beam, and its
# neighbourhood is worth reading for a smaller share of its points: at 10k records, in
# process, a beam of 200 found every proven answer that 400 did (recall@10 1.000 at 20 %
# and 90 % `random`), and the neighbourhood with it cost what an exact search of about
# 3 000 points does (90 % `random`: 1.07 ms against 1.65 exact; bench/search_plan.py
# --neighbourhood-above 3500 --beam 200 --sieve, docs/performance.md round fifteen).
# So where the embedded store knows the tenant's points, the beam is a fiftieth of
# them (never more than NEIGHBOURHOOD_BEAM) and the neighbourhood is looked at above a
# third of them (never above `Search.neighbourhood_above`).
POINTS_PER_BEAM = 50
LOOKED_ABOVE_SHARE = 3


def neighbourhood(limit: int) -> int:
    """How many of the tenant's nearest points the neighbourhood holds."""
    return max(LEAST_NEIGHBOURHOOD, PER_POINT * limit)


def beam(tuning: Search, size: int, points: int | None = None) -> int:
    """The beam of the neighbourhood's own search: never narrower than the points it
    must return, `NEIGHBOURHOOD_BEAM` (a fiftieth of the tenant's `points` where
    fewer, when known), or the configured one."""
    wide = (
        NEIGHBOURHOOD_BEAM if points is None else min(NEIGHBOURHOOD_BEAM, points // POINTS_PER_BEAM)
    )
    return max(size, wide, tuning.hnsw_ef or 0)


def looked_above(tuning: Search, points: int | None = None) -> int:
    """Above how many admitted points the neighbourhood is looked at: the configured
    bound, or a third of the tenant's `points` where fewer, when known."""
    if points is None:
        return tuning.neighbourhood_above
    return min(tuning.neighbourhood_above, points // LOOKED_ABOVE_SHARE)


def sized(tuning: Search, limit: int, estimate: int | None) -> bool:
    """Whether the tenant's size may change the way a search of about `estimate`
    points takes (`way`'s `points`), so that it is worth counting."""
    return (
        tuning.neighbourhood
        and estimate is not None
        and neighbourhood(limit) < estimate <= tuning.neighbourhood_above
    )


def way(tuning: Search, limit: int, estimate: int | None, points: int | None = None) -> Way:
    """How a search whose filter admits about `estimate` points of the tenant's `points`
    (None: not counted) runs (`estimate` None: not estimated, `exact_below` is 0 and
    Qdrant decides alone). The neighbourhood is looked at when the planner is on and
    the filter admits more points than an exact search scores cheaply."""
    if estimate is None:
        return "graph"
    if tuning.neighbourhood and estimate > max(looked_above(tuning, points), neighbourhood(limit)):
        return "neighbourhood"
    return "exact" if estimate <= tuning.exact_below else "graph"


def unproven(tuning: Search, estimate: int) -> Way:
    """How a search the neighbourhood could not prove runs: exact within the bound."""
    bound = max(tuning.exact_below, tuning.unproven_exact_below)
    return "exact" if estimate <= bound else "graph"


def proven(
    admitted: Sequence[float],
    neighbours: Sequence[float],
    size: int,
    limit: int,
    score_threshold: float | None = None,
) -> bool:
    """Whether the first `limit` of `admitted` (the scores, nearest first, of the
    neighbourhood's points the filter admits: at most `limit + 1`) are the `limit`
    nearest admitted points of the whole tenant, in the order an exact search gives,
    given `neighbours` (the scores of the tenant's `size` nearest points, unfiltered).

    Not when the neighbourhood is not full (the graph search found fewer points than
    asked: an exact search is cheap there anyway), nor when the last of them is as far
    as the neighbourhood's farthest (a point outside may tie it). Fewer than `limit`
    prove the answer only when a score threshold already excludes everything outside.
    And not when two of them tie, or the last ties the next admitted point: which of
    several equal points an engine returns, and in what order, depends on the order it
    visits them, which differs between a search of the neighbourhood and a scan, so
    records the asker may not read, by deciding which way is taken, would decide which
    of them the asker is shown (identical texts embed identically). A scan decides."""
    if len(neighbours) < size or not neighbours or limit < 1:
        return False
    edge = min(neighbours)
    kept = _untied(admitted, limit)
    if kept is None:
        return False
    if len(kept) >= limit:
        return kept[limit - 1] > edge
    return score_threshold is not None and edge < score_threshold


# The sieve's points beyond twice those wanted: room for records the audience admits
# and the rest of the filter refuses (old versions, records not valid yet).
SIEVE_SLACK = 10


def sieve(limit: int) -> int:
    """How many of the points nearest the query the sieve's scan returns."""
    return 2 * limit + SIEVE_SLACK


def sifts(tuning: Search, limit: int, estimate: int | None) -> bool:
    """Whether an exact search for `limit` of about `estimate` points goes through the
    sieve."""
    return tuning.sieve and limit > 0 and estimate is not None and estimate > tuning.sieve_above


def sifted(admitted: Sequence[float], wide: Sequence[float], size: int, limit: int) -> bool:
    """Whether the first `limit` of `admitted` (the scores, nearest first, of the
    sieve's points the whole filter admits: at most `limit + 1`) are the `limit`
    nearest points the whole filter admits, in the order a scan under it gives, given
    `wide` (the scores, nearest first, of the `size` nearest points the wider condition
    admits, found by an exact scan under the same score threshold).

    When the scan found fewer than `size`, it found every point the wider condition
    admits, so `admitted` is the whole answer. Otherwise only `limit` of them strictly
    nearer than the scan's farthest: a point beyond it may tie that one. Ties among
    `admitted` are declined for the reason `proven` gives."""
    kept = _untied(admitted, limit)
    if limit < 1 or kept is None:
        return False
    if len(wide) < size:
        return True
    return len(kept) >= limit and kept[limit - 1] > wide[-1]


def _untied(admitted: Sequence[float], limit: int) -> list[float] | None:
    """The first `limit + 1` of `admitted`, or None where two of them tie: which of equal
    points a search shows is left to a scan (`proven`)."""
    kept = list(admitted[: limit + 1])
    if any(nearer == farther for nearer, farther in pairwise(kept)):
        return None
    return kept


# At most this many searches in a row skip the neighbourhood after it declined.
MOST_SKIPPED = 32
# Filters whose declines are remembered (the least recently used are forgotten).
REMEMBERED_FILTERS = 4096


class Proofs:
    """Per filter (`filter_key`), whether the neighbourhood (or, in a store's second
    memory, the sieve) declined lately, and how many of the next searches skip it for
    that (see the module's text)."""

    def __init__(self, size: int = REMEMBERED_FILTERS) -> None:
        # A key's skips still to come, and its declines in a row.
        self._declined: LRUCache[Hashable, tuple[int, int]] = LRUCache(maxsize=size)

    def worth_trying(self, key: Hashable | None) -> bool:
        """Whether this search looks at the neighbourhood (counting a skip if not)."""
        if key is None or (held := self._declined.get(key)) is None:
            return True
        skips, declines = held
        if skips == 0:
            return True
        self._declined[key] = (skips - 1, declines)
        return False

    def heard(self, key: Hashable | None, proven: bool) -> None:
        """What the neighbourhood did for a search under `key`."""
        if key is None:
            return
        if proven:
            self._declined.pop(key, None)
            return
        declines = self._declined.get(key, (0, 0))[1] + 1
        self._declined[key] = (min(2 ** (declines - 1), MOST_SKIPPED), declines)


def remembered(tuning: Search, estimate: int, scope: Scope, excluding: bool) -> Hashable | None:
    """What the neighbourhood's declines are remembered under for this search, or None
    (not remembered: it always looks). Only where a search it skips is exact anyway
    (within `unproven_exact_below`): above it, a skipped search would walk the graph,
    approximately, where the neighbourhood might have proven the exact answer, and
    earlier searches would choose the answer, not only its time (below it, only as far
    as the proof's own recall). And not from a later
    over-fetch round, which leaves the nearest records out and so declines where the
    request's first round would not."""
    if excluding or unproven(tuning, estimate) != "exact":
        return None
    return filter_key(scope)


def filter_key(scope: Scope) -> Hashable | None:
    """What tells one search's filter from another's, the instant asked about aside
    (it moves with every request, not where the records lie); None when the scope
    holds what cannot be a key, or names ids (it is then not remembered)."""
    if scope.only is not None:
        return None
    caller = scope.caller.model_dump_json() if scope.caller is not None else None
    try:
        key = (replace(scope, current_at=None, caller=None), scope.current_at is None, caller)
        hash(key)
    except TypeError:
        return None
    return key
