"""A record's shape (policy/shape.py): what makes two records alike to the policy,
given what the compiled policy reads (policy/readset.py)."""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.policy.decider import Decider
from sidecar.policy.readset import STAR, MalformedReadSet, ReadSet
from sidecar.policy.shape import Instants, Shape, Shaper, rfc3339_ns
from sidecar.settings import Settings

READS = ReadSet(
    reads=(
        ("tenant",),
        ("observer_id",),
        ("modality",),
        ("audience",),
        ("access_scope",),
        ("provenance", "writer"),
        ("evidence", "*", "kind"),
        ("evidence", "*", "by"),
    ),
    instants=(("valid_at",), ("invalid_at",), ("evidence", "*", "at")),
    compared=(("valid_at",), ("invalid_at",), ("evidence", "*", "at")),
)
SHAPER = Shaper(READS)


def ns(at: datetime) -> int:
    found = rfc3339_ns(at.isoformat())
    assert found is not None
    return found


AS_OF = datetime(2026, 6, 1, tzinfo=UTC)
NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)
ASKED = Instants(now_ns=ns(NOW), as_of_ns=ns(AS_OF))
NOW_ONLY = Instants(now_ns=ns(NOW), as_of_ns=ns(NOW))


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
    return SHAPER.shape_of(view(**fields), instants)


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
        confidence=0.1,  # not read at all
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
        # One item more: the length of what is iterated is read too.
        {"evidence": [{"kind": "acknowledgement", "by": "bob", "at": "2026-02-01T00:00:00Z"}] * 2},
    ):
        other = shape(**changed)
        assert other.digest != base.digest, changed


def test_a_time_counts_by_its_side_of_the_instants_asked_about() -> None:
    before = shape(valid_at="2026-05-31T00:00:00+00:00")
    at = shape(valid_at="2026-06-01T00:00:00+00:00")
    after = shape(valid_at="2026-06-02T00:00:00+00:00")
    assert len({before.digest, at.digest, after.digest}) == 3
    # To the nanosecond, as OPA parses it (a float would make these one).
    close = shape(valid_at="2026-06-01T00:00:00.000000001Z")
    assert close.digest == after.digest != at.digest
    # Without an explicit as_of, by its side of now.
    past = shape(NOW_ONLY, valid_at="2026-05-31T00:00:00+00:00")
    also_past = shape(NOW_ONLY, valid_at="2026-06-02T00:00:00+00:00")
    future = shape(NOW_ONLY, valid_at="2100-01-01T00:00:00+00:00")
    assert past.digest == also_past.digest != future.digest


def test_an_unreadable_time_leaves_the_record_alone() -> None:
    assert shape_or_none(invalid_at="soon") is None
    assert shape_or_none(evidence=[{"kind": "acknowledgement", "by": "bob", "at": 5}]) is None
    # What Python reads but OPA's RFC 3339 does not (or reads otherwise) is unreadable.
    for unlike in (
        "2026-01-01",
        "2026-01-01T00:00:00",
        "2026-01-01 00:00:00Z",
        "9999-01-01T00:00:00Z",
    ):
        assert shape_or_none(valid_at=unlike) is None, unlike
    # An absent or null time is a side of its own.
    assert shape_or_none(invalid_at=None) is not None
    assert shape_or_none(invalid_at=None).digest != shape().digest  # type: ignore[union-attr]


def test_rfc3339_is_read_to_the_nanosecond_with_its_offset() -> None:
    assert rfc3339_ns("1970-01-01T00:00:00Z") == 0
    assert rfc3339_ns("1970-01-01T01:00:00+01:00") == 0
    assert rfc3339_ns("1970-01-01T00:00:00.5-00:30") == 1800 * 10**9 + 5 * 10**8
    assert rfc3339_ns("2026-02-30T00:00:00Z") is None
    at = datetime(2026, 12, 3, 12, 0, 0, 123456, tzinfo=UTC)
    assert rfc3339_ns(at.isoformat()) == int(at.timestamp()) * 10**9 + 123456000
    assert rfc3339_ns(at.isoformat().replace("+00:00", "Z")) == ns(at)
    assert ns(at + timedelta(microseconds=1)) - ns(at) == 1000


def test_the_policy_is_asked_about_what_it_reads_under_the_shapes_id() -> None:
    got = shape()
    assert got.representative["id"] == got.id != "r1"
    for gone in ("source_id", "recorded_at"):
        assert gone not in got.representative
    assert got.representative["provenance"] == {"writer": "alice"}
    assert got.representative["evidence"] == [
        {"kind": "acknowledgement", "by": "bob", "at": "2026-02-01T00:00:00+00:00"}
    ]
    # The times the policy sets against as_of are the record's own.
    assert got.representative["valid_at"] == "2026-01-01T00:00:00+00:00"


def test_a_path_read_whole_keeps_everything_below_it() -> None:
    whole = Shaper(ReadSet(reads=(("provenance",),), instants=(), compared=()))
    one = whole.shape_of(view(), ASKED)
    other = whole.shape_of(view(provenance={"writer": "alice", "derived_from": ["x"]}), ASKED)
    assert one is not None
    assert other is not None
    assert one.digest != other.digest
    assert one.representative["provenance"] == view()["provenance"]


KEYS = st.sampled_from(["a", "b", "c", STAR])
# Integers as a store holds them: 64-bit (it turns larger ones into floats).
JSON = st.recursive(
    st.none() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


def projected(node: Any, paths: list[tuple[str, ...]]) -> Any:
    """What `paths` reach of `node`, by the definition: a path's key matches the same
    key of an object, `*` every key of an object and every item of a list, and a path
    that ends keeps the whole value below it."""
    if any(not p for p in paths):
        return node
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            below = [p[1:] for p in paths if p[0] in (key, STAR)]
            if below:
                out[key] = projected(value, below)
        return out
    if isinstance(node, list) and any(p[0] == STAR for p in paths):
        return [projected(item, [p[1:] for p in paths if p[0] == STAR]) for item in node]
    return node


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(KEYS, min_size=1, max_size=3).map(tuple), min_size=1, max_size=5), JSON)
def test_what_a_shape_keeps_of_a_record_is_what_the_read_paths_reach(
    paths: list[tuple[str, ...]], record: Any
) -> None:
    reads = [("r", *p) for p in paths]
    got = Shaper(ReadSet(reads=tuple(reads), instants=(), compared=())).shape_of(
        {"r": record}, ASKED
    )
    assert got is not None
    kept = {k: v for k, v in got.representative.items() if k != "id"}
    assert kept == projected({"r": record}, reads)
    # The shape's id is the UUID of its digest's first 16 bytes, as OPA is told it.
    assert got.id == got.representative["id"] == str(uuid.UUID(bytes=got.digest[:16]))


def test_a_record_seen_again_keeps_its_shape_only_while_its_times_keep_their_sides() -> None:
    # The shaper keeps shapes by view and sides (policy/shape.py): one record asked
    # about at instants on either side of its valid_at, in turn, is shaped by each.
    shaper = Shaper(READS)
    record = view(valid_at="2026-06-01T00:00:00Z")
    earlier = Instants(now_ns=ns(NOW), as_of_ns=ns(AS_OF - timedelta(days=1)))
    later = Instants(now_ns=ns(NOW), as_of_ns=ns(AS_OF + timedelta(days=1)))
    fresh = {i: Shaper(READS).shape_of(record, i) for i in (earlier, ASKED, later)}
    assert len({s.digest for s in fresh.values() if s is not None}) == 3
    for _ in range(3):
        for instants, expected in fresh.items():
            assert shaper.shape_of(record, instants) == expected
    # A time that moves to another instant on the same side keeps the shape.
    moved = Instants(now_ns=ns(NOW + timedelta(hours=1)), as_of_ns=ns(AS_OF + timedelta(days=2)))
    assert shaper.shape_of(record, moved) == fresh[later]


TIMES = st.sampled_from(
    [None, "soon", 5, "2026-05-31T00:00:00Z", "2026-06-01T00:00:00Z", "2026-06-01T00:00:00+01:00"]
)
# Instants that put the times above on different sides of them.
INSTANTS = (ASKED, NOW_ONLY, Instants(now_ns=ns(AS_OF), as_of_ns=ns(AS_OF - timedelta(hours=1))))
EVIDENCE = st.fixed_dictionaries({"kind": st.just("a"), "at": TIMES})
KEPT_SHAPER = Shaper(READS)


@settings(max_examples=500, deadline=None)
@given(
    valid_at=TIMES,
    invalid_at=TIMES,
    # A list as written, or (an unusual record) an object: `*` goes through either.
    evidence=st.lists(EVIDENCE, max_size=3) | st.dictionaries(st.sampled_from("xyz"), EVIDENCE),
    audience=st.lists(st.sampled_from(["alice", "bob"]), max_size=2),
)
def test_a_kept_shape_is_the_shape_made_afresh(
    valid_at: Any, invalid_at: Any, evidence: Any, audience: Any
) -> None:
    # One shaper for every example (as a revision's is for every request): what it
    # answers from what it kept, for one record asked about at several instants, is
    # what a new one makes.
    record = view(valid_at=valid_at, invalid_at=invalid_at, evidence=evidence, audience=audience)
    for _ in range(2):
        for instants in INSTANTS:
            fresh = Shaper(READS).shape_of(record, instants)
            assert KEPT_SHAPER.shape_of(record, instants) == fresh


def test_a_malformed_read_set_is_refused() -> None:
    malformed: list[Any] = [
        None,
        [],
        {"reads": "id"},
        {"reads": [[""]], "instants": [], "compared": [], "unbounded": [], "uncacheable": []},
        {"reads": [], "instants": [], "compared": [], "unbounded": [1], "uncacheable": []},
    ]
    for raw in malformed:
        with pytest.raises(MalformedReadSet):
            ReadSet.parse(raw)


class Unread:
    """An engine whose policy is not at hand (an OPA server of its own)."""

    def read_set(self) -> None:
        return None


class Loaded:
    def __init__(self, read_set: ReadSet) -> None:
        self._read_set = read_set

    def read_set(self) -> tuple[str, ReadSet]:
        return "r1", self._read_set


def test_shapes_are_on_by_default_and_the_start_says_what_they_are_shared_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert Settings().decide_shapes is True
    with caplog.at_level(logging.INFO, logger="whose.policy"):
        decider = Decider(Loaded(READS), None, bucket_s=5)  # type: ignore[arg-type]
    [line] = caplog.records
    assert line.levelno == logging.INFO
    assert "shared on tenant, observer_id" in line.getMessage()
    assert "evidence.*.at" in line.getMessage()
    assert decider.plan("r1").mode == "shape"


def test_a_policy_that_cannot_be_bounded_says_so_once_and_shares_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    unbounded = ReadSet((), (), (), ("the whole record is passed to walk (x.rego:3)",))
    uncached = ReadSet((), (), (), (), ("the instant asked about is passed to minus (x.rego:4)",))
    for read_set, mode in ((unbounded, "record"), (uncached, "uncached")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="whose.policy"):
            decider = Decider(Loaded(read_set), None, bucket_s=5)  # type: ignore[arg-type]
            decider.plan("r1")
        [line] = caplog.records
        assert line.levelno == logging.WARNING
        assert "x.rego" in line.getMessage()
        assert decider.plan("r1").mode == mode
        assert decider.plan("r1").shaper is None


@pytest.mark.parametrize(
    ("instant", "read"),
    [
        (("meta", STAR), ("meta", "x")),
        (("meta", "x"), ("meta", STAR)),
        (("e", STAR, "at"), ("e", "0")),
    ],
)
def test_a_time_held_by_its_side_and_read_as_it_is_shares_nothing(
    instant: tuple[str, ...], read: tuple[str, ...]
) -> None:
    # Were the analysis to list a time among the instants while a read reaches one of
    # its values, a shape would hold that value by its side alone: decided alone.
    overlapping = ReadSet(reads=(read,), instants=(instant,), compared=(instant,))
    assert not overlapping.shares
    assert "also read as it is" in overlapping.describe()
    decider = Decider(Loaded(overlapping), None, bucket_s=5)  # type: ignore[arg-type]
    assert decider.plan("r1").mode == "record"
    apart = ReadSet(reads=(("meta", "y"),), instants=(("meta", "x"),), compared=())
    assert apart.shares


def test_an_opa_of_its_own_decides_each_record_alone() -> None:
    decider = Decider(Unread(), None, bucket_s=5)  # type: ignore[arg-type]
    plan = decider.plan("their-revision")
    assert plan.mode == "record"
    assert plan.shaper is None
    assert plan.caches
