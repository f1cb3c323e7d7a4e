"""The security team's surface, beside memory.py: the audit log (role `auditor`) and
explain (role `policy-admin`).

The admin routes (http/admin.py) call these methods and nothing else. Both stay inside
the caller's tenant and return no record content: decisions, reasons and the
attributes the policy read. The role is checked here, so whatever transport asks, the
same role is needed; refusals are the error tree's, noted at the door (memory.door).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime

from sidecar.audit import AuditedRecord, AuditEntry, AuditPurpose, AuditQuery, Outcome
from sidecar.audit.sink import SINK_ERRORS
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.door import door
from sidecar.errors import AuditUnavailable, Forbidden, NotFound
from sidecar.messages import AuditPage, ExplainRequest, ExplainResponse
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.store import Store

AUDITOR = "auditor"
POLICY_ADMIN = "policy-admin"


def _require(who: Identity, role: str) -> None:
    if role not in who.roles:
        raise Forbidden("role", [f"role:{role}"])


@door
class Oversight:
    def __init__(self, store: Store, policy: PolicyEngine, audit: AuditLog) -> None:
        self.store = store
        self.policy = policy
        self.audit_log = audit

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
