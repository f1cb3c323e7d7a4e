"""The Qdrant dialect's writes: upsert, delete, payload updates and batches, each
decided by the write or erasure policy (docs/design.md §6, "Documents through the
proxy").

A RAG library writes documents in its own payload shape; writes/documents.py reads
them as perspective records, labelled by the labeling policy (rego/whose/labeling), and
writes/versions.py keeps the ids the library chose naming its documents: upserting an
id makes a new version, deleting one erases every version. Each operation here parses
Qdrant's body, names the points (ids, or a filter over the current points), and calls
memory.py.
Refusals answer in Qdrant's error shape with the reasons (http/qdrant/dialect.py):
422 for a document the policies refuse (which metadata key to add or label to give),
403 for an erasure the policy refuses, 400 for what the sidecar does not do (vectors
alone, nested payload keys). An id or a filter match the caller may not see is left alone and
answers exactly as a missing one: `completed`, nothing changed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from qdrant_client.http import models as qm

from sidecar.auth.identity import Identity
from sidecar.errors import WhoseError
from sidecar.http.bodies import JsonRoute
from sidecar.http.deps import Asker, Svc
from sidecar.http.qdrant.caller_filter import caller_filter
from sidecar.http.qdrant.dialect import (
    ERRORS,
    QdrantError,
    aliased_filter,
    chosen_ids,
    dense_vector,
    ok,
    parse,
    point_as_record_id,
    stack_vectors,
    upsert_rows,
)
from sidecar.services import Services
from sidecar.store.scope import Scope
from sidecar.writes.eraser import MAX_IDS as MAX_IDS  # the gRPC transport bounds by it too
from sidecar.writes.versions import Change, WrittenPoint

router = APIRouter(tags=["Qdrant-compatible"], responses=ERRORS, route_class=JsonRoute)
RawBody = Annotated[dict[str, Any], Body()]

# What a finished update answers (Qdrant's UpdateResult); the work is done by then.
DONE = {"operation_id": 0, "status": "completed"}


async def _collection(name: str, svc: Services, who: Identity) -> None:
    if not await svc.points.exists(who, name):
        raise QdrantError(404, f"Not found: Collection `{name}` doesn't exist!")


@router.put("/collections/{collection}/points")
async def upsert_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """Upsert documents (or memory records): a new document, or a new version of the
    one the point id names; all or nothing."""
    started = time.perf_counter()
    await _collection(collection, svc, who)
    await _upsert(svc, who, body, collection)
    return ok(DONE, started)


@router.post("/collections/{collection}/points/delete")
async def delete_points(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """Erase the documents named, by id or by filter: every version of each."""
    started = time.perf_counter()
    await _collection(collection, svc, who)
    await _delete(svc, who, body, collection)
    return ok(DONE, started)


@router.post("/collections/{collection}/points/payload")
async def set_payload(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A new version of each document named, with these payload keys set."""
    started = time.perf_counter()
    await _collection(collection, svc, who)
    await _set_payload(svc, who, body, collection, overwrite=False)
    return ok(DONE, started)


@router.put("/collections/{collection}/points/payload")
async def overwrite_payload(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A new version of each document named, with this whole payload."""
    started = time.perf_counter()
    await _collection(collection, svc, who)
    await _set_payload(svc, who, body, collection, overwrite=True)
    return ok(DONE, started)


@router.post("/collections/{collection}/points/payload/delete")
async def delete_payload(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """A new version of each document named, without these payload keys."""
    started = time.perf_counter()
    await _collection(collection, svc, who)
    await _delete_payload(svc, who, body, collection)
    return ok(DONE, started)


@router.post("/collections/{collection}/points/payload/clear")
@router.put("/collections/{collection}/points/vectors")
@router.post("/collections/{collection}/points/vectors/delete")
async def refused_update(collection: str, svc: Svc, who: Asker) -> JSONResponse:
    """Refused by name: a document without its payload or its vector is no document
    (delete the points, or upsert the document again with its new vector)."""
    await _collection(collection, svc, who)
    raise QdrantError(
        400,
        "not supported by whose: clearing a payload or changing vectors alone; delete the "
        "points, or upsert the documents again",
    )


@router.post("/collections/{collection}/points/batch")
async def batch_update(collection: str, body: RawBody, svc: Svc, who: Asker) -> JSONResponse:
    """Operations in order, each as its own route does it. As in Qdrant, a batch is not
    one transaction: a refused operation stops the batch, and the answer names it
    (the operations before it are done; each operation is all or nothing)."""
    started = time.perf_counter()
    await _collection(collection, svc, who)
    operations = body.get("operations")
    if not isinstance(operations, list) or not 1 <= len(operations) <= MAX_IDS:
        raise QdrantError(400, f"operations: a list of 1..{MAX_IDS} operations")
    runs = [_operation(index, op) for index, op in enumerate(operations)]
    results = []
    for index, (kind, arguments) in enumerate(runs):
        try:
            await _BATCHED[kind](svc, who, arguments, collection)
        except QdrantError as exc:
            exc.message = f"operation {index} ({kind}): {exc.message}"
            raise
        except WhoseError as exc:
            # Answered in Qdrant's shape, this said first (http/qdrant/dialect.py).
            exc.add_note(f"operation {index} ({kind})")
            raise
        results.append(DONE)
    return ok(results, started)


# --- the operations -------------------------------------------------------------------


async def _upsert(svc: Services, who: Identity, body: dict[str, Any], collection: str) -> None:
    _no_conditions(body)
    rows = upsert_rows(body)
    points = []
    stack = collection != svc.settings.collection
    for point, vector, payload in rows:
        record = point_as_record_id(point)
        if record is None:
            raise QdrantError(400, f"point id {point} is neither an unsigned integer nor a UUID")
        sent = stack_vectors(vector) if stack else dense_vector(vector)
        points.append(WrittenPoint(record, sent, payload))
    await svc.memory.upsert_points(who, points, collection=collection)


async def _delete(svc: Services, who: Identity, body: dict[str, Any], collection: str) -> None:
    targets = await _selected(svc, who, body, collection)
    await svc.memory.delete_points(who, targets, collection=collection)


async def _set_payload(
    svc: Services, who: Identity, body: dict[str, Any], collection: str, *, overwrite: bool
) -> None:
    request = parse(qm.SetPayload, body)
    if request.key is not None:
        raise QdrantError(400, "key (a nested payload path) is not supported: set top-level keys")
    given = dict(request.payload)

    def change(payload: dict[str, Any]) -> dict[str, Any]:
        return dict(given) if overwrite else {**payload, **given}

    route = "proxy.overwrite_payload" if overwrite else "proxy.set_payload"
    await _update(svc, who, body, change, route, collection)


async def _delete_payload(
    svc: Services, who: Identity, body: dict[str, Any], collection: str
) -> None:
    request = parse(qm.DeletePayload, body)
    keys = set(request.keys)

    def change(payload: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in payload.items() if k not in keys}

    await _update(svc, who, body, change, "proxy.delete_payload", collection)


async def _update(
    svc: Services,
    who: Identity,
    body: dict[str, Any],
    change: Change,
    route: Any,
    collection: str,
) -> None:
    targets = await _selected(svc, who, body, collection)
    await svc.memory.update_points(who, targets, change, route, collection)


async def _selected(
    svc: Services, who: Identity, body: dict[str, Any], collection: str
) -> list[UUID] | Scope:
    """The points a body names: its ids (`points`), or the current points its filter
    matches; checked and bounded before anything is read."""
    if body.get("shard_key") is not None:
        raise QdrantError(400, "shard_key is not supported")
    if "filter" in body and body["filter"] is not None:
        if body.get("points") is not None:
            raise QdrantError(400, "give points or filter, not both")
        if collection != svc.settings.collection:
            info = await svc.stacks.info(who, collection)
            own = info.own_indexes if info is not None else {}
            caller = caller_filter(chosen_ids(body["filter"]), who.tenant, own)
        else:
            caller = await aliased_filter(svc.memory, who, body["filter"])
        return Scope(tenant=who.tenant, current_at=datetime.now(UTC), caller=caller)
    ids = body.get("points")
    if not isinstance(ids, list):
        raise QdrantError(400, "Format error in JSON body: give points (ids) or filter")
    if len(ids) > MAX_IDS:
        raise QdrantError(400, f"at most {MAX_IDS} ids per request")
    # An id that is not a UUID names no record here: as missing.
    return [r for r in (point_as_record_id(i) for i in ids) if r is not None]


def _no_conditions(body: dict[str, Any]) -> None:
    for name in ("shard_key", "update_filter", "update_mode"):
        if body.get(name) is not None:
            raise QdrantError(400, f"{name} is not supported by whose")


def _operation(index: int, operation: Any) -> tuple[str, dict[str, Any]]:
    """One batch operation, checked before any runs: its kind and its arguments."""
    if not isinstance(operation, dict) or len(operation) != 1:
        raise QdrantError(400, f"operation {index}: one operation per entry")
    [(kind, arguments)] = operation.items()
    if kind not in _BATCHED:
        raise QdrantError(400, f"operation {index}: {kind} is not supported by whose in a batch")
    if not isinstance(arguments, dict):
        raise QdrantError(400, f"operation {index}: {kind} takes an object")
    return kind, arguments


async def _overwrite(svc: Services, who: Identity, body: dict[str, Any], collection: str) -> None:
    await _set_payload(svc, who, body, collection, overwrite=True)


async def _set(svc: Services, who: Identity, body: dict[str, Any], collection: str) -> None:
    await _set_payload(svc, who, body, collection, overwrite=False)


_BATCHED = {
    "upsert": _upsert,
    "delete": _delete,
    "set_payload": _set,
    "overwrite_payload": _overwrite,
    "delete_payload": _delete_payload,
}
