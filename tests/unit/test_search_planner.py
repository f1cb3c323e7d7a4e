"""The planner's proof (store/planner.py `suspects`): when a graph walk's answer can be
proven from the query's neighbourhood, and what still has to be ruled out."""

from __future__ import annotations

from sidecar.store import Search
from sidecar.store.planner import neighbourhood, suspects, unproven, way

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
    on = Search(exact_below=20_000, neighbourhood=True, unproven_exact_below=200_000)
    assert way(on, 12, on.neighbourhood_above + 1) == "neighbourhood"
    assert way(on, 12, on.neighbourhood_above) == "exact"
    assert way(on, 12, 10**6) == "neighbourhood"
    # A round wanting more than the least neighbourhood widens it.
    assert neighbourhood(12) == 100
    assert neighbourhood(40) == 160
    assert way(on, 3_000, 11_000) == "exact"  # no more than the neighbourhood would hold
    # Off: exact up to the bound, a walk above it; not estimated (0): Qdrant decides.
    off = Search(exact_below=20_000)
    assert (way(off, 12, 20_000), way(off, 12, 20_001)) == ("exact", "graph")
    assert way(Search(exact_below=0, neighbourhood=True), 12, None) == "graph"


def test_a_search_the_neighbourhood_cannot_prove_is_exact_within_its_bound() -> None:
    tuning = Search(exact_below=20_000, neighbourhood=True, unproven_exact_below=200_000)
    assert unproven(tuning, 90_000) == "exact"
    assert unproven(tuning, 200_000) == "exact"
    assert unproven(tuning, 200_001) == "graph"
    # The bound is never below exact_below's: what would be exact at once stays exact.
    assert unproven(Search(exact_below=20_000, neighbourhood=True), 20_000) == "exact"
    assert unproven(Search(exact_below=20_000, neighbourhood=True), 20_001) == "graph"
