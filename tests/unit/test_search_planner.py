"""The planner's proof (store/planner.py `suspects`): when a graph walk's answer can be
proven from the query's neighbourhood, and what still has to be ruled out."""

from __future__ import annotations

from collections.abc import Callable

from sidecar.store import Search
from sidecar.store.planner import SCAN_BELOW, neighbourhood, suspects, worth_a_neighbourhood

AROUND = [(f"n{i}", 1.0 - i / 100) for i in range(100)]  # scores 1.00 down to 0.01


def test_a_walk_inside_the_neighbourhood_that_returned_every_nearer_point_is_proven() -> None:
    assert suspects(AROUND[:10], AROUND, 100) == []


def test_neighbours_nearer_than_the_walks_worst_it_skipped_are_suspects() -> None:
    walked = [p for p in AROUND[:12] if p[0] not in ("n3", "n7")]
    assert suspects(walked, AROUND, 100) == ["n3", "n7"]
    # A neighbour tied with the walk's worst is a suspect too: the filter may admit it.
    twin = [*AROUND[:5], ("twin", AROUND[4][1]), *AROUND[5:99]]
    assert suspects(AROUND[:5], twin, 100) == ["twin"]


def test_nothing_proves_a_walk_that_reaches_the_edge_or_a_thin_neighbourhood() -> None:
    # Its worst is as far as the neighbourhood's farthest: a point outside may tie.
    assert suspects(AROUND[90:], AROUND, 100) is None
    far = [("x", 0.001)]
    assert suspects(far, AROUND, 100) is None
    # The tenant has fewer points than the neighbourhood holds: not a neighbourhood.
    assert suspects(AROUND[:10], AROUND[:50], 100) is None
    assert suspects([], AROUND, 100) is None


def test_the_neighbourhood_is_looked_at_only_above_the_scan_bound_and_when_on() -> None:
    asked: list[int] = []

    def estimate(n: int) -> Callable[[], int]:
        def counted() -> int:
            asked.append(n)
            return n

        return counted

    on = Search(exact_below=20_000, neighbourhood=True)
    assert worth_a_neighbourhood(on, 12, estimate(SCAN_BELOW + 1))
    assert not worth_a_neighbourhood(on, 12, estimate(SCAN_BELOW))
    # A round wanting more than the least neighbourhood widens it.
    assert neighbourhood(12) == 100
    assert neighbourhood(40) == 160
    off = [Search(exact_below=0, neighbourhood=True), Search(exact_below=20_000)]
    before = len(asked)
    assert not any(worth_a_neighbourhood(s, 12, estimate(10**6)) for s in off)
    assert len(asked) == before  # the estimate is not even asked
