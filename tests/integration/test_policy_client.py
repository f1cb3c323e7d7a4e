"""The policy client against real OPA servers, and OPA's evaluator linked in: one call
per batch, fail closed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from sidecar.auth.identity import Identity
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.policy.opa import DISCLOSURE_RULE, PolicyClient, PolicyUnavailable
from tests.conftest import OPA_LIBRARY, free_port, start_opa, stop
from tests.factories import record

NOW = datetime(2026, 11, 30, tzinfo=UTC)
BOB = Identity("bob", "acme")


def rec(audience: list[str], **fields: Any) -> dict[str, Any]:
    belief = {"modality": "reported_belief", "source_id": "private-session-42"}
    return record(audience=audience, **belief | fields)


def question(asker: Identity = BOB) -> DisclosureQuestion:
    return DisclosureQuestion(asker=asker, audience=[], purpose="recall", now=NOW)


async def client_for(url: str, timeout_s: float = 2.0) -> PolicyClient:
    client = PolicyClient(url, timeout_s)
    await client.start()
    return client


def data_calls(opa_url: str) -> float:
    """OPA's own count of answered /v1/data requests (its Prometheus metrics)."""
    total = 0.0
    for line in httpx.get(f"{opa_url}/metrics").text.splitlines():
        if line.startswith("http_request_duration_seconds_count") and 'handler="v1/data"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def disclosure_calls(policy: PolicyEngine, opa_url: str) -> float:
    """Disclosure evaluations so far: counted by the OPA server itself, or for the linked
    evaluator (no server to count them) by the sidecar's own metric of policy calls."""
    if isinstance(policy, LinkedOpa):
        count = REGISTRY.get_sample_value(
            "whose_policy_call_seconds_count", {"rule": DISCLOSURE_RULE}
        )
        return count or 0.0
    return data_calls(opa_url)


async def test_a_batch_is_decided_in_one_call(policy: PolicyEngine, opa_url: str) -> None:
    batch = [rec(["alice"]) for _ in range(20)] + [rec(["group:launch-team"]) for _ in range(20)]
    before = disclosure_calls(policy, opa_url)
    decisions = (await policy.disclosure(question(), batch)).decisions
    assert disclosure_calls(policy, opa_url) - before == 1
    allowed = {rid for rid, d in decisions.items() if d.allow}
    assert allowed == {r["id"] for r in batch[20:]}
    denied = decisions[batch[0]["id"]]
    assert denied.reasons == ["audience_excludes:bob"]


async def test_the_claim_itself_is_not_sent_to_the_policy() -> None:
    # OPA logs its input and explain shows it: the text and the bare value of a claim
    # (the secret a policy guards) never go there; what the claim is about does.
    claim = {"text": "the launch is October 17", "key": "launch.date", "value": "2026-10-17"}
    sent = question().input([rec(["alice"], proposition=claim)])
    [record] = sent["records"]
    assert "content" not in record
    assert record["proposition"] == {"key": "launch.date"}
    assert "October 17" not in str(sent)
    assert "2026-10-17" not in str(sent)


async def test_a_record_the_policy_says_nothing_about_is_denied(policy: PolicyEngine) -> None:
    nameless = rec(["group:launch-team"])
    del nameless["id"]
    nameless["id"] = None  # no id: the batch rule cannot key a decision for it
    decisions = (await policy.disclosure(question(), [nameless])).decisions
    assert decisions["None"].allow is False
    assert decisions["None"].reasons == ["no_decision"]


async def test_unreachable_opa_raises_policy_unavailable() -> None:
    client = await client_for(f"http://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(PolicyUnavailable):
            await client.disclosure(question(), [rec(["bob"])])
        assert await client.ready() is False
    finally:
        await client.close()


# Real OPA servers answering wrongly: a rule of the wrong shape, no policy at all,
# and a policy that takes far longer than the client will wait.
BROKEN = {
    "malformed": (
        "package whose.disclosure\n\n"
        'batch := {"decisions": {r.id: "yes" | some r in input.records}, "vocabulary": {}}\n',
        "malformed",
        2.0,
    ),
    "missing": (None, "no result", 2.0),
    "slow": (
        "package whose.disclosure\n\n"
        'batch := {"decisions": {r.id: {"allow": true, "usable_as": "belief"} |\n'
        "\tsome r in input.records\n"
        "\tcount([x | some x in numbers.range(1, 20000000)]) > 0\n"
        '}, "vocabulary": {}}\n',
        "unreachable",
        0.2,
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_a_broken_policy_fails_closed(case: str, tmp_path: Path) -> None:
    policy, expected, timeout_s = BROKEN[case]
    if policy is not None:
        (tmp_path / "policy.rego").write_text(policy)
    url, process = start_opa(tmp_path, tmp_path / "opa.log")
    client = await client_for(url, timeout_s)
    try:
        with pytest.raises(PolicyUnavailable, match=expected):
            await client.disclosure(question(), [rec(["bob"])])
    finally:
        await client.close()
        stop(process)


# The same policies evaluated in process: no server to be unreachable, so a policy past
# its deadline is stopped by OPA's own cancellation of the query.
LINKED_EXPECTED = {"malformed": "malformed", "missing": "no result", "slow": "deadline"}


@pytest.mark.parametrize("case", sorted(BROKEN))
async def test_a_broken_policy_fails_closed_in_process(case: str, tmp_path: Path) -> None:
    policy, _, timeout_s = BROKEN[case]
    policies = tmp_path / "policy"
    policies.mkdir()
    if policy is not None:
        (policies / "policy.rego").write_text(policy)
    client = LinkedOpa(OPA_LIBRARY, policies, tmp_path / "bundle", timeout_s)
    await client.start()
    try:
        with pytest.raises(PolicyUnavailable, match=LINKED_EXPECTED[case]):
            await client.disclosure(question(), [rec(["bob"])])
    finally:
        await client.close()
