from __future__ import annotations

from datetime import UTC, datetime

from qdrant_client.http import models as qm

from sidecar.store.schema import point_id
from sidecar.store.scope import AnyOf, EmptyOrAfter, Granted, Match, NotAfter, Scope


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


def test_the_wider_condition_is_the_askers_audience_and_one_of_the_scopes_own() -> None:
    # The sieve (store/planner.py) scans under it: every point the scope admits must
    # meet it, so it is one of the scope's own conditions, never more than they admit.
    asked = Scope(tenant="acme", audience_any_of=(("bob", "team"), ("carol",)), scopes=("x",))
    assert asked.wider() == AnyOf("audience", ("bob", "team"))
    assert asked.wider() in asked.conditions()


def test_no_wider_condition_where_something_else_may_admit_a_point() -> None:
    grant = Granted("bob", ("health",))
    assert Scope(tenant="acme").wider() is None
    assert Scope(tenant="acme", audience_any_of=(("bob",),), granted=((grant,),)).wider() is None
    caller = qm.Filter(must=[qm.FieldCondition(key="a", match=qm.MatchValue(value="b"))])
    assert Scope(tenant="acme", audience_any_of=(("bob",),), caller=caller).wider() is None
    assert Scope(tenant="acme", audience_any_of=(("bob",),), only=("x",)).wider() is None
    # A grant for one member only: another's entries still bound the scope.
    others = Scope(tenant="acme", audience_any_of=(("bob",), ("carol",)), granted=((), (grant,)))
    assert others.wider() == AnyOf("audience", ("bob",))
    firsts = Scope(tenant="acme", audience_any_of=(("bob",), ("carol",)), granted=((grant,),))
    assert firsts.wider() == AnyOf("audience", ("carol",))
    assert firsts.wider() in firsts.conditions()
