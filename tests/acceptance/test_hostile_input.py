"""Bad input gets a clear 4xx with a machine-readable reason, never a 500, and
nothing is stored."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.acceptance.story import recall, said_by, write
from tests.conftest import as_


def record(**fields: Any) -> dict[str, Any]:
    return said_by("alice", "hostile", id=str(uuid.uuid4())) | fields


@pytest.mark.parametrize(
    "fields",
    [
        {"valid_at": "9999-12-31T23:00:00-05:00"},  # overflows when converted to UTC
        {"valid_at": "0001-01-01T00:30:00+01:00"},
        {"valid_at": "2300-01-01T00:00:00Z"},  # past what OPA can compare
        {"invalid_at": "2020-01-01T00:00:00Z"},  # ends before its defaulted start
        {"proposition": {"text": "p", "key": "k", "value": float("nan")}},
        {"proposition": {"text": "p", "key": "k", "value": float("inf")}},
        {"vector": [0.0] * 384},
        {"vector": [1.0] * 383 + [float("inf")]},
        # Finite, but overflow (or vanish) in Qdrant's 32-bit normalisation.
        {"vector": [1e308] * 384},
        {"vector": [1e-30] * 384},
        {"confidence": float("nan")},
        {"content": ""},
        {"audience": ["x" * 201]},
        {"evidence": "not a list"},
        {"source": {"kind": "gossip"}},
        {"id": "not-a-uuid"},
    ],
)
def test_bad_record_is_a_422_and_nothing_is_stored(
    http: httpx.Client, fields: dict[str, Any]
) -> None:
    body = record(**fields)
    # NaN and Infinity are not JSON, but Python's json module (and others) send them.
    response = http.post(
        "/v1/memories",
        content=json.dumps(body).encode(),
        headers=as_("alice") | {"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["error"] in {"invalid_request", "write_refused"}
    assert problem["reasons"]
    if "id" in body and isinstance(body["id"], str) and len(body["id"]) == 36:
        assert http.get(f"/v1/memories/{body['id']}", headers=as_("alice")).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"query": "x", "as_of": "9999-12-31T23:00:00-05:00"},
        {"vector": [0.0] * 384},
        {"vector": [1e20] * 384},
        {"query": "x", "min_confidence": 2},
        {"query": "x", "audience": "bob"},
        {"query": "x", "modality": "gossip"},
        {"query": "x", "unknown": 1},
    ],
)
def test_bad_recall_is_a_422(http: httpx.Client, body: dict[str, Any]) -> None:
    response = recall(http, "alice", **body)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request"


@pytest.mark.parametrize(
    "raw",
    [b"{", b"[]", b"null", b"[" * 10_000 + b"]" * 10_000, b'{"content": "\\ud800"}'],
)
def test_malformed_json_is_a_4xx(http: httpx.Client, raw: bytes) -> None:
    response = http.post(
        "/v1/memories", content=raw, headers=as_("alice") | {"content-type": "application/json"}
    )
    assert 400 <= response.status_code < 500, response.text


def test_get_with_malformed_id_or_as_of_is_a_422(http: httpx.Client) -> None:
    assert http.get("/v1/memories/not-a-uuid", headers=as_("alice")).status_code == 422
    bad_time = http.get(
        f"/v1/memories/{uuid.uuid4()}", params={"as_of": "yesterday"}, headers=as_("alice")
    )
    assert bad_time.status_code == 422


def test_unicode_and_control_characters_round_trip(http: httpx.Client) -> None:
    text = "Ünïcødé 🚀 \u202e rtl \t tab \x00 nul"
    response = write(http, "alice", record(content=text))
    assert response.status_code == 201, response.text
    stored = response.json()["records"][0]
    got = http.get(f"/v1/memories/{stored['id']}", headers=as_("alice")).json()
    assert got["record"]["content"] == text


def test_a_keyed_version_cannot_set_its_own_end(http: httpx.Client) -> None:
    response = write(http, "alice", record(invalid_at="2199-01-01T00:00:00Z"))
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["invalid_at_is_set_by_supersession"]
