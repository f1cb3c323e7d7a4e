"""Documents: how what a RAG library writes becomes a perspective record. Pure.

LangChain, LlamaIndex and Haystack write a document as a Qdrant point whose payload
holds its text and its metadata, each in its own shape. One convention reads them
all (README, "Writes through the proxy"; docs/design.md §6):

| library    | text                          | metadata                 | document id  |
|------------|-------------------------------|--------------------------|--------------|
| LangChain  | `page_content` (or `content`) | `metadata` (or `whose`)  | -            |
| LlamaIndex | `_node_content` text          | `_node_content` metadata | `ref_doc_id` |
| Haystack   | `content`                     | `meta`                   | `id`         |
| mem0       | `data` (with its `hash`)      | every other key          | -            |
| plain      | `content` (or `text`)         | every other key          | -            |

and the labeling policy (rego/whose/labeling, asked once per batch: `labeling_question`
here, the engine's `labels`) says from the document's metadata whose the document is and
who may read it. Unconfigured, it keeps this convention (data.whose.config.labeling maps
an application's own keys instead, an ACL list, an owner, a path):

| key                                      | record field        | when absent         |
|------------------------------------------|---------------------|---------------------|
| `audience`                               | audience            | refused (1)         |
| `source_id`, `source` or `file_path`     | source_id           | document id, or (1) |
| `holder`                                 | observer_id         | `author`, or writer |
| `author`                                 | source.speaker      | the holder          |
| `modality`                               | modality            | `asserted`          |
| `source_kind`                            | source.kind         | `document`          |
| `access_scope`                           | access_scope        | -                   |
| `categories`                             | categories          | -                   |

(1) refused with `missing_metadata:audience` or `missing_metadata:source`. These
metadata keys are read here, whatever the policy: `valid_at`, `confidence`, and
`derived_from` (provenance.derived_from). The policy reads a library's own keys after
the convention's: a mem0 memory's `user_id` is its reader, its holder and (without a
`run_id`) its source.

A document is its author's (or, without one, its writer's) assertion: never a fact
unless the modality says `world_state` and an authority writes it (the policies
decide; this module only maps). The whole metadata is kept as written
(`document.metadata`); the labeling policy reads it, the other policies never see it.
A payload that is already a memory record (it has `modality` and `source_id` and no
library's keys) is taken as one, as before, and carries its own labels.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from sidecar.errors import validation_reasons
from sidecar.policy.contract import LabelDecision, LabelingDocument
from sidecar.record import Library, MemoryWrite, Payload
from sidecar.writes.writer import WriteRefused

# The metadata keys of the convention (the labeling policy's defaults), named where a
# value is refused; the last three are read here.
AUDIENCE = "audience"
HOLDER = "holder"
AUTHOR = "author"
MODALITY = "modality"
SOURCE_KIND = "source_kind"
SCOPE = "access_scope"
CATEGORIES = "categories"
VALID_AT = "valid_at"
CONFIDENCE = "confidence"
DERIVED_FROM = "derived_from"
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
    if isinstance(payload.get("data"), str) and "hash" in payload:
        # mem0's vector store: the memory under `data`, its md5 under `hash`, and beside
        # them its session ids (`user_id`, `agent_id`, `run_id`), `role`, `created_at`.
        rest = {k: v for k, v in payload.items() if k not in ("data", *SERVED_ONLY)}
        return LibraryDocument("mem0", _text(payload["data"]), rest)
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


def labeling_question(
    payload: Payload, *, was: Mapping[str, Any] | None = None, holder: str | None = None
) -> LabelingDocument | None:
    """What the labeling policy is asked about a point's payload: its library, document
    id and metadata (never its text); None for a payload that is a memory record (it
    carries its own labels). `was` and `holder` as for `to_write`."""
    found = _document(payload, was)
    if found.library is None:
        return None
    return LabelingDocument(
        library=found.library,
        document_id=found.document_id,
        metadata=found.metadata,
        text_length=len(found.text) if found.text is not None else None,
        previous_holder=holder,
    )


def to_write(
    index: int,
    point: UUID,
    payload: Payload,
    vector: list[float] | None,
    labeled: LabelDecision | None,
    *,
    was: Mapping[str, Any] | None = None,
) -> MemoryWrite:
    """The record a point's payload stands for, with the point's vector and the labels
    the labeling policy gave its document (`labeled`, the answer to
    `labeling_question`); WriteRefused naming what to add or fix otherwise. `was`: the
    document a payload update changed (its library and id carry over to the plain
    payload the update made, see `payload_of`)."""
    found = _document(payload, was)
    if found.library is None:
        record = {k: v for k, v in payload.items() if k not in SERVED_ONLY}
        return _validated(index, point, {**record, "id": str(point), "vector": vector}, {})
    reasons: list[Any] = []
    if found.text is None:
        reasons.append("missing_text")
    if labeled is None:
        reasons.append("no_decision")
    else:
        reasons += labeled.reasons
    if reasons or labeled is None or labeled.labels is None:
        raise WriteRefused([{"index": index, "id": str(point), "reasons": reasons}])
    labels = labeled.labels
    metadata = found.metadata
    body: Payload = {
        "id": str(point),
        "content": found.text,
        "source_id": labels.source_id,
        "source": {"kind": labels.source_kind, "speaker": labels.author},
        "modality": labels.modality,
        "audience": labels.audience,
        "document": {"library": found.library, "id": found.document_id, "metadata": metadata},
        "vector": vector,
    }
    if labels.holder is not None:
        # None: a world-state claim, no holder's view (its author's word).
        body["observer_id"] = labels.holder
    if labels.access_scope is not None:
        body[SCOPE] = labels.access_scope
    if labels.categories is not None:
        body[CATEGORIES] = labels.categories
    for key in (VALID_AT, CONFIDENCE):
        if key in metadata:
            body[key] = metadata[key]
    if DERIVED_FROM in metadata:
        body["provenance"] = {"derived_from": metadata[DERIVED_FROM]}
    if body["document"]["id"] is None:
        del body["document"]["id"]
    return _validated(index, point, body, labels.from_)


def _document(payload: Payload, was: Mapping[str, Any] | None) -> LibraryDocument:
    found = library_document(payload)
    if was is not None and found.library == "plain":
        return LibraryDocument(was["library"], found.text, found.metadata, was.get("id"))
    return found


def _validated(index: int, point: UUID, body: Payload, keys: Mapping[str, str]) -> MemoryWrite:
    """The record checked; a problem names the metadata key to fix (`keys`: the key each
    label was read from, as the labeling policy says)."""
    try:
        return MemoryWrite.model_validate(body)
    except ValidationError as exc:
        reasons = [_metadata_reason(e, keys) for e in validation_reasons(exc.errors())]
        raise WriteRefused([{"index": index, "id": str(point), "reasons": reasons}]) from None


# Which label or metadata key a record field came from, to say which key to fix (an
# author not named is the holder).
_LABEL_OF = {
    "audience": ("audience",),
    "observer_id": ("holder",),
    "source_id": ("source_id",),
    "access_scope": ("access_scope",),
    "categories": ("categories",),
    "source.speaker": ("author", "holder"),
}
_FROM_METADATA = {
    "audience": AUDIENCE,
    "observer_id": HOLDER,
    "source_id": "source",
    "source.speaker": AUTHOR,
    "source.kind": SOURCE_KIND,
    "modality": MODALITY,
    "access_scope": SCOPE,
    "categories": CATEGORIES,
    "valid_at": VALID_AT,
    "confidence": CONFIDENCE,
    "provenance": DERIVED_FROM,
    "document": "metadata",
}


def _metadata_reason(problem: dict[str, Any], keys: Mapping[str, str]) -> Any:
    """A validation problem, named by the metadata key to fix where there is one."""
    loc = [str(part) for part in problem.get("loc") or []]
    field = ".".join(loc[:2]) if loc[:1] == ["source"] else (loc[0] if loc else "")
    key = next((keys[label] for label in _LABEL_OF.get(field, ()) if label in keys), None)
    key = key or _FROM_METADATA.get(field)
    return {**problem, "metadata_key": key} if key is not None else problem


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
