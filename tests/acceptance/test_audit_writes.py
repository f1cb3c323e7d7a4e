"""Write entries in GET /v1/audit, against a served sidecar on each sink: the SQLite
file (no Redis) and the Redis stream. Every write and every refusal, through every
write route, is audited beside the reads; never with the claim's text."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

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


def test_every_write_and_refusal_is_audited_with_the_reads(served: Served) -> None:
    base = served.base
    wrote = httpx.post(f"{base}/v1/memories", json=CLAIM, headers=as_("alice"))
    assert wrote.status_code == 201, wrote.text
    record_id = wrote.json()["records"][0]["id"]
    got = httpx.get(f"{base}/v1/memories/{record_id}", headers=as_("alice"))
    assert got.status_code == 200
    # bob may not put beliefs in alice's head: refused, and audited with the reason.
    refused = httpx.post(f"{base}/v1/memories", json=CLAIM, headers=as_("bob"))
    assert refused.status_code == 422, refused.text
    said = {
        "speaker": "alice",
        "source_id": "standup-4",
        "participants": ["carol"],
        "claims": [{"proposition": CLAIM["proposition"]}],
    }
    # Carol was there: the extractor that transcribed the stand-up attests it (issue 35).
    observed = httpx.post(f"{base}/v1/observations", json=said, headers=as_("extractor-bot"))
    assert observed.status_code == 201, observed.text
    point = {"id": str(uuid.uuid4()), "vector": [0.1] * 384, "payload": CLAIM}
    upserted = httpx.put(
        f"{base}/collections/whose_memories/points", json={"points": [point]}, headers=as_("alice")
    )
    assert upserted.status_code == 200, upserted.text

    writes = audit(served, purpose="write")
    assert [(e["asker"], e["route"]) for e in writes] == [
        ("alice", "proxy.upsert"),
        ("extractor-bot", "observations"),
        ("bob", "memories"),
        ("alice", "memories"),
    ]
    assert all(e["policy_revision"] for e in writes)
    assert len(audit(served, outcome="stored")) == 3
    [bobs] = audit(served, outcome="refused")
    assert (bobs["asker"], bobs["written"][0]["outcome"]) == ("bob", "refused")
    assert "writer_not_holder" in bobs["written"][0]["reasons"]
    assert bobs["written"][0]["holder"] == "alice"
    assert decision_ids(audit(served, purpose="write", asker="bob")) == [bobs["decision_id"]]
    # The record's whole story: written, then read.
    by_record = audit(served, record=record_id)
    assert [e["purpose"] for e in by_record] == ["get", "write"]
    assert by_record[0]["decision_id"] == got.json()["decision_id"]
    [stored] = by_record[1]["written"]
    assert stored == {
        "id": record_id,
        "index": 0,
        "holder": "alice",
        "observed_id": None,
        "outcome": "stored",
        "reasons": [],
    }
    everything = json.dumps(audit(served))
    for claim in (CLAIM["content"], *CLAIM["proposition"].values()):
        assert claim not in everything

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
