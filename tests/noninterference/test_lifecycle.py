"""Focused two-world cases for the lifecycle: deleting or erasing what the asker may
not see changes nothing the asker observes, and neither does what an erasure does to
hidden records derived from the asker's own (harness.check: the same requests,
normalisation and comparison as the property, with worlds chosen so that each
request meets a hidden record)."""

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
HIDDEN = Ref("hidden", 0)


def bobs(seed: int, key: str | None = "k0", **extra: Any) -> Rec:
    fields: dict[str, Any] = {
        "seed": seed,
        "holder": "bob",
        "key": key,
        "value": seed % 3,
        "modality": "believed",
        "audience": ("bob", "alice"),
        "valid_at": JAN,
    }
    return Rec(**(fields | extra))


def alices_private(seed: int, **extra: Any) -> Rec:
    fields: dict[str, Any] = {
        "seed": seed,
        "holder": "alice",
        "key": "k0",
        "value": 1,
        "modality": "believed",
        "audience": ("alice",),
        "valid_at": FEB,
        "hidden_by": "audience",
    }
    return Rec(**(fields | extra))


READS = (
    Op("count", {"filter": None, "exact": True}),
    Op("scroll", {"filter": None, "limit": 1}),
    Op("retrieve", {"refs": (Ref("base", 0), Ref("base", 1), HIDDEN)}),
    Op("history", {"ref": Ref("base", 1)}),
)


@pytest.mark.parametrize(
    "erase",
    [
        Op("erase", {"ref": Ref("base", 0), "history": False}),
        Op("delete", {"refs": (Ref("base", 0),), "filter": None}),
        Op("mcp", {"tool": "forget", "ref": Ref("base", 0), "history": True}),
    ],
    ids=["DELETE", "proxy delete", "MCP forget"],
)
def test_erasing_a_premise_of_hidden_derivations_answers_alike(stores: Stores, erase: Op) -> None:
    """Bob erases his own record; in B, Alice's private records derive from it (they
    are flagged, or withdrawn): then counts, pages and reads after the erasure."""
    derived = alices_private(201, derived_from=(Ref("base", 0),), key="k1")
    # The builder writes the world: it must read a premise to derive from it.
    shared = (bobs(101, audience=("bob", "alice", "builder")), bobs(102, key=None))
    case = Case(BOB, shared, ((1, derived), (2, alices_private(202))), (erase, *READS))
    check(stores, case, all_stored=True)


@pytest.mark.parametrize(
    "attempt",
    [
        Op("erase", {"ref": HIDDEN, "history": True}),
        Op("delete", {"refs": (HIDDEN, Ref("missing")), "filter": None}),
        Op("mcp", {"tool": "forget", "ref": HIDDEN, "history": False}),
        Op("set_payload", {"refs": (HIDDEN,), "filter": None, "payload": {"confidence": 0.3}}),
    ],
    ids=["DELETE", "proxy delete", "MCP forget", "set_payload"],
)
def test_erasing_a_hidden_record_answers_as_a_missing_one_and_changes_nothing(
    stores: Stores, attempt: Op
) -> None:
    case = Case(BOB, (bobs(101),), ((0, alices_private(201)),), (attempt, *READS))
    check(stores, case, all_stored=True)


def test_a_delete_by_filter_erases_only_what_the_asker_may_see(stores: Stores) -> None:
    """A filter that matches every record of the tenant: in B, Alice's private ones
    too. Bob's answer, and what he reads after, are the same."""
    everything: dict[str, Any] = {
        "must": [{"key": "proposition.key", "match": {"any": ["k0", "k1"]}}]
    }
    delete = Op("delete", {"refs": None, "filter": everything})
    shared = (bobs(101), bobs(102, key="k1"))
    hidden = ((0, alices_private(201)), (1, alices_private(202, key="k1")))
    check(stores, Case(BOB, shared, hidden, (delete, *READS)), all_stored=True)


def test_a_new_version_beside_hidden_records_answers_alike(stores: Stores) -> None:
    """Bob rewrites his own record through the proxy (a new version), then reads."""
    mine = bobs(1001, id="chosen")
    again = bobs(1001, id="chosen", value=2)
    ops = (
        Op("upsert", {"records": (mine,)}),
        Op("upsert", {"records": (again,)}),
        Op(
            "set_payload",
            {"refs": (Ref("mine", 0),), "filter": None, "payload": {"audience": ["bob"]}},
        ),
        *READS,
    )
    check(stores, Case(BOB, (bobs(101),), ((0, alices_private(201)),), ops), all_stored=True)
