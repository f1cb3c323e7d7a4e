"""The planner's proofs (store/planner.py): when the nearest admitted points of the
query's neighbourhood are the nearest admitted points of the whole tenant (`proven`),
and when those of the sieve's scan are the whole filter's (`sifted`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from qdrant_client import models as qm

from sidecar.store import Search
from sidecar.store.planner import (
    MOST_SKIPPED,
    Proofs,
    beam,
    filter_key,
    looked_above,
    neighbourhood,
    proven,
    remembered,
    sieve,
    sifted,
    sifts,
    sized,
    unproven,
    way,
)
from sidecar.store.scope import Scope

AROUND = [1.0 - i / 100 for i in range(100)]  # the neighbourhood's scores, 1.00 to 0.01


def test_enough_admitted_points_nearer_than_the_neighbourhoods_edge_are_proven() -> None:
    assert proven(AROUND[3:13], AROUND, 100, 10)
    # Scattered through the neighbourhood, as long as the last is inside its edge.
    assert proven(AROUND[::9][:10], AROUND, 100, 10)


def test_nothing_proves_an_answer_that_reaches_the_edge_or_a_thin_neighbourhood() -> None:
    # The last admitted point is as far as the neighbourhood's farthest: one outside
    # may tie it.
    assert not proven(AROUND[90:], AROUND, 100, 10)
    # Too few admitted: the rest of the answer lies outside, unseen.
    assert not proven(AROUND[:9], AROUND, 100, 10)
    assert not proven([], AROUND, 100, 10)
    # The tenant has fewer points than the neighbourhood holds: not a neighbourhood.
    assert not proven(AROUND[:10], AROUND[:50], 100, 10)
    assert not proven([], [], 100, 10)


def test_ties_are_left_to_a_scan() -> None:
    # Which of two equal points comes first, or makes the cut, is the engine's visiting
    # order, which differs between the two ways: records the asker may not read would
    # choose, by choosing the way.
    assert proven(AROUND[3:14], AROUND, 100, 10)  # the eleventh only tells the cut
    tied_inside = [*AROUND[3:7], AROUND[6], *AROUND[7:12]]
    assert not proven(tied_inside, AROUND, 100, 10)
    tied_at_the_cut = [*AROUND[3:13], AROUND[12]]
    assert not proven(tied_at_the_cut, AROUND, 100, 10)
    # Beyond the cut, a tie decides nothing.
    assert proven([*AROUND[3:14], AROUND[13]], AROUND, 100, 10)


def test_a_score_threshold_beyond_the_edge_proves_a_shorter_answer() -> None:
    # Every point outside scores at most 0.01, below the threshold: none would be shown.
    assert proven(AROUND[:3], AROUND, 100, 10, score_threshold=0.5)
    # Not when a point outside could still reach the threshold.
    assert not proven(AROUND[:3], AROUND, 100, 10, score_threshold=0.01)
    assert not proven(AROUND[:3], AROUND, 100, 10, score_threshold=0.005)


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


def test_a_smaller_tenants_neighbourhood_is_looked_at_sooner_with_a_narrower_beam() -> None:
    on = Search(exact_below=20_000, neighbourhood=True, unproven_exact_below=200_000)
    # 10k points: above a third of them, with a beam of 200.
    assert looked_above(on, 10_000) == 3_333
    assert way(on, 12, 3_334, 10_000) == "neighbourhood"
    assert way(on, 12, 3_333, 10_000) == "exact"
    assert way(on, 12, 9_000) == "exact"  # not counted: the configured bound
    assert beam(on, 100, 10_000) == 200
    # Never above the configured bound or beam, never below what the neighbourhood holds.
    assert looked_above(on, 10**6) == on.neighbourhood_above
    assert beam(on, 100, 10**6) == beam(on, 100) == 400
    assert beam(on, 100, 1_000) == 100
    assert beam(replace(on, hnsw_ef=300), 100, 10_000) == 300
    assert way(on, 12, 100, 150) == "exact"
    # Counted only where it can change the way.
    assert sized(on, 12, 9_000)
    assert not sized(on, 12, 100)
    assert not sized(on, 12, on.neighbourhood_above + 1)
    assert not sized(on, 12, None)
    assert not sized(replace(on, neighbourhood=False), 12, 9_000)


def test_a_search_the_neighbourhood_cannot_prove_is_exact_within_its_bound() -> None:
    tuning = Search(exact_below=20_000, neighbourhood=True, unproven_exact_below=200_000)
    assert unproven(tuning, 90_000) == "exact"
    assert unproven(tuning, 200_000) == "exact"
    assert unproven(tuning, 200_001) == "graph"
    # The bound is never below exact_below's: what would be exact at once stays exact.
    assert unproven(Search(exact_below=20_000, neighbourhood=True), 20_000) == "exact"
    assert unproven(Search(exact_below=20_000, neighbourhood=True), 20_001) == "graph"


def test_the_servers_neighbourhood_stays_within_what_a_query_may_ask() -> None:
    from sidecar.store.server import UNDERSAMPLED_FROM, _QueryBounds

    assert _QueryBounds().admit(400, 800)
    # Several shards undersample a search from 128 points on: a neighbour could go.
    assert _QueryBounds(shards=3).admit(UNDERSAMPLED_FROM - 1, 400)
    assert not _QueryBounds(shards=3).admit(UNDERSAMPLED_FROM, 400)
    # Strict mode's limits would refuse the query outright.
    assert not _QueryBounds(max_hnsw_ef=256).admit(100, 400)
    assert not _QueryBounds(max_limit=64).admit(100, 400)
    assert _QueryBounds(max_limit=100, max_hnsw_ef=400).admit(100, 400)
    assert not _QueryBounds(exact_allowed=False).admit(100, 400)


def _tried(proofs: Proofs, key: object, searches: int, proves: bool = False) -> list[int]:
    """Which of `searches` searches under `key` look at the neighbourhood, which then
    proves or declines (`proves`)."""
    tried = []
    for search in range(searches):
        if proofs.worth_trying(key):
            tried.append(search)
            proofs.heard(key, proves)
    return tried


def test_a_filter_the_neighbourhood_declined_for_skips_it_twice_as_long_each_time() -> None:
    proofs = Proofs()
    assert _tried(proofs, "far", 40) == [0, 2, 5, 10, 19, 36]
    # Then once in MOST_SKIPPED + 1, for good (29 of the 32 skips were still to come).
    assert _tried(proofs, "far", 3 * (MOST_SKIPPED + 1)) == [29, 62, 95]
    # Each filter on its own; one the neighbourhood proves for is never skipped.
    assert _tried(proofs, "near", 10, proves=True) == list(range(10))


def test_a_proof_forgets_the_declines() -> None:
    proofs = Proofs()
    assert _tried(proofs, "k", 11) == [0, 2, 5, 10]
    skipped = [proofs.worth_trying("k") for _ in range(8)]
    assert skipped == [False] * 8
    assert proofs.worth_trying("k")
    proofs.heard("k", True)
    assert all(proofs.worth_trying("k") for _ in range(5))


def test_only_so_many_filters_are_remembered() -> None:
    proofs = Proofs(size=2)
    for key in ("a", "b", "c"):
        proofs.heard(key, False)
    assert proofs.worth_trying("a")  # forgotten: tried again
    assert not proofs.worth_trying("c")


def test_the_key_leaves_out_the_instant_asked_about_and_ids() -> None:
    now = datetime.now(UTC)
    asker = Scope(tenant="acme", current_at=now, audience_any_of=(("bob",),))
    later = replace(asker, current_at=now + timedelta(seconds=3))
    assert filter_key(asker) == filter_key(later)
    assert filter_key(asker) != filter_key(replace(asker, audience_any_of=(("carol",),)))
    # A search of every version (no instant) admits other points than a current one.
    assert filter_key(asker) != filter_key(replace(asker, current_at=None))
    caller = qm.Filter(must=[qm.FieldCondition(key="n", match=qm.MatchValue(value=1))])
    other = qm.Filter(must=[qm.FieldCondition(key="n", match=qm.MatchValue(value=2))])
    assert filter_key(replace(asker, caller=caller)) == filter_key(replace(later, caller=caller))
    assert filter_key(replace(asker, caller=caller)) != filter_key(replace(asker, caller=other))
    assert filter_key(replace(asker, only=("r1",))) is None


def test_declines_are_remembered_only_where_a_skipped_search_is_exact_and_unexcluded() -> None:
    tuning = Search(exact_below=20_000, neighbourhood=True, unproven_exact_below=200_000)
    asker = Scope(tenant="acme", current_at=datetime.now(UTC), audience_any_of=(("bob",),))
    assert remembered(tuning, 150_000, asker, excluding=False) == filter_key(asker)
    # Above the scan's bound a skipped search would walk the graph: never skipped.
    assert remembered(tuning, 250_000, asker, excluding=False) is None
    # A later over-fetch round leaves the nearest out: what it finds is not remembered.
    assert remembered(tuning, 150_000, asker, excluding=True) is None


WIDE = [1.0 - i / 100 for i in range(30)]  # the sieve's scan: 1.00 to 0.71, 30 points


def test_the_sieves_answer_is_proven_inside_its_farthest_point() -> None:
    assert sieve(10) == len(WIDE)
    assert sifted(WIDE[5:16], WIDE, 30, 10)
    # Ten admitted, the last as far as the scan reached: a point beyond may tie it.
    assert not sifted(WIDE[20:], WIDE, 30, 10)
    # Too few of the scan's points admitted: the rest of the answer lies beyond it.
    assert not sifted(WIDE[:9], WIDE, 30, 10)
    assert not sifted([], WIDE, 30, 10)


def test_a_scan_that_found_everything_the_audience_admits_proves_any_answer() -> None:
    # Fewer than asked for: nothing lies beyond them, however few the filter kept.
    assert sifted(WIDE[20:25], WIDE[:25], 30, 10)
    assert sifted([], WIDE[:3], 30, 10)


def test_the_sieve_leaves_ties_to_the_whole_scan() -> None:
    tied = [0.9, 0.8, 0.8, *WIDE[25:]]
    assert not sifted(tied, WIDE, 30, 3)
    # The last kept ties the next admitted one: which of them is shown is the scan's.
    assert not sifted([0.95, 0.9, 0.85, 0.85], WIDE, 30, 3)
    assert not sifted([0.9, 0.9], WIDE[:2], 30, 10)


def test_only_an_exact_search_of_many_points_goes_through_the_sieve() -> None:
    on = Search(exact_below=20_000, sieve=True, sieve_above=4_000)
    assert sifts(on, 10, 4_001)
    assert not sifts(on, 10, 4_000)
    assert not sifts(on, 10, None)
    assert not sifts(replace(on, sieve=False), 10, 9_000)
    # Nothing wanted: the scan answers (nothing), not a proof of nothing.
    assert not sifts(on, 0, 9_000)
    assert not sifted([], WIDE, 30, 0)
    assert not proven([], AROUND, 100, 0)
