"""What an audit entry holds, and which entries a query selects.

One entry per request that asked the policy: a read (recall, get, history, the
proxy's reads), an explain call, or a write. An entry names records by id and
people by name, with every decision and reason; never a record's content, its
proposition's text or value.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol
from uuid import UUID

from pydantic import BaseModel, Field

# What happened to a record in one entry: a read allowed or withheld it, a write
# stored or refused it.
RecordOutcome = Literal[
    "allowed", "withheld", "stored", "refused", "erased", "flagged", "withdrawn"
]
# What `GET /v1/audit?outcome=` selects: a record outcome, or a request the policy
# could not answer.
Outcome = Literal[
    "allowed",
    "withheld",
    "policy_unavailable",
    "stored",
    "refused",
    "erased",
    "flagged",
    "withdrawn",
]
AuditPurpose = Literal[
    "recall",
    "get",
    "history",
    "explain",
    "write",
    "erase",
    "impact",
    "consent",
    "forget",
    "membership",
]
WriteRoute = Literal[
    "memories",
    "observations",
    "witnessed",
    "proxy.upsert",
    "proxy.set_payload",
    "proxy.overwrite_payload",
    "proxy.delete_payload",
    "mcp.remember",
    "adopt",
]
WriteOutcome = Literal["stored", "refused"]
# What an erasure did to a record: erased it, or, for a record derived from an
# erased one, flagged it as stale or ended its valid time (writes/eraser.py); or
# refused to erase it.
ErasureOutcome = Literal["erased", "flagged", "withdrawn", "refused"]

POLICY_UNAVAILABLE: Final = "policy_unavailable"


class Decided(Protocol):
    """What an entry keeps of a disclosure decision (policy/contract.py's Decision)."""

    @property
    def allow(self) -> bool: ...

    @property
    def usable_as(self) -> str: ...

    @property
    def reasons(self) -> list[str]: ...


# The record outcomes that each `outcome` filter looks for (None: any). A request the
# policy could not answer withholds (reads) or refuses (writes) what it had not settled.
WANTED: dict[Outcome | None, frozenset[RecordOutcome]] = {
    None: frozenset({"allowed", "withheld", "stored", "refused", "erased", "flagged", "withdrawn"}),
    "allowed": frozenset({"allowed"}),
    "withheld": frozenset({"withheld"}),
    "stored": frozenset({"stored"}),
    "refused": frozenset({"refused"}),
    "erased": frozenset({"erased"}),
    "flagged": frozenset({"flagged"}),
    "withdrawn": frozenset({"withdrawn"}),
    POLICY_UNAVAILABLE: frozenset({"withheld", "refused"}),
}


class AuditedRecord(BaseModel):
    """One record a read decided on."""

    id: str
    usable_as: str | None = None
    reasons: list[str] = Field(default_factory=list)
    # The OPA decision that produced this answer (an earlier one when cached).
    opa_decision_id: str | None = None
    cached: bool = False


class AuditedWrite(BaseModel):
    """One record of a write request, stored or refused, or of an erasure: whose
    claim it is, never the claim itself."""

    # None: refused before it had an id (the body named none and failed validation).
    id: str | None
    # Its place in the request's batch, from 0 (a 422 lists problems by this index).
    index: int = Field(ge=0)
    # Whose claim it is: the observer, or for a claim without one the source's
    # speaker (the write policy's `voice`, rego/whose/ingest/ingest.rego).
    holder: str | None = None
    observed_id: str | None = None
    outcome: WriteOutcome | ErasureOutcome
    reasons: list[str] = Field(default_factory=list)


class AuditedErasure(BaseModel):
    """What an erasure request asked for (entries of purpose `erase`): never the
    content of what it erased."""

    # The bulk request this step belongs to (writes/erasure_requests.py), if any.
    request_id: str | None = None
    kind: str
    subject: str | None = None
    source: str | None = None
    # The requester's own reference for why (a ticket, "GDPR art. 17", "retention").
    reason: str | None = None


class AuditedGrant(BaseModel):
    """A grant given, revoked or refused (entries of purpose `consent`,
    policy/grants.py): whose records, to whom, of what, until when; never a record."""

    action: Literal["grant", "revoke"]
    grant_id: str | None = None
    subject: str
    reader: str
    categories: list[str]
    purpose: str | None = None
    until: datetime | None = None
    # Empty when allowed; the consent policy's reasons when refused.
    refused_because: list[str] = Field(default_factory=list)
    reason: str | None = None


class AuditedMembershipChange(BaseModel):
    """One join, leave or correction asked for (entries of purpose `membership`,
    writes/membership.py): whose presence, when; never a record."""

    person: str
    change: Literal["join", "leave", "none"]
    at: datetime
    corrects: str | None = None
    # The event stored; absent when the batch was refused.
    event_id: str | None = None
    # Empty when allowed; the conversations policy's reasons when refused.
    refused_because: list[str] = Field(default_factory=list)


class AuditedMembership(BaseModel):
    """A batch of membership changes to one conversation, stored or refused whole."""

    conversation: str
    changes: list[AuditedMembershipChange]


class AuditedClaims(BaseModel):
    """The token claims a reader asked with (never a record's): what a replay of the
    read under another policy needs besides the asker's name (oversight.py, impact)."""

    groups: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    scopes: list[str] = Field(default_factory=list)


class AuditedImpact(BaseModel):
    """What an impact analysis (purpose `impact`) replayed and found: counts and the
    candidate's revision, never a record."""

    candidate_revision: str | None
    since: datetime | None = None
    until: datetime | None = None
    asker: str | None = None
    decisions: int
    newly_disclosed: int
    newly_withheld: int
    changed_use: int
    truncated: str | None = None


class AuditEntry(BaseModel):
    decision_id: UUID
    time: datetime
    tenant: str
    # Who asked: the reader, the explaining admin, or the writer.
    asker: str
    audience: list[str]
    purpose: str
    route: str | None = None
    policy_revision: str | None = None
    opa_decision_ids: list[str] = Field(default_factory=list)
    # What the store was told to filter on (whose.pushdown), where the path used it.
    pushdown: dict[str, Any] | None = None
    allowed: list[AuditedRecord] = Field(default_factory=list)
    withheld: list[AuditedRecord] = Field(default_factory=list)
    # Writes only: every record of the batch, in batch order.
    written: list[AuditedWrite] = Field(default_factory=list)
    error: str | None = None
    # Explain only: whose decision the policy admin (`asker`) looked at.
    explained_for: str | None = None
    # Erasures only: what was asked for, and why.
    erasure: AuditedErasure | None = None
    # Reads only, so a policy edit's impact can re-decide them: the instant the read
    # asked about (absent: `time`), the asker's token claims (absent: none), and a
    # digest of the subjects' grants the read passed to the disclosure policy
    # (policy/grants.py `digest`; absent: none), which the replay rebuilds from the
    # consent entries and the grants held, a grant revoked or ended since included.
    as_of: datetime | None = None
    claims: AuditedClaims | None = None
    grants_digest: str | None = None
    # Impact analyses only: what the policy admin (`asker`) replayed, and its counts.
    impact: AuditedImpact | None = None
    # Consent only: the grant given, revoked or refused.
    grant: AuditedGrant | None = None
    # Membership only: the joins, leaves and corrections stored or refused.
    membership: AuditedMembership | None = None

    def record_outcomes(self) -> Iterator[tuple[str | None, RecordOutcome]]:
        """Each record the entry names, with what happened to it (the same record may
        come more than once, e.g. twice in one write batch)."""
        for record in self.allowed:
            yield record.id, "allowed"
        for record in self.withheld:
            yield record.id, "withheld"
        for write in self.written:
            yield write.id, write.outcome

    def outcomes(self) -> set[Outcome]:
        """Every `outcome` filter value this entry answers to, record or no record."""
        found: set[Outcome] = {outcome for _, outcome in self.record_outcomes()}
        if self.error == POLICY_UNAVAILABLE:
            found.add(POLICY_UNAVAILABLE)
        return found


def audited_write(
    index: int,
    record: Mapping[str, Any],
    outcome: WriteOutcome | ErasureOutcome,
    reasons: Iterable[str] = (),
) -> AuditedWrite:
    """One record of a write batch, from its body or prepared payload (a dict in the
    record's JSON shape). Reads only `id`, `observer_id`, `source.speaker` and
    `observed_id`: nothing of the claim itself reaches the audit log."""
    record_id = record.get("id")
    source = record.get("source")
    speaker = source.get("speaker") if isinstance(source, Mapping) else None
    holder = record.get("observer_id") or speaker
    observed = record.get("observed_id")
    return AuditedWrite(
        id=str(record_id) if record_id is not None else None,
        index=index,
        holder=str(holder) if holder is not None else None,
        observed_id=str(observed) if observed is not None else None,
        outcome=outcome,
        reasons=list(reasons),
    )


def read_entry(
    decision_id: UUID,
    asker: tuple[str, str],
    audience: Sequence[str],
    purpose: str,
    route: str,
    revision: str | None,
    decided: Iterable[tuple[str, Decided, str | None, bool]],
    *,
    pending: Sequence[str] = (),
    opa_decision_ids: Sequence[str] = (),
    pushdown: dict[str, Any] | None = None,
    error: str | None = None,
    as_of: datetime | None = None,
    claims: tuple[Sequence[str], Sequence[str], Sequence[str]] = ((), (), ()),
    grants_digest: str | None = None,
) -> AuditEntry:
    """The audit entry for one disclosure (reads/gate.py), to hand to `AuditLog.record`.

    - `asker`: (id, tenant) of the verified identity that asked.
    - `decided`: (record id, decision, OPA's decision id, from the cache) for every
      record decided; allowed ones are listed with the use they were disclosed as.
    - `pending`: ids whose decision never came (the policy failed): withheld.
    - `pushdown`: the store filter the policy implied, as described to auditors.
    - `as_of`, `claims`, `grants_digest`: the instant asked about, the asker's
      (groups, roles, scopes) and the digest of the grants the read passed, kept so
      that the read can be decided again as it was (policy impact).

    Never the claim: ids, uses and reasons only. `time` is now.
    """
    # Plain data, validated in one pass: cheaper than a model per record.
    allowed: list[dict[str, Any]] = []
    withheld: list[dict[str, Any]] = []
    for record_id, decision, opa_decision_id, cached in decided:
        audited = {
            "id": record_id,
            "usable_as": decision.usable_as if decision.allow else None,
            "reasons": decision.reasons,
            "opa_decision_id": opa_decision_id,
            "cached": cached,
        }
        (allowed if decision.allow else withheld).append(audited)
    withheld += [{"id": i, "reasons": ["policy_unavailable"]} for i in pending]
    asker_id, tenant = asker
    return AuditEntry.model_validate(
        {
            "decision_id": decision_id,
            "time": datetime.now(UTC),
            "tenant": tenant,
            "asker": asker_id,
            "audience": list(audience),
            "purpose": purpose,
            "route": route,
            "policy_revision": revision,
            "opa_decision_ids": list(opa_decision_ids),
            "pushdown": pushdown,
            "allowed": allowed,
            "withheld": withheld,
            "error": error,
            "as_of": as_of,
            # Left out when empty: most askers carry no claims, and entries stay small.
            "claims": dict(zip(("groups", "roles", "scopes"), map(list, claims), strict=True))
            if any(claims)
            else None,
            "grants_digest": grants_digest,
        }
    )


def write_entry(
    decision_id: UUID,
    writer: tuple[str, str],
    route: WriteRoute,
    revision: str | None,
    records: list[AuditedWrite],
    error: str | None = None,
    opa_decision_ids: Sequence[str] = (),
) -> AuditEntry:
    """The audit entry for one write request, to hand to `AuditLog.record`.

    - `writer`: (id, tenant) of the verified identity that wrote; the id is the
      entry's `asker`.
    - `route`: `memories`, `observations`, `witnessed`, `proxy.upsert` (and the
      proxy's other writes), `mcp.remember`, or `adopt` (`whose adopt`).
    - `revision`: the policy revision that decided (None if the policy never answered).
    - `records`: every record of the batch, in batch order (`audited_write` builds
      one): `stored`, or `refused` with every reason. A refused batch stores
      nothing, so each of its records is `refused`, with its own reasons (none
      for a record refused only because another in its batch was).
    - `error`: set when the request failed rather than being refused, e.g.
      `policy_unavailable`, `lock_unavailable` or `store_unavailable` (a 503); its
      records are then `refused` with that code as their reason.
    - `opa_decision_ids`: OPA's ids for the write-policy decisions, where known.

    `purpose` is `write`; `time` is now.
    """
    writer_id, tenant = writer
    return AuditEntry(
        decision_id=decision_id,
        time=datetime.now(UTC),
        tenant=tenant,
        asker=writer_id,
        audience=[],
        purpose="write",
        route=route,
        policy_revision=revision,
        opa_decision_ids=list(opa_decision_ids),
        written=records,
        error=error,
    )


class AuditQuery(BaseModel):
    tenant: str
    asker: str | None = None
    record: str | None = None
    outcome: Outcome | None = None
    purpose: AuditPurpose | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 100

    def matches(self, entry: AuditEntry) -> bool:
        """The filter in Python: the stream sink applies it to what it reads; the
        SQLite sink asks the same in SQL (tests hold the two to one answer)."""
        if entry.tenant != self.tenant or (self.asker and entry.asker != self.asker):
            return False
        if self.purpose and entry.purpose != self.purpose:
            return False
        if (self.since and entry.time < self.since) or (self.until and entry.time > self.until):
            return False
        if self.outcome == POLICY_UNAVAILABLE and entry.error != POLICY_UNAVAILABLE:
            return False
        wanted = WANTED[self.outcome]
        named = [i for i, outcome in entry.record_outcomes() if outcome in wanted]
        if self.record is not None:
            return self.record in named
        # No record asked for: any entry, or any that has a record with that outcome.
        return bool(named) or self.outcome in (None, POLICY_UNAVAILABLE)
