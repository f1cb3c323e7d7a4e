"""LlamaIndex's Qdrant vector store, unmodified, retrieving through the sidecar.

`llama-index-vector-stores-qdrant` builds each node from the payload's
`_node_content` (LlamaIndex's own node JSON) when it is there; otherwise it takes
the text from one payload key and every other key as metadata, which LlamaIndex's
default prompt shows the LLM (the writer's own wording among them). The sidecar
serves `_node_content`: the attribution sentence as the node's text, and what the
policy says of it (usable_as, obligations, status, source) as its metadata.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import MetadataMode, NodeWithScore
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from tests.acceptance.proxy_world import COLLECTION, JWT_ENV, embed, seed, token
from tests.conftest import start_sidecar, stop

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
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    base, process = start_sidecar(tmp_path_factory.mktemp("llamaindex"), env=JWT_ENV)
    yield base, seed(base)
    stop(process)


def retrieve(base: str, who: str, query: str) -> list[NodeWithScore]:
    # The change a LlamaIndex stack makes: the sidecar's URL and a token.
    store = QdrantVectorStore(
        client=QdrantClient(url=base, api_key=token(who), timeout=10, check_compatibility=False),
        collection_name=COLLECTION,
    )
    index = VectorStoreIndex.from_vector_store(store, embed_model=SidecarEmbedding())
    return index.as_retriever(similarity_top_k=5).retrieve(query)


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
