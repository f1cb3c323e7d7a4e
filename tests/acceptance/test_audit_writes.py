"""Write entries in GET /v1/audit, against a served sidecar on each sink: the SQLite
file (no Redis) and the Redis stream. Until the write path records them, the test
appends them as it will: `write_entry` handed to an AuditLog on the same file or
stream."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from sidecar.audit import (
    AuditEntry,
    AuditLog,
    RedisSink,
    SqliteSink,
    audited_write,
    write_entry,
)
from tests.conftest import as_, start_sidecar, stop

CLAIM: dict[str, Any] = {
    "content": "The launch slips to October 17",
    "proposition": {
        "text": "the launch is on October 17",
        "key": "launch.day",
        "value": "seventeenth-of-October",
    },
    "observer_id": "alice",
    "source_id": "standup-3",
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "believed",
    "audience": ["alice"],
}
AUDITOR = as_("erin", roles="auditor")


@dataclass
class Served:
    base: str
    data_dir: Path
    redis_url: str | None
    stream: str

    async def record(self, entries: list[AuditEntry]) -> None:
        """Through an AuditLog, as the write path will, on the sidecar's own sink."""
        client = aioredis.from_url(self.redis_url) if self.redis_url else None
        if client is not None:
            log = AuditLog(RedisSink(client, self.stream, 1000), None, queue_size=100)
        else:
            log = AuditLog(SqliteSink(self.data_dir / "audit.sqlite3"), None, queue_size=100)
        await log.start()
        for entry in entries:
            log.record(entry)
        await log.close()
        if client is not None:
            await client.aclose()


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> Iterator[Served]:
    data_dir = tmp_path_factory.mktemp(f"audit-writes-{request.param}")
    stream = f"test:audit-writes:{uuid.uuid4().hex}"
    url = redis_url if request.param == "redis" else None
    env = {"WHOSE_REDIS_URL": url, "WHOSE_AUDIT_STREAM": stream} if url else {}
    base, process = start_sidecar(data_dir, env)
    yield Served(base, data_dir, url, stream)
    stop(process)


def audit(served: Served, headers: dict[str, str] = AUDITOR, **params: Any) -> list[Any]:
    response = httpx.get(f"{served.base}/v1/audit", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return list(response.json()["entries"])


def decision_ids(entries: list[Any]) -> list[str]:
    return [e["decision_id"] for e in entries]


def test_write_entries_are_listed_and_filtered_with_the_reads(served: Served) -> None:
    wrote = httpx.post(f"{served.base}/v1/memories", json=CLAIM, headers=as_("alice"))
    assert wrote.status_code == 201, wrote.text
    record_id = wrote.json()["records"][0]["id"]
    got = httpx.get(f"{served.base}/v1/memories/{record_id}", headers=as_("alice"))
    assert got.status_code == 200

    stored = write_entry(
        uuid.uuid4(),
        ("alice", "acme"),
        "memories",
        "sha256:rev",
        [audited_write(0, {**CLAIM, "id": record_id}, "stored")],
    )
    refused = write_entry(
        uuid.uuid4(),
        ("bob", "acme"),
        "observations",
        "sha256:rev",
        [
            audited_write(0, {**CLAIM, "id": None}, "refused", ["voice_is_not_writer"]),
            audited_write(1, {**CLAIM, "id": record_id}, "refused", ["id_exists"]),
        ],
    )
    unavailable = write_entry(
        uuid.uuid4(),
        ("alice", "acme"),
        "proxy.upsert",
        None,
        [audited_write(0, {**CLAIM, "id": str(uuid.uuid4())}, "refused", ["policy_unavailable"])],
        error="policy_unavailable",
    )
    asyncio.run(served.record([stored, refused, unavailable]))
    writes = [str(e.decision_id) for e in (unavailable, refused, stored)]  # newest first

    assert decision_ids(audit(served, purpose="write")) == writes
    assert decision_ids(audit(served, outcome="stored")) == writes[2:]
    assert decision_ids(audit(served, outcome="refused")) == writes[:2]
    assert decision_ids(audit(served, outcome="policy_unavailable")) == writes[:1]
    assert decision_ids(audit(served, purpose="write", asker="bob")) == writes[1:2]
    # The record's whole story: written, refused again under its id, and read.
    by_record = audit(served, record=record_id)
    assert decision_ids(by_record)[:2] == writes[1:]
    assert got.json()["decision_id"] in decision_ids(by_record)
    assert decision_ids(audit(served, record=record_id, outcome="stored")) == writes[2:]
    assert decision_ids(audit(served, record=record_id, purpose="get")) == [
        got.json()["decision_id"]
    ]

    [entry] = audit(served, purpose="write", outcome="stored")
    assert (entry["asker"], entry["tenant"], entry["route"]) == ("alice", "acme", "memories")
    assert (entry["purpose"], entry["policy_revision"]) == ("write", "sha256:rev")
    assert entry["written"] == [
        {
            "id": record_id,
            "index": 0,
            "holder": "alice",
            "observed_id": None,
            "outcome": "stored",
            "reasons": [],
        }
    ]
    everything = json.dumps(audit(served))
    for said in (CLAIM["content"], *CLAIM["proposition"].values()):
        assert said not in everything

    # Another tenant's auditor sees none of it.
    outsider = as_("mallory", tenant="globex", roles="auditor")
    assert audit(served, headers=outsider, purpose="write") == []
    assert audit(served, headers=outsider, record=record_id) == []


@pytest.mark.parametrize(
    ("name", "value"), [("purpose", "delete"), ("outcome", "written"), ("purpose", "")]
)
def test_an_unknown_filter_value_is_refused(served: Served, name: str, value: str) -> None:
    response = httpx.get(f"{served.base}/v1/audit", params={name: value}, headers=AUDITOR)
    assert (response.status_code, response.json()["error"]) == (422, "invalid_request")
