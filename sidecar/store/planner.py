"""Which way a filtered nearest-neighbour search runs, on either backend.

A filter that admits few points is searched exactly (`Search.exact_below`): scoring
them all is cheap and finds the true nearest ones. One that admits many used to be
searched exactly too, up to the bound, scoring every admitted point (9 000 of 10 000
for an asker who may read 90 %), although where the admitted points lie around the
query the nearest of them are among the query's nearest points anyway: the cost of a
recall grew with what the asker may read, and the answer was no better (issue 42).

So above `Search.neighbourhood_above` admitted points the search reads the query's own
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

The proof holds up to the unfiltered graph search's own recall, which is why that
search has a wide beam of its own (`NEIGHBOURHOOD_BEAM`). The answer never depends on
which way was taken beyond that, so what an asker may not read changes which way is
taken (as the estimate always has: docs/security.md) but not what they are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Literal

from sidecar.store import Search

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


def neighbourhood(limit: int) -> int:
    """How many of the tenant's nearest points the neighbourhood holds."""
    return max(LEAST_NEIGHBOURHOOD, PER_POINT * limit)


def beam(tuning: Search, size: int) -> int:
    """The beam of the neighbourhood's own search: never narrower than the points it
    must return, `NEIGHBOURHOOD_BEAM`, or the configured one."""
    return max(size, NEIGHBOURHOOD_BEAM, tuning.hnsw_ef or 0)


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
    if len(neighbours) < size or not neighbours:
        return False
    edge = min(neighbours)
    kept = list(admitted[: limit + 1])
    if any(nearer == farther for nearer, farther in pairwise(kept)):
        return False
    if len(kept) >= limit:
        return kept[limit - 1] > edge
    return score_threshold is not None and edge < score_threshold
