"""The native HTTP API (`/v1`).

Each route reads identity and its request, calls the one surface (memory.py), and
serialises the answer; refusals are the error tree's, raised through and answered in
one place (http/refusals.py). Every record a route returns was decided by the
disclosure policy; a record that may not be disclosed answers exactly like one that
does not exist.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response
from starlette.convertors import PathConvertor, register_url_convertor

from sidecar.http.bodies import DirectRoute, JsonRoute
from sidecar.http.deps import Asker, Svc, refusals
from sidecar.messages import (
    ConversationOpening,
    ErasureResponse,
    HistoryResponse,
    MembershipChanges,
    MembershipEvents,
    MemoryResponse,
    MemoryWrites,
    Observations,
    Problem,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
    WitnessedEvent,
)
from sidecar.record import MAX_PATH, Instant, Person

router = APIRouter(route_class=JsonRoute)


class _KeyConvertor(PathConvertor):
    """A proposition key in a path: any characters, `/` and newlines included
    (Starlette's `path` stops at a newline, and a key may hold one)."""

    regex = r"[\s\S]+"


register_url_convertor("key", _KeyConvertor())


_errors = refusals(401, 413, 422, 503)


@router.post(
    "/v1/memories",
    status_code=201,
    response_model=StoredRecords,
    response_model_exclude_none=True,
    responses=_errors,
)
async def write_memories(
    body: Annotated[MemoryWrites, Body()], svc: Svc, who: Asker
) -> StoredRecords:
    """Store one record or an array of them: all, or (422 with reasons) none."""
    return await svc.memory.remember(who, body if isinstance(body, list) else [body])


@router.post(
    "/v1/observations",
    status_code=201,
    response_model=StoredRecords,
    response_model_exclude_none=True,
    responses=_errors,
)
async def write_observation(
    body: Annotated[Observations, Body()], svc: Svc, who: Asker
) -> StoredRecords:
    """Store what speakers said as each speaker's own views (see writes/observations.py):
    one observation (`{speaker, source_id, participants, said_at, claims}`) or an array
    of them, all of their claims or (422 with reasons) none."""
    return await svc.memory.observe(who, body if isinstance(body, list) else [body])


@router.post(
    "/v1/conversations",
    status_code=201,
    response_model=MembershipEvents,
    response_model_exclude_none=True,
    responses=_errors,
)
async def open_conversation(opening: ConversationOpening, svc: Svc, who: Asker) -> MembershipEvents:
    """Open a conversation (`source_id`) with its first members at `at`: an observation
    in it without `participants` is then heard by whoever is a member at `said_at`
    (see writes/membership.py)."""
    return await svc.memory.open_conversation(who, opening)


@router.post(
    "/v1/conversations/{source_id:key}/membership",
    status_code=201,
    response_model=MembershipEvents,
    response_model_exclude_none=True,
    responses=_errors,
)
async def change_membership(
    source_id: Annotated[str, Path(min_length=1, max_length=200)],
    body: MembershipChanges,
    svc: Svc,
    who: Asker,
) -> MembershipEvents:
    """Who joined or left the conversation, when; a change with `corrects` replaces the
    event it names (whether the writer may is the conversations policy's). All of them,
    or (422 with reasons) none."""
    return await svc.memory.change_membership(who, source_id, body)


@router.post(
    "/v1/witnessed",
    status_code=201,
    response_model=StoredRecords,
    response_model_exclude_none=True,
    responses=_errors,
)
async def write_witnessed(event: WitnessedEvent, svc: Svc, who: Asker) -> StoredRecords:
    """Store what several people saw together as each one's own view (what each thinks
    the others think is derived from it when read; see writes/witnessed.py)."""
    return await svc.memory.witness(who, event)


async def recall(request: RecallRequest, svc: Svc, who: Asker) -> Response:
    """Attributed beliefs, an answer, a conflict, or an abstention; 503
    `policy_unavailable` (an abstention too) when nothing could be decided."""
    answer = await svc.memory.recall(who, request, "recall")
    # Serialised once, as FastAPI would for `response_model` (kept for the OpenAPI
    # document), without validating again the model the read path just built.
    return Response(
        answer.model_dump_json(by_alias=True, exclude_none=True), media_type="application/json"
    )


# A recall's well-formed request skips FastAPI's dependency solving (http/bodies.py).
router.add_api_route(
    "/v1/recall",
    recall,
    methods=["POST"],
    response_model=RecallResponse,
    response_model_exclude_none=True,
    responses=_errors,
    route_class_override=DirectRoute,
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
    return await svc.memory.get(who, record_id, as_of, "get")


@router.delete(
    "/v1/memories/{record_id}",
    response_model=ErasureResponse,
    responses={403: {"model": Problem}, 404: {"model": Problem}, **_errors},
)
async def erase_memory(
    record_id: UUID,
    svc: Svc,
    who: Asker,
    history: Annotated[bool, Query(description="Erase every version of its chain.")] = False,
    reason: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=200,
            description="Your reference for why (a ticket id), kept in the audit log.",
        ),
    ] = None,
) -> ErasureResponse:
    """Erase a record: it leaves the store (vector and payload), its chain closes over
    it, and what was derived from it is flagged, withdrawn or erased as the erasure
    policy says. 404 exactly as for a missing record when the asker may not see it;
    403 `erasure_refused` with every reason when the policy says no (by default only
    the record's holder and writer, or an erasure officer, may erase it)."""
    return await svc.memory.forget(
        who, record_id, "memories.delete", history=history, reason=reason
    )


@router.get(
    "/v1/memories/{record_id}/history",
    response_model=HistoryResponse,
    response_model_exclude_none=True,
    responses={404: {"model": Problem}, **_errors},
)
async def memory_history(record_id: UUID, svc: Svc, who: Asker) -> HistoryResponse:
    """The supersession chain through one record, oldest first, each version gated."""
    return await svc.memory.history(who, record_id, "history")


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
    depth: Annotated[
        int,
        Query(
            description="How deep `minds` nests (views derived included): 1 to "
            "WHOSE_MAX_MIND_DEPTH (default 4).",
            # Bounded by the setting, with one reason (memory.py); the schema says how
            # far the setting may go.
            json_schema_extra={"minimum": 1, "maximum": MAX_PATH},
        ),
    ] = 1,
    observer: Annotated[Person | None, Query(description="Only this holder's views.")] = None,
    observed: Annotated[
        list[Person] | None,
        Query(
            max_length=MAX_PATH,
            description="Only views of this chain of minds after the observer, outermost "
            "first (repeat the parameter: `observed=sally&observed=anne`).",
        ),
    ] = None,
) -> PropositionResponse:
    """Every disclosable view of one proposition current at `as_of` (default now), the
    world-state claim, and the views grouped by whose mind they are in, nested to
    `depth`; with `observed`, only the views of that chain of minds."""
    return await svc.memory.views(
        who,
        key,
        audience or [],
        "propositions",
        as_of,
        depth=depth,
        observer=observer,
        observed=observed or (),
    )
