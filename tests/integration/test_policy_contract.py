"""The policy's contract, both ways, against a real OPA: what the sidecar sends matches
the input schemas the Rego is type-checked against (schemas/policy/), what OPA answers
matches the answer schemas (schemas/*-decision.schema.json), and the data documents a
security team edits match theirs."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from sidecar.auth.identity import Identity
from sidecar.policy.contract import DisclosureQuestion, write_input
from sidecar.record import MemoryRecord
from tests.conftest import POLICY_DIR, REPO

SCHEMAS = REPO / "schemas"
NOW = datetime(2026, 11, 30, tzinfo=UTC)


def schema(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def stored(**fields: Any) -> dict[str, Any]:
    """A record as the sidecar stores it (what the policy is then shown of it)."""
    body = {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "content": "alice believes the launch is October 17",
        "proposition": {"text": "the launch is October 17", "key": "launch", "value": "10-17"},
        "observer_id": "alice",
        "source_id": "private-session-42",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "reported_belief",
        "audience": ["alice", "group:launch-team"],
        "valid_at": "2026-10-01T00:00:00Z",
        "recorded_at": "2026-10-01T00:00:01Z",
        "provenance": {"writer": "alice"},
    } | fields
    return MemoryRecord.model_validate(body).payload()


RECORDS = [
    stored(),
    stored(observed_id="bob", observed_attitude="knows", modality="known", access_scope="x"),
    stored(modality="world_state", observer_id=None, source={"kind": "change_record"}),
]


@pytest.mark.parametrize("name", ["config", "directory", "vocabulary"])
def test_the_shipped_policy_data_matches_its_schema(name: str) -> None:
    data = json.loads((POLICY_DIR / "whose" / name / "data.json").read_text())
    jsonschema.validate(data, schema(SCHEMAS / "policy" / f"{name}.json"))


def test_the_schemas_can_refuse() -> None:
    config = json.loads((POLICY_DIR / "whose" / "config" / "data.json").read_text())
    config["evidence"]["accepted_kind"] = config["evidence"].pop("accepted_kinds")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, schema(SCHEMAS / "policy" / "config.json"))


def test_disclosure_input_and_answer_match_their_schemas(opa_url: str) -> None:
    question = DisclosureQuestion(
        Identity("bob", "acme", groups=("ops",)), ["carol"], "recall", NOW
    )
    sent = question.input(RECORDS)
    jsonschema.validate(sent, schema(SCHEMAS / "policy" / "disclosure_input.json"))
    answer = httpx.post(f"{opa_url}/v1/data/whose/disclosure/batch", json={"input": sent})
    result = answer.json()["result"]
    decision_schema = schema(SCHEMAS / "disclosure-decision.schema.json")
    assert set(result["decisions"]) == {r["id"] for r in RECORDS}
    for decision in result["decisions"].values():
        jsonschema.validate(decision, decision_schema)
    jsonschema.validate(result["vocabulary"], schema(SCHEMAS / "policy" / "vocabulary.json"))


def test_ingest_input_and_answer_match_their_schemas(opa_url: str) -> None:
    sent = write_input(Identity("alice", "acme"), RECORDS, RECORDS[:1])
    jsonschema.validate(sent, schema(SCHEMAS / "policy" / "ingest_input.json"))
    answer = httpx.post(f"{opa_url}/v1/data/whose/ingest/decisions", json={"input": sent})
    decisions = answer.json()["result"]
    assert set(decisions) == {r["id"] for r in RECORDS}
    for decision in decisions.values():
        jsonschema.validate(decision, schema(SCHEMAS / "ingest-decision.schema.json"))


def test_the_policy_never_sees_the_claim() -> None:
    question = DisclosureQuestion(Identity("bob", "acme"), [], "recall", NOW)
    sent = json.dumps(question.input(RECORDS) | write_input(Identity("a", "acme"), RECORDS, []))
    assert "launch is October 17" not in sent
    assert "10-17" not in sent
