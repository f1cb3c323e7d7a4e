"""LangGraph's long-term memory store backed by whose (sidecar/client/langgraph.py), against a
served sidecar on both store backends.

No package ships LangGraph's store conformance tests (langgraph-checkpoint-conformance
covers checkpointers only), so the first half holds WhoseStore to what LangGraph's own
stores promise: put/get/overwrite, search with query, filter, limit and offset, listing
namespaces by prefix, suffix, wildcard, depth and page, batches answered in order, async
alike, namespaces validated. Where whose differs on purpose, the test says so: every
value comes back with its `whose` attribution, and a put is the holder's record,
decided by the write policy. The second half is a real LangGraph graph that remembers
for alice and refuses bob.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any, TypedDict, cast

import httpx
import jwt
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)

from sidecar.client import MethodNotAllowed, WhoseClient, WriteRefused
from sidecar.client.langgraph import ANNOTATION, WhoseStore
from tests.conftest import Backend, start_sidecar, stop

SECRET = "langgraph-tests-hs256-secret-32-bytes!!"


def token(who: str) -> str:
    return jwt.encode({"sub": who, "tenant": "acme", "exp": int(time.time()) + 3600}, SECRET)


@pytest.fixture(scope="module")
def base(store_backend: Backend, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {"WHOSE_JWT_HS256_SECRET": SECRET, **store_backend.env()}
    url, process = start_sidecar(tmp_path_factory.mktemp("langgraph"), env=env)
    yield url
    stop(process)


@pytest.fixture
def person() -> str:
    """A holder of their own for each test: what one test stores, another never lists."""
    return f"user-{uuid.uuid4().hex[:8]}"


def store_as(base: str, who: str) -> WhoseStore:
    return WhoseStore(base, token=token(who), fields=["text"])


@pytest.fixture
def mine(base: str, person: str) -> Iterator[WhoseStore]:
    store = store_as(base, person)
    yield store
    store.close()


def stored(value: dict[str, Any]) -> dict[str, Any]:
    """A value as put, from a value read back: without the store's annotation."""
    return {k: v for k, v in value.items() if k != ANNOTATION}


# --- what LangGraph's stores promise -------------------------------------------------


def test_put_then_get(mine: WhoseStore, person: str) -> None:
    namespace = ("acme", person, "memories")
    doc = {"text": "the launch is October 17", "n": 1, "tags": ["launch"]}
    mine.put(namespace, "launch", doc)
    item = mine.get(namespace, "launch")
    assert item is not None
    assert (item.namespace, item.key) == (namespace, "launch")
    assert stored(item.value) == doc
    assert item.created_at.tzinfo is not None
    assert item.updated_at == item.created_at
    # whose on purpose: the value says whose it is, and what it may be used as.
    whose = item.value[ANNOTATION]
    assert whose["attribution"].startswith(f"{person} believes that the launch is October 17")
    assert whose["usable_as"] == "belief"
    assert whose["status"] == "current"
    assert mine.get(namespace, "no-such-key") is None
    assert mine.get(("acme", person, "elsewhere"), "launch") is None


def test_a_key_put_again_is_updated_and_its_history_kept(
    mine: WhoseStore, person: str, base: str
) -> None:
    namespace = ("acme", person, "memories")
    mine.put(namespace, "venue", {"text": "the venue is Hall A"})
    first = mine.get(namespace, "venue")
    # A value read back can be put again as it is: its annotation is not stored.
    assert first is not None
    mine.put(namespace, "venue", first.value | {"text": "the venue is Hall B"})
    second = mine.get(namespace, "venue")
    assert second is not None
    assert stored(second.value) == {"text": "the venue is Hall B"}
    assert second.updated_at >= first.updated_at
    with WhoseClient(base, token=token(person)) as client:
        versions = client.history(second.value[ANNOTATION]["record_id"]).items
    assert [v.status for v in versions] == ["superseded", "current"]
    assert versions[0].as_written == '{"text": "the venue is Hall A"}'


def test_search_by_query_filter_limit_and_offset(mine: WhoseStore, person: str) -> None:
    namespace = ("acme", person, "notes")
    docs = {
        "pizza": {"text": "likes pizza with olives", "kind": "food", "n": 1},
        "sushi": {"text": "likes sushi on fridays", "kind": "food", "n": 2},
        "hiking": {"text": "goes hiking in the alps", "kind": "sport", "n": 3},
    }
    for key, doc in docs.items():
        mine.put(namespace, key, doc)
    found = mine.search(("acme", person), query="pizza with olives")
    assert found[0].key == "pizza"
    assert found[0].score is not None
    assert {item.key for item in found} == set(docs)
    assert all(stored(item.value) == docs[item.key] for item in found)
    food = mine.search(("acme", person), query="likes", filter={"kind": "food"})
    assert {item.key for item in food} == {"pizza", "sushi"}
    later = mine.search(("acme", person), query="likes", filter={"n": {"$gte": 2}})
    assert {item.key for item in later} == {"sushi", "hiking"}
    ranked = [item.key for item in found]
    assert [i.key for i in mine.search(("acme", person), query="pizza with olives", limit=1)] == (
        ranked[:1]
    )
    paged = mine.search(("acme", person), query="pizza with olives", limit=2, offset=1)
    assert [item.key for item in paged] == ranked[1:3]
    # Without a query: the listing, narrowed the same way.
    listed = mine.search(("acme", person, "notes"), filter={"kind": "sport"})
    assert [item.key for item in listed] == ["hiking"]
    assert len(mine.search(("acme", person), limit=2)) == 2
    assert mine.search(("acme", person, "elsewhere"), query="pizza") == []


def test_list_namespaces(mine: WhoseStore, person: str) -> None:
    paths = [("a", "b"), ("a", "c", "d"), ("a", "c", "e"), ("f",), ("f", "a")]
    for i, path in enumerate(paths):
        mine.put(("acme", person, *path), f"k{i}", {"text": f"note {i}"})
    everything = [("acme", person, *path) for path in paths]
    assert mine.list_namespaces(prefix=("acme", person)) == sorted(everything)
    assert mine.list_namespaces(prefix=("acme", person, "a")) == sorted(everything[:3])
    assert mine.list_namespaces(prefix=("acme", person), suffix=("a",)) == [
        ("acme", person, "f", "a")
    ]
    assert mine.list_namespaces(prefix=("acme", person, "*", "c")) == sorted(everything[1:3])
    assert mine.list_namespaces(prefix=("acme", person, "*", "x")) == []
    assert mine.list_namespaces(prefix=("*", person, "a", "*", "e")) == [everything[2]]
    assert mine.list_namespaces(prefix=("acme", person), max_depth=3) == [
        ("acme", person, "a"),
        ("acme", person, "f"),
    ]
    assert (
        mine.list_namespaces(prefix=("acme", person), limit=2, offset=1) == sorted(everything)[1:3]
    )


def test_a_batch_answers_in_order_and_writes_all_or_nothing(mine: WhoseStore, person: str) -> None:
    namespace = ("acme", person, "batch")
    mine.put(namespace, "before", {"text": "stored before the batch"})
    results = mine.batch(
        [
            GetOp(namespace, "before"),
            PutOp(namespace, "one", {"text": "first"}),
            SearchOp(namespace, query="stored before"),
            PutOp(namespace, "one", {"text": "last put of a key wins"}),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", namespace),)),
            GetOp(namespace, "one"),  # reads see what was stored before the batch
        ]
    )
    assert [type(r).__name__ for r in results] == [
        "Item",
        "NoneType",
        "list",
        "NoneType",
        "list",
        "NoneType",
    ]
    assert results[4] == [namespace]
    one = mine.get(namespace, "one")
    assert one is not None
    assert stored(one.value) == {"text": "last put of a key wins"}
    # One write: a put the policy refuses takes the whole batch with it.
    with pytest.raises(WriteRefused) as refused:
        mine.batch(
            [
                PutOp(namespace, "two", {"text": "fine on its own"}),
                PutOp(("acme", "someone-else", "batch"), "two", {"text": "not mine"}),
            ]
        )
    assert refused.value.problems[0]["reasons"] == ["writer_not_holder"]
    assert mine.get(namespace, "two") is None


@pytest.mark.parametrize(
    "namespace",
    [("acme", "x.y"), ("acme", ""), ("globex", "alice"), ("acme",), ("langgraph", "a")],
    ids=str,
)
def test_namespaces_are_checked(mine: WhoseStore, namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        mine.put(namespace, "k", {"text": "x"})


async def test_async_alike(base: str, person: str) -> None:
    store = store_as(base, person)
    namespace = ("acme", person, "async")
    await store.aput(namespace, "a", {"text": "async memories are the same memories"})
    item = await store.aget(namespace, "a")
    assert item is not None
    assert stored(item.value) == {"text": "async memories are the same memories"}
    assert [i.key for i in await store.asearch(("acme", person), query="async memories")] == ["a"]
    assert await store.alist_namespaces(prefix=("acme", person)) == [namespace]
    [got] = await store.abatch([GetOp(namespace, "a")])
    assert got == item
    await store.aclose()
    store.close()


def test_delete(mine: WhoseStore, person: str, base: str) -> None:
    namespace = ("acme", person, "forget")
    mine.put(namespace, "k", {"text": "a memory to forget"})
    mine.put(namespace, "k", {"text": "its second version"})
    served = httpx.get(f"{base}/openapi.json").json()["paths"]["/v1/memories/{record_id}"]
    if "delete" in served:
        mine.delete(namespace, "k")
        assert mine.get(namespace, "k") is None
        assert mine.search(("acme", person), query="memory to forget") == []
        assert mine.list_namespaces(prefix=namespace) == []
    else:
        # A sidecar without erasure (before issue 25): said by class, nothing erased.
        with pytest.raises(MethodNotAllowed):
            mine.delete(namespace, "k")
        assert mine.get(namespace, "k") is not None
    mine.delete(namespace, "never-put")  # nothing to delete: nothing asked


# --- point of view -------------------------------------------------------------------


def test_another_users_memory_is_not_theirs_to_read_or_write(base: str, person: str) -> None:
    alice, bob = store_as(base, person), store_as(base, f"{person}-bob")
    namespace = ("acme", person, "private")
    alice.put(namespace, "launch", {"text": "the launch is October 17"})
    assert bob.get(namespace, "launch") is None
    assert bob.search(("acme", person), query="when is the launch") == []
    assert bob.search(("acme", person)) == []
    assert bob.list_namespaces(prefix=("acme", person)) == []
    with pytest.raises(WriteRefused) as refused:
        bob.put(namespace, "launch", {"text": "the launch is cancelled"})
    assert refused.value.problems[0]["reasons"] == ["writer_not_holder"]
    item = alice.get(namespace, "launch")
    assert item is not None
    assert stored(item.value) == {"text": "the launch is October 17"}
    alice.close()
    bob.close()


# --- a real graph --------------------------------------------------------------------


class Turn(TypedDict, total=False):
    about: str  # whose memory the turn reads (the user's own, or someone else's)
    said: str  # what the user says, remembered as the user's belief
    recalled: list[str]  # what the agent may put in its prompt: attributions


def user() -> str:
    configurable = get_config()["configurable"]
    return str(configurable["user_id"])


def remember(state: Turn, *, store: BaseStore) -> Turn:
    if said := state.get("said"):
        store.put(("acme", user(), "memories"), str(uuid.uuid4()), {"text": said})
    return {}


def recall(state: Turn, *, store: BaseStore) -> Turn:
    about = state.get("about") or user()
    found = store.search(("acme", about, "memories"), query="when is the launch?")
    return {"recalled": [item.value[ANNOTATION]["attribution"] for item in found]}


def test_a_langgraph_agent_remembers_for_alice_and_refuses_bob(base: str, person: str) -> None:
    alice, bob = person, f"{person}-bob"
    # One graph for every user: the store asks as the user whose run it is.
    store = WhoseStore(base, token=lambda: token(user()), fields=["text"], source_id="launch-agent")
    builder = StateGraph(Turn)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    graph = builder.compile(store=store)

    def turn(who: str, state: Turn) -> Turn:
        config: RunnableConfig = {"configurable": {"user_id": who}}
        return cast(Turn, graph.invoke(state, config))

    told = turn(alice, {"said": "the launch is October 17"})
    assert told["recalled"] == [
        f"{alice} believes that the launch is October 17 — source launch-agent, confidence 1.00"
    ]
    # Bob asks the same agent about Alice's memory: an abstention, never the record.
    assert turn(bob, {"about": alice})["recalled"] == []
    assert turn(bob, {})["recalled"] == []
    store.close()
