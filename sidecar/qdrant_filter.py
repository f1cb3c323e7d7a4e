"""A caller's Qdrant filter (REST JSON, as qdrant-client sends it), made safe to run.

The proxy accepts Qdrant's own filter language so RAG libraries work unchanged.
Two things happen to it before it reaches the store: point ids in `has_id` are
mapped into the caller's tenant (record ids are tenant-scoped, see store.point_id),
and it is ANDed under the tenant condition. For the embedded engine it is then
translated into qdrant-edge's types; a condition this sidecar cannot translate
is refused with a clear error rather than dropped, because dropping a condition
would widen the query.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import qdrant_edge as qe
from pydantic import ValidationError
from qdrant_client.http import models as qm

from sidecar.store import iso, point_id


class UnsupportedFilter(ValueError):
    """The filter is malformed or uses a condition the sidecar does not support."""


def parse(raw: Any) -> qm.Filter | None:
    if raw is None:
        return None
    try:
        return qm.Filter.model_validate(raw)
    except ValidationError as exc:
        raise UnsupportedFilter(f"invalid filter: {exc.errors()[0]['msg']}") from None


def check(flt: qm.Filter) -> None:
    """Refuse, up front, a filter the engine would reject at query time."""
    try:
        to_edge(flt)
    except UnsupportedFilter:
        raise
    except Exception as exc:  # the engine's own validation: bad paths, out-of-range values
        raise UnsupportedFilter(f"invalid filter: {exc}") from None


def scoped_ids(flt: qm.Filter, tenant: str) -> qm.Filter:
    """The same filter with every has_id point id mapped into the tenant."""
    return qm.Filter(
        must=[_scope_condition(c, tenant) for c in _listed(flt.must)] or None,
        should=[_scope_condition(c, tenant) for c in _listed(flt.should)] or None,
        must_not=[_scope_condition(c, tenant) for c in _listed(flt.must_not)] or None,
        min_should=qm.MinShould(
            conditions=[_scope_condition(c, tenant) for c in flt.min_should.conditions],
            min_count=flt.min_should.min_count,
        )
        if flt.min_should
        else None,
    )


def _scope_condition(condition: qm.Condition, tenant: str) -> qm.Condition:
    if isinstance(condition, qm.HasIdCondition):
        return qm.HasIdCondition(has_id=[point_id(tenant, str(i)) for i in condition.has_id])
    if isinstance(condition, qm.Filter):
        return scoped_ids(condition, tenant)
    if isinstance(condition, qm.NestedCondition):
        nested = condition.nested
        return qm.NestedCondition(
            nested=qm.Nested(key=nested.key, filter=scoped_ids(nested.filter, tenant))
        )
    return condition


def _listed(conditions: Any) -> list[Any]:
    if conditions is None:
        return []
    return conditions if isinstance(conditions, list) else [conditions]


def to_edge(flt: qm.Filter) -> qe.Filter:
    """Translate an (already tenant-scoped) filter into qdrant-edge's types."""
    min_should = None
    if flt.min_should is not None:
        conditions = [_edge_condition(c) for c in flt.min_should.conditions]
        min_should = qe.MinShould(conditions, flt.min_should.min_count)
    return qe.Filter(
        must=[_edge_condition(c) for c in _listed(flt.must)] or None,
        should=[_edge_condition(c) for c in _listed(flt.should)] or None,
        must_not=[_edge_condition(c) for c in _listed(flt.must_not)] or None,
        min_should=min_should,
    )


def _edge_condition(condition: Any) -> qe.ConditionType:
    match condition:
        case qm.Filter():
            return to_edge(condition)
        case qm.FieldCondition():
            return _edge_field(condition)
        case qm.IsEmptyCondition():
            return qe.IsEmptyCondition(condition.is_empty.key)
        case qm.IsNullCondition():
            return qe.IsNullCondition(condition.is_null.key)
        case qm.HasIdCondition():
            return qe.HasIdCondition({str(i) for i in condition.has_id})
        case qm.NestedCondition():
            return qe.NestedCondition(condition.nested.key, to_edge(condition.nested.filter))
    raise UnsupportedFilter(f"unsupported filter condition: {type(condition).__name__}")


def _edge_field(condition: qm.FieldCondition) -> qe.FieldCondition:
    if condition.geo_bounding_box or condition.geo_radius or condition.geo_polygon:
        raise UnsupportedFilter("geo conditions are not supported")
    values_count = None
    if condition.values_count is not None:
        vc = condition.values_count
        values_count = qe.ValuesCount(lt=vc.lt, gt=vc.gt, lte=vc.lte, gte=vc.gte)
    return qe.FieldCondition(
        condition.key,
        match=_edge_match(condition.match),
        range=_edge_range(condition.range),
        values_count=values_count,
        is_empty=condition.is_empty,
        is_null=condition.is_null,
    )


def _edge_match(match: Any) -> Any:
    match match:
        case None:
            return None
        case qm.MatchValue():
            return qe.MatchValue(match.value)
        case qm.MatchAny():
            return qe.MatchAny(match.any)
        case qm.MatchExcept():
            return qe.MatchExcept(match.except_)
        case qm.MatchText():
            return qe.MatchText(match.text)
        case qm.MatchPhrase():
            return qe.MatchPhrase(match.phrase)
        case qm.MatchTextAny():
            return qe.MatchTextAny(match.text_any)
    raise UnsupportedFilter(f"unsupported match: {type(match).__name__}")


def _edge_range(bounds: Any) -> Any:
    match bounds:
        case None:
            return None
        case qm.DatetimeRange():
            return qe.RangeDateTime(
                gte=_instant(bounds.gte),
                gt=_instant(bounds.gt),
                lte=_instant(bounds.lte),
                lt=_instant(bounds.lt),
            )
        case qm.Range():
            limits = (bounds.gte, bounds.gt, bounds.lte, bounds.lt)
            if not all(b is None or math.isfinite(b) for b in limits):
                # JSON parsers let NaN through, and the engine panics on it.
                raise UnsupportedFilter("range bounds must be finite numbers")
            return qe.RangeFloat(gte=bounds.gte, gt=bounds.gt, lte=bounds.lte, lt=bounds.lt)
    raise UnsupportedFilter(f"unsupported range: {type(bounds).__name__}")


def _instant(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, datetime):
        return iso(value if value.tzinfo else value.replace(tzinfo=UTC))
    return iso(datetime.combine(value, datetime.min.time(), tzinfo=UTC))
