"""A caller's Qdrant filter is bounded, keyed on what the caller is shown, and scoped to
the caller's tenant before anything runs it (sidecar/filters.py)."""

from __future__ import annotations

from typing import Any

import pytest
from qdrant_client.http import models as qm

from sidecar.filters import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    FilterRefused,
    Scope,
    caller_filter,
    point_id,
    to_qdrant,
)


def field(key: str, **match: Any) -> dict[str, Any]:
    return {"key": key, "match": match}


def refused(raw: Any) -> str:
    with pytest.raises(FilterRefused) as caught:
        caller_filter(raw, "acme")
    return caught.value.reason


def test_a_filter_within_the_bounds_passes_and_keeps_its_meaning() -> None:
    raw = {
        "must": [field("observer_id", value="alice")],
        "must_not": [field("modality", any=["a"])],
    }
    checked = caller_filter(raw, "acme")
    assert checked is not None
    assert checked == qm.Filter.model_validate(raw)


def test_nesting_is_bounded() -> None:
    inner: dict[str, Any] = {"must": [field("observer_id", value="alice")]}
    for _ in range(MAX_DEPTH - 1):
        inner = {"must": [inner]}
    assert caller_filter(inner, "acme") is not None
    assert refused({"must": [inner]}) == "filter_too_deep"


def test_conditions_are_bounded() -> None:
    conditions = [field("observer_id", value=f"p{i}") for i in range(MAX_CONDITIONS)]
    assert caller_filter({"should": conditions}, "acme") is not None
    assert refused({"should": [*conditions, field("x", value="y")]}) == "filter_too_large"


def test_text_matching_is_bounded() -> None:
    words = " ".join(["w"] * 17)
    assert refused({"must": [field("as_written", text_any=words)]}) == "filter_text_too_long"
    assert refused({"must": [field("as_written", text="x" * 257)]}) == "filter_text_too_long"
    many = [field("as_written", text="x" * 200) for _ in range(6)]
    assert refused({"should": many}) == "filter_text_too_long"


def test_match_values_are_bounded_and_typed() -> None:
    assert refused({"must": [field("k", any=[str(i) for i in range(257)])]}) == "filter_too_large"
    assert refused({"must": [{"has_id": [str(i) for i in range(257)]}]}) == "filter_too_large"
    assert refused({"must": [field("k", any=["a", 1])]}) == "invalid_filter"
    assert refused({"must": [field("k", value=2**70)]}) == "invalid_filter"
    assert refused({"must": [{"key": "k", "values_count": {"gt": -1}}]}) == "invalid_filter"
    assert refused({"must": [{"key": "k", "range": {"gte": float("nan")}}]}) == "invalid_filter"


def test_keys_are_payload_paths_of_the_record_as_shown() -> None:
    assert refused({"must": [field("a..b", value="x")]}) == "invalid_filter_key"
    assert refused({"must": [field("", value="x")]}) == "invalid_filter_key"
    # Worded per reader, and the decision: nothing stored to filter on.
    assert refused({"must": [field("content", text="launch")]}) == "unfilterable_key"
    assert refused({"must": [field("whose.usable_as", value="fact")]}) == "unfilterable_key"
    # The writer's own text is served as `as_written`, stored as `content`.
    checked = caller_filter({"must": [field("as_written", text="launch")]}, "acme")
    assert checked is not None
    assert isinstance(checked.must, list)
    condition = checked.must[0]
    assert isinstance(condition, qm.FieldCondition)
    assert condition.key == "content"
    assert (
        refused(
            {"must": [{"key": "x", "geo_radius": {"center": {"lon": 1, "lat": 1}, "radius": 1}}]}
        )
        == "unsupported_filter"
    )


def test_point_ids_are_scoped_to_the_callers_tenant() -> None:
    record = "0b7c2c1e-9d1a-4c3b-8f6e-1a2b3c4d5e6f"
    checked = caller_filter({"must": [{"has_id": [record]}]}, "acme")
    assert checked is not None
    assert isinstance(checked.must, list)
    condition = checked.must[0]
    assert isinstance(condition, qm.HasIdCondition)
    assert condition.has_id == [point_id("acme", record)]


def test_the_callers_filter_runs_under_the_tenant() -> None:
    caller = caller_filter({"must": [field("observer_id", value="alice")]}, "acme")
    query = to_qdrant(Scope(tenant="acme", caller=caller))
    assert isinstance(query.must, list)
    assert query.must[0] == qm.FieldCondition(key="tenant", match=qm.MatchValue(value="acme"))
    assert query.must[-1] == caller
