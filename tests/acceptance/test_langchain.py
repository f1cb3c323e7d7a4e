"""A real RAG library built on qdrant-client, retrieving through the sidecar.

LangChain's QdrantVectorStore is pointed at the sidecar's URL with a bearer
token, and told which payload keys hold the text (the record's `content`) and
the metadata (the sidecar's `whose` object: attribution, usable_as, obligations).
Nothing else about it changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

from tests.acceptance.proxy_world import COLLECTION, JWT_ENV, embed, seed, token
from tests.conftest import start_sidecar, stop

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


class SidecarEmbeddings(Embeddings):
    """The same deterministic embedder the records were written with."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return embed(text)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    base, process = start_sidecar(tmp_path_factory.mktemp("langchain"), env=JWT_ENV)
    yield base, seed(base)
    stop(process)


def store_for(base: str, who: str) -> QdrantVectorStore:
    # The three-line change a RAG stack makes: the sidecar's URL, a token, two payload keys.
    return QdrantVectorStore(
        # Version check off: its background thread can outlive the test; the proxy
        # tests check compatibility directly.
        client=QdrantClient(url=base, api_key=token(who), timeout=10, check_compatibility=False),
        collection_name=COLLECTION,
        embedding=SidecarEmbeddings(),
        content_payload_key="content",
        metadata_payload_key="whose",
    )


def test_langchain_retrieves_only_what_the_asker_may_see(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, world = served
    bob_docs = store_for(base, "bob").similarity_search("the launch", k=5)
    alice_docs = store_for(base, "alice").similarity_search("the launch", k=5)

    assert [d.metadata["_id"] for d in bob_docs] == [world["team"]["id"]]
    assert {d.metadata["_id"] for d in alice_docs} == {
        world[k]["id"] for k in ("private", "team", "scoped")
    }
    [doc] = bob_docs
    # What the LLM reads is whose claim it is, not the writer's bare sentence.
    assert doc.page_content.startswith("bob believes that the launch party")
    assert doc.page_content == doc.metadata["attribution"]
    assert doc.metadata["attribution"].startswith("bob believes that the launch party")
    assert doc.metadata["obligations"] == ["attribute", "cite_source"]
    assert doc.metadata["_id"] == world["team"]["id"]


def test_langchain_scores_come_through(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    [(doc, score)] = store_for(base, "bob").similarity_search_with_score("the launch party", k=3)
    assert 0.5 < score <= 1.0
    assert "roof" in doc.page_content
