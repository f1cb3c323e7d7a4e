"""The one surface: what every transport asks of whose's memory.

The native API's memory routes (http/api.py) and the MCP tools (mcp/tools.py) call
these methods, so a refusal, a bound or an answer is the same whichever way it was
asked (the Qdrant dialect keeps its own reads: search, scroll and count have its
semantics). Each method turns a request into a question and a scope,
calls the one read path (reads/reader.py) or the write path (writes/writer.py), and
settles the answer. Refusals are the error tree's (errors.py); `route` names the caller
in the audit entry.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from uuid import UUID

from sidecar.answers.minds import minds
from sidecar.answers.verdict import mark_replaced, newest_fact, verdict_of
from sidecar.audit import WriteRoute
from sidecar.auth.identity import Identity
from sidecar.embed import Embedder
from sidecar.errors import InvalidRequest, NotFound
from sidecar.messages import (
    ErasureProgress,
    ErasureRequest,
    ErasureResponse,
    HistoryResponse,
    MemoryResponse,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
)
from sidecar.policy.contract import DisclosureQuestion
from sidecar.reads.reader import Reader
from sidecar.record import MemoryRecord, MemoryWrite
from sidecar.settings import Settings
from sidecar.store.scope import Scope
from sidecar.writes.eraser import Eraser
from sidecar.writes.erasure_requests import ErasureRequests
from sidecar.writes.observations import Observation
from sidecar.writes.observations import to_records as observed_records
from sidecar.writes.versions import Change, Point, Versions
from sidecar.writes.witnessed import WitnessedEvent
from sidecar.writes.witnessed import to_records as witnessed_records
from sidecar.writes.writer import MAX_BATCH, Writer


def _now() -> datetime:
    return datetime.now(UTC)


class Memory:
    def __init__(
        self,
        settings: Settings,
        reader: Reader,
        writer: Writer,
        embedder: Embedder,
        eraser: Eraser,
        versions: Versions,
        erasures: ErasureRequests,
    ) -> None:
        self.settings = settings
        self.reader = reader
        self.writer = writer
        self.embedder = embedder
        self.eraser = eraser
        self.versions = versions
        self.erasures = erasures

    # --- writes -------------------------------------------------------------------------

    async def remember(
        self, who: Identity, bodies: Sequence[MemoryWrite], route: WriteRoute = "memories"
    ) -> StoredRecords:
        """Store every record, or (WriteRefused, with every reason) none."""
        if not 1 <= len(bodies) <= MAX_BATCH:
            raise InvalidRequest("batch size", [f"1..{MAX_BATCH} records"])
        return StoredRecords(records=await self.writer.write(list(bodies), who, _now(), route))

    async def observe(
        self,
        who: Identity,
        observations: Sequence[Observation],
        route: WriteRoute = "observations",
    ) -> StoredRecords:
        """What speakers said, as each speaker's own views (writes/observations.py): every
        claim of every observation stored, or (WriteRefused, with every reason) none."""
        bodies = [body for o in observations for body in observed_records(o)]
        if not observations or len(bodies) > MAX_BATCH:
            raise InvalidRequest("batch size", [f"1..{MAX_BATCH} claims in all"])
        return StoredRecords(records=await self.writer.write(bodies, who, _now(), route))

    async def witness(
        self, who: Identity, event: WitnessedEvent, route: WriteRoute = "witnessed"
    ) -> StoredRecords:
        """An event seen together, as each witness's view (writes/witnessed.py)."""
        records = await self.writer.write(witnessed_records(event), who, _now(), route)
        return StoredRecords(records=records)

    # --- documents by the ids their library gave them (the Qdrant dialect) -------------

    async def upsert_points(
        self, who: Identity, points: Sequence[Point], route: WriteRoute = "proxy.upsert"
    ) -> StoredRecords:
        """Each point a new document, or a new version of the one its id names
        (writes/versions.py); all or nothing."""
        return StoredRecords(records=await self.versions.upsert(who, points, route))

    async def update_points(
        self, who: Identity, targets: Sequence[UUID] | Scope, change: Change, route: WriteRoute
    ) -> StoredRecords:
        """A new version of each document named, its payload changed; all or nothing."""
        return StoredRecords(records=await self.versions.update(who, targets, change, route))

    async def delete_points(
        self, who: Identity, targets: Sequence[UUID] | Scope, route: str = "proxy.delete"
    ) -> list[str]:
        """Erase every version of each document named that the asker may see."""
        return await self.versions.delete(who, targets, route)

    async def point_aliases(self, who: Identity, ids: Sequence[UUID]) -> dict[UUID, list[UUID]]:
        """The record ids each point id names for the asker (writes/versions.py)."""
        return await self.versions.aliases(who, ids)

    # --- erasure ------------------------------------------------------------------------

    async def forget(
        self,
        who: Identity,
        record_id: UUID,
        route: str,
        *,
        history: bool = False,
        reason: str | None = None,
    ) -> ErasureResponse:
        """Erase a record (with `history`, every version of its chain) if the erasure
        policy lets the asker (ErasureRefused otherwise, nothing erased); NotFound, as
        if missing, when the asker may not see it (writes/eraser.py)."""
        erased = await self.eraser.forget(who, [record_id], route, history=history, reason=reason)
        if not erased.erased:
            raise NotFound("memory")
        return ErasureResponse(
            erased=[UUID(i) for i in erased.erased], decision_id=erased.decision_id
        )

    async def request_erasure(self, who: Identity, request: ErasureRequest) -> ErasureProgress:
        """Erase every record about a subject, from a source, or of the tenant, in
        bounded steps (writes/erasure_requests.py); ErasureRefused unless the asker is
        an erasure officer by the policy."""
        return await self.erasures.submit(who, request)

    async def erasure_status(self, who: Identity, request_id: UUID) -> ErasureProgress:
        """How far an erasure request has got; NotFound for one the asker neither made
        nor, as an officer, may follow."""
        return await self.erasures.status(who, request_id)

    # --- reads --------------------------------------------------------------------------

    async def recall(self, who: Identity, request: RecallRequest, route: str) -> RecallResponse:
        """Attributed beliefs, an answer, a conflict or an abstention. PolicyUnavailable
        when nothing could be decided (the transport says so, failing closed)."""
        problems = []
        if request.limit > self.settings.max_limit:
            problems.append(f"limit_above_{self.settings.max_limit}")
        if request.vector is not None and len(request.vector) != self.embedder.dim:
            problems.append(f"vector_dimension_must_be_{self.embedder.dim}")
        if problems:
            raise InvalidRequest("recall", problems)
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
        mode = request.mode
        vector = request.vector
        if mode != "lexical" and vector is None:
            # No embedding, no search: EmbeddingUnavailable answers 503 with the reason.
            [vector] = await self.embedder.embed_batch([request.query or ""], "query")
        answer = await self.reader.nearest(
            question,
            route,
            None if mode == "lexical" else vector,
            scope,
            request.limit,
            text=None if mode == "dense" else request.query,
            with_other_views=True,
        )
        items = mark_replaced(answer.items)
        verdict, conflicts = verdict_of(items, answer.vocabulary, answer.others)
        return RecallResponse(
            verdict=verdict,
            items=items,
            conflicts=conflicts,
            decision_id=answer.decision_id,
            # With nothing allowed, "the bound stopped us" would say that many records the
            # asker may not see match the filters: an abstention stays an abstention.
            truncated=answer.truncated and bool(items),
        )

    async def get(
        self, who: Identity, record_id: UUID, as_of: datetime | None, route: str
    ) -> MemoryResponse:
        """One record, or the version of its chain that applied at `as_of` provided the
        record asked for may be seen too; NotFound otherwise, as if missing."""
        question = DisclosureQuestion(asker=who, audience=[], purpose="get", now=_now())
        if as_of is None:
            answer = await self.reader.by_ids(question, route, [record_id])
        else:
            answer = await self.reader.version_at(question, route, record_id, as_of)
        if not answer.shown:
            raise NotFound("memory")
        [shown] = answer.shown
        return MemoryResponse(
            item=shown.item,
            record=MemoryRecord.model_validate(shown.record.payload),
            decision_id=answer.decision_id,
        )

    async def history(self, who: Identity, record_id: UUID, route: str) -> HistoryResponse:
        """The chain through a record, oldest first, each version gated; NotFound when
        the record may not be seen."""
        question = DisclosureQuestion(asker=who, audience=[], purpose="history", now=_now())
        answer = await self.reader.history(question, route, record_id)
        if answer is None:
            raise NotFound("history")
        return HistoryResponse(items=answer.items, decision_id=answer.decision_id)

    async def views(
        self,
        who: Identity,
        key: str,
        audience: list[str],
        route: str,
        as_of: datetime | None = None,
    ) -> PropositionResponse:
        """Every disclosable view of one proposition current at `as_of` (default now),
        the world-state claim, and the views grouped by whose mind they are in."""
        question = DisclosureQuestion(who, audience, purpose="recall", now=_now(), as_of=as_of)
        scope = Scope(tenant=who.tenant, about=key, current_at=question.at)
        answer = await self.reader.listing(question, route, scope, self.settings.max_candidates)
        items = mark_replaced(answer.items)
        verdict, conflicts = verdict_of(items, answer.vocabulary)
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
