"""The security team's surface, beside memory.py: the audit log (role `auditor`),
explain, the policy in force and a candidate policy's impact (role `policy-admin`).

The admin routes (http/admin.py) call these methods and nothing else. Both stay inside
the caller's tenant and return no record content: decisions, reasons and the
attributes the policy read. The role is checked here, so whatever transport asks, the
same role is needed; refusals are the error tree's, noted at the door (memory.door).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sidecar.audit import (
    AuditedImpact,
    AuditedRecord,
    AuditEntry,
    AuditPurpose,
    AuditQuery,
    Outcome,
)
from sidecar.audit.sink import SINK_ERRORS
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.door import door
from sidecar.errors import (
    AuditUnavailable,
    CandidateRefused,
    Forbidden,
    GrantsUnavailable,
    NotFound,
)
from sidecar.messages import AuditPage, ExplainRequest, ExplainResponse, Grant
from sidecar.policy import impact
from sidecar.policy.candidate import Candidates
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.grants import GrantSource, digest, policy_view, reaches
from sidecar.policy.impact import ImpactReport, ImpactSide, ImpactWindow, Question
from sidecar.store import Store

log = logging.getLogger(__name__)

AUDITOR = "auditor"
POLICY_ADMIN = "policy-admin"


# The reads a replay decides again (explain, writes, erasures and impact runs are not
# disclosures).
_REPLAYED = frozenset({"recall", "get", "history"})
# Pairs decided at once under each policy: enough to keep both engines busy, few
# enough that the time bound is checked often.
_CHUNK = 16
_PAGE = 500
# Grants and revocations read, at most, to rebuild the grants audited reads passed,
# and consent entries (refusals too) scanned for them.
_HISTORY = 10_000
_HISTORY_SCAN = 100_000
# Store reads per call when fetching a window's records.
_FETCH = 256


def _require(who: Identity, role: str) -> None:
    if role not in who.roles:
        raise Forbidden("role", [f"role:{role}"])


@dataclass(frozen=True)
class Package:
    name: str
    description: str


@dataclass(frozen=True)
class PolicyInForce:
    revision: str | None
    packages: list[Package]


Progress = Callable[[int, int], None]


@door
class Oversight:
    def __init__(
        self,
        store: Store,
        policy: PolicyEngine,
        audit: AuditLog,
        candidates: Candidates | None = None,
        bundle_dir: Path | None = None,
        grants: GrantSource | None = None,
    ) -> None:
        self.store = store
        self.policy = policy
        self.audit_log = audit
        # How a candidate policy is evaluated (None: impact analysis is not offered).
        self.candidates = candidates
        # The bundle the sidecar's own OPA loaded, when it has one (its packages).
        self.bundle_dir = bundle_dir
        # The subjects' grants a read applies (policy/grants.py): explain applies them too.
        self.grants = grants

    def may_analyse(self, who: Identity) -> None:
        """Forbidden unless `who` may run an impact analysis (a transport that streams
        the report asks first, before it answers anything)."""
        _require(who, POLICY_ADMIN)

    async def policy_in_force(self, who: Identity) -> PolicyInForce:
        """The revision the policy answers under and its packages (a policy admin only)."""
        _require(who, POLICY_ADMIN)
        revision = self.policy.standing_revision()
        if revision is None and (read := self.policy.read_set()) is not None:
            revision = read[0]
        packages = await asyncio.to_thread(_packages, self.bundle_dir)
        return PolicyInForce(revision, packages)

    async def impact(
        self,
        who: Identity,
        candidate: bytes,
        window: ImpactWindow,
        progress: Progress | None = None,
    ) -> ImpactReport:
        """What `candidate` (a gzipped tar bundle) would change about the reads audited
        in `window` of the caller's tenant: each audited (record, question) decided
        alone under the policy in force and under the candidate, with the record as it
        stood then; erased records are skipped and counted. Bounded by the window's
        count and time. A policy admin only; audited (purpose `impact`)."""
        _require(who, POLICY_ADMIN)
        if self.candidates is None:
            raise CandidateRefused("impact analysis is not available here", ["no_engine"])
        started = time.monotonic()
        deadline = started + window.max_seconds
        async with self.candidates.open(candidate) as engine:
            questions, entries_read = await self._questions(who.tenant, window)
            replay = _Replay(self, engine, who.tenant, window, deadline, progress)
            built = await replay.run(questions, entries_read, started)
        self.audit_log.record(_impacted(who, window, built))
        return built

    async def _questions(self, tenant: str, window: ImpactWindow) -> tuple[list[Question], int]:
        """The audited (record, question) pairs of the window, newest first, at most
        max_decisions; and how many entries were read for them."""
        found: list[Question] = []
        read = 0
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.audit_log.flushed(), timeout=0.5)
        query = AuditQuery(
            tenant=tenant, asker=window.asker, since=window.since, until=window.until, limit=_PAGE
        )
        async with contextlib.aclosing(self._newest_first(query)) as entries:
            async for entry in entries:
                read += 1
                if entry.purpose in _REPLAYED:
                    found.extend(_asked(entry))
                if len(found) >= window.max_decisions:
                    break
        return found[: window.max_decisions], read

    async def _newest_first(self, query: AuditQuery) -> AsyncGenerator[AuditEntry]:
        """Every entry `query` matches, newest first, each once, a page at a time: the
        next page ends where the last did (entries at that very instant come again and
        are dropped)."""
        seen: set[str] = set()
        while True:
            try:
                page = await self.audit_log.query(query)
            except SINK_ERRORS as exc:
                raise AuditUnavailable(str(exc)) from exc
            fresh = [e for e in page if str(e.decision_id) not in seen]
            for entry in fresh:
                seen.add(str(entry.decision_id))
                yield entry
            if len(page) < query.limit or not fresh:
                return
            query = query.model_copy(update={"until": min(e.time for e in page)})

    async def _grant_history(self, tenant: str, until: datetime | None) -> list[Grant]:
        """Every grant of the tenant known to have been given by `until` (None: now),
        with its revocation by then: the grants held now, and those the consent entries
        of the audit log name, newest first, at most `_HISTORY` grants and revocations
        among at most `_HISTORY_SCAN` entries (refusals are entries too). A read that
        passed a grant this does not know (given before the oldest entry reached, and
        revoked or ended since) cannot be replayed: counted, never decided without it."""
        given: dict[str, Grant] = {}
        if self.grants is not None:
            try:
                given = {str(g.grant_id): g for g in await self.grants.held(tenant)}
            except GrantsUnavailable:
                log.warning("grants cannot be read: the replay rebuilds them from the audit")
        revoked: dict[str, datetime] = {}
        counted = scanned = 0
        query = AuditQuery(tenant=tenant, purpose="consent", until=until, limit=_PAGE)
        async with contextlib.aclosing(self._newest_first(query)) as entries:
            async for entry in entries:
                scanned += 1
                grant = _given(entry)
                if grant is not None:
                    given.setdefault(str(grant.grant_id), grant)
                    counted += 1
                elif (ended := _revoked(entry)) is not None:
                    revoked[ended[0]] = min(ended[1], revoked.get(ended[0], ended[1]))
                    counted += 1
                if counted >= _HISTORY or scanned >= _HISTORY_SCAN:
                    break
        return [
            g.model_copy(update={"revoked_at": revoked[i]}) if i in revoked else g
            for i, g in given.items()
        ]

    async def audit(
        self,
        who: Identity,
        *,
        asker: str | None = None,
        record: str | None = None,
        outcome: Outcome | None = None,
        purpose: AuditPurpose | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 100,
    ) -> AuditPage:
        """Disclosure, explain and write decisions in the caller's tenant, newest first
        (an auditor only); AuditUnavailable when the log cannot be queried now."""
        _require(who, AUDITOR)
        query = AuditQuery(
            tenant=who.tenant,
            asker=asker,
            record=record,
            outcome=outcome,
            purpose=purpose,
            since=since,
            until=until,
            limit=limit,
        )
        # What was decided just before this query should be in its answer; under
        # load, give the writer a moment rather than wait for an empty queue.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.audit_log.flushed(), timeout=0.5)
        try:
            return AuditPage(entries=await self.audit_log.query(query))
        except SINK_ERRORS as exc:
            # Meanwhile entries still get written: with Redis down they are spilled and
            # replayed later; a SQLite file that cannot be used drops and counts them.
            raise AuditUnavailable(str(exc)) from exc

    async def explain(self, who: Identity, request: ExplainRequest) -> ExplainResponse:
        """The decision for one record and one asker of the caller's tenant, with each
        rule's reasons (a policy admin only); NotFound for a record not in the tenant.
        Audited: who looked, at what."""
        _require(who, POLICY_ADMIN)
        hits = await self.store.get(who.tenant, [request.record_id])
        if not hits:
            raise NotFound("explain")
        asker = Identity(
            id=request.asker,
            tenant=who.tenant,
            groups=tuple(request.groups),
            roles=tuple(request.roles),
            scopes=tuple(request.scopes),
        )
        question = DisclosureQuestion(
            asker=asker,
            audience=request.audience,
            purpose=request.purpose,
            now=datetime.now(UTC),
            as_of=request.as_of,
        )
        if self.grants is not None:
            question = replace(question, grants=await self.grants.live(question))
        record = hits[0].payload
        explanation, answer = await self.policy.explain(question, record)
        response = ExplainResponse(
            decision_id=uuid.uuid4(),
            record_id=request.record_id,
            policy_revision=answer.revision,
            opa_decision_id=answer.decision_id,
            input=question.single_input(record),
            decision=explanation.decision,
            rules=explanation.rules,
        )
        # Explain shows record metadata to an admin: who looked, at what, is audited too.
        self.audit_log.record(_explained(who, request, response))
        return response


def _given(entry: AuditEntry) -> Grant | None:
    """The grant a consent entry gave (its instant is the grant's own), else None."""
    audited = entry.grant
    if audited is None or audited.action != "grant" or audited.refused_because:
        return None
    try:
        return Grant(
            grant_id=uuid.UUID(str(audited.grant_id)),
            tenant=entry.tenant,
            subject=audited.subject,
            reader=audited.reader,
            categories=audited.categories,
            purpose=audited.purpose,
            until=audited.until,
            granted_by=entry.asker,
            granted_at=entry.time,
        )
    except (ValueError, ValidationError):
        return None


def _revoked(entry: AuditEntry) -> tuple[str, datetime] | None:
    """The grant a consent entry revoked, and when, else None."""
    audited = entry.grant
    if audited is None or audited.action != "revoke" or audited.refused_because:
        return None
    return (str(audited.grant_id), entry.time) if audited.grant_id else None


def _asked(entry: AuditEntry) -> Iterable[Question]:
    claims = entry.claims
    for record, allowed in [(r, True) for r in entry.allowed] + [
        (r, False) for r in entry.withheld
    ]:
        yield Question(
            entry=str(entry.decision_id),
            record_id=record.id,
            asker=entry.asker,
            groups=tuple(claims.groups) if claims else (),
            roles=tuple(claims.roles) if claims else (),
            scopes=tuple(claims.scopes) if claims else (),
            audience=tuple(entry.audience),
            purpose=entry.purpose,
            now=entry.time,
            as_of=entry.as_of or entry.time,
            audited_allow=allowed,
            grants_digest=entry.grants_digest,
        )


class _Replay:
    """One impact run: the records fetched once, each pair decided under both policies."""

    def __init__(
        self,
        oversight: Oversight,
        candidate: PolicyEngine,
        tenant: str,
        window: ImpactWindow,
        deadline: float,
        progress: Progress | None,
    ) -> None:
        self.oversight = oversight
        self.candidate = candidate
        self.tenant = tenant
        self.window = window
        self.deadline = deadline
        self.progress = progress
        self.tally = impact.Tally(window.max_examples)
        self._erased: set[str] = set()
        self.revisions: tuple[str | None, str | None] = (None, None)
        # The grants each audited read passed, by entry, as rebuilt (`_grants`).
        self.grants: dict[str, tuple[dict[str, Any], ...]] = {}

    async def run(
        self, questions: list[Question], entries_read: int, started: float
    ) -> ImpactReport:
        records, recorded, skipped = await self._records({q.record_id for q in questions})
        stored = [q for q in questions if q.record_id in records]
        skipped.erased = sum(1 for q in questions if q.record_id in self._erased)
        skipped.not_stored = len(questions) - len(stored) - skipped.erased
        self.grants, tried = await self._grants(stored)
        pairs = [q for q in stored if q.entry in self.grants]
        skipped.grants_unknown = sum(
            q.entry in tried and q.entry not in self.grants for q in stored
        )
        truncated: impact.Truncation | None = None
        if len(questions) >= self.window.max_decisions:
            truncated = "max_decisions"
        if len(tried) < len({q.entry for q in stored}):
            truncated = "max_seconds"
        done = 0
        for at in range(0, len(pairs), _CHUNK):
            if time.monotonic() >= self.deadline:
                truncated = "max_seconds"
                break
            chunk = pairs[at : at + _CHUNK]
            sides = await asyncio.gather(
                *(
                    self._decide(q, impact.as_it_stood(records[q.record_id], q.as_of, recorded))
                    for q in chunk
                )
            )
            for question, (current, candidate) in zip(chunk, sides, strict=True):
                source = records[question.record_id].get("source_id")
                self.tally.add(
                    question, source if isinstance(source, str) else None, current, candidate
                )
            done += len(chunk)
            if self.progress is not None:
                self.progress(done, len(pairs))
        return impact.report(
            self.tally,
            tenant=self.tenant,
            window=self.window,
            current_revision=self.revisions[0],
            candidate_revision=self.revisions[1],
            entries_read=entries_read,
            seconds=time.monotonic() - started,
            truncated=truncated,
            skipped=skipped,
        )

    def _asked(self, question: Question) -> DisclosureQuestion:
        """The audited read's question, without its grants."""
        return DisclosureQuestion(
            asker=Identity(
                id=question.asker,
                tenant=self.tenant,
                groups=question.groups,
                roles=question.roles,
                scopes=question.scopes,
            ),
            audience=list(question.audience),
            purpose=question.purpose,
            now=question.now,
            as_of=question.as_of,
        )

    async def _decide(
        self, question: Question, record: dict[str, Any]
    ) -> tuple[ImpactSide, ImpactSide]:
        asked = replace(self._asked(question), grants=self.grants[question.entry])
        (now, now_answer), (then, then_answer) = await asyncio.gather(
            self.oversight.policy.explain(asked, record), self.candidate.explain(asked, record)
        )
        self.revisions = (now_answer.revision, then_answer.revision)
        return ImpactSide.of(now), ImpactSide.of(then)

    async def _grants(
        self, questions: list[Question]
    ) -> tuple[dict[str, tuple[dict[str, Any], ...]], set[str]]:
        """The grants each read passed, by audit entry, for the entries whose grants
        are known: none for a read that passed none (or was audited before reads kept
        a digest of them); else those rebuilt from the grant history that hash to the
        entry's digest (policy/grants.py `digest`). And the entries tried before the
        time bound."""
        known: dict[str, tuple[dict[str, Any], ...]] = {}
        tried: set[str] = set()
        history: list[tuple[Grant, dict[str, Any]]] | None = None
        for question in questions:
            if question.entry in tried:
                continue
            tried.add(question.entry)
            if question.grants_digest is None:
                known[question.entry] = ()
                continue
            if history is None:
                grants = await self.oversight._grant_history(self.tenant, self.window.until)
                history = [
                    (g, policy_view(g)) for g in sorted(grants, key=lambda g: str(g.grant_id))
                ]
            # The read chose its grants when it began; its entry's time is when it
            # ended, and its as_of (when none was asked for) when it began: either may
            # be the instant, and only the very grants it passed hash to its digest.
            for at in dict.fromkeys((question.as_of, question.now)):
                asked = replace(self._asked(question), now=at)
                rebuilt = tuple(view for g, view in history if reaches(g, asked))
                if digest(rebuilt) == question.grants_digest:
                    known[question.entry] = rebuilt
                    break
            # Many reads over many grants: the event loop serves requests meanwhile.
            await asyncio.sleep(0)
            if time.monotonic() >= self.deadline:
                break
        return known, tried

    async def _records(
        self, ids: set[str]
    ) -> tuple[dict[str, dict[str, Any]], dict[str, datetime], impact.Skipped]:
        """The records still stored, the recorded_at of their successors, and which of
        the others were erased (the audit says so)."""
        store = self.oversight.store
        wanted = sorted(ids)
        records: dict[str, dict[str, Any]] = {}
        for at in range(0, len(wanted), _FETCH):
            for hit in await store.get(
                self.tenant, [uuid.UUID(i) for i in wanted[at : at + _FETCH] if _uuid(i)]
            ):
                records[hit.id] = hit.payload
        successors = sorted(
            {
                s
                for p in records.values()
                if isinstance(s := p.get("superseded_by"), str) and _uuid(s)
            }
        )
        recorded: dict[str, datetime] = {}
        for at in range(0, len(successors), _FETCH):
            chunk = [uuid.UUID(i) for i in successors[at : at + _FETCH]]
            for hit in await store.get(self.tenant, chunk):
                when = _instant(hit.payload.get("recorded_at"))
                if when is not None:
                    recorded[hit.id] = when
        self._erased = await self._erased_of(ids - records.keys())
        return records, recorded, impact.Skipped()

    async def _erased_of(self, missing: set[str]) -> set[str]:
        erased: set[str] = set()
        log = self.oversight.audit_log
        for record_id in sorted(missing):
            query = AuditQuery(tenant=self.tenant, record=record_id, outcome="erased", limit=1)
            try:
                if await log.query(query):
                    erased.add(record_id)
            except SINK_ERRORS as exc:
                raise AuditUnavailable(str(exc)) from exc
        return erased


def _uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def _instant(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


_PACKAGE = re.compile(r"^package\s+([\w.]+)", re.MULTILINE)


def _packages(bundle: Path | None) -> list[Package]:
    """The packages of a loaded bundle, each with the first line of its METADATA
    description (rego/ says what each is for there)."""
    if bundle is None or not bundle.is_dir():
        return []
    found: dict[str, str] = {}
    for source in sorted(bundle.rglob("*.rego")):
        text = source.read_text(errors="replace")
        match = _PACKAGE.search(text)
        if match is None or match.group(1) in found:
            continue
        head = text[: match.start()]
        found[match.group(1)] = _first_description_line(head)
    return [Package(name, description) for name, description in sorted(found.items())]


def _first_description_line(head: str) -> str:
    lines = [line.lstrip("#").strip() for line in head.splitlines()]
    for i, line in enumerate(lines):
        if line.startswith("description:"):
            rest = line.removeprefix("description:").strip()
            if rest and rest != "|":
                return rest
            return next((later for later in lines[i + 1 :] if later), "")
    return ""


def _impacted(who: Identity, window: ImpactWindow, built: ImpactReport) -> AuditEntry:
    return AuditEntry(
        decision_id=uuid.uuid4(),
        time=datetime.now(UTC),
        tenant=who.tenant,
        asker=who.id,
        audience=[],
        purpose="impact",
        route="policy.impact",
        policy_revision=built.current_revision,
        impact=AuditedImpact(
            candidate_revision=built.candidate_revision,
            since=window.since,
            until=window.until,
            asker=window.asker,
            decisions=built.decisions,
            newly_disclosed=built.flips.newly_disclosed,
            newly_withheld=built.flips.newly_withheld,
            changed_use=built.flips.changed_use,
            truncated=built.truncated,
        ),
    )


def _explained(who: Identity, request: ExplainRequest, response: ExplainResponse) -> AuditEntry:
    decision = response.decision
    audited = AuditedRecord(
        id=str(response.record_id),
        usable_as=decision.usable_as if decision.allow else None,
        reasons=decision.reasons,
        opa_decision_id=response.opa_decision_id,
    )
    return AuditEntry(
        decision_id=response.decision_id,
        time=datetime.now(UTC),
        tenant=who.tenant,
        asker=who.id,
        audience=request.audience,
        purpose="explain",
        route="explain",
        policy_revision=response.policy_revision,
        opa_decision_ids=[response.opa_decision_id] if response.opa_decision_id else [],
        allowed=[audited] if decision.allow else [],
        withheld=[] if decision.allow else [audited],
        explained_for=request.asker,
    )
