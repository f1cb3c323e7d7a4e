"""Pushdown from the policy itself: OPA's Compile API on whose.lib.visibility.visible_to,
read into a store filter. A real OPA compiles; a real edge store filters.

The filter must never drop a record the policy would disclose (it may keep some
the policy then refuses), and it should drop what nobody in the audience may see.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.opa import PolicyClient
from sidecar.policy.pushdown import COMPILE_QUERY, UNKNOWNS, Untranslatable, Visible, visible
from sidecar.reads.gate import Gate
from sidecar.store.edge import EdgeStore
from sidecar.store.scope import Scope
from tests.conftest import start_opa, stop

NOW = datetime(2026, 11, 30, tzinfo=UTC)
DIM = 8


async def compiled(policy: PolicyEngine, member: dict[str, Any]) -> Visible:
    return visible(await policy.compile(COMPILE_QUERY, {"member": member}, UNKNOWNS), "acme")


async def test_a_member_sees_their_name_and_their_groups(policy: PolicyEngine) -> None:
    bob = await compiled(policy, {"id": "bob", "tenant": "acme"})
    assert bob.audience == frozenset({"bob", "group:launch-team"})
    assert bob.scopes == frozenset()  # bob holds no scope: only unscoped records


async def test_directory_scopes_and_token_claims_count(policy: PolicyEngine) -> None:
    carol = await compiled(policy, {"id": "carol", "tenant": "acme"})
    assert carol.scopes == frozenset({"launch-core"})
    dave = await compiled(
        policy, {"id": "dave", "tenant": "acme", "groups": ["ops"], "scopes": ["audit"]}
    )
    assert dave.audience == frozenset({"dave", "group:ops"})
    assert dave.scopes == frozenset({"audit"})


async def test_a_member_of_another_tenant_sees_nothing_here(policy: PolicyEngine) -> None:
    mallory = await compiled(policy, {"id": "mallory", "tenant": "globex"})
    assert mallory.audience == frozenset()


async def test_a_policy_without_the_rule_gives_no_pushdown(tmp_path: Path) -> None:
    (tmp_path / "deny.rego").write_text("package whose.disclosure\n\ndecisions := {}\n")
    url, process = start_opa(tmp_path, tmp_path / "opa.log")
    client = PolicyClient(url, 5.0)
    await client.start()
    try:
        with pytest.raises(Untranslatable):
            await client.compile(
                COMPILE_QUERY, {"member": {"id": "bob", "tenant": "acme"}}, UNKNOWNS
            )
    finally:
        await client.close()
        stop(process)


ASKERS = [
    Identity("alice", "acme"),
    Identity("bob", "acme"),
    Identity("carol", "acme", groups=("ops",)),
    Identity("dave", "acme", groups=("launch-team",), scopes=("launch-core",)),
]
AUDIENCES: list[list[str]] = [[], ["bob"], ["carol", "alice"]]
SHAPES: list[dict[str, Any]] = [
    {"audience": ["alice"]},
    {"audience": ["bob", "carol"]},
    {"audience": ["group:launch-team"]},
    {"audience": ["group:ops"]},
    {"audience": ["group:launch-team"], "access_scope": "launch-core"},
    {"audience": ["alice", "group:ops"], "access_scope": "launch-core"},
    {"audience": ["dave"], "access_scope": "audit"},
    {"audience": []},
]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EdgeStore]:
    edge = EdgeStore(tmp_path / "edge", DIM)
    await edge.open()
    records = [
        {
            "id": str(uuid.uuid4()),
            "tenant": "acme",
            "observer_id": "alice",
            "modality": "believed",
            "source_id": "s",
            "valid_at": "2026-10-01T00:00:00Z",
            **shape,
        }
        for shape in SHAPES
    ]
    await edge.put("acme", [(r, {"": [1.0] * DIM}) for r in records])
    yield edge
    await edge.close()


async def test_the_filter_keeps_every_record_the_policy_allows(
    policy: PolicyEngine, store: EdgeStore, tmp_path: Path
) -> None:
    gate = Gate(
        policy, LocalCache(0, 1), AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, 10), 5
    )
    everything = (await store.find(Scope(tenant="acme"), 100)).records
    kept_fewer = 0
    for asker, audience in itertools.product(ASKERS, AUDIENCES):
        question = DisclosureQuestion(asker, audience, "recall", NOW)
        disclosure = gate.begin(question, "test")
        pushdown = await disclosure.pushdown()
        kept = {h.id for h in (await store.find(pushdown.narrow(Scope("acme")), 100)).records}
        decisions = await disclosure.decide(everything)
        allowed = {i for i, d in decisions.items() if d.allow}
        assert allowed <= kept, (asker, audience, allowed - kept)
        kept_fewer += len(kept) < len(everything)
    # And it does narrow: for most questions the store returns less than everything.
    assert kept_fewer > len(ASKERS) * len(AUDIENCES) // 2
