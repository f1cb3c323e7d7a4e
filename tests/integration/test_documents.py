"""Documents RAG libraries write (writes/documents.py), labelled by the shipped labeling
policy (rego/whose/labeling) on both evaluators: each library's payload shape, the
metadata keys that name readers, holder, author, source and modality by default, a
team's own keys set in config, and refusals that name the label or key to add. Payloads
are made by the libraries themselves where they can be (LlamaIndex, Haystack)."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack import Document as HaystackDocument
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from sidecar.auth.identity import Identity
from sidecar.errors import PolicyUnavailable
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.linked_opa import LinkedOpa
from sidecar.record import MemoryRecord
from sidecar.writes.documents import labeling_question, library_document, payload_of, to_write
from sidecar.writes.writer import WriteRefused
from tests.conftest import OPA_LIBRARY, POLICY_DIR

POINT = uuid.UUID("7a3c5e1e-8f7b-4c1d-9a43-2f1e0b9c8d7a")
VECTOR = [0.1, 0.2, 0.3]
READERS = {"audience": ["alice", "bob"], "source": "offsite.md"}


# Set by the autouse fixture below: each test runs on both evaluators.
POLICY: list[PolicyEngine] = []


@pytest.fixture(autouse=True)
def _engine(policy: PolicyEngine) -> Any:
    POLICY[:] = [policy]
    yield
    POLICY.clear()


async def converted(payload: dict[str, Any], writer: str = "alice", **was: Any) -> Any:
    """The record the payload stands for, labelled by the policy in one call."""
    question = labeling_question(payload, was=was.get("was"), holder=was.get("holder"))
    [labeled] = await POLICY[0].labels(Identity(writer, "acme"), [question]) if question else [None]
    return to_write(0, POINT, payload, VECTOR, labeled, was=was.get("was"))


async def written(payload: dict[str, Any], writer: str = "alice") -> dict[str, Any]:
    body = await converted(payload, writer)
    return dict(body.model_dump(mode="json", exclude_none=True, exclude={"vector"}))


async def refused(payload: dict[str, Any]) -> list[Any]:
    with pytest.raises(WriteRefused) as refusal:
        await converted(payload)
    [problem] = refusal.value.problems
    assert problem["id"] == str(POINT)
    return list(problem["reasons"])


async def test_langchain_default_keys() -> None:
    record = await written({"page_content": "the offsite is in Lisbon", "metadata": READERS})
    assert record["content"] == "the offsite is in Lisbon"
    assert record["audience"] == ["alice", "bob"]
    assert record["source_id"] == "offsite.md"
    assert record["document"] == {"library": "langchain", "metadata": READERS}


async def test_langchain_as_the_readme_configures_it() -> None:
    assert library_document({"content": "x", "whose": READERS}).library == "langchain"
    assert (await written({"content": "x", "whose": READERS}))["audience"] == ["alice", "bob"]


async def test_llamaindex_node_as_its_vector_store_writes_it() -> None:
    node = TextNode(
        text="the offsite is in Lisbon",
        metadata={**READERS, "page": 3},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")},
    )
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    record = await written(payload)
    assert record["content"] == "the offsite is in Lisbon"
    assert record["document"]["library"] == "llamaindex"
    assert record["document"]["id"] == "doc-1"
    assert record["document"]["metadata"]["page"] == 3


async def test_llamaindex_document_id_is_the_source_when_none_is_named() -> None:
    node = TextNode(
        text="x",
        metadata={"audience": ["alice"]},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")},
    )
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    assert (await written(payload))["source_id"] == "doc-1"


async def test_haystack_document_as_its_store_writes_it() -> None:
    document = HaystackDocument(content="the offsite is in Lisbon", meta=READERS)
    payload = document.to_dict(flatten=False)
    payload.pop("embedding")
    record = await written(payload)
    assert record["document"]["library"] == "haystack"
    assert record["document"]["id"] == document.id
    assert record["source_id"] == "offsite.md"


async def test_plain_payload_every_other_key_is_metadata() -> None:
    record = await written({"content": "x", "audience": "alice", "source_id": "notes", "page": 2})
    assert record["audience"] == ["alice"]
    assert record["document"] == {
        "library": "plain",
        "metadata": {"audience": "alice", "source_id": "notes", "page": 2},
    }


async def test_a_document_is_its_writers_assertion_by_default() -> None:
    record = await written({"content": "x", **READERS}, writer="confluence-sync")
    assert record["observer_id"] == "confluence-sync"
    assert record["modality"] == "asserted"
    assert record["source"] == {
        "kind": "document",
        "speaker": "confluence-sync",
        "participants": [],
    }


async def test_author_and_holder_name_whose_claim_it_is() -> None:
    by_author = await written({"content": "x", **READERS, "author": "carol"}, writer="bot")
    assert (by_author["observer_id"], by_author["source"]["speaker"]) == ("carol", "carol")
    held = await written({"content": "x", **READERS, "holder": "dave", "author": "carol"})
    assert (held["observer_id"], held["source"]["speaker"]) == ("dave", "carol")


async def test_world_state_is_its_authors_word_not_a_holders_view() -> None:
    record = await written({"content": "x", **READERS, "author": "ops", "modality": "world_state"})
    assert "observer_id" not in record
    assert record["source"]["speaker"] == "ops"


async def test_the_other_convention_keys() -> None:
    premise = str(uuid.uuid4())
    record = await written(
        {
            "content": "x",
            **READERS,
            "access_scope": "launch-core",
            "valid_at": "2026-10-01T00:00:00Z",
            "confidence": 0.5,
            "source_kind": "conversation",
            "derived_from": [premise],
        }
    )
    assert record["access_scope"] == "launch-core"
    assert record["valid_at"] == "2026-10-01T00:00:00Z"
    assert record["confidence"] == 0.5
    assert record["source"]["kind"] == "conversation"
    assert record["provenance"] == {"derived_from": [premise]}


async def test_refusals_name_the_key_to_add() -> None:
    assert await refused({"page_content": "x", "metadata": {}}) == [
        "missing_metadata:audience",
        "missing_metadata:source",
    ]
    assert await refused({"page_content": "", "metadata": READERS}) == ["missing_text"]


async def test_a_bad_value_names_its_metadata_key() -> None:
    [reason] = await refused({"content": "x", **READERS, "modality": "gossip"})
    assert reason["metadata_key"] == "modality"
    [reason] = await refused({"content": "x", **READERS, "source_kind": "rumour"})
    assert reason["metadata_key"] == "source_kind"


async def test_a_memory_record_payload_is_taken_as_one() -> None:
    payload = {
        "content": "alice believes x",
        "observer_id": "alice",
        "source_id": "s",
        "modality": "believed",
        "audience": ["alice"],
        "whose": {"served": "and written back"},
    }
    record = await written(payload)
    assert "document" not in record
    assert record["modality"] == "believed"


async def test_a_payload_update_sees_a_document_as_plain() -> None:
    stored = MemoryRecord.model_validate(
        await written({"page_content": "x", "metadata": {**READERS, "page": 1}})
    ).payload()
    plain = payload_of(stored)
    assert plain == {"content": "x", **READERS, "page": 1}
    again = await converted({**plain, "page": 2}, was=stored["document"], holder="alice")
    assert again.document is not None
    assert again.document.library == "langchain"
    assert again.document.metadata["page"] == 2


# --- a team's own keys, and a policy that cannot answer --------------------------------

TEAM = {
    "audience_keys": ["acl", "allowed_users"],
    "holder_keys": ["owner"],
    "source_keys": ["path"],
    "rules": [{"key": "path", "prefix": "/hr/", "access_scope": "hr"}],
}


def policy_copy(folder: Path, labeling: dict[str, Any] | None) -> Path:
    """The shipped policy with config.labeling set (None: without the labeling package)."""
    copy = folder / "rego"
    shutil.copytree(POLICY_DIR, copy)
    if labeling is None:
        shutil.rmtree(copy / "whose" / "labeling")
        return copy
    config = copy / "whose" / "config" / "data.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"labeling": labeling}))
    return copy


@pytest.fixture
async def team(tmp_path: Path) -> AsyncIterator[PolicyEngine]:
    engine = LinkedOpa(OPA_LIBRARY, policy_copy(tmp_path, TEAM), tmp_path / "bundle", 2.0)
    await engine.start()
    POLICY[:] = [engine]
    yield engine
    await engine.close()


@pytest.mark.usefixtures("team")
async def test_a_teams_acl_owner_and_path_label_its_documents() -> None:
    record = await written(
        {"page_content": "x", "metadata": {"acl": ["bob"], "owner": "carol", "path": "/eng/x.md"}},
        writer="ingest-bot",
    )
    assert record["audience"] == ["bob"]
    assert (record["observer_id"], record["source"]["speaker"]) == ("carol", "carol")
    assert record["source_id"] == "/eng/x.md"
    assert "access_scope" not in record
    scoped = await written({"content": "x", "allowed_users": "bob", "path": "/hr/pay.md"})
    assert (scoped["audience"], scoped["access_scope"]) == (["bob"], "hr")


@pytest.mark.usefixtures("team")
async def test_a_teams_refusals_name_the_label_and_its_key() -> None:
    assert await refused({"content": "x", "audience": ["bob"], "path": "/x"}) == [
        "missing_metadata:audience"
    ]
    assert await refused(
        {"content": "x", "acl": "bob", "path": "/hr/x", "access_scope": "pub"}
    ) == ["conflicting_access_scope"]
    # A holder that is no name: the holder and, so, the author are the `owner` key's.
    reasons = await refused({"content": "x", "acl": "bob", "path": "/x", "owner": ["a", "b"]})
    assert [r["loc"] for r in reasons] == [["observer_id"], ["source", "speaker"]]
    assert {r["metadata_key"] for r in reasons} == {"owner"}


async def test_one_call_for_a_batch_in_order(policy: PolicyEngine) -> None:
    documents = [
        labeling_question({"content": "x", **READERS}),
        labeling_question({"content": "x"}),
        labeling_question({"content": "x", "audience": "carol", "source": "s"}),
    ]
    answers = await policy.labels(Identity("alice", "acme"), [d for d in documents if d])
    assert [a.labels.audience if a.labels else a.reasons for a in answers] == [
        ["alice", "bob"],
        ["missing_metadata:audience", "missing_metadata:source"],
        ["carol"],
    ]
    assert await policy.labels(Identity("alice", "acme"), []) == []


async def test_without_the_labeling_policy_nothing_is_labelled(tmp_path: Path) -> None:
    engine = LinkedOpa(OPA_LIBRARY, policy_copy(tmp_path, None), tmp_path / "bundle", 2.0)
    await engine.start()
    try:
        question = labeling_question({"content": "x", **READERS})
        assert question is not None
        with pytest.raises(PolicyUnavailable):
            await engine.labels(Identity("alice", "acme"), [question])
    finally:
        await engine.close()
