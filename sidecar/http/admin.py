"""Routes for security teams: the audit log (role `auditor`) and explain (role
`policy-admin`). Both stay inside the caller's tenant and return no record
content: decisions, reasons and the attributes the policy read.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from sidecar.audit import AuditedRecord, AuditEntry, AuditPurpose, AuditQuery, Outcome
from sidecar.audit.sink import SINK_ERRORS
from sidecar.auth.identity import Identity
from sidecar.errors import AuditUnavailable, Forbidden, NotFound
from sidecar.http.deps import Asker, Svc, refusals
from sidecar.messages import AuditPage, ExplainRequest, ExplainResponse, Problem
from sidecar.policy.contract import DisclosureQuestion
from sidecar.record import Instant

router = APIRouter(tags=["security"])

_errors = refusals(400, 401, 403, 413, 422, 503)


def require_role(role: str) -> Any:
    async def check(who: Asker) -> Identity:
        if role not in who.roles:
            raise Forbidden("role", [f"role:{role}"])
        return who

    return Depends(check)


@router.get("/v1/audit", response_model=AuditPage, responses=_errors)
async def audit(
    svc: Svc,
    who: Annotated[Identity, require_role("auditor")],
    asker: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    record: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    outcome: Outcome | None = None,
    purpose: AuditPurpose | None = None,
    since: Instant | None = None,
    until: Instant | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditPage:
    """Disclosure, explain and write decisions in the caller's tenant, newest first.

    `outcome`: a record `allowed` or `withheld` (reads, explain), `stored` or
    `refused` (writes), or a request the policy could not answer
    (`policy_unavailable`); `record` finds the entries naming that record id, read
    or written. With Redis, one query reads at most the newest 10 000 entries (all
    tenants') in its time range: narrow `since`/`until` to reach older ones. The
    SQLite file (no Redis) is indexed: no such bound.
    """
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
        await asyncio.wait_for(svc.audit.flushed(), timeout=0.5)
    try:
        return AuditPage(entries=await svc.audit.query(query))
    except SINK_ERRORS as exc:
        # Meanwhile entries still get written: with Redis down they are spilled and
        # replayed later; a SQLite file that cannot be used drops and counts them.
        raise AuditUnavailable(str(exc)) from exc


@router.post(
    "/v1/explain",
    response_model=ExplainResponse,
    responses={404: {"model": Problem}, **_errors},
)
async def explain(
    request: ExplainRequest,
    svc: Svc,
    who: Annotated[Identity, require_role("policy-admin")],
) -> ExplainResponse:
    """The decision for one record and one asker, with each rule's reasons."""
    hits = await svc.store.get(who.tenant, [request.record_id])
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
    explanation, answer = await svc.policy.explain(question, record)
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
    svc.audit.record(_explained(who, request, response))
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
