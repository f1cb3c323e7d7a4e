"""Erasure requests (`/v1/erasures`): an erasure officer's request to erase every
record about a subject, from a source, or of the whole tenant, and how far it has
got (writes/erasure_requests.py). Erasing one record is `DELETE /v1/memories/{id}`
(http/api.py)."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter

from sidecar.http.deps import Asker, Svc, refusals
from sidecar.messages import ErasureProgress, ErasureRequest, Problem

router = APIRouter(tags=["erasure"])

_errors = refusals(401, 403, 413, 422, 503)


@router.post("/v1/erasures", status_code=202, response_model=ErasureProgress, responses=_errors)
async def request_erasure(request: ErasureRequest, svc: Svc, who: Asker) -> ErasureProgress:
    """Erase every record about a subject (held, said, or about their mind), from a
    source, or of your tenant, except what a legal hold keeps; by default only an
    erasure officer (role `data_protection`) may ask (403 `erasure_refused`). The first
    step runs before this answers; `status` says whether it is `done` or still
    `running` (then follow it at `GET /v1/erasures/{request_id}`)."""
    return await svc.memory.request_erasure(who, request)


@router.get(
    "/v1/erasures/{request_id}",
    response_model=ErasureProgress,
    responses={404: {"model": Problem}, **_errors},
)
async def erasure_status(request_id: UUID, svc: Svc, who: Asker) -> ErasureProgress:
    """How far an erasure request has got: records erased, kept (and why), examined."""
    return await svc.memory.erasure_status(who, request_id)
