"""Qdrant's REST dialect: its request bodies in, its answer shapes out.

The proxy's routes (http/qdrant/routes.py) read like the native ones; what is particular to
Qdrant lives here: parsing bodies with qdrant-client's own models, refusing what
the sidecar does not serve (with Qdrant's error shape), checking vectors, and
shaping a disclosed record as a Qdrant point whose payload carries the `whose`
object and whose `content` is the attribution sentence.

Every refusal on the dialect's paths is answered in Qdrant's shape
(`{"status": {"error": ...}, "time": ...}`): the error tree's (`QDRANT`, the
dialect's table, chosen for its paths in http/refusals.py) and the dialect's own
(`QdrantError`).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable
from importlib.metadata import version
from typing import Any, TypeVar
from uuid import UUID

import orjson
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from qdrant_client.http import models as qm

from sidecar.auth.identity import Identity
from sidecar.errors import (
    AuditUnavailable,
    CandidateRefused,
    CollectionExists,
    CollectionForbidden,
    CollectionRefused,
    ConsentRefused,
    EmbeddingUnavailable,
    ErasureRefused,
    ErasureRequestsUnavailable,
    FilterRefused,
    Forbidden,
    GrantsUnavailable,
    InvalidRequest,
    LockUnavailable,
    MethodNotAllowed,
    NotFound,
    PolicyUnavailable,
    QueryMissing,
    QueryRefused,
    QueryTooCostly,
    RequestTooLarge,
    StoreUnavailable,
    Unauthenticated,
    Unavailable,
    WhoseError,
    WriteRefused,
)
from sidecar.http.qdrant.caller_filter import OwnIndexes, caller_filter
from sidecar.memory import Memory
from sidecar.messages import Item
from sidecar.points import Group, Point
from sidecar.reads.reader import Shown
from sidecar.store.schema import point_id

# The REST dialect we answer in is that of the qdrant-client whose models we use.
QDRANT_API_VERSION = version("qdrant-client")


class QdrantProblem(BaseModel):
    """Qdrant's error shape (for the OpenAPI document; see QdrantError)."""

    status: dict[str, str]
    time: float
    error: str | None = Field(
        default=None, description="whose's refusal code (errors.py), for one of whose's own."
    )
    reasons: list[Any] | None = None


# Documented so that clients (and the schema fuzzer) know every answer a route gives:
# every refusal on the dialect's paths has Qdrant's shape.
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": QdrantProblem} for status in (400, 401, 404, 413, 422, 503)
}


class QdrantError(Exception):
    """An error answered in Qdrant's shape: {"status": {"error": ...}, "time": ...}."""

    def __init__(
        self,
        status_code: int,
        message: str,
        reasons: list[Any] | None = None,
        headers: dict[str, str] | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.reasons = reasons
        self.headers = headers
        self.code = code


def error_body(exc: QdrantError) -> dict[str, Any]:
    body: dict[str, Any] = {"status": {"error": exc.message}, "time": 0.0}
    if exc.code is not None:
        body["error"] = exc.code
    if exc.reasons is not None:
        body["reasons"] = exc.reasons
    return body


def error_response(exc: QdrantError) -> JSONResponse:
    return JSONResponse(error_body(exc), status_code=exc.status_code, headers=exc.headers)


# The dialect's status for each refusal of the tree: Qdrant answers a body it will not
# run with 400, so an invalid request is a 400 here (a document the write policy or
# the convention refuses stays a 422, an erasure refused a 403).
QDRANT_STATUS: dict[type[WhoseError], int] = {
    WhoseError: 500,
    InvalidRequest: 400,
    NotFound: 404,
    Forbidden: 403,
    CollectionForbidden: 403,
    FilterRefused: 400,
    QueryRefused: 400,
    QueryTooCostly: 400,
    QueryMissing: 404,
    CollectionRefused: 400,
    CollectionExists: 409,
    Unauthenticated: 401,
    MethodNotAllowed: 405,
    RequestTooLarge: 413,
    WriteRefused: 422,
    ErasureRefused: 403,
    ConsentRefused: 403,
    CandidateRefused: 400,
    Unavailable: 503,
    EmbeddingUnavailable: 503,
    PolicyUnavailable: 503,
    StoreUnavailable: 503,
    LockUnavailable: 503,
    AuditUnavailable: 503,
    ErasureRequestsUnavailable: 503,
    GrantsUnavailable: 503,
}


class Qdrant:
    """The error tree in Qdrant's error shape (a dialect of http/refusals.py): the
    message says what to fix, `error` and `reasons` are the tree's own."""

    statuses = QDRANT_STATUS

    def body(self, error: WhoseError) -> dict[str, Any]:
        reasons = error.body().get("reasons", [])
        return error_body(QdrantError(0, _message(error, reasons), reasons, code=error.code))


QDRANT = Qdrant()


def _message(error: WhoseError, reasons: list[Any]) -> str:
    # What the route added on the way (a batch: which operation), said first.
    where = "".join(f"{note}: " for note in getattr(error, "__notes__", ()))
    return where + _what(error, reasons)


def _what(error: WhoseError, reasons: list[Any]) -> str:
    if isinstance(
        error, FilterRefused | QueryRefused | QueryMissing | CollectionRefused | CollectionExists
    ):
        # Their messages are Qdrant's own words (reads/query/), as a client expects them.
        return str(error)
    summary = _summary(reasons)
    if isinstance(error, InvalidRequest):
        validated = bool(reasons) and all(isinstance(r, dict) and "loc" in r for r in reasons)
        what = "Format error in JSON body" if validated else str(error)
        return f"{what}: {summary}" if summary else what
    # Unavailable's message may name internals: only its code and reasons are said.
    words = error.code.replace("_", " ")
    return f"{words}: {summary}" if summary else words


def _summary(reasons: list[Any]) -> str:
    def one(reason: Any) -> str:
        if isinstance(reason, dict) and "reasons" in reason:
            named = reason.get("id", reason.get("index"))
            return f"{named}: " + ", ".join(_words(r) for r in reason["reasons"])
        return _words(reason)

    return "; ".join(one(r) for r in reasons)


def _words(reason: Any) -> str:
    if isinstance(reason, dict):
        key = reason.get("metadata_key")
        where = ".".join(str(p) for p in reason.get("loc", ()))
        return f"{where}: {reason.get('msg')}" + (f" (metadata key `{key}`)" if key else "")
    return str(reason)


def ok(result: Any, started: float) -> JSONResponse:
    return JSONResponse({"result": result, "status": "ok", "time": time.perf_counter() - started})


M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], body: Any) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise QdrantError(400, f"Format error in JSON body: {where}: {first['msg']}") from None


async def aliased_filter(memory: Memory, who: Identity, raw: Any) -> qm.Filter | None:
    """The caller's filter, bounded and tenant-scoped (http/qdrant/caller_filter.py; a
    FilterRefused otherwise), with each `has_id` id also naming what it names for the
    asker: the current version of a document the asker wrote under that id
    (writes/versions.py), so the ids a library remembers still find its documents."""
    checked = caller_filter(raw, who.tenant)
    wanted = [r for r in (point_as_record_id(i) for i in _raw_has_ids(raw)) if r is not None]
    if checked is None or not wanted:
        return checked
    named = await memory.point_aliases(who, wanted)
    points = {
        point_id(who.tenant, asked): [point_id(who.tenant, r) for r in records]
        for asked, records in named.items()
    }
    return _with_aliases(checked, points)


async def filter_check(
    memory: Memory, who: Identity, body: Any, own: OwnIndexes | None = None
) -> Callable[[qm.Filter], qm.Filter]:
    """How the query engine runs each filter of a request (at the root, in every
    prefetch): checked, bounded and tenant-scoped (http/qdrant/caller_filter.py). In the
    whose collection each `has_id` id also names what it names for the asker (as
    `aliased_filter`; resolved once, for the whole body, before anything is searched);
    in a stack collection (`own`: its own indexes, its keys filterable), the documents
    written under that id (`chosen_ids`)."""
    stack = own is not None
    wanted = [r for r in (point_as_record_id(i) for i in _raw_has_ids(body)) if r is not None]
    points: dict[str, list[str]] = {}
    if wanted and not stack:
        named = await memory.point_aliases(who, wanted)
        points = {
            point_id(who.tenant, asked): [point_id(who.tenant, r) for r in records]
            for asked, records in named.items()
        }

    def check(flt: qm.Filter) -> qm.Filter:
        raw = flt.model_dump(mode="json", exclude_none=True, by_alias=True)
        if stack:
            raw = chosen_ids(raw)
        checked = caller_filter(raw, who.tenant, own) or qm.Filter()
        return _with_aliases(checked, points) if points else checked

    return check


def chosen_ids(raw: Any) -> Any:
    """A filter (JSON) whose `has_id` conditions name the ids a stack chose: each
    becomes a match on the id every version keeps (`provenance.chosen_id`)."""
    if isinstance(raw, list):
        return [chosen_ids(c) for c in raw]
    if not isinstance(raw, dict):
        return raw
    if set(raw) == {"has_id"} and isinstance(raw["has_id"], list):
        keys = [str(r) for r in (point_as_record_id(i) for i in raw["has_id"]) if r is not None]
        return {"key": "provenance.chosen_id", "match": {"any": keys}}
    return {k: chosen_ids(v) for k, v in raw.items()}


def _raw_has_ids(raw: Any) -> list[Any]:
    """Every id a filter's `has_id` conditions name, as sent (JSON)."""
    found: list[Any] = []
    if isinstance(raw, dict):
        for key, value in raw.items():
            if key == "has_id" and isinstance(value, list):
                found += value
            else:
                found += _raw_has_ids(value)
    elif isinstance(raw, list):
        for value in raw:
            found += _raw_has_ids(value)
    return found


def _with_aliases(flt: qm.Filter, points: dict[str, list[str]]) -> qm.Filter:
    def condition(c: Any) -> Any:
        if isinstance(c, qm.HasIdCondition):
            ids = [alias for i in c.has_id for alias in points.get(str(i), [str(i)])]
            return qm.HasIdCondition(has_id=list(dict.fromkeys(ids)))
        if isinstance(c, qm.Filter):
            return _with_aliases(c, points)
        return c

    def each(conditions: Any) -> Any:
        if conditions is None:
            return None
        listed = conditions if isinstance(conditions, list) else [conditions]
        return [condition(c) for c in listed]

    min_should = flt.min_should
    if min_should is not None:
        min_should = qm.MinShould(
            conditions=each(min_should.conditions), min_count=min_should.min_count
        )
    return qm.Filter(
        must=each(flt.must),
        should=each(flt.should),
        must_not=each(flt.must_not),
        min_should=min_should,
    )


def dense_vector(vector: Any) -> list[float]:
    """A point's dense vector: unnamed, or under the default name "" (LangChain and
    LlamaIndex send it so); named and sparse vectors are refused."""
    if isinstance(vector, dict) and set(vector) == {""}:
        vector = vector[""]
    if not isinstance(vector, list) or not all(
        isinstance(x, int | float) and not isinstance(x, bool) for x in vector
    ):
        raise QdrantError(400, "named or sparse vectors are not supported: send one dense vector")
    if not all(math.isfinite(x) for x in vector):
        # JSON parsing lets NaN and Infinity through; the engine would store garbage.
        raise QdrantError(400, "Wrong input: vector values must be finite numbers")
    return [float(x) for x in vector]


def stack_vectors(vector: Any) -> dict[str, Any]:
    """A point's vectors for a stack collection, by name, as sent: the unnamed dense
    one under "", a sparse one as a SparseVector (the collection's layout checks names,
    sizes and values when the record is written)."""
    if not isinstance(vector, dict):
        vector = {"": vector}
    named: dict[str, Any] = {}
    for name, value in vector.items():
        if isinstance(value, dict):
            try:
                named[name] = qm.SparseVector.model_validate(value)
            except ValidationError:
                raise QdrantError(400, f"Format error in JSON body: vector `{name}`") from None
        elif isinstance(value, list) and all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in value
        ):
            named[name] = [float(x) for x in value]
        else:
            raise QdrantError(400, f"Format error in JSON body: vector `{name}`")
    return named


def point_as_record_id(raw: Any) -> UUID | None:
    """The UUID a point id is kept as: a UUID, or an unsigned integer as the UUID of
    that number (reads/query/stack.py); None for anything else (it names nothing)."""
    point = point_id_of(raw)
    if point is None:
        return None
    return uuid.UUID(int=point) if isinstance(point, int) else uuid.UUID(point)


def point_id_of(raw: Any) -> int | str | None:
    """A point id as Qdrant takes it: an unsigned 64-bit integer (a string of digits in
    a path), or a UUID in its canonical form; None for anything else."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if 0 <= raw < 2**64 else None
    text = str(raw)
    if text.isascii() and text.isdigit():
        number = int(text)
        return number if number < 2**64 else None
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None


def as_point(
    point: Point, with_payload: Any, *, scored: bool = False, ordered: bool = False
) -> dict[str, Any]:
    """A disclosed record as a Qdrant point: id = record id, the engine's score."""
    base: dict[str, Any] = {
        "id": point.id,
        "payload": _payload(point.shown, with_payload, str(point.id)),
        "vector": point.vector(),
        "shard_key": None,
        "order_value": point.order_value if ordered else None,
    }
    if scored:
        # The engine's version counts every write in the shard, other tenants' too.
        base |= {"version": 0, "score": point.score}
    return base


def as_group(group: Group, with_payload: Any) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "id": group.key,
        "hits": [as_point(p, with_payload, scored=True) for p in group.points],
    }
    if group.lookup is not None:
        answer["lookup"] = as_point(group.lookup, True)
    return answer


def _payload(shown: Shown, selector: Any, point_id: str) -> Any:
    """The payload as each library reads it; `point_id`: the id the point is answered
    by (in a stack collection the one its writer chose: LlamaIndex's node id)."""
    if selector is None or selector is False:
        return None
    item = shown.item
    stored = shown.record.payload
    document = stored.get("document") if isinstance(stored.get("document"), dict) else None
    whose: dict[str, Any] = {
        "attribution": item.attribution,
        "usable_as": item.usable_as,
        "obligations": item.obligations,
        "status": item.status,
    }
    if item.notes:
        whose["notes"] = item.notes
    if document is not None:
        # LangChain reads `whose` as a document's metadata (README): its own is here.
        whose["metadata"] = document.get("metadata") or {}
    # The document text a RAG library hands its LLM is the attribution sentence;
    # the writer's own wording stays available, under its own name.
    full = {
        **stored,
        "content": item.content,
        "as_written": stored.get("content"),
        "whose": whose,
        **_langchain_document(whose, document),
        **_llama_index_node(point_id, item, document),
    }
    if document is not None and document.get("library") == "haystack" and document.get("id"):
        # Haystack takes a document's id and meta from the payload, and finds and
        # deletes it by that id again (writes/versions.py). It reads every other payload
        # key into `meta` too, over the document's own (a record's `source` object would
        # hide the writer's `source`): its document is its own shape alone, what the
        # policy says of it under `meta.whose`.
        said = {k: v for k, v in whose.items() if k != "metadata"}
        own = document.get("metadata") or {}
        full = {"id": document["id"], "content": item.content, "meta": {**own, "whose": said}}
    if document is not None and document.get("library") == "mem0":
        # mem0 reads a memory as `data` and its own keys (`hash`, `created_at`, the
        # session ids, `role`) back from the payload, and every other key as the
        # memory's metadata: the memory is the attribution sentence, what the policy
        # says of it is `metadata.whose`, and no other served key is read as the user's.
        said = {k: v for k, v in whose.items() if k != "metadata"}
        own = document.get("metadata") or {}
        full = {**own, "data": item.content, "whose": said}
    if selector is True:
        return full
    if isinstance(selector, list):
        return {k: v for k, v in full.items() if k in selector}
    if isinstance(selector, qm.PayloadSelectorInclude):
        return {k: v for k, v in full.items() if k in selector.include}
    if isinstance(selector, qm.PayloadSelectorExclude):
        return {k: v for k, v in full.items() if k not in selector.exclude}
    raise QdrantError(400, "unsupported with_payload selector")


def _langchain_document(whose: dict[str, Any], document: dict[str, Any] | None) -> dict[str, Any]:
    """The point as LangChain's QdrantVectorStore reads it with its default payload keys
    (`page_content`, `metadata`), so a stack changes only its URL and token (issue 37):
    the attribution sentence as the text, and as metadata the document's own (what the
    writer gave LangChain) with what the policy says of it beside, the policy's words
    winning a clash. Without these keys LangChain read every point as an empty document."""
    own = dict((document or {}).get("metadata") or {})
    said = {k: v for k, v in whose.items() if k != "metadata"}
    return {"page_content": whose["attribution"], "metadata": {**own, **said}}


# LlamaIndex's vector stores build a node from these payload keys when present, and
# otherwise take every other payload key as metadata, which its default prompt shows
# the LLM: the writer's own wording (`as_written`) and the bare proposition included.
NODE_CONTENT, NODE_TYPE = "_node_content", "_node_type"


def _llama_index_node(
    node_id: str, item: Item, document: dict[str, Any] | None = None
) -> dict[str, str]:
    """The point as a LlamaIndex TextNode (`node_id`: the point's id as answered, so
    LlamaIndex finds and deletes the node by it): the attribution sentence as its text, and
    what the policy says of it (use, obligations, status, source) as its metadata.
    A document's own metadata comes along for the application, kept from the LLM and
    the embedding; its document id is the node's source, as LlamaIndex wrote it."""
    policy = {
        "usable_as": item.usable_as,
        "obligations": item.obligations,
        "status": item.status,
        "source_id": item.source_id,
    }
    own = dict((document or {}).get("metadata") or {})
    metadata = {**own, **policy}
    node: dict[str, Any] = {
        "id_": node_id,
        "text": item.content,
        "metadata": metadata,
        # Metadata says how to use the text; it is not part of what the text means.
        "excluded_embed_metadata_keys": sorted(metadata),
        # The document's own metadata is the writer's, not worded as whose it is.
        "excluded_llm_metadata_keys": sorted(own.keys() - policy.keys()),
        "class_name": "TextNode",
    }
    if document is not None and document.get("id"):
        node["relationships"] = {
            "1": {"node_id": document["id"], "node_type": "4", "class_name": "RelatedNodeInfo"}
        }
    return {NODE_CONTENT: orjson.dumps(node).decode(), NODE_TYPE: "TextNode"}


def upsert_rows(body: dict[str, Any]) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(point id, vector, payload) for each point of an upsert body, list or batch form."""
    if "batch" in body:
        batch = parse(qm.PointsBatch, body).batch
        payloads = batch.payloads or [{} for _ in batch.ids]
        vectors: list[Any]
        if isinstance(batch.vectors, dict):
            # By name: each name's list holds one vector per point.
            named = {n: list(v) for n, v in batch.vectors.items()}
            if any(len(v) != len(batch.ids) for v in named.values()):
                raise QdrantError(400, "batch ids, vectors and payloads differ in length")
            vectors = [{n: _as_sent(v[i]) for n, v in named.items()} for i in range(len(batch.ids))]
        else:
            vectors = list(batch.vectors)
        if not len(batch.ids) == len(vectors) == len(payloads):
            raise QdrantError(400, "batch ids, vectors and payloads differ in length")
        return list(zip(batch.ids, vectors, payloads, strict=True))
    points = parse(qm.PointsList, body).points
    return [(p.id, _as_sent(p.vector), p.payload or {}) for p in points]


def _as_sent(vector: Any) -> Any:
    """A vector as its JSON said it (qdrant-client's models parse a sparse one)."""
    if isinstance(vector, qm.SparseVector):
        return vector.model_dump(mode="json")
    if isinstance(vector, dict):
        return {n: _as_sent(v) for n, v in vector.items()}
    return vector
