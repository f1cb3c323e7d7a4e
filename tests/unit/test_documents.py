"""What the labeling policy is asked about a document, and the record its answer makes
(writes/documents.py, pure). The labels themselves are the policy's:
tests/integration/test_documents.py asks the real one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sidecar.policy.contract import LabelDecision
from sidecar.writes.documents import labeling_question, to_write
from sidecar.writes.writer import WriteRefused

POINT = uuid.UUID("7a3c5e1e-8f7b-4c1d-9a43-2f1e0b9c8d7a")
VECTOR = [0.1, 0.2, 0.3]
METADATA = {
    "acl": ["bob"],
    "owner": "alice",
    "path": "/eng/x.md",
    "valid_at": "2026-10-01T00:00:00Z",
}
LABELS = {
    "audience": ["bob"],
    "holder": "alice",
    "author": "alice",
    "source_id": "/eng/x.md",
    "modality": "asserted",
    "source_kind": "document",
    "from": {"audience": "acl", "holder": "owner", "source_id": "path"},
}


def decided(**labels: Any) -> LabelDecision:
    return LabelDecision.model_validate({"labels": LABELS | labels})


def test_the_policy_reads_the_metadata_never_the_text() -> None:
    question = labeling_question({"page_content": "the roadmap", "metadata": METADATA})
    assert question is not None
    assert question.model_dump(exclude_none=True) == {
        "library": "langchain",
        "metadata": METADATA,
        "text_length": len("the roadmap"),
    }


def test_a_memory_record_is_not_asked_about() -> None:
    record = {"content": "x", "modality": "believed", "source_id": "s", "audience": ["a"]}
    assert labeling_question(record) is None


def test_a_payload_update_says_whose_the_version_was() -> None:
    question = labeling_question(
        {"content": "x", "acl": "bob"}, was={"library": "haystack", "id": "d1"}, holder="alice"
    )
    assert question is not None
    assert (question.library, question.document_id, question.previous_holder) == (
        "haystack",
        "d1",
        "alice",
    )


def test_the_record_takes_the_policys_labels() -> None:
    body = to_write(
        0, POINT, {"page_content": "x", "metadata": METADATA}, VECTOR, decided(access_scope="eng")
    )
    record = body.model_dump(mode="json", exclude_none=True, exclude={"vector"})
    assert record["audience"] == ["bob"]
    assert (record["observer_id"], record["source"]["speaker"]) == ("alice", "alice")
    assert (record["source_id"], record["access_scope"]) == ("/eng/x.md", "eng")
    assert record["valid_at"] == "2026-10-01T00:00:00Z"  # read here, whatever the policy
    assert record["document"] == {"library": "langchain", "metadata": METADATA}


def test_no_holder_label_is_world_state_nobody_holds() -> None:
    body = to_write(
        0, POINT, {"content": "x"}, VECTOR, decided(holder=None, modality="world_state")
    )
    assert body.observer_id is None


def refused(labeled: LabelDecision | None, text: str = "x") -> list[Any]:
    with pytest.raises(WriteRefused) as refusal:
        to_write(0, POINT, {"page_content": text, "metadata": METADATA}, VECTOR, labeled)
    [problem] = refusal.value.problems
    return list(problem["reasons"])


def test_the_policys_reasons_are_the_refusal() -> None:
    reasons = LabelDecision(reasons=["missing_metadata:audience"])
    assert refused(reasons, text="") == ["missing_text", "missing_metadata:audience"]
    assert refused(None) == ["no_decision"]


def test_a_bad_label_names_the_key_it_came_from() -> None:
    [reason] = refused(decided(audience="bob"))
    assert reason["metadata_key"] == "acl"


def test_a_decision_is_labels_or_reasons() -> None:
    with pytest.raises(ValueError, match="labels or reasons"):
        LabelDecision.model_validate({})
    with pytest.raises(ValueError, match="labels or reasons"):
        LabelDecision.model_validate({"labels": LABELS, "reasons": ["x"]})
