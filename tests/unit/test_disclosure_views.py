"""The read path makes each record's policy view once per request, for its cache key and
OPA's input alike; a record read again meanwhile is seen as read then."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sidecar.auth.identity import Identity
from sidecar.policy.contract import DisclosureQuestion, policy_view
from sidecar.policy.decider import Consultation
from sidecar.record import Stored

NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
QUESTION = DisclosureQuestion(Identity("carol", "acme"), [], "recall", NOW)
ID = "3f0c2a4e-8a1b-4c55-9d7e-2b6a1f0e9c11"


def stored(**fields: Any) -> Stored:
    payload = {
        "id": ID,
        "tenant": "acme",
        "content": "carol believes the launch is October 17",
        "proposition": {"text": "the launch is October 17", "key": "launch.date"},
        "audience": ["carol"],
        "valid_at": "2026-10-01T09:00:00Z",
    } | fields
    record = Stored.from_payload(payload)
    assert record is not None
    return record


def disclosure() -> Consultation:
    # The decider is not reached by `_view`; the policy and the cache are not needed here.
    return Consultation(decider=None, question=QUESTION)  # type: ignore[arg-type]


def test_a_view_is_what_the_policy_reads_and_is_made_once_per_payload() -> None:
    asked = disclosure()
    record = stored()
    view = asked._view(record)
    assert view == policy_view(record.payload)
    assert "content" not in view
    assert view["proposition"] == {"key": "launch.date"}
    assert asked._view(record) is view


def test_a_record_read_again_with_new_links_gets_a_view_of_what_was_read() -> None:
    asked = disclosure()
    before = stored()
    asked._view(before)
    # The same version read again after a write closed it: same id, new payload.
    after = stored(invalid_at="2026-12-01T00:00:00Z", superseded_by=ID.replace("3f", "4f", 1))
    view = asked._view(after)
    assert view["invalid_at"] == "2026-12-01T00:00:00Z"
    assert view["superseded_by"] == after.payload["superseded_by"]
