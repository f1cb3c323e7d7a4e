"""Request and response bodies of the HTTP API and the MCP tools (the records are in
record.py): every body of the native routes and the MCP tools, in one module.

The Python client (sidecar/client/) sends and reads these very models, so this module
and what it imports stay free of the server's machinery (tests/unit/test_layering.py).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sidecar.audit.model import AuditEntry
from sidecar.policy.contract import Decision, Explanation, RuleReasons
from sidecar.policy.contract import ForgetKind as ForgetKind  # the API's own name too
from sidecar.record import (
    MAX_CATEGORIES,
    MAX_PATH,
    Act,
    Attitude,
    Category,
    Instant,
    MemoryRecord,
    MemoryWrite,
    Modality,
    Name,
    Person,
    Proposition,
    ScalarValue,
    Source,
    Vector,
)

Verdict = Literal["answer", "attributed", "conflict", "abstain"]
# Whose mind a view is of, after the holder: one person, or a chain (A's view of B's …).
ObservedPath = Person | Annotated[list[Person], Field(min_length=1, max_length=MAX_PATH)]
# How recall ranks: the dense embedding and BM25 fused, or either alone.
SearchMode = Literal["hybrid", "dense", "lexical"]


def path_of(observed: str | list[str] | None) -> tuple[str, ...]:
    """`observed` as a chain of minds: a plain name is a chain of one."""
    if observed is None:
        return ()
    return (observed,) if isinstance(observed, str) else tuple(observed)


class RecallRequest(BaseModel):
    """docs/design.md §5. The asker comes from identity, never from the body."""

    model_config = ConfigDict(extra="forbid")

    query: str | None = Field(default=None, min_length=1, max_length=4000)
    vector: Vector | None = Field(
        default=None,
        description="Your own embedding of the question (the collection's model): the "
        "dense side of the search; with `query`, fused with its words.",
    )
    search: SearchMode | None = Field(
        default=None,
        description="`hybrid` (the default with a query): the dense embedding and BM25 over "
        "the words fused; `dense` or `lexical` (BM25) alone. A vector alone is `dense`.",
    )
    audience: list[Person] = Field(default_factory=list, max_length=100)
    as_of: Instant | None = None
    limit: int = Field(
        default=10,
        description="At most this many items: 1 to WHOSE_MAX_LIMIT (default 100).",
        # The bound is the setting's, refused by one reason whichever transport asks
        # (memory.py); the schema says how far the setting itself may go.
        json_schema_extra={"minimum": 1, "maximum": 1000},
    )
    about: Name | None = None
    observer: Person | None = None
    observed: ObservedPath | None = Field(
        default=None,
        description="Only views of this mind: a person (`observed_id`), or a chain of "
        "them after the observer, outermost first (`[b, c]`: the observer's view of b's "
        "view of c's), to WHOSE_MAX_MIND_DEPTH. With a chain, views derived from what "
        "the observer witnessed or heard are included, each the holder's current one.",
    )
    attitude: Attitude | None = Field(
        default=None, description="Only views of a mind with this attitude (`observed_attitude`)."
    )
    speech_act: bool | None = Field(
        default=None,
        description="true: only speech acts (what someone said, or heard someone say); "
        "false: only beliefs.",
    )
    heard: bool = Field(
        default=False,
        description="Only what was heard, from anyone: with `observer` alone, what the "
        "observer heard anyone say; with `observed`, what the observer thinks the chain's "
        'last mind heard anyone say ("a believes that b heard s say p"). Needs '
        "`observer`; the speaker is one more mind, so the chain is at most "
        "WHOSE_MAX_MIND_DEPTH - 1 long.",
    )
    source_id: Name | None = None
    modality: Modality | None = None
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    include_history: bool = False

    @model_validator(mode="after")
    def _a_query(self) -> RecallRequest:
        if self.query is None and self.vector is None:
            raise ValueError("give a query, a vector, or both")
        if self.search in ("hybrid", "lexical") and self.query is None:
            raise ValueError(f"a {self.search} search needs the query's words")
        if self.search in ("dense", "lexical") and self.query is not None and self.vector:
            raise ValueError(f"a {self.search} search takes a query or a vector, not both")
        return self

    @property
    def path(self) -> tuple[str, ...]:
        return path_of(self.observed)

    @property
    def mode(self) -> SearchMode:
        return self.search or ("hybrid" if self.query is not None else "dense")


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
        "still applied, but derived from a premise since superseded, erased or withdrawn "
        "(`notes` say which): not to be taken as current."
    )
    proposition: Proposition | None = None
    observer_id: str | None = None
    observed_id: str | None = None
    observed_path: list[str] | None = Field(
        default=None, description="A nested view: every mind after the holder, outermost first."
    )
    observed_attitude: str | None = None
    act: Act | None = Field(
        default=None,
        description="A speech act: `said` (the holder said it) or `heard` (the holder heard "
        "the first observed mind say it; with a chain, the holder thinks the chain's minds "
        "before `source.speaker` — the last of them heard it); absent for a belief.",
    )
    derived_from: UUID | None = Field(
        default=None,
        description="A view derived at read time (no record of its own): the record it "
        "comes from, which GET /v1/memories/{id} shows.",
    )
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
    # Optional fields have a default: answers are served without their nulls.
    holder: str | None = None
    value: ScalarValue | None = None
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
    value: ScalarValue | None = None
    attitude: str | None = Field(
        default=None, description="For a view of someone else's mind: knows or believes."
    )
    act: Act | None = Field(default=None, description="A speech act: said or heard.")
    usable_as: str
    valid_at: Instant | None = None
    attribution: str
    derived_from: UUID | None = Field(
        default=None, description="A derived view: the record it comes from."
    )


class OtherMind(BaseModel):
    """What the holder thinks someone else thinks of the proposition, and (nested, to
    the depth asked for) what they think that one thinks others think."""

    observed: str
    views: list[MindView]
    about: list[OtherMind] = Field(default_factory=list)


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
        "what they think others think, nested to `depth` (views derived from what each "
        "witnessed or heard included): each the holder's current view as you may see it.",
    )
    decision_id: UUID
    truncated: bool = False


# --- what an extractor writes: observations (writes/observations.py turns each into the
# speaker's statements) and witnessed events (writes/witnessed.py: each witness's view)

GROUP_NOT_PRESENT = "group_is_not_a_person_present"
GROUP_NOT_A_MIND = "group_is_not_a_mind"


def _a_person(name: str) -> str:
    # docs/design.md §6: audience ⊆ who was present. A group is not someone in the room:
    # its members come from the directory and from tokens, today and tomorrow.
    if name.startswith("group:"):
        raise PydanticCustomError(
            GROUP_NOT_PRESENT, "a group is not a person present: name who was there"
        )
    return name


# Someone who was there: the speaker or a participant (they become the audience).
Present = Annotated[Person, AfterValidator(_a_person)]


def _a_mind(name: str) -> str:
    # "alice says that group:launch-team knows p" would hand a belief to whoever joins
    # the group: a claim about a mind is about a person.
    if name.startswith("group:"):
        raise PydanticCustomError(GROUP_NOT_A_MIND, "a group is not a mind: name a person")
    return name


# Someone whose mind a claim is about.
MindName = Annotated[Person, AfterValidator(_a_mind)]
MindPath = Annotated[list[MindName], Field(min_length=1, max_length=MAX_PATH)]

UNRESOLVED = "unresolved_reference"
# Words whose meaning depends on who speaks, to whom, or when.
_PERSON = re.compile(
    r"\b(i|me|my|mine|myself|we|us|our|ours|ourselves|you|your|yours|yourself|yourselves)\b"
    r"|\b(i'm|i've|i'd|i'll|we're|we've|you're|you've)\b",
    re.IGNORECASE,
)
_TIME = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago)\b"
    r"|\b(last|next|this)\s+(week|weekend|month|year|night|morning|afternoon|evening"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
    r"|spring|summer|autumn|fall|winter)\b",
    re.IGNORECASE,
)


def unresolved(text: str) -> list[str]:
    """The words of `text` that only its speaker and its moment give a meaning."""
    return [m.group(0) for pattern in (_PERSON, _TIME) for m in pattern.finditer(text)]


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")

    proposition: Proposition
    about: MindName | MindPath | None = Field(
        default=None,
        description="Whose mind the claim is about: a person, or a chain of them "
        "(`[bob, carol]`: bob thinks carol …), never a group.",
    )
    attitude: Attitude | None = Field(
        default=None, description="With `about`: what the innermost mind does, knows or believes."
    )
    hedged: bool = Field(default=False, description="Said with hedging, e.g. 'I think'.")
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    quoted: bool = Field(
        default=False,
        description="The proposition's text is the speaker's own words, as said (first "
        "person, relative times): stored and served as a quote, dated `said_at`.",
    )
    vector: Vector | None = Field(
        default=None, description="Your own embedding of the claim (the collection's model)."
    )

    @model_validator(mode="after")
    def _resolved(self) -> Claim:
        if not self.quoted and (words := unresolved(self.proposition.text)):
            raise PydanticCustomError(
                UNRESOLVED,
                "{words}: whose, or when? Resolve them (name the person, give the date) "
                "or send the speaker's words as said, with quoted: true",
                {"words": ", ".join(dict.fromkeys(w.lower() for w in words))},
            )
        return self

    def path(self, speaker: str) -> list[str]:
        """The minds after the speaker the claim is about (none: the speaker's own)."""
        about = [self.about] if isinstance(self.about, str) else list(self.about or [])
        return [] if about in ([], [speaker]) else about


class Observation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    speaker: Present
    source_id: Name
    utterance_id: Name | None = Field(
        default=None,
        description="The utterance's id within its conversation (a turn number, the "
        "transcript's message id). A claim without a proposition key is its own line of "
        "views, keyed by the conversation, this id and the claim's place in the turn "
        "(without it: by the speaker, said_at and the claim's words).",
    )
    channel: Name | None = None
    participants: list[Present] | None = Field(
        default=None,
        max_length=1000,
        description="Everyone else present who heard it. Omitted: the conversation's "
        "members at said_at (writes/membership.py), for a writer who may attest presence; "
        "else the speaker alone. Given (even []), it wins over membership.",
    )
    said_at: Instant | None = None
    access_scope: Name | None = None
    claims: list[Claim] = Field(min_length=1, max_length=100)

    @property
    def present(self) -> list[str]:
        """The speaker and whoever else heard it, once each."""
        return list(dict.fromkeys([self.speaker, *(self.participants or [])]))


# A conversation's membership: who joins and leaves it, when (writes/membership.py).
MAX_MEMBERSHIP_CHANGES = 100
MembershipKind = Literal["join", "leave", "none"]


class MembershipChange(BaseModel):
    """Someone joined or left a conversation at an instant; or, with `corrects`, the
    event it names was wrong and this is what happened instead (`none`: nothing did)."""

    model_config = ConfigDict(extra="forbid")

    person: Present
    change: MembershipKind
    at: Instant
    corrects: UUID | None = Field(
        default=None, description="The id of the event this one corrects (it no longer counts)."
    )

    @model_validator(mode="after")
    def _none_corrects(self) -> MembershipChange:
        if self.change == "none" and self.corrects is None:
            raise PydanticCustomError(
                "nothing_to_correct", "change `none` withdraws an event: name it in `corrects`"
            )
        return self


class ConversationOpening(BaseModel):
    """A conversation (its `source_id`) opened with its first members, at an instant."""

    model_config = ConfigDict(extra="forbid")

    source_id: Name
    members: list[Present] = Field(min_length=1, max_length=MAX_MEMBERSHIP_CHANGES)
    at: Instant


class MembershipChanges(BaseModel):
    """Joins, leaves and corrections of one conversation, in one request (all or none)."""

    model_config = ConfigDict(extra="forbid")

    changes: list[MembershipChange] = Field(min_length=1, max_length=MAX_MEMBERSHIP_CHANGES)


class MembershipEvent(MembershipChange):
    """A membership change as stored: its id (what a correction names), the
    conversation, who recorded it and when."""

    id: UUID
    source_id: Name
    writer: Name
    recorded_at: Instant


class MembershipEvents(BaseModel):
    events: list[MembershipEvent]


# One record per witness (and one more for an announcement); 16 keeps an event small
# and bounds the views `minds` derives from it (settings.max_mind_views).
MAX_WITNESSES = 16
MAX_READERS = 100


def _keyed(proposition: Proposition) -> Proposition:
    # Without a key there is no chain: a witness's view would never be superseded by
    # what they see next, and they would hold every position the marble ever had.
    if not proposition.key:
        raise PydanticCustomError("proposition_key_required", "a witnessed proposition needs a key")
    return proposition


def _a_group(name: str) -> str:
    if not name.startswith("group:") or name == "group:":
        raise PydanticCustomError(
            "announcement_to_a_group", "an announcement is made to a `group:` of the directory"
        )
    return name


class Announcement(BaseModel):
    """Who announced the proposition, to which directory group."""

    model_config = ConfigDict(extra="forbid")

    speaker: Present
    to: Annotated[Person, AfterValidator(_a_group)] = Field(
        description="The directory group, as `group:<name>`, every member of which was present."
    )


class WitnessedEvent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    proposition: Annotated[Proposition, AfterValidator(_keyed)]
    witnessed_by: list[Present] = Field(
        min_length=1, max_length=MAX_WITNESSES, description="Everyone who was present."
    )
    unnoticed: list[Present] = Field(
        default_factory=list,
        max_length=MAX_WITNESSES,
        description="Witnesses nobody else saw there (watching through a window): "
        "they get their own view (and so their views of the others); nobody else's "
        "record names them.",
    )
    at: Instant | None = None
    source_id: Name
    channel: Name | None = None
    readers: list[Present] = Field(
        default_factory=list,
        max_length=MAX_READERS,
        description="Who else may read every record of the event (a narrator). Keep them "
        "the same across a story: a chain's audience is fixed (docs/design.md §4).",
    )
    access_scope: Name | None = None
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    announcement: Announcement | None = None

    @model_validator(mode="after")
    def _unnoticed_were_there(self) -> WitnessedEvent:
        if not set(self.unnoticed) <= set(self.witnessed_by):
            raise PydanticCustomError(
                "unnoticed_not_a_witness", "everyone in `unnoticed` must be in `witnessed_by`"
            )
        return self


def _one_or_many(body: Any) -> str:
    return "many" if isinstance(body, list) else "one"


# A write body: one record, observation or event, or an array of them. Validated as
# the one its JSON is (an array or not), so each reason names the fields of what was
# sent (`modality`, `0.modality`), never both readings.
MemoryWrites = Annotated[
    Annotated[MemoryWrite, Tag("one")] | Annotated[list[MemoryWrite], Tag("many")],
    Discriminator(_one_or_many),
]
Observations = Annotated[
    Annotated[Observation, Tag("one")] | Annotated[list[Observation], Tag("many")],
    Discriminator(_one_or_many),
]


class StoredRecords(BaseModel):
    records: list[MemoryRecord]


class ErasureResponse(BaseModel):
    """DELETE /v1/memories/{id}: the records erased (the one named, or with `history`
    every version of its chain). Nothing else: not what was derived from them."""

    erased: list[UUID]
    decision_id: UUID


# An erasure request (POST /v1/erasures, writes/erasure_requests.py): what it erases.
# `subject`, `source`, `tenant` by what records are about; `proposition` and `query`
# by what they say; `forget` is made by a forget rule (POST /v1/forget-rules), never
# asked for directly.
BulkKind = Literal["subject", "source", "tenant", "proposition", "query"]
RequestKind = Literal["subject", "source", "tenant", "proposition", "query", "forget"]
ErasureStatus = Literal["running", "done", "failed"]
# The most records one query request reaches (its `max_records`), and its default.
MAX_QUERY_RECORDS = 1000


class ErasureRequest(BaseModel):
    """POST /v1/erasures: what to erase, and why (kept in the audit log)."""

    model_config = ConfigDict(extra="forbid")

    kind: BulkKind = Field(
        description="`subject`: every record a person holds, said, or that is about their "
        "mind; `source`: every record from one source; `tenant`: every record of yours; "
        "`proposition`: every record of a proposition `key`; `query`: the records nearest "
        "a `query` text, down to `min_score` and at most `max_records`. By content "
        "(`proposition`, `query`) anyone may ask, over the records they may erase: an "
        "erasure officer's reach records the officer may not read."
    )
    subject: Person | None = None
    source: Name | None = None
    key: Name | None = Field(default=None, description="A `proposition` request's key.")
    query: str | None = Field(
        default=None, min_length=1, max_length=2000, description="A `query` request's text."
    )
    min_score: float = Field(
        default=0.8,
        ge=0.0,
        le=1.0,
        description="A `query` request's bound: the least cosine similarity to the query "
        "a record's embedding must have.",
    )
    max_records: int = Field(
        default=100,
        ge=1,
        le=MAX_QUERY_RECORDS,
        description="A `query` request's bound: the most records it reaches.",
    )
    reason: Name | None = Field(
        default=None, description="Your reference for why (a ticket id), kept in the audit log."
    )

    @model_validator(mode="after")
    def _named(self) -> ErasureRequest:
        named = {"subject": self.subject, "source": self.source, "proposition": self.key}
        for kind, value in named.items():
            if self.kind == kind and value is None:
                raise ValueError(f"a {kind} request names its {_NAMED[kind]}")
            if self.kind != kind and value is not None:
                raise ValueError(f"only a {kind} request names a {_NAMED[kind]}")
        if (self.kind == "query") != (self.query is not None):
            raise ValueError("a query request, and only one, names its query")
        return self


_NAMED = {"subject": "subject", "source": "source", "proposition": "key"}


class ErasureProgress(BaseModel):
    """An erasure request and how far it has got (GET /v1/erasures/{id})."""

    request_id: UUID
    tenant: str
    requested_by: str
    kind: RequestKind
    subject: str | None = None
    source: str | None = None
    key: str | None = None
    # A forget rule's erasure: the rule (POST /v1/forget-rules).
    rule_id: UUID | None = None
    reason: str | None = None
    status: ErasureStatus
    # Whether the request reaches records the requester may not read (an officer's):
    # otherwise every count is of records they may read.
    unrestricted: bool = False
    erased: int = Field(default=0, description="Records erased so far (derivations included).")
    kept: int = Field(
        default=0, description="Records it reached that the policy kept (a legal hold, say)."
    )
    kept_because: dict[str, int] = Field(default_factory=dict)
    examined: int = 0
    steps: int = 0
    created_at: Instant
    updated_at: Instant
    finished_at: Instant | None = None
    error: str | None = None
    # Where the scans stand (which one, and the point to go on from): for the sidecar.
    scan: int = 0
    cursor: str | None = None
    # Who asked, as the policy saw them (roles from their token included): each step
    # is decided for them.
    asker: dict[str, list[str] | str] = Field(default_factory=dict, exclude=True)
    # What the request matches that its answer never shows: a query's text and
    # bounds, a forget rule's value or pattern (writes/forgetting.py), and the ids a
    # query found at its first step (its later steps erase those).
    match: dict[str, str | float | int] = Field(default_factory=dict, exclude=True)
    targets: list[str] | None = Field(default=None, exclude=True)


class ForgetRuleRequest(BaseModel):
    """POST /v1/forget-rules: forget a value, a proposition key or a pattern about a
    subject, now and in every later write, until the rule is lifted."""

    model_config = ConfigDict(extra="forbid")

    kind: ForgetKind = Field(
        description="`value`: a literal (matched as written, ASCII letters in any case); "
        "`key`: every claim of a proposition key about the subject; `pattern`: a shape, "
        "`#` a digit and `@` a letter, any other character itself, matched whole-word."
    )
    subject: Person | None = Field(
        default=None, description="Whose value, key or pattern it is: you, unless set."
    )
    value: str | None = Field(default=None, min_length=1, max_length=200)
    key: Name | None = None
    pattern: str | None = Field(default=None, min_length=1, max_length=64)
    reason: Name | None = Field(
        default=None, description="Your reference for why, kept in the audit log."
    )

    @model_validator(mode="after")
    def _one_form(self) -> ForgetRuleRequest:
        given = {"value": self.value, "key": self.key, "pattern": self.pattern}
        for kind, value in given.items():
            if (self.kind == kind) != (value is not None):
                raise ValueError(f"a {self.kind} rule names its {self.kind} and nothing else")
        return self


ForgetStatus = Literal["standing", "lifted"]


class ForgetRule(BaseModel):
    """A standing forget rule as answered: never its value (only how long it is)."""

    rule_id: UUID
    tenant: str
    subject: str
    kind: ForgetKind
    key: str | None = None
    pattern: str | None = None
    value_length: int | None = None
    set_by: str
    reason: str | None = None
    status: ForgetStatus
    created_at: Instant
    lifted_at: Instant | None = None
    lifted_by: str | None = None
    # The value itself: kept to match later writes, never answered or audited.
    value: str | None = Field(default=None, exclude=True)


class ForgetRuleSet(BaseModel):
    """POST /v1/forget-rules: the rule, and the erasure of what it names now (its
    counts are of records you may erase; an officer's reach records they may not read)."""

    rule: ForgetRule
    erasure: ErasureProgress


class ForgetRules(BaseModel):
    """GET /v1/forget-rules: the standing rules about you or that you set (an erasure
    officer: every rule of the tenant)."""

    rules: list[ForgetRule]


# A grant (POST /v1/grants, policy/grants.py): a subject's records of some categories,
# shown to a reader, for a purpose, until an end.
GrantPurpose = Literal["recall", "get", "history"]


class GrantRequest(BaseModel):
    """POST /v1/grants: let `reader` see `subject`'s records of `categories`."""

    model_config = ConfigDict(extra="forbid")

    subject: Person | None = Field(
        default=None,
        description="Whose records; absent: yours (acting for another "
        "needs a role the consent policy names).",
    )
    reader: Person = Field(description="Who may see them: a person, or `group:<name>`.")
    categories: list[Category] = Field(min_length=1, max_length=MAX_CATEGORIES)
    purpose: GrantPurpose | None = Field(
        default=None, description="Only reads for this purpose; absent: any."
    )
    until: Instant | None = Field(default=None, description="When it ends; absent: never.")
    reason: Name | None = Field(
        default=None, description="Your reference for why, kept in the audit log."
    )


class Grant(BaseModel):
    """A grant in force (GET /v1/grants), or as it was when revoked."""

    grant_id: UUID
    tenant: str
    subject: str
    reader: str
    categories: list[str]
    purpose: GrantPurpose | None = None
    until: Instant | None = None
    granted_by: str
    granted_at: Instant
    revoked_by: str | None = None
    revoked_at: Instant | None = None


class GrantList(BaseModel):
    """GET /v1/grants: the grants in force that you gave, that are about you, or that
    name you as reader."""

    grants: list[Grant]


class AuditPage(BaseModel):
    """GET /v1/audit: entries of the caller's tenant, newest first."""

    entries: list[AuditEntry]


class ExplainRequest(BaseModel):
    """Whom to explain a decision for: an asker of the caller's tenant, with the
    groups, roles and scopes their token would carry, and an audience."""

    model_config = ConfigDict(extra="forbid")

    asker: Person
    groups: list[Person] = Field(default_factory=list, max_length=100)
    roles: list[Name] = Field(default_factory=list, max_length=100)
    scopes: list[Name] = Field(default_factory=list, max_length=100)
    audience: list[Person] = Field(default_factory=list, max_length=100)
    record_id: UUID
    purpose: Literal["recall", "get", "history"] = "recall"
    as_of: Instant | None = None


class ExplainResponse(BaseModel):
    decision_id: UUID
    record_id: UUID
    policy_revision: str | None
    opa_decision_id: str | None
    # Exactly what OPA evaluated (record content and proposition text left out).
    input: dict[str, Any]
    decision: Decision
    rules: list[RuleReasons]


class Problem(BaseModel):
    """A machine-readable refusal (errors.py): `error` is stable, `reasons` say what to
    fix. Every refusal of the native API and the MCP tools has this shape."""

    error: str
    reasons: list[Any] = Field(default_factory=list)
    reason: str | None = Field(
        default=None, description="`unauthenticated`: its one reason (also in `reasons`)."
    )
    # `policy_unavailable` fails closed: its refusal is also an abstention.
    verdict: Literal["abstain"] | None = Field(
        default=None,
        description="`policy_unavailable`: nothing could be decided, so nothing may be told.",
    )
    items: list[Item] | None = Field(default=None, description="`policy_unavailable`: none.")
    decision_id: UUID | None = Field(
        default=None, description="`policy_unavailable`: the read it cut short (audit log)."
    )


# --- a candidate policy's impact (POST /v1/policy/impact; policy/impact.py builds it) ---

FlipKind = Literal["newly_disclosed", "newly_withheld", "changed_use"]
Truncation = Literal["max_decisions", "max_seconds"]


class ImpactSide(BaseModel):
    """One policy's decision on a (record, question) pair, rule by rule."""

    allow: bool
    usable_as: str
    obligations: list[str]
    reasons: list[str]
    rules: list[RuleReasons]

    @classmethod
    def of(cls, explanation: Explanation) -> ImpactSide:
        decision: Decision = explanation.decision
        return cls(
            allow=decision.allow,
            usable_as=decision.usable_as,
            obligations=sorted(decision.obligations),
            reasons=sorted(decision.reasons),
            # The rules that said something: the others had no objection and no note.
            rules=[r for r in explanation.rules if r.reasons],
        )


class Flip(BaseModel):
    """A pair whose decision the candidate changes, with both sides and the rules whose
    reasons differ between them (what made the difference)."""

    kind: FlipKind
    record_id: str
    source_id: str | None
    asker: str
    audience: list[str]
    purpose: str
    as_of: datetime
    entry: str
    rules: list[str]
    current: ImpactSide
    candidate: ImpactSide


class FlipCounts(BaseModel):
    newly_disclosed: int = 0
    newly_withheld: int = 0
    changed_use: int = 0


class FlipGroup(FlipCounts):
    """Flips sharing a rule, an asker or a source."""

    key: str


class FlippedRecords(BaseModel):
    """Every record id with at least one flip of each kind: exact, never sampled."""

    newly_disclosed: list[str] = Field(default_factory=list)
    newly_withheld: list[str] = Field(default_factory=list)
    changed_use: list[str] = Field(default_factory=list)


class Skipped(BaseModel):
    """Records audited in the window that were not decided again, and why."""

    # Erased since: a replay never brings back what was erased.
    erased: int = 0
    # Not in the whose collection (a view derived at read time, a stack collection's
    # document) and never erased.
    not_stored: int = 0
    # The read passed subjects' grants that cannot be rebuilt as they were (their
    # consent entries are no longer in the audit log, or one was dropped): deciding
    # it without them would not be deciding the same read.
    grants_unknown: int = 0


class ImpactWindow(BaseModel):
    """Which audited reads to replay, and how much of them at most."""

    since: datetime | None = None
    until: datetime | None = None
    asker: str | None = None
    max_decisions: int = Field(default=1000, ge=1, le=10_000)
    max_seconds: float = Field(default=60.0, gt=0, le=600)
    max_examples: int = Field(default=20, ge=0, le=200)


class ImpactReport(BaseModel):
    """What a candidate policy would change about the reads audited in a window."""

    tenant: str
    current_revision: str | None
    candidate_revision: str | None
    window: ImpactWindow
    entries_read: int
    # (record, question) pairs decided under both policies.
    decisions: int
    seconds: float
    decisions_per_second: float
    # Set when a bound stopped the replay before the window was done.
    truncated: Truncation | None = None
    flips: FlipCounts
    records: FlippedRecords
    by_rule: list[FlipGroup]
    by_asker: list[FlipGroup]
    by_source: list[FlipGroup]
    examples: list[Flip]
    skipped: Skipped
    # Pairs the policy in force now decides otherwise than the audited read was (the
    # policy or the directory changed since): the baseline is today's policy.
    drifted: int = 0
