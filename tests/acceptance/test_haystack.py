"""Haystack's Qdrant document store and retriever, unmodified, writing, retrieving
and deleting through the sidecar, on both store backends.

`qdrant-haystack` makes each point a Document: `content` is the payload's
`content` (the attribution sentence the sidecar serves), every other payload key
goes into `meta` (among them `whose`: usable_as, obligations, status). A prompt
that renders `document.content` gives the LLM whose claim it is. A document Haystack
writes names its readers and source in `meta` (writes/documents.py) and comes back
with its own id and meta, so Haystack finds, refuses to duplicate and deletes it by
that id.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from haystack import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy
from haystack.utils import Secret
from haystack_integrations.components.retrievers.qdrant import (
    QdrantEmbeddingRetriever,
)
from haystack_integrations.document_stores.qdrant import QdrantDocumentStore
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import COLLECTION, embed, served_world, token
from tests.conftest import Backend

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, store_backend: Backend
) -> Iterator[tuple[str, dict[str, Any]]]:
    yield from served_world(tmp_path_factory.mktemp("haystack"), store_backend)


@pytest.fixture(scope="module", autouse=True)
def compatibility_checks_finished(served: tuple[str, dict[str, Any]]) -> Iterator[None]:
    yield
    # qdrant-client checks the server's version on a daemon thread, and Haystack gives no way
    # to turn that off: let every check finish while the sidecar still answers it, or the
    # last one fails "connection refused" after the sidecar stops.
    for thread in threading.enumerate():
        if "_check_compatibility" in thread.name:
            thread.join(timeout=15)


def store_for(base: str, who: str) -> QdrantDocumentStore:
    # The change a Haystack stack makes: the sidecar's URL and a token.
    return QdrantDocumentStore(
        url=base,
        api_key=Secret.from_token(token(who)),
        index=COLLECTION,
        embedding_dim=384,
        similarity="cosine",
        timeout=10,
    )


def retrieve(base: str, who: str, query: str, **options: Any) -> list[Document]:
    retriever = QdrantEmbeddingRetriever(document_store=store_for(base, who), top_k=5, **options)
    documents: list[Document] = retriever.run(query_embedding=embed(query))["documents"]
    return documents


def test_haystack_retrieves_only_what_the_asker_may_see(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, world = served
    bob = retrieve(base, "bob", "the launch")
    alice = retrieve(base, "alice", "the launch")
    assert [d.id for d in bob] == [world["team"]["id"]]
    assert {d.id for d in alice} == {world[k]["id"] for k in ("private", "team", "scoped")}
    bobs = "".join(f"{d.content}{d.meta}" for d in bob)
    for name in ("private", "scoped"):
        assert world[name]["proposition"]["text"] not in bobs, name


def test_what_the_llm_reads_is_whose_claim_it_is(served: tuple[str, dict[str, Any]]) -> None:
    base, world = served
    [document] = retrieve(base, "bob", "the launch party")
    assert document.content is not None
    assert document.content.startswith("bob believes that the launch party is on the roof")
    assert document.content == document.meta["whose"]["attribution"]
    assert document.content != world["team"]["content"]
    assert document.meta["whose"]["obligations"] == ["attribute", "cite_source"]
    assert document.meta["whose"]["usable_as"] == "belief"
    assert document.score is not None
    assert 0.5 < document.score <= 1.0


def test_grouping_groups_only_what_the_asker_may_see(
    served: tuple[str, dict[str, Any]],
) -> None:
    """Haystack's `group_by` (Qdrant's search groups) answers groups, and their sizes,
    of the points the asker may see: Bob's one record, Alice's three."""
    base, world = served
    grouped = {
        who: retrieve(base, who, "the launch", group_by="observer_id", group_size=3)
        for who in ("alice", "bob")
    }
    assert [d.id for d in grouped["bob"]] == [world["team"]["id"]]
    assert {d.id for d in grouped["alice"]} == {
        world[k]["id"] for k in ("private", "team", "scoped")
    }


def offsite(base: str, who: str) -> list[Document]:
    return [d for d in retrieve(base, who, "the offsite") if "offsite" in (d.content or "")]


def document(text: str, **meta: Any) -> Document:
    return Document(content=text, meta=meta, embedding=embed(text))


def test_haystack_writes_retrieves_and_deletes_through_the_proxy(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    alice = store_for(base, "alice")
    shared = document("the offsite is in Lisbon", audience=["alice", "bob"], source="offsite.md")
    private = document("the offsite budget is 40k", audience=["alice"], source="budget.xlsx")
    # Written through Haystack's own API: who may read each is its meta.
    assert alice.write_documents([shared, private]) == 2
    seen_by_bob, seen_by_alice = offsite(base, "bob"), offsite(base, "alice")
    [doc] = seen_by_bob
    assert len(seen_by_alice) == 2
    assert doc.content is not None
    assert doc.content.startswith("alice")
    assert "Lisbon" in doc.content
    assert doc.meta["whose"]["usable_as"] == "belief"
    assert "40k" not in "".join(f"{d.content}{d.meta}" for d in seen_by_bob)
    # It comes back under the id Haystack gave it, so Haystack knows it again.
    assert doc.id == shared.id
    assert {d.id for d in alice.get_documents_by_id([shared.id, private.id])} == {
        shared.id,
        private.id,
    }
    with pytest.raises(DuplicateDocumentError):
        alice.write_documents([shared])
    # Overwriting makes a new version of the document; its history keeps the old one.
    moved = Document(
        id=shared.id,
        content="the offsite is in Porto",
        meta=shared.meta,
        embedding=embed("the offsite is in Porto"),
    )
    alice.write_documents([moved], policy=DuplicatePolicy.OVERWRITE)
    [now] = offsite(base, "bob")
    assert now.content is not None
    assert "Porto" in now.content
    # Bob's Haystack ids are his own: deleting Alice's document by its id names nothing.
    store_for(base, "bob").delete_documents([shared.id])
    assert len(offsite(base, "bob")) == 1
    # Alice deletes by the ids Haystack remembers: every version goes.
    alice.delete_documents([d.id for d in seen_by_alice])
    assert offsite(base, "alice") == []
    assert alice.get_documents_by_id([shared.id, private.id]) == []


def test_haystack_document_without_readers_is_refused_naming_the_key(
    served: tuple[str, dict[str, Any]],
) -> None:
    base, _ = served
    with pytest.raises(UnexpectedResponse) as refused:
        store_for(base, "alice").write_documents([document("the offsite is in Lisbon")])
    assert refused.value.status_code == 422
    assert b"missing_metadata:audience" in refused.value.content
    assert offsite(base, "alice") == []
