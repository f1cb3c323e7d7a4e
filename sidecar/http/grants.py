"""Grants (`/v1/grants`): a data subject lets a reader see their records of some
categories, until an end, and takes it back (policy/grants.py; docs/consent.md). The
consent policy (rego/whose/consent) says who may grant and revoke for whom."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter

from sidecar.http.bodies import JsonRoute
from sidecar.http.deps import Asker, Svc, refusals
from sidecar.messages import Grant, GrantList, GrantRequest, Problem

router = APIRouter(tags=["consent"], route_class=JsonRoute)

_errors = refusals(401, 403, 413, 422, 503)


@router.post("/v1/grants", status_code=201, response_model=Grant, responses=_errors)
async def grant(request: GrantRequest, svc: Svc, who: Asker) -> Grant:
    """Let `reader` (a person or `group:<name>`) see `subject`'s records (yours, when
    absent) of one of `categories`, for `purpose` only if given, until `until` if
    given: from the next read on, for every record already stored. Only the subject,
    or a role the consent policy names, may grant (403 `consent_refused`, with every
    reason: `not_subject_or_agent`, `unknown_category:<name>`, `ends_before_now`)."""
    return await svc.memory.grant(who, request)


@router.get("/v1/grants", response_model=GrantList, responses=_errors)
async def list_grants(svc: Svc, who: Asker) -> GrantList:
    """The grants in force that you gave, that are about you, or that name you."""
    return await svc.memory.list_grants(who)


@router.delete(
    "/v1/grants/{grant_id}", response_model=Grant, responses={404: {"model": Problem}, **_errors}
)
async def revoke_grant(grant_id: UUID, svc: Svc, who: Asker) -> Grant:
    """Take a grant back: from the next read on it discloses nothing. 404 for a grant
    you may not revoke and are no party to (as for one that does not exist); 403
    `consent_refused` for one you are party to but may not revoke (its reader)."""
    return await svc.memory.revoke_grant(who, grant_id)
