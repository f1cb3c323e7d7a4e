"""Erasure requests (`/v1/erasures`): an erasure officer's request to erase every
record about a subject, from a source, or of the whole tenant, anyone's by content,
and how far it has got (writes/erasure_requests.py); standing forget rules
(`/v1/forget-rules`, writes/forget_rules.py). Erasing one record is
`DELETE /v1/memories/{id}` (http/api.py)."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter

from sidecar.http.bodies import JsonRoute
from sidecar.http.deps import Asker, Svc, refusals
from sidecar.messages import (
    ErasureProgress,
    ErasureRequest,
    ForgetRule,
    ForgetRuleRequest,
    ForgetRules,
    ForgetRuleSet,
    Problem,
)

router = APIRouter(tags=["erasure"], route_class=JsonRoute)

_errors = refusals(401, 403, 413, 422, 503)


@router.post("/v1/erasures", status_code=202, response_model=ErasureProgress, responses=_errors)
async def request_erasure(request: ErasureRequest, svc: Svc, who: Asker) -> ErasureProgress:
    """Erase every record about a subject (held, said, or about their mind), from a
    source, or of your tenant, except what a legal hold keeps; by default only an
    erasure officer (role `data_protection`) may ask (403 `erasure_refused`). By
    content (`proposition`: a key; `query`: the records nearest a text, within
    `min_score` and `max_records`) anyone may ask, over the records they may erase:
    their own, or an officer's, every record of the tenant. The first
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


@router.post("/v1/forget-rules", status_code=201, response_model=ForgetRuleSet, responses=_errors)
async def set_forget_rule(request: ForgetRuleRequest, svc: Svc, who: Asker) -> ForgetRuleSet:
    """Forget a value, a proposition key or a pattern about a subject (you, unless an
    erasure officer names someone else): what matches is erased now, with your reach
    (your own records; an officer's, every record of the tenant), and every later
    write that carries it is refused or stored masked, as the forgetting policy says,
    until the rule is lifted (403 `erasure_refused` when the policy refuses the rule).
    The answer never repeats the value."""
    return await svc.memory.set_forget_rule(who, request)


@router.get("/v1/forget-rules", response_model=ForgetRules, responses=_errors)
async def forget_rules(svc: Svc, who: Asker) -> ForgetRules:
    """The rules about you or that you set (an erasure officer: every rule of the
    tenant), standing or lifted; never a value."""
    return await svc.memory.forget_rules(who)


@router.delete(
    "/v1/forget-rules/{rule_id}",
    response_model=ForgetRule,
    responses={404: {"model": Problem}, **_errors},
)
async def lift_forget_rule(rule_id: UUID, svc: Svc, who: Asker) -> ForgetRule:
    """Lift a standing rule (its subject, whoever set it, or an officer): later writes
    are no longer matched against it; nothing erased comes back."""
    return await svc.memory.lift_forget_rule(who, rule_id)
