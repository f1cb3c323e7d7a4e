"""LlamaIndex's Qdrant vector store, unmodified, writing, retrieving and deleting
through the sidecar, on both store backends.

`llama-index-vector-stores-qdrant` builds each node from the payload's
`_node_content` (LlamaIndex's own node JSON) when it is there; otherwise it takes
the text from one payload key and every other key as metadata, which LlamaIndex's
default prompt shows the LLM (the writer's own wording among them). The sidecar
serves `_node_content`: the attribution sentence as the node's text, and what the
policy says of it (usable_as, obligations, status, source) as its metadata.
Documents LlamaIndex writes name their readers and source in their metadata
(writes/documents.py); it deletes them by its document id (`ref_doc_id`, a filter
on `doc_id`) or by node id.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import COLLECTION, embed, served_world, token
from tests.conftest import Backend

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


class SidecarEmbedding(BaseEmbedding):
    """The same deterministic embedder the records were written with."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return embed(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return embed(text)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return embed(query)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, store_backend: Backend
) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from served_world(tmp_path_factory.mktemp("llamaindex"), store_backend)


def store_for(base: str, who: str) -> QdrantVectorStore:
    # The change a LlamaIndex stack makes: the sidecar's URL and a token.
    return QdrantVectorStore(
        client=QdrantClient(url=base, api_key=token(who), timeout=10, check_compatibility=False),
        collection_name=COLLECTION,
    )


def index_for(base: str, who: str) -> VectorStoreIndex:
    return VectorStoreIndex.from_vector_store(store_for(base, who), embed_model=SidecarEmbedding())


def retrieve(base: str, who: str, query: str) -> list[NodeWithScore]:
    return index_for(base, who).as_retriever(similarity_top_k=5).retrieve(query)


def test_llamaindex_retrieves_only_what_the_asker_may_see(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, world = served
    bob = retrieve(base, "bob", "the launch")
    alice = retrieve(base, "alice", "the launch")
    assert [n.node.node_id for n in bob] == [world["team"]["id"]]
    assert {n.node.node_id for n in alice} == {
        world[k]["id"] for k in ("private", "team", "scoped")
    }
    for nodes, who in ((bob, "bob"), (alice, "alice")):
        seen = "".join(n.node.get_content(metadata_mode=MetadataMode.ALL) for n in nodes)
        for name, record in world.items():
            if record["id"] not in {n.node.node_id for n in nodes}:
                assert record["proposition"]["text"] not in seen, (who, name)


def test_what_the_llm_reads_is_whose_claim_it_is(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    [found] = retrieve(base, "bob", "the launch party")
    node = found.node
    llm = node.get_content(metadata_mode=MetadataMode.LLM)
    assert node.get_content().startswith("bob believes that the launch party is on the roof")
    assert node.get_content().endswith("source bob-notes, confidence 1.00")
    assert node.metadata["usable_as"] == "belief"
    assert node.metadata["obligations"] == ["attribute", "cite_source"]
    assert "obligations: ['attribute', 'cite_source']" in llm
    # Never the writer's own wording, neither as text nor as metadata.
    assert world["team"]["content"] not in llm
    assert world["team"]["content"] not in str(node.metadata)
    # The embedding text is the claim as worded, without the policy's notes.
    assert "obligations" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    assert found.score is not None
    assert 0.5 < found.score <= 1.0


def offsite(base: str, who: str) -> list[NodeWithScore]:
    found = index_for(base, who).as_retriever(similarity_top_k=10).retrieve("the offsite")
    return [n for n in found if "offsite" in n.node.get_content()]


def test_llamaindex_writes_retrieves_and_deletes_through_the_proxy(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    # Written through LlamaIndex's own API: who may read each is its metadata.
    shared = Document(
        text="the offsite is in Lisbon",
        metadata={"audience": ["alice", "bob"], "file_name": "offsite.md"},
    )
    private = Document(text="the offsite budget is 40k", metadata={"audience": ["alice"]})
    nodes = SentenceSplitter().get_nodes_from_documents([shared, private])
    context = StorageContext.from_defaults(vector_store=store_for(base, "alice"))
    index = VectorStoreIndex(nodes, storage_context=context, embed_model=SidecarEmbedding())
    seen_by_bob, seen_by_alice = offsite(base, "bob"), offsite(base, "alice")
    assert len(seen_by_bob) == 1
    assert len(seen_by_alice) == 2
    [node] = seen_by_bob
    assert node.node.get_content().startswith("alice")
    assert "Lisbon" in node.node.get_content()
    # The document id LlamaIndex gave it is the node's source, and its own metadata
    # comes back for the application, kept from the LLM.
    assert node.node.ref_doc_id == shared.doc_id
    assert node.node.metadata["file_name"] == "offsite.md"
    assert "offsite.md" not in node.node.get_content(metadata_mode=MetadataMode.LLM)
    assert "40k" not in "".join(n.node.get_content(MetadataMode.ALL) for n in seen_by_bob)
    # Without a source, the document's own id is its source.
    budget = [n for n in seen_by_alice if "40k" in n.node.get_content()]
    assert [n.node.metadata["source_id"] for n in budget] == [private.doc_id]
    # The node ids LlamaIndex wrote still find the nodes, for their writer.
    written = [n.node_id for n in nodes]
    assert len(store_for(base, "alice").get_nodes(node_ids=written)) == 2
    assert store_for(base, "bob").get_nodes(node_ids=written) == []
    # Deleting a document by its id (a filter on doc_id) erases its nodes.
    index.delete_ref_doc(private.doc_id)
    assert [n.node.ref_doc_id for n in offsite(base, "alice")] == [shared.doc_id]
    # And by node id, with the ids LlamaIndex remembers.
    store_for(base, "alice").delete_nodes(node_ids=written)
    assert offsite(base, "alice") == []
    gone = httpx.get(
        f"{base}/v1/memories/{node.node.node_id}",
        headers={"Authorization": f"Bearer {token('alice')}"},
    )
    assert gone.status_code == 404


# qdrant-client's uploader tries a refused batch again, warning each time.
@pytest.mark.filterwarnings("ignore:Batch upload failed")
def test_llamaindex_document_without_readers_is_refused_naming_the_key(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    context = StorageContext.from_defaults(vector_store=store_for(base, "alice"))
    with pytest.raises(UnexpectedResponse) as refused:
        VectorStoreIndex.from_documents(
            [Document(text="the offsite is in Lisbon")],
            storage_context=context,
            embed_model=SidecarEmbedding(),
        )
    assert refused.value.status_code == 422
    assert b"missing_metadata:audience" in refused.value.content
