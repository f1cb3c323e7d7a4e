"""Drop-in Qdrant REST endpoints, with the disclosure policy on every point.

An unmodified qdrant-client (and the RAG libraries built on it) can point its URL
at the sidecar. Bodies are Qdrant's own REST bodies, parsed with qdrant-client's
models; answers have Qdrant's shape. What differs is what comes back: only the
points the policy discloses to the asker, each payload carrying a `whose` object
(attribution, usable_as, obligations, status), and point ids that are record ids.

Search-like reads (query, search, scroll, count) see current versions, like
recall; reads by id (retrieve, get) see any version, like GET /v1/memories/{id}.
A point that may not be disclosed is absent, exactly as if it did not exist.
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Annotated, Any, TypeVar
from uuid import UUID

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, ValidationError
from qdrant_client.http import models as qm

from sidecar import qdrant_filter
from sidecar.attribution import disclosed_item
from sidecar.gate import Disclosure
from sidecar.identity import Identity
from sidecar.ingest import MAX_BATCH, WriteRefused
from sidecar.links import decided_links, links_within
from sidecar.messages import Problem
from sidecar.policy import Decision, DisclosureQuestion
from sidecar.recall import overfetch
from sidecar.record import MemoryWrite, has_usable_length
from sidecar.services import Asker, Services, Svc
from sidecar.store import Hit, Scope, point_id

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
_QDRANT_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": QdrantProblem | Problem},
    401: {"model": Problem},
    404: {"model": QdrantProblem},
    413: {"model": Problem},
    422: {"model": QdrantProblem | Problem},
    503: {"model": Problem},
}
router = APIRouter(tags=["Qdrant-compatible"], responses=_QDRANT_ERRORS)


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


def qdrant_error_response(exc: QdrantError) -> JSONResponse:
    body: dict[str, Any] = {"status": {"error": exc.message}, "time": 0.0}
    if exc.reasons is not None:
        body["reasons"] = exc.reasons
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


RawBody = Annotated[dict[str, Any], Body()]


def _ok(result: Any, started: float) -> JSONResponse:
    return JSONResponse({"result": result, "status": "ok", "time": time.perf_counter() - started})


M = TypeVar("M", bound=BaseModel)


def _parse(model: type[M], body: Any) -> M:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise QdrantError(400, f"Format error in JSON body: {where}: {first['msg']}") from None


def _collection(name: str, svc: Services) -> None:
    if name != svc.settings.collection:
        raise QdrantError(404, f"Not found: Collection `{name}` doesn't exist!")


async def _scope(gate: Disclosure, raw_filter: Any) -> Scope:
    """The tenant, the caller's filter, current versions, and the policy's pushdown."""
    # The caller's filter is checked before the policy is asked anything.
    caller = _caller_scope(gate.question.asker, raw_filter, gate.question.now)
    pushdown = await gate.pushdown()
    return pushdown.narrow(caller)


def _caller_scope(who: Identity, raw_filter: Any, now: datetime) -> Scope:
    try:
        parsed = qdrant_filter.parse(raw_filter)
        caller = qdrant_filter.scoped_ids(parsed, who.tenant) if parsed else None
        if caller is not None:
            qdrant_filter.check(caller)
    except qdrant_filter.UnsupportedFilter as exc:
        raise QdrantError(400, str(exc)) from None
    return Scope(tenant=who.tenant, current_at=now, caller=caller)


def _question(who: Identity, purpose: str, now: datetime) -> DisclosureQuestion:
    return DisclosureQuestion(asker=who, audience=[], purpose=purpose, now=now)


def _payload(record: dict[str, Any], decision: Decision, now: datetime, selector: Any) -> Any:
    if selector is None or selector is False:
        return None
    item = disclosed_item(record, decision, now)
    whose = {
        "attribution": item.attribution,
        "usable_as": item.usable_as,
        "obligations": item.obligations,
        "status": item.status,
    }
    full = {**record, "whose": whose}
    if selector is True:
        return full
    if isinstance(selector, list):
        return {k: v for k, v in full.items() if k in selector}
    if isinstance(selector, qm.PayloadSelectorInclude):
        return {k: v for k, v in full.items() if k in selector.include}
    if isinstance(selector, qm.PayloadSelectorExclude):
        return {k: v for k, v in full.items() if k not in selector.exclude}
    raise QdrantError(400, "unsupported with_payload selector")


def _wants_vector(with_vector: Any) -> bool:
    if isinstance(with_vector, list):
        raise QdrantError(400, "named vectors are not supported; use with_vector: true")
    return bool(with_vector)


def _point(hit: Hit, decision: Decision, now: datetime, with_payload: Any, scored: bool) -> Any:
    base: dict[str, Any] = {
        "id": hit.record.get("id"),
        "payload": _payload(hit.record, decision, now, with_payload),
        "vector": hit.vector,
        "shard_key": None,
        "order_value": None,
    }
    if scored:
        # The engine's version counts every write in the shard, other tenants' too.
        base |= {"version": 0, "score": hit.score}
    return base


def _dense(query: Any) -> list[float]:
    if isinstance(query, qm.NearestQuery):
        if query.mmr is not None:
            # Answering plain nearest neighbours instead would be a silent change of meaning.
            raise QdrantError(400, "mmr (diversity re-ranking) is not supported")
        query = query.nearest
    if isinstance(query, list) and query and all(isinstance(x, int | float) for x in query):
        return [float(x) for x in query]
    raise QdrantError(400, "only nearest-neighbour queries with a dense vector are supported")


def _checked_vector(vector: list[float], svc: Services) -> list[float]:
    # JSON parsing lets NaN and Infinity through; the engine would rank by garbage.
    if not all(math.isfinite(x) for x in vector):
        raise QdrantError(400, "Wrong input: vector values must be finite numbers")
    if len(vector) != svc.settings.vector_size:
        raise QdrantError(
            400,
            f"Wrong input: Vector dimension error: expected dim: {svc.settings.vector_size}, "
            f"got {len(vector)}",
        )
    if not has_usable_length(vector):
        raise QdrantError(400, "Wrong input: vector length must be non-zero and finite")
    return vector


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
    now = datetime.now(UTC)
    checked = _checked_vector(vector, svc)
    async with svc.gate.begin(_question(who, "recall", now), route) as gate:
        found = await overfetch(
            checked,
            await _scope(gate, raw_filter),
            gate,
            limit + offset,
            svc.store,
            svc.bounds,
            score_threshold=score_threshold,
            with_vector=_wants_vector(with_vector),
            # Pages by offset must see the same candidates whatever the asker did before.
            adaptive=False,
        )
    # A search shows only links to versions among its own results: no extra decisions.
    page = _links_within(found.allowed[offset : offset + limit], found.allowed)
    return [_point(hit, d, now, with_payload, scored=True) for hit, d in page]


@router.get("/")
async def root() -> dict[str, Any]:
    """What qdrant-client reads to check compatibility."""
    return {"title": "whose (Qdrant-compatible)", "version": QDRANT_API_VERSION, "commit": None}


@router.get("/collections")
async def list_collections(svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    return _ok({"collections": [{"name": svc.settings.collection}]}, started)


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
    return _ok(info.model_dump(mode="json", exclude_none=True), started)


@router.get("/collections/{collection}/exists")
async def collection_exists(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    return _ok({"exists": collection == svc.settings.collection}, started)


@router.post("/collections/{collection}/points/query")
async def query_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    request = _parse(qm.QueryRequest, body)
    if request.prefetch or request.using not in (None, "") or request.lookup_from:
        raise QdrantError(400, "prefetch, named vectors and lookup_from are not supported")
    points = await _nearest(
        "proxy.query",
        svc,
        who,
        _dense(request.query),
        body.get("filter"),
        10 if request.limit is None else request.limit,
        request.offset or 0,
        request.score_threshold,
        request.with_payload if request.with_payload is not None else False,
        request.with_vector,
    )
    return _ok({"points": points}, started)


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


@router.post("/collections/{collection}/points/search")
async def search_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    request = _parse(SearchBody, body)
    points = await _nearest(
        "proxy.search",
        svc,
        who,
        _dense(request.vector),
        body.get("filter"),
        request.limit,
        request.offset or 0,
        request.score_threshold,
        request.with_payload if request.with_payload is not None else False,
        request.with_vector,
    )
    return _ok(points, started)


@router.post("/collections/{collection}/points/scroll")
async def scroll_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A page of disclosable points in id order, and where the next page starts.

    The next-page offset is given only when at least one more disclosable point
    exists, or when the examination bound stopped us after finding some: a caller
    who may read nothing learns nothing from it.
    """
    started = time.perf_counter()
    _collection(collection, svc)
    request = _parse(qm.ScrollRequest, body)
    if request.order_by is not None:
        raise QdrantError(400, "order_by is not supported")
    limit = 10 if request.limit is None else request.limit
    if not 1 <= limit <= svc.settings.max_limit:
        raise QdrantError(400, f"limit must be between 1 and {svc.settings.max_limit}")
    now = datetime.now(UTC)
    with_vector = _wants_vector(request.with_vector)
    with_payload = request.with_payload if request.with_payload is not None else True
    cursor = None if request.offset is None else str(request.offset)
    if cursor is not None and _record_id(cursor) is None:
        raise QdrantError(400, "offset must be a next_page_offset this endpoint returned")
    async with svc.gate.begin(_question(who, "recall", now), "proxy.scroll") as gate:
        returned, next_offset = await _scroll(
            svc, gate, body.get("filter"), cursor, limit, with_vector
        )
    returned = _links_within(returned, returned)
    points = [_point(hit, d, now, with_payload, scored=False) for hit, d in returned]
    return _ok({"points": points, "next_page_offset": next_offset}, started)


async def _scroll(
    svc: Services,
    gate: Disclosure,
    raw_filter: Any,
    cursor: str | None,
    limit: int,
    with_vector: bool,
) -> tuple[list[tuple[Hit, Decision]], str | None]:
    scope = await _scope(gate, raw_filter)
    tenant = gate.question.asker.tenant
    returned: list[tuple[Hit, Decision]] = []
    next_offset: str | None = None
    examined = 0
    while True:
        batch = min(max(2 * limit, 64), svc.settings.max_candidates - examined)
        page = await svc.store.find(scope, batch, offset=cursor, with_vector=with_vector)
        decisions = await gate.decide([h.record for h in page.hits])
        examined += len(page.hits)
        for hit in page.hits:
            decision = decisions[str(hit.record.get("id"))]
            if not decision.allow:
                continue
            if len(returned) == limit:
                next_offset = point_id(tenant, hit.record["id"])
                break
            returned.append((hit, decision))
        cursor = page.next_offset
        if next_offset is not None or cursor is None:
            break
        if examined >= svc.settings.max_candidates:
            next_offset = cursor if returned else None
            break
    return returned, next_offset


@router.post("/collections/{collection}/points/count")
async def count_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """How many current points the asker may see, among the first `max_count_scan`
    points that match (in id order): a bounded count, exact below that bound."""
    started = time.perf_counter()
    _collection(collection, svc)
    _parse(qm.CountRequest, body)
    now = datetime.now(UTC)
    count, examined, cursor = 0, 0, None
    async with svc.gate.begin(_question(who, "recall", now), "proxy.count") as gate:
        scope = await _scope(gate, body.get("filter"))
        while examined < svc.settings.max_count_scan:
            batch = min(1000, svc.settings.max_count_scan - examined)
            page = await svc.store.find(scope, batch, offset=cursor)
            decisions = await gate.decide([h.record for h in page.hits])
            count += sum(decisions[str(h.record.get("id"))].allow for h in page.hits)
            examined += len(page.hits)
            if (cursor := page.next_offset) is None:
                break
    return _ok({"count": count}, started)


async def _by_ids(
    svc: Services, who: Identity, ids: list[Any], with_payload: Any, with_vector: Any
) -> list[Any]:
    record_ids = [_record_id(i) for i in ids]
    wanted = [r for r in record_ids if r is not None]
    now = datetime.now(UTC)
    hits = await svc.store.get(who.tenant, wanted, with_vector=_wants_vector(with_vector))
    async with svc.gate.begin(_question(who, "get", now), "proxy.retrieve") as gate:
        decisions = await gate.decide([h.record for h in hits])
    shown = await _linked(
        svc, gate, [(h, d) for h in hits if (d := decisions[h.record["id"]]).allow]
    )
    allowed = {h.record["id"]: _point(h, d, now, with_payload, scored=False) for h, d in shown}
    return [allowed[str(r)] for r in wanted if str(r) in allowed]


async def _linked(
    svc: Services, gate: Disclosure, allowed: list[tuple[Hit, Decision]]
) -> list[tuple[Hit, Decision]]:
    """Points read by id, keeping links to versions the asker may get (links.py)."""
    hits = [hit for hit, _ in allowed]
    ids = [str(hit.record.get("id")) for hit in hits]
    shown = await decided_links(svc.store, gate, hits, ids)
    return [(hit, decision) for hit, (_, decision) in zip(shown, allowed, strict=True)]


def _links_within(
    page: list[tuple[Hit, Decision]], disclosed: list[tuple[Hit, Decision]]
) -> list[tuple[Hit, Decision]]:
    """A page of search results, keeping links to versions among `disclosed` (links.py)."""
    ids = [str(hit.record.get("id")) for hit, _ in disclosed]
    shown = links_within([hit for hit, _ in page], ids)
    return [(hit, decision) for hit, (_, decision) in zip(shown, page, strict=True)]


def _record_id(raw: Any) -> UUID | None:
    # Record ids are UUIDs; an integer id can name no record here.
    try:
        return uuid.UUID(str(raw))
    except ValueError:
        return None


@router.post("/collections/{collection}/points")
async def retrieve_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    request = _parse(qm.PointRequest, body)
    if len(request.ids) > svc.settings.max_candidates:
        raise QdrantError(400, f"at most {svc.settings.max_candidates} ids per request")
    with_payload = request.with_payload if request.with_payload is not None else True
    points = await _by_ids(svc, who, list(request.ids), with_payload, request.with_vector)
    return _ok(points, started)


@router.get("/collections/{collection}/points/{point}")
async def get_point(collection: str, point: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    _collection(collection, svc)
    found = await _by_ids(svc, who, [point], True, True)
    if not found:
        raise QdrantError(404, f"Not found: Point with id {point} does not exists!")
    return _ok(found[0], started)


@router.put("/collections/{collection}/points")
async def upsert_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """Upsert through the write policy: every payload must be a valid memory record."""
    started = time.perf_counter()
    _collection(collection, svc)
    if "batch" in body:
        batch = _parse(qm.PointsBatch, body).batch
        if not isinstance(batch.vectors, list):
            raise QdrantError(400, "named vectors are not supported")
        payloads = batch.payloads or [{} for _ in batch.ids]
        if not len(batch.ids) == len(batch.vectors) == len(payloads):
            raise QdrantError(400, "batch ids, vectors and payloads differ in length")
        rows = list(zip(batch.ids, batch.vectors, payloads, strict=True))
    else:
        rows = [(p.id, p.vector, p.payload or {}) for p in _parse(qm.PointsList, body).points]
    if not 1 <= len(rows) <= MAX_BATCH:
        raise QdrantError(400, f"1..{MAX_BATCH} points per upsert")
    bodies = []
    for point, vector, payload in rows:
        if _record_id(point) is None:
            raise QdrantError(400, f"point id {point} is not a UUID; record ids are UUIDs")
        if not isinstance(vector, list):
            raise QdrantError(400, "named or sparse vectors are not supported")
        record = {k: v for k, v in payload.items() if k != "whose"}
        try:
            bodies.append(
                MemoryWrite.model_validate({**record, "id": str(point), "vector": vector})
            )
        except ValidationError as exc:
            reasons = [
                {"loc": list(e["loc"]), "type": e["type"], "msg": e["msg"]} for e in exc.errors()
            ]
            raise QdrantError(
                422, f"point {point}: payload is not a valid record", reasons
            ) from None
    try:
        await svc.writer.write(bodies, who, datetime.now(UTC))
    except WriteRefused as refused:
        summary = "; ".join(f"{p['id']}: {', '.join(p['reasons'])}" for p in refused.problems)
        raise QdrantError(422, f"write refused: {summary}", refused.problems) from None
    return _ok({"operation_id": 0, "status": "completed"}, started)


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
