from __future__ import annotations

from datetime import UTC, datetime

from sidecar.store.schema import point_id
from sidecar.store.scope import EmptyOrAfter, Match, NotAfter, Scope


def test_tenant_is_always_the_first_condition() -> None:
    assert Scope(tenant="acme").conditions() == [Match("tenant", "acme")]


def test_current_at_bounds_both_ends_of_valid_time() -> None:
    at = datetime(2026, 10, 5, tzinfo=UTC)
    conditions = Scope(tenant="acme", current_at=at, about="launch.date").conditions()
    assert conditions == [
        Match("tenant", "acme"),
        Match("proposition.key", "launch.date"),
        NotAfter("valid_at", at),
        EmptyOrAfter("invalid_at", at),
    ]


def test_point_ids_are_scoped_by_tenant() -> None:
    record_id = "0b7c2c1e-9d1a-4c3b-8f6e-1a2b3c4d5e6f"
    assert point_id("acme", record_id) != point_id("globex", record_id)
    assert point_id("acme", record_id) == point_id("acme", record_id)
