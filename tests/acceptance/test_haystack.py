"""Haystack's Qdrant document store and retriever, unmodified, through the sidecar.

`qdrant-haystack` makes each point a Document: `content` is the payload's
`content` (the attribution sentence the sidecar serves), every other payload key
goes into `meta` (among them `whose`: usable_as, obligations, status). A prompt
that renders `document.content` gives the LLM whose claim it is.
"""

from __future__ import annotations

import os
import threading

# Before Haystack is imported: it reads this once, and tests send nothing off the machine.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

from collections.abc import Iterator
from typing import Any

import pytest
from haystack import Document
from haystack.utils import Secret
from haystack_integrations.components.retrievers.qdrant import (
    QdrantEmbeddingRetriever,
)
from haystack_integrations.document_stores.qdrant import QdrantDocumentStore
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import COLLECTION, JWT_ENV, embed, seed, token
from tests.conftest import start_sidecar, stop

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, Any]]]:
    base, process = start_sidecar(tmp_path_factory.mktemp("haystack"), env=JWT_ENV)
    yield base, seed(base)
    # qdrant-client checks the server's version on a daemon thread, and Haystack gives no way
    # to turn that off: let every check finish while the sidecar still answers it, or the
    # last one fails "connection refused" after the sidecar stops.
    for thread in threading.enumerate():
        if "_check_compatibility" in thread.name:
            thread.join(timeout=15)
    stop(process)


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


def test_grouping_is_refused_by_name(served: tuple[str, dict[str, Any]]) -> None:
    base, _ = served
    with pytest.raises(UnexpectedResponse) as refused:
        retrieve(base, "bob", "the launch", group_by="source_id", group_size=2)
    assert refused.value.status_code == 400
    assert b"grouping (group_by) is not supported by whose" in refused.value.content
