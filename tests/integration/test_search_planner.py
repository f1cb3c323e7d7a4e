"""The search planner (store/planner.py) on the embedded engine: where the records a
filter admits lie around the query, their nearest are proven from the query's own
neighbourhood, and equal exact search's; where they lie far from it (or are few), the
neighbourhood declines and the search stays exact.

The benchmark's corpus (sidecar/bench/corpus.py), 10k clustered 384-dim vectors: the
`random` 90 % asker reads records all around every query; the `far` 90 % asker reads
none in the clusters the queries come from (where a filtered graph walk misses them:
tests/integration/test_search_tuning.py).
"""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe
from qdrant_client import models as qm

from sidecar.bench.corpus import DIM, Corpus, asker, build, put
from sidecar.store import Search, Store, planner
from sidecar.store.edge import EdgeStore, _edge_filter
from sidecar.store.planner import way
from sidecar.store.schema import point_id
from sidecar.store.scope import Scope, to_qdrant
from sidecar.store.server import ServerStore

N = 10_000
# At 10k every asker reads at most 9 000 records, under the served bound: look around
# above 2 000 here.
PLANNED = Search(exact_below=N, neighbourhood=True, neighbourhood_above=2_000)
# As served: the neighbourhood above a third of the tenant's 10k points, beam 200.
SHIPPED = Search(exact_below=20_000, neighbourhood=True, unproven_exact_below=200_000)
QUERIES = 20
NEAR, FAR, FEW = asker("random", 0.90), asker("far", 0.90), asker("random", 0.05)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build(N, QUERIES, seed=11)


@pytest.fixture(scope="module")
async def store(
    tmp_path_factory: pytest.TempPathFactory, corpus: Corpus
) -> AsyncIterator[EdgeStore]:
    folder: Path = tmp_path_factory.mktemp("planner")
    opened = EdgeStore(folder / "store", DIM, optimize_interval_s=3600)
    await opened.open()
    await put(opened, corpus)
    await opened.optimize()
    yield opened
    await opened.close()


def _scope(who: str) -> Scope:
    return Scope(tenant="acme", current_at=datetime.now(UTC), audience_any_of=((who,),))


def _proof(store: EdgeStore, corpus: Corpus, who: str, q: int, limit: int = 10) -> list[int] | None:
    """What the neighbourhood proved, when the planner looks at it at all."""
    flt = _edge_filter(_scope(who), ())
    chosen, _, points = store._plan(flt, "acme", limit)
    if chosen != "neighbourhood":
        return None
    found = store._nearest_by_neighbourhood(
        corpus.queries[q].tolist(), flt, "acme", limit, None, False, points
    )
    return None if found is None else [p.payload["index"] for p in found]


async def _searched(store: Store, corpus: Corpus, who: str, q: int) -> list[int]:
    hits = await store.search(corpus.queries[q].tolist(), _scope(who), 10)
    return [h.payload["index"] for h in hits]


Item = tuple[dict[str, Any], Any]


def _record(number: int, vector: Any, audience: list[str], tenant: str = "acme", **at: str) -> Item:
    """A record as the corpus's are stored (corpus.put), numbered `number`; `at`: its
    times beside the default `valid_at`."""
    payload: dict[str, Any] = {
        "id": str(uuid.UUID(int=number + 1)),
        "tenant": tenant,
        "valid_at": "2026-10-01T00:00:00Z",
        "audience": audience,
        "index": number,
    }
    return payload | at, {"": np.asarray(vector).tolist()}


def _twins(vector: Any, first: int) -> list[Item]:
    """Twenty records of the near asker's holding one vector, numbered from `first`."""
    return [_record(first + k, vector, [NEAR]) for k in range(20)]


def _beside_queries(corpus: Corpus, first: int, each: int) -> Iterator[tuple[int, int, Any]]:
    """`each` vectors right beside every query, nearer than anything in the corpus:
    (their number, counted from `first`; which of the `each`; the vector)."""
    for q in range(QUERIES):
        for copy in range(each):
            nudged = corpus.queries[q] + 0.01 * (copy + 1) * corpus.vectors[copy]
            yield first + q * each + copy, copy, nudged / (nudged**2).sum() ** 0.5


def _hidden_beside_queries(corpus: Corpus, first: int) -> list[Item]:
    """Records no sweep asker may read, 30 right beside every query (nearer than
    anything an asker may read), numbered from `first`."""
    return [_record(n, v, ["someone-else"]) for n, _, v in _beside_queries(corpus, first, 30)]


async def test_records_around_the_query_are_proven_from_its_neighbourhood(
    store: EdgeStore, corpus: Corpus
) -> None:
    store.search_tuning = PLANNED
    for q in range(QUERIES):
        proven = _proof(store, corpus, NEAR, q)
        assert proven is not None, q
        # The true nearest (exact cosine over the asker's records, numpy).
        assert corpus.recall_at_10(NEAR, q, proven) == 1.0, q
        assert corpus.leaks(NEAR, proven) == 0
        # And what a recall is answered with.
        assert await _searched(store, corpus, NEAR, q) == proven


async def test_far_or_few_records_are_not_proven_and_are_searched_exactly(
    store: EdgeStore, corpus: Corpus
) -> None:
    store.search_tuning = PLANNED
    for q in range(QUERIES):
        # Nothing the far asker may read is near the query: no proof, exact search.
        assert _proof(store, corpus, FAR, q) is None, q
        assert corpus.recall_at_10(FAR, q, await _searched(store, corpus, FAR, q)) == 1.0
        # 500 records: cheaper to score them all than to look around first.
        assert _proof(store, corpus, FEW, q) is None, q
        assert corpus.recall_at_10(FEW, q, await _searched(store, corpus, FEW, q)) == 1.0


async def test_the_planner_is_off_when_the_choice_is_left_to_qdrant(
    store: EdgeStore, corpus: Corpus
) -> None:
    for tuning in (replace(PLANNED, exact_below=0), replace(PLANNED, neighbourhood=False)):
        store.search_tuning = tuning
        assert _proof(store, corpus, NEAR, 0) is None, tuning


@pytest.mark.parametrize("tuning", [PLANNED, SHIPPED], ids=["beam-400", "shipped-beam-200"])
async def test_records_the_asker_may_not_read_change_nothing_they_are_answered(
    store: EdgeStore, corpus: Corpus, tuning: Search
) -> None:
    # Noninterference on the planner's path: records hidden from the asker, written
    # right beside every query (nearer than anything the asker may read), fill the
    # neighbourhood the proof reads; the answer must stay the true nearest of what
    # the asker may read, record for record.
    store.search_tuning = tuning
    store.proofs = planner.Proofs()
    before = [await _searched(store, corpus, NEAR, q) for q in range(QUERIES)]
    assert [_proof(store, corpus, NEAR, q) for q in range(QUERIES)] == before
    hidden = _hidden_beside_queries(corpus, N)
    await store.put("acme", hidden)
    await store.optimize()
    try:
        after = [await _searched(store, corpus, NEAR, q) for q in range(QUERIES)]
        assert after == before
        # The hidden records did reach the planner: they are the nearest of the
        # neighbourhood (a third of it, which the filter then refuses), and it still
        # proves.
        everyone = Scope(tenant="acme", current_at=datetime.now(UTC))
        for q in range(QUERIES):
            nearest = await store.search(corpus.queries[q].tolist(), everyone, 30)
            assert {h.payload["index"] for h in nearest} == set(range(N + q * 30, N + q * 30 + 30))
            assert _proof(store, corpus, NEAR, q) == before[q]
    finally:
        await store.delete("acme", [uuid.UUID(str(p["id"])) for p, _ in hidden])
        await store.optimize()


async def test_what_the_neighbourhood_cannot_prove_is_exact_above_the_scan_bound(
    store: EdgeStore, corpus: Corpus
) -> None:
    # 9 000 records, all far from every query, above a scan bound of 2 000: the
    # neighbourhood holds none of them, and a filtered walk misses (the control).
    walked = replace(PLANNED, exact_below=2_000, unproven_exact_below=0)
    store.search_tuning = walked
    missed = [
        corpus.recall_at_10(FAR, q, await _searched(store, corpus, FAR, q)) for q in range(QUERIES)
    ]
    assert sum(missed) / QUERIES < 0.95
    store.search_tuning = replace(walked, unproven_exact_below=N)
    for q in range(QUERIES):
        assert _proof(store, corpus, FAR, q) is None, q
        assert corpus.recall_at_10(FAR, q, await _searched(store, corpus, FAR, q)) == 1.0, q


class _Counted:
    """The engine's shard, its searches and counts counted on the way through."""

    def __init__(self, shard: Any) -> None:
        self.shard, self.calls = shard, Counter[str]()

    def query(self, request: Any) -> Any:
        self.calls["query"] += 1
        return self.shard.query(request)

    def count(self, request: Any) -> Any:
        self.calls["count"] += 1
        return self.shard.count(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.shard, name)


@contextlib.contextmanager
def _counting(store: EdgeStore) -> Iterator[_Counted]:
    """The store's engine calls counted while inside."""
    engine = store._shard
    counted = _Counted(engine)
    store._shard = counted  # type: ignore[assignment]
    try:
        yield counted
    finally:
        store._shard = engine


async def test_a_proven_search_costs_the_neighbourhood_and_one_small_exact_search(
    store: EdgeStore, corpus: Corpus
) -> None:
    # The cost the planner is for: whatever the filter admits, a proven answer reads
    # the engine twice (the neighbourhood, then the admitted among it, scored exactly),
    # besides the estimate; no walk of the graph under the filter and no count.
    store.search_tuning = PLANNED
    with _counting(store) as counted:
        for q in range(QUERIES):
            counted.calls.clear()
            found = await _searched(store, corpus, NEAR, q)
            assert corpus.recall_at_10(NEAR, q, found) == 1.0, q
            assert counted.calls == {"count": 1, "query": 2}, (q, counted.calls)


async def test_a_filter_the_neighbourhood_declined_for_skips_it_for_a_while(
    store: EdgeStore, corpus: Corpus
) -> None:
    # The far asker's neighbourhood never proves: it costs a search the neighbourhood
    # and the admitted among it before the scan. Remembered (planner.Proofs), the
    # next searches under the same filter skip them, a while longer after each
    # decline; the near asker's searches, proven, never skip.
    store.search_tuning = PLANNED
    store.proofs = planner.Proofs()
    looked: dict[str, list[int]] = {FAR: [], NEAR: []}
    with _counting(store) as counted:
        for search in range(24):
            for who in (FAR, NEAR):
                counted.calls.clear()
                found = await _searched(store, corpus, who, search % QUERIES)
                assert corpus.recall_at_10(who, search % QUERIES, found) == 1.0, (who, search)
                if counted.calls["query"] > 1 or who == NEAR:
                    looked[who].append(search)
                # Proven: two queries; declined: three (the scan after); skipped: one.
                expected = 2 if who == NEAR else (3 if search in (0, 2, 5, 10, 19) else 1)
                assert counted.calls["query"] == expected, (who, search, counted.calls)
    assert looked == {FAR: [0, 2, 5, 10, 19], NEAR: list(range(24))}


async def test_equal_records_are_shown_alike_whichever_way_the_search_takes(
    store: EdgeStore, corpus: Corpus
) -> None:
    """Identical texts embed identically: twenty of the asker's records hold the
    query's own vector. Which ten of them the asker is shown, and in what order, must
    not depend on the way the search takes, which records hidden from them decide."""
    q, first = 0, N + 5_000
    hidden_from = first + 100
    twins = _twins(corpus.queries[q], first)
    # Nearer than anything else but the twins, and hidden: enough of them fill the
    # neighbourhood that no proof holds, and the search scans.
    rng = np.random.default_rng(5)
    nudged = corpus.queries[q] + 0.02 * rng.standard_normal((95, DIM))
    hidden = [
        _record(hidden_from + k, v / np.linalg.norm(v), ["someone-else"])
        for k, v in enumerate(nudged)
    ]
    await store.put("acme", twins)
    await store.optimize()
    try:
        store.search_tuning = PLANNED
        planned = await _searched(store, corpus, NEAR, q)
        assert set(planned) <= {first + k for k in range(20)}
        store.search_tuning = replace(PLANNED, neighbourhood=False)
        assert await _searched(store, corpus, NEAR, q) == planned
        await store.put("acme", hidden)
        await store.optimize()
        store.search_tuning = PLANNED
        assert await _searched(store, corpus, NEAR, q) == planned
    finally:
        gone = [uuid.UUID(str(p["id"])) for p, _ in [*twins, *hidden]]
        await store.delete("acme", gone)
        await store.optimize()


async def test_a_smaller_tenants_neighbourhood_is_read_below_the_configured_bound(
    store: EdgeStore, corpus: Corpus
) -> None:
    # As shipped (neighbourhood above 10 000 admitted points), 10k points: the tenant's
    # size is counted and the 9 000-point asker's neighbourhood read (a third of the
    # tenant's points, with a beam of 200: planner.looked_above, planner.beam). Proven,
    # and the exact answer; the 500-point asker's, below a third, is searched exactly.
    assert SHIPPED.neighbourhood_above > 9_000
    store.search_tuning = SHIPPED
    store.proofs = planner.Proofs()
    with _counting(store) as counted:
        for q in range(QUERIES):
            counted.calls.clear()
            found = await _searched(store, corpus, NEAR, q)
            assert corpus.recall_at_10(NEAR, q, found) == 1.0, q
            # The estimate, the tenant's points; the neighbourhood, the admitted among it.
            assert counted.calls == {"count": 2, "query": 2}, (q, counted.calls)
            counted.calls.clear()
            few = await _searched(store, corpus, FEW, q)
            assert corpus.recall_at_10(FEW, q, few) == 1.0, q
            assert counted.calls == {"count": 2, "query": 1}, (q, counted.calls)


# The sieve (planner.py): an exact search of many points scans under the asker's
# audience alone first. Above 1 000 points here, the neighbourhood off: every search
# below is exact.
SIEVED = Search(exact_below=N, sieve=True, sieve_above=1_000)
SOME = asker("random", 0.20)


async def test_the_sieve_answers_what_the_whole_scan_answers(
    store: EdgeStore, corpus: Corpus
) -> None:
    store.sieves = planner.Proofs()
    with _counting(store) as counted:
        for who in (NEAR, FAR, SOME):
            for q in range(QUERIES):
                store.search_tuning = replace(SIEVED, sieve=False)
                whole = await _searched(store, corpus, who, q)
                store.search_tuning = SIEVED
                counted.calls.clear()
                assert await _searched(store, corpus, who, q) == whole, (who, q)
                assert corpus.recall_at_10(who, q, whole) == 1.0, (who, q)
                # The estimate, the tenant's points and the store's (the tenant is alone),
                # the scan under the audience, the filter among its points.
                assert counted.calls == {"count": 3, "query": 2}, (who, q, counted.calls)


def _audience_admits_filter_refuses(
    corpus: Corpus, first: int, each: int, tenant: str = "acme"
) -> list[Item]:
    """`each` records beside every query, nearer than anything the asker may read and
    naming the asker in their audience, that the rest of the filter refuses: of acme,
    superseded versions (invalid since November) and records not valid yet; of another
    tenant, records valid now."""
    refused = []
    for number, copy, vector in _beside_queries(corpus, first, each):
        at = {}
        if tenant == "acme":
            at = (
                {"valid_at": "2999-01-01T00:00:00Z"}
                if copy % 2
                else {"invalid_at": "2026-11-01T00:00:00Z"}
            )
        refused.append(_record(number, vector, [NEAR], tenant, **at))
    return refused


def _watch_the_sieve(store: EdgeStore) -> list[bool]:
    """Whether each search the sieve stood before proved its answer (in order)."""
    proofs: list[bool] = []
    sift = store._nearest_by_sieve

    def watched(*args: Any) -> Any:
        found = sift(*args)
        proofs.append(found is not None)
        return found

    store._nearest_by_sieve = watched  # type: ignore[method-assign,assignment]
    return proofs


@pytest.mark.parametrize("each", [5, 25], ids=["a-few-sifted", "most-of-the-sieve"])
async def test_what_the_audience_admits_and_the_filter_refuses_changes_no_answer(
    store: EdgeStore, corpus: Corpus, each: int
) -> None:
    # Noninterference through the sieve: the points it scans first are the audience's,
    # whatever else the filter says of them. A few beside the query leave the sieve
    # enough of the asker's own to prove the answer; 25 of its 30 leave too few, and
    # the whole scan answers. Either way, record for record what it answered before.
    store.search_tuning = SIEVED
    store.sieves = planner.Proofs()
    before = [await _searched(store, corpus, NEAR, q) for q in range(QUERIES)]
    refused = _audience_admits_filter_refuses(corpus, 2 * N + 1_000 * each, each)
    await store.put("acme", refused)
    await store.optimize()
    proofs = _watch_the_sieve(store)
    try:
        for q in range(QUERIES):
            store.sieves = planner.Proofs()
            assert await _searched(store, corpus, NEAR, q) == before[q], q
        assert proofs == [each < 10] * QUERIES
    finally:
        del store._nearest_by_sieve
        await store.delete("acme", [uuid.UUID(str(p["id"])) for p, _ in refused])
        await store.optimize()


async def test_another_tenants_records_keep_the_sieve_out(store: EdgeStore, corpus: Corpus) -> None:
    # Audience entries are names another tenant may use too. Its records would be
    # scored in the sieve's scan, however many, and would decide whether it proves, so
    # that its time would tell where they lie: where the store holds another tenant's
    # points the sieve is not used at all, and the whole scan answers as before.
    store.search_tuning = SIEVED
    store.sieves = planner.Proofs()
    before = [await _searched(store, corpus, NEAR, q) for q in range(QUERIES)]
    theirs = _audience_admits_filter_refuses(corpus, 4 * N, 5, tenant="globex")
    await store.put("globex", theirs)
    await store.optimize()
    proofs = _watch_the_sieve(store)
    try:
        for q in range(QUERIES):
            assert await _searched(store, corpus, NEAR, q) == before[q], q
        assert proofs == []
    finally:
        del store._nearest_by_sieve
        await store.delete("globex", [uuid.UUID(str(p["id"])) for p, _ in theirs])
        await store.optimize()
    # The store is acme's alone again: the sieve is back.
    await _searched(store, corpus, NEAR, 0)
    assert store.sieves._declined.get(planner.filter_key(_scope(NEAR))) is None


class _WritesBetween(_Counted):
    """The shard, with `write` made (as a write is, counted: EdgeStore._write) right
    after the first query of the next search: a write from another request, taking the
    GIL between the two engine calls of a sieve or a neighbourhood."""

    def __init__(self, store: EdgeStore, write: Any) -> None:
        super().__init__(store._shard)
        self.store, self.write = store, write

    def query(self, request: Any) -> Any:
        found = super().query(request)
        if self.write is not None:
            write, self.write = self.write, None
            self.store._write(self.shard.update, write)
        return found


@pytest.mark.parametrize("tuning", [SIEVED, SHIPPED], ids=["sieve", "neighbourhood"])
async def test_a_write_between_a_searchs_two_engine_calls_is_not_half_seen(
    store: EdgeStore, corpus: Corpus, tuning: Search
) -> None:
    # The nearest record is superseded and a nearer one written between the two calls:
    # the first call saw the old state, the second would judge its points by the new
    # one (the old record refused, the new one never among them). The search declines
    # and the scan answers: what a scan after the write answers.
    q = 3
    store.search_tuning = tuning
    store.sieves, store.proofs = planner.Proofs(), planner.Proofs()
    hits = await store.search(corpus.queries[q].tolist(), _scope(NEAR), 10)
    nearest = hits[0].payload
    newer, vectors = _record(5 * N, corpus.queries[q], [NEAR])
    engine = store._shard
    point = qe.Point(point_id("acme", newer["id"]), vectors, newer)
    store._shard = _WritesBetween(store, qe.UpdateOperation.upsert_points([point]))  # type: ignore[assignment]
    try:
        first = await _searched(store, corpus, NEAR, q)
        store._shard = _WritesBetween(store, None)  # type: ignore[assignment]
        record = point_id("acme", str(nearest["id"]))
        supersede = qe.UpdateOperation.set_payload([record], {"invalid_at": "2026-11-01T00:00:00Z"})
        store._shard = _WritesBetween(store, supersede)  # type: ignore[assignment]
        # The first search's decline is remembered: forgotten, so this one takes two calls.
        store.sieves, store.proofs = planner.Proofs(), planner.Proofs()
        second = await _searched(store, corpus, NEAR, q)
        store._shard = engine
        assert first[0] == 5 * N
        assert second == await _searched(store, corpus, NEAR, q)
        assert nearest["index"] not in second
        assert 5 * N in second
    finally:
        store._shard = engine
        await store.delete("acme", [uuid.UUID(newer["id"])])
        await store.clear("acme", uuid.UUID(str(nearest["id"])), ["invalid_at"])
        await store.optimize()


async def test_the_sieve_shows_equal_records_as_the_whole_scan_does(
    store: EdgeStore, corpus: Corpus
) -> None:
    q, first = 2, 3 * N
    twins = _twins(corpus.queries[q], first)
    await store.put("acme", twins)
    await store.optimize()
    try:
        store.search_tuning = replace(SIEVED, sieve=False)
        whole = await _searched(store, corpus, NEAR, q)
        assert set(whole) <= {first + k for k in range(20)}
        store.search_tuning = SIEVED
        store.sieves = planner.Proofs()
        assert await _searched(store, corpus, NEAR, q) == whole
    finally:
        await store.delete("acme", [uuid.UUID(str(p["id"])) for p, _ in twins])
        await store.optimize()


# The server backend plans the same way (store/server.py `_nearest`), in round trips.
ON_THE_SERVER = 3_000
SERVER_PLANNED = replace(PLANNED, neighbourhood_above=500)


@pytest.fixture(scope="module")
def server_corpus() -> Corpus:
    return build(ON_THE_SERVER, QUERIES, seed=12)


@pytest.fixture(scope="module")
async def server(qdrant_server: Any, server_corpus: Corpus) -> AsyncIterator[ServerStore]:
    opened = ServerStore.connect(
        [qdrant_server.url], f"test_planner_{uuid.uuid4().hex[:8]}", DIM, search=SERVER_PLANNED
    )
    await opened.open()
    await put(opened, server_corpus)
    yield opened
    await opened.close()


async def _server_proof(server: ServerStore, corpus: Corpus, who: str, q: int) -> list[int] | None:
    flt = to_qdrant(_scope(who), ())
    assert way(server.search_tuning, 10, await server._estimate(flt)) == "neighbourhood"
    found = await server._nearest_by_neighbourhood(
        corpus.queries[q].tolist(), flt, "acme", 10, None, False
    )
    return None if found is None else [p.payload["index"] for p in found if p.payload]


async def test_the_server_proves_what_lies_around_the_query(
    server: ServerStore, server_corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    proofs: list[bool] = []
    prove = server._nearest_by_neighbourhood

    async def watched(*args: Any) -> Any:
        found = await prove(*args)
        proofs.append(found is not None)
        return found

    for q in range(QUERIES):
        proven = await _server_proof(server, server_corpus, NEAR, q)
        assert proven is not None, q
        assert server_corpus.recall_at_10(NEAR, q, proven) == 1.0, q
        with monkeypatch.context() as patched:
            patched.setattr(server, "_nearest_by_neighbourhood", watched)
            assert await _searched(server, server_corpus, NEAR, q) == proven
        assert proofs.pop() is True, q  # and a recall took the proven way
        # Proven from the few of its records among the neighbours, or scanned: the true
        # nearest either way.
        far = await _searched(server, server_corpus, FAR, q)
        assert server_corpus.recall_at_10(FAR, q, far) == 1.0, q
        assert server_corpus.leaks(FAR, far) == 0


async def test_the_server_leaves_ties_to_a_scan(server: ServerStore, server_corpus: Corpus) -> None:
    q, first = 1, ON_THE_SERVER + 1_000
    twins = _twins(server_corpus.queries[q], first)
    await server.put("acme", twins)
    try:
        assert await _server_proof(server, server_corpus, NEAR, q) is None
        planned = await _searched(server, server_corpus, NEAR, q)
        assert set(planned) <= {first + k for k in range(20)}
        server.search_tuning = replace(SERVER_PLANNED, neighbourhood=False)
        assert await _searched(server, server_corpus, NEAR, q) == planned
    finally:
        server.search_tuning = SERVER_PLANNED
        await server.delete("acme", [uuid.UUID(str(p["id"])) for p, _ in twins])


async def test_the_server_plans_within_strict_modes_limits(
    server: ServerStore, server_corpus: Corpus
) -> None:
    # A beam above strict mode's `search_max_hnsw_ef` is refused (400): the neighbourhood
    # is not asked for then, and the search goes the way an unproven one does.
    strict = qm.StrictModeConfig(enabled=True, search_max_hnsw_ef=256)
    await server._call(lambda c: c.update_collection(server.collection, strict_mode_config=strict))
    server._ensured = False  # the collection's bounds are read as it is checked
    try:
        await server._ensure_collection()
        assert await _server_proof(server, server_corpus, NEAR, 0) is None
        for q in range(QUERIES):
            found = await _searched(server, server_corpus, NEAR, q)
            assert server_corpus.recall_at_10(NEAR, q, found) == 1.0, q
    finally:
        off = qm.StrictModeConfig(enabled=False)
        await server._call(lambda c: c.update_collection(server.collection, strict_mode_config=off))
        server._ensured = False
        await server._ensure_collection()
    assert await _server_proof(server, server_corpus, NEAR, 0) is not None


async def test_records_hidden_beside_the_query_change_nothing_the_server_answers(
    server: ServerStore, server_corpus: Corpus
) -> None:
    # Noninterference on the server's planner path, as on the embedded engine's
    # (test_records_the_asker_may_not_read_change_nothing_they_are_answered): hidden
    # records nearer every query than anything the asker may read fill a third of the
    # neighbourhood or more; the answer stays what it was, record for record.
    before = [await _searched(server, server_corpus, NEAR, q) for q in range(QUERIES)]
    proofs = [await _server_proof(server, server_corpus, NEAR, q) for q in range(QUERIES)]
    assert proofs == before
    hidden = _hidden_beside_queries(server_corpus, ON_THE_SERVER)
    await server.put("acme", hidden)
    try:
        everyone = Scope(tenant="acme", current_at=datetime.now(UTC))
        for q in range(QUERIES):
            nearest = await server.search(server_corpus.queries[q].tolist(), everyone, 30)
            first = ON_THE_SERVER + q * 30
            assert {h.payload["index"] for h in nearest} == set(range(first, first + 30))
            assert await _searched(server, server_corpus, NEAR, q) == before[q], q
            proofs[q] = await _server_proof(server, server_corpus, NEAR, q)
        # A proof never answers otherwise; where the hidden records of several queries
        # crowd one neighbourhood it declines (the scan answers, as above).
        assert all(proof in (None, before[q]) for q, proof in enumerate(proofs))
        assert sum(proof is not None for proof in proofs) >= QUERIES // 2, proofs
    finally:
        await server.delete("acme", [uuid.UUID(str(p["id"])) for p, _ in hidden])


async def test_the_server_skips_the_neighbourhood_where_it_declined(
    server: ServerStore, server_corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As the embedded store does (test_a_filter_the_neighbourhood_declined_for_skips_it_
    # for_a_while), for an asker who may read 600 of the 3 000 records, none near any
    # query (the server estimates 400 of them: looked around above 300 here).
    far = asker("far", 0.2)
    server.proofs = planner.Proofs()
    monkeypatch.setattr(server, "search_tuning", replace(SERVER_PLANNED, neighbourhood_above=300))
    looked: list[int] = []
    prove = server._nearest_by_neighbourhood

    async def watched(*args: Any) -> Any:
        found = await prove(*args)
        assert found is None  # declined
        looked.append(search)
        return found

    monkeypatch.setattr(server, "_nearest_by_neighbourhood", watched)
    for search in range(12):
        found = await _searched(server, server_corpus, far, search % QUERIES)
        assert server_corpus.recall_at_10(far, search % QUERIES, found) == 1.0, search
    assert looked == [0, 2, 5, 10]
