"""The native HTTP API (`/v1`).

Each route reads identity, turns its request into a question and a scope, calls
the write path (writes/writer.py) or the one read path (reads/reader.py), and shapes the
answer. Every record a route returns was decided by the disclosure policy; a
record that may not be disclosed answers exactly like one that does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Body, HTTPException, Path, Query
from fastapi.responses import JSONResponse, Response
from starlette.convertors import PathConvertor, register_url_convertor

from sidecar import metrics
from sidecar.answers.minds import minds
from sidecar.answers.verdict import decide, newest_fact, settle
from sidecar.auth.identity import Identity
from sidecar.http.deps import Asker, Svc
from sidecar.messages import (
    HistoryResponse,
    MemoryResponse,
    Problem,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
)
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.opa import PolicyUnavailable
from sidecar.record import Instant, MemoryRecord, MemoryWrite
from sidecar.services import Services
from sidecar.store.filters import Scope
from sidecar.writes.observations import Observation, to_records
from sidecar.writes.witnessed import WitnessedEvent
from sidecar.writes.witnessed import to_records as witnessed_records
from sidecar.writes.writer import MAX_BATCH

router = APIRouter()


class _KeyConvertor(PathConvertor):
    """A proposition key in a path: any characters, `/` and newlines included
    (Starlette's `path` stops at a newline, and a key may hold one)."""

    regex = r"[\s\S]+"


register_url_convertor("key", _KeyConvertor())


_NOT_FOUND = HTTPException(status_code=404, detail={"error": "not_found"})
# 400: a body that is not JSON at all (FastAPI's own refusal); 413: http/limits.py.
_errors: dict[int | str, dict[str, Any]] = {
    400: {"model": Problem},
    401: {"model": Problem},
    413: {"model": Problem},
    422: {"model": Problem},
    503: {"model": Problem},
}


def _now() -> datetime:
    return datetime.now(UTC)


@router.post(
    "/v1/memories",
    status_code=201,
    response_model=StoredRecords,
    response_model_exclude_none=True,
    responses=_errors,
)
async def write_memories(
    body: Annotated[MemoryWrite | list[MemoryWrite], Body()], svc: Svc, who: Asker
) -> StoredRecords:
    """Store one record or an array of them: all, or (422 with reasons) none."""
    bodies = body if isinstance(body, list) else [body]
    if not 1 <= len(bodies) <= MAX_BATCH:
        raise HTTPException(
            422, detail={"error": "invalid_request", "reasons": [f"1..{MAX_BATCH} records"]}
        )
    stored = await svc.writer.write(bodies, who, _now())
    return StoredRecords(records=stored)


@router.post(
    "/v1/observations",
    status_code=201,
    response_model=StoredRecords,
    response_model_exclude_none=True,
    responses=_errors,
)
async def write_observation(observation: Observation, svc: Svc, who: Asker) -> StoredRecords:
    """Store what a speaker said as the speaker's own views (see writes/observations.py)."""
    stored = await svc.writer.write(to_records(observation), who, _now(), "observations")
    return StoredRecords(records=stored)


@router.post(
    "/v1/witnessed",
    status_code=201,
    response_model=StoredRecords,
    response_model_exclude_none=True,
    responses=_errors,
)
async def write_witnessed(event: WitnessedEvent, svc: Svc, who: Asker) -> StoredRecords:
    """Store what several people saw together as each one's own view, and each one's
    view of the others' (see writes/witnessed.py)."""
    stored = await svc.writer.write(witnessed_records(event), who, _now(), "witnessed")
    return StoredRecords(records=stored)


@router.post(
    "/v1/recall", response_model=RecallResponse, response_model_exclude_none=True, responses=_errors
)
async def recall(request: RecallRequest, svc: Svc, who: Asker) -> Any:
    """Attributed beliefs, an answer, a conflict, or an abstention."""
    try:
        answer = await recalled(request, svc, who, "recall")
    except PolicyUnavailable as exc:
        # Fail closed, and say why: nothing is disclosed without a decision.
        metrics.POLICY_UNAVAILABLE.inc()
        refusal = RecallResponse(
            verdict="abstain", items=[], decision_id=exc.decision_id or uuid4(), reason=exc.reason
        )
        return JSONResponse(refusal.model_dump(mode="json", exclude_none=True), status_code=503)
    # Serialised once, as FastAPI would for `response_model` (kept for the OpenAPI
    # document), without validating again the model the read path just built.
    return Response(
        answer.model_dump_json(by_alias=True, exclude_none=True), media_type="application/json"
    )


async def recalled(
    request: RecallRequest, svc: Services, who: Identity, route: str
) -> RecallResponse:
    """The recall answer, for `/v1/recall` and the MCP `recall` tool (`route` names the
    caller in the audit entry): 422 HTTPException on a bad request, PolicyUnavailable
    when nothing could be decided."""
    problems = []
    if request.limit > svc.settings.max_limit:
        problems.append(f"limit_above_{svc.settings.max_limit}")
    if request.vector is not None and len(request.vector) != svc.embedder.dim:
        problems.append(f"vector_dimension_must_be_{svc.embedder.dim}")
    if problems:
        raise HTTPException(422, detail={"error": "invalid_request", "reasons": problems})
    history = request.include_history
    question = DisclosureQuestion(
        asker=who,
        audience=request.audience,
        purpose="history" if history else "recall",
        now=_now(),
        as_of=request.as_of,
    )
    scope = Scope(
        tenant=who.tenant,
        current_at=None if history else question.at,
        about=request.about,
        observer=request.observer,
        observed=request.observed,
        attitude=request.attitude,
        source_id=request.source_id,
        modality=request.modality,
        min_confidence=request.min_confidence,
    )
    vector = (
        request.vector if request.vector is not None else svc.embedder.embed(request.query or "")
    )
    answer = await svc.reader.nearest(
        question, route, vector, scope, request.limit, with_other_views=True
    )
    items = settle(answer.items)
    verdict, conflicts = decide(items, answer.vocabulary, answer.others)
    return RecallResponse(
        verdict=verdict,
        items=items,
        conflicts=conflicts,
        decision_id=answer.decision_id,
        # With nothing allowed, "the bound stopped us" would say that many records the
        # asker may not see match the filters: an abstention stays an abstention.
        truncated=answer.truncated and bool(items),
    )


@router.get(
    "/v1/memories/{record_id}",
    response_model=MemoryResponse,
    response_model_exclude_none=True,
    responses={404: {"model": Problem}, **_errors},
)
async def get_memory(
    record_id: UUID, svc: Svc, who: Asker, as_of: Annotated[Instant | None, Query()] = None
) -> MemoryResponse:
    """One record, if the policy lets the asker see it; otherwise 404 as if missing.

    With `as_of`, the version of the record's chain that applied at that instant,
    provided the record asked for may be seen too: otherwise the answer would tell
    a forbidden id from a missing one.
    """
    return await memory(svc, who, record_id, as_of, "get")


async def memory(
    svc: Services, who: Identity, record_id: UUID, as_of: datetime | None, route: str
) -> MemoryResponse:
    """One record or the version that applied at `as_of` (404 HTTPException otherwise),
    for `GET /v1/memories/{id}` and the MCP `get_memory` tool."""
    question = DisclosureQuestion(asker=who, audience=[], purpose="get", now=_now())
    if as_of is None:
        answer = await svc.reader.by_ids(question, route, [record_id])
    else:
        answer = await svc.reader.version_at(question, route, record_id, as_of)
    if not answer.shown:
        raise _NOT_FOUND
    [shown] = answer.shown
    return MemoryResponse(
        item=shown.item,
        record=MemoryRecord.model_validate(shown.record.payload),
        decision_id=answer.decision_id,
    )


@router.get(
    "/v1/memories/{record_id}/history",
    response_model=HistoryResponse,
    response_model_exclude_none=True,
    responses={404: {"model": Problem}, **_errors},
)
async def memory_history(record_id: UUID, svc: Svc, who: Asker) -> HistoryResponse:
    """The supersession chain through one record, oldest first, each version gated."""
    return await chain(svc, who, record_id, "history")


async def chain(svc: Services, who: Identity, record_id: UUID, route: str) -> HistoryResponse:
    """The chain through a record (404 HTTPException when it may not be seen), for
    `GET /v1/memories/{id}/history` and the MCP `history` tool."""
    question = DisclosureQuestion(asker=who, audience=[], purpose="history", now=_now())
    answer = await svc.reader.history(question, route, record_id)
    if answer is None:
        raise _NOT_FOUND
    return HistoryResponse(items=answer.items, decision_id=answer.decision_id)


@router.get(
    "/v1/propositions/{key:key}",
    response_model=PropositionResponse,
    response_model_exclude_none=True,
    responses=_errors,
)
async def proposition(
    key: Annotated[str, Path(min_length=1, max_length=200)],
    svc: Svc,
    who: Asker,
    audience: Annotated[list[str] | None, Query(max_length=100)] = None,
    as_of: Annotated[Instant | None, Query()] = None,
) -> PropositionResponse:
    """Every disclosable view of one proposition current at `as_of` (default now), the
    world-state claim, and the views grouped by whose mind they are in."""
    return await views(svc, who, key, audience or [], "propositions", as_of)


async def views(
    svc: Services,
    who: Identity,
    key: str,
    audience: list[str],
    route: str,
    as_of: Instant | None = None,
) -> PropositionResponse:
    """For `GET /v1/propositions/{key}` and the MCP `what_do_people_think` tool."""
    question = DisclosureQuestion(who, audience, purpose="recall", now=_now(), as_of=as_of)
    scope = Scope(tenant=who.tenant, about=key, current_at=question.at)
    answer = await svc.reader.listing(question, route, scope, svc.settings.max_candidates)
    items = settle(answer.items)
    verdict, conflicts = decide(items, answer.vocabulary)
    world_state = newest_fact(items, answer.vocabulary) if verdict == "answer" else None
    return PropositionResponse(
        key=key,
        as_of=as_of,
        verdict=verdict,
        world_state=world_state,
        # Everything else stays visible, a second authority's agreeing fact included;
        # when authorities disagree there is no world state, only their conflict.
        perspectives=[item for item in items if item is not world_state],
        conflicts=conflicts,
        minds=minds(items),
        decision_id=answer.decision_id,
        truncated=answer.truncated,
    )
