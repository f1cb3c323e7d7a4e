"""Erasure on both store backends, with a real OPA (writes/eraser.py): the record leaves
the store, its chain closes over it, its derivations stop being current, the audit
log says who erased what and why without the claim, and a record the asker may not
see is left alone exactly as a missing one."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from sidecar.auth.identity import Identity
from sidecar.errors import ErasureRefused
from tests.integration.lifecycle import Core, belief, ids, own_opa, set_data, world

__all__ = ["own_opa", "world"]

ALICE, BOB, CAROL = (Identity(n, "acme") for n in ("alice", "bob", "carol"))


def keyed(holder: str, value: str, audience: list[str], **extra: Any) -> Any:
    return belief(
        holder,
        f"the venue is {value}",
        audience,
        proposition={"text": f"the venue is {value}", "key": "venue", "value": value},
        **extra,
    )


async def test_the_holder_erases_a_record_and_it_leaves_the_store(world: Core) -> None:
    [note] = await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    [other] = await world.write("alice", belief("alice", "the budget is 2M", ["alice"]))
    erased = await world.eraser.forget(ALICE, ids(note), "test", reason="ticket-7")
    assert erased.erased == [str(note.id)]
    assert await world.stored(note.id) == {}
    assert [r.id for r in await world.everything()] == [str(other.id)]
    assert await world.seen_by("alice", note.id) == {}


async def test_an_id_the_asker_may_not_see_is_left_alone_as_a_missing_one(world: Core) -> None:
    [note] = await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    hidden = await world.eraser.forget(BOB, ids(note), "test")
    missing = await world.eraser.forget(BOB, [uuid.uuid4()], "test")
    assert hidden.erased == missing.erased == []
    assert str(note.id) in await world.stored(note.id)


async def test_an_audience_member_may_not_erase_the_holders_record(world: Core) -> None:
    [note] = await world.write(
        "alice", belief("alice", "the party is on the roof", ["alice", "bob"])
    )
    with pytest.raises(ErasureRefused) as refused:
        await world.eraser.forget(BOB, ids(note), "test")
    assert refused.value.reasons == [{"id": str(note.id), "reasons": ["not_holder_or_writer"]}]
    assert str(note.id) in await world.stored(note.id)


async def test_a_legal_hold_stops_the_erasure(world: Core, own_opa: str) -> None:
    [note] = await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    set_data(own_opa, "holds", {"tenants": {"acme": {"records": [], "subjects": ["alice"]}}})
    with pytest.raises(ErasureRefused) as refused:
        await world.eraser.forget(ALICE, ids(note), "test")
    assert refused.value.reasons == [{"id": str(note.id), "reasons": ["legal_hold"]}]
    assert str(note.id) in await world.stored(note.id)


async def test_the_chain_closes_over_an_erased_version(world: Core) -> None:
    [a] = await world.write("alice", keyed("alice", "Hall A", ["alice"]))
    [b] = await world.write("alice", keyed("alice", "Hall B", ["alice"]))
    [c] = await world.write("alice", keyed("alice", "Hall C", ["alice"]))
    await world.eraser.forget(ALICE, ids(b), "test")
    stored = await world.stored(a.id, b.id, c.id)
    assert set(stored) == {str(a.id), str(c.id)}
    assert stored[str(a.id)]["superseded_by"] == str(c.id)
    assert stored[str(a.id)]["invalid_at"] == stored[str(c.id)]["valid_at"]
    assert stored[str(c.id)]["supersedes"] == str(a.id)
    # Erasing the current version makes the one before it current again.
    await world.eraser.forget(ALICE, ids(c), "test")
    [(_, alone)] = (await world.stored(a.id)).items()
    assert "superseded_by" not in alone
    assert "invalid_at" not in alone
    assert (await world.seen_by("alice", a.id))[str(a.id)].status == "current"


async def test_history_erases_every_version(world: Core) -> None:
    [a] = await world.write("alice", keyed("alice", "Hall A", ["alice"]))
    [b] = await world.write("alice", keyed("alice", "Hall B", ["alice"]))
    erased = await world.eraser.forget(ALICE, ids(b), "test", history=True)
    assert sorted(erased.erased) == sorted([str(a.id), str(b.id)])
    assert await world.stored(a.id, b.id) == {}


def summary_of(*premises: Any, audience: list[str]) -> Any:
    return belief(
        "alice",
        "the venue was chosen",
        audience,
        provenance={"method": "summary", "derived_from": [str(p) for p in premises]},
    )


async def test_a_derivation_of_an_erased_premise_is_flagged_not_current(world: Core) -> None:
    [premise] = await world.write("alice", keyed("alice", "Hall A", ["alice", "bob"]))
    [summary] = await world.write("alice", summary_of(premise.id, audience=["alice", "bob"]))
    await world.eraser.forget(ALICE, ids(premise), "test")
    item = (await world.seen_by("bob", summary.id))[str(summary.id)]
    assert item.status == "stale"
    assert "premise_erased" in item.notes
    [mark] = (await world.stored(summary.id))[str(summary.id)]["premise_changes"]
    assert (mark["premise"], mark["change"]) == (str(premise.id), "erased")


async def test_the_policy_may_erase_derivations_with_their_premise(
    world: Core, own_opa: str
) -> None:
    set_data(own_opa, "config/erasure/on_derived", "erase")
    [premise] = await world.write("alice", keyed("alice", "Hall A", ["alice"]))
    [summary] = await world.write("alice", summary_of(premise.id, audience=["alice"]))
    [kept] = await world.write("alice", belief("alice", "the catering is booked", ["alice"]))
    await world.eraser.forget(ALICE, ids(premise), "test")
    assert await world.stored(premise.id, summary.id) == {}
    assert str(kept.id) in await world.stored(kept.id)


async def test_an_erasure_answers_only_what_was_named_not_its_cascade(
    world: Core, own_opa: str
) -> None:
    # Bob's own summary of Alice's shared premise: Alice may not see it. Erasing her
    # premise erases his summary too (on_derived = erase), but her answer names only her
    # record, as it would were his summary never written (issue 35); the audit entry
    # keeps the cascade.
    set_data(own_opa, "config/erasure/on_derived", "erase")
    [premise] = await world.write("alice", keyed("alice", "Hall A", ["alice", "bob"]))
    [bobs] = await world.write(
        "bob",
        belief(
            "bob",
            "the venue was chosen",
            ["bob"],
            provenance={"method": "summary", "derived_from": [str(premise.id)]},
        ),
    )
    assert await world.seen_by("alice", bobs.id) == {}
    erased = await world.eraser.forget(ALICE, ids(premise), "test")
    assert erased.erased == [str(premise.id)]
    assert await world.stored(premise.id, bobs.id) == {}
    [entry] = await world.entries(purpose="erase")
    assert {(w.id, w.outcome) for w in entry.written} == {
        (str(premise.id), "erased"),
        (str(bobs.id), "erased"),
    }


async def test_the_policy_may_withdraw_derivations(world: Core, own_opa: str) -> None:
    set_data(own_opa, "config/erasure/on_derived", "withdraw")
    [premise] = await world.write("alice", keyed("alice", "Hall A", ["alice"]))
    [summary] = await world.write("alice", summary_of(premise.id, audience=["alice"]))
    await world.eraser.forget(ALICE, ids(premise), "test")
    item = (await world.seen_by("alice", summary.id))[str(summary.id)]
    assert item.status == "superseded"
    assert item.invalid_at is not None


async def test_a_superseded_premise_makes_its_derivation_stale(world: Core) -> None:
    [venue] = await world.write("alice", keyed("alice", "Hall A", ["alice", "bob"]))
    [summary] = await world.write("alice", summary_of(venue.id, audience=["alice", "bob"]))
    assert (await world.seen_by("bob", summary.id))[str(summary.id)].status == "current"
    await world.write("alice", keyed("alice", "Hall B", ["alice", "bob"]))
    item = (await world.seen_by("bob", summary.id))[str(summary.id)]
    assert item.status == "stale"
    assert "premise_superseded" in item.notes


async def test_the_audit_entry_says_who_what_and_why_without_the_claim(world: Core) -> None:
    [note] = await world.write("alice", belief("alice", "the launch is October 17", ["alice"]))
    await world.eraser.forget(ALICE, ids(note), "test", reason="ticket-7")
    [entry] = await world.entries(purpose="erase")
    assert entry.asker == "alice"
    assert entry.erasure is not None
    assert entry.erasure.reason == "ticket-7"
    assert [(w.id, w.outcome, w.reasons) for w in entry.written] == [
        (str(note.id), "erased", ["requested"])
    ]
    assert "October 17" not in entry.model_dump_json()
    assert [e.decision_id for e in await world.entries(record=str(note.id), outcome="erased")] == [
        entry.decision_id
    ]
