"""Drop-in Qdrant REST endpoints, with the disclosure policy on every point.

An unmodified qdrant-client (and the RAG libraries built on it) can point its URL
at the sidecar. Bodies are Qdrant's own REST bodies, parsed with qdrant-client's
models (http/qdrant/dialect.py); answers have Qdrant's shape. What differs is what
comes back: only the points the policy discloses to the asker, each payload's
`content` the attribution sentence, with a `whose` object (usable_as,
obligations, status), and point ids that are record ids.

Search-like reads (query, search, scroll, count) see current versions, like
recall; reads by id (retrieve, get) see any version, like GET /v1/memories/{id}.
A point that may not be disclosed is absent, exactly as if it did not exist.
Every read goes through the one read path (reads/reader.py).
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from qdrant_client.http import models as qm

from sidecar.auth.identity import Identity
from sidecar.errors import validation_reasons
from sidecar.http.deps import Asker, Svc
from sidecar.http.qdrant.dialect import (
    ERRORS,
    QDRANT_API_VERSION,
    QdrantError,
    SearchBody,
    as_point,
    checked_filter,
    checked_vector,
    dense,
    ok,
    parse,
    point_as_record_id,
    upsert_rows,
    wants_vector,
)
from sidecar.policy.contract import DisclosureQuestion
from sidecar.record import MemoryWrite
from sidecar.services import Services
from sidecar.store.scope import Scope
from sidecar.writes.writer import MAX_BATCH, WriteRefused

router = APIRouter(tags=["Qdrant-compatible"], responses=ERRORS)
RawBody = Annotated[dict[str, Any], Body()]


def _collection(name: str, svc: Services) -> None:
    if name != svc.settings.collection:
        raise QdrantError(404, f"Not found: Collection `{name}` doesn't exist!")


def _question(who: Identity, purpose: str) -> DisclosureQuestion:
    return DisclosureQuestion(asker=who, audience=[], purpose=purpose, now=datetime.now(UTC))


def _current(who: Identity, question: DisclosureQuestion, raw_filter: Any) -> Scope:
    """Current versions in the caller's tenant, under the caller's own filter (checked
    before the policy or the store is asked anything)."""
    caller = checked_filter(raw_filter, who.tenant)
    return Scope(tenant=who.tenant, current_at=question.now, caller=caller)


async def _nearest(
    route: str,
    svc: Services,
    who: Identity,
    vector: list[float],
    raw_filter: Any,
    limit: int,
    offset: int,
    score_threshold: float | None,
    with_payload: Any,
    with_vector: Any,
) -> list[Any]:
    if limit < 1 or offset < 0 or limit + offset > svc.settings.max_limit:
        raise QdrantError(400, f"limit + offset must be between 1 and {svc.settings.max_limit}")
    if score_threshold is not None and not math.isfinite(score_threshold):
        raise QdrantError(400, "Wrong input: score_threshold must be a finite number")
    checked = checked_vector(vector, svc.settings.vector_size)
    question = _question(who, "recall")
    answer = await svc.reader.nearest(
        question,
        route,
        checked,
        _current(who, question, raw_filter),
        limit,
        offset=offset,
        score_threshold=score_threshold,
        with_vector=wants_vector(with_vector),
        # Pages by offset must see the same candidates whatever the asker did before.
        adaptive=False,
    )
    return [as_point(shown, with_payload, scored=True) for shown in answer.shown]


@router.get("/")
async def root() -> dict[str, Any]:
    """What qdrant-client reads to check compatibility."""
    return {"title": "whose (Qdrant-compatible)", "version": QDRANT_API_VERSION, "commit": None}


@router.get("/collections")
async def list_collections(svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    return ok({"collections": [{"name": svc.settings.collection}]}, started)


@router.get("/collections/{collection}")
async def collection_info(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    """The collection's configuration; never a point count (that would count secrets)."""
    started = time.perf_counter()
    _collection(collection, svc)
    info = qm.CollectionInfo(
        status=qm.CollectionStatus.GREEN,
        optimizer_status=qm.OptimizersStatusOneOf.OK,
        segments_count=1,
        points_count=None,
        indexed_vectors_count=None,
        config=qm.CollectionConfig(
            params=qm.CollectionParams(
                vectors=qm.VectorParams(size=svc.settings.vector_size, distance=qm.Distance.COSINE)
            ),
            hnsw_config=qm.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10_000),
            optimizer_config=qm.OptimizersConfig(default_segment_number=0, flush_interval_sec=5),
        ),
        payload_schema={},
    )
    return ok(info.model_dump(mode="json", exclude_none=True), started)


@router.get("/collections/{collection}/exists")
async def collection_exists(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    return ok({"exists": collection == svc.settings.collection}, started)


@router.post("/collections/{collection}/points/query")
async def query_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    request = parse(qm.QueryRequest, body)
    if request.prefetch or request.using not in (None, "") or request.lookup_from:
        raise QdrantError(400, "prefetch, named vectors and lookup_from are not supported")
    points = await _nearest(
        "proxy.query",
        svc,
        who,
        dense(request.query),
        body.get("filter"),
        10 if request.limit is None else request.limit,
        request.offset or 0,
        request.score_threshold,
        request.with_payload if request.with_payload is not None else False,
        request.with_vector,
    )
    return ok({"points": points}, started)


@router.post("/collections/{collection}/points/search")
async def search_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    request = parse(SearchBody, body)
    points = await _nearest(
        "proxy.search",
        svc,
        who,
        dense(request.vector),
        body.get("filter"),
        request.limit,
        request.offset or 0,
        request.score_threshold,
        request.with_payload if request.with_payload is not None else False,
        request.with_vector,
    )
    return ok(points, started)


@router.post("/collections/{collection}/points/scroll")
async def scroll_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A page of disclosable points in id order, and where the next page starts."""
    started = time.perf_counter()
    _collection(collection, svc)
    request = parse(qm.ScrollRequest, body)
    if request.order_by is not None:
        raise QdrantError(400, "order_by is not supported")
    limit = 10 if request.limit is None else request.limit
    if not 1 <= limit <= svc.settings.max_limit:
        raise QdrantError(400, f"limit must be between 1 and {svc.settings.max_limit}")
    with_vector = wants_vector(request.with_vector)
    with_payload = request.with_payload if request.with_payload is not None else True
    cursor = None if request.offset is None else str(request.offset)
    if cursor is not None and point_as_record_id(cursor) is None:
        raise QdrantError(400, "offset must be a next_page_offset this endpoint returned")
    question = _question(who, "recall")
    scope = _current(who, question, body.get("filter"))
    answer = await svc.reader.scroll(question, "proxy.scroll", scope, limit, cursor, with_vector)
    points = [as_point(shown, with_payload, scored=False) for shown in answer.shown]
    return ok({"points": points, "next_page_offset": answer.next_offset}, started)


@router.post("/collections/{collection}/points/count")
async def count_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """How many current points the asker may see, among the first `max_count_scan`
    points that match (in id order): a bounded count, exact below that bound."""
    started = time.perf_counter()
    _collection(collection, svc)
    parse(qm.CountRequest, body)
    question = _question(who, "recall")
    scope = _current(who, question, body.get("filter"))
    return ok({"count": await svc.reader.count(question, "proxy.count", scope)}, started)


async def _by_ids(
    svc: Services, who: Identity, ids: list[Any], with_payload: Any, with_vector: Any
) -> list[Any]:
    wanted = [r for r in (point_as_record_id(i) for i in ids) if r is not None]
    answer = await svc.reader.by_ids(
        _question(who, "get"), "proxy.retrieve", wanted, wants_vector(with_vector)
    )
    return [as_point(shown, with_payload, scored=False) for shown in answer.shown]


@router.post("/collections/{collection}/points")
async def retrieve_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    request = parse(qm.PointRequest, body)
    if len(request.ids) > svc.settings.max_candidates:
        raise QdrantError(400, f"at most {svc.settings.max_candidates} ids per request")
    with_payload = request.with_payload if request.with_payload is not None else True
    points = await _by_ids(svc, who, list(request.ids), with_payload, request.with_vector)
    return ok(points, started)


@router.get("/collections/{collection}/points/{point}")
async def get_point(collection: str, point: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    found = await _by_ids(svc, who, [point], True, True)
    if not found:
        raise QdrantError(404, f"Not found: Point with id {point} does not exists!")
    return ok(found[0], started)


@router.put("/collections/{collection}/points")
async def upsert_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """Upsert through the write policy: every payload must be a valid memory record."""
    started = time.perf_counter()
    _collection(collection, svc)
    rows = upsert_rows(body)
    if not 1 <= len(rows) <= MAX_BATCH:
        raise QdrantError(400, f"1..{MAX_BATCH} points per upsert")
    bodies = []
    for point, vector, payload in rows:
        if point_as_record_id(point) is None:
            raise QdrantError(400, f"point id {point} is not a UUID; record ids are UUIDs")
        if not isinstance(vector, list):
            raise QdrantError(400, "named or sparse vectors are not supported")
        record = {k: v for k, v in payload.items() if k != "whose"}
        try:
            bodies.append(
                MemoryWrite.model_validate({**record, "id": str(point), "vector": vector})
            )
        except ValidationError as exc:
            reasons = validation_reasons(exc.errors())
            raise QdrantError(
                422, f"point {point}: payload is not a valid record", reasons
            ) from None
    try:
        await svc.writer.write(bodies, who, datetime.now(UTC), "proxy.upsert")
    except WriteRefused as refused:
        summary = "; ".join(f"{p['id']}: {', '.join(p['reasons'])}" for p in refused.problems)
        raise QdrantError(422, f"write refused: {summary}", refused.problems) from None
    return ok({"operation_id": 0, "status": "completed"}, started)


@router.post("/collections/{collection}/points/query/groups")
@router.post("/collections/{collection}/points/search/groups")
async def grouped(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    """Refused by name (400, not the catch-all's 405): grouping (Haystack's `group_by`,
    qdrant-client's `query_points_groups`) is not served by the one read path
    (reads/reader.py), and answering ungrouped would change the meaning silently."""
    _collection(collection, svc)
    raise QdrantError(400, "grouping (group_by) is not supported by whose: query without it")


@router.api_route(
    "/collections/{rest:path}",
    # OPTIONS too: otherwise Starlette's own 405 lists only the first route's methods.
    methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
    include_in_schema=False,
)
async def unsupported(rest: str, request: Request, who: Asker) -> JSONResponse:
    """No silent pass-through: anything else is refused, by name."""
    allowed = _methods_served(request)
    message = f"not supported by whose: {request.method} /collections/{rest}"
    if request.method == "GET" and not allowed:
        raise QdrantError(404, message)
    # RFC 9110: a 405 names the methods the resource does serve (possibly none).
    raise QdrantError(405, message, headers={"Allow": ", ".join(allowed)})


def _methods_served(request: Request) -> list[str]:
    """The methods this router's other routes serve on the path (so a 405 can list them).

    Where templates overlap (`points/query` also fits `points/{point}`), the one with
    the fewest parameters names the resource, as in the OpenAPI document.
    """
    matching = [
        route
        for route in router.routes  # included without a prefix: its paths are the app's
        if isinstance(route, APIRoute)
        and route.endpoint is not unsupported
        and route.path_regex.match(request.url.path)
    ]
    fewest = min((route.path.count("{") for route in matching), default=0)
    return sorted({m for r in matching if r.path.count("{") == fewest for m in r.methods or set()})
