"""What a store query is limited to: one filter model for every backend.

A `Scope` is the tenant (never optional), the named conditions the sidecar
itself adds (recall's filters, current versions, a belief chain, the policy's
pushdown), and optionally a caller's own Qdrant filter (the proxy). `to_qdrant`
turns a scope into one Qdrant filter in qdrant-client's models: the server
backend sends it as is, the embedded backend translates it into its engine's
types (store/edge.py). Nothing else translates filters.

A caller's filter is checked here, before the policy or the store is asked
anything: its cost is bounded (depth, conditions, values, text), its keys are
fields of the record as the caller is shown it, and its point ids are mapped into
the caller's tenant. Whatever it matches, the policy still decides every record.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any

from pydantic import ValidationError
from qdrant_client.http import models as qm

TENANT_FIELD = "tenant"

# Payload fields with an index, and the kind of index each gets (the store backends
# create them). A caller's filter may read only these: a condition on a field without
# an index makes the engine read every point's payload, about 10 µs a point per
# condition, holding the interpreter all along (docs/security.md, "Bounded cost").
KEYWORD_FIELDS = (
    "id",
    "observer_id",
    "observed_id",
    "observed_attitude",
    # Nested views and speech acts (reads/nested.py).
    "observed_path",
    "act",
    "modality",
    "access_scope",
    "audience",
    "source_id",
    "source.kind",
    "source.speaker",
    "source.channel",
    "source.participants",
    "source.unnoticed",
    "proposition.key",
    "provenance.writer",
    "provenance.method",
    "provenance.derived_from",
    "evidence[].kind",
    "evidence[].ref",
    "evidence[].by",
    # Finds a version's stored successor: the evidence a write cut short leaves.
    "supersedes",
    "superseded_by",
)
DATETIME_FIELDS = ("valid_at", "invalid_at", "recorded_at", "evidence[].at")
FLOAT_FIELDS = ("confidence",)
# Full-text: the only field a caller's text match may read. Without an index the engine
# matches text by scanning every point.
TEXT_FIELDS = ("content",)
INDEXED_FIELDS = frozenset(
    (TENANT_FIELD, *KEYWORD_FIELDS, *DATETIME_FIELDS, *FLOAT_FIELDS, *TEXT_FIELDS)
)

_POINT_NAMESPACE = uuid.UUID("6f1d3a0e-5b7c-4d2a-9e8f-0a1b2c3d4e5f")


def point_id(tenant: str, record_id: uuid.UUID | str) -> str:
    """The Qdrant point id of a record: record ids are scoped by tenant.

    Two tenants can never address each other's points, even with a known id.
    """
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{tenant}\x00{record_id}"))


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")


# --- the sidecar's own conditions ----------------------------------------------------


@dataclass(frozen=True)
class Match:
    key: str
    value: str


@dataclass(frozen=True)
class AtLeast:
    key: str
    value: float


@dataclass(frozen=True)
class NotAfter:
    key: str
    instant: datetime


@dataclass(frozen=True)
class EmptyOrAfter:
    """The field is absent, or holds an instant strictly after `instant`."""

    key: str
    instant: datetime


@dataclass(frozen=True)
class AnyOf:
    """The (keyword or keyword-list) field holds at least one of the values."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class AbsentOrAnyOf:
    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class Absent:
    """The field is missing (or null, or an empty list)."""

    key: str


@dataclass(frozen=True)
class Exactly:
    """The keyword-list field holds these values and no others (each once)."""

    key: str
    values: tuple[str, ...]


Condition = Match | AtLeast | NotAfter | EmptyOrAfter | Absent | AnyOf | AbsentOrAnyOf | Exactly


@dataclass(frozen=True)
class Scope:
    """What a query is limited to. The tenant is not optional."""

    tenant: str
    current_at: datetime | None = None
    about: str | None = None
    observer: str | None = None
    observed: str | None = None
    attitude: str | None = None
    source_id: str | None = None
    modality: str | None = None
    min_confidence: float | None = None
    # Fields that must be missing, e.g. ("invalid_at",) for versions still open.
    absent: tuple[str, ...] = ()
    # Records whose `supersedes` names one of these ids; None: no such limit, (): none.
    supersedes_any_of: tuple[str, ...] | None = None
    # Anything else the sidecar limits a query to (a belief chain, see writes/supersession.py).
    extra: tuple[Condition, ...] = ()
    # A caller's own Qdrant filter (the proxy), checked and tenant-scoped by `caller_filter`.
    caller: qm.Filter | None = None
    # Pushed down from the policy (see policy/pushdown.py): for each audience member, the
    # audience entries that admit them; and the access scopes all of them hold.
    audience_any_of: tuple[tuple[str, ...], ...] = ()
    scopes: tuple[str, ...] | None = None

    def conditions(self) -> list[Condition]:
        conditions: list[Condition] = [Match(TENANT_FIELD, self.tenant)]
        for key, value in (
            ("proposition.key", self.about),
            ("observer_id", self.observer),
            ("observed_id", self.observed),
            ("observed_attitude", self.attitude),
            ("source_id", self.source_id),
            ("modality", self.modality),
        ):
            if value is not None:
                conditions.append(Match(key, value))
        conditions.extend(Absent(key) for key in self.absent)
        if self.supersedes_any_of is not None:
            conditions.append(AnyOf("supersedes", self.supersedes_any_of))
        if self.min_confidence is not None:
            conditions.append(AtLeast("confidence", self.min_confidence))
        if self.current_at is not None:
            conditions.append(NotAfter("valid_at", self.current_at))
            conditions.append(EmptyOrAfter("invalid_at", self.current_at))
        conditions.extend(self.extra)
        conditions.extend(AnyOf("audience", entries) for entries in self.audience_any_of)
        if self.scopes is not None:
            conditions.append(AbsentOrAnyOf("access_scope", self.scopes))
        return conditions

    def narrowed(self, audience_any_of: tuple[tuple[str, ...], ...], scopes: Any) -> Scope:
        return replace(self, audience_any_of=audience_any_of, scopes=scopes)


def to_qdrant(scope: Scope, exclude: Collection[str] = ()) -> qm.Filter:
    """The one filter a store query runs: every condition of the scope, and the
    caller's filter, under the tenant; `exclude` record ids left out."""
    must: list[qm.Condition] = [_qdrant(c) for c in scope.conditions()]
    if scope.caller is not None:
        must.append(scope.caller)
    seen: list[qm.Condition] = []
    if exclude:
        seen.append(qm.HasIdCondition(has_id=[point_id(scope.tenant, rid) for rid in exclude]))
    return qm.Filter(must=must, must_not=seen or None)


def _is_empty(key: str) -> qm.Condition:
    return qm.IsEmptyCondition(is_empty=qm.PayloadField(key=key))


def _qdrant(condition: Condition) -> qm.Condition:
    match condition:
        case Match(key, value):
            return qm.FieldCondition(key=key, match=qm.MatchValue(value=value))
        case AtLeast(key, value):
            return qm.FieldCondition(key=key, range=qm.Range(gte=value))
        case NotAfter(key, instant):
            return qm.FieldCondition(key=key, range=qm.DatetimeRange(lte=instant))
        case Absent(key):
            return _is_empty(key)
        case AnyOf(key, values):
            return qm.FieldCondition(key=key, match=qm.MatchAny(any=list(values)))
        case AbsentOrAnyOf(key, values):
            either: list[qm.Condition] = [_is_empty(key)]
            if values:
                either.append(qm.FieldCondition(key=key, match=qm.MatchAny(any=list(values))))
            return qm.Filter(should=either)
        case EmptyOrAfter(key, instant):
            return qm.Filter(
                should=[
                    _is_empty(key),
                    qm.FieldCondition(key=key, range=qm.DatetimeRange(gt=instant)),
                ]
            )
        case Exactly(key, values):
            count = qm.FieldCondition(
                key=key, values_count=qm.ValuesCount(gte=len(values), lte=len(values))
            )
            each: list[qm.Condition] = [
                qm.FieldCondition(key=key, match=qm.MatchValue(value=v)) for v in values
            ]
            return qm.Filter(must=[count, *each]) if values else _is_empty(key)


# --- a caller's filter ------------------------------------------------------------------

# The cost of one filter, bounded before anything runs it: a filter is evaluated on
# every point the query examines, and the embedded engine holds the interpreter
# while it does (docs/security.md, "Bounded cost").
MAX_DEPTH = 4
MAX_CONDITIONS = 16
MAX_VALUES = 256  # per match any/except and per has_id
MAX_VALUES_TOTAL = 1024  # in all the filter's any/except/has_id lists
MAX_TEXT_CHARS = 256  # per text, text_any or phrase condition
MAX_TEXT_TOKENS = 16  # words per text_any condition
MAX_TEXT_TOTAL = 1024  # characters of text matching in one filter

# A payload path as Qdrant reads it (unquoted keys): `evidence[].by`, `audience[0]`.
_KEY = re.compile(r"[\w-]+(\[\d*\])*(\.[\w-]+(\[\d*\])*)*")
# Served fields that are not stored as such: `content` is the attribution sentence,
# worded per reader; `whose` is the decision; `_node_content`/`_node_type` are the
# same as a LlamaIndex node (http/qdrant/dialect.py). The writer's own text is `as_written`.
_SERVED_AS = {"as_written": "content"}
_NOT_FILTERABLE = ("content", "whose", "_node_content", "_node_type")
_TEXT_MATCHES = (qm.MatchText, qm.MatchTextAny, qm.MatchPhrase)
_INT64 = (-(2**63), 2**63 - 1)
_MAX_COUNT = 2**32


class FilterRefused(ValueError):
    """A caller's filter the sidecar will not run: `reason` is machine-readable."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def caller_filter(raw: Any, tenant: str) -> qm.Filter | None:
    """A caller's Qdrant filter (REST JSON), checked, bounded and tenant-scoped."""
    if raw is None:
        return None
    try:
        parsed = qm.Filter.model_validate(raw)
    except ValidationError as exc:
        raise FilterRefused("invalid_filter", f"invalid filter: {exc.errors()[0]['msg']}") from None
    budget = _Budget()
    return _checked_filter(parsed, tenant, budget, depth=1)


@dataclass
class _Budget:
    conditions: int = 0
    text: int = 0
    values: int = 0

    def spend(self, conditions: int = 0, text: int = 0, values: int = 0) -> None:
        self.conditions += conditions
        self.text += text
        self.values += values
        if self.values > MAX_VALUES_TOTAL:
            raise FilterRefused(
                "filter_too_large", f"a filter may hold at most {MAX_VALUES_TOTAL} values"
            )
        if self.conditions > MAX_CONDITIONS:
            raise FilterRefused(
                "filter_too_large", f"a filter may hold at most {MAX_CONDITIONS} conditions"
            )
        if self.text > MAX_TEXT_TOTAL:
            raise FilterRefused(
                "filter_text_too_long",
                f"a filter may match at most {MAX_TEXT_TOTAL} characters of text",
            )


def _listed(conditions: Any) -> list[Any]:
    if conditions is None:
        return []
    return conditions if isinstance(conditions, list) else [conditions]


def _checked_filter(
    flt: qm.Filter, tenant: str, budget: _Budget, depth: int, nested: str = ""
) -> qm.Filter:
    if depth > MAX_DEPTH:
        raise FilterRefused("filter_too_deep", f"filters nest at most {MAX_DEPTH} deep")

    def each(conditions: Any) -> list[qm.Condition] | None:
        return [_checked(c, tenant, budget, depth, nested) for c in _listed(conditions)] or None

    min_should = None
    if flt.min_should is not None:
        min_should = qm.MinShould(
            conditions=each(flt.min_should.conditions) or [],
            min_count=flt.min_should.min_count,
        )
    return qm.Filter(
        must=each(flt.must),
        should=each(flt.should),
        must_not=each(flt.must_not),
        min_should=min_should,
    )


def _checked(
    condition: Any, tenant: str, budget: _Budget, depth: int, nested: str = ""
) -> qm.Condition:
    """`nested`: the array a nested condition's keys are relative to ("" outside one)."""
    budget.spend(conditions=1)
    match condition:
        case qm.Filter():
            return _checked_filter(condition, tenant, budget, depth + 1, nested)
        case qm.NestedCondition():
            inside = condition.nested
            array = _key(inside.key, nested)
            inner = _checked_filter(inside.filter, tenant, budget, depth + 1, nested=array)
            return qm.NestedCondition(nested=qm.Nested(key=inside.key, filter=inner))
        case qm.HasIdCondition():
            ids = list(condition.has_id)
            _bounded_values(len(ids))
            budget.spend(values=len(ids))
            # Record ids are tenant-scoped point ids in the store (see point_id).
            return qm.HasIdCondition(has_id=[point_id(tenant, str(i)) for i in ids])
        case qm.IsEmptyCondition():
            key = _indexed(condition.is_empty.key, nested)
            return qm.IsEmptyCondition(is_empty=qm.PayloadField(key=key))
        case qm.IsNullCondition():
            key = _indexed(condition.is_null.key, nested)
            return qm.IsNullCondition(is_null=qm.PayloadField(key=key))
        case qm.FieldCondition():
            return _checked_field(condition, budget, nested)
    raise FilterRefused(
        "unsupported_filter", f"unsupported filter condition: {type(condition).__name__}"
    )


def _key(key: str, nested: str = "") -> str:
    """The stored path a caller's key names (inside a nested condition, relative to
    its array: `evidence` + `by` reads `evidence[].by`)."""
    if len(key) > 200 or not _KEY.fullmatch(key):
        raise FilterRefused("invalid_filter_key", f"invalid payload key: {key[:200]!r}")
    if nested:
        return f"{nested}[].{key}"
    head = re.split(r"[.\[]", key, maxsplit=1)[0]
    if head in _NOT_FILTERABLE:
        raise FilterRefused(
            "unfilterable_key",
            f"`{head}` is worded per reader and cannot be filtered on; the writer's own "
            "text is `as_written`",
        )
    if head in _SERVED_AS:
        return _SERVED_AS[head] + key[len(head) :]
    return key


def _indexed(key: str, nested: str = "") -> str:
    """`key` if the field it names has an index (else every point would be read)."""
    path = _key(key, nested)
    if path not in INDEXED_FIELDS:
        raise FilterRefused(
            "unindexed_key",
            f"`{key}` has no index to filter on; the indexed fields are "
            + ", ".join(sorted(name.replace("content", "as_written") for name in INDEXED_FIELDS)),
        )
    # Inside a nested condition the engine reads keys relative to the array.
    return key if nested else path


def _bounded_values(count: int) -> None:
    if count > MAX_VALUES:
        raise FilterRefused("filter_too_large", f"at most {MAX_VALUES} values per condition")


def _checked_field(
    condition: qm.FieldCondition, budget: _Budget, nested: str = ""
) -> qm.FieldCondition:
    if condition.geo_bounding_box or condition.geo_radius or condition.geo_polygon:
        raise FilterRefused("unsupported_filter", "geo conditions are not supported")
    key = _indexed(condition.key, nested)
    if condition.values_count is not None:
        if nested or "[" in key:
            # Counting an array's elements is not indexed: every point would be read.
            raise FilterRefused(
                "unindexed_key", "values_count counts a top-level field's values only"
            )
        counts = condition.values_count
        if not all(
            c is None or 0 <= c <= _MAX_COUNT
            for c in (counts.lt, counts.gt, counts.lte, counts.gte)
        ):
            raise FilterRefused("invalid_filter", f"values_count bounds lie in 0..{_MAX_COUNT}")
    if isinstance(condition.match, _TEXT_MATCHES) and (nested or key not in TEXT_FIELDS):
        # Text is matched through its full-text index; anywhere else the engine would
        # scan every point, holding the interpreter for seconds on a large tenant.
        raise FilterRefused(
            "text_match_not_indexed", "text, text_any and phrase match only `as_written`"
        )
    return condition.model_copy(
        update={
            "key": key,
            "match": _checked_match(condition.match, budget),
            "range": _checked_range(condition.range),
        }
    )


def _checked_match(match: Any, budget: _Budget) -> Any:
    match match:
        case None:
            return None
        case qm.MatchValue():
            if isinstance(match.value, float):  # the engines match keywords, integers, bools
                raise FilterRefused("invalid_filter", "match values are strings, integers or bools")
            _int64([match.value])
            return match
        case qm.MatchAny():
            _homogeneous(match.any)
            budget.spend(values=len(match.any))
            return match
        case qm.MatchExcept():
            _homogeneous(match.except_)
            budget.spend(values=len(match.except_))
            return match
        case qm.MatchText():
            _text(match.text, budget)
            return match
        case qm.MatchPhrase():
            _text(match.phrase, budget)
            return match
        case qm.MatchTextAny():
            _text(match.text_any, budget)
            if len(match.text_any.split()) > MAX_TEXT_TOKENS:
                raise FilterRefused(
                    "filter_text_too_long", f"text_any holds at most {MAX_TEXT_TOKENS} words"
                )
            return match
    raise FilterRefused("unsupported_filter", f"unsupported match: {type(match).__name__}")


def _int64(values: list[Any]) -> None:
    if any(isinstance(v, int) and not _INT64[0] <= v <= _INT64[1] for v in values):
        raise FilterRefused("invalid_filter", "integers in filters are 64-bit")


def _homogeneous(values: list[Any]) -> None:
    _bounded_values(len(values))
    _int64(values)
    kinds = {type(v) for v in values}
    if not (kinds <= {str} or kinds <= {int}):
        raise FilterRefused(
            "invalid_filter", "match any/except values are all strings or all integers"
        )


def _text(text: str, budget: _Budget) -> None:
    if len(text) > MAX_TEXT_CHARS:
        raise FilterRefused(
            "filter_text_too_long", f"text conditions hold at most {MAX_TEXT_CHARS} characters"
        )
    budget.spend(text=len(text))


def _checked_range(bounds: Any) -> Any:
    match bounds:
        case None:
            return None
        case qm.DatetimeRange():
            return qm.DatetimeRange(
                gte=_utc(bounds.gte), gt=_utc(bounds.gt), lte=_utc(bounds.lte), lt=_utc(bounds.lt)
            )
        case qm.Range():
            limits = (bounds.gte, bounds.gt, bounds.lte, bounds.lt)
            if not all(b is None or math.isfinite(b) for b in limits):
                # JSON parsers let NaN through, and the embedded engine panics on it.
                raise FilterRefused("invalid_filter", "range bounds must be finite numbers")
            return bounds
    raise FilterRefused("unsupported_filter", f"unsupported range: {type(bounds).__name__}")


def _utc(value: datetime | date | None) -> datetime | None:
    """Instants as UTC datetimes (a bare date is its midnight, UTC), in stored years."""
    if value is None:
        return None
    if not isinstance(value, datetime):
        value = datetime.combine(value, datetime.min.time())
    value = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise FilterRefused("invalid_filter", "datetime bound out of range") from None
