"""Payload paths as the query engine reads them (group keys, facet values) select what
qdrant-client's own reading of Qdrant's paths selects (its local mode, an independent
implementation of the server's rules): keys, `[n]`, `[]`, and a list the whole path
selects counted as its elements."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from qdrant_client.local.payload_value_extractor import value_by_key

from sidecar.reads.query.paths import values_at

KEYS = ("a", "b", "c")
scalars = st.one_of(st.integers(-3, 3), st.sampled_from(["x", "y"]), st.booleans(), st.none())
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)
    ),
    max_leaves=12,
)
payloads = st.dictionaries(st.sampled_from(KEYS), values, max_size=3)
parts = st.one_of(st.sampled_from(KEYS), st.sampled_from(["[]", "[0]", "[1]"]))


@st.composite
def paths(draw: Any) -> str:
    path: str = draw(st.sampled_from(KEYS))
    for part in draw(st.lists(parts, max_size=3)):
        path += part if part.startswith("[") else f".{part}"
    return path


@given(payload=payloads, path=paths())
def test_a_path_selects_what_qdrant_client_selects(payload: dict[str, Any], path: str) -> None:
    assert values_at(payload, path) == (value_by_key(payload, path) or [])


def test_examples() -> None:
    payload = {"a": [{"b": 1}, {"b": [2, 3]}], "c": {"d": "x"}}
    assert values_at(payload, "a[].b") == [1, 2, 3]
    assert values_at(payload, "a[1].b") == [2, 3]
    assert values_at(payload, "a.b") == []
    assert values_at(payload, "c.d") == ["x"]
    assert values_at(payload, "missing") == []
