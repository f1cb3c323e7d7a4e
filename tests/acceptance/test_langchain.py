"""A real RAG library built on qdrant-client, writing, retrieving and deleting
through the sidecar, on both store backends.

LangChain's QdrantVectorStore is pointed at the sidecar's URL with a bearer
token, and nothing else about it changes: its default payload keys read the
attribution sentence as the text (`page_content`) and, as metadata, the document's
own (which names its readers and source by the convention of writes/documents.py)
with what the policy says of it (attribution, usable_as, obligations, status). A
stack configured with the keys an earlier version asked for (`content`, `whose`)
reads the same.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain_core.embeddings import Embeddings
from langchain_qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import COLLECTION, embed, served_world, token
from tests.conftest import Backend

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
def served(
    tmp_path_factory: pytest.TempPathFactory, store_backend: Backend
) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from served_world(tmp_path_factory.mktemp("langchain"), store_backend)


def client_for(base: str, who: str) -> QdrantClient:
    # Version check off: its background thread can outlive the test; the proxy tests
    # check compatibility directly.
    return QdrantClient(url=base, api_key=token(who), timeout=10, check_compatibility=False)


def store_for(base: str, who: str) -> QdrantVectorStore:
    # The change a RAG stack makes: the sidecar's URL and a token.
    return QdrantVectorStore(
        client=client_for(base, who), collection_name=COLLECTION, embedding=SidecarEmbeddings()
    )


def test_the_payload_keys_of_an_earlier_configuration_read_the_same(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    earlier = QdrantVectorStore(
        client=client_for(base, "bob"),
        collection_name=COLLECTION,
        embedding=SidecarEmbeddings(),
        content_payload_key="content",
        metadata_payload_key="whose",
    )
    [old] = earlier.similarity_search("the launch", k=5)
    [new] = store_for(base, "bob").similarity_search("the launch", k=5)
    assert old.page_content == new.page_content == new.metadata["attribution"]
    assert old.metadata["obligations"] == new.metadata["obligations"]


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


def offsite(store: QdrantVectorStore) -> list[Any]:
    """The offsite documents the store's asker is shown (the seeded notes aside)."""
    return [d for d in store.similarity_search("the offsite", k=10) if "offsite" in d.page_content]


def test_langchain_writes_retrieves_and_deletes_through_the_proxy(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    alice, bob = store_for(base, "alice"), store_for(base, "bob")
    # Written through LangChain's own API: who may read each is its metadata.
    ids = alice.add_texts(
        ["the offsite is in Lisbon", "the offsite budget is 40k"],
        metadatas=[
            {"audience": ["alice", "bob"], "source": "offsite.md", "page": 1},
            {"audience": ["alice"], "source": "budget.xlsx"},
        ],
    )
    seen_by_bob, seen_by_alice = offsite(bob), offsite(alice)
    assert len(seen_by_bob) == 1
    assert len(seen_by_alice) == 2
    [doc] = seen_by_bob
    # A document is its writer's assertion, attributed as such; never a bare fact.
    assert doc.page_content.startswith("alice")
    assert "the offsite is in Lisbon" in doc.page_content
    assert doc.metadata["usable_as"] == "belief"
    # Its own metadata as LangChain wrote it, what the policy says of it beside.
    assert (doc.metadata["page"], doc.metadata["audience"]) == (1, ["alice", "bob"])
    assert "40k" not in "".join(f"{d.page_content}{d.metadata}" for d in seen_by_bob)
    # The ids LangChain returned still name the documents, for their writer only.
    assert {d.page_content for d in alice.get_by_ids(ids)} == {
        d.page_content for d in seen_by_alice
    }
    assert bob.get_by_ids(ids) == []
    # Writing an id again makes a new version; the old one stays in its history.
    alice.add_texts(
        ["the offsite is in Porto"],
        metadatas=[{"audience": ["alice", "bob"], "source": "offsite.md"}],
        ids=[ids[0]],
    )
    [moved] = offsite(bob)
    assert "Porto" in moved.page_content
    history = httpx.get(
        f"{base}/v1/memories/{moved.metadata['_id']}/history",
        headers={"Authorization": f"Bearer {token('bob')}"},
    ).json()
    assert [i["status"] for i in history["items"]] == ["superseded", "current"]
    # Bob may read Alice's document, not delete it: refused, and nothing is erased.
    with pytest.raises(UnexpectedResponse) as refused:
        bob.delete([moved.metadata["_id"]])
    assert refused.value.status_code == 403
    assert b"not_holder_or_writer" in refused.value.content
    # Alice deletes with the ids LangChain gave her: every version goes.
    assert alice.delete(ids) is True
    assert offsite(alice) == []
    for item in history["items"]:
        gone = httpx.get(
            f"{base}/v1/memories/{item['id']}",
            headers={"Authorization": f"Bearer {token('alice')}"},
        )
        assert gone.status_code == 404


def test_langchain_document_without_readers_is_refused_naming_the_key(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    with pytest.raises(UnexpectedResponse) as refused:
        store_for(base, "alice").add_texts(["the offsite is in Lisbon"], metadatas=[{}])
    assert refused.value.status_code == 422
    assert b"missing_metadata:audience" in refused.value.content
    assert b"missing_metadata:source" in refused.value.content
    assert offsite(store_for(base, "alice")) == []
