"""Views derived at read time (sidecar/answers/derived.py): what a perception and a
statement imply, each line from its latest record, within a budget."""

from __future__ import annotations

import uuid
from typing import Any

from sidecar.answers.derived import (
    Line,
    heard_chain,
    latest_per_line,
    latest_views,
    line_of,
    view,
    views,
)
from sidecar.record import Stored

T0, T1 = "2026-03-01T10:00:00+00:00", "2026-03-01T10:05:00+00:00"


def stored(**payload: Any) -> Stored:
    base = {
        "id": str(uuid.uuid4()),
        "tenant": "acme",
        "proposition": {"text": "the marble is in the basket", "key": "m", "value": "basket"},
        "source_id": "room",
        "audience": [payload.get("observer_id", "x"), "narrator"],
        "access_scope": "s1",
        "valid_at": T0,
    }
    record = Stored.from_payload(base | payload)
    assert record is not None
    return record


def saw(holder: str, there: list[str], **extra: Any) -> Stored:
    source: dict[str, Any] = {"kind": "perception", "participants": there}
    if extra.pop("unnoticed", False):
        source["unnoticed"] = [holder]
    return stored(
        observer_id=holder,
        modality="observed",
        provenance={"method": "witnessed", "writer": "relay"},
        source=source,
        **extra,
    )


def said(speaker: str, hearers: list[str], **extra: Any) -> Stored:
    present = [speaker, *hearers]
    return stored(
        observer_id=speaker,
        modality="asserted",
        act="said",
        source={"kind": "conversation", "speaker": speaker, "participants": present},
        audience=present,
        **extra,
    )


def test_a_perception_implies_its_holders_views_of_everyone_seen_to_any_depth() -> None:
    base = saw("anne", ["sally", "anne", "carol"])
    derived = view(base, "anne", ["carol", "sally", "anne", "sally"])
    assert derived is not None
    payload = derived.payload
    assert (payload["observer_id"], payload["observed_id"]) == ("anne", "carol")
    assert payload["observed_path"] == ["carol", "sally", "anne", "sally"]
    assert payload["observed_attitude"] == "believes"
    # Seen by exactly whoever may see the base: its tenant, audience, scope and times.
    for name in ("tenant", "audience", "access_scope", "valid_at", "proposition", "source"):
        assert payload[name] == base.payload[name]
    assert payload["provenance"] == {
        "writer": "relay",
        "method": "derived",
        "derived_from": [base.id],
    }
    assert derived.id != base.id
    assert view(base, "anne", ["carol", "sally", "anne", "sally"]) == derived  # a stable id
    assert "invalid_at" not in payload
    assert "supersedes" not in payload


def test_what_a_perception_does_not_imply() -> None:
    base = saw("anne", ["sally", "anne"])
    assert view(base, "anne", []) is None
    assert view(base, "anne", ["anne"]) is None  # no line of anne's own view of herself
    assert view(base, "anne", ["sally", "sally"]) is None
    assert view(base, "anne", ["bob"]) is None  # bob was not there
    assert view(base, "sally", ["anne"]) is None  # sally's view is in sally's record
    assert view(base, "anne", ["sally"], heard=True) is None


def test_an_unnoticed_holder_knows_nobody_saw_them() -> None:
    base = saw("sally", ["anne", "sally"], unnoticed=True)
    assert view(base, "sally", ["anne"]) is not None
    assert view(base, "sally", ["anne", "sally"]) is None


def test_a_statement_implies_what_each_hearer_heard_and_thinks() -> None:
    base = said("alice", ["bob", "carol"])
    heard = view(base, "bob", ["alice"], heard=True)
    assert heard is not None
    assert (heard.payload["act"], heard.payload["observed_id"]) == ("heard", "alice")
    model = view(base, "bob", ["alice"])
    assert model is not None
    assert "act" not in model.payload
    assert model.payload["observed_attitude"] == "believes"
    assert view(base, "carol", ["bob", "alice"]) is not None
    # Carol thinks Bob heard Alice say it (the statement was public among them).
    told = view(base, "carol", ["bob", "alice"], heard=True)
    assert told is not None
    assert (
        told.payload["content"]
        == "carol thinks that bob heard alice say that the marble is in the basket"
    )
    assert heard_chain(told.payload) == ("bob",)
    # Nobody heard themselves, and a hearer's chain never names the speaker.
    assert view(base, "carol", ["alice", "alice"], heard=True) is None
    assert view(base, "carol", ["alice", "bob", "alice"], heard=True) is None
    assert view(base, "dave", ["alice"]) is None
    assert view(base, "alice", ["alice"]) is None
    # A claim about a further mind: the hearer's view ends with it.
    about = said("alice", ["bob"], observed_id="carol", observed_attitude="knows")
    nested = view(about, "bob", ["alice", "carol"])
    assert nested is not None
    assert nested.payload["observed_attitude"] == "knows"
    assert view(about, "bob", ["alice"]) is None


def test_views_enumerates_shallow_first_and_latest_views_keeps_each_lines_latest() -> None:
    first = saw("anne", ["sally", "anne"])
    later = saw("anne", ["anne"], valid_at=T1)
    assert [p for _, p, _ in views(first, 2)] == [("sally",), ("sally", "anne")]
    assert list(views(later, 3)) == []
    kept, cut = latest_views([later, first], 2, budget=10)
    assert not cut
    assert {line_of(v.payload) for v in kept} == {
        Line("anne", ("sally",), "m"),
        Line("anne", ("sally", "anne"), "m"),
    }
    kept, cut = latest_views([first], 4, budget=2)
    assert cut
    assert len(kept) == 2
    # Two views of one line: the latest base's.
    again = saw("anne", ["sally", "anne"], valid_at=T1)
    derived = [view(first, "anne", ["sally"]), view(again, "anne", ["sally"])]
    [latest] = latest_per_line([d for d in derived if d is not None])
    assert latest.valid_at == again.valid_at


def test_a_record_with_no_holder_or_key_is_nobodys_line() -> None:
    assert line_of({"observer_id": "a"}) is None
    assert line_of({"proposition": {"key": "k"}}) is None
    assert line_of(
        {"observer_id": "a", "proposition": {"key": "k"}, "act": "heard", "observed_id": "b"}
    ) == Line("a", ("b",), "k", heard=True)
