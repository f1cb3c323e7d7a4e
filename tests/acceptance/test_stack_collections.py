"""A RAG stack as it starts, unchanged but for the URL and a token: its own collection,
its own embedding size, its own ids, hybrid search and MMR, on both store backends.

LangChain's usual start is `QdrantVectorStore.from_texts(texts, embedding, url=...,
api_key=..., collection_name="kb")`: it creates `kb` with the embedding's size (1536,
OpenAI's) and writes the texts under ids it generates. Through whose, `kb` is a
collection of the caller's tenant (another tenant's `kb` is another collection), the
vectors are kept as sent, and every answer is over what the asker may see.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore, RetrievalMode, SparseEmbeddings, SparseVector
from qdrant_client import QdrantClient
from qdrant_client.http import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import Backend
from tests.factories import served

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

DIM = 1536


class Wide(Embeddings):
    """A deterministic 1536-dimension embedding (OpenAI's size): words hashed into it."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        v = [0.0] * DIM
        for word in text.lower().split():
            h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
            v[h % DIM] += 1.0 if h & 1 << 40 else -1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]


class Words(SparseEmbeddings):
    """A sparse embedding: each word a dimension (what LangChain's hybrid mode needs)."""

    def _one(self, text: str) -> SparseVector:
        counts: dict[int, float] = {}
        for word in text.lower().split():
            i = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % 100_000
            counts[i] = counts.get(i, 0.0) + 1.0
        indices = sorted(counts)
        return SparseVector(indices=indices, values=[counts[i] for i in indices])

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        return self._one(text)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, store_backend: Backend) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("stacks"), JWT_ENV | store_backend.env()) as url:
        yield url


def client(base: str, who: str, tenant: str = "acme") -> QdrantClient:
    return QdrantClient(url=base, api_key=token(who, tenant), timeout=20, check_compatibility=False)


TEXTS = [
    "the launch is on October 17",
    "the launch party is on the roof",
    "the launch budget is two million",
]
READERS = [["alice"], ["alice", "bob"], ["alice", "carol"]]


def claims(documents: list[Document]) -> list[str]:
    """Which of TEXTS each document says (its text is the attribution sentence)."""
    return [next(t for t in TEXTS + EXTRA if f"“{t}”" in d.page_content) for d in documents]


EXTRA = ["globex keeps its own notes", "acme's kb2 note", "a note to forget"]


def metadatas(source: str) -> list[dict[str, Any]]:
    return [{"audience": r, "source": f"{source}-{i}.md"} for i, r in enumerate(READERS)]


def test_from_texts_into_its_own_collection_at_its_own_size(base: str) -> None:
    """LangChain's usual start, as its docs write it: from_texts with url and api_key."""
    store = QdrantVectorStore.from_texts(
        TEXTS,
        Wide(),
        metadatas=metadatas("notes"),
        url=base,
        api_key=token("alice"),
        collection_name="kb",
        timeout=20,
    )
    alice = store.similarity_search("when is the launch", k=5)
    assert set(claims(alice)) == set(TEXTS)
    assert all(d.page_content.startswith("alice ") for d in alice)
    bob = QdrantVectorStore(
        client=client(base, "bob"), collection_name="kb", embedding=Wide()
    ).similarity_search("when is the launch", k=5)
    # Bob reads the one he may, worded as whose it is, under the id LangChain chose.
    assert claims(bob) == ["the launch party is on the roof"]
    assert bob[0].page_content.startswith("alice ")
    assert bob[0].metadata["_id"] in {d.metadata["_id"] for d in alice}
    info = client(base, "alice").get_collection("kb")
    # As LangChain sent it: the unnamed vector, by the name "".
    params = info.config.params.vectors
    assert isinstance(params, dict)
    assert params[""].size == DIM


def test_two_tenants_each_have_their_own_kb(base: str) -> None:
    globex = client(base, "mallory", "globex")
    assert not globex.collection_exists("kb2")
    QdrantVectorStore.from_texts(
        ["globex keeps its own notes"],
        Wide(),
        metadatas=[{"audience": ["mallory"], "source": "g.md"}],
        url=base,
        api_key=token("mallory", "globex"),
        collection_name="kb2",
        timeout=20,
    )
    assert globex.collection_exists("kb2")
    acme = client(base, "alice")
    assert not acme.collection_exists("kb2")
    assert "kb2" not in {c.name for c in acme.get_collections().collections}
    with pytest.raises(UnexpectedResponse) as missing:
        acme.count("kb2")
    assert missing.value.status_code == 404
    # acme makes its own kb2, and the two never meet.
    QdrantVectorStore.from_texts(
        ["acme's kb2 note"],
        Wide(),
        metadatas=[{"audience": ["alice"], "source": "a.md"}],
        url=base,
        api_key=token("alice"),
        collection_name="kb2",
        timeout=20,
    )
    [own] = acme.scroll("kb2", limit=10)[0]
    assert own.payload is not None
    assert "acme's kb2 note" in own.payload["page_content"]
    assert globex.count("kb2").count == 1


def test_integer_ids_come_back_as_sent(base: str) -> None:
    alice = client(base, "alice")
    alice.create_collection("ints", vectors_config=qm.VectorParams(size=4, distance="Dot"))
    alice.upsert(
        "ints",
        points=[
            qm.PointStruct(
                id=7,
                vector=[1.0, 0.0, 0.0, 0.0],
                payload={"content": "seven", "audience": ["alice"], "source": "s"},
            ),
            qm.PointStruct(
                id=8,
                vector=[0.0, 1.0, 0.0, 0.0],
                payload={"content": "eight", "audience": ["alice", "bob"], "source": "s"},
            ),
        ],
    )
    found = alice.query_points("ints", query=[1.0, 0.5, 0.0, 0.0], limit=5).points
    assert [p.id for p in found] == [7, 8]
    assert [p.id for p in alice.retrieve("ints", ids=[8, 7])] == [8, 7]
    bob = client(base, "bob")
    assert [p.id for p in bob.query_points("ints", query=[1.0, 0.5, 0, 0], limit=5).points] == [8]
    assert bob.retrieve("ints", ids=[7]) == []


def test_hybrid_and_mmr_as_langchain_sends_them(base: str) -> None:
    store = QdrantVectorStore.from_texts(
        TEXTS,
        Wide(),
        metadatas=metadatas("hybrid"),
        url=base,
        api_key=token("alice"),
        collection_name="hybrid",
        retrieval_mode=RetrievalMode.HYBRID,
        sparse_embedding=Words(),
        timeout=20,
    )
    alice = store.similarity_search("launch budget", k=3)
    assert claims(alice)[0] == "the launch budget is two million"
    bob = QdrantVectorStore(
        client=client(base, "bob"),
        collection_name="hybrid",
        embedding=Wide(),
        retrieval_mode=RetrievalMode.HYBRID,
        sparse_embedding=Words(),
    )
    seen = bob.similarity_search("launch budget", k=3)
    assert claims(seen) == ["the launch party is on the roof"]
    diverse = QdrantVectorStore(
        client=client(base, "bob"), collection_name="hybrid", embedding=Wide()
    ).max_marginal_relevance_search("launch budget", k=2, fetch_k=3)
    assert claims(diverse) == ["the launch party is on the roof"]


def test_delete_by_the_ids_langchain_chose(base: str) -> None:
    store = QdrantVectorStore.from_texts(
        ["a note to forget"],
        Wide(),
        metadatas=[{"audience": ["alice"], "source": "f.md"}],
        url=base,
        api_key=token("alice"),
        collection_name="forget",
        timeout=20,
    )
    [doc] = store.similarity_search("note to forget", k=1)
    assert store.delete([doc.metadata["_id"]])
    assert store.similarity_search("note to forget", k=1) == []
    alice = client(base, "alice")
    assert alice.delete_collection("forget")
    assert not alice.collection_exists("forget")


def test_who_may_drop_a_collection_is_the_policys(base: str) -> None:
    alice, bob = client(base, "alice"), client(base, "bob")
    alice.create_collection("owned", vectors_config=qm.VectorParams(size=4, distance="Cosine"))
    with pytest.raises(UnexpectedResponse) as refused:
        bob.delete_collection("owned")
    assert refused.value.status_code == 403
    assert b"not_collection_creator" in refused.value.content
    assert alice.collection_exists("owned")
    # Another tenant's drop of the same name answers as for a name it never had.
    assert client(base, "mallory", "globex").delete_collection("owned") is False
    assert client(base, "mallory", "globex").delete_collection("never-was") is False
    assert alice.collection_exists("owned")
    assert alice.delete_collection("owned") is True
    assert not alice.collection_exists("owned")
