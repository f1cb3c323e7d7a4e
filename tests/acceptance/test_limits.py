"""Limits and hostile input, on every write and read path: each gets a clear 4xx
with a machine-readable reason, never a 500, and the store is left unchanged.

"Unchanged" is checked by reading back: the record the request tried to store is
absent, and the number of points Alice may count is what it was before.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from sidecar.embed.hashing import HashingEmbedder
from tests.acceptance.story import said_by
from tests.conftest import as_, start_sidecar, stop

MAX_BODY = 256 * 1024
COLLECTION = "whose_memories"
POINTS = f"/collections/{COLLECTION}/points"
VECTOR = HashingEmbedder(384).embed("the launch")
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """A sidecar with a small body limit, so the limit is cheap to reach."""
    base, process = start_sidecar(
        tmp_path_factory.mktemp("limits"), env={"WHOSE_MAX_BODY_BYTES": str(MAX_BODY)}
    )
    with httpx.Client(base_url=base, timeout=30) as client:
        # Something to count, of Alice's and of another tenant's.
        for tenant in ("acme", "globex"):
            body = record(audience=["alice"])
            response = client.post("/v1/memories", json=body, headers=as_("alice", tenant))
            assert response.status_code == 201, response.text
        yield client
    stop(process)


def record(**fields: Any) -> dict[str, Any]:
    return said_by("alice", "limits", id=str(uuid.uuid4())) | fields


def visible(http: httpx.Client) -> int:
    response = http.post(f"{POINTS}/count", json={}, headers=as_("alice"))
    assert response.status_code == 200, response.text
    return int(response.json()["result"]["count"])


def reason_of(response: httpx.Response) -> str:
    """The machine-readable part of a refusal, in either error shape."""
    body = response.json()
    if "status" in body:  # Qdrant's shape: its message, and whose's code and reasons
        return f"{body['status']['error']} {body.get('error')} {json.dumps(body.get('reasons'))}"
    return f"{body['error']} {json.dumps(body.get('reasons', []))}"  # the native problem


def send(http: httpx.Client, method: str, path: str, body: Any) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http.request(method, path, content=raw, headers=as_("alice") | JSON)


def assert_refused_and_unchanged(
    http: httpx.Client, before: int, response: httpx.Response, reason: str, ids: list[str]
) -> None:
    assert 400 <= response.status_code < 500, response.text
    assert reason in reason_of(response), response.text
    assert visible(http) == before
    for record_id in ids:
        assert http.get(f"/v1/memories/{record_id}", headers=as_("alice")).status_code == 404


def upsert(*records: dict[str, Any], vector: list[float] = VECTOR) -> dict[str, Any]:
    return {"points": [{"id": r["id"], "vector": vector, "payload": r} for r in records]}


# (method, path, body, the reason the answer must give)
big = record(content="x" * 8000)
HOSTILE_WRITES: dict[str, tuple[str, str, Any, str]] = {
    "body over the limit": (
        "POST",
        "/v1/memories",
        [record(content="x" * 8000) for _ in range(40)],
        "body_too_large",
    ),
    "proxy body over the limit": (
        "PUT",
        POINTS,
        upsert(*[record(content="x" * 8000) for _ in range(40)]),
        "body_too_large",
    ),
    "vector of the wrong dimension": (
        "POST",
        "/v1/memories",
        record(vector=[0.5] * 383),
        "vector_dimension_must_be_384",
    ),
    "proxy vector of the wrong dimension": (
        "PUT",
        POINTS,
        upsert(record(), vector=[0.5] * 3),
        "vector_dimension_must_be_384",
    ),
    "vector longer than any dimension": (
        "POST",
        "/v1/memories",
        record(vector=[0.5] * 4097),
        "too_long",
    ),
    "content too long": ("POST", "/v1/memories", record(content="x" * 8001), "string_too_long"),
    "audience too long": (
        "POST",
        "/v1/memories",
        record(audience=[f"p{i}" for i in range(1001)]),
        "too_long",
    ),
    "evidence too long": (
        "POST",
        "/v1/memories",
        record(evidence=[{"kind": "document", "ref": "r"}] * 101),
        "too_long",
    ),
    "name too long": ("POST", "/v1/memories", record(source_id="s" * 201), "string_too_long"),
    "too many claims": (
        "POST",
        "/v1/observations",
        {"speaker": "alice", "source_id": "s", "claims": [{"proposition": {"text": "p"}}] * 101},
        "too_long",
    ),
    "empty batch": ("POST", "/v1/memories", [], "1..1000 records"),
    "deeply nested JSON": (
        "POST",
        "/v1/memories",
        b'{"content":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        # As malformed JSON answers (tests/acceptance/test_hostile_input.py).
        "json_invalid",
    ),
    "deeply nested proxy JSON": (
        "PUT",
        POINTS,
        b'{"points":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "Format error in JSON body",
    ),
    "control characters in a name": (
        "POST",
        "/v1/memories",
        record(audience=["ali\x00ce"], observer_id="alice\n"),
        "write_refused",
    ),
    "NaN in a proxy vector": (
        "PUT",
        POINTS,
        b'{"points":[{"id":"%s","vector":[NaN],"payload":{}}]}' % str(uuid.uuid4()).encode(),
        "finite numbers",
    ),
    "duplicate ids in a batch": ("POST", "/v1/memories", [big, big], "duplicate_id_in_batch"),
    "duplicate ids in a proxy batch": ("PUT", POINTS, upsert(big, big), "duplicate_id_in_batch"),
    "a tenant that is not the writer's": (
        "POST",
        "/v1/memories",
        record(tenant="globex"),
        "tenant_not_writers",
    ),
    "superseding another tenant's record": (
        "POST",
        "/v1/memories",
        {**record(), "proposition": {"text": "p"}, "supersedes": "{globex}"},
        "cannot_supersede",
    ),
    "deriving from another tenant's record": (
        "POST",
        "/v1/memories",
        record(provenance={"derived_from": ["{globex}"]}),
        "premise_unavailable",
    ),
}


def globex_id(http: httpx.Client) -> str:
    scroll = http.post(f"{POINTS}/scroll", json={}, headers=as_("alice", "globex")).json()
    return str(scroll["result"]["points"][0]["id"])


@pytest.mark.parametrize("case", sorted(HOSTILE_WRITES))
def test_hostile_write_is_refused_and_stores_nothing(http: httpx.Client, case: str) -> None:
    method, path, body, reason = HOSTILE_WRITES[case]
    if not isinstance(body, bytes):
        body = json.loads(json.dumps(body).replace("{globex}", globex_id(http)))
    ids: list[str] = []
    if isinstance(body, list):
        ids = [r["id"] for r in body]
    elif isinstance(body, dict):
        ids = [p["id"] for p in body.get("points", [body]) if "id" in p]
    before = visible(http)
    assert_refused_and_unchanged(http, before, send(http, method, path, body), reason, ids)


def test_a_body_without_length_is_cut_at_the_limit(http: httpx.Client) -> None:
    """Chunked transfer declares no length: the body is counted as it arrives."""
    first = record()
    chunk = json.dumps(first).encode()[:-1] + b', "content": "' + b"x" * 4096

    def body() -> Iterator[bytes]:
        yield chunk
        for _ in range(MAX_BODY // 4096 + 1):
            yield b"x" * 4096
        yield b'"}'

    before = visible(http)
    response = http.post("/v1/memories", content=body(), headers=as_("alice") | JSON)
    assert response.status_code == 413
    assert_refused_and_unchanged(http, before, response, "body_too_large", [first["id"]])


@pytest.mark.parametrize(
    ("path", "body", "reason"),
    [
        # One reason for a limit out of bounds, however far out.
        ("/v1/recall", {"query": "x", "limit": 101}, "limit_within_1..100"),
        ("/v1/recall", {"query": "x", "limit": 1001}, "limit_within_1..100"),
        ("/v1/recall", {"query": "x", "limit": 0}, "limit_within_1..100"),
        ("/v1/recall", {"vector": [0.5] * 383}, "vector_dimension_must_be_384"),
        ("/v1/recall", {"query": "x", "audience": [f"p{i}" for i in range(101)]}, "too_long"),
        ("/v1/recall", {"query": "x" * 4001}, "string_too_long"),
        (f"{POINTS}/query", {"query": VECTOR, "limit": 101}, "limit + offset"),
        (f"{POINTS}/query", {"query": VECTOR, "limit": 50, "offset": 60}, "limit + offset"),
        (f"{POINTS}/query", {"query": [0.5] * 3}, "Vector dimension error"),
        (f"{POINTS}/search", {"vector": VECTOR, "limit": 10**12}, "limit + offset"),
        (f"{POINTS}/scroll", {"limit": 0}, "limit must be"),
        (f"{POINTS}/query", {"query": VECTOR, "limit": 0}, "limit must be 1 or larger"),
        (f"{POINTS}/query", b'{"query": [NaN' + b", 1" * 383 + b"]}", "must be finite"),
        (
            f"{POINTS}/search",
            b'{"limit": 3, "vector": [Infinity' + b", 1" * 383 + b"]}",
            "must be finite",
        ),
        (f"{POINTS}/query", {"query": [1e20] * 384}, "non-zero and finite"),
        (f"{POINTS}/search", {"vector": VECTOR, "limit": 3, "shard_key": "eu"}, "shard_key"),
        (f"{POINTS}/search", {"vector": VECTOR, "limit": 3, "score_threshold": "NaN"}, "finite"),
        (
            f"{POINTS}/search",
            b'{"limit": 3, "vector": [1' + b", 1" * 383 + b'], "score_threshold": NaN}',
            "finite",
        ),
        (
            f"{POINTS}/count",
            b'{"filter": {"must": [{"key": "confidence", "range": {"lt": NaN}}]}}',
            "finite",
        ),
        (
            f"{POINTS}/query",
            b'{"query": [1'
            + b", 1" * 383
            + b'], "filter": {"must": [{"key": "confidence", "range": {"gte": NaN}}]}}',
            "finite",
        ),
        (f"{POINTS}", {"ids": [str(uuid.uuid4()) for _ in range(1001)]}, "at most 1000 ids"),
        (f"{POINTS}/scroll", {"filter": {"must": [{"key": "x\x00", "match": {}}]}}, "filter"),
    ],
)
def test_read_over_a_limit_is_a_4xx_with_a_reason(
    http: httpx.Client, path: str, body: dict[str, Any] | bytes, reason: str
) -> None:
    response = send(http, "POST", path, body)
    assert 400 <= response.status_code < 500, response.text
    assert reason in reason_of(response), response.text


@pytest.mark.parametrize(
    "text", ["\x00\x01\x1f", "\u202e\u200b", "\U0001f680" * 100, "\ud7ff\ue000\uffff"]
)
def test_unicode_and_control_characters_in_reads(http: httpx.Client, text: str) -> None:
    recall = http.post("/v1/recall", json={"query": text}, headers=as_("alice"))
    assert recall.status_code == 200, recall.text
    key = http.get(f"/v1/propositions/{quote(text)}", headers=as_("alice"))
    assert key.status_code == 200, key.text
    flt = {"must": [{"key": "observer_id", "match": {"value": text}}]}
    scroll = http.post(f"{POINTS}/scroll", json={"filter": flt}, headers=as_("alice"))
    assert scroll.status_code == 200, scroll.text
    assert scroll.json()["result"]["points"] == []


def test_another_tenants_ids_look_missing(http: httpx.Client) -> None:
    other = globex_id(http)
    missing = str(uuid.uuid4())
    for template in ("/v1/memories/{}", "/v1/memories/{}/history", f"{POINTS}/{{}}"):
        theirs = http.get(template.format(other), headers=as_("alice"))
        nobody = http.get(template.format(missing), headers=as_("alice"))
        assert theirs.status_code == nobody.status_code == 404
        assert theirs.text.replace(other, "") == nobody.text.replace(missing, "")
    retrieved = http.post(POINTS, json={"ids": [other]}, headers=as_("alice"))
    assert retrieved.json()["result"] == []
    by_filter = {"must": [{"has_id": [other]}]}
    scroll = http.post(f"{POINTS}/scroll", json={"filter": by_filter}, headers=as_("alice"))
    assert scroll.json()["result"]["points"] == []


def test_an_undeclared_method_is_a_405_naming_what_is_served(http: httpx.Client) -> None:
    served = http.delete(f"{POINTS}/query", headers=as_("alice"))
    assert (served.status_code, served.headers["allow"]) == (405, "POST")
    # Only GET /collections/{c}/points/{point} fits this one (a point named "anything").
    point = http.post(f"{POINTS}/anything", json={}, headers=as_("alice"))
    assert (point.status_code, point.headers["allow"]) == (405, "GET")
    both = http.request("OPTIONS", POINTS, headers=as_("alice"))
    assert (both.status_code, both.headers["allow"]) == (405, "POST, PUT")
    nothing = http.post(f"/collections/{COLLECTION}/aliases", json={}, headers=as_("alice"))
    assert (nothing.status_code, nothing.headers["allow"]) == (405, "")
    assert "not supported by whose" in reason_of(nothing)
