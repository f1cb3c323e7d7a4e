"""Security teams: the audit log says who was shown or refused what, and why;
explain shows a decision rule by rule. Both on embedded defaults (SQLite audit)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import as_, metric, ops

PRIVATE: dict[str, Any] = {
    "content": "The launch is October 17",
    "proposition": {"text": "the launch is October 17", "key": "launch.day", "value": "10-17"},
    "observer_id": "alice",
    "source_id": "private-session-42",
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "reported_belief",
    "audience": ["alice"],
    "valid_at": "2026-10-01T00:00:00Z",
}
AUDITOR = as_("erin", roles="auditor")
ADMIN = as_("pat", roles="policy-admin")


@pytest.fixture(scope="module")
def secret(http: httpx.Client) -> str:
    wrote = http.post("/v1/memories", json=PRIVATE, headers=as_("alice"))
    assert wrote.status_code == 201, wrote.text
    return str(wrote.json()["records"][0]["id"])


def audit(http: httpx.Client, headers: dict[str, str] = AUDITOR, **params: Any) -> list[Any]:
    response = http.get("/v1/audit", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["entries"])


def test_a_refusal_is_audited_with_its_reasons(http: httpx.Client, secret: str) -> None:
    got = http.get(f"/v1/memories/{secret}", headers=as_("bob"))
    assert got.status_code == 404
    [entry] = audit(http, asker="bob", record=secret, outcome="withheld")
    assert entry["tenant"] == "acme"
    assert entry["route"] == "get"
    assert "sha256:" in entry["policy_revision"]  # the embedded OPA's bundle digest
    assert entry["opa_decision_ids"], "OPA's decision id is missing"
    [withheld] = [r for r in entry["withheld"] if r["id"] == secret]
    assert withheld["reasons"] == ["audience_excludes:bob"]
    assert withheld["opa_decision_id"] in entry["opa_decision_ids"]
    assert PRIVATE["content"] not in json.dumps(entry)


def test_a_recall_audits_the_store_filter_it_used(http: httpx.Client, secret: str) -> None:
    # Recall keeps records the asker may never see out of the store query (pushdown):
    # the entry shows that filter, since those records got no decision of their own.
    recalled = http.post("/v1/recall", json={"query": "launch date"}, headers=as_("bob"))
    assert recalled.json()["verdict"] == "abstain"
    [entry] = [
        e for e in audit(http, asker="bob") if e["decision_id"] == recalled.json()["decision_id"]
    ]
    assert entry["route"] == "recall"
    assert "bob" in entry["pushdown"]["audience_any_of"][0]
    assert secret not in json.dumps(entry)


def test_a_disclosure_is_audited(http: httpx.Client, secret: str) -> None:
    got = http.get(f"/v1/memories/{secret}", headers=as_("alice"))
    assert got.status_code == 200
    entries = audit(http, asker="alice", record=secret, outcome="allowed")
    [entry] = [e for e in entries if e["decision_id"] == got.json()["decision_id"]]
    assert [r["id"] for r in entry["allowed"]] == [secret]
    assert entry["allowed"][0]["usable_as"] == "belief"
    # And it is not listed as withheld for her.
    withheld = audit(http, asker="alice", record=secret, outcome="withheld")
    assert got.json()["decision_id"] not in {e["decision_id"] for e in withheld}


def test_audit_filters_by_time(http: httpx.Client, secret: str) -> None:
    http.get(f"/v1/memories/{secret}", headers=as_("bob"))
    now = datetime.now(UTC)
    assert audit(http, asker="bob", since=(now - timedelta(minutes=5)).isoformat())
    assert audit(http, asker="bob", since=(now + timedelta(minutes=5)).isoformat()) == []
    assert audit(http, asker="bob", until=(now - timedelta(days=1)).isoformat()) == []


def test_audit_needs_the_auditor_role_and_stays_in_the_tenant(
    http: httpx.Client, secret: str
) -> None:
    refused = http.get("/v1/audit", headers=as_("bob"))
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")
    other_tenant = as_("mallory", tenant="globex", roles="auditor")
    assert audit(http, headers=other_tenant, record=secret) == []


def test_without_redis_the_audit_is_a_sqlite_file_under_the_data_dir(
    http: httpx.Client, sidecar_dir: Path, secret: str
) -> None:
    served = {e["decision_id"] for e in audit(http, record=secret)}
    assert served
    # Read as an operator would, beside the running sidecar (WAL: readers never block it).
    with contextlib.closing(sqlite3.connect(sidecar_dir / "audit.sqlite3")) as db:
        bodies = [body for (body,) in db.execute("SELECT body FROM entries")]
    assert served <= {json.loads(body)["decision_id"] for body in bodies}


def explain(http: httpx.Client, headers: dict[str, str] = ADMIN, **body: Any) -> httpx.Response:
    return http.post("/v1/explain", json=body, headers=headers)


def rules(response: httpx.Response) -> dict[str, list[str]]:
    return {r["rule"]: r["reasons"] for r in response.json()["rules"]}


def test_explain_names_the_rule_behind_each_reason(http: httpx.Client, secret: str) -> None:
    for_bob = explain(http, asker="bob", record_id=secret)
    assert for_bob.status_code == 200, for_bob.text
    body = for_bob.json()
    assert body["decision"]["allow"] is False
    assert body["decision"]["reasons"] == ["audience_excludes:bob"]
    assert rules(for_bob)["data.whose.disclosure.denials.hearers"] == ["audience_excludes:bob"]
    assert rules(for_bob)["data.whose.disclosure.denials.instant"] == []
    assert body["input"]["record"]["audience"] == ["alice"]
    assert body["policy_revision"]
    assert PRIVATE["content"] not in for_bob.text
    # Nor the bare claim: explain shows what OPA evaluated, and OPA never sees the value.
    assert PRIVATE["proposition"]["value"] not in for_bob.text

    for_alice = explain(http, asker="alice", record_id=secret)
    assert for_alice.json()["decision"]["allow"] is True
    assert rules(for_alice)["data.whose.disclosure.usable_as"] == ["belief"]

    # An audience member who may not see it: the group chat is limited by its least-cleared.
    with_bob = explain(http, asker="alice", audience=["bob"], record_id=secret)
    assert with_bob.json()["decision"]["reasons"] == ["audience_excludes:bob"]


def test_explain_agrees_with_what_recall_did(http: httpx.Client, secret: str) -> None:
    # The same decision as the read path: explained denial, and bob's recall withheld it.
    recalled = http.post("/v1/recall", json={"query": "launch"}, headers=as_("bob"))
    assert secret not in {i["id"] for i in recalled.json()["items"]}
    assert explain(http, asker="bob", record_id=secret).json()["decision"]["allow"] is False


def test_explain_needs_the_policy_admin_role(http: httpx.Client, secret: str) -> None:
    refused = explain(http, headers=as_("alice"), asker="alice", record_id=secret)
    assert (refused.status_code, refused.json()["error"]) == (403, "forbidden")


def test_explain_stays_in_the_admins_tenant(http: httpx.Client, secret: str) -> None:
    outsider = as_("mallory", tenant="globex", roles="policy-admin")
    answer = explain(http, headers=outsider, asker="mallory", record_id=secret)
    missing = explain(http, headers=outsider, asker="mallory", record_id=str(uuid.uuid4()))
    assert answer.status_code == missing.status_code == 404
    assert answer.json() == missing.json()


def test_metrics_count_decisions_by_reason(http: httpx.Client, sidecar: str, secret: str) -> None:
    before = metric(sidecar, "whose_decisions_total", outcome="deny", reason="audience_excludes")
    http.get(f"/v1/memories/{secret}", headers=as_("bob"))
    after = metric(sidecar, "whose_decisions_total", outcome="deny", reason="audience_excludes")
    assert after == before + 1
    text = httpx.get(f"{ops(sidecar)}/metrics").text
    for family in (
        "whose_policy_call_seconds",
        "whose_store_call_seconds",
        "whose_overfetch_rounds",
        "whose_recall_truncated_total",
        "whose_decision_cache_total",
        "whose_audit_dropped_total",
        "whose_audit_buffered_total",
    ):
        assert family in text, family


def test_logs_are_json_lines_with_the_decision_id(
    http: httpx.Client, sidecar_dir: Path, secret: str
) -> None:
    recalled = http.post("/v1/recall", json={"query": "launch"}, headers=as_("bob"))
    decision_id = recalled.json()["decision_id"]
    lines = [
        json.loads(line)
        for line in (sidecar_dir / "sidecar.log").read_text().splitlines()
        if line.startswith("{")
    ]
    [logged] = [line for line in lines if line.get("decision_id") == decision_id]
    assert logged["message"] == "disclosure"
    assert logged["asker"] == "bob"
    assert logged["route"] == "recall"


def test_an_explain_call_is_audited(http: httpx.Client, secret: str) -> None:
    explained = explain(http, asker="bob", record_id=secret)
    assert explained.status_code == 200
    [entry] = [
        e for e in audit(http, asker="pat") if e["decision_id"] == explained.json()["decision_id"]
    ]
    assert (entry["purpose"], entry["route"], entry["explained_for"]) == (
        "explain",
        "explain",
        "bob",
    )
    [withheld] = entry["withheld"]
    assert (withheld["id"], withheld["reasons"]) == (secret, ["audience_excludes:bob"])
