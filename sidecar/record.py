"""The memory record (docs/design.md §2): one claim, whose it is, and who may have it.

A record is the payload of one Qdrant point. Field names follow the published
design contract, so its JSON is accepted as is; unknown fields are refused
rather than dropped, because a misspelt `audience` must not pass unnoticed.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sidecar.auth.identity import MAX_NAME_CHARS, person_name

Modality = Literal[
    "world_state",
    "asserted",
    "believed",
    "reported_belief",
    "inferred",
    "known",
    "common_knowledge",
    # What its holder witnessed (docs/design.md §3): at most their belief.
    "observed",
]
SourceKind = Literal[
    "conversation",
    "document",
    "change_record",
    "announcement",
    "acknowledgement",
    "system",
    "perception",
    # What its holder was told and took as their own (writes/testimony.py).
    "testimony",
]
Attitude = Literal["knows", "believes"]
# What became of a premise after a record was derived from it (writes/lineage.py).
PremiseChange = Literal["superseded", "erased", "withdrawn", "narrowed", "stale"]
# The RAG library a document came from through the Qdrant dialect (writes/documents.py).
Library = Literal["langchain", "llamaindex", "haystack", "mem0", "plain"]
# A speech act (docs/design.md §3): the holder said it, or heard the first mind of its
# observed path say it. Beside beliefs, never one: a statement can be a lie.
Act = Literal["said", "heard"]
# A point's payload as the store holds it: a record's fields (and a library's document).
Payload = dict[str, Any]
# The most minds a view may nest (the holder's view of A's view of B's …): the hard
# cap of the record model; `max_mind_depth` (settings.py) may bound it lower.
MAX_PATH = 16


# OPA compares instants as int64 nanoseconds since 1970: outside these years a
# timestamp would silently never (or always) apply.
_FIRST_YEAR, _LAST_YEAR = 1700, 2200


def _as_utc(value: datetime) -> datetime:
    # Naive timestamps are read as UTC so every stored instant compares as one.
    try:
        utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise ValueError("timestamp out of range") from None
    if not _FIRST_YEAR <= utc.year <= _LAST_YEAR:
        raise ValueError(f"timestamp must fall in the years {_FIRST_YEAR}..{_LAST_YEAR}")
    return utc


Instant = Annotated[datetime, AfterValidator(_as_utc)]


def iso(instant: datetime) -> str:
    """An instant as stored and as the policy reads it: RFC 3339, `Z` for UTC."""
    return instant.isoformat().replace("+00:00", "Z")


Name = Annotated[str, Field(min_length=1, max_length=200)]


def _one_form(name: str) -> str:
    folded = person_name(name)
    # Folding can lengthen a name ("ß" is "ss"); what a name may hold otherwise (no
    # padding, no control characters) is the write policy's to refuse, as before.
    if len(folded) > MAX_NAME_CHARS:
        raise PydanticCustomError("name_invalid", "a name, in its one form, is 1 to 200 characters")
    return folded


# A category a record carries, and a grant names (docs/consent.md): a short lowercase
# word of the tenant's vocabulary (data.whose.config.consent), which the write and
# consent policies check. Bounded here so that no payload or grant grows without end.
Category = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9][a-z0-9_.-]*$")]
MAX_CATEGORIES = 16


# A person or a group ("group:x") as every name of one is read: in its one form
# (auth/identity.py `person_name`), so "Alice" and "alice" are one mind.
Person = Annotated[Name, AfterValidator(_one_form)]
# Values must survive JSON, OPA and Qdrant unchanged: finite floats, 64-bit ints.
Finite = Annotated[float, Field(allow_inf_nan=False)]
INT64 = (-(2**63), 2**63 - 1)
Int64 = Annotated[int, Field(ge=INT64[0], le=INT64[1])]


def _exact_integer(value: Any) -> Any:
    # Without this an integer outside int64 fails Int64 and falls through to the float
    # branch of the union, rounded: 2**63 and 2**63 + 1 would compare equal.
    if type(value) is int and not INT64[0] <= value <= INT64[1]:
        raise PydanticCustomError(
            "integer_out_of_range", "integers are 64-bit (-2**63 .. 2**63 - 1); send a string"
        )
    return value


ScalarValue = Annotated[
    Annotated[str, Field(max_length=2000)] | Int64 | Finite | bool,
    BeforeValidator(_exact_integer),
]


# The least value float32 rounds to infinity (its largest finite value plus half an ulp).
_FLOAT32_ROUNDS_TO_INFINITY = 2.0**128 - 2.0**103


def has_usable_length(vector: list[float]) -> bool:
    """Whether cosine search can normalise the vector: Qdrant does so in 32-bit
    floats, where a huge component overflows and a tiny one underflows to zero
    (either way the record could never be found, nor a query find anything)."""
    # Each component and its square rounded to float32 as Qdrant computes them (array
    # "f" rounds, to inf past float32's range and to 0 below it); summed exactly, then
    # held to what a float32 sum can hold. Pure Python: the client validates with these
    # models and must not need numpy.
    squares = array("f", [x * x for x in array("f", vector)])
    return 0.0 < math.fsum(squares) < _FLOAT32_ROUNDS_TO_INFINITY


def _usable_vector(vector: list[float]) -> list[float]:
    if not has_usable_length(vector):
        raise ValueError("vector length must be non-zero and finite in 32-bit floats")
    return vector


Vector = Annotated[
    list[Finite], Field(min_length=1, max_length=4096), AfterValidator(_usable_vector)
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Proposition(_Strict):
    """The bare claim p, with a key that groups beliefs about the same thing."""

    text: str = Field(min_length=1, max_length=2000)
    key: Name | None = None
    value: ScalarValue | None = None
    quoted: bool | None = Field(
        default=None,
        description="The text is its speaker's own words, as said: its 'I' is the "
        "speaker's and its 'yesterday' is relative to valid_at. Served as a dated quote.",
    )


class Source(_Strict):
    kind: SourceKind
    speaker: Person | None = None
    channel: Name | None = None
    participants: list[Person] = Field(default_factory=list, max_length=1000)
    # Participants the others did not see there (a witness at the window): in a
    # perception, its holder, who then knows nobody saw them (writes/witnessed.py).
    unnoticed: list[Person] | None = Field(default=None, max_length=1000)


class Evidence(_Strict):
    kind: Name
    ref: Name | None = None
    by: Person | None = None
    at: Instant | None = None


class Provenance(_Strict):
    writer: Name | None = None
    method: Name | None = None
    derived_from: list[UUID] = Field(default_factory=list, max_length=1000)
    # The id the writer chose for the record, in the writer's own namespace (set by the
    # sidecar): every version written under it answers to it (writes/versions.py).
    chosen_id: UUID | None = None


# Document metadata is kept as written, within bounds: it is the writer's, like content.
_MAX_METADATA_BYTES = 16_384


def _bounded_metadata(value: dict[str, Any]) -> dict[str, Any]:
    def finite(v: Any, depth: int) -> bool:
        if depth > 8:
            return False
        if isinstance(v, float):
            return math.isfinite(v)
        if isinstance(v, dict):
            return all(isinstance(k, str) and finite(x, depth + 1) for k, x in v.items())
        if isinstance(v, list):
            return all(finite(x, depth + 1) for x in v)
        return v is None or isinstance(v, str | int | bool)

    if not finite(value, 0):
        raise ValueError("metadata holds JSON values only, finite numbers, nested at most 8 deep")
    if len(json.dumps(value, ensure_ascii=False)) > _MAX_METADATA_BYTES:
        raise ValueError(f"metadata is at most {_MAX_METADATA_BYTES} characters of JSON")
    return value


class Document(_Strict):
    """The document a RAG library wrote as this record (writes/documents.py)."""

    library: Library
    # The library's own id of the document the record belongs to: Haystack's
    # Document.id, LlamaIndex's ref_doc_id.
    id: Name | None = None
    # The rest of the document's metadata, as written: never read by the policy.
    metadata: Annotated[dict[str, Any], AfterValidator(_bounded_metadata)] = Field(
        default_factory=dict
    )


class PremiseChanged(_Strict):
    """A premise of a derived record changed after the record was made (set by the
    sidecar): the record is no longer served as current (docs/design.md §4)."""

    premise: UUID
    change: PremiseChange
    # When the sidecar recorded the change.
    recorded_at: Instant


class MemoryRecord(_Strict):
    """One perspective on one claim (docs/design.md §2)."""

    id: UUID | None = None
    tenant: Name | None = None
    content: str = Field(min_length=1, max_length=8000)
    proposition: Proposition | None = None
    observer_id: Person | None = None
    observed_id: Person | None = None
    # A nested view (docs/design.md §2): every mind after the holder, outermost first
    # (B_holder(B_a(B_b … p))); observed_id is its first. Only for two or more: a view
    # of one mind is observed_id alone, so each view has one spelling.
    observed_path: list[Person] | None = Field(default=None, min_length=1, max_length=MAX_PATH)
    observed_attitude: Attitude | None = None
    act: Act | None = None
    source_id: Name
    source: Source | None = None
    modality: Modality
    evidence: list[Evidence] = Field(default_factory=list, max_length=100)
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    audience: list[Person] = Field(default_factory=list, max_length=1000)
    access_scope: Name | None = None
    # What the claim is about, in the tenant's vocabulary ("appointments"): what a
    # subject's grant (policy/grants.py) may disclose by. Absent: no category.
    categories: list[Category] | None = Field(default=None, min_length=1, max_length=MAX_CATEGORIES)
    valid_at: Instant | None = None
    invalid_at: Instant | None = None
    recorded_at: Instant | None = None
    supersedes: UUID | None = None
    superseded_by: UUID | None = None
    provenance: Provenance | None = None
    document: Document | None = None
    premise_changes: list[PremiseChanged] | None = Field(default=None, max_length=1000)

    @model_validator(mode="after")
    def _shape(self) -> MemoryRecord:
        # Structure only; whether the claim may be stored is the write policy's call.
        if self.categories is not None:
            # One spelling per set of categories: records alike share a decision shape.
            self.categories = sorted(set(self.categories))
        if self.modality != "world_state" and self.observer_id is None:
            raise ValueError("observer_id is required unless modality is world_state")
        if self.observed_path is not None:
            if self.observed_id not in (None, self.observed_path[0]):
                raise ValueError("observed_id must be the first of observed_path")
            self.observed_id = self.observed_path[0]
            if len(self.observed_path) == 1:
                self.observed_path = None
        if self.observed_attitude is not None and self.observed_id is None:
            raise ValueError("observed_attitude needs observed_id")
        if self.act == "heard" and self.observed_id is None:
            raise ValueError("act heard needs observed_id: whom the holder heard")
        if self.valid_at and self.invalid_at and self.invalid_at < self.valid_at:
            raise ValueError("invalid_at is before valid_at")
        return self

    def payload(self) -> dict[str, Any]:
        """The JSON stored as the Qdrant payload (absent fields stay absent)."""
        return self.model_dump(mode="json", exclude_none=True)


class MemoryWrite(MemoryRecord):
    """A record as written: optionally with the caller's own embedding."""

    vector: Vector | None = None
    # A record for a stack collection (store/stacks.py) carries the stack's vectors by
    # name instead (`with_vectors`): set by the code that read them from a Qdrant
    # request, never read from the native API's JSON nor dumped into any. Each a dense
    # list of floats or a qdrant-client SparseVector, by name ("" the unnamed one); the
    # writer checks them against the store's layout (store/layout.py).
    _vectors: dict[str, Any] | None = PrivateAttr(default=None)

    def with_vectors(self, vectors: Mapping[str, Any]) -> MemoryWrite:
        """This record with the named `vectors` (and no `vector`)."""
        written = self.model_copy(update={"vector": None})
        written._vectors = dict(vectors)
        return written

    @property
    def named_vectors(self) -> dict[str, Any] | None:
        return self._vectors


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as the store holds it: its payload, and what the read path keeps
    asking of it (id, valid time, links), parsed once.

    The payload stays the stored JSON: it is what the policy reads and what the
    Qdrant dialect returns. A payload without a usable id or valid time is not a
    record (`from_payload` gives None) and is never shown to anyone.
    """

    payload: dict[str, Any]
    id: str
    valid_at: datetime
    invalid_at: datetime | None = None
    # The similarity to the query, for records a search found.
    score: float | None = None
    vector: list[float] | None = None

    @classmethod
    def from_payload(
        cls,
        payload: dict[str, Any] | None,
        score: float | None = None,
        vector: list[float] | None = None,
    ) -> Stored | None:
        if not payload:
            return None
        try:
            record_id = uuid_text(payload["id"])
            valid_at = _instant(payload["valid_at"])
            ended = payload.get("invalid_at")
            invalid_at = None if ended is None else _instant(ended)
        except (KeyError, TypeError, ValueError):
            return None
        return cls(payload, record_id, valid_at, invalid_at, score, vector)

    @property
    def supersedes(self) -> str | None:
        return _text(self.payload.get("supersedes"))

    @property
    def superseded_by(self) -> str | None:
        return _text(self.payload.get("superseded_by"))

    @property
    def key(self) -> str | None:
        return _text((self.payload.get("proposition") or {}).get("key"))

    @property
    def path(self) -> tuple[str, ...]:
        """The minds this view is of, after its holder (empty for the holder's own)."""
        return observed_path(self.payload)

    def applied_at(self, at: datetime) -> bool:
        return valid_time_covers(self.valid_at, self.invalid_at, at)

    def ended_by(self, at: datetime) -> bool:
        return self.invalid_at is not None and self.invalid_at <= at

    def status_at(self, at: datetime) -> Literal["current", "superseded", "stale"]:
        """Whether it still applied at `at` (its invalid_at has not passed), and if so,
        whether a premise it was derived from had changed by then (stale)."""
        if self.ended_by(at):
            return "superseded"
        return "stale" if self.stale_at(at) else "current"

    def stale_at(self, at: datetime) -> bool:
        """A premise of this derived record had been superseded, erased, withdrawn or
        narrowed by `at`."""
        for change in self.payload.get("premise_changes") or ():
            try:
                if _instant(change["recorded_at"]) <= at:
                    return True
            except (KeyError, TypeError, ValueError):
                return True  # unreadable: never served as current
        return False

    def without(self, fields: Iterable[str]) -> Stored:
        """The same record with some payload fields left out (links it may not show)."""
        dropped = set(fields)
        if not dropped & self.payload.keys():
            return self
        kept = {k: v for k, v in self.payload.items() if k not in dropped}
        return replace(self, payload=kept)


def observed_path(payload: dict[str, Any]) -> tuple[str, ...]:
    """The minds a record is a view of, after its holder, outermost first."""
    path = payload.get("observed_path")
    if path:
        return tuple(str(p) for p in path)
    observed = payload.get("observed_id")
    return (str(observed),) if observed else ()


def day(instant: Any) -> str:
    """`8 May 2023` (UTC), or "" when there is no usable instant."""
    if isinstance(instant, datetime):
        moment = instant
    else:
        try:
            moment = datetime.fromisoformat(str(instant))
        except ValueError:
            return ""
    return f"{moment.day} {moment:%B %Y}"


def valid_time_covers(valid_at: datetime, invalid_at: datetime | None, at: datetime) -> bool:
    """Whether a claim applied at `at`: valid_at <= at < invalid_at (open-ended
    without one). The one statement of it, for reads and for supersession."""
    return valid_at <= at and (invalid_at is None or at < invalid_at)


# A UUID as the sidecar writes it; any other spelling UUID reads is made into it.
_CANONICAL_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def uuid_text(value: Any) -> str:
    """`str(UUID(str(value)))` (ValueError if it is no UUID), without parsing the id
    when it is already written so: a stored record's always is, and every record a
    store returns is read through here."""
    text = str(value)
    return text if _CANONICAL_ID.fullmatch(text) else str(UUID(text))


def _instant(value: Any) -> datetime:
    instant = datetime.fromisoformat(value)
    if instant.tzinfo is None:
        raise ValueError("stored instants carry a zone")
    return instant


def _text(value: Any) -> str | None:
    return str(value) if value else None
