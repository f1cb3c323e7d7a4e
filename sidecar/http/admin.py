"""Routes for security teams: the audit log (role `auditor`) and explain (role
`policy-admin`), each a call of the security team's surface (oversight.py), which
checks the role and stays inside the caller's tenant.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from sidecar.audit import AuditPurpose, Outcome
from sidecar.http.deps import Asker, Svc, refusals
from sidecar.messages import AuditPage, ExplainRequest, ExplainResponse, Problem
from sidecar.record import Instant, Person

router = APIRouter(tags=["security"])

_errors = refusals(401, 403, 413, 422, 503)


@router.get("/v1/audit", response_model=AuditPage, responses=_errors)
async def audit(
    svc: Svc,
    who: Asker,
    asker: Annotated[Person | None, Query()] = None,
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
    return await svc.oversight.audit(
        who,
        asker=asker,
        record=record,
        outcome=outcome,
        purpose=purpose,
        since=since,
        until=until,
        limit=limit,
    )


@router.post(
    "/v1/explain",
    response_model=ExplainResponse,
    responses={404: {"model": Problem}, **_errors},
)
async def explain(request: ExplainRequest, svc: Svc, who: Asker) -> ExplainResponse:
    """The decision for one record and one asker, with each rule's reasons."""
    return await svc.oversight.explain(who, request)
