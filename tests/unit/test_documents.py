"""The one convention for documents RAG libraries write (writes/documents.py): each
library's payload shape, the metadata keys that name readers, holder, author,
source and modality, and refusals that name the key to add. Payloads are made by
the libraries themselves where they can be (LlamaIndex, Haystack)."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")

from haystack import Document as HaystackDocument
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.utils import node_to_metadata_dict

from sidecar.record import MemoryRecord
from sidecar.writes.documents import library_document, payload_of, to_write
from sidecar.writes.writer import WriteRefused

POINT = uuid.UUID("7a3c5e1e-8f7b-4c1d-9a43-2f1e0b9c8d7a")
VECTOR = [0.1, 0.2, 0.3]
READERS = {"audience": ["alice", "bob"], "source": "offsite.md"}


def written(payload: dict[str, Any], writer: str = "alice") -> dict[str, Any]:
    body = to_write(0, POINT, payload, VECTOR, writer)
    return body.model_dump(mode="json", exclude_none=True, exclude={"vector"})


def refused(payload: dict[str, Any]) -> list[Any]:
    with pytest.raises(WriteRefused) as refusal:
        to_write(0, POINT, payload, VECTOR, "alice")
    [problem] = refusal.value.problems
    assert problem["id"] == str(POINT)
    return list(problem["reasons"])


def test_langchain_default_keys() -> None:
    record = written({"page_content": "the offsite is in Lisbon", "metadata": READERS})
    assert record["content"] == "the offsite is in Lisbon"
    assert record["audience"] == ["alice", "bob"]
    assert record["source_id"] == "offsite.md"
    assert record["document"] == {"library": "langchain", "metadata": READERS}


def test_langchain_as_the_readme_configures_it() -> None:
    assert library_document({"content": "x", "whose": READERS}).library == "langchain"
    assert written({"content": "x", "whose": READERS})["audience"] == ["alice", "bob"]


def test_llamaindex_node_as_its_vector_store_writes_it() -> None:
    node = TextNode(
        text="the offsite is in Lisbon",
        metadata={**READERS, "page": 3},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")},
    )
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    record = written(payload)
    assert record["content"] == "the offsite is in Lisbon"
    assert record["document"]["library"] == "llamaindex"
    assert record["document"]["id"] == "doc-1"
    assert record["document"]["metadata"]["page"] == 3


def test_llamaindex_document_id_is_the_source_when_none_is_named() -> None:
    node = TextNode(
        text="x",
        metadata={"audience": ["alice"]},
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1")},
    )
    payload = node_to_metadata_dict(node, remove_text=False, flat_metadata=False)
    assert written(payload)["source_id"] == "doc-1"


def test_haystack_document_as_its_store_writes_it() -> None:
    document = HaystackDocument(content="the offsite is in Lisbon", meta=READERS)
    payload = document.to_dict(flatten=False)
    payload.pop("embedding")
    record = written(payload)
    assert record["document"]["library"] == "haystack"
    assert record["document"]["id"] == document.id
    assert record["source_id"] == "offsite.md"


def test_plain_payload_every_other_key_is_metadata() -> None:
    record = written({"content": "x", "audience": "alice", "source_id": "notes", "page": 2})
    assert record["audience"] == ["alice"]
    assert record["document"] == {
        "library": "plain",
        "metadata": {"audience": "alice", "source_id": "notes", "page": 2},
    }


def test_a_document_is_its_writers_assertion_by_default() -> None:
    record = written({"content": "x", **READERS}, writer="confluence-sync")
    assert record["observer_id"] == "confluence-sync"
    assert record["modality"] == "asserted"
    assert record["source"] == {
        "kind": "document",
        "speaker": "confluence-sync",
        "participants": [],
    }


def test_author_and_holder_name_whose_claim_it_is() -> None:
    by_author = written({"content": "x", **READERS, "author": "carol"}, writer="bot")
    assert (by_author["observer_id"], by_author["source"]["speaker"]) == ("carol", "carol")
    held = written({"content": "x", **READERS, "holder": "dave", "author": "carol"})
    assert (held["observer_id"], held["source"]["speaker"]) == ("dave", "carol")


def test_world_state_is_its_authors_word_not_a_holders_view() -> None:
    record = written({"content": "x", **READERS, "author": "ops", "modality": "world_state"})
    assert "observer_id" not in record
    assert record["source"]["speaker"] == "ops"


def test_the_other_convention_keys() -> None:
    premise = str(uuid.uuid4())
    record = written(
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


def test_refusals_name_the_key_to_add() -> None:
    assert refused({"page_content": "x", "metadata": {}}) == [
        "missing_metadata:audience",
        "missing_metadata:source",
    ]
    assert refused({"page_content": "", "metadata": READERS}) == ["missing_text"]


def test_a_bad_value_names_its_metadata_key() -> None:
    [reason] = refused({"content": "x", **READERS, "modality": "gossip"})
    assert reason["metadata_key"] == "modality"
    [reason] = refused({"content": "x", **READERS, "source_kind": "rumour"})
    assert reason["metadata_key"] == "source_kind"


def test_a_memory_record_payload_is_taken_as_one() -> None:
    payload = {
        "content": "alice believes x",
        "observer_id": "alice",
        "source_id": "s",
        "modality": "believed",
        "audience": ["alice"],
        "whose": {"served": "and written back"},
    }
    record = written(payload)
    assert "document" not in record
    assert record["modality"] == "believed"


def test_a_payload_update_sees_a_document_as_plain() -> None:
    stored = MemoryRecord.model_validate(
        written({"page_content": "x", "metadata": {**READERS, "page": 1}})
    ).payload()
    plain = payload_of(stored)
    assert plain == {"content": "x", **READERS, "page": 1}
    again = to_write(0, POINT, {**plain, "page": 2}, VECTOR, "alice", was=stored["document"])
    assert again.document is not None
    assert again.document.library == "langchain"
    assert again.document.metadata["page"] == 2
