from __future__ import annotations

import uuid
from typing import Any

from sidecar.answers import verdict
from sidecar.answers.verdict import mark_replaced
from sidecar.messages import Conflict, Item, Verdict
from tests.unit.vocabulary import VOCABULARY


def verdict_of(
    items: list[Item], others: list[Item] | None = None
) -> tuple[Verdict, list[Conflict]]:
    return verdict.verdict_of(items, VOCABULARY, others or [])


def item(holder: str, value: Any, usable_as: str = "belief", **extra: Any) -> Item:
    return Item.model_validate(
        {
            "id": uuid.uuid4(),
            "attribution": f"{holder} believes ...",
            "usable_as": usable_as,
            "obligations": ["attribute", "cite_source"],
            "status": "current",
            "content": "...",
            "as_written": "...",
            "proposition": {"text": "p", "key": "launch.date", "value": value},
            "observer_id": holder,
            "modality": "reported_belief",
            "source_id": "s",
            "confidence": 0.5,
        }
        | extra
    )


def test_nothing_disclosed_is_an_abstention() -> None:
    assert verdict_of([]) == ("abstain", [])


def test_agreeing_beliefs_are_attributed() -> None:
    verdict, conflicts = verdict_of([item("alice", "2026-10-17"), item("bob", "2026-10-17")])
    assert (verdict, conflicts) == ("attributed", [])


def test_disagreeing_holders_are_a_conflict_with_every_view() -> None:
    alice, bob = item("alice", "2026-10-17"), item("bob", "2026-10-24")
    verdict, [conflict] = verdict_of([alice, bob])
    assert verdict == "conflict"
    assert {(v.holder, v.value, v.record_id) for v in conflict.views} == {
        ("alice", "2026-10-17", alice.id),
        ("bob", "2026-10-24", bob.id),
    }


def test_an_authoritative_fact_answers_and_keeps_the_disagreement_as_context() -> None:
    fact = item("", "2026-10-24", usable_as="fact", observer_id=None, modality="world_state")
    verdict, [conflict] = verdict_of([fact, item("alice", "2026-10-17")])
    assert verdict == "answer"
    assert len(conflict.views) == 2


def test_a_belief_about_another_mind_is_not_a_competing_value() -> None:
    nested = item("alice", "2026-10-24", usable_as="nested_belief", observed_id="bob")
    assert verdict_of([item("carol", "2026-10-17"), nested])[0] == "attributed"


def test_superseded_versions_do_not_conflict_with_their_successor() -> None:
    old = item("alice", "2026-10-17", status="superseded")
    assert verdict_of([old, item("alice", "2026-10-24")])[0] == "attributed"


def test_values_of_different_types_differ() -> None:
    assert verdict_of([item("alice", 1), item("bob", "1")])[0] == "conflict"
    assert verdict_of([item("alice", 1), item("bob", True)])[0] == "conflict"


def test_equal_numbers_agree() -> None:
    assert verdict_of([item("alice", 2), item("bob", 2.0)])[0] == "attributed"


def test_integers_are_compared_exactly() -> None:
    # As floats both are 9.223372036854776e18: the conflict would be missed.
    assert verdict_of([item("alice", 2**63 - 1), item("bob", 2**63 - 2)])[0] == "conflict"
    assert verdict_of([item("alice", 2**62 + 1), item("bob", float(2**62))])[0] == "conflict"
    assert verdict_of([item("alice", 0.1), item("bob", 0.1)])[0] == "attributed"


def test_disagreeing_authoritative_facts_are_a_conflict_not_an_answer() -> None:
    a = item("", "2026-10-17", usable_as="fact", observer_id=None)
    b = item("", "2026-10-24", usable_as="fact", observer_id=None)
    verdict, [conflict] = verdict_of([a, b])
    assert verdict == "conflict"
    assert {v.record_id for v in conflict.views} == {a.id, b.id}


def test_a_version_named_as_superseded_by_another_item_is_not_current() -> None:
    # A write interrupted after storing the new version: both still look current.
    old = item("alice", "2026-10-17")
    new = item("alice", "2026-10-24", supersedes=old.id)
    settled = mark_replaced([old, new])
    assert [i.status for i in settled] == ["superseded", "current"]
    assert verdict_of(settled) == ("attributed", [])


def test_a_closed_version_keeps_the_status_of_the_instant_asked_about() -> None:
    # Found by the leak oracle: recall with include_history showed a version as
    # superseded although its successor starts only in 2100.
    old = item("alice", "2026-10-17", invalid_at="2100-01-01T00:00:00Z")
    new = item("alice", "2026-10-24", supersedes=old.id, valid_at="2100-01-01T00:00:00Z")
    assert [i.status for i in mark_replaced([old, new])] == ["current", "current"]


def test_a_fact_that_has_ended_does_not_answer() -> None:
    ended = item("", "x", usable_as="fact", observer_id=None, status="superseded")
    assert verdict_of([ended])[0] == "attributed"
