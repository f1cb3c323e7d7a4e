"""A caller's Qdrant filter is bounded, keyed on what the caller is shown, and scoped to
the caller's tenant before anything runs it (sidecar/http/qdrant/caller_filter.py)."""

from __future__ import annotations

from typing import Any

import pytest
from qdrant_client.http import models as qm

from sidecar.errors import FilterRefused
from sidecar.http.qdrant.caller_filter import (
    MAX_CONDITIONS,
    MAX_DEPTH,
    caller_filter,
    index_path,
    stored_key,
)
from sidecar.store.schema import point_id
from sidecar.store.scope import Scope, to_qdrant


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
    one_more = field("source_id", value="y")
    assert refused({"should": [*conditions, one_more]}) == "filter_too_large"


def test_text_matching_is_bounded() -> None:
    words = " ".join(["w"] * 17)
    assert refused({"must": [field("as_written", text_any=words)]}) == "filter_text_too_long"
    assert refused({"must": [field("as_written", text="x" * 257)]}) == "filter_text_too_long"
    many = [field("as_written", text="x" * 200) for _ in range(6)]
    assert refused({"should": many}) == "filter_text_too_long"


def test_match_values_are_bounded_and_typed() -> None:
    many = [str(i) for i in range(257)]
    assert refused({"must": [field("source_id", any=many)]}) == "filter_too_large"
    assert refused({"must": [{"has_id": many}]}) == "filter_too_large"
    five_lists = [field("source_id", any=many[:250]) for _ in range(5)]
    assert refused({"should": five_lists}) == "filter_too_large"
    assert refused({"must": [field("source_id", any=["a", 1])]}) == "invalid_filter"
    assert refused({"must": [field("source_id", value=2**70)]}) == "invalid_filter"
    assert refused({"must": [{"key": "audience", "values_count": {"gt": -1}}]}) == "invalid_filter"
    assert refused({"must": [{"key": "confidence", "range": {"gte": float("nan")}}]}) == (
        "invalid_filter"
    )


def test_only_indexed_fields_can_be_filtered_on() -> None:
    # Elsewhere the engine reads every point's payload, about 10 µs a point each.
    assert refused({"must": [field("proposition.value", value="x")]}) == "unindexed_key"
    assert refused({"must": [{"is_empty": {"key": "source.role"}}]}) == "unindexed_key"
    nested = {"nested": {"key": "evidence", "filter": {"must": [field("note", value="x")]}}}
    assert refused({"must": [nested]}) == "unindexed_key"
    # Counting an array's elements is not indexed either.
    assert refused({"must": [{"key": "evidence[].ref", "values_count": {"gt": 1}}]}) == (
        "unindexed_key"
    )
    within = {"nested": {"key": "evidence", "filter": {"must": [field("by", value="bob")]}}}
    for ok in (
        field("evidence[].by", value="bob"),
        within,
        {"key": "recorded_at", "range": {"gt": "2026-01-01T00:00:00Z"}},
        {"is_empty": {"key": "superseded_by"}},
        {"key": "audience", "values_count": {"gt": 1}},
    ):
        assert caller_filter({"must": [ok]}, "acme") is not None, ok


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


def test_text_matches_only_the_indexed_text() -> None:
    # Elsewhere the engine would scan every point's payload for the words.
    assert refused({"must": [field("source_id", text="session")]}) == "text_match_not_indexed"
    assert refused({"must": [field("proposition.key", text_any="a b")]}) == "text_match_not_indexed"
    nested = {"nested": {"key": "evidence", "filter": {"must": [field("ref", text="x")]}}}
    assert refused({"must": [nested]}) == "text_match_not_indexed"
    assert caller_filter({"must": [field("as_written", phrase="the launch")]}, "acme") is not None


OWN = {
    "document.metadata.source": qm.PayloadSchemaType.KEYWORD,
    "document.metadata.summary": qm.PayloadSchemaType.TEXT,
}


def test_a_stacks_own_indexed_metadata_keys_as_each_library_names_them() -> None:
    """LangChain `metadata.x`, Haystack `meta.x`, LlamaIndex and plain `x`: the stored
    `document.metadata.x`, only where the stack made an index on it."""
    for key in ("metadata.source", "meta.source", "source"):
        checked = caller_filter({"must": [field(key, value="a.md")]}, "acme", OWN)
        assert checked is not None
        [condition] = checked.must or []
        assert isinstance(condition, qm.FieldCondition)
        assert condition.key == "document.metadata.source"
    with pytest.raises(FilterRefused) as caught:
        caller_filter({"must": [field("metadata.team", value="x")]}, "acme", OWN)
    assert caught.value.reason == "unindexed_key"
    assert "source (yours)" in str(caught.value)
    # Without the stack's indexes (the whose collection), refused as before.
    assert refused({"must": [field("metadata.source", value="a.md")]}) == "unindexed_key"
    # Text matching on the stack's own text index, and on no other of its keys.
    text = caller_filter({"must": [field("summary", text="launch")]}, "acme", OWN)
    assert text is not None
    with pytest.raises(FilterRefused):
        caller_filter({"must": [field("source", text="launch")]}, "acme", OWN)


def test_a_record_field_comes_before_a_stacks_key_of_the_same_name() -> None:
    own = OWN | {"document.metadata.observer_id": qm.PayloadSchemaType.KEYWORD}
    checked = caller_filter({"must": [field("observer_id", value="alice")]}, "acme", own)
    assert checked is not None
    [condition] = checked.must or []
    assert isinstance(condition, qm.FieldCondition)
    assert condition.key == "observer_id"
    # And so an index asked on it is whose's own; LlamaIndex's `doc_id` is the document id.
    assert index_path("observer_id") is None
    assert index_path("doc_id") is None
    assert index_path("meta.source") == "document.metadata.source"
    assert stored_key("metadata.source", OWN) == "document.metadata.source"
    assert stored_key("metadata.team", OWN) == "metadata.team"
    assert stored_key("doc_id", OWN) == "document.id"


@pytest.mark.parametrize(
    "condition",
    [
        {"key": "source_id", "match": {"value": "s1"}, "is_empty": True},
        {"key": "confidence", "range": {"gt": 0.5}, "is_null": False},
        {"key": "categories", "values_count": {"gte": 1}, "match": {"any": ["x"]}},
        {"key": "source_id", "is_empty": False, "is_null": False},
    ],
)
def test_a_field_condition_tests_one_thing(condition: dict[str, Any]) -> None:
    # The engine decides one with two tests by its index where there is one and by the
    # payload otherwise, and the two disagree: `source_id` value s1 and is_empty
    # selected nothing unindexed, every s1 point indexed (a stack's shard is indexed
    # soon after it is made; store/edge.py).
    assert refused({"must": [condition]}) == "invalid_filter"
    assert caller_filter({"must": [{"key": "source_id", "is_empty": False}]}, "acme")
