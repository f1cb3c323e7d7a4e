"""Noninterference through the LangGraph store (sidecar/client/langgraph.py).

The store narrows, pages and bounds on the client side what the sidecar disclosed
(search below (tenant, holder), filters, offsets, the listing's scan bound, the newest
of a key's views). Two sidecars, A and B, hold the same memories of Alice's; B also
holds records Alice may not see, placed to collide with hers: Bob's memories under the
same paths and keys, and a relay's record held by Alice but told to Bob only, under her
very key. Every read of Alice's store answers alike on both, but for the times and ids
the two writes were given.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from langgraph.store.base import GetOp, Item, ListNamespacesOp, MatchCondition, Op, SearchOp

from sidecar.client import DevIdentity, WhoseClient
from sidecar.client.langgraph import ANNOTATION, WhoseStore, memory_key
from tests.conftest import Backend, start_sidecar, stop

SECRET = "noninterference-langgraph-secret-32-bytes"
ALICE = {
    ("memories",): {
        "launch": {"text": "the launch is October 17", "n": 1},
        "venue": {"text": "the venue is Hall A", "n": 2},
    },
    ("memories", "food"): {"pizza": {"text": "likes pizza with olives", "n": 3}},
    ("prefs",): {"theme": {"text": "prefers the dark theme", "n": 4}},
}


def token(who: str) -> str:
    return jwt.encode({"sub": who, "tenant": "acme", "exp": int(time.time()) + 3600}, SECRET)


def remember(base: str, who: str, memories: dict[tuple[str, ...], dict[str, Any]]) -> None:
    store = WhoseStore(base, token=token(who), fields=["text"])
    for path, items in memories.items():
        for key, value in items.items():
            store.put(("acme", who, *path), key, value)
    store.close()


def hide(base: str) -> None:
    """What Alice may not see: Bob's memories where hers are, and her key told to Bob."""
    remember(base, "bob", ALICE)
    remember(base, "bob", {("memories",): {"secret": {"text": "the launch moved", "n": 0}}})
    relayed = {
        "content": '{"n": 9, "text": "the launch is cancelled"}',
        "proposition": {
            "text": "the launch is cancelled",
            "key": memory_key("alice", ["memories"], "launch"),
        },
        "observer_id": "alice",
        "source_id": "langgraph",
        "source": {"kind": "conversation", "speaker": "alice", "channel": "langgraph"},
        "modality": "believed",
        "audience": ["bob"],
        "provenance": {"method": "langgraph"},
    }
    with WhoseClient(base, dev=DevIdentity("extractor-bot", "acme")) as relay:
        relay.remember(relayed)


@pytest.fixture(scope="module")
def worlds(
    store_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    started = []
    for name in ("a", "b"):
        env = {"WHOSE_JWT_HS256_SECRET": SECRET, **store_backend.env()}
        started.append(start_sidecar(tmp_path_factory.mktemp(f"langgraph-ni-{name}"), env=env))
    (a, process_a), (b, process_b) = started
    try:
        for base in (a, b):
            remember(base, "alice", ALICE)
        hide(b)
        yield a, b
    finally:
        stop(process_a)
        stop(process_b)


READS: list[Op] = [
    GetOp(("acme", "alice", "memories"), "launch"),
    GetOp(("acme", "alice", "memories"), "secret"),
    GetOp(("acme", "alice", "memories", "food"), "pizza"),
    SearchOp(("acme", "alice"), query="when is the launch?"),
    SearchOp(("acme", "alice"), query="when is the launch?", limit=2, offset=1),
    SearchOp(("acme", "alice", "memories"), query="the launch", filter={"n": {"$lte": 2}}),
    SearchOp(("acme",), query="the launch", limit=3),
    # Without a query: the listing, in record id order (the ids a write was given).
    SearchOp(("acme", "alice")),
    SearchOp(("acme",), filter={"n": {"$gte": 0}}),
    ListNamespacesOp(),
    ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("acme", "*", "memories")),)),
    ListNamespacesOp(max_depth=3, limit=2, offset=1),
]


def seen(result: Any) -> Any:
    """A result without what the two writes were given: times and record ids."""
    if isinstance(result, list):
        return [seen(entry) for entry in result]
    if isinstance(result, Item):
        value = dict(result.value)
        whose = {k: v for k, v in value.pop(ANNOTATION).items() if k != "record_id"}
        score = getattr(result, "score", None)
        return (result.namespace, result.key, value, whose, score and round(score, 6))
    return result


@pytest.mark.parametrize("op", READS, ids=repr)
def test_alice_reads_alike_whatever_she_may_not_see(worlds: tuple[str, str], op: Op) -> None:
    a, b = worlds
    answers = []
    for base in (a, b):
        store = WhoseStore(base, token=token("alice"), fields=["text"], recall_limit=4)
        answers.append(seen(store.batch([op])[0]))
        store.close()
    if isinstance(op, SearchOp) and op.query is None:
        # Listed in id order, and ids are drawn at random by each write.
        answers = [sorted(answer, key=repr) for answer in answers]
    assert answers[0] == answers[1]
    # The comparison compares something: Alice's own memories are there.
    if isinstance(op, GetOp) and op.key != "secret":
        assert answers[0] is not None


def test_alice_pages_alike(worlds: tuple[str, str]) -> None:
    answers = []
    for base in worlds:
        store = WhoseStore(base, token=token("alice"), fields=["text"], scan_limit=8)
        pages = [store.search(("acme", "alice"), limit=3, offset=at) for at in range(0, 9, 3)]
        every = [item for page in pages for item in page]
        answers.append(([len(page) for page in pages], sorted(seen(every), key=repr)))
        store.close()
    assert answers[0] == answers[1]
    assert answers[0][0] == [3, 1, 0]


def test_the_hidden_records_are_there(worlds: tuple[str, str]) -> None:
    # Else the test above would compare two equal worlds.
    _, b = worlds
    bob = WhoseStore(b, token=token("bob"), fields=["text"])
    launch = bob.get(("acme", "alice", "memories"), "launch")
    assert launch is not None
    assert launch.value["text"] == "the launch is cancelled"
    assert bob.get(("acme", "bob", "memories"), "secret") is not None
    bob.close()
