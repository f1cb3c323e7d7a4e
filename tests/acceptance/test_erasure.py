"""Erasure over HTTP and MCP, on both store backends: `DELETE /v1/memories/{id}`, the
MCP `forget` tool, an officer's erasure request (`/v1/erasures`), and `whose sweep`.

A record the asker may not see answers exactly like a missing one and stays; a
record the asker may see but not erase is refused with the policy's reasons; what is
erased is gone from every read path, and the audit log says who erased what and why,
without the claim."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import forks
from tests.conftest import POLICY_DIR, REPO, as_, start_sidecar, stop
from tests.factories import mcp_call

SECRET = "the merger with Initech closes on March 3"


def note(http: httpx.Client, who: str, text: str, audience: list[str]) -> str:
    body = {
        "content": f"{who} believes {text}",
        "proposition": {"text": text},
        "observer_id": who,
        "source_id": f"{who}-notes",
        "source": {"kind": "conversation", "speaker": who},
        "modality": "believed",
        "audience": audience,
    }
    response = http.post("/v1/memories", json=body, headers=as_(who))
    assert response.status_code == 201, response.text
    return str(response.json()["records"][0]["id"])


@pytest.fixture
def http(sidecar_on: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sidecar_on, timeout=30) as client:
        yield client


def test_the_holder_erases_and_it_is_gone_from_every_read(http: httpx.Client) -> None:
    record = note(http, "alice", SECRET, ["alice"])
    erased = http.delete(f"/v1/memories/{record}", headers=as_("alice"), params={"reason": "t-1"})
    assert erased.status_code == 200, erased.text
    assert erased.json()["erased"] == [record]
    assert http.get(f"/v1/memories/{record}", headers=as_("alice")).status_code == 404
    recalled = http.post("/v1/recall", json={"query": SECRET}, headers=as_("alice")).json()
    assert record not in json.dumps(recalled)
    again = http.delete(f"/v1/memories/{record}", headers=as_("alice"))
    assert again.status_code == 404


def test_a_record_the_asker_may_not_see_answers_like_a_missing_one(http: httpx.Client) -> None:
    record = note(http, "alice", SECRET, ["alice"])
    hidden = http.delete(f"/v1/memories/{record}", headers=as_("bob"))
    missing = http.delete(f"/v1/memories/{uuid.uuid4()}", headers=as_("bob"))
    assert (hidden.status_code, hidden.json()) == (missing.status_code, missing.json())
    assert hidden.status_code == 404
    assert http.get(f"/v1/memories/{record}", headers=as_("alice")).status_code == 200


def test_an_audience_member_is_refused_with_the_policys_reason(http: httpx.Client) -> None:
    record = note(http, "alice", "the party is on the roof", ["alice", "bob"])
    refused = http.delete(f"/v1/memories/{record}", headers=as_("bob"))
    assert refused.status_code == 403
    assert refused.json() == {
        "error": "erasure_refused",
        "reasons": [{"id": record, "reasons": ["not_holder_or_writer"]}],
    }
    assert http.get(f"/v1/memories/{record}", headers=as_("bob")).status_code == 200


def test_the_audit_log_says_who_what_why_without_the_claim(http: httpx.Client) -> None:
    record = note(http, "alice", SECRET, ["alice"])
    http.delete(f"/v1/memories/{record}", headers=as_("alice"), params={"reason": "gdpr-17"})
    auditor = as_("erin", roles="auditor")
    entries = http.get("/v1/audit", params={"record": record, "outcome": "erased"}, headers=auditor)
    [entry] = entries.json()["entries"]
    assert (entry["asker"], entry["purpose"], entry["route"]) == (
        "alice",
        "erase",
        "memories.delete",
    )
    assert entry["erasure"]["reason"] == "gdpr-17"
    assert entry["policy_revision"] is not None
    assert [w["outcome"] for w in entry["written"]] == ["erased"]
    assert "Initech" not in entries.text


def test_an_officer_erases_everything_about_a_subject(http: httpx.Client) -> None:
    mine = note(http, "dave", "the launch slips", ["dave"])
    about = note(http, "carol", "dave is leaving", ["carol"])
    refused = http.post(
        "/v1/erasures", json={"kind": "subject", "subject": "dave"}, headers=as_("carol")
    )
    assert refused.status_code == 403
    assert refused.json()["reasons"] == ["needs_erasure_officer"]
    started = http.post(
        "/v1/erasures",
        json={"kind": "subject", "subject": "dave", "reason": "ticket-9"},
        headers=as_("dpo"),
    )
    assert started.status_code == 202, started.text
    progress = started.json()
    assert progress["status"] == "done"
    assert progress["erased"] == 1
    assert http.get(f"/v1/memories/{mine}", headers=as_("dave")).status_code == 404
    # Carol's belief names Dave only in its text: not about his mind, not erased.
    assert http.get(f"/v1/memories/{about}", headers=as_("carol")).status_code == 200
    status = http.get(f"/v1/erasures/{progress['request_id']}", headers=as_("dpo"))
    assert status.json()["status"] == "done"
    stranger = http.get(f"/v1/erasures/{progress['request_id']}", headers=as_("carol"))
    assert stranger.status_code == 404


def test_an_agent_forgets_through_mcp(http: httpx.Client) -> None:
    mine = note(http, "alice", SECRET, ["alice"])
    shared = note(http, "alice", "the party is on the roof", ["alice", "bob"])
    hidden = mcp_call(http, "bob", "forget", {"id": mine})
    missing = mcp_call(http, "bob", "forget", {"id": str(uuid.uuid4())})
    assert hidden == missing
    assert hidden["isError"] is True
    assert hidden["structuredContent"]["error"] == "not_found"
    refused = mcp_call(http, "bob", "forget", {"id": shared})
    assert refused["structuredContent"]["error"] == "erasure_refused"
    assert refused["content"][0]["text"].startswith("erasure_refused")
    forgotten = mcp_call(http, "alice", "forget", {"id": mine, "reason": "user asked"})
    assert forgotten.get("isError") is not True
    assert forgotten["structuredContent"]["erased"] == [mine]
    assert f"id: {mine}" in forgotten["content"][0]["text"]
    assert http.get(f"/v1/memories/{mine}", headers=as_("alice")).status_code == 404


def thirty_days_retention(tmp_path: Path) -> dict[str, str]:
    """The shipped policies with one retention rule (30 days), as the sidecar's env."""
    policies = tmp_path / "rego"
    shutil.copytree(POLICY_DIR, policies)
    config = policies / "whose" / "config" / "data.json"
    data = json.loads(config.read_text())
    data["retention"] = {"rules": [{"max_age_days": 30}]}
    config.write_text(json.dumps(data))
    return {"WHOSE_POLICY_DIR": str(policies)}


def sweep(folder: Path, env: dict[str, str], at: datetime) -> dict[str, Any]:
    """`whose sweep --now at` over the store folder a stopped sidecar left: its report."""
    command = ["sweep", "--data-dir", str(folder), "--now", at.isoformat()]
    done = forks.run(command, os.environ | env, REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def test_whose_sweep_erases_what_expired(tmp_path: Path) -> None:
    """The CLI over an embedded store the sidecar left, with a rule and a clock."""
    env = thirty_days_retention(tmp_path)
    folder = tmp_path / "data"
    base, process = start_sidecar(folder, env=env)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            record = note(http, "alice", SECRET, ["alice"])
    finally:
        stop(process)

    now = datetime.now(UTC)
    assert sweep(folder, env, now + timedelta(days=29))["erased"] == 0
    report = sweep(folder, env, now + timedelta(days=31))
    assert (report["expired"], report["erased"], report["held"]) == (1, 1, 0)
    base, process = start_sidecar(folder, env=env)
    try:
        assert httpx.get(f"{base}/v1/memories/{record}", headers=as_("alice")).status_code == 404
    finally:
        stop(process)


def test_whose_sweep_erases_what_expired_in_a_stacks_own_collection(tmp_path: Path) -> None:
    """A RAG stack's own collection is swept by the same retention policy: a document
    past its age is erased, by the CLI, as a record of whose's own collection is."""
    env = thirty_days_retention(tmp_path)
    folder = tmp_path / "data"
    point = {
        "id": 7,
        "vector": [1.0, 0.0, 0.0, 0.0],
        "payload": {"page_content": SECRET, "metadata": {"audience": ["alice"], "source": "m.md"}},
    }
    base, process = start_sidecar(folder, env=env)
    try:
        with httpx.Client(base_url=base, timeout=30, headers=as_("alice")) as http:
            create = {"vectors": {"size": 4, "distance": "Cosine"}}
            http.put("/collections/kb", json=create).raise_for_status()
            http.put(
                "/collections/kb/points?wait=true", json={"points": [point]}
            ).raise_for_status()
    finally:
        stop(process)

    now = datetime.now(UTC)
    assert sweep(folder, env, now + timedelta(days=29))["erased"] == 0
    report = sweep(folder, env, now + timedelta(days=31))
    assert (report["expired"], report["erased"]) == (1, 1)
    base, process = start_sidecar(folder, env=env)
    try:
        with httpx.Client(base_url=base, timeout=30, headers=as_("alice")) as http:
            kept = http.post("/collections/kb/points", json={"ids": [7]}).json()["result"]
            counted = http.post("/collections/kb/points/count", json={}).json()["result"]
        assert kept == []
        assert counted == {"count": 0}
    finally:
        stop(process)


@pytest.mark.parametrize("with_redis", [False, True], ids=["audit file", "redis"])
def test_nothing_of_an_erased_claim_stays_in_the_audit_log_or_the_caches(
    tmp_path: Path, request: pytest.FixtureRequest, with_redis: bool
) -> None:
    """Written, read (the decision cache and the allow rate fill), erased: the claim's
    text is nowhere in Redis (cache, allow rates, audit stream) nor in the audit file,
    and the audit log still says who erased which id."""
    marker = f"SECRET{uuid.uuid4().hex}"
    env = {"WHOSE_REDIS_URL": request.getfixturevalue("redis_url")} if with_redis else {}
    base, process = start_sidecar(tmp_path / "sidecar", env=env)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            record = note(http, "alice", f"the code name is {marker}", ["alice", "bob"])
            for who in ("alice", "bob", "alice"):
                http.post("/v1/recall", json={"query": "the code name"}, headers=as_(who))
                http.get(f"/v1/memories/{record}", headers=as_(who))
            erased = http.delete(f"/v1/memories/{record}", headers=as_("alice"))
            assert erased.status_code == 200, erased.text
            entries = http.get(
                "/v1/audit",
                params={"record": record, "outcome": "erased"},
                headers=as_("erin", roles="auditor"),
            )
            assert [e["asker"] for e in entries.json()["entries"]] == ["alice"]
    finally:
        stop(process)
    if with_redis:
        import redis

        client = redis.Redis.from_url(env["WHOSE_REDIS_URL"])
        kept = b"".join(_redis_dump(client, key) for key in client.scan_iter())
        client.close()
        assert kept  # the cache, the allow rates and the audit stream are there
    else:
        files = list((tmp_path / "sidecar").glob("audit.sqlite3*"))
        assert files
        kept = b"".join(f.read_bytes() for f in files)
        assert record.encode() in kept
    assert marker.encode() not in kept
    assert b"the code name" not in kept


def _redis_dump(client: Any, key: bytes) -> bytes:
    kind = client.type(key)
    if kind == b"string":
        return key + (client.get(key) or b"")
    if kind == b"stream":
        return key + repr(client.xrange(key)).encode()
    if kind == b"hash":
        return key + repr(client.hgetall(key)).encode()
    if kind == b"set":
        return key + repr(client.smembers(key)).encode()
    if kind == b"zset":
        return key + repr(client.zrange(key, 0, -1, withscores=True)).encode()
    if kind == b"list":
        return key + repr(client.lrange(key, 0, -1)).encode()
    return key
