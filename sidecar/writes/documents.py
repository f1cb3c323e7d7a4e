"""Documents: how what a RAG library writes becomes a perspective record. Pure.

LangChain, LlamaIndex and Haystack write a document as a Qdrant point whose payload
holds its text and its metadata, each in its own shape. One convention reads them
all (README, "Writes through the proxy"; docs/design.md §6):

| library    | text                          | metadata                 | document id  |
|------------|-------------------------------|--------------------------|--------------|
| LangChain  | `page_content` (or `content`) | `metadata` (or `whose`)  | -            |
| LlamaIndex | `_node_content` text          | `_node_content` metadata | `ref_doc_id` |
| Haystack   | `content`                     | `meta`                   | `id`         |
| plain      | `content` (or `text`)         | every other key          | -            |

and these metadata keys say whose the document is and who may read it:

| key                                      | record field        | when absent         |
|------------------------------------------|---------------------|---------------------|
| `audience`                               | audience            | refused (1)         |
| `source_id`, `source` or `file_path`     | source_id           | document id, or (1) |
| `holder`                                 | observer_id         | `author`, or writer |
| `author`                                 | source.speaker      | the holder          |
| `modality`                               | modality            | `asserted`          |
| `source_kind`                            | source.kind         | `document`          |
| `access_scope`, `valid_at`, `confidence` | the same            | -                   |
| `derived_from`                           | provenance.derived_from | -               |

(1) refused with `missing_metadata:audience` or `missing_metadata:source`.

A document is its author's (or, without one, its writer's) assertion: never a fact
unless the modality says `world_state` and an authority writes it (the policies
decide; this module only maps). The whole metadata is kept as written
(`document.metadata`), never shown to the policy. A payload that is already a
memory record (it has `modality` and `source_id` and no library's keys) is taken
as one, as before.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from sidecar.errors import validation_reasons
from sidecar.record import Library, MemoryWrite, Payload
from sidecar.writes.writer import WriteRefused

# The metadata keys of the convention, in the order they are looked for.
AUDIENCE = "audience"
SOURCES = ("source_id", "source", "file_path")
HOLDER = "holder"
AUTHOR = "author"
MODALITY = "modality"
SOURCE_KIND = "source_kind"
SCOPE = "access_scope"
VALID_AT = "valid_at"
CONFIDENCE = "confidence"
DERIVED_FROM = "derived_from"
CONVENTION: tuple[str, ...] = (AUDIENCE, *SOURCES, HOLDER, AUTHOR, MODALITY, SOURCE_KIND)
CONVENTION += (SCOPE, VALID_AT, CONFIDENCE, DERIVED_FROM)
DEFAULT_MODALITY = "asserted"
DEFAULT_SOURCE_KIND = "document"
# The payload keys the sidecar serves (http/qdrant/dialect.py): a payload read through
# the proxy and written back is not a new claim by its reader.
SERVED_ONLY = ("whose", "as_written", "_node_content", "_node_type")


@dataclass(frozen=True)
class LibraryDocument:
    """What a payload says, read in its library's shape."""

    library: Library | None  # None: a memory record
    text: str | None
    metadata: Payload
    document_id: str | None = None


def library_document(payload: Payload) -> LibraryDocument:
    """Which library wrote the payload, its text, metadata and document id."""
    if "_node_content" in payload:
        return _llama_index(payload)
    if "meta" in payload and "id" in payload and isinstance(payload["meta"], dict | None):
        meta = payload["meta"] or {}
        return LibraryDocument(
            "haystack", _text(payload.get("content")), meta, _text(payload["id"])
        )
    if _is_langchain(payload):
        text = payload.get("page_content", payload.get("content"))
        metadata = payload.get("metadata", payload.get("whose"))
        return LibraryDocument(
            "langchain", _text(text), metadata if isinstance(metadata, dict) else {}
        )
    if "modality" in payload and "source_id" in payload:
        return LibraryDocument(None, None, {})
    text = payload.get("content", payload.get("text"))
    rest = {k: v for k, v in payload.items() if k not in ("content", "text", *SERVED_ONLY)}
    return LibraryDocument("plain", _text(text), rest)


def _is_langchain(payload: Payload) -> bool:
    """Text and one metadata object: LangChain's `page_content` and `metadata` by
    default, `content` and `whose` as the README configures it."""
    if "page_content" in payload:
        return True
    keys = set(payload)
    return (
        len(keys) == 2
        and "content" in keys
        and (keys - {"content"}) <= {"metadata", "whose"}
        and isinstance(payload.get("metadata", payload.get("whose")), dict | None)
    )


def _llama_index(payload: Payload) -> LibraryDocument:
    try:
        node = json.loads(payload["_node_content"])
    except (TypeError, ValueError):
        node = None
    if not isinstance(node, dict):
        return LibraryDocument("llamaindex", None, {})
    metadata = node.get("metadata")
    ref = (node.get("relationships") or {}).get("1") or {}
    document_id = ref.get("node_id") if isinstance(ref, dict) else None
    if not isinstance(document_id, str) or document_id == "None":
        document_id = _text(payload.get("ref_doc_id"))
    if document_id == "None":
        document_id = None
    return LibraryDocument(
        "llamaindex",
        _text(node.get("text")),
        metadata if isinstance(metadata, dict) else {},
        document_id,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def to_write(
    index: int,
    point: UUID,
    payload: Payload,
    vector: list[float],
    writer: str,
    *,
    was: Mapping[str, Any] | None = None,
    holder: str | None = None,
) -> MemoryWrite:
    """The record a point's payload stands for, with the point's vector; WriteRefused
    naming what to add or fix otherwise. A document that names no holder or author is
    `holder`'s (for a payload update, the changed version's), else the writer's.
    `was`: the document a payload update changed (its library and id carry over to
    the plain payload the update made, see `payload_of`)."""
    found = library_document(payload)
    if was is not None and found.library == "plain":
        found = LibraryDocument(was["library"], found.text, found.metadata, was.get("id"))
    if found.library is None:
        record = {k: v for k, v in payload.items() if k not in SERVED_ONLY}
        return _validated(index, point, {**record, "id": str(point), "vector": vector})
    reasons: list[Any] = []
    if found.text is None:
        reasons.append("missing_text")
    metadata = found.metadata
    audience = metadata.get(AUDIENCE)
    if isinstance(audience, str):
        audience = [audience]
    if not audience:
        reasons.append(f"missing_metadata:{AUDIENCE}")
    source = next((metadata[k] for k in SOURCES if metadata.get(k)), found.document_id)
    if not source:
        reasons.append("missing_metadata:source")
    if reasons:
        raise WriteRefused([{"index": index, "id": str(point), "reasons": reasons}])
    holder = metadata.get(HOLDER) or metadata.get(AUTHOR) or holder or writer

    body: Payload = {
        "id": str(point),
        "content": found.text,
        "observer_id": holder,
        "source_id": source,
        "source": {
            "kind": metadata.get(SOURCE_KIND, DEFAULT_SOURCE_KIND),
            "speaker": metadata.get(AUTHOR, holder),
        },
        "modality": metadata.get(MODALITY, DEFAULT_MODALITY),
        "audience": audience,
        "document": {"library": found.library, "id": found.document_id, "metadata": metadata},
        "vector": vector,
    }
    if body["modality"] == "world_state" and HOLDER not in metadata:
        # A world-state claim has no holder: it is its source's (the author's) word.
        del body["observer_id"]
    for key in (SCOPE, VALID_AT, CONFIDENCE):
        if key in metadata:
            body[key] = metadata[key]
    if DERIVED_FROM in metadata:
        body["provenance"] = {"derived_from": metadata[DERIVED_FROM]}
    if body["document"]["id"] is None:
        del body["document"]["id"]
    return _validated(index, point, body)


def _validated(index: int, point: UUID, body: Payload) -> MemoryWrite:
    try:
        return MemoryWrite.model_validate(body)
    except ValidationError as exc:
        reasons = [_metadata_reason(e) for e in validation_reasons(exc.errors())]
        raise WriteRefused([{"index": index, "id": str(point), "reasons": reasons}]) from None


# Where a record field came from in the document's metadata, to say which key to fix.
_FROM_METADATA = {
    "audience": AUDIENCE,
    "observer_id": HOLDER,
    "source_id": "source",
    "modality": MODALITY,
    "access_scope": SCOPE,
    "valid_at": VALID_AT,
    "confidence": CONFIDENCE,
    "provenance": DERIVED_FROM,
    "document": "metadata",
}


def _metadata_reason(problem: dict[str, Any]) -> Any:
    """A validation problem, named by the metadata key to fix where there is one."""
    loc = problem.get("loc") or []
    head = str(loc[0]) if loc else ""
    if loc[:2] == ["source", "kind"]:
        return {**problem, "metadata_key": SOURCE_KIND}
    if loc[:2] == ["source", "speaker"]:
        return {**problem, "metadata_key": AUTHOR}
    if head in _FROM_METADATA:
        return {**problem, "metadata_key": _FROM_METADATA[head]}
    return problem


def payload_of(record: Mapping[str, Any]) -> Payload:
    """A stored record as a plain payload for a payload update (`set_payload`,
    `overwrite_payload`, `delete_payload`) to change: a document as its text
    (`content`) beside its metadata keys, as written; a record that came as a record,
    as its fields a writer sends."""
    document = record.get("document")
    if isinstance(document, dict):
        return {"content": record.get("content"), **(document.get("metadata") or {})}
    fields = {k: v for k, v in record.items() if k not in _SET_BY_THE_SIDECAR}
    provenance = {
        k: v for k, v in (record.get("provenance") or {}).items() if k in ("method", "derived_from")
    }
    if provenance:
        fields["provenance"] = provenance
    if (record.get("proposition") or {}).get("key"):
        fields.pop("invalid_at", None)  # a keyed version's end is supersession's to set
    return fields


# Fields a writer does not send (a record sent back with them would be refused).
_SET_BY_THE_SIDECAR = (
    "id",
    "tenant",
    "recorded_at",
    "supersedes",
    "superseded_by",
    "premise_changes",
    "provenance",
    "document",
)
