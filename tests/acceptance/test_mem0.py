"""mem0 as its users start it, its vector store pointed at whose (issue 37 item 7): its
Qdrant provider with the sidecar's URL and a token, `add(..., infer=False)`, `search`,
`get_all`, `get` and `delete`, on both store backends.

mem0 writes a memory as a point whose payload is `{"data", "hash", "created_at",
"user_id", "role"}`, in a collection of its own at its own embedding size, and filters
every read by the session ids it was given. Under the shipped labeling policy a mem0
memory is its user's (rego/whose/labeling, `library_keys`): Alice's memories are read
by Alice and no one else, whatever user_id Bob's filter names.

Nothing leaves the machine: mem0's OpenAI embedder talks to a real embeddings server on
loopback (tests/embed_server.py, all-MiniLM-L6-v2, at 256 of its dimensions), its LLM is
never called with `infer=False`, and its telemetry is off.
"""

from __future__ import annotations

import hashlib
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client.http import models as qm
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.acceptance.proxy_world import JWT_ENV, token
from tests.conftest import Backend
from tests.embed_server import API_KEY, MODEL_NAME, EmbedServer, serving
from tests.factories import served

with warnings.catch_warnings():
    # mem0 0.1.115's own models are written in pydantic 1's style.
    warnings.simplefilter("ignore", DeprecationWarning)
    from mem0 import Memory

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

DIM = 256  # mem0's own size for its collection (whose's own is 384)
LISBON = "I moved to Lisbon in March"
SISTER = "my sister Inês is a nurse"


@pytest.fixture(scope="module")
def embedder(minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedServer]:
    with serving(minilm, tmp_path_factory.mktemp("embed") / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory, store_backend: Backend) -> Iterator[str]:
    with served(tmp_path_factory.mktemp("mem0"), JWT_ENV | store_backend.env()) as url:
        yield url


Mem0 = Callable[[str, str], Memory]


@pytest.fixture(scope="module")
def mem0(base: str, embedder: EmbedServer, tmp_path_factory: pytest.TempPathFactory) -> Mem0:
    """A person's mem0 on a collection, with their own token, as mem0's docs configure it."""
    history = tmp_path_factory.mktemp("history")

    def memory(who: str, collection: str) -> Memory:
        return Memory.from_config(
            {
                "vector_store": {
                    "provider": "qdrant",
                    "config": {
                        "collection_name": collection,
                        "url": base,  # was: Qdrant's URL
                        "api_key": token(who),
                        "embedding_model_dims": DIM,
                    },
                },
                "embedder": {
                    "provider": "openai",
                    "config": {
                        "model": MODEL_NAME,
                        "embedding_dims": DIM,
                        "openai_base_url": embedder.url,
                        "api_key": API_KEY,
                    },
                },
                # Never called with infer=False.
                "llm": {"provider": "openai", "config": {"api_key": "sk-never-used"}},
                "history_db_path": str(history / f"{who}-{collection}.db"),
            }
        )

    return memory


@pytest.fixture
def memories(mem0: Mem0) -> dict[str, Memory]:
    """Alice's and Bob's mem0 on a collection of this test's own (each test stands
    alone, whichever worker runs it), with the index mem0 filters on made once, as its
    users must (test_a_filter_needs_the_index_mem0_does_not_make)."""
    collection = f"mem-{uuid.uuid4().hex[:12]}"
    alice, bob = mem0("alice", collection), mem0("bob", collection)
    alice.vector_store.client.create_payload_index(
        collection, "user_id", qm.PayloadSchemaType.KEYWORD
    )
    return {"alice": alice, "bob": bob}


def said(text: str, who: str = "alice") -> str:
    """The attribution sentence of a memory of `who`'s (its source: the user)."""
    return f"{who} says that “{text}” — source {who}, confidence 1.00"


def added(memory: Memory, text: str, user_id: str) -> str:
    [result] = memory.add(text, user_id=user_id, infer=False)["results"]
    assert result["event"] == "ADD"
    memory_id: str = result["id"]
    return memory_id


def test_a_filter_needs_the_index_mem0_does_not_make(mem0: Mem0) -> None:
    """mem0 0.1.115 filters on user_id without making an index for it: refused, as a
    Qdrant server in strict mode refuses it, until the index is made once."""
    collection = f"unindexed-{uuid.uuid4().hex[:12]}"
    alice = mem0("alice", collection)
    added(alice, LISBON, "alice")
    with pytest.raises(UnexpectedResponse) as refused:
        alice.search("where do I live?", user_id="alice")
    assert refused.value.status_code == 400
    assert b"unindexed_key" in refused.value.content
    alice.vector_store.client.create_payload_index(
        collection, "user_id", qm.PayloadSchemaType.KEYWORD
    )
    [found] = alice.search("where do I live?", user_id="alice")["results"]
    assert found["memory"] == said(LISBON)


def test_alice_adds_searches_and_lists_her_memories(memories: dict[str, Memory]) -> None:
    alice = memories["alice"]
    added(alice, LISBON, "alice")
    sister = added(alice, SISTER, "alice")
    [top, *_] = alice.search("where do I live?", user_id="alice")["results"]
    assert top["memory"] == said(LISBON)
    # What mem0 wrote beside the memory comes back as it wrote it; what the policy says
    # of the memory is its metadata.
    assert top["hash"] == hashlib.md5(LISBON.encode()).hexdigest()
    assert (top["user_id"], top["role"]) == ("alice", "user")
    assert top["created_at"]
    whose: dict[str, Any] = top["metadata"]["whose"]
    assert whose["attribution"] == said(LISBON)
    assert set(top["metadata"]) == {"whose"}
    listed = alice.get_all(user_id="alice")["results"]
    assert sorted(m["memory"] for m in listed) == sorted([said(LISBON), said(SISTER)])
    assert alice.get(sister)["memory"] == said(SISTER)
    # mem0's collection at mem0's size.
    collection = alice.vector_store.collection_name
    vectors = alice.vector_store.client.get_collection(collection).config.params.vectors
    assert isinstance(vectors, qm.VectorParams)
    assert vectors.size == DIM


def test_bob_finds_nothing_of_alices(memories: dict[str, Memory]) -> None:
    bob, alice = memories["bob"], memories["alice"]
    added(alice, LISBON, "alice")
    mine = added(bob, "I am allergic to peanuts", "bob")
    # Even naming Alice in the filter, Bob's token reads only what Bob may.
    assert bob.search("where does alice live?", user_id="alice")["results"] == []
    assert bob.get_all(user_id="alice")["results"] == []
    [lisbon] = [m for m in alice.get_all(user_id="alice")["results"] if "Lisbon" in m["memory"]]
    assert bob.get(lisbon["id"]) is None
    [own] = bob.search("what am I allergic to?", user_id="bob")["results"]
    assert own["id"] == mine
    assert own["memory"] == said("I am allergic to peanuts", "bob")
    assert alice.search("peanuts", user_id="bob")["results"] == []


def test_a_memory_for_someone_else_is_refused(memories: dict[str, Memory]) -> None:
    """A memory is its user's: Bob cannot write one as Alice's."""
    with pytest.raises(UnexpectedResponse) as refused:
        memories["bob"].add("alice owes bob 50 euros", user_id="alice", infer=False)
    assert refused.value.status_code == 422
    assert b"writer_not_holder" in refused.value.content
    listed = memories["alice"].get_all(user_id="alice")["results"]
    assert not any("euros" in m["memory"] for m in listed)


def test_alice_deletes_a_memory(memories: dict[str, Memory]) -> None:
    alice = memories["alice"]
    added(alice, LISBON, "alice")
    added(alice, SISTER, "alice")
    [lisbon] = [m for m in alice.get_all(user_id="alice")["results"] if "Lisbon" in m["memory"]]
    alice.delete(lisbon["id"])
    assert alice.get(lisbon["id"]) is None
    left = alice.get_all(user_id="alice")["results"]
    assert [m["memory"] for m in left] == [said(SISTER)]
