"""Qdrant's gRPC API (issue 41): the unmodified qdrant-client with `prefer_grpc=True`, and
LangChain over such a client, against a sidecar serving gRPC beside REST.

Alice writes into her own collection; she and Bob read it over gRPC, each seeing what
the policy lets them; a forbidden id answers as a missing one; refusals are gRPC status
codes with the reason in the message; every answer is the one the REST dialect gives
the same person (one surface, two transports).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from qdrant_client.http import models as qm

from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import GRPC
from tests.factories import served

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

COLLECTION = "kb"
TEXTS = {
    1: ("the launch is on October 17", ["alice"]),
    2: ("the launch party is on the roof", ["alice", "bob"]),
    3: ("the launch budget is two million", ["alice", "carol"]),
}


def vector(i: int) -> list[float]:
    return [float((i * 7 + k) % 5) + 0.5 for k in range(8)]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("grpc"), JWT_ENV, dev=False, grpc=True) as url:
        yield url


def client(base: str, who: str | None, *, grpc_: bool = True) -> QdrantClient:
    """qdrant-client as a stack makes it: the sidecar's URL and ports, a token."""
    return QdrantClient(
        url=base,
        grpc_port=GRPC[base],
        prefer_grpc=grpc_,
        api_key=token(who) if who else None,
        check_compatibility=False,
    )


@pytest.fixture(scope="module")
def written(base: str) -> None:
    alice = client(base, "alice")
    assert alice.create_collection(
        COLLECTION, vectors_config=qm.VectorParams(size=8, distance=qm.Distance.COSINE)
    )
    points = [
        qm.PointStruct(
            id=i, vector=vector(i), payload={"content": t, "audience": r, "source": "notes.md"}
        )
        for i, (t, r) in TEXTS.items()
    ]
    result = alice.upsert(COLLECTION, points, wait=True)
    assert result.status == qm.UpdateStatus.COMPLETED
    # The stack's own metadata key, to group by (CreateFieldIndex over gRPC).
    alice.create_payload_index(COLLECTION, "source", qm.PayloadSchemaType.KEYWORD)


def ids(points: list[qm.ScoredPoint] | list[qm.Record]) -> list[Any]:
    return sorted(p.id for p in points)


@pytest.mark.usefixtures("written")
def test_each_person_reads_what_they_may_over_grpc(base: str) -> None:
    alice, bob = client(base, "alice"), client(base, "bob")
    assert alice.collection_exists(COLLECTION)
    assert [c.name for c in bob.get_collections().collections] == ["whose_memories", "kb"]
    assert alice.get_collection(COLLECTION).config.params.vectors.size == 8  # type: ignore[union-attr]

    assert ids(alice.query_points(COLLECTION, vector(2), limit=10).points) == [1, 2, 3]
    seen = bob.query_points(COLLECTION, vector(2), limit=10, with_payload=True).points
    assert ids(seen) == [2]
    # Worded as whose it is, as over REST.
    assert seen[0].payload is not None
    assert seen[0].payload["content"].startswith("alice says that")

    assert alice.count(COLLECTION).count == 3
    assert bob.count(COLLECTION).count == 1
    assert ids(bob.scroll(COLLECTION, limit=10)[0]) == [2]
    # A forbidden id answers exactly as a missing one.
    assert bob.retrieve(COLLECTION, [1, 3, 999]) == []
    assert ids(bob.retrieve(COLLECTION, [2])) == [2]
    grouped = alice.query_points_groups(COLLECTION, "source", query=vector(1), limit=3)
    assert [len(g.hits) for g in grouped.groups] == [3]


@pytest.mark.usefixtures("written")
def test_grpc_answers_as_rest_answers(base: str) -> None:
    for who in ("alice", "bob", "carol"):
        over_grpc, over_rest = client(base, who), client(base, who, grpc_=False)
        for q in (1, 2, 3):
            g = over_grpc.query_points(COLLECTION, vector(q), limit=5, with_payload=True)
            r = over_rest.query_points(COLLECTION, vector(q), limit=5, with_payload=True)
            assert [(p.id, p.payload) for p in g.points] == [(p.id, p.payload) for p in r.points]
            assert [p.score for p in g.points] == pytest.approx([p.score for p in r.points])
        assert over_grpc.count(COLLECTION) == over_rest.count(COLLECTION)
        assert over_grpc.scroll(COLLECTION)[0] == over_rest.scroll(COLLECTION)[0]


def refused(call: object) -> grpc.RpcError:
    assert callable(call)
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


@pytest.mark.usefixtures("written")
def test_refusals_are_grpc_statuses_with_the_reason(base: str) -> None:
    nobody = client(base, None)
    error = refused(lambda: nobody.count(COLLECTION))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "missing_token" in error.details()

    alice = client(base, "alice")
    # A document without readers: the write policy's reason, nothing stored.
    unlabeled = qm.PointStruct(id=7, vector=vector(7), payload={"content": "x", "source": "s"})
    error = refused(lambda: alice.upsert(COLLECTION, [unlabeled]))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "write_refused" in error.details()
    assert "missing_metadata:audience" in error.details()
    assert alice.count(COLLECTION).count == 3

    error = refused(lambda: alice.count("nobody-has-this"))
    assert error.code() == grpc.StatusCode.NOT_FOUND

    # Not served: named, never a silent success.
    error = refused(lambda: alice.search_matrix_pairs(COLLECTION))
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert "SearchMatrixPairs" in error.details()
    error = refused(lambda: alice.clear_payload(COLLECTION, [2]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not supported by whose" in error.details()


def test_delete_over_grpc_erases_for_everyone(base: str, written: None) -> None:
    alice, bob = client(base, "alice"), client(base, "bob")
    # Bob may not erase what he may not see: answered as for a missing id.
    bob.delete(COLLECTION, qm.PointIdsList(points=[1]))
    assert ids(alice.retrieve(COLLECTION, [1])) == [1]
    alice.delete(COLLECTION, qm.PointIdsList(points=[2]))
    assert bob.retrieve(COLLECTION, [2]) == []
    assert ids(alice.query_points(COLLECTION, vector(2), limit=10).points) == [1, 3]


def test_langchain_over_a_grpc_client(base: str, tmp_path: Path) -> None:
    name = f"lc-{uuid.uuid4().hex[:6]}"
    store = QdrantVectorStore.from_texts(
        ["the offsite is in Lisbon", "the offsite budget is 40k"],
        DeterministicFakeEmbedding(size=64),
        metadatas=[
            {"audience": ["alice", "bob"], "source": "offsite.md"},
            {"audience": ["alice"], "source": "budget.md"},
        ],
        url=base,
        grpc_port=GRPC[base],
        prefer_grpc=True,
        api_key=token("alice"),
        collection_name=name,
    )
    found = store.similarity_search("where is the offsite?", k=5)
    assert len(found) == 2
    assert all(d.page_content.startswith("alice says that") for d in found)

    as_bob = QdrantVectorStore.from_existing_collection(
        embedding=DeterministicFakeEmbedding(size=64),
        url=base,
        grpc_port=GRPC[base],
        prefer_grpc=True,
        api_key=token("bob"),
        collection_name=name,
    )
    seen = as_bob.similarity_search("where is the offsite?", k=5)
    assert [d.page_content.split(" — ")[0] for d in seen] == [
        "alice says that “the offsite is in Lisbon”"
    ]

    store.delete([d.metadata["_id"] for d in found])
    assert store.similarity_search("where is the offsite?", k=5) == []
