"""Drop-in Qdrant REST endpoints, with the disclosure policy on every point.

An unmodified qdrant-client (and the RAG libraries built on it) can point its URL
at the sidecar. Bodies are Qdrant's own REST bodies, parsed with qdrant-client's
models (http/qdrant/dialect.py); answers have Qdrant's shape. What differs is what
comes back: only the points the policy discloses to the asker, each payload's
`content` the attribution sentence, with a `whose` object (usable_as,
obligations, status), and point ids that are record ids.

Every read is one call to the point-reads surface (points.py): Qdrant's query API
(query, batches, groups, the older search, recommend and discover, scroll, count,
facet) evaluated over disclosable points only (reads/query/). Search-like reads see
current versions, like recall; reads by id (retrieve, get) see any version, like
GET /v1/memories/{id}. A point that may not be disclosed is absent, exactly as if it
did not exist. The dialect's writes and deletes are in http/qdrant/writes.py.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from qdrant_client.http import models as qm

from sidecar.auth.identity import Identity
from sidecar.http.allowed import routes_on
from sidecar.http.bodies import DirectRoute, JsonRoute
from sidecar.http.deps import Asker, Svc
from sidecar.http.qdrant.caller_filter import OwnIndexes, index_path, stored_key
from sidecar.http.qdrant.dialect import (
    ERRORS,
    QDRANT_API_VERSION,
    QdrantError,
    as_group,
    as_point,
    filter_check,
    ok,
    parse,
    point_id_of,
)
from sidecar.points import Asked
from sidecar.reads.query import legacy
from sidecar.services import Services

router = APIRouter(tags=["Qdrant-compatible"], responses=ERRORS, route_class=JsonRoute)
RawBody = Annotated[dict[str, Any], Body()]
M = TypeVar("M", bound=BaseModel)
# An endpoint (`_read`).
E = TypeVar("E", bound=Callable[..., Awaitable[JSONResponse]])


def _read(path: str) -> Callable[[E], E]:
    """POST `path` for a read: its well-formed requests skip FastAPI's dependency
    solving (http/bodies.py `DirectRoute`); the rest is answered as by `router.post`."""

    def add(endpoint: E) -> E:
        router.add_api_route(path, endpoint, methods=["POST"], route_class_override=DirectRoute)
        return endpoint

    return add


async def _collection(name: str, svc: Services, who: Identity) -> None:
    if not await svc.points.exists(who, name):
        raise QdrantError(404, f"Not found: Collection `{name}` doesn't exist!")


async def _own(collection: str, svc: Services, who: Identity) -> OwnIndexes | None:
    """A stack collection's own indexes (None: the whose collection); 404 for a
    collection the caller's tenant does not have."""
    if collection == svc.settings.collection:
        return None
    info = await svc.stacks.info(who, collection)
    if info is None:
        raise QdrantError(404, f"Not found: Collection `{collection}` doesn't exist!")
    return info.own_indexes


async def _asked(
    svc: Services, who: Identity, collection: str, route: str, body: Any
) -> tuple[Asked, OwnIndexes | None]:
    """The request as the surface takes it: the collection known, and the caller's
    filters (wherever the body holds one) checked as the dialect runs them: in a stack
    collection, a `has_id` names the ids the stack chose, and a key may name the
    stack's own indexed metadata (http/qdrant/caller_filter.py); with the stack's own
    indexes, to name a grouping, ordering or facet key by (`stored_key`)."""
    own = await _own(collection, svc, who)
    return Asked(who, collection, route, await filter_check(svc.memory, who, body, own)), own


def _keyed(request: M, own: OwnIndexes | None) -> M:
    """A request's grouping, ordering or facet key as stored: a record field (the names
    the dialect serves them by), or the stack's own indexed metadata key."""
    update: dict[str, Any] = {}
    if isinstance(request, qm.QueryGroupsRequest):
        update["group_by"] = stored_key(request.group_by, own)
    if isinstance(request, qm.FacetRequest):
        update["key"] = stored_key(request.key, own)
    order = getattr(request, "order_by", None)
    if isinstance(request, qm.QueryRequest) and isinstance(request.query, qm.OrderByQuery):
        by = request.query.order_by
        ordered = by if isinstance(by, qm.OrderBy) else qm.OrderBy(key=by)
        key = stored_key(ordered.key, own)
        update["query"] = qm.OrderByQuery(order_by=ordered.model_copy(update={"key": key}))
    elif isinstance(request, qm.ScrollRequest) and order is not None:
        ordered = order if isinstance(order, qm.OrderBy) else qm.OrderBy(key=order)
        update["order_by"] = ordered.model_copy(update={"key": stored_key(ordered.key, own)})
    return request.model_copy(update=update) if update else request


def _payload(request: Any, default: Any) -> Any:
    return request.with_payload if request.with_payload is not None else default


@router.get("/")
async def root() -> dict[str, Any]:
    """What qdrant-client reads to check compatibility."""
    return {"title": "whose (Qdrant-compatible)", "version": QDRANT_API_VERSION, "commit": None}


@router.get("/collections")
async def list_collections(svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    return ok({"collections": [{"name": n} for n in await svc.points.names(who)]}, started)


@router.get("/collections/{collection}")
async def collection_info(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    """The collection's configuration; never a point count (that would count secrets)."""
    started = time.perf_counter()
    info = await svc.points.info(who, collection)
    return ok(info.model_dump(mode="json", exclude_none=True), started)


@router.get("/collections/{collection}/exists")
async def collection_exists(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    return ok({"exists": await svc.points.exists(who, collection)}, started)


@router.put("/collections/{collection}")
async def create_collection(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A stack's own collection, in the caller's tenant, with the vectors it asks for
    (docs/rag-proxy.md, "Your own collections")."""
    started = time.perf_counter()
    await svc.stacks.create(who, collection, body)
    return ok(True, started)


@router.delete("/collections/{collection}")
async def delete_collection(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    """The collection and every document in it; false if the tenant has none by that
    name (whose's own collection is not dropped this way)."""
    started = time.perf_counter()
    if collection == svc.settings.collection:
        raise QdrantError(400, f"not supported by whose: deleting `{collection}`")
    return ok(await svc.stacks.drop(who, collection), started)


@router.put("/collections/{collection}/index")
async def create_index(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """In a stack collection, an index on the stack's own document metadata (LangChain
    `metadata.source`, Haystack `meta.source`, LlamaIndex `source`), made on the
    collection: filters, groupings, orderings and facets may then read it
    (docs/rag-proxy.md, "Filters"). On a record field, and in the whose collection,
    whose's own indexes serve: accepted, nothing to make."""
    started = time.perf_counter()
    request = parse(qm.CreateFieldIndex, body)
    kind = _index_type(request.field_schema)
    await _index(collection, svc, who, "create_index", request.field_name, kind)
    return ok({"operation_id": 0, "status": "completed"}, started)


@router.delete("/collections/{collection}/index/{field}")
async def delete_index(collection: str, field: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    await _index(collection, svc, who, "drop_index", field, None)
    return ok({"operation_id": 0, "status": "completed"}, started)


def _index_type(schema: Any) -> qm.PayloadSchemaType | None:
    """An index request's type: by name, or its parameters' type (None: not given)."""
    if schema is None or isinstance(schema, qm.PayloadSchemaType):
        return schema
    kind = getattr(schema, "type", None)
    try:
        return qm.PayloadSchemaType(getattr(kind, "value", kind))
    except ValueError:
        raise QdrantError(400, f"not supported by whose: a `{kind}` index") from None


async def _index(
    collection: str,
    svc: Services,
    who: Identity,
    action: Any,
    field: str,
    kind: qm.PayloadSchemaType | None,
) -> None:
    if collection == svc.settings.collection:
        return  # whose's own indexes are the sidecar's
    await svc.stacks.index(who, collection, action, index_path(field), kind)


# --- the query API ------------------------------------------------------------------


@_read("/collections/{collection}/points/query")
async def query_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    request = parse(qm.QueryRequest, body)
    asked, own = await _asked(svc, who, collection, "proxy.query", body)
    answer = await svc.points.query(asked, _keyed(request, own))
    points = [as_point(p, _payload(request, False), scored=True) for p in answer.points]
    return ok({"points": points}, started)


@_read("/collections/{collection}/points/query/batch")
async def query_batch(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    batch = parse(qm.QueryRequestBatch, body)
    asked, _ = await _asked(svc, who, collection, "proxy.query_batch", body)
    answers = await svc.points.query_batch(asked, batch.searches)
    result = [
        {"points": [as_point(p, _payload(r, False), scored=True) for p in a.points]}
        for r, a in zip(batch.searches, answers, strict=True)
    ]
    return ok(result, started)


@_read("/collections/{collection}/points/query/groups")
async def query_groups(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    request = parse(qm.QueryGroupsRequest, body)
    asked, own = await _asked(svc, who, collection, "proxy.query_groups", body)
    grouped = await svc.points.groups(asked, _keyed(request, own))
    groups = [as_group(g, _payload(request, False)) for g in grouped.groups]
    return ok({"groups": groups}, started)


# The older routes (deprecated by Qdrant 1.19, still sent by pinned clients): each body
# is the query it stands for (reads/query/legacy.py).
_SINGLE: dict[str, tuple[type[Any], Callable[[Any], qm.QueryRequest]]] = {
    "search": (legacy.SearchRequest, legacy.search),
    "recommend": (legacy.RecommendRequest, legacy.recommend),
    "discover": (legacy.DiscoverRequest, legacy.discover),
}
_BATCH: dict[str, type[Any]] = {
    "search": legacy.SearchRequestBatch,
    "recommend": legacy.RecommendRequestBatch,
    "discover": legacy.DiscoverRequestBatch,
}
_GROUPS: dict[str, tuple[type[Any], Callable[[Any], qm.QueryGroupsRequest]]] = {
    "search": (legacy.SearchGroupsRequest, legacy.search_groups),
    "recommend": (legacy.RecommendGroupsRequest, legacy.recommend_groups),
}


async def _legacy(kind: str, collection: str, body: Any, svc: Services, who: Identity) -> Any:
    model, translate = _SINGLE[kind]
    request = parse(model, body)
    asked, own = await _asked(svc, who, collection, f"proxy.{kind}", body)
    answer = await svc.points.query(asked, _keyed(translate(request), own))
    return [as_point(p, _payload(request, False), scored=True) for p in answer.points]


async def _legacy_batch(kind: str, collection: str, body: Any, svc: Services, who: Identity) -> Any:
    _, translate = _SINGLE[kind]
    batch = parse(_BATCH[kind], body)
    asked, _ = await _asked(svc, who, collection, f"proxy.{kind}_batch", body)
    answers = await svc.points.query_batch(asked, [translate(r) for r in batch.searches])
    return [
        [as_point(p, _payload(r, False), scored=True) for p in a.points]
        for r, a in zip(batch.searches, answers, strict=True)
    ]


async def _legacy_groups(
    kind: str, collection: str, body: Any, svc: Services, who: Identity
) -> Any:
    model, translate = _GROUPS[kind]
    request = parse(model, body)
    asked, own = await _asked(svc, who, collection, f"proxy.{kind}_groups", body)
    grouped = await svc.points.groups(asked, _keyed(translate(request), own))
    return {"groups": [as_group(g, _payload(request, False)) for g in grouped.groups]}


# Each older route's answer, by shape ("", "batch", "groups"): the gRPC transport's
# Search, Recommend and Discover methods (sidecar/grpc_api/) answer with these too.
OLDER: dict[str, Callable[[str, str, Any, Services, Identity], Awaitable[Any]]] = {
    "": _legacy,
    "batch": _legacy_batch,
    "groups": _legacy_groups,
}


def _older_route(kind: str, shape: str, answer: Callable[..., Any]) -> None:
    """POST /collections/{c}/points/<kind>[/<shape>]: each older route, as its query."""

    async def endpoint(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
        started = time.perf_counter()
        return ok(await answer(kind, collection, body, svc, who), started)

    name = f"{kind}_{shape}" if shape else f"{kind}_points"
    endpoint.__name__ = name
    path = f"/collections/{{collection}}/points/{kind}" + (f"/{shape}" if shape else "")
    router.add_api_route(
        path,
        endpoint,
        methods=["POST"],
        name=name,
        operation_id=name,
        route_class_override=DirectRoute,
    )


for _kind in ("search", "recommend", "discover"):
    _older_route(_kind, "", OLDER[""])
    _older_route(_kind, "batch", OLDER["batch"])
    if _kind in _GROUPS:
        _older_route(_kind, "groups", OLDER["groups"])


# --- scans and reads by id ----------------------------------------------------------


@_read("/collections/{collection}/points/scroll")
async def scroll_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A page of disclosable points (in id order, or by a field), and where the next
    page starts: never at a point the asker may not see."""
    started = time.perf_counter()
    request = parse(qm.ScrollRequest, body)
    asked, own = await _asked(svc, who, collection, "proxy.scroll", body)
    page = await svc.points.scroll(asked, _keyed(request, own))
    ordered = request.order_by is not None
    points = [as_point(p, _payload(request, True), ordered=ordered) for p in page.points]
    return ok({"points": points, "next_page_offset": page.next_offset}, started)


@_read("/collections/{collection}/points/count")
async def count_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """How many current points the asker may see, among the first `max_count_scan`
    points that match: a bounded count, exact below that bound."""
    started = time.perf_counter()
    request = parse(qm.CountRequest, body)
    asked, _ = await _asked(svc, who, collection, "proxy.count", body)
    counted = await svc.points.count(asked, request)
    return ok({"count": counted.count}, started)


@_read("/collections/{collection}/facet")
async def facet(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """The values of a field among the points the asker may see, each with how many."""
    started = time.perf_counter()
    request = parse(qm.FacetRequest, body)
    asked, own = await _asked(svc, who, collection, "proxy.facet", body)
    faceted = await svc.points.facet(asked, _keyed(request, own))
    hits = [{"value": h.value, "count": h.count} for h in faceted.hits]
    return ok({"hits": hits}, started)


async def _by_ids(
    svc: Services,
    who: Identity,
    collection: str,
    ids: list[Any],
    with_payload: Any,
    with_vector: Any,
) -> list[Any]:
    """The points asked for that the asker may see; an id also names the current
    version of a document the asker wrote under it (writes/versions.py)."""
    asked, _ = await _asked(svc, who, collection, "proxy.retrieve", None)
    wanted = [p for p in map(point_id_of, ids) if p is not None]
    points = await svc.points.retrieve(asked, wanted, with_vector)
    return [as_point(p, with_payload) for p in points]


@_read("/collections/{collection}/points")
async def retrieve_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    request = parse(qm.PointRequest, body)
    await _collection(collection, svc, who)
    if len(request.ids) > svc.settings.max_candidates:
        raise QdrantError(400, f"at most {svc.settings.max_candidates} ids per request")
    with_payload = request.with_payload if request.with_payload is not None else True
    points = await _by_ids(
        svc, who, collection, list(request.ids), with_payload, request.with_vector
    )
    return ok(points, started)


@router.get("/collections/{collection}/points/{point}")
async def get_point(collection: str, point: str, svc: Svc, who: Asker) -> JSONResponse:
    started = time.perf_counter()
    found = await _by_ids(svc, who, collection, [point], True, True)
    if not found:
        raise QdrantError(404, f"Not found: Point with id {point} does not exists!")
    return ok(found[0], started)


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
        for route in routes_on(request.app.routes, request.url.path)
        if isinstance(route, APIRoute) and route.endpoint is not unsupported
    ]
    fewest = min((route.path.count("{") for route in matching), default=0)
    return sorted({m for r in matching if r.path.count("{") == fewest for m in r.methods or set()})
