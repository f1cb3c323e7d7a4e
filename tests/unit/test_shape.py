"""A record's shape (policy/shape.py): what makes two records alike to the policy."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from sidecar.audit.writer import AuditLog
from sidecar.policy.cache import LocalCache
from sidecar.policy.opa import PolicyClient
from sidecar.policy.shape import Instants, Shape, ShapeSpec, shape_of
from sidecar.reads.gate import Gate
from sidecar.settings import Settings

SPEC = ShapeSpec.parse(
    {
        "ignores": ["id", "recorded_at", "source_id", "provenance.derived_from"],
        "instants": ["valid_at", "invalid_at", "evidence.at"],
    }
)
AS_OF = datetime(2026, 6, 1, tzinfo=UTC).timestamp()
NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC).timestamp()
ASKED = Instants(as_of=AS_OF, bucket_start=NOW, bucket_end=NOW + 5)
NOW_ONLY = Instants(as_of=None, bucket_start=NOW, bucket_end=NOW + 5)


def view(**fields: Any) -> dict[str, Any]:
    return {
        "id": "r1",
        "tenant": "acme",
        "observer_id": "alice",
        "modality": "asserted",
        "source_id": "s1",
        "audience": ["alice", "bob"],
        "valid_at": "2026-01-01T00:00:00+00:00",
        "recorded_at": "2026-01-01T00:00:01+00:00",
        "provenance": {"writer": "alice", "derived_from": ["d1"]},
        "evidence": [{"kind": "acknowledgement", "by": "bob", "at": "2026-02-01T00:00:00+00:00"}],
    } | fields


def shape_or_none(instants: Instants = ASKED, **fields: Any) -> Shape | None:
    assert SPEC is not None
    return shape_of(view(**fields), SPEC, instants)


def shape(instants: Instants = ASKED, **fields: Any) -> Shape:
    got = shape_or_none(instants, **fields)
    assert got is not None
    return got


def test_records_that_differ_only_where_the_policy_does_not_look_share_a_shape() -> None:
    one = shape()
    other = shape(
        id="r2",
        source_id="s2",
        recorded_at="2026-03-01T00:00:00+00:00",
        provenance={"writer": "alice", "derived_from": ["d9", "d8"]},
        valid_at="2026-05-31T23:59:59+00:00",  # still before as_of
    )
    assert one.digest == other.digest
    assert one.id == other.id


def test_what_the_policy_reads_tells_shapes_apart() -> None:
    base = shape()
    for changed in (
        {"audience": ["alice"]},
        {"provenance": {"writer": "bob", "derived_from": ["d1"]}},
        {"modality": "known"},
        {"access_scope": "s"},
        {"evidence": [{"kind": "acknowledgement", "by": "carol", "at": "2026-02-01T00:00:00Z"}]},
    ):
        other = shape(**changed)
        assert other.digest != base.digest, changed


def test_a_time_counts_by_its_side_of_the_instant_asked_about() -> None:
    before = shape(valid_at="2026-05-31T00:00:00+00:00")
    at = shape(valid_at="2026-06-01T00:00:00+00:00")
    after = shape(valid_at="2026-06-02T00:00:00+00:00")
    assert len({before.digest, at.digest, after.digest}) == 3
    # Without an explicit as_of, by its side of now's bucket.
    past = shape(NOW_ONLY, valid_at="2026-05-31T00:00:00+00:00")
    also_past = shape(NOW_ONLY, valid_at="2026-06-02T00:00:00+00:00")
    future = shape(NOW_ONLY, valid_at="2100-01-01T00:00:00+00:00")
    assert past.digest == also_past.digest != future.digest


def test_a_time_inside_the_bucket_or_unreadable_leaves_the_record_alone() -> None:
    inside = datetime.fromtimestamp(NOW + 2, UTC).isoformat()
    assert shape_or_none(valid_at=inside) is None
    assert shape_or_none(evidence=[{"kind": "acknowledgement", "by": "bob", "at": inside}]) is None
    assert shape_or_none(invalid_at="soon") is None
    # An absent or null time is a side of its own.
    assert shape_or_none(invalid_at=None) is not None


def test_the_policy_is_asked_about_the_shape_not_the_record() -> None:
    got = shape()
    assert got.representative["id"] == got.id != "r1"
    for gone in ("source_id", "recorded_at"):
        assert gone not in got.representative
    assert got.representative["provenance"] == {"writer": "alice"}
    # The times the policy sets against as_of are the record's own.
    assert got.representative["valid_at"] == "2026-01-01T00:00:00+00:00"


def test_a_malformed_declaration_turns_shapes_off() -> None:
    assert SPEC is not None
    assert ("provenance", "derived_from") in SPEC.ignores
    malformed: list[Any] = [None, [], {"ignores": "id"}, {"ignores": [""]}, {"instants": ["a..b"]}]
    for raw in malformed:
        assert ShapeSpec.parse(raw) is None, raw


def test_shapes_are_off_by_default_and_turning_them_on_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Until what a decision reads is computed from the compiled policy, nothing justifies
    # sharing one: each record is decided alone unless the operator says otherwise.
    assert Settings().decide_shapes is False
    cache = LocalCache(10, ttl_s=1)
    with caplog.at_level(logging.WARNING, logger="whose.disclosure"):
        Gate(cast(PolicyClient, None), cache, cast(AuditLog, None), bucket_s=5)
        assert not caplog.records
        Gate(cast(PolicyClient, None), cache, cast(AuditLog, None), bucket_s=5, shapes=True)
    [line] = caplog.records
    assert "trusted as written" in line.getMessage()
