"""The native HTTP API (`/v1`) and the health endpoints.

Each route reads identity, calls one use case (recall, ingest) or the policy
directly, and shapes the answer. Every route that returns record content asks
the disclosure policy first; a record that may not be disclosed answers exactly
like one that does not exist.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, HTTPException, Path, Query
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError
from starlette.convertors import PathConvertor, register_url_convertor

from sidecar import metrics
from sidecar.attribution import disclosed_item
from sidecar.gate import Disclosure
from sidecar.ingest import MAX_BATCH
from sidecar.links import decided_links, links_within
from sidecar.messages import (
    HistoryResponse,
    MemoryResponse,
    Problem,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
)
from sidecar.observations import Observation, to_records
from sidecar.policy import Decision, DisclosureQuestion, PolicyUnavailable
from sidecar.recall import recall, recall_question
from sidecar.record import Instant, MemoryRecord, MemoryWrite, applied_at
from sidecar.services import Asker, Services, Svc
from sidecar.store import Hit, Scope, StoreUnavailable
from sidecar.verdict import decide, newest_fact, settle

router = APIRouter()


class _KeyConvertor(PathConvertor):
    """A proposition key in a path: any characters, `/` and newlines included
    (Starlette's `path` stops at a newline, and a key may hold one)."""

    regex = r"[\s\S]+"


register_url_convertor("key", _KeyConvertor())

MAX_HISTORY = 100


_NOT_FOUND = HTTPException(status_code=404, detail={"error": "not_found"})
# 400: a body that is not JSON at all (FastAPI's own refusal); 413: limits.py.
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
    """Store what a speaker said as the speaker's own views (see observations.py)."""
    stored = await svc.writer.write(to_records(observation), who, _now())
    return StoredRecords(records=stored)


@router.post(
    "/v1/recall", response_model=RecallResponse, response_model_exclude_none=True, responses=_errors
)
async def recall_memories(request: RecallRequest, svc: Svc, who: Asker) -> Any:
    """Attributed beliefs, an answer, a conflict, or an abstention."""
    problems = []
    if request.limit > svc.settings.max_limit:
        problems.append(f"limit_above_{svc.settings.max_limit}")
    if request.vector is not None and len(request.vector) != svc.embedder.dim:
        problems.append(f"vector_dimension_must_be_{svc.embedder.dim}")
    if problems:
        raise HTTPException(422, detail={"error": "invalid_request", "reasons": problems})
    question = recall_question(request, who, _now())
    gate = svc.gate.begin(question, "recall")
    try:
        async with gate:
            return await recall(
                request,
                who,
                gate,
                store=svc.store,
                embedder=svc.embedder,
                bounds=svc.bounds,
                now=question.now,
            )
    except PolicyUnavailable as exc:
        # Fail closed, and say why: nothing is disclosed without a decision.
        metrics.POLICY_UNAVAILABLE.inc()
        refusal = RecallResponse(
            verdict="abstain", items=[], decision_id=gate.decision_id, reason=exc.reason
        )
        return JSONResponse(refusal.model_dump(mode="json", exclude_none=True), status_code=503)


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
    now = _now()
    asked = DisclosureQuestion(asker=who, audience=[], purpose="get", now=now)
    hit, decision, gate = await _disclosed(svc, asked, await svc.store.get(who.tenant, [record_id]))
    if as_of is not None:
        then = [h for h in await _chain(svc, who.tenant, record_id) if applied_at(h.record, as_of)]
        question = DisclosureQuestion(who, [], purpose="recall", now=now, as_of=as_of)
        hit, decision, gate = await _disclosed(svc, question, then)
    [hit] = await decided_links(svc.store, gate, [hit], [hit.record["id"]])
    return MemoryResponse(
        item=disclosed_item(hit.record, decision, as_of or now),
        record=MemoryRecord.model_validate(hit.record),
        decision_id=gate.decision_id,
    )


async def _disclosed(
    svc: Services, question: DisclosureQuestion, hits: list[Hit]
) -> tuple[Hit, Decision, Disclosure]:
    """The first hit, if the policy discloses it; else 404, exactly as if it were missing."""
    # Asked even when nothing was found, so a missing record and a forbidden one
    # take the same path (and fail the same way when OPA is down).
    async with svc.gate.begin(question, "get") as gate:
        decisions = await gate.decide([h.record for h in hits])
    decision = decisions.get(str(hits[0].record.get("id"))) if hits else None
    if decision is None or not decision.allow:
        raise _NOT_FOUND
    return hits[0], decision, gate


@router.get(
    "/v1/memories/{record_id}/history",
    response_model=HistoryResponse,
    response_model_exclude_none=True,
    responses={404: {"model": Problem}, **_errors},
)
async def memory_history(record_id: UUID, svc: Svc, who: Asker) -> HistoryResponse:
    """The supersession chain through one record, oldest first, each version gated."""
    now = _now()
    chain = await _chain(svc, who.tenant, record_id)
    question = DisclosureQuestion(asker=who, audience=[], purpose="history", now=now)
    async with svc.gate.begin(question, "history") as gate:
        decisions = await gate.decide([h.record for h in chain])
    start = decisions.get(str(record_id))
    if start is None or not start.allow:
        raise _NOT_FOUND
    allowed = [h for h in chain if decisions[h.record["id"]].allow]
    shown = await decided_links(svc.store, gate, allowed, [h.record["id"] for h in allowed])
    items = [disclosed_item(h.record, decisions[h.record["id"]], now) for h in shown]
    return HistoryResponse(items=items, decision_id=gate.decision_id)


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
) -> PropositionResponse:
    """Every disclosable current view of one proposition, and the world-state claim."""
    now = _now()
    limit = svc.settings.max_candidates
    question = DisclosureQuestion(who, audience or [], purpose="recall", now=now)
    async with svc.gate.begin(question, "propositions") as gate:
        pushdown = await gate.pushdown()
        scope = pushdown.narrow(Scope(tenant=who.tenant, about=key, current_at=now))
        page = await svc.store.find(scope, limit)
        decisions = await gate.decide([h.record for h in page.hits])
    allowed = [h for h in page.hits if decisions[str(h.record.get("id"))].allow]
    shown = links_within(allowed, [str(h.record.get("id")) for h in allowed])
    items = settle(
        [disclosed_item(h.record, decisions[str(h.record.get("id"))], now) for h in shown]
    )
    verdict, conflicts = decide(items)
    world_state = newest_fact(items) if verdict == "answer" else None
    return PropositionResponse(
        key=key,
        verdict=verdict,
        world_state=world_state,
        # Everything else stays visible, a second authority's agreeing fact included;
        # when authorities disagree there is no world state, only their conflict.
        perspectives=[item for item in items if item is not world_state],
        conflicts=conflicts,
        decision_id=gate.decision_id,
        truncated=page.next_offset is not None and bool(items),
    )


async def _chain(svc: Services, tenant: str, record_id: UUID) -> list[Hit]:
    """Follow supersedes back and superseded_by forward, bounded by MAX_HISTORY."""
    found = await svc.store.get(tenant, [record_id])
    if not found:
        return []
    chain = list(found)
    seen = {found[0].record["id"]}
    for link, at_front in (("supersedes", True), ("superseded_by", False)):
        cursor = found[0].record
        while (next_id := cursor.get(link)) and next_id not in seen and len(chain) < MAX_HISTORY:
            hits = await svc.store.get(tenant, [UUID(next_id)])
            if not hits:
                break
            cursor = hits[0].record
            seen.add(next_id)
            chain.insert(0, hits[0]) if at_front else chain.append(hits[0])
    return chain


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up (says nothing about its dependencies)."""
    return {"status": "ok"}


@router.get("/metrics", response_class=PlainTextResponse)
async def prometheus_metrics() -> PlainTextResponse:
    """Prometheus metrics. Like /healthz it needs no token: counts, never content."""
    return PlainTextResponse(generate_latest(), media_type=CONTENT_TYPE_LATEST)


@router.get("/readyz", responses={503: {"description": "A dependency is not reachable."}})
async def readyz(svc: Svc) -> JSONResponse:
    """Ready when OPA and the store answer; Redis is reported, not required.

    Without Redis reads stay correct (no cache, audit spilled locally) and only
    writes wait: taking every replica out of the Service for it would turn a
    degraded sidecar into an outage.
    """
    checks = {"opa": await svc.policy.ready(), "store": True}
    try:
        await svc.store.ping()
    except StoreUnavailable:
        checks["store"] = False
    if svc.redis is not None:
        try:
            checks["redis"] = bool(await svc.redis.ping())
        except (RedisError, OSError):
            checks["redis"] = False
    ready = checks["opa"] and checks["store"]
    state = ("ready" if all(checks.values()) else "degraded") if ready else "not_ready"
    return JSONResponse({"status": state, "checks": checks}, status_code=200 if ready else 503)
