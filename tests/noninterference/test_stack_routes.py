"""Points the asker may not see change nothing a stack collection answers, by any route.

One sidecar, two stack collections of one tenant: `seen` holds 24 documents bob may
read; `mixed` the same 24 (same ids, vectors and payloads) plus 24 only alice may read,
drawn alike and placed among his in every ranking (dense and sparse), group, facet
value and order. Bob asks both collections the same questions through the Qdrant
REST API, as a client would: nearest, fused hybrid (RRF and DBSF), MMR, recommend by
id, groups, facets, counts, scrolls (by id and by a field, page after page), reads by
id naming a hidden point, the older search route; then writes that name a hidden
point's id (an upsert, a payload change, a delete). Every answer must be the same
from both, byte for byte but for the timing. With the pushdown off, so every leaf
meets the hidden points as candidates and only the gate keeps them out; on both
store backends.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from typing import Any

import grpc
import httpx
import pytest
from qdrant_client import QdrantClient
from qdrant_client.http import models as qm

from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import GRPC, Backend
from tests.factories import served

DIM = 8
SOURCES = [f"doc-{i}.md" for i in range(4)]
WORDS = ["launch", "budget", "roof", "party", "october", "review"]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, store_backend: Backend) -> Iterator[str]:
    env = JWT_ENV | store_backend.env() | {"WHOSE_PUSHDOWN": "false"}
    with served(tmp_path_factory.mktemp("stack-ni"), env, grpc=True) as url:
        yield url


def headers(who: str, tenant: str = "acme") -> dict[str, str]:
    return {"Authorization": f"Bearer {token(who, tenant)}"}


def point(rng: random.Random, pid: Any, readers: list[str]) -> dict[str, Any]:
    words = rng.sample(WORDS, 3)
    indices = sorted({WORDS.index(w) for w in words})
    return {
        "id": pid,
        "vector": {
            "": [rng.gauss(0, 1) for _ in range(DIM)],
            "words": {"indices": indices, "values": [1.0 + rng.random() for _ in indices]},
        },
        "payload": {
            "page_content": " ".join(words),
            "metadata": {
                "audience": readers,
                "source": rng.choice(SOURCES),
                "confidence": round(rng.random(), 3),
            },
        },
    }


@pytest.fixture(scope="module")
def worlds(base: str) -> dict[str, Any]:
    rng = random.Random(7)
    # Integer and UUID ids, as Qdrant allows.
    ids: list[Any] = [i + 1 for i in range(12)] + [
        str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(12)
    ]
    his = [point(rng, pid, ["alice", "bob"]) for pid in ids]
    hidden_ids: list[Any] = [100 + i for i in range(12)] + [
        str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(12)
    ]
    hidden = [point(rng, pid, ["alice"]) for pid in hidden_ids]
    config = {
        "vectors": {"": {"size": DIM, "distance": "Cosine"}},
        "sparse_vectors": {"words": {}},
    }
    with httpx.Client(base_url=base, headers=headers("alice"), timeout=60) as alice:
        for name, points in (("seen", his), ("mixed", his + hidden)):
            alice.put(f"/collections/{name}", json=config).raise_for_status()
            for start in range(0, len(points), 16):
                batch = {"points": points[start : start + 16]}
                alice.put(f"/collections/{name}/points?wait=true", json=batch).raise_for_status()
    return {"his": ids, "hidden": hidden_ids, "query": [rng.gauss(0, 1) for _ in range(DIM)]}


# When each copy was written: the two collections were filled one after the other.
WRITTEN = ("recorded_at", "valid_at")


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in WRITTEN}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def ask(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    with httpx.Client(base_url=base, headers=headers("bob"), timeout=60) as bob:
        response = bob.request(method, path, json=body)
    answer = response.json()
    if isinstance(answer, dict):
        answer.pop("time", None)
    return response.status_code, _untimed(answer)


def both(base: str, method: str, route: str, body: Any = None) -> tuple[int, Any]:
    seen = ask(base, method, f"/collections/seen{route}", body)
    mixed = ask(base, method, f"/collections/mixed{route}", body)
    assert seen == mixed, (route, body)
    return seen


def reads(w: dict[str, Any]) -> list[tuple[str, str, Any]]:
    q = w["query"]
    sparse = {"indices": [0, 1, 4], "values": [1.0, 0.7, 0.4]}
    hybrid = [
        {"query": q, "limit": 8},
        {"query": sparse, "using": "words", "limit": 8},
    ]
    shown = {"with_payload": True, "with_vector": True}
    return [
        ("POST", "/points/query", {"query": q, "limit": 6, **shown}),
        ("POST", "/points/query", {"query": sparse, "using": "words", "limit": 6, **shown}),
        ("POST", "/points/query", {"prefetch": hybrid, "query": {"fusion": "rrf"}, "limit": 6}),
        ("POST", "/points/query", {"prefetch": hybrid, "query": {"fusion": "dbsf"}, "limit": 6}),
        (
            "POST",
            "/points/query",
            {
                "query": {"nearest": q, "mmr": {"diversity": 0.6, "candidates_limit": 12}},
                "limit": 4,
            },
        ),
        (
            "POST",
            "/points/query",
            {"query": {"recommend": {"positive": [w["his"][0]]}}, "limit": 5},
        ),
        # A hidden point used as an example is missing, as one that does not exist.
        ("POST", "/points/query", {"query": w["hidden"][0], "limit": 5}),
        ("POST", "/points/query", {"query": q, "limit": 3, "offset": 3}),
        (
            "POST",
            "/points/query/groups",
            {"query": q, "group_by": "source_id", "group_size": 3, "limit": 3, **shown},
        ),
        ("POST", "/points/query/batch", {"searches": [{"query": q, "limit": 3}, hybrid[1]]}),
        ("POST", "/facet", {"key": "source_id"}),
        ("POST", "/points/count", {}),
        ("POST", "/points/scroll", {"limit": 5, **shown}),
        ("POST", "/points/scroll", {"limit": 5, "order_by": {"key": "confidence"}}),
        (
            "POST",
            "/points/scroll",
            {"limit": 5, "order_by": {"key": "confidence", "direction": "desc"}},
        ),
        ("POST", "/points", {"ids": [w["his"][1], w["hidden"][1], w["his"][13], w["hidden"][13]]}),
        ("GET", f"/points/{w['hidden'][2]}", None),
        ("POST", "/points/search", {"vector": q, "limit": 5, "with_payload": True}),
        (
            "POST",
            "/points/scroll",
            {"limit": 5, "filter": {"must": [{"has_id": [w["his"][3], w["hidden"][3]]}]}},
        ),
    ]


def test_hidden_points_change_no_read(base: str, worlds: dict[str, Any]) -> None:
    answers = [both(base, method, route, body) for method, route, body in reads(worlds)]
    # The questions were answered, not refused: there was something to hide among.
    assert all(status == 200 for status, _ in answers[:6])
    assert answers[0][1]["result"]["points"]


def test_scrolling_on_pages_the_same(base: str, worlds: dict[str, Any]) -> None:
    offset: Any = None
    pages = 0
    while True:
        body = {"limit": 4} | ({"offset": offset} if offset is not None else {})
        _, answer = both(base, "POST", "/points/scroll", body)
        pages += 1
        offset = answer["result"]["next_page_offset"]
        if offset is None or pages > 10:
            break
    assert pages == 6  # 24 points, 4 a page


def test_hidden_points_change_no_write_answer(base: str, worlds: dict[str, Any]) -> None:
    """Bob writes, changes and deletes under ids alice used for hidden points: the
    answers are those of ids nobody used, and alice's documents are untouched."""
    hidden = worlds["hidden"][5]
    doc = {
        "id": hidden,
        "vector": {"": [0.5] * DIM},
        "payload": {"page_content": "bob's own", "metadata": {"audience": ["bob"], "source": "b"}},
    }
    both(base, "PUT", "/points?wait=true", {"points": [doc]})
    both(
        base,
        "POST",
        "/points/payload?wait=true",
        {"payload": {"x": 1}, "points": [worlds["hidden"][6]]},
    )
    both(base, "POST", "/points/delete?wait=true", {"points": [worlds["hidden"][7]]})
    both(
        base,
        "POST",
        "/points/delete?wait=true",
        {"filter": {"must": [{"has_id": [worlds["hidden"][8]]}]}},
    )
    with httpx.Client(base_url=base, headers=headers("alice"), timeout=60) as alice:
        kept = alice.post(
            "/collections/mixed/points", json={"ids": [worlds["hidden"][i] for i in (5, 6, 7, 8)]}
        ).json()["result"]
    assert len([p for p in kept if "bob's own" not in str(p["payload"])]) == 4


def test_another_tenants_names_change_nothing(base: str, worlds: dict[str, Any]) -> None:
    """Create, exists, info and delete on a name acme uses answer globex as on a name
    nobody uses."""
    config = {"vectors": {"size": 4, "distance": "Dot"}}

    def as_globex(method: str, name: str, suffix: str, body: Any = None) -> tuple[int, str]:
        with httpx.Client(base_url=base, headers=headers("mallory", "globex"), timeout=60) as c:
            response = c.request(method, f"/collections/{name}{suffix}", json=body)
        answer = response.json()
        answer.pop("time", None)
        # The name asked about is in a 404's words; nothing else may differ.
        return response.status_code, str(answer).replace(f"`{name}`", "`NAME`")

    for used, unused in (("mixed", "fresh-1"), ("seen", "fresh-2")):
        for method, suffix, body in (
            ("GET", "/exists", None),
            ("GET", "", None),
            ("POST", "/points/count", {}),
            ("DELETE", "", None),
            ("PUT", "", config),
            ("GET", "/exists", None),
        ):
            assert as_globex(method, used, suffix, body) == as_globex(
                method, unused, suffix, body
            ), (method, suffix)
    with httpx.Client(base_url=base, headers=headers("mallory", "globex"), timeout=60) as c:
        names = c.get("/collections").json()["result"]["collections"]
    assert {c["name"] for c in names} == {"whose_memories", "mixed", "seen", "fresh-1", "fresh-2"}


# --- the same questions over gRPC (sidecar/grpc_api/): qdrant-client with prefer_grpc=True.


def grpc_client(base: str, who: str) -> QdrantClient:
    return QdrantClient(
        url=base,
        grpc_port=GRPC[base],
        prefer_grpc=True,
        api_key=token(who),
        check_compatibility=False,
    )


def grpc_ask(client: QdrantClient, method: str, collection: str, arguments: Any) -> Any:
    """An answer as data (the REST model qdrant-client returns), or the refusal's status
    and message; without the timings."""
    try:
        answer = getattr(client, method)(collection, **arguments)
    except grpc.RpcError as error:
        return ("refused", error.code(), error.details())
    return _untimed(_drop_time(_data(answer)))


def _data(value: Any) -> Any:
    if isinstance(value, list | tuple):  # a scroll's answer: (points, next offset)
        return [_data(v) for v in value]
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _drop_time(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_time(v) for k, v in value.items() if k != "time"}
    if isinstance(value, list):
        return [_drop_time(v) for v in value]
    return value


def grpc_reads(w: dict[str, Any]) -> list[tuple[str, Any]]:
    q = w["query"]
    sparse = qm.SparseVector(indices=[0, 1, 4], values=[1.0, 0.7, 0.4])
    hybrid = [qm.Prefetch(query=q, limit=8), qm.Prefetch(query=sparse, using="words", limit=8)]
    shown: dict[str, Any] = {"with_payload": True, "with_vectors": True}
    mmr = qm.NearestQuery(nearest=q, mmr=qm.Mmr(diversity=0.6, candidates_limit=12))
    has_id = qm.Filter(must=[qm.HasIdCondition(has_id=[w["his"][3], w["hidden"][3]])])
    return [
        ("query_points", {"query": q, "limit": 6, **shown}),
        ("query_points", {"query": sparse, "using": "words", "limit": 6, **shown}),
        ("query_points", {"prefetch": hybrid, "query": qm.FusionQuery(fusion=qm.Fusion.RRF)}),
        ("query_points", {"prefetch": hybrid, "query": qm.FusionQuery(fusion=qm.Fusion.DBSF)}),
        ("query_points", {"query": mmr, "limit": 4}),
        (
            "query_points",
            {"query": qm.RecommendQuery(recommend=qm.RecommendInput(positive=[w["his"][0]]))},
        ),
        # A hidden point used as an example is missing, as one that does not exist.
        ("query_points", {"query": w["hidden"][0], "limit": 5}),
        ("query_points", {"query": q, "limit": 3, "offset": 3}),
        (
            "query_points_groups",
            {"query": q, "group_by": "source_id", "group_size": 3, "limit": 3, **shown},
        ),
        (
            "query_batch_points",
            {
                "requests": [
                    qm.QueryRequest(query=q, limit=3),
                    qm.QueryRequest(query=sparse, using="words"),
                ]
            },
        ),
        ("facet", {"key": "source_id"}),
        ("count", {}),
        ("scroll", {"limit": 5, **shown}),
        ("scroll", {"limit": 5, "order_by": "confidence"}),
        ("scroll", {"limit": 5, "order_by": qm.OrderBy(key="confidence", direction="desc")}),
        ("scroll", {"limit": 5, "scroll_filter": has_id}),
        ("retrieve", {"ids": [w["his"][1], w["hidden"][1], w["his"][13], w["hidden"][13]]}),
    ]


INSECURE = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


@INSECURE
def test_hidden_points_change_no_grpc_read(base: str, worlds: dict[str, Any]) -> None:
    bob = grpc_client(base, "bob")
    answers = []
    for method, arguments in grpc_reads(worlds):
        seen = grpc_ask(bob, method, "seen", arguments)
        mixed = grpc_ask(bob, method, "mixed", arguments)
        assert seen == mixed, (method, arguments)
        answers.append(seen)
    # The questions were answered, not refused: there was something to hide among.
    assert all(not (isinstance(a, tuple) and a[0] == "refused") for a in answers[:6])
    assert answers[0]["points"]
    # And as REST answers them: one surface, two transports.
    status, over_rest = both(base, "POST", "/points/count", {})
    assert status == 200
    assert over_rest["result"]["count"] == answers[11]["count"]


@INSECURE
def test_hidden_points_change_no_grpc_write_answer(base: str, worlds: dict[str, Any]) -> None:
    bob = grpc_client(base, "bob")
    hidden = worlds["hidden"]
    doc = qm.PointStruct(
        id=hidden[9],
        vector={"": [0.5] * DIM},
        payload={"page_content": "bob's own", "metadata": {"audience": ["bob"], "source": "b"}},
    )
    by_filter = qm.FilterSelector(filter=qm.Filter(must=[qm.HasIdCondition(has_id=[hidden[12]])]))
    writes: list[tuple[str, dict[str, Any]]] = [
        ("upsert", {"points": [doc]}),
        ("set_payload", {"payload": {"x": 1}, "points": [hidden[10]]}),
        ("delete", {"points_selector": qm.PointIdsList(points=[hidden[11]])}),
        ("delete", {"points_selector": by_filter}),
    ]
    for method, arguments in writes:
        seen = grpc_ask(bob, method, "seen", arguments)
        mixed = grpc_ask(bob, method, "mixed", arguments)
        assert seen == mixed, method
    alice = grpc_client(base, "alice")
    kept = alice.retrieve("mixed", [hidden[i] for i in (9, 10, 11, 12)], with_payload=True)
    assert len([p for p in kept if "bob's own" not in str(p.payload)]) == 4
