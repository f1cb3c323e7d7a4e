"""No route returns record content without a policy decision on its path.

The test walks the app's routes. Every route must be classified: content-free
(health, docs, collection config, the refusal catch-all), a write (answers with
what the caller itself wrote), or a read with a request template. Each read is
then made three times against the same store, holding one secret record of
Alice's, asked by Alice herself:

1. with the real policy: she sees it (so the template really reaches the record);
2. with a real OPA whose policy denies everything: the secret is nowhere in the body;
3. with OPA unreachable: 503, which only happens if the route asks the policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
from qdrant_client import grpc as pb
from qdrant_client.conversions.conversion import RestToGrpc
from qdrant_client.grpc import (
    collections_service_pb2_grpc,
    points_service_pb2_grpc,
    qdrant_pb2_grpc,
)
from qdrant_client.http import models as qm
from starlette.routing import Route

from sidecar.embed.hashing import HashingEmbedder
from sidecar.grpc_api.services import UNSERVED, rpc_names
from sidecar.http.app import create_app
from sidecar.settings import Settings
from tests.conftest import GRPC, as_, free_port, start_opa, start_sidecar, stop

SECRET = "the merger with Initech closes on March 3"
KEY = "merger.date"
COLLECTION = "whose_memories"
VECTOR = HashingEmbedder(384).embed(SECRET)

CONTENT_FREE = {
    ("GET", "/"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
    ("GET", "/collections"),
    ("GET", "/collections/{collection}"),
    ("GET", "/collections/{collection}/exists"),
    # Which issuer's tokens the MCP endpoint takes (RFC 9728).
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    # Refused by name: a payload or vector change alone.
    ("POST", "/collections/{collection}/points/payload/clear"),
    ("PUT", "/collections/{collection}/points/vectors"),
    ("POST", "/collections/{collection}/points/vectors/delete"),
    # A subject's grants: who may see which categories of whose records, never a
    # record (their answers depend on no record: tests/noninterference/test_grants.py).
    ("POST", "/v1/grants"),
    ("GET", "/v1/grants"),
    ("DELETE", "/v1/grants/{grant_id}"),
}
# For security teams, behind a role: decisions, reasons and policy input, never content.
SECURITY = {
    ("GET", "/v1/audit"),
    ("POST", "/v1/explain"),
    # A candidate policy's impact: flips with rules and reasons, record ids, never content.
    ("POST", "/v1/policy/impact"),
    # An erasure officer's requests: counts of what was erased and kept, never content.
    ("POST", "/v1/erasures"),
    ("GET", "/v1/erasures/{request_id}"),
}
# The refusal catch-all answers "not supported" for every method.
CATCH_ALL = "/collections/{rest:path}"
# Writes and erasures: they answer with what the caller wrote, the ids it erased of
# those it named, or a bare status (tests/noninterference drives them).
WRITES = {
    ("POST", "/v1/memories"),
    ("POST", "/v1/observations"),
    ("POST", "/v1/witnessed"),
    # Membership events: the writer's own, never a record (tests/acceptance/test_conversations.py).
    ("POST", "/v1/conversations"),
    ("POST", "/v1/conversations/{source_id:key}/membership"),
    ("DELETE", "/v1/memories/{record_id}"),
    # Forget rules: the rule as sent (never its value), counts of what was erased
    # (tests/noninterference/test_forgetting.py drives them).
    ("POST", "/v1/forget-rules"),
    ("GET", "/v1/forget-rules"),
    ("DELETE", "/v1/forget-rules/{rule_id}"),
    ("PUT", "/collections/{collection}/points"),
    ("POST", "/collections/{collection}/points/delete"),
    ("POST", "/collections/{collection}/points/payload"),
    ("PUT", "/collections/{collection}/points/payload"),
    ("POST", "/collections/{collection}/points/payload/delete"),
    ("POST", "/collections/{collection}/points/batch"),
    # A stack's own collections and their indexes: a bare status, the policy's to allow.
    ("PUT", "/collections/{collection}"),
    ("DELETE", "/collections/{collection}"),
    ("PUT", "/collections/{collection}/index"),
    ("DELETE", "/collections/{collection}/index/{field}"),
}


def shows_secret(body: str) -> bool:
    return SECRET in body


def counts_it(body: str) -> bool:
    return bool(json.loads(body).get("result", {}).get("count"))


def facets_it(body: str) -> bool:
    return bool(json.loads(body).get("result", {}).get("hits"))


def _points_route(path: str, body: dict[str, Any]) -> tuple[str, Any, Callable[[str], bool]]:
    return (f"/collections/{COLLECTION}/points/{path}", body, shows_secret)


SHOWN = {"with_payload": True}
NEAR = {"vector": VECTOR, "limit": 3, **SHOWN}
RECOMMENDED = {"positive": [VECTOR], "limit": 3, **SHOWN}
DISCOVERED = {"target": VECTOR, "limit": 3, **SHOWN}
GROUPED = {"group_by": "observer_id", "group_size": 2, "limit": 3}


# (method, path) -> (concrete path, JSON body or None, "did the caller see it?")
READS: dict[tuple[str, str], tuple[str, Any, Callable[[str], bool]]] = {
    ("POST", "/v1/recall"): ("/v1/recall", {"query": SECRET}, shows_secret),
    ("GET", "/v1/memories/{record_id}"): ("/v1/memories/{id}", None, shows_secret),
    ("GET", "/v1/memories/{record_id}/history"): ("/v1/memories/{id}/history", None, shows_secret),
    ("GET", "/v1/propositions/{key:key}"): (f"/v1/propositions/{KEY}", None, shows_secret),
    ("POST", "/collections/{collection}/points/query"): (
        f"/collections/{COLLECTION}/points/query",
        {"query": VECTOR, "with_payload": True},
        shows_secret,
    ),
    ("POST", "/collections/{collection}/points/search"): _points_route("search", NEAR),
    ("POST", "/collections/{collection}/points/query/batch"): _points_route(
        "query/batch", {"searches": [{"query": VECTOR, **SHOWN}]}
    ),
    ("POST", "/collections/{collection}/points/query/groups"): _points_route(
        "query/groups", {"query": VECTOR, **GROUPED, **SHOWN}
    ),
    ("POST", "/collections/{collection}/points/search/batch"): _points_route(
        "search/batch", {"searches": [NEAR]}
    ),
    ("POST", "/collections/{collection}/points/search/groups"): _points_route(
        "search/groups", {**NEAR, **GROUPED}
    ),
    ("POST", "/collections/{collection}/points/recommend"): _points_route("recommend", RECOMMENDED),
    ("POST", "/collections/{collection}/points/recommend/batch"): _points_route(
        "recommend/batch", {"searches": [RECOMMENDED]}
    ),
    ("POST", "/collections/{collection}/points/recommend/groups"): _points_route(
        "recommend/groups", {**RECOMMENDED, **GROUPED}
    ),
    ("POST", "/collections/{collection}/points/discover"): _points_route("discover", DISCOVERED),
    ("POST", "/collections/{collection}/points/discover/batch"): _points_route(
        "discover/batch", {"searches": [DISCOVERED]}
    ),
    ("POST", "/collections/{collection}/facet"): (
        f"/collections/{COLLECTION}/facet",
        {"key": "observer_id"},
        facets_it,
    ),
    ("POST", "/collections/{collection}/points/scroll"): (
        f"/collections/{COLLECTION}/points/scroll",
        {"with_payload": True},
        shows_secret,
    ),
    ("POST", "/collections/{collection}/points/count"): (
        f"/collections/{COLLECTION}/points/count",
        {},
        counts_it,
    ),
    ("POST", "/collections/{collection}/points"): (
        f"/collections/{COLLECTION}/points",
        {"ids": ["{id}"], "with_payload": True},
        shows_secret,
    ),
    ("GET", "/collections/{collection}/points/{point}"): (
        f"/collections/{COLLECTION}/points/{{id}}",
        None,
        shows_secret,
    ),
}


# The MCP endpoint: one route, a tool per read; each is checked like a route above.
MCP = ("POST", "/mcp")
MCP_READS: dict[str, dict[str, Any]] = {
    "recall": {"query": SECRET},
    "get_memory": {"id": "{id}"},
    "history": {"id": "{id}"},
    "what_do_people_think": {"key": KEY},
}


def call_tool(base: str, tool: str, record_id: str) -> httpx.Response:
    """A tools/call as an MCP host sends it (the endpoint is stateless: no handshake)."""
    arguments = json.loads(json.dumps(MCP_READS[tool]).replace("{id}", record_id))
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    headers = as_("alice") | {"Accept": "application/json, text/event-stream"}
    return httpx.post(f"{base}/mcp", json=message, headers=headers, timeout=30)


def tool_result(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


def _walk(routes: list[Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for route in routes:
        if isinstance(route, Route):
            for method in route.methods or ():
                if method != "HEAD":
                    yield method, prefix + route.path
        elif hasattr(route, "original_router"):  # an included router (FastAPI keeps them nested)
            yield from _walk(route.original_router.routes, prefix + route.include_context.prefix)
        else:
            raise AssertionError(f"a route of unknown kind could hide a read path: {route!r}")


def app_routes() -> set[tuple[str, str]]:
    app = create_app(Settings(dev=True))
    return {(method, path) for method, path in _walk(app.routes) if path != CATCH_ALL}


def test_every_route_is_classified() -> None:
    unclassified = app_routes() - CONTENT_FREE - SECURITY - WRITES - set(READS) - {MCP}
    assert not unclassified, f"classify these routes in this test: {sorted(unclassified)}"
    stale = (set(READS) | WRITES | SECURITY) - app_routes()
    assert not stale, f"these routes no longer exist: {sorted(stale)}"


RECORD = {
    "content": SECRET,
    "proposition": {"text": SECRET, "key": KEY, "value": "2027-03-03"},
    "observer_id": "alice",
    "source_id": "board-minutes",
    "source": {"kind": "conversation", "speaker": "alice"},
    "modality": "asserted",
    "audience": ["alice"],
    "valid_at": "2026-10-01T00:00:00Z",
    "vector": VECTOR,
}


# --- the gRPC transport (sidecar/grpc_api/): every method of Qdrant's services, classified
# like the routes, each read made the same three ways.
def _shown() -> pb.WithPayloadSelector:
    return pb.WithPayloadSelector(enable=True)


def _vector() -> pb.Vector:
    return pb.Vector(dense=pb.DenseVector(data=VECTOR))


def _search() -> pb.SearchPoints:
    return pb.SearchPoints(
        collection_name=COLLECTION, vector=VECTOR, limit=3, with_payload=_shown()
    )


def _recommend() -> pb.RecommendPoints:
    return pb.RecommendPoints(
        collection_name=COLLECTION, positive_vectors=[_vector()], limit=3, with_payload=_shown()
    )


def _discover() -> pb.DiscoverPoints:
    target = pb.TargetVector(single=pb.VectorExample(vector=_vector()))
    return pb.DiscoverPoints(
        collection_name=COLLECTION, target=target, limit=3, with_payload=_shown()
    )


def _query() -> pb.QueryPoints:
    return RestToGrpc.convert_query_points(
        qm.QueryRequest(query=VECTOR, with_payload=True), COLLECTION
    )


_GROUPED: dict[str, Any] = {"group_by": "observer_id", "group_size": 2, "limit": 3}
GRPC_READS: dict[str, Callable[[str], Any]] = {
    "Query": lambda _: _query(),
    "QueryBatch": lambda _: pb.QueryBatchPoints(
        collection_name=COLLECTION, query_points=[_query()]
    ),
    "QueryGroups": lambda _: pb.QueryPointGroups(
        collection_name=COLLECTION, query=_query().query, with_payload=_shown(), **_GROUPED
    ),
    "Search": lambda _: _search(),
    "SearchBatch": lambda _: pb.SearchBatchPoints(
        collection_name=COLLECTION, search_points=[_search()]
    ),
    "SearchGroups": lambda _: pb.SearchPointGroups(
        collection_name=COLLECTION, vector=VECTOR, with_payload=_shown(), **_GROUPED
    ),
    "Recommend": lambda _: _recommend(),
    "RecommendBatch": lambda _: pb.RecommendBatchPoints(
        collection_name=COLLECTION, recommend_points=[_recommend()]
    ),
    "RecommendGroups": lambda _: pb.RecommendPointGroups(
        collection_name=COLLECTION, positive_vectors=[_vector()], with_payload=_shown(), **_GROUPED
    ),
    "Discover": lambda _: _discover(),
    "DiscoverBatch": lambda _: pb.DiscoverBatchPoints(
        collection_name=COLLECTION, discover_points=[_discover()]
    ),
    "Scroll": lambda _: pb.ScrollPoints(collection_name=COLLECTION, with_payload=_shown()),
    "Count": lambda _: pb.CountPoints(collection_name=COLLECTION, exact=True),
    "Facet": lambda _: pb.FacetCounts(collection_name=COLLECTION, key="observer_id"),
    "Get": lambda record_id: pb.GetPoints(
        collection_name=COLLECTION, ids=[pb.PointId(uuid=record_id)], with_payload=_shown()
    ),
}
# What each read's answer shows of the record (protobuf's text form holds its payload).
GRPC_SAW: dict[str, Callable[[Any], bool]] = {
    "Count": lambda answer: answer.result.count > 0,
    "Facet": lambda answer: len(answer.hits) > 0,
}
GRPC_WRITES = {
    "Points": {
        "Upsert",
        "Delete",
        "SetPayload",
        "OverwritePayload",
        "DeletePayload",
        "UpdateBatch",
        "CreateFieldIndex",
        "DeleteFieldIndex",
    },
    "Collections": {"Create", "Delete"},
}
# Configuration, existence and health (never a point count), and the updates refused by
# name, as over REST.
GRPC_CONTENT_FREE = {
    "Points": {"ClearPayload", "UpdateVectors", "DeleteVectors"},
    "Collections": {"Get", "List", "CollectionExists"},
    "Qdrant": {"HealthCheck"},
}


def grpc_read(base: str, method: str, record_id: str) -> tuple[grpc.StatusCode, Any]:
    """A Points read as a stack's client makes it, as Alice (dev identity metadata)."""
    with grpc.insecure_channel(f"127.0.0.1:{GRPC[base]}") as channel:
        stub = points_service_pb2_grpc.PointsStub(channel)  # type: ignore[no-untyped-call]
        try:
            answer = getattr(stub, method)(
                GRPC_READS[method](record_id),
                metadata=(("x-whose-asker", "alice"), ("x-whose-tenant", "acme")),
                timeout=30,
            )
        except grpc.RpcError as error:
            return error.code(), error.details()
        return grpc.StatusCode.OK, answer


def grpc_saw(method: str, answer: Any) -> bool:
    if method in GRPC_SAW and not isinstance(answer, str):
        return GRPC_SAW[method](answer)
    return shows_secret(str(answer))


def test_every_grpc_method_is_classified() -> None:
    bases = {
        "Points": points_service_pb2_grpc.PointsServicer,
        "Collections": collections_service_pb2_grpc.CollectionsServicer,
        "Qdrant": qdrant_pb2_grpc.QdrantServicer,
    }
    for service, base in bases.items():
        classified = [
            *(GRPC_READS if service == "Points" else ()),
            *GRPC_WRITES.get(service, ()),
            *GRPC_CONTENT_FREE.get(service, ()),
            *UNSERVED[service],
        ]
        assert len(classified) == len(set(classified)), service
        assert sorted(classified) == rpc_names(base), service


def call(base: str, route: tuple[str, str], record_id: str) -> httpx.Response:
    path, body, _ = READS[route]
    path = path.replace("{id}", record_id)
    if body is not None:
        body = json.loads(json.dumps(body).replace("{id}", record_id))
    return httpx.request(route[0], f"{base}{path}", json=body, headers=as_("alice"), timeout=30)


@contextmanager
def sidecar_on(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    base, process = start_sidecar(data_dir, env=env, grpc=True)
    try:
        yield base
    finally:
        stop(process)


def test_every_read_asks_the_policy(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with sidecar_on(data_dir) as base:
        response = httpx.post(f"{base}/v1/memories", json=RECORD, headers=as_("alice"))
        assert response.status_code == 201, response.text
        secret_id = response.json()["records"][0]["id"]
        for route, (_, _, saw) in READS.items():
            answer = call(base, route, secret_id)
            assert answer.status_code == 200, (route, answer.text)
            # Otherwise the checks below would pass without proving anything.
            assert saw(answer.text), f"{route} never reached the record"
        for method in GRPC_READS:
            code, answer = grpc_read(base, method, secret_id)
            assert code == grpc.StatusCode.OK, (method, answer)
            assert grpc_saw(method, answer), f"gRPC {method} never reached the record"
        for tool in MCP_READS:
            result = tool_result(call_tool(base, tool, secret_id))
            assert not result.get("isError"), (tool, result)
            assert shows_secret(json.dumps(result)), f"MCP {tool} never reached the record"
        # The security routes see the record's decision, never its text.
        admin = as_("alice", roles="auditor,policy-admin")
        explained = httpx.post(
            f"{base}/v1/explain", json={"asker": "alice", "record_id": secret_id}, headers=admin
        )
        assert explained.status_code == 200, explained.text
        assert explained.json()["decision"]["allow"] is True
        assert SECRET not in explained.text
        audited = httpx.get(f"{base}/v1/audit", params={"record": secret_id}, headers=admin)
        assert audited.status_code == 200, audited.text
        assert audited.json()["entries"], "the reads above were not audited"
        assert SECRET not in audited.text

    deny_dir = tmp_path / "deny-all"
    deny_dir.mkdir()
    # This policy has no visible_to rule, so no pushdown: the store returns the
    # record, and the denial below is the disclosure rule's, not the filter's.
    (deny_dir / "deny.rego").write_text(
        "package whose.disclosure\n\n"
        'decisions[r.id] := {"allow": false, "usable_as": "belief", "reasons": ["deny_all"]} '
        "if some r in input.records\n\n"
        'batch := {"decisions": decisions, "vocabulary": {"uses": {}}}\n'
    )
    opa_url, opa = start_opa(deny_dir, deny_dir / "opa.log")
    try:
        with sidecar_on(data_dir, {"WHOSE_OPA_URL": opa_url}) as base:
            for route, (_, _, saw) in READS.items():
                answer = call(base, route, secret_id)
                assert answer.status_code in (200, 404), (route, answer.text)
                assert not saw(answer.text), f"{route} disclosed what the policy denied"
                if "{id}" not in json.dumps(READS[route][:2]):
                    # Where the caller did not name the record, its id is news too.
                    assert secret_id not in answer.text, f"{route} disclosed the record's id"
            for method in GRPC_READS:
                code, answer = grpc_read(base, method, secret_id)
                assert code in (grpc.StatusCode.OK, grpc.StatusCode.NOT_FOUND), (method, answer)
                assert not grpc_saw(method, answer), f"gRPC {method} disclosed what was denied"
                if method != "Get":
                    assert secret_id not in str(answer), f"gRPC {method} disclosed the id"
            for tool in MCP_READS:
                text = json.dumps(tool_result(call_tool(base, tool, secret_id)))
                assert not shows_secret(text), f"MCP {tool} disclosed what the policy denied"
                if "{id}" not in json.dumps(MCP_READS[tool]):
                    assert secret_id not in text, f"MCP {tool} disclosed the record's id"
    finally:
        stop(opa)

    with sidecar_on(data_dir, {"WHOSE_OPA_URL": f"http://127.0.0.1:{free_port()}"}) as base:
        for route, (_, _, saw) in READS.items():
            answer = call(base, route, secret_id)
            assert answer.status_code == 503, f"{route} answered without asking the policy"
            assert not saw(answer.text), route
        for method in GRPC_READS:
            code, answer = grpc_read(base, method, secret_id)
            assert code == grpc.StatusCode.UNAVAILABLE, f"gRPC {method} answered without the policy"
            assert "policy_unavailable" in str(answer), (method, answer)
        for tool in MCP_READS:
            # A tool error, in band: the HTTP exchange itself succeeded.
            result = tool_result(call_tool(base, tool, secret_id))
            assert result["isError"] is True, f"MCP {tool} answered without asking the policy"
            assert result["structuredContent"]["error"] == "policy_unavailable", (tool, result)
            assert not shows_secret(json.dumps(result)), tool
