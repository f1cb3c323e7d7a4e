"""Protobuf to the REST dialect's bodies, and its answers back to protobuf.

qdrant-client converts between its gRPC messages and its REST models in both directions
(`GrpcToRest`, `RestToGrpc`): a request is turned into the REST model and dumped as the
JSON body the REST route parses, and the route's JSON answer is parsed into the REST
model and turned into the message. Where qdrant-client has no conversion for a whole
request (the older search and recommend calls, scroll, count, facet, the collection's
creation), its parts are converted here with qdrant-client's conversions of each part.
A field set that the REST body has no place for is refused by name, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.message import Message
from pydantic import BaseModel
from qdrant_client import grpc as pb
from qdrant_client.conversions.conversion import (
    GrpcToRest,
    RestToGrpc,
    grpc_field_type_to_payload_schema,
)
from qdrant_client.http import models as qm

from sidecar.http.qdrant.dialect import QdrantError

Body = dict[str, Any]


def _json(model: BaseModel) -> Any:
    return model.model_dump(mode="json", exclude_none=True, by_alias=True)


_CLAUSES = ("must", "should", "must_not")


def _filters(value: Any) -> Any:
    """A body of filters (a query, a selector: never a payload) without the empty
    clauses protobuf cannot leave out (`should: []`), as a REST client sends them."""
    if isinstance(value, list):
        return [_filters(v) for v in value]
    if not isinstance(value, dict):
        return value
    return {k: _filters(v) for k, v in value.items() if not (k in _CLAUSES and v == [])}


def _set(message: Message, field: str) -> bool:
    return bool(message.HasField(field))


def _refuse_unknown(message: Message, handled: Iterable[str]) -> None:
    """Refuse a field the conversion does not carry (a silent drop would answer as if it
    had been honoured)."""
    known = set(handled) | _IGNORED
    for field, _ in message.ListFields():
        if field.name not in known:
            raise QdrantError(400, f"not supported by whose: `{field.name}` over gRPC")


# What Qdrant's REST API takes as query parameters, which the REST dialect accepts and
# does not act on either (every write is done before it answers; one replica set).
_IGNORED = {"collection_name", "wait", "ordering", "read_consistency", "timeout"}


def _common(message: Message, body: Body) -> Body:
    """The fields most reads share, where the message has them."""
    parts: dict[str, tuple[str, Callable[[Any], Any]]] = {
        "filter": ("filter", lambda v: _filters(_json(GrpcToRest.convert_filter(v)))),
        "params": ("params", lambda v: _json(GrpcToRest.convert_search_params(v))),
        "with_payload": (
            "with_payload",
            lambda v: _dumped(GrpcToRest.convert_with_payload_selector(v)),
        ),
        "with_vectors": (
            "with_vector",
            lambda v: _dumped(GrpcToRest.convert_with_vectors_selector(v)),
        ),
        "lookup_from": ("lookup_from", lambda v: _json(GrpcToRest.convert_lookup_location(v))),
        "shard_key_selector": (
            "shard_key",
            lambda v: _dumped(GrpcToRest.convert_shard_key_selector(v)),
        ),
        "with_lookup": ("with_lookup", lambda v: _json(GrpcToRest.convert_with_lookup(v))),
        "order_by": ("order_by", lambda v: _json(GrpcToRest.convert_order_by(v))),
    }
    names = {f.name for f in message.DESCRIPTOR.fields}
    for field, (key, convert) in parts.items():
        if field in names and _set(message, field):
            body[key] = convert(getattr(message, field))
    for scalar in ("limit", "offset", "score_threshold", "using", "exact", "group_size"):
        if scalar in names and _set_scalar(message, scalar):
            body[scalar] = getattr(message, scalar)
    return body


def _set_scalar(message: Message, field: str) -> bool:
    descriptor = message.DESCRIPTOR.fields_by_name[field]
    if descriptor.has_presence:
        return bool(message.HasField(field))
    return bool(getattr(message, field))


def _dumped(value: Any) -> Any:
    return _json(value) if isinstance(value, BaseModel) else value


# --- the query API -----------------------------------------------------------------------


def query(message: pb.QueryPoints) -> Body:
    return _filters(_json(GrpcToRest.convert_query_points(message)))  # type: ignore[no-any-return]


def query_batch(message: pb.QueryBatchPoints) -> Body:
    return {"searches": [query(q) for q in message.query_points]}


def query_groups(message: pb.QueryPointGroups) -> Body:
    """A grouped query: the query its fields make (qdrant-client converts that), and the
    grouping."""
    ungrouped = pb.QueryPoints()
    target = {f.name for f in pb.QueryPoints.DESCRIPTOR.fields}
    for field, value in message.ListFields():
        if field.name not in target:
            continue
        if field.is_repeated:
            getattr(ungrouped, field.name).extend(value)
        elif field.message_type is not None:
            getattr(ungrouped, field.name).CopyFrom(value)
        else:
            setattr(ungrouped, field.name, value)
    body = query(ungrouped)
    body["group_by"] = message.group_by
    return _common(message, body)


def _legacy_vector(message: pb.SearchPoints | pb.SearchPointGroups) -> Any:
    if message.HasField("sparse_indices"):
        sparse = {"indices": list(message.sparse_indices.data), "values": list(message.vector)}
        return {"name": message.vector_name, "vector": sparse}
    if message.HasField("vector_name"):
        return {"name": message.vector_name, "vector": list(message.vector)}
    return list(message.vector)


def search(message: pb.SearchPoints) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, "vector", "vector_name", "sparse_indices"])
    return _common(message, {"vector": _legacy_vector(message)})


def search_batch(message: pb.SearchBatchPoints) -> Body:
    return {"searches": [search(s) for s in message.search_points]}


def search_groups(message: pb.SearchPointGroups) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, "vector", "vector_name", "sparse_indices", "group_by"])
    return _common(message, {"vector": _legacy_vector(message), "group_by": message.group_by})


def _example(point: pb.PointId) -> Any:
    return GrpcToRest.convert_point_id(point)


def _recommend_body(message: pb.RecommendPoints | pb.RecommendPointGroups) -> Body:
    body: Body = {
        "positive": [_example(p) for p in message.positive]
        + [_dumped(GrpcToRest.convert_vector(v)) for v in message.positive_vectors],
        "negative": [_example(p) for p in message.negative]
        + [_dumped(GrpcToRest.convert_vector(v)) for v in message.negative_vectors],
    }
    if message.HasField("strategy"):
        strategy = GrpcToRest.convert_recommend_strategy(message.strategy)  # type: ignore[arg-type]
        body["strategy"] = strategy.value
    return _common(message, body)


_RECOMMEND_FIELDS = ("positive", "negative", "positive_vectors", "negative_vectors", "strategy")


def recommend(message: pb.RecommendPoints) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, *_RECOMMEND_FIELDS])
    return _recommend_body(message)


def recommend_batch(message: pb.RecommendBatchPoints) -> Body:
    return {"searches": [recommend(r) for r in message.recommend_points]}


def recommend_groups(message: pb.RecommendPointGroups) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, *_RECOMMEND_FIELDS, "group_by"])
    return _recommend_body(message) | {"group_by": message.group_by}


def _target(example: pb.VectorExample) -> Any:
    if example.HasField("id"):
        return GrpcToRest.convert_point_id(example.id)
    return _dumped(GrpcToRest.convert_vector(example.vector))


def discover(message: pb.DiscoverPoints) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, "target", "context"])
    body: Body = {}
    if message.HasField("target"):
        body["target"] = _target(message.target.single)
    if message.context:
        body["context"] = [
            {"positive": _target(pair.positive), "negative": _target(pair.negative)}
            for pair in message.context
        ]
    return _common(message, body)


def discover_batch(message: pb.DiscoverBatchPoints) -> Body:
    return {"searches": [discover(d) for d in message.discover_points]}


# The reads' own fields (their vectors and examples apart), which `_common` carries.
_READ_FIELDS = (
    "filter",
    "params",
    "with_payload",
    "with_vectors",
    "lookup_from",
    "shard_key_selector",
    "with_lookup",
    "order_by",
    "limit",
    "offset",
    "score_threshold",
    "using",
    "exact",
    "group_size",
)


# --- scans and reads by id ------------------------------------------------------------


def scroll(message: pb.ScrollPoints) -> Body:
    _refuse_unknown(message, _READ_FIELDS)
    body = _common(message, {})
    if message.HasField("offset"):
        body["offset"] = GrpcToRest.convert_point_id(message.offset)
    return body


def count(message: pb.CountPoints) -> Body:
    _refuse_unknown(message, _READ_FIELDS)
    return _common(message, {})


def facet(message: pb.FacetCounts) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, "key"])
    return _common(message, {"key": message.key})


def get(message: pb.GetPoints) -> Body:
    _refuse_unknown(message, [*_READ_FIELDS, "ids"])
    return _common(message, {"ids": [GrpcToRest.convert_point_id(p) for p in message.ids]})


# --- writes -------------------------------------------------------------------------------


def upsert(message: pb.UpsertPoints) -> Body:
    body: Body = {"points": [_json(GrpcToRest.convert_point_struct(p)) for p in message.points]}
    # Conditions the REST route refuses by name (http/qdrant/writes.py).
    if message.HasField("shard_key_selector"):
        body["shard_key"] = _dumped(
            GrpcToRest.convert_shard_key_selector(message.shard_key_selector)
        )
    if message.HasField("update_filter"):
        body["update_filter"] = _filters(_json(GrpcToRest.convert_filter(message.update_filter)))
    if message.HasField("update_mode"):
        body["update_mode"] = "given"
    return body


def _selected(selector: pb.PointsSelector) -> Body:
    """`{"points": [...]}` or `{"filter": ...}`, as the REST body names points."""
    return _filters(_json(GrpcToRest.convert_points_selector(selector)))  # type: ignore[no-any-return]


def delete(message: pb.DeletePoints) -> Body:
    _refuse_unknown(message, ["points"])
    return _selected(message.points)


def set_payload(message: pb.SetPayloadPoints) -> Body:
    _refuse_unknown(message, ["payload", "points_selector", "key"])
    body: Body = {"payload": GrpcToRest.convert_payload(message.payload)}
    if message.HasField("points_selector"):
        body |= _selected(message.points_selector)
    if message.HasField("key"):
        body["key"] = message.key
    return body


def delete_payload(message: pb.DeletePayloadPoints) -> Body:
    _refuse_unknown(message, ["keys", "points_selector"])
    body: Body = {"keys": list(message.keys)}
    if message.HasField("points_selector"):
        body |= _selected(message.points_selector)
    return body


def update_batch(message: pb.UpdateBatchPoints) -> Body:
    _refuse_unknown(message, ["operations"])
    operations = [
        _json(GrpcToRest.convert_points_update_operation(op)) for op in message.operations
    ]
    return {"operations": operations}


def create_index(message: pb.CreateFieldIndexCollection) -> Body:
    _refuse_unknown(message, ["field_name", "field_type", "field_index_params"])
    schema: Any = None
    if message.HasField("field_index_params"):
        schema = _json(GrpcToRest.convert_payload_schema_params(message.field_index_params))
    elif message.HasField("field_type"):
        kind = grpc_field_type_to_payload_schema(message.field_type)  # type: ignore[arg-type]
        schema = GrpcToRest.convert_payload_schema_type(kind).value
    return {"field_name": message.field_name, "field_schema": schema}


# --- collections ------------------------------------------------------------------------


def create_collection(message: pb.CreateCollection) -> Body:
    """The REST body of a collection's creation: its vectors, and the settings the
    REST route honours or refuses by name (store/layout.py)."""
    parts: dict[str, Callable[[Any], Any]] = {
        "vectors_config": lambda v: _dumped(GrpcToRest.convert_vectors_config(v)),
        "sparse_vectors_config": lambda v: {
            name: _json(params)
            for name, params in GrpcToRest.convert_sparse_vector_config(v).items()
        },
        "hnsw_config": lambda v: _json(GrpcToRest.convert_hnsw_config_diff(v)),
        "wal_config": lambda v: _json(GrpcToRest.convert_wal_config_diff(v)),
        "optimizers_config": lambda v: _json(GrpcToRest.convert_optimizers_config_diff(v)),
        "quantization_config": lambda v: _dumped(GrpcToRest.convert_quantization_config(v)),
        "sharding_method": lambda v: GrpcToRest.convert_sharding_method(v).value,
        "strict_mode_config": lambda v: _json(GrpcToRest.convert_strict_mode_config(v)),
        "shard_number": lambda v: v,
        "replication_factor": lambda v: v,
        "write_consistency_factor": lambda v: v,
        "on_disk_payload": lambda v: v,
    }
    names = {"vectors_config": "vectors", "sparse_vectors_config": "sparse_vectors"}
    _refuse_unknown(message, [*parts, "metadata"])
    body: Body = {}
    for field, convert in parts.items():
        if _set(message, field):
            body[names.get(field, field)] = convert(getattr(message, field))
    if message.metadata:
        body["metadata"] = GrpcToRest.convert_payload(message.metadata)
    return body


# --- answers ------------------------------------------------------------------------------


def scored(points: list[Any]) -> list[pb.ScoredPoint]:
    return [RestToGrpc.convert_scored_point(qm.ScoredPoint.model_validate(p)) for p in points]


def records(points: list[Any]) -> list[pb.RetrievedPoint]:
    return [RestToGrpc.convert_record(qm.Record.model_validate(p)) for p in points]


def groups(result: Any) -> pb.GroupsResult:
    return RestToGrpc.convert_groups_result(qm.GroupsResult.model_validate(result))


def update_result(result: Any) -> pb.UpdateResult:
    return RestToGrpc.convert_update_result(qm.UpdateResult.model_validate(result))


def facet_hits(result: Any) -> list[pb.FacetHit]:
    return [
        RestToGrpc.convert_facet_value_hit(qm.FacetValueHit.model_validate(h))
        for h in result["hits"]
    ]


def point_id(raw: Any) -> pb.PointId:
    return RestToGrpc.convert_extended_point_id(raw)


# The write-ahead log's settings, which the REST answer leaves out (whose keeps no log a
# caller configures) and the message requires: Qdrant's defaults.
_WAL = qm.WalConfig(wal_capacity_mb=32, wal_segments_ahead=0)


def collection_info(result: Any) -> pb.CollectionInfo:
    info = qm.CollectionInfo.model_validate(result)
    if info.config.wal_config is None:
        info.config.wal_config = _WAL
    return RestToGrpc.convert_collection_info(info)
