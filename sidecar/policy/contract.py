"""What the sidecar asks the policy, and what it hears back: pure data, no I/O.

The questions (`DisclosureQuestion`, the writer and records of a write) are turned
into OPA input here; the answers (`Decision`, `WriteDecision`, `Explanation`) are
validated here. The policy engine (policy/engine.py) only carries them.

The claim itself stays out of the policy input: the free text and the bare value
(`content`, `proposition.text`, `proposition.value`) are what a policy guards,
not what it decides on, and the input is logged by OPA and shown by explain.
Everything else about a record is there, so new rules need no Python change.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, create_model, model_validator

from sidecar.auth.identity import Identity
from sidecar.record import Library, MemoryRecord, Name, iso

_NOT_FOR_POLICY = ("content",)
_PROPOSITION_FOR_POLICY = ("key",)
# A document's metadata is the writer's text, like content: the policy sees its library
# and id only.
_DOCUMENT_FOR_POLICY = ("library", "id")

# The purposes the disclosure policy knows (an unknown one is denied there).
Purpose = str


# --- the policy's input, as a contract (schemas/policy/, referenced by the Rego) ----


class PolicyIdentity(BaseModel):
    """An asker, audience member or writer as the policy sees them. Token claims
    (`groups`, `roles`, `scopes`) are the bearer's own; others carry none."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    tenant: Name
    groups: list[Name] = Field(default_factory=list)
    roles: list[Name] = Field(default_factory=list)
    scopes: list[Name] = Field(default_factory=list)


class PolicyProposition(BaseModel):
    """The claim as the policy sees it: only what it is about, never the claim."""

    model_config = ConfigDict(extra="forbid")

    key: Name | None = None


class PolicyDocument(BaseModel):
    """The document a record came from, as the policy sees it: never its metadata."""

    model_config = ConfigDict(extra="forbid")

    library: Library
    id: Name | None = None


# A stored record as the policy sees it: every field of the record but the claim
# itself (`content`, `proposition.text`, `proposition.value`, a document's
# metadata); see policy_view.
_FIELDS: dict[str, Any] = {
    name: (field.annotation, field)
    for name, field in MemoryRecord.model_fields.items()
    if name not in (*_NOT_FOR_POLICY, "proposition", "document")
}
PolicyRecord = create_model(
    "PolicyRecord",
    __config__=ConfigDict(extra="forbid"),
    proposition=(PolicyProposition | None, None),
    document=(PolicyDocument | None, None),
    **_FIELDS,
)


class PolicyGrant(BaseModel):
    """A subject's grant as the disclosure policy applies it (policy/grants.py):
    `reader` (a person or `group:<name>`) may see `subject`'s records of one of
    `categories`, for `purpose` only if one is named, from `since` until `until`."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    tenant: Name
    subject: Name
    reader: Name
    categories: list[Name]
    purpose: str | None = None
    since: str = Field(description="RFC 3339, UTC")
    until: str | None = Field(default=None, description="RFC 3339, UTC; absent: no end")


class DisclosureInput(BaseModel):
    """data.whose.disclosure.batch (`records`) and explanation (`record`)."""

    model_config = ConfigDict(extra="forbid")

    asker: PolicyIdentity
    audience: list[Name]
    purpose: str
    now: str = Field(description="RFC 3339, UTC")
    as_of: str = Field(description="RFC 3339, UTC: the instant asked about")
    grants: list[PolicyGrant] = Field(
        default_factory=list,
        description="The grants in force at `now` (the sidecar leaves out those not "
        "begun or ended) whose reader may be a hearer (whose.disclosure.granted).",
    )
    records: list[PolicyRecord] | None = None
    record: PolicyRecord | None = None


class IngestInput(BaseModel):
    """data.whose.ingest.decisions (`records`; `record` for the single-record rule)."""

    model_config = ConfigDict(extra="forbid")

    writer: PolicyIdentity
    records: list[PolicyRecord] | None = None
    record: PolicyRecord | None = None
    premises: list[PolicyRecord] = Field(default_factory=list)


class TrustHearer(BaseModel):
    """A hearer of a claim, and their own latest evidence about its key (when they
    last saw it, as the store holds it), if any."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    evidence_at: str | None = Field(default=None, description="RFC 3339, UTC")


class TrustClaim(BaseModel):
    """One claim made to hearers: who told it, to whom, about what."""

    model_config = ConfigDict(extra="forbid")

    teller: PolicyIdentity = Field(description="The speaker (no token claims: the directory's).")
    hearers: list[TrustHearer]
    key: Name | None = None
    hedged: bool = False
    about: list[Name] = Field(default_factory=list, description="Whose mind the claim is about.")
    said_at: str = Field(description="RFC 3339, UTC")
    teller_evidence_at: str | None = Field(
        default=None, description="The teller's own latest evidence about the key, RFC 3339."
    )


class TrustInput(BaseModel):
    """data.whose.trust.adoptions: which hearers take each claim as their own belief."""

    model_config = ConfigDict(extra="forbid")

    writer: PolicyIdentity = Field(description="Who records the claims (a relay, usually).")
    claims: list[TrustClaim]


class LabelingDocument(BaseModel):
    """A document a RAG library wrote, as the labeling policy reads it: its library, its
    library's document id, and its metadata as written (never its text)."""

    model_config = ConfigDict(extra="forbid")

    library: Library
    document_id: str | None = Field(default=None, description="Its library's document id.")
    metadata: dict[str, Any] = Field(description="The document's own metadata, as written.")
    text_length: int | None = Field(default=None, description="Characters of its text.")
    previous_holder: str | None = Field(
        default=None,
        description="For a payload update: whose view the version it changes is.",
    )


class LabelingInput(BaseModel):
    """data.whose.labeling.decisions: the labels of each document a writer writes."""

    model_config = ConfigDict(extra="forbid")

    writer: PolicyIdentity
    collection: str | None = Field(default=None, description="The collection written to.")
    documents: list[LabelingDocument]


class Labels(BaseModel):
    """Whose a document is and who may read it, as the labeling policy maps its metadata.
    The values are checked where the record is (a bad one names its metadata key)."""

    model_config = ConfigDict(extra="ignore")

    audience: Any
    holder: Any = None  # none: world state, nobody's view
    author: Any
    source_id: Any
    access_scope: Any = None
    categories: Any = None
    modality: Any = "asserted"
    source_kind: Any = "document"
    # The metadata key each label was read from.
    from_: dict[str, str] = Field(default_factory=dict, alias="from")


class LabelDecision(BaseModel):
    """What the labeling policy says about one document: its labels, or why it has none."""

    model_config = ConfigDict(extra="ignore")

    labels: Labels | None = None
    reasons: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _labels_or_reasons(self) -> LabelDecision:
        if (self.labels is None) == (not self.reasons):
            raise ValueError("a labeling decision is labels or reasons")
        return self


class Decision(BaseModel):
    """What the disclosure policy says about one record."""

    # Frozen: one decision serves every record of a shape and every request its cached
    # entry reaches (policy/decider.py `_entry`).
    model_config = ConfigDict(extra="ignore", frozen=True)

    allow: StrictBool
    # Checked against the policy's vocabulary (see answers/wording.py): a use the policy
    # cannot word is a malformed answer, and nothing is disclosed.
    usable_as: str = Field(min_length=1)
    obligations: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)


# What a record gets when the policy said nothing about it.
NO_DECISION = Decision(allow=False, usable_as="none", reasons=["no_decision"])


class WriteDecision(BaseModel):
    """What the write policy says about one record of a batch."""

    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str] = Field(default_factory=list)
    # Whether the writer may read the record it writes (the policy's visible_to):
    # a writer that may not is told nothing about the records stored beside it.
    readable: StrictBool = False


class RuleReasons(BaseModel):
    model_config = ConfigDict(extra="ignore")

    rule: str
    reasons: list[str]


class Explanation(BaseModel):
    """whose.disclosure.explanation: the decision and, per rule, what it contributed."""

    model_config = ConfigDict(extra="ignore")

    decision: Decision
    rules: list[RuleReasons]


@dataclass(frozen=True)
class BatchDecisions:
    """The decisions for one batch, and which OPA decision and revision made them."""

    decisions: dict[str, Decision]
    decision_id: str | None
    revision: str | None
    # The policy's vocabulary under that revision (see answers/wording.py).
    vocabulary: dict[str, Any]


def policy_view(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the policy sees it: everything but the claim itself."""
    view = {k: v for k, v in record.items() if k not in _NOT_FOR_POLICY}
    proposition = view.get("proposition")
    if isinstance(proposition, dict):
        view["proposition"] = {k: v for k, v in proposition.items() if k in _PROPOSITION_FOR_POLICY}
    document = view.get("document")
    if isinstance(document, dict):
        view["document"] = {k: v for k, v in document.items() if k in _DOCUMENT_FOR_POLICY}
    return view


@dataclass(frozen=True)
class DisclosureQuestion:
    """Who asks, who else will hear the answer, for what, and at which instant; and
    the subjects' grants in force now that may reach a hearer (policy/grants.py sets
    them when a read begins: they are part of every decision and of its cache key)."""

    asker: Identity
    audience: list[str]
    purpose: Purpose
    now: datetime
    as_of: datetime | None = None
    grants: tuple[dict[str, Any], ...] = ()

    @property
    def at(self) -> datetime:
        """The instant asked about: as_of, else now."""
        return self.as_of or self.now

    def input(self, records: list[dict[str, Any]], *, viewed: bool = False) -> dict[str, Any]:
        """The batch input (`decisions`). `viewed`: the records are already policy views
        (the read path makes each once, for the cache key and this input alike)."""
        views = records if viewed else [policy_view(r) for r in records]
        return self._context() | {"records": views}

    def single_input(self, record: dict[str, Any]) -> dict[str, Any]:
        """The single-record input (`single`, `explanation`)."""
        return self._context() | {"record": policy_view(record)}

    def _context(self) -> dict[str, Any]:
        return {
            "asker": self.asker.policy_view(),
            "audience": self.audience,
            "purpose": self.purpose,
            "now": iso(self.now),
            "as_of": iso(self.at),
            "grants": list(self.grants),
        }


def labeling_input(
    writer: Identity, documents: list[LabelingDocument], collection: str | None
) -> dict[str, Any]:
    """The labeling policy's input: the writer, the collection, the documents."""
    question: dict[str, Any] = {
        "writer": writer.policy_view(),
        "documents": [d.model_dump(mode="json", exclude_none=True) for d in documents],
    }
    if collection is not None:
        question["collection"] = collection
    return question


def write_input(
    writer: Identity, records: list[dict[str, Any]], premises: list[dict[str, Any]]
) -> dict[str, Any]:
    """The write policy's input: the writer, the batch, and the records it derives from."""
    return {
        "writer": writer.policy_view(),
        "records": [policy_view(r) for r in records],
        "premises": [policy_view(p) for p in premises],
    }


# --- erasure and retention (rego/whose/erasure/, retention/) ----------------

# What an erasure request names: records by id (each one the asker may see), or every
# record about a subject, from a source, or of the whole tenant (bulk requests).
# By content: every record of a proposition key, the records nearest a text, or what
# a standing forget rule names now (writes/forgetting.py).
ErasureKind = Literal[
    "records", "subject", "source", "tenant", "derived", "proposition", "query", "forget"
]
# What a standing forget rule forgets (rego/whose/forgetting/).
ForgetKind = Literal["value", "key", "pattern"]
# What becomes of the records derived from an erased one (writes/relink.py).
DerivedChoice = Literal["flag", "withdraw", "erase"]


class ErasureRequestView(BaseModel):
    """An erasure request as the policy sees it (never the requester's free-text reason)."""

    model_config = ConfigDict(extra="forbid")

    kind: ErasureKind
    subject: Name | None = None
    source: Name | None = None
    # A proposition request's key, or a forget rule's (kind `forget`, `rule_kind` key).
    key: Name | None = None
    rule_kind: ForgetKind | None = None


class ErasureInput(BaseModel):
    """data.whose.erasure.answer: may the asker make the request, and erase each record?"""

    model_config = ConfigDict(extra="forbid")

    asker: PolicyIdentity
    request: ErasureRequestView
    records: list[PolicyRecord]
    now: str = Field(description="RFC 3339, UTC")


class RetentionInput(BaseModel):
    """data.whose.retention.decisions: has each record outlived its maximum age?"""

    model_config = ConfigDict(extra="forbid")

    records: list[PolicyRecord]
    now: str = Field(description="RFC 3339, UTC")


class ErasureRequestDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str] = Field(default_factory=list)
    # The request reaches records the asker may not see (an officer's bulk request).
    unrestricted: StrictBool = False


class ErasureDecision(BaseModel):
    """What the erasure policy says about one record."""

    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str] = Field(default_factory=list)
    derived: DerivedChoice = "flag"


class ErasureAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    request: ErasureRequestDecision
    decisions: dict[str, ErasureDecision] = Field(default_factory=dict)


class RetentionDecision(BaseModel):
    """What the retention policy says about one record."""

    model_config = ConfigDict(extra="ignore")

    expire: StrictBool
    held: StrictBool = False
    derived: DerivedChoice = "flag"


# --- standing forget rules (rego/whose/forgetting/) --------------------------

ForgetAction = Literal["set", "lift", "write"]
WriteAction = Literal["keep", "redact", "conceal", "refuse"]


class ForgetRuleView(BaseModel):
    """A forget rule as the policy sees it: never its value, only how long it is."""

    model_config = ConfigDict(extra="forbid")

    id: Name | None = None
    kind: str = Field(description="`value`, `key` or `pattern` (another is refused).")
    subject: Name
    length: int | None = Field(default=None, description="A value rule's length in characters.")
    key: Name | None = None
    pattern: str | None = Field(default=None, max_length=200)
    set_by: Name | None = None


class ForgettingInput(BaseModel):
    """data.whose.forgetting: `rule` (may the asker set or lift it?) and `writes` (which
    rules each record of a write carries bind it, and what becomes of it)."""

    model_config = ConfigDict(extra="forbid")

    asker: PolicyIdentity
    action: ForgetAction
    rule: ForgetRuleView | None = None
    records: list[PolicyRecord] = Field(default_factory=list)
    carried: dict[str, list[ForgetRuleView]] = Field(
        default_factory=dict, description="Record id to the rules the sidecar found it carries."
    )


class ForgetRuleDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str] = Field(default_factory=list)


class ForgetWriteDecision(BaseModel):
    """What the forgetting policy says about one record of a write."""

    model_config = ConfigDict(extra="ignore")

    action: WriteAction
    rules: list[str] = Field(default_factory=list)


def forgetting_input(
    asker: Identity,
    action: ForgetAction,
    rule: ForgetRuleView | None = None,
    records: list[dict[str, Any]] | None = None,
    carried: dict[str, list[ForgetRuleView]] | None = None,
) -> dict[str, Any]:
    question: dict[str, Any] = {"asker": asker.policy_view(), "action": action}
    if rule is not None:
        question["rule"] = rule.model_dump(exclude_none=True)
    if records:
        question["records"] = [policy_view(r) for r in records]
    if carried:
        question["carried"] = {
            i: [r.model_dump(exclude_none=True) for r in rules] for i, rules in carried.items()
        }
    return question


def erasure_input(
    asker: Identity, request: ErasureRequestView, records: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    return {
        "asker": asker.policy_view(),
        "request": request.model_dump(exclude_none=True),
        "records": [policy_view(r) for r in records],
        "now": iso(now),
    }


def retention_input(records: list[dict[str, Any]], now: datetime) -> dict[str, Any]:
    return {"records": [policy_view(r) for r in records], "now": iso(now)}


# --- consent (rego/whose/consent/) -----------------------------------------

ConsentAction = Literal["grant", "revoke"]


class ConsentGrant(BaseModel):
    """A grant as the consent policy decides it (never the granter's free-text reason)."""

    model_config = ConfigDict(extra="forbid")

    subject: Name
    reader: Name
    categories: list[Name]
    purpose: str | None = None
    until: str | None = Field(default=None, description="RFC 3339, UTC")


class ConsentInput(BaseModel):
    """data.whose.consent.decision: may the asker grant, or revoke, for the subject?"""

    model_config = ConfigDict(extra="forbid")

    asker: PolicyIdentity
    action: ConsentAction
    grant: ConsentGrant
    now: str = Field(description="RFC 3339, UTC")


class ConsentAnswer(BaseModel):
    """The consent policy's answer: allowed exactly when no reason is given (anything
    else is no answer: fail closed)."""

    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str]

    @model_validator(mode="after")
    def _allowed_without_reasons(self) -> ConsentAnswer:
        if self.allow == bool(self.reasons):
            raise ValueError("a consent decision allows exactly when it gives no reason")
        return self


def consent_input(
    asker: Identity, action: ConsentAction, grant: ConsentGrant, now: datetime
) -> dict[str, Any]:
    return {
        "asker": asker.policy_view(),
        "action": action,
        "grant": grant.model_dump(exclude_none=True),
        "now": iso(now),
    }


# --- conversations (rego/whose/conversations/) ------------------------------

# What is asked of the conversations policy: record a membership event, or resolve an
# observation's hearers from membership.
ConversationAction = Literal["record", "resolve"]


class PolicyMembershipEvent(BaseModel):
    """A membership event as the conversations policy sees it (`writer`: of a corrected
    event, who recorded it)."""

    model_config = ConfigDict(extra="forbid")

    person: Name
    change: Literal["join", "leave", "none"]
    at: str = Field(description="RFC 3339, UTC")
    writer: Name | None = None


class ConversationsInput(BaseModel):
    """data.whose.conversations.decision: may the writer record this membership event
    (`event`, correcting `corrected`), or resolve hearers from membership?"""

    model_config = ConfigDict(extra="forbid")

    writer: PolicyIdentity
    action: ConversationAction
    conversation: Name
    event: PolicyMembershipEvent | None = None
    corrected: PolicyMembershipEvent | None = None


# --- stack collections (rego/whose/collections/) ----------------------------

# What may be done to a stack collection: create or drop it, or one of its payload indexes.
CollectionAction = Literal["create", "drop", "create_index", "drop_index"]


class PolicyCollection(BaseModel):
    """A stack collection as the collections policy sees it: always one of the asker's
    own tenant (a name is the tenant's), never its points."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    creator: Name | None = Field(default=None, description="Who created it; absent for create.")
    created_at: str | None = Field(default=None, description="RFC 3339, UTC")


class CollectionsInput(BaseModel):
    """data.whose.collections.decision: may the asker do `action` to the collection?"""

    model_config = ConfigDict(extra="forbid")

    asker: PolicyIdentity
    action: CollectionAction
    collection: PolicyCollection


class CollectionAnswer(BaseModel):
    """The collections policy's answer as it comes: allowed exactly when no reason is
    given (anything else is no answer: fail closed)."""

    model_config = ConfigDict(extra="ignore")

    allow: StrictBool
    reasons: list[str]

    @model_validator(mode="after")
    def _allowed_without_reasons(self) -> CollectionAnswer:
        if self.allow == bool(self.reasons):
            raise ValueError("a collection decision allows exactly when it gives no reason")
        return self


@dataclass(frozen=True)
class CollectionDecision:
    """What the collections policy decided about one action on a stack collection:
    `reasons` (machine-readable, e.g. `not_collection_creator`, `role_required:admin`)
    are every reason it is refused, empty when allowed."""

    allow: bool
    reasons: tuple[str, ...] = ()


def collections_input(
    asker: Identity,
    action: CollectionAction,
    name: str,
    creator: str | None,
    created_at: datetime | None = None,
) -> dict[str, Any]:
    """The collections policy's input: the asker, the action, the collection."""
    collection: dict[str, Any] = {"name": name}
    if creator is not None:
        collection["creator"] = creator
    if created_at is not None:
        collection["created_at"] = iso(created_at)
    return {"asker": asker.policy_view(), "action": action, "collection": collection}
