"""Witnessed events as records (sidecar/writes/witnessed.py): who gets which view, told to whom."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.messages import MAX_WITNESSES, WitnessedEvent
from sidecar.writes.witnessed import to_records


def event(**fields: Any) -> WitnessedEvent:
    body: dict[str, Any] = {
        "proposition": {"text": "the marble is in the basket", "key": "marble", "value": "basket"},
        "witnessed_by": ["sally", "anne"],
        "at": "2026-03-01T10:00:00Z",
        "source_id": "room-1",
    }
    return WitnessedEvent.model_validate(body | fields)


def views(records: list[Any]) -> set[tuple[str | None, str | None]]:
    return {(r.observer_id, r.observed_id) for r in records}


def test_one_record_per_witness() -> None:
    records = to_records(event(witnessed_by=["sally", "anne", "carol"]))
    # What each thinks the others think is derived when read (answers/derived.py).
    assert views(records) == {("sally", None), ("anne", None), ("carol", None)}
    assert {r.modality for r in records} == {"observed"}
    assert {tuple(r.source.participants) for r in records if r.source} == {
        ("sally", "anne", "carol")
    }


def test_a_view_is_told_to_its_holder() -> None:
    records = to_records(event(readers=["narrator"]))
    audiences = {r.observer_id: r.audience for r in records}
    assert audiences == {"sally": ["sally", "narrator"], "anne": ["anne", "narrator"]}


def test_records_say_how_they_were_derived() -> None:
    own, _ = to_records(event())
    assert own.source is not None
    assert own.source.kind == "perception"
    assert own.source.participants == ["sally", "anne"]
    assert own.source.speaker is None  # nobody said anything
    assert own.source.unnoticed is None
    assert own.provenance is not None
    assert own.provenance.method == "witnessed"
    assert [(e.kind, e.by, e.ref) for e in own.evidence] == [("witnessed", "sally", "room-1")]
    assert own.valid_at == own.evidence[0].at
    assert own.content == "sally saw that the marble is in the basket"


def test_nobody_is_told_of_an_unnoticed_witness() -> None:
    records = to_records(event(witnessed_by=["anne", "sally"], unnoticed=["sally"]))
    assert views(records) == {("anne", None), ("sally", None)}
    # Not even as someone present: Anne's record does not know Sally was at the window;
    # Sally's says nobody saw her there.
    sources = {r.observer_id: r.source for r in records if r.source}
    assert sources["anne"].participants == ["anne"]
    assert sources["anne"].unnoticed is None
    assert sources["sally"].participants == ["anne", "sally"]
    assert sources["sally"].unnoticed == ["sally"]
    assert {r.observer_id: r.audience for r in records} == {"anne": ["anne"], "sally": ["sally"]}


def test_common_knowledge_is_among_the_witnesses_everyone_saw() -> None:
    announced = event(
        witnessed_by=["alice", "bob", "carol"],
        unnoticed=["bob"],
        announcement={"speaker": "carol", "to": "group:launch-team"},
    )
    record = to_records(announced)[-1]
    assert record.source is not None
    assert record.source.participants == ["alice", "carol"]
    assert [e.by for e in record.evidence] == ["alice", "carol"]


def test_a_witnessed_announcement_adds_the_announcers_common_knowledge() -> None:
    announced = event(
        witnessed_by=["alice", "bob", "carol"],
        announcement={"speaker": "carol", "to": "group:launch-team"},
        channel="hallway",
    )
    *views_, record = to_records(announced)
    assert len(views_) == 3
    assert record.modality == "common_knowledge"
    assert record.observer_id == "carol"
    assert record.audience == ["group:launch-team"]
    assert record.source is not None
    assert (record.source.kind, record.source.speaker, record.source.channel) == (
        "announcement",
        "carol",
        "hallway",
    )
    assert [e.by for e in record.evidence] == ["alice", "bob", "carol"]


def test_witnesses_are_counted_once() -> None:
    assert len(to_records(event(witnessed_by=["sally", "anne", "sally"]))) == 2


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"witnessed_by": [f"p{i}" for i in range(MAX_WITNESSES + 1)]}, "too_long"),
        ({"witnessed_by": []}, "too_short"),
        ({"witnessed_by": ["sally", "group:launch-team"]}, "group_is_not_a_person_present"),
        ({"readers": ["group:launch-team"]}, "group_is_not_a_person_present"),
        ({"proposition": {"text": "the marble moved"}}, "proposition_key_required"),
        ({"unnoticed": ["carol"]}, "unnoticed_not_a_witness"),
        ({"announcement": {"speaker": "carol", "to": "launch-team"}}, "announcement_to_a_group"),
        (
            {"announcement": {"speaker": "group:launch-team", "to": "group:launch-team"}},
            "group_is_not_a_person_present",
        ),
    ],
)
def test_refused_before_anything_is_written(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError) as refused:
        event(**fields)
    assert error in {e["type"] for e in refused.value.errors()}


def test_the_largest_event_fits_one_write() -> None:
    from sidecar.writes.writer import MAX_BATCH

    largest = event(
        witnessed_by=[f"p{i}" for i in range(MAX_WITNESSES)],
        announcement={"speaker": "p0", "to": "group:all"},
    )
    # One record per witness, and the announcement: N + 1, not N² + 1.
    assert len(to_records(largest)) == MAX_WITNESSES + 1 <= MAX_BATCH
