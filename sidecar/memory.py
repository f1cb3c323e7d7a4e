"""The one surface: what every transport asks of whose's memory.

The native API's memory routes (http/api.py), the MCP tools (mcp/tools.py) and the
Qdrant dialect's writes (http/qdrant/writes.py) call these methods, so a refusal, a
bound or an answer is the same whichever way it was asked; the security team's
questions (the audit log, explain) have a surface of their own beside it
(oversight.py). Each method turns a request into a question and a scope, calls the
one read path (reads/reader.py) or the write path (writes/writer.py), and settles the
answer. Refusals are the error tree's (errors.py), each logged and counted here, at
the door (`door`), once, whichever transport asked; `route` names the caller in the
audit entry.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import UUID

from sidecar.answers import current
from sidecar.answers.minds import minds
from sidecar.answers.verdict import mark_replaced, newest_fact, verdict_of
from sidecar.audit import WriteRoute
from sidecar.auth.identity import Identity
from sidecar.door import door
from sidecar.embed import Embedder
from sidecar.errors import InvalidRequest, NotFound
from sidecar.messages import (
    ConversationOpening,
    ErasureProgress,
    ErasureRequest,
    ErasureResponse,
    ForgetRule,
    ForgetRuleRequest,
    ForgetRules,
    ForgetRuleSet,
    Grant,
    GrantList,
    GrantRequest,
    HistoryResponse,
    Item,
    MembershipChange,
    MembershipChanges,
    MembershipEvents,
    MemoryResponse,
    Mind,
    Observation,
    PropositionResponse,
    RecallRequest,
    RecallResponse,
    StoredRecords,
    WitnessedEvent,
)
from sidecar.policy.contract import DisclosureQuestion
from sidecar.policy.grants import Grants
from sidecar.reads.nested import Filters, Minds, speech_conditions
from sidecar.reads.reader import Reader
from sidecar.record import MemoryRecord, MemoryWrite, observed_path
from sidecar.settings import Settings
from sidecar.store.scope import Scope
from sidecar.store.stacks import missing
from sidecar.writes.eraser import Eraser
from sidecar.writes.erasure_requests import ErasureRequests
from sidecar.writes.forget_rules import Rules
from sidecar.writes.membership import Membership
from sidecar.writes.observations import keyed
from sidecar.writes.observations import to_records as observed_records
from sidecar.writes.testimony import adopted
from sidecar.writes.versions import Change, Versions, WrittenPoint
from sidecar.writes.witnessed import to_records as witnessed_records
from sidecar.writes.writer import MAX_BATCH as MAX_BATCH  # transports bound batches by it
from sidecar.writes.writer import Writer

if TYPE_CHECKING:
    from sidecar.stack_paths import Stacks

log = logging.getLogger("whose")


def _now() -> datetime:
    return datetime.now(UTC)


@door
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
        stacks: Stacks | None = None,
        grants: Grants | None = None,
        membership: Membership | None = None,
        rules: Rules | None = None,
    ) -> None:
        self.settings = settings
        # A RAG stack's own collections (stack_paths.py): the dialect's writes name one.
        self.stacks = stacks
        self.reader = reader
        self.writer = writer
        self.embedder = embedder
        self.eraser = eraser
        self.versions = versions
        self.erasures = erasures
        # Subjects' grants (policy/grants.py); None: a core without a grant store.
        self.grants = grants
        self.minds = Minds(reader, settings.max_mind_views, settings.max_mind_depth)
        # Who is in each conversation (writes/membership.py); without it an observation
        # without participants is heard by its speaker alone.
        self.membership = membership
        self.rules = rules

    # --- writes -------------------------------------------------------------------------

    async def remember(
        self, who: Identity, bodies: Sequence[MemoryWrite], route: WriteRoute = "memories"
    ) -> StoredRecords:
        """Store every record, or (WriteRefused, with every reason) none."""
        if not 1 <= len(bodies) <= MAX_BATCH:
            raise InvalidRequest("batch size", [f"1..{MAX_BATCH} records"])
        self._within_depth(bodies)
        return StoredRecords(records=await self.writer.write(list(bodies), who, _now(), route))

    async def observe(
        self,
        who: Identity,
        observations: Sequence[Observation],
        route: WriteRoute = "observations",
    ) -> StoredRecords:
        """What speakers said, as each speaker's statements (writes/observations.py), and
        what the trust policy lets each hearer take as their own belief
        (writes/testimony.py): every claim of every observation stored, or (WriteRefused,
        with every reason) none. The writer is told the statements only."""
        statements = [body for o in observations for body in observed_records(o)]
        if not observations or len(statements) > MAX_BATCH:
            raise InvalidRequest("batch size", [f"1..{MAX_BATCH} claims in all"])
        self._within_depth(statements)
        now = _now()
        observations = [keyed(o) for o in await self._hearers(who, observations, now)]
        statements = [body for o in observations for body in observed_records(o)]
        beliefs = [
            belief
            for o in observations
            for belief in await adopted(self.writer.policy, self.writer.store, who, o, now)
        ]
        records = await self.writer.write([*statements, *beliefs], who, now, route)
        return StoredRecords(records=records[: len(statements)])

    async def _hearers(
        self, who: Identity, observations: Sequence[Observation], now: datetime
    ) -> list[Observation]:
        if self.membership is None:
            return [
                o.model_copy(update={"participants": o.participants or []}) for o in observations
            ]
        return await self.membership.hearers(who, observations, now)

    async def open_conversation(
        self, who: Identity, opening: ConversationOpening
    ) -> MembershipEvents:
        """A conversation opened with its first members: one join each, at `at`."""
        changes = [
            MembershipChange(person=person, change="join", at=opening.at)
            for person in dict.fromkeys(opening.members)
        ]
        return await self.change_membership(
            who, opening.source_id, MembershipChanges(changes=changes)
        )

    async def change_membership(
        self, who: Identity, conversation: str, body: MembershipChanges
    ) -> MembershipEvents:
        """Joins, leaves and corrections of one conversation: every one stored, or
        (WriteRefused with every reason, InvalidRequest) none."""
        if self.membership is None:
            raise InvalidRequest("membership", ["membership_not_kept"])
        events = await self.membership.record(who, conversation, body.changes, _now())
        return MembershipEvents(events=events)

    async def witness(
        self, who: Identity, event: WitnessedEvent, route: WriteRoute = "witnessed"
    ) -> StoredRecords:
        """An event seen together, as each witness's view (writes/witnessed.py)."""
        records = await self.writer.write(witnessed_records(event), who, _now(), route)
        return StoredRecords(records=records)

    # --- documents by the ids their library gave them (the Qdrant dialect) -------------

    async def upsert_points(
        self,
        who: Identity,
        points: Sequence[WrittenPoint],
        route: WriteRoute = "proxy.upsert",
        collection: str | None = None,
    ) -> StoredRecords:
        """Each point a new document, or a new version of the one its id names
        (writes/versions.py), labelled by the labeling policy; all or nothing."""
        versions = await self._versions(who, collection)
        stored = await versions.upsert(who, points, route, collection)
        return StoredRecords(records=stored)

    async def update_points(
        self,
        who: Identity,
        targets: Sequence[UUID] | Scope,
        change: Change,
        route: WriteRoute,
        collection: str | None = None,
    ) -> StoredRecords:
        """A new version of each document named, its payload changed; all or nothing."""
        versions = await self._versions(who, collection)
        stored = await versions.update(who, targets, change, route, collection)
        return StoredRecords(records=stored)

    async def delete_points(
        self,
        who: Identity,
        targets: Sequence[UUID] | Scope,
        route: str = "proxy.delete",
        collection: str | None = None,
    ) -> list[str]:
        """Erase every version of each document named that the asker may see."""
        return await (await self._versions(who, collection)).delete(who, targets, route)

    async def point_aliases(
        self, who: Identity, ids: Sequence[UUID], collection: str | None = None
    ) -> dict[UUID, list[UUID]]:
        """The record ids each point id names for the asker (writes/versions.py)."""
        return await (await self._versions(who, collection)).aliases(who, ids)

    async def _versions(self, who: Identity, collection: str | None) -> Versions:
        """The documents of the collection named: whose's own, or a stack's."""
        if collection is None or collection == self.settings.collection or self.stacks is None:
            return self.versions
        paths = await self.stacks.paths(who.tenant, collection)
        if paths is None:
            raise missing(collection)
        return paths.versions

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

    # --- consent --------------------------------------------------------------------------

    async def grant(self, who: Identity, request: GrantRequest) -> Grant:
        """Let a reader see a subject's records of some categories (policy/grants.py),
        from the next read on; ConsentRefused, every reason, when the consent policy
        says no."""
        return await self._grants().grant(who, request)

    async def revoke_grant(self, who: Identity, grant_id: UUID) -> Grant:
        """Take a grant back; NotFound for one the asker may not revoke and is no party to."""
        return await self._grants().revoke(who, grant_id)

    async def list_grants(self, who: Identity) -> GrantList:
        """The grants in force the asker gave, is the subject of, or reads by."""
        return await self._grants().listed(who)

    def _grants(self) -> Grants:
        if self.grants is None:
            raise NotFound("grant")
        return self.grants

    async def erasure_status(self, who: Identity, request_id: UUID) -> ErasureProgress:
        """How far an erasure request has got; NotFound for one the asker neither made
        nor, as an officer, may follow."""
        return await self.erasures.status(who, request_id)

    # --- standing forget rules (writes/forget_rules.py) --------------------------------

    async def set_forget_rule(self, who: Identity, request: ForgetRuleRequest) -> ForgetRuleSet:
        """Forget a value, key or pattern about a subject from now on, and erase what
        it names now with the asker's reach; ErasureRefused unless the forgetting
        policy lets the asker set it."""
        return await self._rules().set(who, request)

    async def lift_forget_rule(self, who: Identity, rule_id: UUID) -> ForgetRule:
        """Lift a standing rule; NotFound for one the asker may not see."""
        return await self._rules().lift(who, rule_id)

    async def forget_rules(self, who: Identity) -> ForgetRules:
        """The rules about the asker or that they set (an officer: all the tenant's)."""
        return ForgetRules(rules=await self._rules().listed(who))

    def _rules(self) -> Rules:
        if self.rules is None:
            raise InvalidRequest("forget rules", ["forget_rules_not_configured"])
        return self.rules

    def _within_depth(self, bodies: Sequence[MemoryWrite]) -> None:
        depth = self.settings.max_mind_depth
        deep = [i for i, body in enumerate(bodies) if len(observed_path(body.model_dump())) > depth]
        if deep:
            raise InvalidRequest("observed_path", [f"observed_path_deeper_than_{depth}"])

    # --- reads --------------------------------------------------------------------------

    async def recall(self, who: Identity, request: RecallRequest, route: str) -> RecallResponse:
        """Attributed beliefs, an answer, a conflict or an abstention. PolicyUnavailable
        when nothing could be decided (its answer is the fail-closed abstention)."""
        problems = []
        if not 1 <= request.limit <= self.settings.max_limit:
            problems.append(limit_refused(self.settings.max_limit))
        if request.vector is not None and len(request.vector) != self.embedder.dim:
            problems.append(f"vector_dimension_must_be_{self.embedder.dim}")
        # What was heard names one more mind than the chain: the speaker.
        if len(request.path) + request.heard > self.settings.max_mind_depth:
            problems.append(f"observed_deeper_than_{self.settings.max_mind_depth}")
        if request.heard and request.observer is None:
            problems.append("heard_needs_an_observer")
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
        mode = request.mode
        vector = request.vector
        if mode != "lexical" and vector is None:
            # No embedding, no search: EmbeddingUnavailable answers 503 with the reason.
            [vector] = await self.embedder.embed_batch([request.query or ""], "query")
        filters = Filters(
            attitude=request.attitude,
            source_id=request.source_id,
            modality=request.modality,
            min_confidence=request.min_confidence,
            speech_act=request.speech_act,
            observer=request.observer,
        )
        if request.path or request.heard:
            # A mind (the observer's view of a chain of others), or what a mind heard:
            # stored and derived views.
            answer = await self.minds.chain(
                question,
                route,
                who.tenant,
                request.path,
                key=request.about,
                filters=filters,
                vector=None if mode == "lexical" else vector,
                limit=request.limit,
                history=history,
                heard=request.heard,
            )
            items, others = answer.items, list[Item]()
        else:
            scope = Scope(
                tenant=who.tenant,
                current_at=None if history else question.at,
                about=request.about,
                observer=request.observer,
                attitude=request.attitude,
                source_id=request.source_id,
                modality=request.modality,
                min_confidence=request.min_confidence,
                extra=speech_conditions(request.speech_act),
            )
            answer = await self.reader.nearest(
                question,
                route,
                None if mode == "lexical" else vector,
                scope,
                request.limit,
                text=None if mode == "dense" else request.query,
                with_other_views=True,
            )
            items, others = _in_mind(
                mark_replaced(answer.items), answer.others, question.at, history, filters, request
            )
        verdict, conflicts = verdict_of(items, answer.vocabulary, others)
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
        *,
        depth: int = 1,
        observer: str | None = None,
        observed: Sequence[str] = (),
    ) -> PropositionResponse:
        """Every disclosable view of one proposition current at `as_of` (default now),
        the world-state claim, and the views grouped by whose mind they are in, nested
        to `depth` (views derived from what each holder witnessed or heard included).
        With `observed` (and `observer`): only the views of that chain of minds."""
        limit = self.settings.max_mind_depth
        if not 1 <= depth <= limit or len(observed) > limit:
            raise InvalidRequest("propositions", [f"depth_within_1..{limit}"])
        question = DisclosureQuestion(who, audience, purpose="recall", now=_now(), as_of=as_of)
        scope = Scope(tenant=who.tenant, about=key, current_at=question.at)
        if observed:
            answer = await self.minds.chain(
                question,
                route,
                who.tenant,
                tuple(observed),
                key=key,
                filters=Filters(observer=observer),
                vector=None,
                limit=self.settings.max_candidates,
                history=False,
            )
            derived: list[Item] = []
            truncated = answer.truncated
        else:
            answer, implied = await self.minds.views(question, route, scope, depth)
            derived = [i for i in implied.items if observer in (None, i.observer_id)]
            truncated = answer.truncated or implied.truncated
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
            minds=_minds([*items, *derived], question.at, observer),
            decision_id=answer.decision_id,
            truncated=truncated,
        )


def limit_refused(max_limit: int) -> str:
    """The one reason a recall's `limit` is refused for, whichever transport sent it
    (the request models bound it in their schema only)."""
    return f"limit_within_1..{max_limit}"


def _in_mind(
    items: list[Item],
    others: list[Item],
    at: datetime,
    history: bool,
    filters: Filters,
    request: RecallRequest,
) -> tuple[list[Item], list[Item]]:
    """A recall's items and the further views its conflicts are found among, each
    holder's current one as this question may see them (answers/current.py): a
    version superseded in its holder's mind gives way to the latest of its line (in
    a history, it is marked superseded instead)."""
    seen = [o for o in others if o.id not in current.superseded(others, items, at)]
    if history:
        return current.marked(items, others, at), seen

    def fits(item: Item) -> bool:
        key = item.proposition.key if item.proposition else None
        return filters.fits(item) and request.about in (None, key)

    return current.in_mind(items, others, at, fits), seen


def _minds(items: list[Item], at: datetime, observer: str | None) -> list[Mind]:
    """The minds of an answer: its items and derived views, one current view a line."""
    held = [i for i in items if observer in (None, i.observer_id)]
    replaced = current.superseded(held, (), at)
    return minds(i for i in held if i.id not in replaced)
