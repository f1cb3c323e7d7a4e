"""Which way a filtered nearest-neighbour search runs, on either backend.

A filter that admits few points is searched exactly (`Search.exact_below`): scoring
them all is cheap and finds the true nearest ones. One that admits many used to be
searched exactly too, up to the bound, scoring every admitted point (9 000 of 10 000
for an asker who may read 90 %), although where the admitted points lie around the
query the graph finds them anyway: the cost of a recall grew with what the asker may
read, and the answer was no better (issue 42).

So above `SCAN_BELOW` admitted points the search reads the query's own neighbourhood:
the tenant's `neighbourhood(limit)` nearest points, unfiltered (the graph's best case).
If the filter admits at least `limit` of them (an exact count over those ids), it walks
the graph with the filter (HNSW, a fraction of a millisecond) and proves what it found
from the neighbourhood; if not, it does not walk (a filtered walk away from the
admitted points wanders far: 15-20 ms wasted per search at 100k, measured). When the
walk's worst is strictly nearer than the neighbourhood's farthest, every admitted
point at least as near is in the neighbourhood; those of them the walk did not return
(`suspects`, a handful) are asked once, exactly, under the filter: any it admits was
missed by the walk and joins the answer. The `limit` nearest admitted points are then
known, at the cost of a few small searches whatever the filter admits. Otherwise (the
admitted points are sparse or far from the query: the case where a filtered walk
misses, docs/performance.md) the search runs as before: exact up to `exact_below`,
HNSW above.

The proof holds up to the unfiltered graph search's own recall (near 1.0 at a beam
of `neighbourhood(limit)`); the answer never depends on which way was taken beyond
that, so what an asker may not read changes which way is taken (as the estimate
always has: docs/security.md) but not what they are shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sidecar.store import Search

# Below this many admitted points, exact search costs no more than the walk and its
# proof (about 0.5 ms each at 2 000 points of 384 dimensions, in-process, bench
# machine): searched exactly at once.
SCAN_BELOW = 2000
# The neighbourhood's least size, and its size per point wanted: wide enough that an
# asker who may read a fifth of the records near the query still finds `limit` there.
LEAST_NEIGHBOURHOOD = 100
PER_POINT = 4


def neighbourhood(limit: int) -> int:
    """How many of the tenant's nearest points the neighbourhood holds."""
    return max(LEAST_NEIGHBOURHOOD, PER_POINT * limit)


def worth_a_neighbourhood(tuning: Search, limit: int, estimate: Callable[[], int]) -> bool:
    """Whether to look at the neighbourhood first: the planner is on (`neighbourhood`,
    and `exact_below` set: 0 leaves every choice to Qdrant), and the filter admits more
    points than an exact search scores cheaply (`estimate`, asked only then)."""
    if tuning.exact_below <= 0 or not tuning.neighbourhood:
        return False
    return estimate() > max(SCAN_BELOW, neighbourhood(limit))


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
