"""Real RAG clients as each starts, unmodified but for the URL and a token, each into its
own collection at its own embedding size, on both store backends (issue 37 item 7):
LlamaIndex (`VectorStoreIndex.from_documents`, hybrid with its sparse vectors), Haystack
(`QdrantDocumentStore.write_documents`, the embedding and hybrid retrievers) and
LangChain's retriever (`QdrantVectorStore.from_documents(..., prefer_grpc=False)`,
`as_retriever` with MMR). Each makes a payload index on a metadata key of its own and
filters on it the way the library writes its filters; Bob sees only what he may read,
worded as whose it is; deleting as the library deletes works.

No model is downloaded: the dense embeddings are words hashed into the library's size,
the sparse ones each word a dimension.
"""

from __future__ import annotations

import os
import threading

# Before Haystack is imported: it reads this once, and tests send nothing off the machine.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

import hashlib
import math
from collections.abc import Iterator

import pytest
from haystack import Document as HaystackDocument
from haystack.dataclasses import SparseEmbedding
from haystack.utils import Secret
from haystack_integrations.components.retrievers.qdrant import (
    QdrantEmbeddingRetriever,
    QdrantHybridRetriever,
)
from haystack_integrations.document_stores.qdrant import QdrantDocumentStore
from langchain_core.documents import Document as LangChainDocument
from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore as LangChainQdrant
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient, QdrantClient
from qdrant_client.http import models as qm

from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import Backend
from tests.factories import served

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

TEXTS = [
    "the launch is on October 17",
    "the launch party is on the roof",
    "the launch budget is two million",
]
READERS = [["alice"], ["alice", "bob"], ["alice", "carol"]]

# The clients' own default (5 s) is sized for a quiet server: creating a payload index
# through the sidecar on the server backend took longer beside a CPU burner.
CLIENT_TIMEOUT_S = 60


def hashed(text: str, dim: int) -> list[float]:
    """A deterministic dense embedding of `dim` dimensions: words hashed into it."""
    v = [0.0] * dim
    for word in text.lower().split():
        h = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "big")
        v[h % dim] += 1.0 if h & 1 << 40 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


def words(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    """A sparse embedding, each word a dimension (LlamaIndex's sparse_doc_fn shape)."""
    indices, values = [], []
    for text in texts:
        counts: dict[int, float] = {}
        for word in text.lower().split():
            i = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % 100_000
            counts[i] = counts.get(i, 0.0) + 1.0
        keys = sorted(counts)
        indices.append(keys)
        values.append([counts[k] for k in keys])
    return indices, values


def said(text: str) -> str:
    """Which of TEXTS an attributed text says."""
    return next(t for t in TEXTS if f"“{t}”" in text)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, store_backend: Backend) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("clients"), JWT_ENV | store_backend.env()) as url:
        yield url
        # qdrant-client checks the server's version on a daemon thread (Haystack gives no
        # way to turn it off): let each finish while the sidecar still answers.
        for thread in threading.enumerate():
            if "_check_compatibility" in thread.name:
                thread.join(timeout=15)


# --- LlamaIndex ---------------------------------------------------------------------


class Hashed768(BaseEmbedding):
    def _get_text_embedding(self, text: str) -> list[float]:
        return hashed(text, 768)

    def _get_query_embedding(self, query: str) -> list[float]:
        return hashed(query, 768)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return hashed(query, 768)


def llama_store(base: str, who: str) -> QdrantVectorStore:
    return QdrantVectorStore(
        collection_name="li",
        client=QdrantClient(url=base, api_key=token(who), timeout=CLIENT_TIMEOUT_S),
        aclient=AsyncQdrantClient(url=base, api_key=token(who), timeout=CLIENT_TIMEOUT_S),
        enable_hybrid=True,
        sparse_doc_fn=words,
        sparse_query_fn=words,
        # As LlamaIndex's docs write it (its annotation says every value is a schema type).
        payload_indexes=[{"field_name": "source", "field_schema": "keyword"}],  # type: ignore[dict-item]
    )


def llama_retrieve(index: VectorStoreIndex, query: str, **filters: str) -> list[str]:
    found = index.as_retriever(
        vector_store_query_mode=VectorStoreQueryMode.HYBRID,
        similarity_top_k=3,
        sparse_top_k=3,
        filters=MetadataFilters(
            filters=[MetadataFilter(key=k, value=v) for k, v in filters.items()]
        )
        if filters
        else None,
    ).retrieve(query)
    return [n.node.get_content() for n in found]


def test_llama_index_hybrid_from_documents(base: str) -> None:
    documents = [
        Document(text=t, metadata={"audience": r, "source": f"li-{i}.md"}, doc_id=f"doc-{i}")
        for i, (t, r) in enumerate(zip(TEXTS, READERS, strict=True))
    ]
    index = VectorStoreIndex.from_documents(
        documents,
        storage_context=StorageContext.from_defaults(vector_store=llama_store(base, "alice")),
        embed_model=Hashed768(),
    )
    alice = llama_retrieve(index, "launch budget")
    assert said(alice[0]) == "the launch budget is two million"
    assert {said(t) for t in alice} == set(TEXTS)
    # Created as LlamaIndex creates a hybrid collection: its dense and sparse names.
    info = QdrantClient(url=base, api_key=token("alice"), timeout=CLIENT_TIMEOUT_S).get_collection(
        "li"
    )
    assert isinstance(info.config.params.vectors, dict)
    assert info.config.params.vectors["text-dense"].size == 768
    assert "text-sparse-new" in (info.config.params.sparse_vectors or {})

    bob_index = VectorStoreIndex.from_vector_store(
        llama_store(base, "bob"), embed_model=Hashed768()
    )
    [bob] = bob_index.as_retriever(
        vector_store_query_mode=VectorStoreQueryMode.HYBRID, similarity_top_k=3, sparse_top_k=3
    ).retrieve("launch budget")
    assert said(bob.node.get_content()) == "the launch party is on the roof"
    assert bob.node.get_content().startswith("alice says")
    assert bob.node.metadata["source"] == "li-1.md"
    assert bob.node.ref_doc_id == "doc-1"
    # The node comes back under the id LlamaIndex gave it, so it finds it by that id.
    alice_store = llama_store(base, "alice")
    assert [n.node_id for n in alice_store.get_nodes(node_ids=[bob.node.node_id])] == [
        bob.node.node_id
    ]
    # A filter on the documents' own metadata key, indexed as LlamaIndex asked.
    assert [said(t) for t in llama_retrieve(index, "launch", source="li-0.md")] == [TEXTS[0]]
    assert llama_retrieve(bob_index, "launch", source="li-0.md") == []
    # Deleted as LlamaIndex deletes: by its document id.
    index.delete_ref_doc("doc-1")
    assert llama_retrieve(bob_index, "launch budget") == []
    assert len(llama_retrieve(index, "launch budget")) == 2


# --- Haystack -----------------------------------------------------------------------


def haystack_store(base: str, who: str) -> QdrantDocumentStore:
    return QdrantDocumentStore(
        url=base,
        api_key=Secret.from_token(token(who)),
        index="hs",
        embedding_dim=512,
        use_sparse_embeddings=True,
        payload_fields_to_index=[{"field_name": "meta.source", "field_schema": "keyword"}],
        timeout=20,
    )


def sparse(text: str) -> SparseEmbedding:
    (indices,), (values,) = words([text])
    return SparseEmbedding(indices=indices, values=values)


def test_haystack_write_documents_and_retrievers(base: str) -> None:
    alice = haystack_store(base, "alice")
    documents = [
        HaystackDocument(
            content=t,
            meta={"audience": r, "source": f"hs-{i}.md"},
            embedding=hashed(t, 512),
            sparse_embedding=sparse(t),
        )
        for i, (t, r) in enumerate(zip(TEXTS, READERS, strict=True))
    ]
    assert alice.write_documents(documents) == 3
    query = "launch budget"
    seen = QdrantEmbeddingRetriever(document_store=alice, top_k=3).run(
        query_embedding=hashed(query, 512)
    )["documents"]
    assert said(seen[0].content or "") == "the launch budget is two million"
    assert {d.id for d in seen} == {d.id for d in documents}

    bob = haystack_store(base, "bob")
    [found] = QdrantHybridRetriever(document_store=bob, top_k=3).run(
        query_embedding=hashed(query, 512), query_sparse_embedding=sparse(query)
    )["documents"]
    assert found.id == documents[1].id
    assert found.content is not None
    assert found.content.startswith("alice says")
    # Haystack's own shape: its meta as written, what the policy says beside it.
    assert found.meta["source"] == "hs-1.md"
    assert found.meta["whose"]["attribution"] == found.content
    assert bob.count_documents() == 1
    # A filter on the documents' own meta key, indexed as Haystack asked.
    mine = {"field": "meta.source", "operator": "==", "value": "hs-0.md"}
    assert [d.id for d in alice.filter_documents(mine)] == [documents[0].id]
    assert bob.filter_documents(mine) == []
    alice.delete_documents([documents[1].id])
    assert bob.count_documents() == 0
    assert alice.count_documents() == 2


# --- LangChain's retriever ------------------------------------------------------------


class Hashed256(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [hashed(t, 256) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return hashed(text, 256)


def test_langchain_retriever_from_documents(base: str) -> None:
    documents = [
        LangChainDocument(page_content=t, metadata={"audience": r, "source": f"lc-{i}.md"})
        for i, (t, r) in enumerate(zip(TEXTS, READERS, strict=True))
    ]
    store = LangChainQdrant.from_documents(
        documents,
        Hashed256(),
        url=base,
        api_key=token("alice"),
        collection_name="lc",
        prefer_grpc=False,
        timeout=20,
    )
    store.client.create_payload_index("lc", "metadata.source", qm.PayloadSchemaType.KEYWORD)
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 3})
    assert len(mmr.invoke("launch budget")) == 2
    only = qm.Filter(
        must=[qm.FieldCondition(key="metadata.source", match=qm.MatchValue(value="lc-2.md"))]
    )
    [budget] = store.as_retriever(search_kwargs={"filter": only}).invoke("launch")
    assert said(budget.page_content) == TEXTS[2]
    assert budget.metadata["source"] == "lc-2.md"

    bob = LangChainQdrant(
        client=QdrantClient(
            url=base, api_key=token("bob"), prefer_grpc=False, timeout=CLIENT_TIMEOUT_S
        ),
        collection_name="lc",
        embedding=Hashed256(),
    )
    [party] = bob.as_retriever(search_kwargs={"k": 3}).invoke("launch budget")
    assert said(party.page_content) == TEXTS[1]
    assert party.page_content.startswith("alice says")
    assert bob.as_retriever(search_kwargs={"filter": only}).invoke("launch") == []
    # Facets and groups on the stack's own key count and group only what Bob may see.
    client = bob.client
    assert [(h.value, h.count) for h in client.facet("lc", "metadata.source").hits] == [
        ("lc-1.md", 1)
    ]
    groups = client.query_points_groups(
        "lc", query=hashed("launch", 256), group_by="metadata.source", limit=5
    ).groups
    assert [g.id for g in groups] == ["lc-1.md"]
    assert store.delete([party.metadata["_id"]])
    assert bob.as_retriever().invoke("launch") == []
