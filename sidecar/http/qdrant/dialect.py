"""Qdrant's REST dialect: its request bodies in, its answer shapes out.

The proxy's routes (http/qdrant/routes.py) read like the native ones; what is particular to
Qdrant lives here: parsing bodies with qdrant-client's own models, refusing what
the sidecar does not serve (with Qdrant's error shape), checking vectors, and
shaping a disclosed record as a Qdrant point whose payload carries the `whose`
object and whose `content` is the attribution sentence.
"""

from __future__ import annotations

import math
import time
import uuid
from importlib.metadata import version
from typing import Any, TypeVar
from uuid import UUID

import orjson
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from qdrant_client.http import models as qm

from sidecar.errors import FilterRefused

# The REST dialect we answer in is that of the qdrant-client whose models we use.
from sidecar.http.qdrant.caller_filter import caller_filter
from sidecar.messages import Item, Problem
from sidecar.reads.reader import Shown
from sidecar.record import has_usable_length

# The REST dialect we answer in is that of the qdrant-client whose models we use.
QDRANT_API_VERSION = version("qdrant-client")


class QdrantProblem(BaseModel):
    """Qdrant's error shape (for the OpenAPI document; see QdrantError)."""

    status: dict[str, str]
    time: float
    reasons: list[Any] | None = None


# Documented so that clients (and the schema fuzzer) know every answer a route gives:
# Qdrant-shaped refusals, and the app's Problem shape for 401, a body that is not
# JSON (400) or too large (413), 422 from body parsing, and 503 from a policy or
# store that is down.
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": QdrantProblem | Problem},
    401: {"model": Problem},
    404: {"model": QdrantProblem},
    413: {"model": Problem},
    422: {"model": QdrantProblem | Problem},
    503: {"model": Problem},
}


class QdrantError(Exception):
    """An error answered in Qdrant's shape: {"status": {"error": ...}, "time": ...}."""

    def __init__(
        self,
        status_code: int,
        message: str,
        reasons: list[Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.reasons = reasons
        self.headers = headers


def error_response(exc: QdrantError) -> JSONResponse:
    body: dict[str, Any] = {"status": {"error": exc.message}, "time": 0.0}
    if exc.reasons is not None:
        body["reasons"] = exc.reasons
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


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


def checked_filter(raw: Any, tenant: str) -> qm.Filter | None:
    """The caller's filter, bounded and tenant-scoped (http/qdrant/caller_filter.py), or a 400."""
    try:
        return caller_filter(raw, tenant)
    except FilterRefused as exc:
        raise QdrantError(400, str(exc), reasons=[exc.reason]) from None


class SearchBody(BaseModel):
    """Qdrant's (older) search body; qdrant-client 1.20 dropped its model, other clients
    still send it."""

    # A field this sidecar does not know (shard_key, say) is refused, not ignored.
    model_config = ConfigDict(extra="forbid")

    vector: list[float]
    filter: Any = None
    limit: int = 10
    offset: int | None = None
    with_payload: qm.WithPayloadInterface | None = None
    with_vector: qm.WithVector | None = None
    score_threshold: float | None = None
    params: qm.SearchParams | None = None


def dense(query: Any) -> list[float]:
    if isinstance(query, qm.NearestQuery):
        if query.mmr is not None:
            # Answering plain nearest neighbours instead would be a silent change of meaning.
            raise QdrantError(400, "mmr (diversity re-ranking) is not supported")
        query = query.nearest
    if isinstance(query, list) and query and all(isinstance(x, int | float) for x in query):
        return [float(x) for x in query]
    raise QdrantError(400, "only nearest-neighbour queries with a dense vector are supported")


def checked_vector(vector: list[float], size: int) -> list[float]:
    # JSON parsing lets NaN and Infinity through; the engine would rank by garbage.
    if not all(math.isfinite(x) for x in vector):
        raise QdrantError(400, "Wrong input: vector values must be finite numbers")
    if len(vector) != size:
        raise QdrantError(
            400, f"Wrong input: Vector dimension error: expected dim: {size}, got {len(vector)}"
        )
    if not has_usable_length(vector):
        raise QdrantError(400, "Wrong input: vector length must be non-zero and finite")
    return vector


def wants_vector(with_vector: Any) -> bool:
    if isinstance(with_vector, list):
        raise QdrantError(400, "named vectors are not supported; use with_vector: true")
    return bool(with_vector)


def point_as_record_id(raw: Any) -> UUID | None:
    # Record ids are UUIDs; an integer id can name no record here.
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


def as_point(shown: Shown, with_payload: Any, scored: bool) -> dict[str, Any]:
    """A disclosed record as a Qdrant point: id = record id."""
    base: dict[str, Any] = {
        "id": shown.record.id,
        "payload": _payload(shown, with_payload),
        "vector": shown.record.vector,
        "shard_key": None,
        "order_value": None,
    }
    if scored:
        # The engine's version counts every write in the shard, other tenants' too.
        base |= {"version": 0, "score": shown.record.score}
    return base


def _payload(shown: Shown, selector: Any) -> Any:
    if selector is None or selector is False:
        return None
    item = shown.item
    whose = {
        "attribution": item.attribution,
        "usable_as": item.usable_as,
        "obligations": item.obligations,
        "status": item.status,
    }
    # The document text a RAG library hands its LLM is the attribution sentence;
    # the writer's own wording stays available, under its own name.
    stored = shown.record.payload
    full = {
        **stored,
        "content": item.content,
        "as_written": stored.get("content"),
        "whose": whose,
        **_llama_index_node(shown.record.id, item),
    }
    if selector is True:
        return full
    if isinstance(selector, list):
        return {k: v for k, v in full.items() if k in selector}
    if isinstance(selector, qm.PayloadSelectorInclude):
        return {k: v for k, v in full.items() if k in selector.include}
    if isinstance(selector, qm.PayloadSelectorExclude):
        return {k: v for k, v in full.items() if k not in selector.exclude}
    raise QdrantError(400, "unsupported with_payload selector")


# LlamaIndex's vector stores build a node from these payload keys when present, and
# otherwise take every other payload key as metadata, which its default prompt shows
# the LLM: the writer's own wording (`as_written`) and the bare proposition included.
NODE_CONTENT, NODE_TYPE = "_node_content", "_node_type"


def _llama_index_node(record_id: str, item: Item) -> dict[str, str]:
    """The point as a LlamaIndex TextNode: the attribution sentence as its text, and
    what the policy says of it (use, obligations, status, source) as its metadata."""
    metadata = {
        "usable_as": item.usable_as,
        "obligations": item.obligations,
        "status": item.status,
        "source_id": item.source_id,
    }
    node = {
        "id_": record_id,
        "text": item.content,
        "metadata": metadata,
        # Metadata says how to use the text; it is not part of what the text means.
        "excluded_embed_metadata_keys": sorted(metadata),
        "class_name": "TextNode",
    }
    return {NODE_CONTENT: orjson.dumps(node).decode(), NODE_TYPE: "TextNode"}


def upsert_rows(body: dict[str, Any]) -> list[tuple[Any, Any, dict[str, Any]]]:
    """(point id, vector, payload) for each point of an upsert body, list or batch form."""
    if "batch" in body:
        batch = parse(qm.PointsBatch, body).batch
        if not isinstance(batch.vectors, list):
            raise QdrantError(400, "named vectors are not supported")
        payloads = batch.payloads or [{} for _ in batch.ids]
        if not len(batch.ids) == len(batch.vectors) == len(payloads):
            raise QdrantError(400, "batch ids, vectors and payloads differ in length")
        return list(zip(batch.ids, batch.vectors, payloads, strict=True))
    return [(p.id, p.vector, p.payload or {}) for p in parse(qm.PointsList, body).points]
