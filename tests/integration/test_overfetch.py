"""Recall's over-fetch loop with the real edge store and a real OPA.

Forbidden records crowd the top of the ranking; the loop must widen until it
finds `limit` allowed ones, ask OPA once per round, and say when a bound
stopped it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sidecar.answers.verdict import verdict_of
from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.embed.hashing import HashingEmbedder
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.pushdown import Pushdown
from sidecar.reads.allow_rate import LocalAllowRates
from sidecar.reads.gate import Disclosure, Gate
from sidecar.reads.reader import Bounds, Reader
from sidecar.store.edge import EdgeStore
from sidecar.store.scope import Scope
from tests.factories import record
from tests.integration.test_policy_client import disclosure_calls

DIM = 64
NOW = datetime(2026, 11, 30, tzinfo=UTC)
embedder = HashingEmbedder(DIM)
BOB = Identity("bob", "acme")


def rec(text: str, audience: list[str]) -> dict[str, Any]:
    return record(text, modality="reported_belief", audience=audience)


@pytest.fixture(scope="module")
async def crowded(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EdgeStore]:
    """100 of Alice's private notes right on the query, 5 team notes further away."""
    store = EdgeStore(Path(tmp_path_factory.mktemp("crowded")) / "edge", DIM)
    await store.open()
    private = [rec(f"the launch date is October 17 note {i}", ["alice"]) for i in range(100)]
    shared = [
        rec(f"team lunch menu for the launch party {i}", ["group:launch-team"]) for i in range(5)
    ]
    await store.put("acme", [(r, {"": embedder.embed(r["content"])}) for r in private + shared])
    yield store
    await store.close()


def ask() -> DisclosureQuestion:
    return DisclosureQuestion(asker=BOB, audience=[], purpose="recall", now=NOW)


@pytest.fixture
def gate(policy: PolicyEngine, tmp_path: Path) -> Disclosure:
    """The gate every read path uses, with an in-process cache and a file audit log."""
    audit = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=100)
    return Gate(policy, LocalCache(1000, ttl_s=10), audit, bucket_s=5).begin(ask(), "test")


async def test_loop_widens_until_limit_allowed_are_found(
    crowded: EdgeStore, gate: Disclosure, opa_url: str
) -> None:
    vector = embedder.embed("when is the launch date")
    before = disclosure_calls(gate.gate.policy, opa_url)
    found = await Reader(crowded, gate.gate, Bounds(4, 5, 1000)).overfetch(
        gate, vector, Scope(tenant="acme"), 5
    )
    assert len(found.allowed) == 5
    assert all(d.allow for _, d in found.allowed)
    assert {h.payload["audience"][0] for h, _ in found.allowed} == {"group:launch-team"}
    # 20, then 40, then 80 candidates: the 5 allowed ones rank after 100 forbidden ones.
    assert found.rounds == 3
    assert found.truncated is False
    # One policy call per round.
    assert disclosure_calls(gate.gate.policy, opa_url) - before == found.rounds


async def test_bound_stops_the_loop_and_says_so(crowded: EdgeStore, gate: Disclosure) -> None:
    vector = embedder.embed("when is the launch date")
    found = await Reader(crowded, gate.gate, Bounds(2, 2, 1000)).overfetch(
        gate, vector, Scope(tenant="acme"), 5
    )
    assert found.rounds == 2
    assert found.truncated is True
    assert found.allowed == []


async def test_candidate_cap_bounds_the_work(crowded: EdgeStore, gate: Disclosure) -> None:
    vector = embedder.embed("when is the launch date")
    found = await Reader(crowded, gate.gate, Bounds(4, 10, 50)).overfetch(
        gate, vector, Scope(tenant="acme"), 5
    )
    assert found.truncated is True
    assert found.rounds == 2  # 20 + 30 = the cap of 50


async def test_exhausted_store_is_not_truncated(crowded: EdgeStore, gate: Disclosure) -> None:
    reader = Reader(crowded, gate.gate, Bounds(4, 10, 1000))
    scope = Scope(tenant="acme", current_at=NOW)
    response = await reader.nearest(ask(), "recall", embedder.embed("launch"), scope, 50)
    assert len(response.items) == 5  # every allowed record, and no more exist
    assert response.truncated is False
    assert verdict_of(response.items, response.vocabulary)[0] == "attributed"
    assert not any("October 17" in item.attribution for item in response.items)


async def test_a_learned_allow_rate_finishes_in_one_round(
    crowded: EdgeStore, policy: PolicyEngine, tmp_path: Path
) -> None:
    """Bob may read 5 of the 105 notes, all ranked after the 100 he may not."""
    audit = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=100)
    gate = Gate(policy, LocalCache(1000, ttl_s=10), audit, bucket_s=5, pushdown=False)
    vector = embedder.embed("when is the launch date")
    bounds = Bounds(4, 10, 1000)
    reader = Reader(crowded, gate, bounds)
    async with gate.begin(ask(), "test") as first:
        cold = await reader.overfetch(first, vector, Scope(tenant="acme"), 5)
    assert cold.rounds == 3  # 20, 40, 80: the default factor knows nothing
    await gate.idle()  # the rate is recorded off the request path
    rate = await gate.begin(ask(), "test").allow_rate()
    assert rate is not None
    assert rate == pytest.approx(5 / 105, abs=0.01)
    async with gate.begin(ask(), "test") as second:
        warm = await reader.overfetch(second, vector, Scope(tenant="acme"), 5)
    assert warm.rounds == 1  # 1.5 * 5 / (5/105) = 158 candidates at once
    assert len(warm.allowed) == 5


async def test_reads_by_id_teach_the_allow_rate_nothing(
    crowded: EdgeStore, policy: PolicyEngine, tmp_path: Path
) -> None:
    """Bob naming Alice's private notes by id (get, history) is told what a missing id
    is told; the allow rate that sizes his next search must not learn from them either,
    or records he may not see would shape what his searches return."""
    audit = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=100)
    gate = Gate(policy, LocalCache(1000, ttl_s=10), audit, bucket_s=5)
    reader = Reader(crowded, gate, Bounds(4, 10, 1000))
    page = await crowded.find(Scope(tenant="acme"), 200)
    private = [uuid.UUID(r.id) for r in page.records if r.payload["audience"] == ["alice"]][:10]
    assert len(private) == 10
    get = DisclosureQuestion(asker=BOB, audience=[], purpose="get", now=NOW)
    history = DisclosureQuestion(asker=BOB, audience=[], purpose="history", now=NOW)
    answer = await reader.by_ids(get, "test", private)
    assert answer.shown == []
    for record_id in private:
        assert await reader.history(history, "test", record_id) is None
        # As of an instant: the id asked for is decided first, then its version then.
        then = await reader.version_at(ask(), "test", record_id, NOW)
        assert then.shown == []
    await gate.idle()
    # What `nearest` reads: the estimates of filtered (pushdown) and unfiltered searches.
    for question in (get, history, ask()):
        for derived in (True, False):
            asked = gate.begin(question, "test")
            asked.pushed_down = Pushdown(derived=derived)
            assert await asked.allow_rate() is None, (question.purpose, derived)


async def test_a_search_without_pushdown_never_sizes_one_with_it(
    crowded: EdgeStore, policy: PolicyEngine, tmp_path: Path
) -> None:
    """Without the policy's filter a search decides records the asker may not see (100
    of Alice's notes crowd Bob's 5); what it learns must not size Bob's filtered
    searches, which would otherwise start from a rate those records set."""
    rates = LocalAllowRates()
    audit = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=100)
    off = Gate(policy, LocalCache(1000, ttl_s=10), audit, bucket_s=5, rates=rates, pushdown=False)
    on = Gate(policy, LocalCache(1000, ttl_s=10), audit, bucket_s=5, rates=rates)
    vector = embedder.embed("when is the launch date")
    scope = Scope(tenant="acme", current_at=NOW)
    unfiltered = await Reader(crowded, off, Bounds(4, 10, 1000)).nearest(
        ask(), "test", vector, scope, 5
    )
    assert len(unfiltered.shown) == 5
    await off.idle()
    async with off.begin(ask(), "test") as again:
        await again.pushdown()
        assert await again.allow_rate() == pytest.approx(5 / 105, abs=0.01)
    async with on.begin(ask(), "test") as filtered:
        await filtered.pushdown()
        assert await filtered.allow_rate() is None
