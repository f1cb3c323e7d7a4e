"""The store: one interface over Qdrant, two backends (in-process edge, server).

Every query carries the asker's tenant as a `must` condition (`Scope` cannot be
built without one), and nothing else is trusted to the filter: the policy checks
every record that comes back.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from qdrant_client.http import models as qm

# Payload fields with an index, and the kind of index each gets.
KEYWORD_FIELDS = (
    "observer_id",
    "observed_id",
    "modality",
    "access_scope",
    "audience",
    "source_id",
    "proposition.key",
    "provenance.writer",
    # Finds a version's stored successor: the evidence a write cut short leaves.
    "supersedes",
)
DATETIME_FIELDS = ("valid_at", "invalid_at")
FLOAT_FIELDS = ("confidence",)
TENANT_FIELD = "tenant"

_POINT_NAMESPACE = uuid.UUID("6f1d3a0e-5b7c-4d2a-9e8f-0a1b2c3d4e5f")


def point_id(tenant: str, record_id: UUID | str) -> str:
    """The Qdrant point id of a record: record ids are scoped by tenant.

    Two tenants can never address each other's points, even with a known id.
    """
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{tenant}\x00{record_id}"))


class StoreUnavailable(Exception):
    """The vector store failed or could not be reached."""


# Conditions in a backend-neutral form; each backend translates them.
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


Condition = Match | AtLeast | NotAfter | EmptyOrAfter | Absent | AnyOf | AbsentOrAnyOf


@dataclass(frozen=True)
class Scope:
    """What a query is limited to. The tenant is not optional."""

    tenant: str
    current_at: datetime | None = None
    about: str | None = None
    observer: str | None = None
    observed: str | None = None
    writer: str | None = None
    source_id: str | None = None
    modality: str | None = None
    min_confidence: float | None = None
    # Fields that must be missing, e.g. ("invalid_at",) for versions still open.
    absent: tuple[str, ...] = ()
    # Records whose `supersedes` names one of these ids; None: no such limit, (): none.
    supersedes_any_of: tuple[str, ...] | None = None
    # A caller's own Qdrant filter (the proxy), its has_id already tenant-scoped.
    caller: qm.Filter | None = None
    # Pushed down from the policy (whose.pushdown): for each audience member, the
    # audience entries that admit them; and the access scopes all of them hold.
    audience_any_of: tuple[tuple[str, ...], ...] = ()
    scopes: tuple[str, ...] | None = None

    def conditions(self) -> list[Condition]:
        conditions: list[Condition] = [Match(TENANT_FIELD, self.tenant)]
        for key, value in (
            ("proposition.key", self.about),
            ("observer_id", self.observer),
            ("observed_id", self.observed),
            ("provenance.writer", self.writer),
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
        conditions.extend(AnyOf("audience", entries) for entries in self.audience_any_of)
        if self.scopes is not None:
            conditions.append(AbsentOrAnyOf("access_scope", self.scopes))
        return conditions


@dataclass(frozen=True)
class Hit:
    record: dict[str, Any]
    score: float
    version: int
    vector: list[float] | None = None


@dataclass(frozen=True)
class Page:
    hits: list[Hit]
    # Where the next page starts (an opaque point id), or None at the end.
    next_offset: str | None = None


class Store(Protocol):
    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None: ...

    async def search(
        self,
        vector: list[float],
        scope: Scope,
        limit: int,
        exclude: Collection[str] = (),
        *,
        score_threshold: float | None = None,
        with_vector: bool = False,
    ) -> list[Hit]:
        """Nearest records within scope, best first, leaving out the `exclude` record ids.

        Paging by exclusion rather than offset: with tied scores an offset can
        skip or repeat records between two queries; exclusion cannot.
        """
        ...

    async def get(
        self, tenant: str, record_ids: list[UUID], *, with_vector: bool = False
    ) -> list[Hit]:
        """Records of this tenant by record id; unknown ids are left out."""
        ...

    async def find(
        self, scope: Scope, limit: int, *, offset: str | None = None, with_vector: bool = False
    ) -> Page:
        """Records within scope by filter alone (no vector), in point-id order, a page at a time."""
        ...

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], list[float]]]) -> None:
        """Store records (payload, vector) of one tenant in one operation."""
        ...

    async def update(self, tenant: str, record_id: UUID, fields: dict[str, Any]) -> None:
        """Set payload fields of one stored record (supersession only; never content)."""
        ...


def iso(instant: datetime) -> str:
    return instant.isoformat().replace("+00:00", "Z")
