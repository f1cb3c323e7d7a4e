"""Request and response bodies of the HTTP API (the records are in record.py)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_validator

from sidecar.record import (
    Attitude,
    Instant,
    MemoryRecord,
    Modality,
    Name,
    Proposition,
    ScalarValue,
    Source,
    Vector,
)

Verdict = Literal["answer", "attributed", "conflict", "abstain"]


class RecallRequest(BaseModel):
    """docs/design.md §5. The asker comes from identity, never from the body."""

    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(default=None, min_length=1, max_length=4000)
    vector: Vector | None = None
    audience: list[Name] = Field(default_factory=list, max_length=100)
    as_of: Instant | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    about: Name | None = None
    observer: Name | None = None
    observed: Name | None = Field(
        default=None, description="Only views of this person's mind (`observed_id`)."
    )
    attitude: Attitude | None = Field(
        default=None, description="Only views of a mind with this attitude (`observed_attitude`)."
    )
    source_id: Name | None = None
    modality: Modality | None = None
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    include_history: bool = False

    @model_validator(mode="after")
    def _one_query(self) -> RecallRequest:
        if (self.query is None) == (self.vector is None):
            raise ValueError("give exactly one of query or vector")
        return self


class Item(BaseModel):
    """One disclosed record, as the agent should use it."""

    id: UUID
    content: str = Field(
        description="What to read: the claim as a sentence that says whose it is "
        "(the same as `attribution`)."
    )
    attribution: str = Field(description="The claim as a sentence that says whose it is.")
    as_written: str = Field(
        description="The writer's own wording of the record: not what to act on."
    )
    usable_as: str = Field(description="What the policy lets the claim support.")
    obligations: list[str]
    notes: list[str] = Field(default_factory=list, description="Why the policy downgraded it.")
    status: Literal["current", "superseded", "stale"] = Field(
        description="`superseded`: no longer applied at the instant asked about; `stale`: "
        "still applied, but derived from a premise since superseded, erased, withdrawn or "
        "narrowed (`notes` say which): not to be taken as current."
    )
    proposition: Proposition | None = None
    observer_id: str | None = None
    observed_id: str | None = None
    observed_attitude: str | None = None
    modality: Modality
    source_id: str
    source: Source | None = None
    confidence: float
    valid_at: Instant | None = None
    invalid_at: Instant | None = None
    supersedes: UUID | None = None
    superseded_by: UUID | None = None
    score: float | None = None


class View(BaseModel):
    holder: str | None
    value: ScalarValue | None
    record_id: UUID
    usable_as: str


class Conflict(BaseModel):
    key: str
    views: list[View]


class RecallResponse(BaseModel):
    verdict: Verdict
    items: list[Item]
    conflicts: list[Conflict] = Field(default_factory=list)
    decision_id: UUID
    truncated: bool = Field(
        default=False, description="The candidate bound stopped the search before `limit`."
    )
    reason: str | None = Field(default=None, description="Why nothing could be decided.")


class MemoryResponse(BaseModel):
    """GET /v1/memories/{id}: the item and the full stored record."""

    item: Item
    record: MemoryRecord
    decision_id: UUID


class HistoryResponse(BaseModel):
    items: list[Item]
    decision_id: UUID


class MindView(BaseModel):
    """One current view in a holder's mind, as the policy lets it be used."""

    record_id: UUID
    value: ScalarValue | None
    attitude: str | None = Field(
        default=None, description="For a view of someone else's mind: knows or believes."
    )
    usable_as: str
    valid_at: Instant | None = None
    attribution: str


class OtherMind(BaseModel):
    """What the holder thinks someone else thinks of the proposition."""

    observed: str
    views: list[MindView]


class Mind(BaseModel):
    """One holder's current views of the proposition, and of others' views of it."""

    holder: str
    views: list[MindView] = Field(description="What the holder thinks.")
    about: list[OtherMind] = Field(
        default_factory=list, description="What the holder thinks others think."
    )


class PropositionResponse(BaseModel):
    """Every disclosable current perspective on one proposition key."""

    key: str
    as_of: Instant | None = Field(
        default=None, description="The instant asked about, when not now."
    )
    verdict: Verdict
    world_state: Item | None = Field(
        default=None,
        description=(
            "The authoritative, current world-state claim (the newest, when several agree);"
            " absent unless the verdict is `answer`."
        ),
    )
    perspectives: list[Item]
    conflicts: list[Conflict] = Field(default_factory=list)
    minds: list[Mind] = Field(
        default_factory=list,
        description="The perspectives (world state aside) grouped by holder, each with "
        "what they think others think.",
    )
    decision_id: UUID
    truncated: bool = False


class StoredRecords(BaseModel):
    records: list[MemoryRecord]


class ErasureResponse(BaseModel):
    """DELETE /v1/memories/{id}: the records erased (the one named, or with `history`
    every version of its chain). Nothing else: not what was derived from them."""

    erased: list[UUID]
    decision_id: UUID


class Problem(BaseModel):
    """A machine-readable refusal: `error` is stable, `reasons` say what to fix."""

    error: str
    reasons: list[Any] = Field(default_factory=list)
