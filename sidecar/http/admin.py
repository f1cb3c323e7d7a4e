"""Routes for security teams: the audit log (role `auditor`), explain and a candidate
policy's impact (role `policy-admin`), each a call of the security team's surface
(oversight.py), which checks the role and stays inside the caller's tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from sidecar.audit import AuditPurpose, Outcome
from sidecar.auth.identity import Identity
from sidecar.errors import WhoseError
from sidecar.http.bodies import JsonRoute
from sidecar.http.deps import Asker, Svc, refusals
from sidecar.http.refusals import NATIVE_STATUS
from sidecar.messages import (
    AuditPage,
    ExplainRequest,
    ExplainResponse,
    ImpactReport,
    ImpactWindow,
    Problem,
)
from sidecar.record import Instant, Person
from sidecar.services import Services

router = APIRouter(tags=["security"], route_class=JsonRoute)

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


NDJSON = "application/x-ndjson"


@router.post(
    "/v1/policy/impact",
    response_model=ImpactReport,
    responses=_errors,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def policy_impact(
    request: Request,
    svc: Svc,
    who: Asker,
    since: Instant | None = None,
    until: Instant | None = None,
    asker: Annotated[Person | None, Query()] = None,
    max_decisions: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    max_seconds: Annotated[float, Query(gt=0, le=600)] = 60.0,
    max_examples: Annotated[int, Query(ge=0, le=200)] = 20,
) -> ImpactReport | StreamingResponse:
    """What a candidate policy (the body: a gzipped tar bundle, as `opa build` makes
    it) would change about the reads audited in the window: each audited record and
    question decided again under the policy in force and under the candidate.

    With `Accept: application/x-ndjson` the answer is a stream of lines: progress
    (`{"progress": {"done", "total"}}`) while it runs, then `{"report": ...}`, or
    `{"error", "reasons", "status"}` if it failed after it started.
    """
    window = ImpactWindow(
        since=since,
        until=until,
        asker=asker,
        max_decisions=max_decisions,
        max_seconds=max_seconds,
        max_examples=max_examples,
    )
    bundle = await request.body()
    if NDJSON not in request.headers.get("accept", ""):
        return await svc.oversight.impact(who, bundle, window)
    # Refused before anything is streamed: a caller without the role gets a plain 403.
    svc.oversight.may_analyse(who)
    return StreamingResponse(_streamed(svc, who, bundle, window), media_type=NDJSON)


async def _streamed(
    svc: Services, who: Identity, bundle: bytes, window: ImpactWindow
) -> AsyncIterator[bytes]:
    lines: asyncio.Queue[bytes] = asyncio.Queue()

    def progress(done: int, total: int) -> None:
        lines.put_nowait(orjson.dumps({"progress": {"done": done, "total": total}}) + b"\n")

    async def run() -> None:
        try:
            built = await svc.oversight.impact(who, bundle, window, progress)
            lines.put_nowait(orjson.dumps({"report": built.model_dump(mode="json")}) + b"\n")
        except WhoseError as exc:
            # The status line has gone: the refusal travels as the stream's last line.
            status = _status(exc)
            lines.put_nowait(orjson.dumps({**exc.body(), "status": status}) + b"\n")
        finally:
            lines.put_nowait(b"")

    task = asyncio.create_task(run())
    try:
        while line := await lines.get():
            yield line
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _status(exc: WhoseError) -> int:
    return next(NATIVE_STATUS[cls] for cls in type(exc).__mro__ if cls in NATIVE_STATUS)
