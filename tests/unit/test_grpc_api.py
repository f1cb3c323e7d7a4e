"""The gRPC transport's tables and conversions (sidecar/grpc_api/), without a process:
every method of Qdrant's services is served or refused by name, a request becomes the
body its REST route parses, and the listener's settings read as documented."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from qdrant_client import grpc as pb
from qdrant_client.conversions.conversion import RestToGrpc
from qdrant_client.grpc import collections_service_pb2_grpc, points_service_pb2_grpc
from qdrant_client.http import models as qm

from sidecar.grpc_api import convert, services
from sidecar.http.qdrant.dialect import QdrantError
from sidecar.settings import GRPC_PORT, Settings


def _none() -> Any:
    raise AssertionError("no services in a unit test")


def test_every_method_is_served_or_refused_by_name() -> None:
    for base, name, served in (
        (points_service_pb2_grpc.PointsServicer, "Points", services.POINTS),
        (collections_service_pb2_grpc.CollectionsServicer, "Collections", services.COLLECTIONS),
    ):
        declared = services.rpc_names(base)
        assert sorted([*served, *services.UNSERVED[name]]) == declared
        built = services.servicer(base, name, served, _none)
        # No method is left to the generated base's default (a bare UNIMPLEMENTED).
        assert all(name in vars(built) for name in declared)
        assert all(why for why in services.UNSERVED[name].values())


def test_a_method_without_a_row_fails_the_build() -> None:
    partial = {k: v for k, v in services.POINTS.items() if k != "Facet"}
    with pytest.raises(RuntimeError, match="Facet"):
        services.servicer(points_service_pb2_grpc.PointsServicer, "Points", partial, _none)


def test_a_query_becomes_the_rest_body() -> None:
    rest = qm.QueryRequest(
        query=[0.5, 0.25],
        filter=qm.Filter(must=[qm.FieldCondition(key="source", match=qm.MatchValue(value="a"))]),
        limit=3,
        with_payload=True,
    )
    body = convert.query(RestToGrpc.convert_query_points(rest, "kb"))
    assert qm.QueryRequest.model_validate(body) == rest.model_copy(
        update={"query": qm.NearestQuery(nearest=[0.5, 0.25])}
    )


def test_a_field_with_no_place_in_the_rest_body_is_refused_by_name() -> None:
    message = pb.ScrollPoints(collection_name="kb", limit=3)
    assert convert.scroll(message) == {"limit": 3}
    message.shard_key_selector.shard_keys.add(keyword="a")
    assert "shard_key" in convert.scroll(message)  # the REST route refuses it by name
    created = pb.CreateCollection(collection_name="kb")
    created.id_tracker.CopyFrom(pb.IdTrackerParams())
    with pytest.raises(QdrantError, match="id_tracker"):
        convert.create_collection(created)


def test_upsert_and_delete_keep_the_rest_shapes() -> None:
    point = qm.PointStruct(id=7, vector={"": [1.0, 2.0]}, payload={"a": None, "b": [1, "x"]})
    upsert = pb.UpsertPoints(collection_name="kb", points=[RestToGrpc.convert_point_struct(point)])
    body = convert.upsert(upsert)
    assert body["points"][0]["id"] == 7
    assert body["points"][0]["payload"] == {"a": None, "b": [1, "x"]}
    selector = RestToGrpc.convert_points_selector(qm.PointIdsList(points=[7, 8]))
    assert convert.delete(pb.DeletePoints(collection_name="kb", points=selector)) == {
        "points": [7, 8]
    }


def test_the_listener_is_on_qdrants_port_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("WHOSE_GRPC_PORT", raising=False)
    assert Settings(dev=True).grpc_port == GRPC_PORT == 6334
    for off in ("off", "none", "", "OFF"):
        monkeypatch.setenv("WHOSE_GRPC_PORT", off)
        assert Settings(dev=True).grpc_port is None
    monkeypatch.setenv("WHOSE_GRPC_PORT", "7334")
    assert Settings(dev=True).grpc_port == 7334
    # TLS takes both files or neither, whichever is missing (one line at start-up).
    one_only = "set both WHOSE_GRPC_TLS_CERT_FILE and WHOSE_GRPC_TLS_KEY_FILE, or neither"
    with pytest.raises(ValueError, match=one_only):
        Settings(dev=True, grpc_tls_cert_file="cert.pem")
    with pytest.raises(ValueError, match=one_only):
        Settings(dev=True, grpc_tls_key_file="key.pem")


class _Aborted(Exception):
    pass


class _Context:
    """What a handler reads of a call, and the status it aborts with."""

    def __init__(self) -> None:
        self.code: Any = None
        self.message = ""

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("api-key", "t"),)

    def set_trailing_metadata(self, _: Any) -> None:
        pass

    async def abort(self, code: Any, message: str) -> None:
        self.code, self.message = code, message
        raise _Aborted


class _Svc:
    settings = Settings()

    class authenticate:
        @staticmethod
        async def from_headers(_: Any) -> Any:
            from sidecar.auth.identity import Identity

            return Identity(id="mallory", tenant="acme")


def _entries(n: int) -> dict[str, Any]:
    return {
        "SearchBatch": pb.SearchBatchPoints(
            collection_name="kb", search_points=[pb.SearchPoints()] * n
        ),
        "QueryBatch": pb.QueryBatchPoints(
            collection_name="kb", query_points=[pb.QueryPoints()] * n
        ),
        "Get": pb.GetPoints(collection_name="kb", ids=[pb.PointId(num=1)] * n),
        "Upsert": pb.UpsertPoints(collection_name="kb", points=[pb.PointStruct()] * n),
        "UpdateBatch": pb.UpdateBatchPoints(
            collection_name="kb", operations=[pb.PointsUpdateOperation()] * n
        ),
        "Delete": pb.DeletePoints(
            collection_name="kb",
            points=pb.PointsSelector(points=pb.PointsIdsList(ids=[pb.PointId(num=1)] * n)),
        ),
    }


@pytest.mark.parametrize("name", list(_entries(1)))
async def test_a_list_past_its_bound_is_refused_before_it_is_converted(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry costs two bytes on the wire and tens of microseconds to convert (on the
    event loop): a message of the REST body's size held millions, whose conversion ran
    for minutes before the REST handler's bound refused the batch."""
    request = _entries(20_000)[name]

    def never(*_: Any) -> Any:
        raise AssertionError("converted")

    method = services.POINTS[name]
    method = services.Method(never, method.call, method.reply)
    context = _Context()
    with pytest.raises(_Aborted):
        await services._handler(method, lambda: _Svc())(request, context)  # type: ignore[arg-type,return-value]
    assert context.code in (
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ), (context.code, context.message)
