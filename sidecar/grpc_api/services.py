"""Qdrant's `Points`, `Collections` and `Qdrant` gRPC services, each method a row of a
table: how its request becomes the REST body (convert.py), which REST dialect handler
answers it (the one its REST route calls: http/qdrant/routes.py, writes.py), and how
the answer becomes its reply. A handler authenticates the caller from the call's
metadata (`api-key`, or `authorization: Bearer`, as REST's headers), runs the row and
answers a refusal through refusals.py; nothing is decided here.

Every method of the generated servicer bases is a row of `SERVED` or of `UNSERVED`
(building a servicer fails otherwise, tests/unit/test_grpc_api.py holds it), so a
method qdrant-client adds is never answered by the base class's silent default.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import orjson
from google.protobuf.message import Message
from qdrant_client import grpc as pb
from qdrant_client.grpc import collections_service_pb2_grpc as collections_grpc
from qdrant_client.grpc import points_service_pb2_grpc as points_grpc
from qdrant_client.grpc import qdrant_pb2_grpc

from sidecar.auth.identity import Identity
from sidecar.errors import InvalidRequest, QueryTooCostly
from sidecar.grpc_api import convert
from sidecar.grpc_api.convert import Body
from sidecar.grpc_api.refusals import Unserved, refusal
from sidecar.http.qdrant import routes, writes
from sidecar.http.qdrant.dialect import QdrantError
from sidecar.http.qdrant.writes import MAX_IDS
from sidecar.memory import MAX_BATCH
from sidecar.services import Services
from sidecar.settings import Settings

log = logging.getLogger("whose")

Call = Callable[[Services, Identity, str, Body], Awaitable[Any]]
Reply = Callable[[Any, float], Message]


@dataclass(frozen=True)
class Method:
    """One served method: its request as the REST body, the REST handler that answers
    it, and that answer as its reply (with the time taken, as Qdrant's replies say)."""

    body: Callable[[Any], Body]
    call: Call
    reply: Reply
    authenticated: bool = True


def _result(response: Any) -> Any:
    """The `result` of a REST handler's JSON answer (http/qdrant/dialect.py `ok`)."""
    return orjson.loads(response.body)["result"]


def _route(handler: Callable[..., Awaitable[Any]]) -> Call:
    """A REST route handler taking (collection, body, svc, who)."""

    async def call(svc: Services, who: Identity, collection: str, body: Body) -> Any:
        return _result(await handler(collection, body, svc, who))

    return call


def _older(kind: str, shape: str) -> Call:
    """An older route (search, recommend, discover) of one shape ("", batch, groups)."""

    async def call(svc: Services, who: Identity, collection: str, body: Body) -> Any:
        return await routes.OLDER[shape](kind, collection, body, svc, who)

    return call


async def _refused_update(svc: Services, who: Identity, collection: str, _: Body) -> Any:
    return _result(await writes.refused_update(collection, svc, who))


async def _delete_index(svc: Services, who: Identity, collection: str, body: Body) -> Any:
    return _result(await routes.delete_index(collection, body["field_name"], svc, who))


async def _info(svc: Services, who: Identity, collection: str, _: Body) -> Any:
    return _result(await routes.collection_info(collection, svc, who))


async def _exists(svc: Services, who: Identity, collection: str, _: Body) -> Any:
    return _result(await routes.collection_exists(collection, svc, who))


async def _list(svc: Services, who: Identity, _: str, __: Body) -> Any:
    return _result(await routes.list_collections(svc, who))


async def _drop(svc: Services, who: Identity, collection: str, _: Body) -> Any:
    return _result(await routes.delete_collection(collection, svc, who))


async def _root(svc: Services, who: Identity, _: str, __: Body) -> Any:
    return await routes.root()


def _nothing(_: Any) -> Body:
    return {}


def _field(message: Any) -> Body:
    return {"field_name": message.field_name}


# --- replies ------------------------------------------------------------------------------


def _updated(result: Any, took: float) -> Message:
    return pb.PointsOperationResponse(result=convert.update_result(result), time=took)


def _scored(reply: type[Message]) -> Reply:
    def answer(result: Any, took: float) -> Message:
        points = result["points"] if isinstance(result, dict) else result
        return reply(result=convert.scored(points), time=took)

    return answer


def _scored_batch(reply: type[Message]) -> Reply:
    def answer(result: Any, took: float) -> Message:
        batches = [
            pb.BatchResult(result=convert.scored(r["points"] if isinstance(r, dict) else r))
            for r in result
        ]
        return reply(result=batches, time=took)

    return answer


def _grouped(reply: type[Message]) -> Reply:
    def answer(result: Any, took: float) -> Message:
        return reply(result=convert.groups(result), time=took)

    return answer


def _scrolled(result: Any, took: float) -> Message:
    reply = pb.ScrollResponse(result=convert.records(result["points"]), time=took)
    if result.get("next_page_offset") is not None:
        reply.next_page_offset.CopyFrom(convert.point_id(result["next_page_offset"]))
    return reply


def _counted(result: Any, took: float) -> Message:
    return pb.CountResponse(result=pb.CountResult(count=result["count"]), time=took)


def _faceted(result: Any, took: float) -> Message:
    return pb.FacetResponse(hits=convert.facet_hits(result), time=took)


def _got(result: Any, took: float) -> Message:
    return pb.GetResponse(result=convert.records(result), time=took)


def _batch_updated(result: Any, took: float) -> Message:
    return pb.UpdateBatchResponse(result=[convert.update_result(r) for r in result], time=took)


def _collection_done(result: Any, took: float) -> Message:
    return pb.CollectionOperationResponse(result=bool(result), time=took)


def _collection_info(result: Any, took: float) -> Message:
    return pb.GetCollectionInfoResponse(result=convert.collection_info(result), time=took)


def _collection_exists(result: Any, took: float) -> Message:
    exists = pb.CollectionExists(exists=bool(result["exists"]))
    return pb.CollectionExistsResponse(result=exists, time=took)


def _collections(result: Any, took: float) -> Message:
    listed = [pb.CollectionDescription(name=c["name"]) for c in result["collections"]]
    return pb.ListCollectionsResponse(collections=listed, time=took)


def _health(result: Any, _: float) -> Message:
    return pb.HealthCheckReply(title=result["title"], version=result["version"])


# --- the tables ---------------------------------------------------------------------------

POINTS: Mapping[str, Method] = {
    "Upsert": Method(convert.upsert, _route(writes.upsert_points), _updated),
    "Delete": Method(convert.delete, _route(writes.delete_points), _updated),
    "SetPayload": Method(convert.set_payload, _route(writes.set_payload), _updated),
    "OverwritePayload": Method(convert.set_payload, _route(writes.overwrite_payload), _updated),
    "DeletePayload": Method(convert.delete_payload, _route(writes.delete_payload), _updated),
    # Refused by name, as their REST routes are (a document without its payload or its
    # vector is no document).
    "ClearPayload": Method(_nothing, _refused_update, _updated),
    "UpdateVectors": Method(_nothing, _refused_update, _updated),
    "DeleteVectors": Method(_nothing, _refused_update, _updated),
    "UpdateBatch": Method(convert.update_batch, _route(writes.batch_update), _batch_updated),
    "CreateFieldIndex": Method(convert.create_index, _route(routes.create_index), _updated),
    "DeleteFieldIndex": Method(_field, _delete_index, _updated),
    "Get": Method(convert.get, _route(routes.retrieve_points), _got),
    "Query": Method(convert.query, _route(routes.query_points), _scored(pb.QueryResponse)),
    "QueryBatch": Method(
        convert.query_batch, _route(routes.query_batch), _scored_batch(pb.QueryBatchResponse)
    ),
    "QueryGroups": Method(
        convert.query_groups, _route(routes.query_groups), _grouped(pb.QueryGroupsResponse)
    ),
    "Search": Method(convert.search, _older("search", ""), _scored(pb.SearchResponse)),
    "SearchBatch": Method(
        convert.search_batch, _older("search", "batch"), _scored_batch(pb.SearchBatchResponse)
    ),
    "SearchGroups": Method(
        convert.search_groups, _older("search", "groups"), _grouped(pb.SearchGroupsResponse)
    ),
    "Recommend": Method(convert.recommend, _older("recommend", ""), _scored(pb.RecommendResponse)),
    "RecommendBatch": Method(
        convert.recommend_batch,
        _older("recommend", "batch"),
        _scored_batch(pb.RecommendBatchResponse),
    ),
    "RecommendGroups": Method(
        convert.recommend_groups,
        _older("recommend", "groups"),
        _grouped(pb.RecommendGroupsResponse),
    ),
    "Discover": Method(convert.discover, _older("discover", ""), _scored(pb.DiscoverResponse)),
    "DiscoverBatch": Method(
        convert.discover_batch,
        _older("discover", "batch"),
        _scored_batch(pb.DiscoverBatchResponse),
    ),
    "Scroll": Method(convert.scroll, _route(routes.scroll_points), _scrolled),
    "Count": Method(convert.count, _route(routes.count_points), _counted),
    "Facet": Method(convert.facet, _route(routes.facet), _faceted),
}

COLLECTIONS: Mapping[str, Method] = {
    "Get": Method(_nothing, _info, _collection_info),
    "List": Method(_nothing, _list, _collections),
    "Create": Method(convert.create_collection, _route(routes.create_collection), _collection_done),
    "Delete": Method(_nothing, _drop, _collection_done),
    "CollectionExists": Method(_nothing, _exists, _collection_exists),
}

# What Qdrant answers without an API key, as the REST dialect's `GET /`.
QDRANT: Mapping[str, Method] = {
    "HealthCheck": Method(_nothing, _root, _health, authenticated=False),
}

_MATRIX = (
    "a distance matrix over sampled points: the sample and its pairs would be drawn from "
    "points the asker may not see (REST's /points/search/matrix is not served either)"
)
_PROXY = "it bypasses any proxy; keep it from callers at the Qdrant server (docs/operations.md)"
UNSERVED: Mapping[str, Mapping[str, str]] = {
    "Points": {
        "SearchMatrixOffsets": _MATRIX,
        "SearchMatrixPairs": _MATRIX,
        "CreateVectorName": "a collection's vectors are set when it is created",
        "DeleteVectorName": "a collection's vectors are set when it is created",
    },
    "Collections": {
        "Update": "a collection's settings are set when it is created (REST PATCH neither)",
        "UpdateAliases": f"aliases: {_PROXY}",
        "ListAliases": f"aliases: {_PROXY}",
        "ListCollectionAliases": f"aliases: {_PROXY}",
        "CollectionClusterInfo": f"cluster operations: {_PROXY}",
        "UpdateCollectionClusterSetup": f"cluster operations: {_PROXY}",
        "CreateShardKey": f"shard keys: {_PROXY}",
        "DeleteShardKey": f"shard keys: {_PROXY}",
        "ListShardKeys": f"shard keys: {_PROXY}",
    },
    "Qdrant": {},
}


def metadata(context: grpc.aio.ServicerContext[Any, Any]) -> dict[str, str]:
    """The call's metadata as headers (gRPC sends the names in lower case)."""
    return {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}


async def answer_refusal(context: grpc.aio.ServicerContext[Any, Any], exc: Exception) -> None:
    refused = refusal(exc)
    if refused.code == grpc.StatusCode.INTERNAL:
        log.error("gRPC call failed: %r", exc, exc_info=exc)
    context.set_trailing_metadata(refused.metadata)
    await context.abort(refused.code, refused.message)


Handler = Callable[[Any, "grpc.aio.ServicerContext[Any, Any]"], Awaitable[Message]]

# The lists whose REST handlers bound them, counted before anything is converted: an
# entry costs two bytes on the wire and tens of microseconds to convert (on the event
# loop), so a message of the REST body's size held millions, converted for minutes
# before the handler's bound refused them. Each is refused as its REST handler refuses
# it; any other list of messages at the top of a request is held to _MAX_ENTRIES.
_BATCH = ("query_points", "search_points", "recommend_points", "discover_points")
_MAX_ENTRIES = 10_000


def _bounded(request: Message, settings: Settings) -> None:
    for field, value in request.ListFields():
        if isinstance(value, pb.PointsSelector):
            value = value.points.ids  # the ids a delete or a payload's change names
        elif not field.is_repeated or field.message_type is None:
            continue
        n = len(value)
        if field.name in _BATCH and n > settings.query_max_batch:
            bound = settings.query_max_batch
            raise QueryTooCostly("batch", f"a batch may hold at most {bound} queries")
        if field.name == "ids" and n > settings.max_candidates:
            raise QdrantError(400, f"at most {settings.max_candidates} ids per request")
        if field.name == "points" and n > MAX_BATCH:
            raise InvalidRequest("batch size", [f"1..{MAX_BATCH} points"])
        if field.name in ("operations", "points", "points_selector") and n > MAX_IDS:
            raise QdrantError(400, f"at most {MAX_IDS} {field.name} per request")
        if n > _MAX_ENTRIES:
            raise QdrantError(400, f"`{field.name}`: at most {_MAX_ENTRIES} entries")


def _handler(method: Method, services: Callable[[], Services]) -> Handler:
    async def handle(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
        started = time.perf_counter()
        try:
            svc = services()
            who = (
                await svc.authenticate.from_headers(metadata(context))
                if method.authenticated
                else None
            )
            _bounded(request, svc.settings)
            collection = getattr(request, "collection_name", "")
            result = await method.call(svc, who, collection, method.body(request))  # type: ignore[arg-type]
            return method.reply(result, time.perf_counter() - started)
        except Exception as exc:
            await answer_refusal(context, exc)
            raise  # unreachable: abort raised

    return handle


def _unserved(service: str, name: str, why: str) -> Handler:
    async def handle(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
        await answer_refusal(context, Unserved(f"{service}.{name}", why))
        raise AssertionError("unreachable: abort raised")

    return handle


S = TypeVar("S")


def rpc_names(base: type[Any]) -> list[str]:
    """The RPC methods a generated servicer base declares."""
    return sorted(
        name
        for name, member in inspect.getmembers(base, inspect.isfunction)
        if not name.startswith("_")
    )


def servicer(
    base: type[S],
    service: str,
    served: Mapping[str, Method],
    services: Callable[[], Services],
) -> S:
    """An instance of the generated servicer `base` with every method replaced: served
    by its row, or refused as UNIMPLEMENTED with its reason."""
    unserved = UNSERVED[service]
    declared = rpc_names(base)
    missing = sorted(set(declared) - set(served) - set(unserved))
    stray = sorted((set(served) | set(unserved)) - set(declared))
    if missing or stray:
        raise RuntimeError(f"qdrant.{service}: unmapped {missing}, not in the service {stray}")
    instance = base()
    for name, method in served.items():
        setattr(instance, name, _handler(method, services))
    for name, why in unserved.items():
        setattr(instance, name, _unserved(service, name, why))
    return instance


def add_to(server: grpc.aio.Server, services: Callable[[], Services]) -> Sequence[str]:
    """The three services on `server`; their full names (for reflection and logs)."""
    points_grpc.add_PointsServicer_to_server(  # type: ignore[no-untyped-call]
        servicer(points_grpc.PointsServicer, "Points", POINTS, services), server
    )
    collections_grpc.add_CollectionsServicer_to_server(  # type: ignore[no-untyped-call]
        servicer(collections_grpc.CollectionsServicer, "Collections", COLLECTIONS, services),
        server,
    )
    qdrant_pb2_grpc.add_QdrantServicer_to_server(  # type: ignore[no-untyped-call]
        servicer(qdrant_pb2_grpc.QdrantServicer, "Qdrant", QDRANT, services), server
    )
    return ["qdrant.Points", "qdrant.Collections", "qdrant.Qdrant"]
