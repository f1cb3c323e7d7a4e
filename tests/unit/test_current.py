"""One current view per mind, per question (sidecar/answers/current.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sidecar.answers.current import in_mind, latest, marked, superseded
from sidecar.messages import Item

NOW = datetime(2026, 4, 1, tzinfo=UTC)


def item(holder: str, value: str, valid_at: str, **extra: Any) -> Item:
    return Item.model_validate(
        {
            "id": uuid.uuid4(),
            "attribution": "...",
            "usable_as": "belief",
            "obligations": ["attribute", "cite_source"],
            "status": "current",
            "content": "...",
            "as_written": "...",
            "proposition": {"text": "p", "key": "k", "value": value},
            "observer_id": holder,
            "modality": "asserted",
            "source_id": "s",
            "confidence": 1.0,
            "valid_at": valid_at,
        }
        | extra
    )


SAID = item("alice", "17", "2026-01-01T00:00:00Z", act="said")  # told to bob
SAW = item("alice", "24", "2026-02-01T00:00:00Z", modality="observed")  # alone


def test_a_later_view_supersedes_an_earlier_statement_in_the_holders_mind() -> None:
    assert superseded([SAID, SAW], (), NOW) == {SAID.id}
    assert in_mind([SAID, SAW], (), NOW) == [SAW]
    assert [i.status for i in marked([SAID, SAW], (), NOW)] == ["superseded", "current"]


def test_what_others_were_told_stays_what_they_were_told() -> None:
    # Bob may be shown the statement only: nothing he may not see shapes it.
    assert superseded([SAID], (), NOW) == set()
    assert in_mind([SAID], (), NOW) == [SAID]


def test_only_views_started_by_the_instant_asked_about_count() -> None:
    assert superseded([SAID, SAW], (), datetime(2026, 1, 15, tzinfo=UTC)) == set()


def test_the_head_takes_the_place_of_a_superseded_version_from_what_else_may_be_shown() -> None:
    linked = SAW.model_copy(update={"supersedes": uuid.uuid4()})
    [head] = in_mind([SAID], [linked], NOW)
    assert head.id == SAW.id
    assert head.supersedes is None  # a link to a version this answer does not list
    # Unless the read's filters would not show it.
    assert in_mind([SAID], [linked], NOW, fits=lambda i: i.modality == "asserted") == []


def test_lines_are_per_holder_chain_of_minds_key_and_speech_heard() -> None:
    others = [
        item("bob", "x", "2026-03-01T00:00:00Z"),
        item("alice", "x", "2026-03-01T00:00:00Z", observed_id="bob"),
        item("alice", "x", "2026-03-01T00:00:00Z", proposition={"text": "q", "key": "other"}),
        item("alice", "x", "2026-03-01T00:00:00Z", observed_id="bob", act="heard"),
    ]
    assert superseded([SAID], others, NOW) == set()
    ties = [SAID, item("alice", "18", "2026-01-01T00:00:00Z")]
    assert superseded(ties, (), NOW) == set()  # started together: both current
    assert len(latest(ties, NOW)) == 1
