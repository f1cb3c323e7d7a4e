"""The HTTP contract around the stories: identity, bad input, published records."""

from __future__ import annotations

import uuid

import httpx

from sidecar.messages import Item, RecallResponse
from tests.acceptance.story import recall, said_by, stored, write
from tests.conftest import as_, ops

# The published design contract's record object, exactly as it is written there.
PUBLISHED = {
    "content": "Alice believes Bob knows the launch is October 17",
    "observer_id": "alice",
    "observed_id": "bob",
    "source_id": "private-session-42",
    "modality": "reported_belief",
    "confidence": 0.78,
    "audience": ["alice"],
    "access_scope": "launch-core",
    "valid_at": "2026-10-01T09:00:00Z",
    "supersedes": None,
}


def test_published_record_object_is_accepted_as_is(http: httpx.Client) -> None:
    [record] = stored(http, "alice", PUBLISHED)
    assert uuid.UUID(record["id"])
    assert record["tenant"] == "acme"
    assert record["recorded_at"].endswith("Z")
    assert {k: record[k] for k in PUBLISHED if PUBLISHED[k] is not None} == {
        k: v for k, v in PUBLISHED.items() if v is not None
    }


def test_no_identity_is_401_with_a_reason(http: httpx.Client) -> None:
    for response in (
        http.post("/v1/recall", json={"query": "launch"}),
        http.get(f"/v1/memories/{uuid.uuid4()}"),
        http.post("/v1/memories", json=PUBLISHED),
    ):
        assert response.status_code == 401
        assert response.json() == {
            "error": "unauthenticated",
            "reasons": ["missing_token"],
            "reason": "missing_token",
        }
        assert response.headers["www-authenticate"] == "Bearer"


def test_forged_bearer_token_is_refused(http: httpx.Client) -> None:
    # Dev mode has no JWT key configured: a token is never taken on trust.
    response = http.post(
        "/v1/recall", json={"query": "x"}, headers={"Authorization": "Bearer e30.e30."}
    )
    assert response.status_code == 401


def test_schema_violations_are_422_with_machine_readable_reasons(http: httpx.Client) -> None:
    cases = {
        "unknown field": PUBLISHED | {"audiance": ["bob"]},
        "bad modality": PUBLISHED | {"modality": "gossip"},
        "confidence above 1": PUBLISHED | {"confidence": 1.5},
        "observer missing": {k: v for k, v in PUBLISHED.items() if k != "observer_id"},
        "attitude without observed": PUBLISHED
        | {"observed_id": None, "observed_attitude": "knows"},
    }
    for name, body in cases.items():
        response = write(http, "alice", body)
        assert response.status_code == 422, name
        problem = response.json()
        assert problem["error"] == "invalid_request", name
        assert problem["reasons"]
        assert all("type" in r and "loc" in r for r in problem["reasons"])


def test_body_tenant_other_than_the_writers_is_refused(http: httpx.Client) -> None:
    record_id = str(uuid.uuid4())
    response = write(http, "alice", PUBLISHED | {"id": record_id, "tenant": "globex"})
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["tenant_not_writers"]
    assert http.get(f"/v1/memories/{record_id}", headers=as_("alice")).status_code == 404


def test_wrong_vector_dimension_is_refused(http: httpx.Client) -> None:
    response = write(http, "alice", PUBLISHED | {"vector": [0.1, 0.2, 0.3]})
    assert response.status_code == 422
    assert response.json()["reasons"][0]["reasons"] == ["vector_dimension_must_be_384"]
    bad_query = recall(http, "alice", vector=[0.1, 0.2])
    assert bad_query.status_code == 422


def test_duplicate_and_existing_ids_are_refused(http: httpx.Client) -> None:
    record_id = str(uuid.uuid4())
    twice = write(http, "alice", [PUBLISHED | {"id": record_id}, PUBLISHED | {"id": record_id}])
    assert twice.status_code == 422
    assert "duplicate_id_in_batch" in twice.json()["reasons"][0]["reasons"]
    [first] = stored(http, "alice", PUBLISHED | {"id": record_id})
    again = write(http, "alice", PUBLISHED | {"id": record_id, "content": "overwritten"})
    assert again.status_code == 422
    assert again.json()["reasons"][0]["reasons"] == ["id_exists"]
    kept = http.get(f"/v1/memories/{first['id']}", headers=as_("alice")).json()
    assert kept["record"]["content"] == PUBLISHED["content"]


def test_a_chosen_id_names_the_record_in_the_writers_own_namespace(http: httpx.Client) -> None:
    """Nobody's write can meet a record someone else stored under an id they chose,
    or learn from the answer that one exists (docs/security.md)."""
    record_id = str(uuid.uuid4())
    [alices] = stored(http, "alice", PUBLISHED | {"id": record_id})
    bobs = write(http, "bob", said_by("bob", "chosen-ids") | {"id": record_id})
    assert bobs.status_code == 201, bobs.text
    [bobs_record] = bobs.json()["records"]
    assert len({record_id, alices["id"], bobs_record["id"]}) == 3
    # The same writer choosing it again meets its own record.
    assert write(http, "alice", PUBLISHED | {"id": record_id}).status_code == 422


def test_recall_request_needs_exactly_one_of_query_and_vector(http: httpx.Client) -> None:
    assert recall(http, "alice").status_code == 422
    assert recall(http, "alice", query="x", vector=[0.0] * 384).status_code == 422
    for limit in (0, 101, 1001):
        refused = recall(http, "alice", query="x", limit=limit)
        assert (refused.status_code, refused.json()["reasons"]) == (422, ["limit_within_1..100"])


def test_caller_supplied_vectors_are_searched(http: httpx.Client) -> None:
    direction = [0.0] * 384
    direction[7] = 1.0
    [record] = stored(http, "alice", said_by("alice", "vec-1") | {"vector": direction})
    found = recall(http, "alice", vector=direction, limit=1).json()
    assert [i["id"] for i in found["items"]] == [record["id"]]
    assert found["items"][0]["score"] > 0.99


def test_health_and_openapi(http: httpx.Client, sidecar: str) -> None:
    assert httpx.get(f"{ops(sidecar)}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{ops(sidecar)}/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"opa": True, "store": True}
    paths = http.get("/openapi.json").json()["paths"]
    assert {"/v1/memories", "/v1/recall", "/v1/memories/{record_id}"} <= set(paths)
    assert http.get("/docs").status_code == 200


def test_recall_answers_in_the_documented_schema_field_order_and_without_nulls(
    http: httpx.Client,
) -> None:
    # The route serialises its answer itself (once); the OpenAPI document still names
    # the model, and the body keeps the model's field order with absent fields left out.
    stored(http, "alice", said_by("alice", "order-1", valid_at="2026-10-01T09:00:00Z"))
    response = recall(http, "alice", query="launch", limit=5)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["items"]
    assert list(body) == [name for name in RecallResponse.model_fields if name in body]
    for item in body["items"]:
        assert list(item) == [name for name in Item.model_fields if name in item]
        assert None not in item.values()
    # The model's own JSON of the same answer, byte for byte.
    assert (
        response.content
        == RecallResponse.model_validate(body).model_dump_json(exclude_none=True).encode()
    )
    post = http.get("/openapi.json").json()["paths"]["/v1/recall"]["post"]
    schema = post["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/RecallResponse"}
