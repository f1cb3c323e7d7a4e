"""Errors a client reads, from a served sidecar: one shape per transport (the native
API's problem, `{"error", "reasons"}`; Qdrant's `{"status": {"error"}, "time"}` on the
dialect's paths; MCP's tool error carrying the problem), reasons that name what was
sent and no framework internals, one reason for one bound whichever way it is asked,
and a body that cannot be parsed refused the same way however it is broken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import as_, start_sidecar, stop

MAX_BODY = 64 * 1024
JSON = {"content-type": "application/json"}
POINTS = "/collections/whose_memories/points"
RECORD = {
    "content": "Alice believes the launch is October 17",
    "observer_id": "alice",
    "source_id": "s-1",
    "modality": "reported_belief",
    "audience": ["alice"],
}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    base, process = start_sidecar(
        Path(tmp_path_factory.mktemp("shapes")), env={"WHOSE_MAX_BODY_BYTES": str(MAX_BODY)}
    )
    try:
        with httpx.Client(base_url=base, timeout=30) as client:
            yield client
    finally:
        stop(process)


def post(http: httpx.Client, path: str, body: Any, **headers: str) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http.post(path, content=raw, headers=as_("alice") | JSON | headers)


def walks(sent: Any, loc: list[Any]) -> bool:
    """Whether `loc` (after `body`) is a path through `sent`, but for a field that was
    not sent at its very end."""
    here = sent
    for at, part in enumerate(loc[1:], start=1):
        if isinstance(here, list) and isinstance(part, int) and 0 <= part < len(here):
            here = here[part]
            continue
        if not isinstance(here, dict):
            return False
        if part not in here:
            return at == len(loc) - 1
        here = here[part]
    return True


def is_problem(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("error"), str)
        and (isinstance(body.get("reasons"), list))
    )


def is_qdrant_error(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("status", {}).get("error"), str)
        and isinstance(body.get("time"), float)
    )


INVALID_BODIES = {
    "a record": ("/v1/memories", RECORD | {"modality": "gossip"}, [["body", "modality"]]),
    "records": (
        "/v1/memories",
        [RECORD, RECORD | {"modality": "gossip"}],
        [["body", 1, "modality"]],
    ),
    "a record missing a field": (
        "/v1/memories",
        {k: v for k, v in RECORD.items() if k != "source_id"},
        [["body", "source_id"]],
    ),
    "a proposition value of no type": (
        "/v1/memories",
        RECORD | {"proposition": {"text": "t", "value": [1]}},
        None,
    ),
    "an observation": (
        "/v1/observations",
        {"speaker": "alice", "source_id": "s", "participants": ["group:x"], "claims": []},
        None,
    ),
    "a claim about no one": (
        "/v1/observations",
        {
            "speaker": "alice",
            "source_id": "s",
            "claims": [{"proposition": {"text": "the launch slips"}, "about": 5}],
        },
        None,
    ),
    "a mind of no type": ("/v1/recall", {"query": "x", "observed": 5}, None),
}


@pytest.mark.parametrize("case", INVALID_BODIES)
def test_reasons_name_what_was_sent_and_no_framework_internals(
    http: httpx.Client, case: str
) -> None:
    path, body, expected = INVALID_BODIES[case]
    response = post(http, path, body)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert is_problem(problem)
    assert problem["error"] == "invalid_request"
    locs = [reason["loc"] for reason in problem["reasons"]]
    assert locs, problem
    if expected is not None:
        assert locs == expected
    for loc in locs:
        assert loc[0] == "body"
        assert walks(body, loc), f"{loc} is not a path through what was sent"
    # pydantic's names for the union branches it tried (`function-after[...]`).
    assert not any(mark in response.text for mark in ("function-after", "[_", "constrained-"))


def mcp(http: httpx.Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }
    accept = {"Accept": "application/json, text/event-stream"}
    answer = http.post("/mcp", json=message, headers=as_("alice") | accept)
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


@pytest.mark.parametrize("limit", [0, 101, 1001])
def test_a_limit_is_refused_with_one_reason_whichever_transport(
    http: httpx.Client, limit: int
) -> None:
    native = post(http, "/v1/recall", {"query": "launch", "limit": limit})
    assert native.status_code == 422
    assert native.json() == {"error": "invalid_request", "reasons": ["limit_within_1..100"]}
    tool = mcp(http, "recall", {"query": "launch", "limit": limit})
    assert tool["isError"] is True
    assert tool["structuredContent"] == native.json()


def test_mcp_argument_reasons_name_the_arguments(http: httpx.Client) -> None:
    tool = mcp(http, "recall", {"query": "launch", "observed": 5})
    assert tool["isError"] is True
    problem = tool["structuredContent"]
    assert is_problem(problem)
    assert {tuple(r["loc"]) for r in problem["reasons"]} == {("observed",)}
    assert "constrained-" not in json.dumps(problem)


BROKEN = {
    "malformed": b'{"query": ',
    # Deeper than the JSON parser goes, well within the body limit.
    "nested too deep": b'{"query":' + b"[" * 20_000 + b"]" * 20_000 + b"}",
    "not UTF-8": b'{"query": "\xff"}',
}


@pytest.mark.parametrize("how", BROKEN)
def test_a_body_that_cannot_be_parsed_is_refused_alike(http: httpx.Client, how: str) -> None:
    native = post(http, "/v1/recall", BROKEN[how])
    assert native.status_code == 422, native.text
    problem = native.json()
    assert problem["error"] == "invalid_request"
    assert [(r["loc"][0], r["type"]) for r in problem["reasons"]] == [("body", "json_invalid")]
    # The proxy answers it in Qdrant's shape, as Qdrant answers a body it cannot read.
    proxied = post(http, f"{POINTS}/scroll", BROKEN[how])
    assert proxied.status_code == 400, proxied.text
    body = proxied.json()
    assert is_qdrant_error(body)
    assert body["status"]["error"].startswith("Format error in JSON body")
    assert body["error"] == "invalid_request"


def too_large() -> bytes:
    return b'{"query": "' + b"x" * MAX_BODY + b'"}'


def chunked() -> Iterator[bytes]:
    yield b'{"query": "'
    for _ in range(MAX_BODY // 4096 + 1):
        yield b"x" * 4096
    yield b'"}'


def test_every_native_refusal_is_a_problem(http: httpx.Client) -> None:
    answers = {
        401: http.post("/v1/recall", json={"query": "x"}),
        403: http.get("/v1/audit", headers=as_("alice")),
        404: http.get("/v1/memories/00000000-0000-0000-0000-000000000000", headers=as_("bob")),
        405: http.put("/v1/recall", json={}, headers=as_("alice")),
        413: post(http, "/v1/recall", too_large()),
        422: post(http, "/v1/recall", {"query": "x", "limit": 0}),
    }
    for status, response in answers.items():
        assert response.status_code == status, response.text
        assert is_problem(response.json()), response.text
    chunks = http.post("/v1/recall", content=chunked(), headers=as_("alice") | JSON)
    assert chunks.status_code == 413
    assert chunks.json() == answers[413].json()
    assert answers[401].headers["www-authenticate"] == "Bearer"


def test_every_proxy_refusal_has_qdrant_s_shape(http: httpx.Client) -> None:
    answers = {
        400: post(http, f"{POINTS}/scroll", {"filter": {"must": [{"key": "", "match": {}}]}}),
        401: http.post(f"{POINTS}/scroll", json={}),
        404: post(http, "/collections/other/points/scroll", {}),
        405: http.post("/collections/whose_memories/snapshots", headers=as_("alice")),
        413: post(http, f"{POINTS}/scroll", too_large()),
    }
    for status, response in answers.items():
        assert response.status_code == status, response.text
        assert is_qdrant_error(response.json()), response.text
        assert "reasons" not in response.json() or isinstance(response.json()["reasons"], list)
    chunks = http.post(f"{POINTS}/scroll", content=chunked(), headers=as_("alice") | JSON)
    assert chunks.status_code == 413
    assert is_qdrant_error(chunks.json())


def test_a_parameter_s_reason_names_the_parameter(http: httpx.Client) -> None:
    when = http.get(
        "/v1/memories/00000000-0000-0000-0000-000000000000",
        params={"as_of": "yesterday"},
        headers=as_("alice"),
    )
    which = http.get("/v1/memories/not-a-uuid", headers=as_("alice"))
    for response, loc in ((when, ["query", "as_of"]), (which, ["path", "record_id"])):
        assert response.status_code == 422
        assert [r["loc"] for r in response.json()["reasons"]] == [loc]
