"""OPA unreachable, or the policy failing as it decides: nothing is disclosed, the
response says why, never a 500."""

from __future__ import annotations

import shutil
import socket
import uuid
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import POLICY_DIR, as_, free_port, metric, ops, start_sidecar, stop


@pytest.fixture(scope="module")
def no_opa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # A port that was free a moment ago and has nobody listening: a real refused connection.
    port = free_port()
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    base, process = start_sidecar(
        tmp_path_factory.mktemp("no-opa"), env={"WHOSE_OPA_URL": f"http://127.0.0.1:{port}"}
    )
    yield base
    stop(process)


def test_recall_fails_closed(no_opa: str) -> None:
    response = httpx.post(f"{no_opa}/v1/recall", json={"query": "launch"}, headers=as_("alice"))
    assert response.status_code == 503
    body = response.json()
    assert body["verdict"] == "abstain"
    assert body["items"] == []
    assert body["reason"] == "policy_unavailable"


def test_get_and_write_fail_closed(no_opa: str) -> None:
    got = httpx.get(f"{no_opa}/v1/memories/{uuid.uuid4()}", headers=as_("alice"))
    assert got.status_code == 503
    assert got.json()["error"] == "policy_unavailable"
    record = {
        "content": "x",
        "observer_id": "alice",
        "source_id": "s",
        "modality": "asserted",
        "audience": ["alice"],
    }
    wrote = httpx.post(f"{no_opa}/v1/memories", json=record, headers=as_("alice"))
    assert wrote.status_code == 503
    assert wrote.json()["error"] == "policy_unavailable"


def test_each_refusal_is_counted_once_whichever_way_it_was_asked(no_opa: str) -> None:
    """One count per refused request, at the surface every transport calls: the API,
    the MCP tools, the Qdrant dialect's reads and the security team's explain."""
    before = metric(no_opa, "whose_policy_unavailable_total")
    recalled = httpx.post(f"{no_opa}/v1/recall", json={"query": "launch"}, headers=as_("alice"))
    assert recalled.status_code == 503
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "recall", "arguments": {"query": "launch"}},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    tool = httpx.post(f"{no_opa}/mcp", json=call, headers=as_("alice") | accept).json()["result"]
    assert tool["isError"] is True
    # The same answer as the API's: a refusal that is also an abstention.
    assert tool["structuredContent"]["verdict"] == "abstain"
    assert tool["structuredContent"]["error"] == recalled.json()["error"] == "policy_unavailable"
    queried = httpx.post(
        f"{no_opa}/collections/whose_memories/points/query",
        json={"query": [0.1] * 384, "limit": 3},
        headers=as_("alice"),
    )
    assert queried.status_code == 503
    assert (queried.json()["error"], "status" in queried.json()) == ("policy_unavailable", True)
    explained = httpx.post(
        f"{no_opa}/v1/explain",
        json={"asker": "bob", "record_id": str(uuid.uuid4())},
        headers=as_("pat", roles="policy-admin"),
    )
    # No such record: explain asks the store first, and the policy never.
    assert explained.status_code == 404
    assert metric(no_opa, "whose_policy_unavailable_total") == before + 3


def test_readyz_reports_opa_down(no_opa: str) -> None:
    ready = httpx.get(f"{ops(no_opa)}/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"opa": False, "store": True}


# A policy that loads but fails when it decides a read: a second `batch` rule whose
# value conflicts with the shipped one (OPA's eval_conflict_error, at evaluation).
CONFLICTING_BATCH = 'package whose.disclosure\n\nbatch := "broken" if count(input.records) >= 0\n'


@pytest.fixture(scope="module", params=["linked", "server"])
def failing_policy(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The sidecar's own OPA, linked in or as a local server, on that policy."""
    folder = tmp_path_factory.mktemp(f"failing-{request.param}")
    policy = folder / "rego"
    shutil.copytree(POLICY_DIR, policy)
    (policy / "whose" / "disclosure" / "broken.rego").write_text(CONFLICTING_BATCH)
    env = {"WHOSE_LOCAL_OPA": request.param, "WHOSE_POLICY_DIR": str(policy)}
    base, process = start_sidecar(folder / "data", env=env)
    yield base
    stop(process)


def test_an_evaluation_error_discloses_nothing(failing_policy: str) -> None:
    record = {
        "content": "Alice says the launch is October 17",
        "observer_id": "alice",
        "source_id": "s",
        "modality": "asserted",
        "audience": ["alice", "bob"],
    }
    # The write policy is intact: the record is stored.
    wrote = httpx.post(f"{failing_policy}/v1/memories", json=record, headers=as_("alice"))
    assert wrote.status_code == 201, wrote.text
    record_id = wrote.json()["records"][0]["id"]
    before = metric(failing_policy, "whose_policy_unavailable_total")
    recalled = httpx.post(
        f"{failing_policy}/v1/recall", json={"query": "launch"}, headers=as_("bob")
    )
    assert recalled.status_code == 503
    assert recalled.json()["items"] == []
    assert recalled.json()["reason"] == "policy_unavailable"
    got = httpx.get(f"{failing_policy}/v1/memories/{record_id}", headers=as_("bob"))
    assert got.status_code == 503
    assert got.json()["error"] == "policy_unavailable"
    assert "October" not in recalled.text + got.text
    assert metric(failing_policy, "whose_policy_unavailable_total") == before + 2
