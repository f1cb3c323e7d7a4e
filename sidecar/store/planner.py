"""Which way a filtered nearest-neighbour search runs, on either backend.

A filter that admits few points is searched exactly (`Search.exact_below`): scoring
them all is cheap and finds the true nearest ones. One that admits many used to be
searched exactly too, up to the bound, scoring every admitted point (9 000 of 10 000
for an asker who may read 90 %), although where the admitted points lie around the
query the graph finds them anyway: the cost of a recall grew with what the asker may
read, and the answer was no better (issue 42).

So above `Search.neighbourhood_above` admitted points the search reads the query's own
neighbourhood: the tenant's `neighbourhood(limit)` nearest points, unfiltered (the
graph's best case). If the filter admits at least `limit` of them (an exact count over
those ids), it walks the graph with the filter, with a beam of `WALK_BEAM`, and proves
what it found from the neighbourhood; if not, it does not walk (a filtered walk away
from the admitted points wanders far: 15-20 ms wasted per search at 100k, measured).
When the walk's worst is strictly nearer than the neighbourhood's farthest, every
admitted point at least as near is in the neighbourhood; those of them the walk did not
return (`suspects`, a handful) are asked once, exactly, under the filter: any it admits
was missed by the walk and joins the answer. The `limit` nearest admitted points are
then known, at the cost of a few small searches whatever the filter admits.

Otherwise the admitted points are sparse or far from the query, where a filtered walk
misses (90 % of 100k records, all far from the query: recall@10 0.2-0.6 for any walk
measured, ACORN's too), so the search is exact up to `Search.unproven_exact_below`
points (the scan's bound; above it, a filtered walk, approximate).

The proof holds up to the unfiltered graph search's own recall, which is why that
search has a wide beam of its own (`NEIGHBOURHOOD_BEAM`): at 100k, with Qdrant's default
beam, in a few searches of an asker who may read 90 % at random, it missed a true
neighbour that the walk missed too. The answer never depends on which way was taken
beyond that, so what an asker may not read changes which way is taken (as the estimate
always has: docs/security.md) but not what they are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sidecar.store import Search

# The neighbourhood's least size, and its size per point wanted: wide enough that an
# asker who may read a fifth of the records near the query still finds `limit` there.
LEAST_NEIGHBOURHOOD = 100
PER_POINT = 4
# The filtered walk's beam: at 100k, 400 found the true ten nearest of an asker who may
# read 90 % at random where Qdrant's default (100) missed some (bench/filtered_search.py).
WALK_BEAM = 400
# The neighbourhood's own beam, at least: the proof is only as good as the neighbourhood.
# At 100k, on a graph with links for the tenant and the audience only (store/schema.py),
# the unfiltered search found 0.932 of the true 100 nearest with a beam of 100, 0.982
# with 200, 0.997 with 400, in 1.03, 1.25 and 1.35 ms (docs/performance.md, round eight).
NEIGHBOURHOOD_BEAM = 400

# How a dense search runs: exact (every admitted point scored), by the neighbourhood
# first, or a filtered graph walk alone.
Way = Literal["exact", "neighbourhood", "graph"]


def neighbourhood(limit: int) -> int:
    """How many of the tenant's nearest points the neighbourhood holds."""
    return max(LEAST_NEIGHBOURHOOD, PER_POINT * limit)


def way(tuning: Search, limit: int, estimate: int | None) -> Way:
    """How a search whose filter admits about `estimate` points runs (None: not
    estimated, `exact_below` is 0 and Qdrant decides alone). The neighbourhood is
    looked at when the planner is on and the filter admits more points than an exact
    search scores cheaply."""
    if estimate is None:
        return "graph"
    if tuning.neighbourhood and estimate > max(tuning.neighbourhood_above, neighbourhood(limit)):
        return "neighbourhood"
    return "exact" if estimate <= tuning.exact_below else "graph"


def unproven(tuning: Search, estimate: int) -> Way:
    """How a search the neighbourhood could not prove runs: exact within the bound."""
    bound = max(tuning.exact_below, tuning.unproven_exact_below)
    return "exact" if estimate <= bound else "graph"


def suspects(
    walked: Sequence[tuple[str, float]], neighbours: Sequence[tuple[str, float]], size: int
) -> list[str] | None:
    """What stands between the graph walk's answer (`walked`: the filtered search's
    points, id and score) and a proof that it holds the nearest admitted points: the
    neighbours (the tenant's `size` nearest, unfiltered) at least as near as the walk's
    worst that the walk did not return. None when nothing can prove it: the walk's
    worst is not strictly nearer than the neighbourhood's farthest (a point outside it
    could tie or beat it), or the neighbourhood is not full (too few points seen).

    An empty list proves the walk; otherwise the walk is proven together with those of
    the suspects the filter admits (it missed them: they join the answer)."""
    if len(neighbours) < size or not walked:
        return None
    worst = min(score for _, score in walked)
    edge = min(score for _, score in neighbours)
    if worst <= edge:
        return None
    returned = {point for point, _ in walked}
    return [point for point, score in neighbours if score >= worst and point not in returned]
