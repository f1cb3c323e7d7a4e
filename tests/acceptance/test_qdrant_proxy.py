"""The unmodified qdrant-client against the sidecar: Alice's and Bob's views differ.

Bob may read the team note only; Alice all three notes; Mallory (another
tenant) nothing, by any path.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client import models as qm
from qdrant_client.common.version_check import get_server_version, is_compatible
from qdrant_client.http.exceptions import UnexpectedResponse

from sidecar.auth.identity import Identity
from sidecar.writes.writer import new_record_id
from tests.acceptance.proxy_world import (
    COLLECTION,
    embed,
    record,
    served_world,
    token,
)
from tests.conftest import Backend

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, store_backend: Backend
) -> Iterator[tuple[str, dict[str, Any]]]:
    # On both backends: the proxy's scroll and count page by point id and filter
    # on the store, where the server and the embedded engine could differ.
    yield from served_world(tmp_path_factory.mktemp("proxy"), store_backend)


def client(base: str, who: str, tenant: str = "acme") -> QdrantClient:
    # The client's version check runs in a background thread that can outlive a
    # test (and warn into the next one); it is checked once, directly, below.
    return QdrantClient(url=base, api_key=token(who, tenant), timeout=10, check_compatibility=False)


def test_the_client_finds_the_sidecar_compatible(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    server = get_server_version(base, {"api-key": token("bob")}, None, 10)
    assert is_compatible(version("qdrant-client"), server)


def ids(points: Any) -> set[str]:
    return {str(p.id) for p in points}


def names(world: dict[str, Any], *keys: str) -> set[str]:
    return {world[k]["id"] for k in keys}


QUERY = embed("the launch")


def test_query_points(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    alice = client(base, "alice").query_points(COLLECTION, query=QUERY, limit=10, with_payload=True)
    bob = client(base, "bob").query_points(COLLECTION, query=QUERY, limit=10, with_payload=True)
    assert ids(alice.points) == names(world, "private", "team", "scoped")
    assert ids(bob.points) == names(world, "team")
    [bobs] = bob.points
    assert bobs.payload is not None
    assert bobs.payload["whose"]["attribution"].startswith("bob believes that the launch party")
    assert bobs.payload["whose"]["usable_as"] == "belief"
    # The text a RAG library reads is the attribution; the writer's wording has a name of its own.
    assert bobs.payload["content"] == bobs.payload["whose"]["attribution"]
    assert bobs.payload["as_written"] == world["team"]["content"]


def test_query_points_honours_limit_under_overfetch(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    # The nearest point to this query is Alice's private note; Bob still gets his one.
    bob = client(base, "bob").query_points(COLLECTION, query=embed("October 17"), limit=1)
    assert ids(bob.points) == names(world, "team")


def test_search_endpoint(served: tuple[str, dict[str, Any]]) -> None:
    # qdrant-client 1.20 dropped search(); other clients still POST /points/search.
    base, world = served
    for who, expected in (("alice", {"private", "team", "scoped"}), ("bob", {"team"})):
        response = httpx.post(
            f"{base}/collections/{COLLECTION}/points/search",
            json={"vector": QUERY, "limit": 10, "with_payload": True},
            headers={"api-key": token(who)},
        )
        assert response.status_code == 200
        assert {p["id"] for p in response.json()["result"]} == names(world, *expected)


def test_scroll_pages_through_what_each_may_see(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    seen: set[str] = set()
    offset = None
    alice = client(base, "alice")
    for _ in range(10):
        points, offset = alice.scroll(COLLECTION, limit=1, offset=offset)
        seen |= ids(points)
        if offset is None:
            break
    assert seen == names(world, "private", "team", "scoped")
    points, offset = client(base, "bob").scroll(COLLECTION, limit=10)
    assert ids(points) == names(world, "team")
    assert offset is None


def test_retrieve_and_get_by_id(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    every = [world[k]["id"] for k in ("private", "team", "scoped")]
    assert ids(client(base, "alice").retrieve(COLLECTION, ids=every)) == set(every)
    assert ids(client(base, "bob").retrieve(COLLECTION, ids=every)) == names(world, "team")
    bob = client(base, "bob")
    got = bob.http.points_api.get_point(COLLECTION, world["team"]["id"])
    assert got.result is not None
    assert str(got.result.id) == world["team"]["id"]
    with pytest.raises(UnexpectedResponse) as forbidden:
        bob.http.points_api.get_point(COLLECTION, world["private"]["id"])
    with pytest.raises(UnexpectedResponse) as missing:
        bob.http.points_api.get_point(COLLECTION, "00000000-0000-4000-8000-000000000000")
    assert forbidden.value.status_code == missing.value.status_code == 404


def test_count_counts_only_disclosable_points(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    assert client(base, "alice").count(COLLECTION).count == 3
    assert client(base, "bob").count(COLLECTION).count == 1
    assert client(base, "mallory", "globex").count(COLLECTION).count == 0


def test_caller_filters_narrow_but_never_widen(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    only_alices = qm.Filter(
        must=[qm.FieldCondition(key="observer_id", match=qm.MatchValue(value="alice"))]
    )
    assert ids(
        client(base, "alice").query_points(COLLECTION, query=QUERY, query_filter=only_alices).points
    ) == names(world, "private")
    assert (
        client(base, "bob").query_points(COLLECTION, query=QUERY, query_filter=only_alices).points
        == []
    )
    # A filter naming the other tenant, or an id, cannot reach past the tenant or the policy.
    other_tenant = qm.Filter(
        must=[qm.FieldCondition(key="tenant", match=qm.MatchValue(value="globex"))]
    )
    assert (
        client(base, "alice")
        .query_points(COLLECTION, query=QUERY, query_filter=other_tenant)
        .points
        == []
    )
    by_id = qm.Filter(must=[qm.HasIdCondition(has_id=[world["private"]["id"]])])
    assert ids(
        client(base, "alice").query_points(COLLECTION, query=QUERY, query_filter=by_id).points
    ) == names(world, "private")
    assert (
        client(base, "bob").query_points(COLLECTION, query=QUERY, query_filter=by_id).points == []
    )


def test_another_tenant_sees_nothing_by_any_path(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    mallory = client(base, "mallory", "globex")
    every = [world[k]["id"] for k in ("private", "team", "scoped")]
    assert mallory.query_points(COLLECTION, query=QUERY).points == []
    assert mallory.scroll(COLLECTION)[0] == []
    assert mallory.retrieve(COLLECTION, ids=every) == []
    assert mallory.count(COLLECTION).count == 0
    with pytest.raises(UnexpectedResponse) as missing:
        mallory.http.points_api.get_point(COLLECTION, world["team"]["id"])
    assert missing.value.status_code == 404


def test_collection_info_and_existence(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    alice = client(base, "alice")
    assert alice.collection_exists(COLLECTION)
    assert not alice.collection_exists("someone_elses")
    info = alice.get_collection(COLLECTION)
    assert info.config.params.vectors.size == 384  # type: ignore[union-attr]
    assert info.points_count is None  # a total would count what the asker may not see


def test_upsert_goes_through_the_write_policy(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    note = record("alice", "the launch venue is Hall B", ["alice"])
    point = qm.PointStruct(id=note.pop("id"), vector=note.pop("vector"), payload=note)
    client(base, "alice").upsert(COLLECTION, points=[point])
    # A chosen point id names the record in the writer's own namespace.
    stored = str(new_record_id(Identity("alice", "acme"), uuid.UUID(str(point.id))))
    assert ids(client(base, "alice").retrieve(COLLECTION, ids=[stored])) == {stored}

    forged = record("alice", "the launch is cancelled", ["alice", "bob"])
    forged_point = qm.PointStruct(id=forged.pop("id"), vector=forged.pop("vector"), payload=forged)
    with pytest.raises(UnexpectedResponse) as refused:
        client(base, "bob").upsert(COLLECTION, points=[forged_point])
    assert refused.value.status_code == 422
    assert b"writer_not_holder" in refused.value.content

    langchain_style = qm.PointStruct(
        id="7a3c5e1e-8f7b-4c1d-9a43-2f1e0b9c8d7a",
        vector=embed("x"),
        payload={"page_content": "x", "metadata": {}},
    )
    with pytest.raises(UnexpectedResponse) as invalid:
        client(base, "alice").upsert(COLLECTION, points=[langchain_style])
    assert invalid.value.status_code == 422
    assert client(base, "alice").retrieve(COLLECTION, ids=[langchain_style.id]) == []


def test_delete_goes_through_the_erasure_policy(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    note = record("alice", "the launch venue is Hall C", ["alice", "bob"])
    point = qm.PointStruct(id=note.pop("id"), vector=note.pop("vector"), payload=note)
    client(base, "alice").upsert(COLLECTION, points=[point])
    stored = str(new_record_id(Identity("alice", "acme"), uuid.UUID(str(point.id))))
    # Bob may see it, not erase it; Carol may not see it: as if it did not exist.
    with pytest.raises(UnexpectedResponse) as refused:
        client(base, "bob").delete(COLLECTION, points_selector=[stored])
    assert refused.value.status_code == 403
    assert b"not_holder_or_writer" in refused.value.content
    carol = client(base, "carol").delete(COLLECTION, points_selector=[stored])
    missing = client(base, "carol").delete(COLLECTION, points_selector=[str(uuid.uuid4())])
    assert carol.status == missing.status == qm.UpdateStatus.COMPLETED
    assert ids(client(base, "alice").retrieve(COLLECTION, ids=[stored])) == {stored}
    # The holder deletes it, by the id she chose.
    client(base, "alice").delete(COLLECTION, points_selector=[point.id])
    assert client(base, "alice").retrieve(COLLECTION, ids=[stored]) == []


def test_anything_else_is_refused_by_name(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    with pytest.raises(UnexpectedResponse) as refused:
        client(base, "alice").delete_collection(COLLECTION)
    # whose's own collection is never dropped through the dialect (a stack's may be).
    assert refused.value.status_code == 400
    assert b"not supported by whose" in refused.value.content
    with pytest.raises(UnexpectedResponse) as snapshot:
        client(base, "alice").create_snapshot(COLLECTION)
    assert snapshot.value.status_code == 405
    assert b"not supported by whose" in snapshot.value.content
    with pytest.raises(UnexpectedResponse) as vectors:
        client(base, "alice").delete_vectors(COLLECTION, vectors=[""], points=[str(uuid.uuid4())])
    assert vectors.value.status_code == 400
    assert b"not supported by whose" in vectors.value.content
    with pytest.raises(UnexpectedResponse) as unknown:
        client(base, "alice").query_points("other_collection", query=QUERY)
    assert unknown.value.status_code == 404


def test_no_token_no_answer(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    response = httpx.post(f"{base}/collections/{COLLECTION}/points/count", json={})
    assert response.status_code == 401


@pytest.mark.parametrize(
    "bad_filter",
    [
        {"must": [{"key": "", "match": {"value": "x"}}]},
        {"must": [{"key": "a[].b[", "match": {"value": "x"}}]},
        {"must": [{"is_empty": {"key": ""}}]},
        {"must": [{"has_vector": "x"}]},
        {"must": [{"key": "x", "geo_radius": {"center": {"lon": 1, "lat": 1}, "radius": 1}}]},
        {"must": [{"key": "x", "values_count": {"gt": -1}}]},
        {"must": [{"key": "x", "match": {"value": 99999999999999999999999}}]},
        {"must": [{"key": "x", "match": {"nonsense": 1}}]},
        "not a filter",
    ],
)
def test_filters_the_sidecar_cannot_run_are_a_400(
    served: tuple[str, dict[str, Any]], bad_filter: Any
) -> None:
    base, _ = served
    for path, body in (
        ("points/query", {"query": QUERY, "filter": bad_filter}),
        ("points/scroll", {"filter": bad_filter}),
        ("points/count", {"filter": bad_filter}),
    ):
        response = httpx.post(
            f"{base}/collections/{COLLECTION}/{path}",
            json=body,
            headers={"api-key": token("alice")},
        )
        assert response.status_code == 400, (path, response.text)
        assert "error" in response.json()["status"]


@pytest.mark.parametrize("offset", [5, "abc", -1])
def test_scroll_offsets_it_did_not_give_are_a_400(
    served: tuple[str, dict[str, Any]], offset: Any
) -> None:
    base, _ = served
    response = httpx.post(
        f"{base}/collections/{COLLECTION}/points/scroll",
        json={"offset": offset},
        headers={"api-key": token("alice")},
    )
    assert response.status_code == 400


def test_batch_upsert_of_mismatched_lengths_is_refused(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    a, b = record("alice", "a", ["alice"]), record("alice", "b", ["alice"])
    body = {
        "batch": {
            "ids": [a.pop("id"), b.pop("id")],
            "vectors": [a.pop("vector")],
            "payloads": [a, {k: v for k, v in b.items() if k != "vector"}],
        }
    }
    response = httpx.put(
        f"{base}/collections/{COLLECTION}/points", json=body, headers={"api-key": token("alice")}
    )
    assert response.status_code == 400
    assert client(base, "alice").retrieve(COLLECTION, ids=body["batch"]["ids"]) == []


def without(body: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k not in keys}


def test_hidden_records_cannot_be_probed_through_the_candidate_budget(
    served: tuple[str, dict[str, Any]],
) -> None:
    # The attack: fill the over-fetch budget with points the asker cannot see (decoys
    # nobody may read), rank the asker's own point last, and OR in a condition that
    # matches only hidden records. Were the budget spent on hidden points, an empty
    # answer would say "such hidden records exist". Pushdown keeps them out of the
    # ranking, so the answer is the asker's own point either way.
    base, world = served
    bob = client(base, "bob")
    q = embed("probe direction")
    decoys = [record("bob", f"decoy {i}", ["nobody"], vector=q) for i in range(70)]
    mine = record("bob", "my own note", ["bob"], vector=[-x for x in q])
    points = [
        qm.PointStruct(id=body["id"], vector=body["vector"], payload=without(body, "id", "vector"))
        for body in [*decoys, mine]
    ]
    bob.upsert(COLLECTION, points=points)
    # The ids the records were stored under (the writer's chosen ids, namespaced).
    for body in [*decoys, mine]:
        body["id"] = str(new_record_id(Identity("bob", "acme"), uuid.UUID(body["id"])))
    probe_ids = [d["id"] for d in decoys] + [mine["id"]]
    for hidden_condition in (
        qm.FieldCondition(key="observer_id", match=qm.MatchValue(value="alice")),  # exists
        qm.FieldCondition(key="observer_id", match=qm.MatchValue(value="nobody-at-all")),
    ):
        probe = qm.Filter(should=[qm.HasIdCondition(has_id=probe_ids), hidden_condition])
        found = bob.query_points(COLLECTION, query=q, query_filter=probe, limit=1).points
        assert ids(found) == {mine["id"]}
    assert world["private"]["id"] not in {str(p.id) for p in found}


def history_of(base: str, who: str, record: str) -> list[dict[str, Any]]:
    answer = httpx.get(
        f"{base}/v1/memories/{record}/history", headers={"Authorization": f"Bearer {token(who)}"}
    )
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def document(text: str, **metadata: Any) -> dict[str, Any]:
    return {"content": text, "audience": ["alice", "bob"], "source": "notes.md", **metadata}


def test_payload_updates_make_new_versions_through_the_write_policy(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    alice = client(base, "alice")
    point = str(uuid.uuid4())
    alice.upsert(
        COLLECTION,
        points=[
            qm.PointStruct(id=point, vector=embed("the room"), payload=document("the room is 4B"))
        ],
    )
    alice.set_payload(COLLECTION, payload={"page": 2}, points=[point])
    [current] = alice.retrieve(COLLECTION, ids=[point], with_payload=True)
    assert current.payload is not None
    assert current.payload["document"]["metadata"]["page"] == 2
    assert [v["status"] for v in history_of(base, "bob", str(current.id))] == [
        "superseded",
        "current",
    ]
    alice.overwrite_payload(COLLECTION, payload=document("the room is 5C"), points=[point])
    [moved] = alice.retrieve(COLLECTION, ids=[point], with_payload=True)
    assert moved.payload is not None
    assert moved.payload["as_written"] == "the room is 5C"
    assert len(history_of(base, "bob", str(moved.id))) == 3
    # Deleting what the convention needs is refused, naming the key; nothing changes.
    with pytest.raises(UnexpectedResponse) as refused:
        alice.delete_payload(COLLECTION, keys=["audience"], points=[point])
    assert refused.value.status_code == 422
    assert b"missing_metadata:audience" in refused.value.content
    # Bob may read it, not write Alice's view.
    with pytest.raises(UnexpectedResponse) as forged:
        client(base, "bob").set_payload(COLLECTION, payload={"page": 9}, points=[str(moved.id)])
    assert forged.value.status_code == 422
    assert b"writer_not_holder" in forged.value.content
    assert len(history_of(base, "bob", str(moved.id))) == 3


def test_a_filter_selected_update_is_refused_by_point_not_by_place(
    served: tuple[str, dict[str, Any]],
) -> None:
    """A filter gave the caller no list: each refusal names its point only. (An index
    in the matched points, which come in their random ids' order, differed between
    two stores holding the same records.)"""
    base, _ = served
    alice = client(base, "alice")
    points = [str(uuid.uuid4()) for _ in range(3)]
    alice.upsert(
        COLLECTION,
        points=[
            qm.PointStruct(id=p, vector=embed("the shelf"), payload=document(f"shelf {n}"))
            for n, p in enumerate(points)
        ],
    )
    alices = qm.Filter(
        must=[qm.FieldCondition(key="observer_id", match=qm.MatchValue(value="alice"))]
    )
    with pytest.raises(UnexpectedResponse) as forged:
        client(base, "bob").set_payload(COLLECTION, payload={"page": 9}, points=alices)
    assert forged.value.status_code == 422, forged.value.content
    refusals = json.loads(forged.value.content)["reasons"]
    assert len(refusals) >= 3
    assert all(set(r) == {"id", "reasons"} for r in refusals), refusals
    assert all(r["reasons"] == ["writer_not_holder"] for r in refusals)


def test_a_batch_runs_in_order_and_names_the_operation_refused(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    point = str(uuid.uuid4())
    written = {"id": point, "vector": embed("the desk"), "payload": document("the desk is 12")}
    operations = [
        {"upsert": {"points": [written]}},
        {"set_payload": {"payload": {"floor": 3}, "points": [point]}},
        {"delete_payload": {"keys": ["audience"], "points": [point]}},
        {"delete": {"points": [point]}},
    ]
    answer = httpx.post(
        f"{base}/collections/{COLLECTION}/points/batch",
        json={"operations": operations},
        headers={"api-key": token("alice")},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["status"]["error"].startswith("operation 2 (delete_payload)")
    [kept] = client(base, "alice").retrieve(COLLECTION, ids=[point], with_payload=True)
    assert kept.payload is not None
    assert kept.payload["document"]["metadata"]["floor"] == 3
    done = httpx.post(
        f"{base}/collections/{COLLECTION}/points/batch",
        json={"operations": [operations[1], operations[3]]},
        headers={"api-key": token("alice")},
    )
    assert done.status_code == 200, done.text
    assert [r["status"] for r in done.json()["result"]] == ["completed", "completed"]
    assert client(base, "alice").retrieve(COLLECTION, ids=[point]) == []
    unsupported = httpx.post(
        f"{base}/collections/{COLLECTION}/points/batch",
        json={"operations": [{"clear_payload": {"points": [point]}}]},
        headers={"api-key": token("alice")},
    )
    assert unsupported.status_code == 400
