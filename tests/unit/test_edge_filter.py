"""The embedded engine's filter (store/edge.py `_edge_filter`) is `to_qdrant`'s, in the
engine's types: built without the intermediate models and with its conditions kept
between calls, it must come out as the translation of `to_qdrant`'s filter, whatever
the scope, the ids left out, and whatever calls came before."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from qdrant_client.http import models as qm

from sidecar.store.edge import _edge_filter, to_edge
from sidecar.store.scope import Absent, AnyOf, Exactly, Granted, Scope, to_qdrant

_words = st.sampled_from(["alice", "bob", "carol", "team:ops", "public", "x y", ""])
_ids = st.builds(lambda i: str(uuid.UUID(int=i)), st.integers(1, 50))
_instants = st.builds(
    lambda h: datetime(2026, 12, 6, tzinfo=UTC) + timedelta(hours=h), st.integers(-5, 5)
)
_extra = st.one_of(
    st.builds(AnyOf, st.just("observer_id"), st.lists(_words, max_size=80).map(tuple)),
    st.builds(Exactly, st.just("audience"), st.lists(_words, max_size=3).map(tuple)),
    st.builds(Absent, st.sampled_from(["act", "observer_id"])),
)
_granted = st.builds(
    Granted, subject=_words, categories=st.lists(_words, min_size=1, max_size=3).map(tuple)
)
_caller = st.one_of(
    st.none(),
    st.just(qm.Filter(must=[qm.FieldCondition(key="topic", match=qm.MatchValue(value="x"))])),
)
_scopes = st.builds(
    Scope,
    tenant=st.sampled_from(["acme", "globex"]),
    current_at=st.one_of(st.none(), _instants),
    about=st.one_of(st.none(), _words),
    observer=st.one_of(st.none(), _words),
    min_confidence=st.one_of(st.none(), st.floats(0, 1)),
    absent=st.lists(st.sampled_from(["invalid_at", "superseded_by"]), max_size=2).map(tuple),
    supersedes_any_of=st.one_of(st.none(), st.lists(_ids, max_size=3).map(tuple)),
    extra=st.lists(_extra, max_size=2).map(tuple),
    caller=_caller,
    only=st.one_of(st.none(), st.lists(_ids, max_size=3).map(tuple)),
    audience_any_of=st.lists(st.lists(_words, max_size=3).map(tuple), max_size=2).map(tuple),
    scopes=st.one_of(st.none(), st.lists(_words, max_size=2).map(tuple)),
    granted=st.lists(st.lists(_granted, max_size=2).map(tuple), max_size=2).map(tuple),
)


def _said(flt: object) -> str:
    """The filter's text, each set of ids in one order (a set's own order is arbitrary)."""
    return re.sub(
        r"point_ids=\{([^}]*)\}",
        lambda m: "point_ids={" + ", ".join(sorted(m.group(1).split(", "))) + "}",
        repr(flt),
    )


@settings(max_examples=300, deadline=None)
@given(scope=_scopes, exclude=st.lists(_ids, max_size=5))
def test_the_engine_filter_is_to_qdrants_translated(scope: Scope, exclude: list[str]) -> None:
    expected = _said(to_edge(to_qdrant(scope, exclude)))
    assert _said(_edge_filter(scope, exclude)) == expected
    # Again: the conditions kept from the first call give the same filter.
    assert _said(_edge_filter(scope, exclude)) == expected


def test_a_condition_holding_an_unhashable_value_is_translated_not_refused() -> None:
    # The types say tuple; a caller handing a list must still get its filter.
    scope = Scope(tenant="acme", extra=(AnyOf("observer_id", ["alice", "bob"]),))  # type: ignore[arg-type]
    assert _said(_edge_filter(scope, ())) == _said(to_edge(to_qdrant(scope)))
