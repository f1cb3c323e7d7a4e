"""What a store query is limited to: one filter model for every backend.

A `Scope` is the tenant (never optional), the named conditions the sidecar
itself adds (recall's filters, current versions, a belief chain, the policy's
pushdown), and optionally a caller's own Qdrant filter (the proxy, already checked
and tenant-scoped by http/qdrant/caller_filter.py). `to_qdrant` turns a scope into
one Qdrant filter in qdrant-client's models: the server backend sends it as is, the
embedded backend translates it into its engine's types (store/edge.py). Nothing else
translates filters.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from qdrant_client.http import models as qm

from sidecar.store.schema import TENANT_FIELD, point_id

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


@dataclass(frozen=True)
class Either:
    """At least one of the alternatives holds, each all of its conditions (a subject
    erasure reaches a person as holder, observed mind, speaker or writer)."""

    alternatives: tuple[tuple[Condition, ...], ...]


Condition = (
    Match | AtLeast | NotAfter | EmptyOrAfter | Absent | AnyOf | AbsentOrAnyOf | Exactly | Either
)


@dataclass(frozen=True)
class Granted:
    """A grant the policy may disclose a record by (whose.disclosure `granted`): the
    record's subject (its holder: observer, else speaker, else writer,
    rego/whose/lib/subjects) is `subject`, and it carries one of `categories`."""

    subject: str
    categories: tuple[str, ...]

    def alternatives(self) -> tuple[tuple[Condition, ...], ...]:
        categories = AnyOf("categories", self.categories)
        return (
            (Match("observer_id", self.subject), categories),
            (Match("source.speaker", self.subject), Absent("observer_id"), categories),
            (
                Match("provenance.writer", self.subject),
                Absent("observer_id"),
                Absent("source.speaker"),
                categories,
            ),
        )


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
    # Only these record ids (a hybrid search's fusion over records already decided).
    only: tuple[str, ...] | None = None
    # Pushed down from the policy (see policy/pushdown.py): for each audience member, the
    # audience entries that admit them; and the access scopes all of them hold.
    audience_any_of: tuple[tuple[str, ...], ...] = ()
    scopes: tuple[str, ...] | None = None
    # Beside each member's audience entries (same order; () or shorter: none), the
    # grants that may let them see a record its audience does not admit.
    granted: tuple[tuple[Granted, ...], ...] = ()

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
        for at, entries in enumerate(self.audience_any_of):
            admits = AnyOf("audience", entries)
            grants = self.granted[at] if at < len(self.granted) else ()
            if grants:
                either = ((admits,), *(alt for g in grants for alt in g.alternatives()))
                conditions.append(Either(either))
            else:
                conditions.append(admits)
        if self.scopes is not None:
            conditions.append(AbsentOrAnyOf("access_scope", self.scopes))
        return conditions

    def wider(self) -> Condition | None:
        """One condition on one indexed field that every point the scope admits meets:
        the first of its own top-level conditions on the audience (the entries admitting
        one audience member no grant may admit besides); None where there is none, or
        the scope holds a caller's filter or names ids (store/planner.py, the sieve)."""
        if self.caller is not None or self.only is not None:
            return None
        for condition in self.conditions():
            if isinstance(condition, AnyOf) and condition.key == "audience":
                return condition
        return None


def to_qdrant(scope: Scope, exclude: Collection[str] = ()) -> qm.Filter:
    """The one filter a store query runs: every condition of the scope, and the
    caller's filter, under the tenant; `exclude` record ids left out."""
    must: list[qm.Condition] = [_qdrant(c) for c in scope.conditions()]
    if scope.caller is not None:
        must.append(scope.caller)
    if scope.only is not None:
        must.append(qm.HasIdCondition(has_id=[point_id(scope.tenant, rid) for rid in scope.only]))
    seen: list[qm.Condition] = []
    if exclude:
        seen.append(qm.HasIdCondition(has_id=[point_id(scope.tenant, rid) for rid in exclude]))
    return qm.Filter(must=must, must_not=seen or None)


def condition_to_qdrant(condition: Condition) -> qm.Condition:
    """One of the sidecar's own conditions as `to_qdrant` writes it."""
    return _qdrant(condition)


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
        case Either(alternatives):
            return qm.Filter(
                should=[qm.Filter(must=[_qdrant(c) for c in alt]) for alt in alternatives]
            )
