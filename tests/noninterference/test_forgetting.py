"""Forget rules and erasure by content, two worlds apart (docs/forgetting.md): records
the asker may not see change nothing the asker observes, in the answers of the forget
and erasure routes (the rule, what its erasure did now, a content request's counts,
steps and status) and in everything read or written after (harness.check: the same
requests, normalisation and comparison as the property).

The asker is no erasure officer, so a rule's erasure and a request by content reach
only what Bob may see; in store B Alice's private records carry the same value, key,
pattern or words."""

from __future__ import annotations

from typing import Any

import pytest

from tests.noninterference.harness import Stores, check
from tests.noninterference.world import Asker, Case, Op, Rec, Ref

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)

JAN, FEB = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"
BOB = Asker("bob")
# Rec.body's text is "claim {seed} on {key} is {value}": what the rules below name.
VALUE = "on k0 is 1"


def bobs(seed: int, key: str | None = "k0", **extra: Any) -> Rec:
    fields: dict[str, Any] = {
        "seed": seed,
        "holder": "bob",
        "key": key,
        "value": 1,
        "modality": "believed",
        "audience": ("bob", "alice"),
        "valid_at": JAN,
    }
    return Rec(**(fields | extra))


def alices(seed: int, key: str | None = "k0", **extra: Any) -> Rec:
    """Alice's, shared with Bob: he may see it, not erase it."""
    return bobs(seed, key, holder="alice", **extra)


def alices_private(seed: int, key: str | None = "k0", **extra: Any) -> Rec:
    fields: dict[str, Any] = {
        "seed": seed,
        "holder": "alice",
        "key": key,
        "value": 1,
        "modality": "believed",
        "audience": ("alice",),
        "valid_at": FEB,
        "hidden_by": "audience",
    }
    return Rec(**(fields | extra))


SHARED = (bobs(101), bobs(102, key="k1"), alices(103))
HIDDEN = (
    (0, alices_private(201)),
    (1, alices_private(202, key="k1")),
    (3, alices_private(203)),
    (3, bobs(204, audience=("alice",), hidden_by="audience")),
)
READS = (
    Op("recall", {"query": "claim on k0", "limit": 20, "audience": (), "mode": None}),
    Op("count", {"filter": None, "exact": True}),
    Op("scroll", {"filter": None, "limit": 2}),
    Op("retrieve", {"refs": (Ref("base", 0), Ref("base", 2), Ref("hidden", 0))}),
)
# What Bob writes after a rule: his own restatement, carrying the value and the key.
LATER = Op("write", {"records": (bobs(301, id=None), bobs(302, key="k1", id=None)), "batch": True})


@pytest.mark.parametrize(
    "rule",
    [
        {"kind": "value", "value": VALUE},
        {"kind": "key", "key": "k0"},
        {"kind": "pattern", "pattern": "on @# is #"},
        {"kind": "value", "value": "on k0"},
    ],
    ids=["value", "key", "pattern", "value-wider"],
)
def test_a_forget_rule_answers_alike_and_so_does_what_follows(
    stores: Stores, rule: dict[str, Any]
) -> None:
    """Bob forgets something his records, Alice's shared one and (in B) hidden records
    carry: the rule's answer and its erasure's counts, then his later write (masked or
    refused), his reads, the rules listed, and the rule lifted."""
    ops = (
        Op("forget_rule", {"rule": rule}),
        LATER,
        *READS,
        Op("forget_rules"),
        Op("lift", {"rule": 0}),
        Op("lift", {"rule": 1}),
        LATER,
    )
    check(stores, Case(BOB, SHARED, HIDDEN, ops), all_stored=True)


@pytest.mark.parametrize(
    "request_",
    [
        {"kind": "proposition", "key": "k0"},
        {"kind": "proposition", "key": "k1"},
        {"kind": "query", "query": "claim 201 on k0 is 1", "min_score": 0.3, "max_records": 2},
        {"kind": "query", "query": "claim on k0 is 1", "min_score": 0.0, "max_records": 1000},
        {"kind": "subject", "subject": "alice"},
    ],
    ids=["key", "key-k1", "query-near-hidden", "query-everything", "subject-refused"],
)
def test_an_erasure_by_content_answers_alike(stores: Stores, request_: dict[str, Any]) -> None:
    """Bob's request by content reaches what he may see; what he may not see is in no
    count, step or status (and a request he may not make is refused alike)."""
    ops = (Op("erasure", {"request": request_}), *READS)
    check(stores, Case(BOB, SHARED, HIDDEN, ops), all_stored=True)


def test_never_keep_through_mcp_answers_alike(stores: Stores) -> None:
    ops = (
        Op("mcp", {"tool": "never_keep", "kind": "value", "value": VALUE}),
        LATER,
        *READS,
    )
    check(stores, Case(BOB, SHARED, HIDDEN, ops), all_stored=True)
