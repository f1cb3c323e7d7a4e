from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sidecar.record import MemoryRecord, Stored, uuid_text

BASE = {
    "content": "Alice believes the launch is October 17",
    "observer_id": "alice",
    "source_id": "private-session-42",
    "modality": "reported_belief",
    "audience": ["alice"],
}


def test_world_state_may_have_no_observer() -> None:
    record = MemoryRecord.model_validate(
        {k: v for k, v in BASE.items() if k != "observer_id"} | {"modality": "world_state"}
    )
    assert record.observer_id is None


def test_every_other_modality_needs_an_observer() -> None:
    with pytest.raises(ValidationError, match="observer_id is required"):
        MemoryRecord.model_validate({k: v for k, v in BASE.items() if k != "observer_id"})


def test_observed_attitude_needs_observed_id() -> None:
    with pytest.raises(ValidationError, match="observed_attitude needs observed_id"):
        MemoryRecord.model_validate(BASE | {"observed_attitude": "knows"})


def test_unknown_fields_are_refused_not_dropped() -> None:
    with pytest.raises(ValidationError, match="extra_forbidden"):
        MemoryRecord.model_validate(BASE | {"audiance": ["bob"]})


def test_timestamps_are_stored_as_utc() -> None:
    record = MemoryRecord.model_validate(
        BASE | {"valid_at": "2026-10-01T11:00:00+02:00", "invalid_at": "2026-10-02T00:00:00"}
    )
    payload = record.payload()
    assert payload["valid_at"] == "2026-10-01T09:00:00Z"
    assert payload["invalid_at"] == "2026-10-02T00:00:00Z"


def test_end_before_start_is_refused() -> None:
    with pytest.raises(ValidationError, match="invalid_at is before valid_at"):
        MemoryRecord.model_validate(
            BASE | {"valid_at": "2026-10-02T00:00:00Z", "invalid_at": "2026-10-01T00:00:00Z"}
        )


def test_payload_leaves_absent_fields_absent() -> None:
    payload = MemoryRecord.model_validate(BASE).payload()
    assert "observed_id" not in payload
    assert "invalid_at" not in payload


def test_status_depends_on_when_the_record_ended() -> None:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    started = {"id": str(uuid.uuid4()), "valid_at": (now - timedelta(days=9)).isoformat()}

    def status_of(fields: dict[str, str]) -> str:
        stored = Stored.from_payload(started | fields)
        assert stored is not None
        return stored.status_at(now)

    assert status_of({}) == "current"
    ended = {"invalid_at": (now - timedelta(days=1)).isoformat()}
    assert status_of(ended) == "superseded"
    ends_later = {"invalid_at": (now + timedelta(days=1)).isoformat()}
    assert status_of(ends_later) == "current"


_spellings = st.uuids().flatmap(
    lambda u: st.sampled_from(
        [
            str(u),
            str(u).upper(),
            u.hex,
            "{" + str(u) + "}",
            f"urn:uuid:{u}",
            str(u)[:-1],
            str(u) + "0",
        ]
    )
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_spellings, st.text(max_size=40), st.integers()))
def test_a_stored_id_reads_as_uuid_spells_it_or_not_at_all(value: object) -> None:
    try:
        expected: str | None = str(uuid.UUID(str(value)))
    except ValueError:
        expected = None
    try:
        got: str | None = uuid_text(value)
    except ValueError:
        got = None
    assert got == expected
