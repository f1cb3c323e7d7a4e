"""The erasure path: who may erase what (the `whose.erasure` policy), then the records
leave the store (docs/design.md §6, "How an erasure flows").

1. Which records. By id (`forget`): those the asker may see, as the disclosure gate
   decides them (purpose `get`); any other id answers exactly as a missing one and
   is left alone. A bulk request (writes/erasure_requests.py) brings what its scan
   found; the retention sweep (writes/retention.py), what expired.
2. The erasure policy decides each record; a request by id is all or nothing.
3. What the policy chose for the records derived from each (`derived`): `erase`
   erases them too (asked again as kind `derived`: a legal hold still keeps one,
   which is then flagged); `withdraw` ends their valid time; `flag` marks them stale
   (writes/lineage.py). This happens first, so an erasure cut short never leaves a
   derivation current over a premise that is gone.
4. Under the chain locks: the erased records and their neighbours are read again,
   the chains closed over the erased versions (writes/relink.py), then the
   records deleted, vector and payload, in one store operation.
5. One audit entry: who, which ids, why, under which policy revision; never content.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sidecar import metrics
from sidecar.audit import (
    AuditedErasure,
    AuditedWrite,
    AuditEntry,
    ErasureOutcome,
    audited_write,
)
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.errors import ErasureRefused, PolicyUnavailable
from sidecar.policy.contract import (
    DerivedChoice,
    DisclosureQuestion,
    ErasureDecision,
    ErasureRequestView,
)
from sidecar.policy.engine import PolicyEngine
from sidecar.reads.reader import Reader
from sidecar.record import Stored
from sidecar.store import Store, StoreUnavailable
from sidecar.writes.lineage import Lineage, chain_lock_key, derived_from
from sidecar.writes.locks import ChainLocks, LockUnavailable
from sidecar.writes.relink import MAX_RUN, neighbours, relink

# Ids one request by id may name, and records one erasure erases in all (cascades
# included): larger sets go through a bulk request, a step at a time.
MAX_IDS = 1000
MAX_ERASED = 1000
# How many levels of `erase` cascades are followed (then the rest are flagged).
_MAX_CASCADE = 8


# Why a record erased only because its premise was is erased (the audit entry's reason).
_CASCADE = "derived_from_erased"


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Erasing:
    """A record to erase, and what the policy chose for the records derived from it."""

    record: Stored
    derived: DerivedChoice
    # Why, for the audit entry: `requested`, `subject_request`, `retention`, ...
    why: str


@dataclass
class Erased:
    """What one erasure did (the caller is told only what it may see of this)."""

    erased: list[str] = field(default_factory=list)
    # Erased because a record above was (on_derived = erase): for the audit entry and
    # the operator's sweep, never in a caller's answer, since the caller may not be
    # allowed to see them (issue 35).
    cascaded: list[str] = field(default_factory=list)
    flagged: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    # Records of a bulk step the policy kept, with why (a legal hold, say).
    refused: dict[str, list[str]] = field(default_factory=dict)
    decision_id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass
class _Attempt:
    """What one erasure request did, for its audit entry (built whatever happens)."""

    erasing: list[Erasing] = field(default_factory=list)
    refused: dict[str, list[str]] = field(default_factory=dict)
    refused_payloads: dict[str, dict[str, Any]] = field(default_factory=dict)
    done: Erased | None = None
    revision: str | None = None
    opa_decision_ids: list[str] = field(default_factory=list)
    error: str | None = None


class Eraser:
    def __init__(
        self,
        store: Store,
        policy: PolicyEngine,
        locks: ChainLocks,
        reader: Reader,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.store = store
        self.policy = policy
        self.locks = locks
        self.reader = reader
        self.audit = audit
        self.clock = clock
        self.lineage = Lineage(store, locks)

    # --- by id ----------------------------------------------------------------------

    async def visible(
        self, who: Identity, ids: Sequence[UUID], route: str, *, history: bool
    ) -> list[Stored]:
        """The records among `ids` the asker may see (and with `history`, every version
        of their chains the asker may see), as the disclosure gate decides them."""
        question = DisclosureQuestion(asker=who, audience=[], purpose="get", now=self.clock())
        answer = await self.reader.by_ids(question, route, list(ids))
        found = {s.record.id: s.record for s in answer.shown}
        if history:
            chain_question = replace(question, purpose="history")
            for record_id in list(found):
                versions = await self.reader.history(chain_question, route, UUID(record_id))
                for shown in versions.shown if versions is not None else ():
                    found.setdefault(shown.record.id, shown.record)
        return list(found.values())

    async def forget(
        self,
        who: Identity,
        ids: Sequence[UUID],
        route: str,
        *,
        history: bool = False,
        reason: str | None = None,
    ) -> Erased:
        """Erase the records named (with `history`, their whole chains) that the asker
        may see, if the policy lets the asker erase every one of them; ErasureRefused
        (nothing erased) otherwise. Ids the asker may not see are left alone and not
        mentioned: the answer is the one they would get if those did not exist."""
        records = await self.visible(who, ids, route, history=history)
        if not records:
            return Erased()
        request = ErasureRequestView(kind="records")
        return await self.erase_decided(who, request, records, route, reason=reason)

    async def erase_decided(
        self,
        who: Identity,
        request: ErasureRequestView,
        records: list[Stored],
        route: str,
        *,
        reason: str | None = None,
        request_id: str | None = None,
        all_or_nothing: bool = True,
    ) -> Erased:
        """Ask the erasure policy about `records`, then erase the ones it allows: all or
        nothing (ErasureRefused with every reason), or, for a bulk step, those allowed
        (the refused ones stay, and the audit entry says why)."""
        attempt = _Attempt()
        why = {"records": "requested"}.get(request.kind, f"{request.kind}_request")
        try:
            answer, opa = await self.policy.erasure(
                who, request, [r.payload for r in records], self.clock()
            )
            attempt.revision = opa.revision
            attempt.opa_decision_ids += [opa.decision_id] if opa.decision_id else []
            if not answer.request.allow:
                attempt.refused = {r.id: sorted(answer.request.reasons) for r in records}
                attempt.refused_payloads = {r.id: r.payload for r in records}
                raise ErasureRefused("erasure refused", sorted(answer.request.reasons))
            denied = {
                r.id: sorted(answer.decisions[r.id].reasons)
                for r in records
                if not answer.decisions[r.id].allow
            }
            attempt.refused = denied
            attempt.refused_payloads = {r.id: r.payload for r in records if r.id in denied}
            if denied and all_or_nothing:
                problems = [{"id": rid, "reasons": reasons} for rid, reasons in denied.items()]
                raise ErasureRefused("erasure refused", problems)
            attempt.erasing = [
                Erasing(r, answer.decisions[r.id].derived, why)
                for r in records
                if r.id not in denied
            ]
            attempt.done = await self._apply(who, attempt)
            attempt.done.refused = denied
            return attempt.done
        except (PolicyUnavailable, LockUnavailable, StoreUnavailable) as exc:
            attempt.error = exc.code
            raise
        finally:
            asked = AuditedErasure(
                request_id=request_id,
                kind=request.kind,
                subject=request.subject,
                source=request.source,
                reason=reason,
            )
            self._audit(who, route, asked, attempt)

    async def apply(
        self,
        actor: Identity,
        erasing: list[Erasing],
        route: str,
        asked: AuditedErasure,
        *,
        revision: str | None,
        opa_decision_ids: Sequence[str] = (),
    ) -> Erased:
        """Erase records already decided (the retention sweep: whose.retention said so);
        `asked` is what the audit entry says was asked for."""
        attempt = _Attempt(
            erasing=erasing, revision=revision, opa_decision_ids=list(opa_decision_ids)
        )
        try:
            attempt.done = await self._apply(actor, attempt)
            return attempt.done
        except (PolicyUnavailable, LockUnavailable, StoreUnavailable) as exc:
            attempt.error = exc.code
            raise
        finally:
            self._audit(actor, route, asked, attempt)

    # --- the steps ------------------------------------------------------------------

    async def _apply(self, actor: Identity, attempt: _Attempt) -> Erased:
        tenant = actor.tenant
        now = self.clock()
        erasing = await self._with_cascades(actor, attempt)
        done = Erased()
        # 3. Derivations first (see the module's docstring).
        ids = {e.record.id for e in erasing}
        ended = [e.record.id for e in erasing if e.derived == "withdraw"]
        done.flagged, done.withdrawn = await self.lineage.propagate(
            tenant, dict.fromkeys(ids, "erased"), now, withdraw=ended, skip=ids
        )
        # 4. Chains closed over the erased versions, then the records deleted.
        keys = [chain_lock_key(e.record.payload) for e in erasing]
        async with self.locks.hold(keys) as held:
            present = {r.id: r.payload for r in await self.store.get(tenant, _uuids(ids))}
            stored = dict(present)
            for _ in range(MAX_RUN):
                wanted = neighbours(stored.keys() & ids, stored)
                if not wanted:
                    break
                found = await self.store.get(tenant, _uuids(wanted))
                stored |= {r.id: r.payload for r in found}
                if not found:
                    break
            plan = relink(present.keys(), stored)
            await held.confirm()
            for record_id, fields in plan.set.items():
                await self.store.update(tenant, UUID(record_id), fields)
            for record_id, names in plan.clear.items():
                await self.store.clear(tenant, UUID(record_id), names)
            await self.store.delete(tenant, _uuids(present))
        cascade = {e.record.id for e in erasing if e.why == _CASCADE}
        done.erased = sorted(present.keys() - cascade)
        done.cascaded = sorted(present.keys() & cascade)
        return done

    async def _with_cascades(self, actor: Identity, attempt: _Attempt) -> list[Erasing]:
        """The records to erase, with those derived from them when the policy chose
        `erase` (each decided as kind `derived`: a legal hold keeps one, which is then
        flagged like the rest), within MAX_ERASED."""
        erasing = {e.record.id: e for e in attempt.erasing}
        frontier = [e.record.id for e in attempt.erasing if e.derived == "erase"]
        for _ in range(_MAX_CASCADE):
            room = MAX_ERASED - len(erasing)
            if not frontier or room <= 0:
                break
            found = await derived_from(self.store, actor.tenant, frontier, room)
            derived = [r for r in found if r.id not in erasing]
            if not derived:
                break
            answer, opa = await self.policy.erasure(
                actor,
                ErasureRequestView(kind="derived"),
                [r.payload for r in derived],
                self.clock(),
            )
            attempt.opa_decision_ids += [opa.decision_id] if opa.decision_id else []
            frontier = []
            for record in derived:
                decision: ErasureDecision = answer.decisions[record.id]
                if decision.allow:
                    erasing[record.id] = Erasing(record, decision.derived, _CASCADE)
                    if decision.derived == "erase":
                        frontier.append(record.id)
        attempt.erasing = list(erasing.values())
        return attempt.erasing

    def _audit(self, actor: Identity, route: str, asked: AuditedErasure, attempt: _Attempt) -> None:
        if self.audit is None:
            return
        done = attempt.done
        erased = set(done.erased + done.cascaded) if done is not None else set()
        written: list[AuditedWrite] = []
        for e in attempt.erasing:
            outcome: ErasureOutcome = "erased" if e.record.id in erased else "refused"
            reasons = [e.why] if outcome == "erased" else [attempt.error or "not_erased"]
            written.append(audited_write(len(written), e.record.payload, outcome, reasons))
        for record_id, reasons in attempt.refused.items():
            payload = attempt.refused_payloads.get(record_id, {"id": record_id})
            written.append(audited_write(len(written), payload, "refused", reasons))
        if done is not None:
            for record_id in done.flagged:
                written.append(
                    audited_write(len(written), {"id": record_id}, "flagged", ["premise_erased"])
                )
            for record_id in done.withdrawn:
                written.append(
                    audited_write(len(written), {"id": record_id}, "withdrawn", ["premise_erased"])
                )
        for audited in written:
            metrics.ERASURES.labels(audited.outcome, route).inc()
        entry = AuditEntry(
            decision_id=done.decision_id if done is not None else uuid.uuid4(),
            time=datetime.now(UTC),
            tenant=actor.tenant,
            asker=actor.id,
            audience=[],
            purpose="erase",
            route=route,
            policy_revision=attempt.revision,
            opa_decision_ids=attempt.opa_decision_ids,
            written=written,
            error=attempt.error,
            erasure=asked,
        )
        self.audit.record(entry)


def _uuids(ids: Any) -> list[UUID]:
    return [UUID(str(i)) for i in sorted(ids)]
