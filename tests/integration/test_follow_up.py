"""A second question within one request (version links) reuses the policy revision
OPA reported to the first, so cached decisions serve it without another OPA call;
a new request always asks OPA first. Real OPA, started the way the sidecar starts
it (a bundle with a revision: without one nothing is cached)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.policy.cache import LocalCache
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.local_opa import LocalOpa
from sidecar.policy.opa import DISCLOSURE_RULE, PolicyClient
from sidecar.reads.gate import Gate
from sidecar.record import Stored
from sidecar.settings import Settings
from tests.factories import record

QUESTION = DisclosureQuestion(
    asker=Identity("bob", "acme"), audience=[], purpose="get", now=datetime.now(UTC)
)


def rec(audience: list[str]) -> dict[str, Any]:
    return record(modality="reported_belief", audience=audience)


@pytest.fixture
async def gate(tmp_path: Path) -> AsyncIterator[Gate]:
    settings = Settings()
    opa = LocalOpa(settings.opa_binary, settings.policy_dir, tmp_path / "opa.log", tmp_path / "b")
    await opa.start()
    policy = PolicyClient(opa.url, 5.0, unix_socket=str(opa.socket_path))
    await policy.start()
    audit = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=100)
    try:
        yield Gate(policy, LocalCache(1000, ttl_s=10), audit, bucket_s=60)
    finally:
        await policy.close()
        await opa.stop()


def opa_calls() -> float:
    sample = "whose_policy_call_seconds_count"
    return REGISTRY.get_sample_value(sample, {"rule": DISCLOSURE_RULE}) or 0.0


async def test_a_follow_up_question_uses_the_revision_heard_in_this_request(
    gate: Gate,
) -> None:
    records = [Stored.from_payload(rec(["bob"])), Stored.from_payload(rec(["alice"]))]
    assert None not in records
    first = gate.begin(QUESTION, "get")
    await first.decide(records)  # type: ignore[arg-type]
    before = opa_calls()
    follow_up = await first.follow_up(QUESTION, "links").decide(records)  # type: ignore[arg-type]
    assert opa_calls() == before  # all cached, under a revision heard in this request
    fresh = await gate.begin(QUESTION, "next request").decide(records)  # type: ignore[arg-type]
    assert opa_calls() == before + 1  # a new request confirms the revision first
    assert follow_up == fresh
    assert [d.allow for d in fresh.values()] == [True, False]
