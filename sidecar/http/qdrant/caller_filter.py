"""A caller's own Qdrant filter (the drop-in proxy), checked before the policy or the
store is asked anything: its cost is bounded (depth, conditions, values, text), its
keys are fields of the record as the caller is shown it, and its point ids are mapped
into the caller's tenant. Whatever it matches, the policy still decides every record.

In a stack collection a key may also name the stack's own document metadata where the
stack made a payload index for it (`PUT /collections/{c}/index`): as each library
writes it, `metadata.source` (LangChain), `meta.source` (Haystack) or `source`
(LlamaIndex, plain payloads), stored as `document.metadata.source`
(writes/documents.py). A record field of that name comes first: the stack's index on
it is whose's own (`index_path`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from pydantic import ValidationError
from qdrant_client.http import models as qm

from sidecar.errors import FilterRefused
from sidecar.store.schema import INDEXED_FIELDS, OWN_METADATA, TEXT_FIELDS, point_id

# What a stack's own indexes are: stored path (under OWN_METADATA) and type.
OwnIndexes = Mapping[str, qm.PayloadSchemaType]
# The prefixes under which a library keeps a document's metadata in its payload.
_METADATA_PREFIXES = ("metadata.", "meta.")

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
_SERVED_AS = {
    "as_written": "content",
    # LlamaIndex filters on its document id under these names (writes/documents.py).
    "doc_id": "document.id",
    "ref_doc_id": "document.id",
    "document_id": "document.id",
}
_NOT_FILTERABLE = ("content", "whose", "_node_content", "_node_type")
_TEXT_MATCHES = (qm.MatchText, qm.MatchTextAny, qm.MatchPhrase)
_INT64 = (-(2**63), 2**63 - 1)
_MAX_COUNT = 2**32


def caller_filter(raw: Any, tenant: str, own: OwnIndexes | None = None) -> qm.Filter | None:
    """A caller's Qdrant filter (REST JSON), checked, bounded and tenant-scoped; `own`:
    a stack collection's own indexes (None in the whose collection)."""
    if raw is None:
        return None
    try:
        parsed = qm.Filter.model_validate(raw)
    except ValidationError as exc:
        raise FilterRefused("invalid_filter", f"invalid filter: {exc.errors()[0]['msg']}") from None
    budget = _Budget(own=own or {})
    return _checked_filter(parsed, tenant, budget, depth=1)


def own_path(key: str) -> str:
    """Where a stack's metadata key is stored, as its library names it."""
    for prefix in _METADATA_PREFIXES:
        if key.startswith(prefix):
            return OWN_METADATA + key[len(prefix) :]
    return OWN_METADATA + key


def index_path(key: str) -> str | None:
    """The stored path a stack's payload index on `key` is made on: None when `key`
    names a record field whose indexes already (LlamaIndex's `doc_id` is the document
    id), else the document's own metadata key (FilterRefused for a key Qdrant would
    not take, or one worded per reader)."""
    if _key(key) in INDEXED_FIELDS:
        return None
    return own_path(key)


def stored_key(key: str, own: OwnIndexes | None) -> str:
    """The stored path a grouping, ordering or facet key names: a record field, or the
    stack's own indexed metadata key (unknown keys as sent: the engine refuses them)."""
    try:
        path = _key(key)
    except FilterRefused:
        return key
    if path in INDEXED_FIELDS or not own:
        return path
    mine = own_path(key)
    return mine if mine in own else path


@dataclass
class _Budget:
    """What one filter may still spend, and the stack's own indexes it may read."""

    conditions: int = 0
    text: int = 0
    values: int = 0
    own: OwnIndexes = field(default_factory=dict)

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
            key = _indexed(condition.is_empty.key, budget, nested)
            return qm.IsEmptyCondition(is_empty=qm.PayloadField(key=key))
        case qm.IsNullCondition():
            key = _indexed(condition.is_null.key, budget, nested)
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


def _indexed(key: str, budget: _Budget, nested: str = "") -> str:
    """The stored path of `key` if the field it names has an index (else every point
    would be read): a record field, or a stack's own indexed metadata key."""
    path = _key(key, nested)
    if path in INDEXED_FIELDS:
        # Inside a nested condition the engine reads keys relative to the array.
        return key if nested else path
    if not nested and own_path(key) in budget.own:
        return own_path(key)
    fields = sorted(name.replace("content", "as_written") for name in INDEXED_FIELDS)
    fields += sorted(f"{p.removeprefix(OWN_METADATA)} (yours)" for p in budget.own)
    raise FilterRefused(
        "unindexed_key",
        f"`{key}` has no index to filter on; the indexed fields are " + ", ".join(fields),
    )


def _bounded_values(count: int) -> None:
    if count > MAX_VALUES:
        raise FilterRefused("filter_too_large", f"at most {MAX_VALUES} values per condition")


def _checked_field(
    condition: qm.FieldCondition, budget: _Budget, nested: str = ""
) -> qm.FieldCondition:
    if condition.geo_bounding_box or condition.geo_radius or condition.geo_polygon:
        raise FilterRefused("unsupported_filter", "geo conditions are not supported")
    tests = (
        condition.match,
        condition.range,
        condition.values_count,
        condition.is_empty,
        condition.is_null,
    )
    if sum(test is not None for test in tests) > 1:
        # The engine decides such a condition by its index when there is one and by
        # the payload otherwise, and the two disagree (docs/rag-proxy.md).
        raise FilterRefused(
            "invalid_filter",
            "a field condition tests one thing: match, range, values_count, is_empty or"
            " is_null; put several in `must`",
        )
    key = _indexed(condition.key, budget, nested)
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
    text_index = key in TEXT_FIELDS or budget.own.get(key) == qm.PayloadSchemaType.TEXT
    if isinstance(condition.match, _TEXT_MATCHES) and (nested or not text_index):
        # Text is matched through its full-text index; anywhere else the engine would
        # scan every point, holding the interpreter for seconds on a large tenant.
        raise FilterRefused(
            "text_match_not_indexed",
            "text, text_any and phrase match only `as_written` and your own text indexes",
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
