"""Who is in a conversation at an instant, from its membership events (pure)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sidecar.messages import MembershipEvent
from sidecar.writes.membership import members_at

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def event(
    person: str, change: str, minute: int, corrects: uuid.UUID | None = None
) -> MembershipEvent:
    return MembershipEvent.model_validate(
        {
            "id": uuid.uuid4(),
            "source_id": "kitchen",
            "writer": "extractor-bot",
            "recorded_at": T0,
            "person": person,
            "change": change,
            "at": T0 + timedelta(minutes=minute),
            "corrects": corrects,
        }
    )


def test_members_are_who_joined_and_has_not_left_by_then() -> None:
    events = [
        event("ana", "join", 0),
        event("ben", "join", 0),
        event("ben", "leave", 5),
        event("cai", "join", 3),
    ]
    assert members_at(events, T0 - timedelta(minutes=1)) == []
    assert members_at(events, T0) == ["ana", "ben"]
    assert members_at(events, T0 + timedelta(minutes=3)) == ["ana", "ben", "cai"]
    assert members_at(events, T0 + timedelta(minutes=5)) == ["ana", "cai"]


def test_events_recorded_out_of_order_count_by_their_instant() -> None:
    # Ben's return is recorded before his leaving, which happened earlier.
    events = [event("ben", "join", 0), event("ben", "join", 9), event("ben", "leave", 5)]
    assert members_at(events, T0 + timedelta(minutes=6)) == []
    assert members_at(events, T0 + timedelta(minutes=9)) == ["ben"]


def test_a_correction_replaces_the_event_it_names() -> None:
    wrong = event("ben", "leave", 5)
    events = [event("ben", "join", 0), wrong, event("ben", "leave", 7, corrects=wrong.id)]
    assert members_at(events, T0 + timedelta(minutes=6)) == ["ben"]
    assert members_at(events, T0 + timedelta(minutes=7)) == []
    withdrawn = [event("ben", "join", 0), wrong, event("ben", "none", 5, corrects=wrong.id)]
    assert members_at(withdrawn, T0 + timedelta(minutes=8)) == ["ben"]


def test_a_join_and_a_leave_at_one_instant_the_later_recorded_counts() -> None:
    events = [event("ana", "join", 0), event("ana", "leave", 0)]
    assert members_at(events, T0) == []
    assert members_at(list(reversed(events)), T0) == ["ana"]
