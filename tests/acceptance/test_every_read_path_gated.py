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

import httpx
from starlette.routing import Route

from sidecar.embed.hashing import HashingEmbedder
from sidecar.http.app import create_app
from sidecar.settings import Settings
from tests.conftest import as_, free_port, start_opa, start_sidecar, stop

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
}
# For security teams, behind a role: decisions, reasons and policy input, never content.
SECURITY = {
    ("GET", "/v1/audit"),
    ("POST", "/v1/explain"),
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
    ("DELETE", "/v1/memories/{record_id}"),
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


def call(base: str, route: tuple[str, str], record_id: str) -> httpx.Response:
    path, body, _ = READS[route]
    path = path.replace("{id}", record_id)
    if body is not None:
        body = json.loads(json.dumps(body).replace("{id}", record_id))
    return httpx.request(route[0], f"{base}{path}", json=body, headers=as_("alice"), timeout=30)


@contextmanager
def sidecar_on(data_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    base, process = start_sidecar(data_dir, env=env)
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
        for tool in MCP_READS:
            # A tool error, in band: the HTTP exchange itself succeeded.
            result = tool_result(call_tool(base, tool, secret_id))
            assert result["isError"] is True, f"MCP {tool} answered without asking the policy"
            assert result["structuredContent"]["error"] == "policy_unavailable", (tool, result)
            assert not shows_secret(json.dumps(result)), tool
