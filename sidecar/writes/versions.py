"""Documents by the ids their library gave them: write a new version, update a
payload, delete (docs/design.md §6, "Documents through the proxy").

A RAG library names each document by a point id it chose (LangChain's and
LlamaIndex's ids, Haystack's hash of its document id) and uses that id again to
read, rewrite and delete it. The sidecar serves record ids as point ids, and the
stored id of a first version is derived from the id its writer chose
(writes/writer.py `new_record_id`), so every version keeps the chosen id
(`provenance.chosen_id`), and for its writer alone an id names, besides the record of
that id, the writer's own line under it (`aliases`): its current version, or every
version. Anyone else's use of the same id names nothing of it.

- Writing an id that names a document the writer may see makes a new version of it
  (history kept, never an overwrite in place): the same holder's new view, told to
  the same people. Told to other people (a changed audience or scope), the old line
  is withdrawn (its valid time ends) and a new one starts; records derived from the
  old version are marked `withdrawn` (whoever the new readers are). Another holder
  is refused (`new_version_changes_holder`): that is someone else's claim. A
  version the same as the current one is not written again.
- Deleting an id erases every version of its line (writes/eraser.py): a library
  deleting a document means the document, not its latest version.
- A payload update is a new version made from the current one with the change
  applied to its plain payload (writes/documents.py `payload_of`).

Every record is decided by the policies as for any write or erasure; an id or a
filter match the asker may not see answers exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sidecar.audit import WriteRoute
from sidecar.auth.identity import Identity
from sidecar.errors import InvalidRequest
from sidecar.policy.contract import DisclosureQuestion, LabelDecision
from sidecar.reads.reader import Reader
from sidecar.record import MemoryRecord, MemoryWrite, Payload, PremiseChange, Stored, iso
from sidecar.store import Store
from sidecar.store.probes import Vector
from sidecar.store.scope import AnyOf, Match, Scope
from sidecar.writes.documents import labeling_question, payload_of, to_write
from sidecar.writes.eraser import MAX_IDS, Eraser
from sidecar.writes.lineage import Lineage, chain_lock_key
from sidecar.writes.locks import ChainLocks
from sidecar.writes.writer import MAX_BATCH, Writer, WriteRefused

# The versions one chosen id may have (a lookup is bounded by this per id), and the
# versions one lookup reads in all.
_MAX_VERSIONS = 100
_MAX_LOOKUP = 10_000


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class WrittenPoint:
    """One point a library wrote: its id, its vectors (a dense one; or by name, in a
    stack collection), its payload."""

    id: UUID
    vector: list[float] | Mapping[str, Vector]
    payload: Payload


# What a payload update does to a document's plain payload (writes/documents.py).
Change = Callable[[Payload], Payload]


@dataclass(frozen=True)
class _Planned:
    body: MemoryWrite
    chosen: UUID | None
    # The version this one follows in a new line (its audience or scope changed).
    reissues: Stored | None = None
    # Its place in the batch asked for (versions left unchanged are not written, so
    # the writer's indexes are of the planned ones).
    index: int = 0


class Versions:
    def __init__(
        self,
        store: Store,
        reader: Reader,
        writer: Writer,
        eraser: Eraser,
        locks: ChainLocks,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.store = store
        self.reader = reader
        self.writer = writer
        self.eraser = eraser
        self.locks = locks
        self.clock = clock
        self.lineage = Lineage(store, locks)

    # --- ids --------------------------------------------------------------------------

    async def aliases(
        self, who: Identity, ids: Sequence[UUID], *, every_version: bool = False
    ) -> dict[UUID, list[UUID]]:
        """The record ids each id names for the asker: itself, and the asker's own line
        under it as a chosen id (its current version, or with `every_version` all of
        them). Nothing is decided here: whatever reads them decides each."""
        named: dict[UUID, list[UUID]] = {i: [i] for i in ids}
        if not ids:
            return named
        scope = Scope(
            tenant=who.tenant,
            extra=(
                Match("provenance.writer", who.id),
                AnyOf("provenance.chosen_id", tuple(sorted({str(i) for i in ids}))),
            ),
        )
        lines: dict[str, list[Stored]] = {}
        page = await self.store.find(scope, min(_MAX_VERSIONS * len(named), _MAX_LOOKUP))
        for record in page.records:
            chosen = (record.payload.get("provenance") or {}).get("chosen_id")
            lines.setdefault(str(chosen), []).append(record)
        now = self.clock()
        for asked in named:
            versions = lines.get(str(asked), [])
            picked = versions if every_version else _current(versions, now)
            named[asked] += [UUID(r.id) for r in picked if UUID(r.id) != asked]
        return named

    async def visible(
        self, who: Identity, ids: Sequence[UUID], route: str, *, with_vector: bool = False
    ) -> dict[UUID, Stored]:
        """Per id asked, the record it names that the asker may see (the record of
        that id first, else the current version of the asker's line), as read by id."""
        named = await self.aliases(who, ids)
        wanted = list(dict.fromkeys(r for rs in named.values() for r in rs))
        question = DisclosureQuestion(asker=who, audience=[], purpose="get", now=self.clock())
        answer = await self.reader.by_ids(question, route, wanted, with_vector)
        shown = {UUID(s.record.id): s.record for s in answer.shown}
        found: dict[UUID, Stored] = {}
        for asked, candidates in named.items():
            record = next((shown[c] for c in candidates if c in shown), None)
            if record is not None:
                found[asked] = record
        return found

    # --- writes -----------------------------------------------------------------------

    async def upsert(
        self,
        who: Identity,
        points: Sequence[WrittenPoint],
        route: WriteRoute,
        collection: str | None = None,
    ) -> list[MemoryRecord]:
        """Each point as a new document or a new version of the one its id names:
        all or nothing (WriteRefused with every reason). `collection`: the one written
        to, as the labeling policy is told."""
        if not 1 <= len(points) <= MAX_BATCH:
            raise InvalidRequest("batch size", [f"1..{MAX_BATCH} points"])
        labeled = await self._labeled(who, [(p.payload, None, None) for p in points], collection)
        bodies = _converted(points, labeled)
        existing = await self.visible(who, [p.id for p in points], route)
        planned = [
            (index, point.id, body, existing.get(point.id))
            for index, (point, body) in enumerate(zip(points, bodies, strict=True))
        ]
        return await self._write(who, planned, route)

    async def update(
        self,
        who: Identity,
        targets: Sequence[UUID] | Scope,
        change: Change,
        route: WriteRoute,
        collection: str | None = None,
    ) -> list[MemoryRecord]:
        """A new version of each document named (ids, or the current ones a scope
        matches) with `change` applied to its payload: all or nothing."""
        if isinstance(targets, Scope):
            try:
                return await self._update(who, targets, change, route, collection)
            except WriteRefused as refused:
                # A filter gave no list to place a refusal in; the matched points' order
                # is their ids' (random), so an index would differ between two stores
                # holding the same records. Each refusal names its point instead.
                unplaced = [{k: v for k, v in p.items() if k != "index"} for p in refused.problems]
                raise WriteRefused(unplaced) from None
        return await self._update(who, targets, change, route, collection)

    async def _update(
        self,
        who: Identity,
        targets: Sequence[UUID] | Scope,
        change: Change,
        route: WriteRoute,
        collection: str | None,
    ) -> list[MemoryRecord]:
        found = await self._targets(who, targets, route)
        if not found:
            return []
        ids = [UUID(r.id) for r in found]
        changed: list[tuple[int, Stored, list[float] | Mapping[str, Vector], Payload]] = []
        if self.store.vectors.embeds:
            with_vectors = {
                r.id: r for r in await self.store.get(who.tenant, ids, with_vector=True)
            }
            for index, record in enumerate(found):
                stored = with_vectors.get(record.id)
                if stored is not None and stored.vector is not None:
                    new = change(payload_of(stored.payload))
                    changed.append((index, stored, stored.vector, new))
        else:
            # A stack collection's points keep every vector the stack sent, by name.
            names = self.store.vectors.given()
            fetched = {f.record.id: f for f in await self.store.fetch(who.tenant, ids, names)}
            for index, record in enumerate(found):
                if (f := fetched.get(record.id)) is not None:
                    new = change(payload_of(f.record.payload))
                    changed.append((index, f.record, dict(f.vectors), new))
        labeled = await self._labeled(
            who,
            [
                # Still its holder's: whether the asker may write it is the policy's.
                (payload, stored.payload.get("document"), _voice(stored.payload))
                for _, stored, _, payload in changed
            ],
            collection,
        )
        planned = []
        problems: list[dict[str, Any]] = []
        for (index, stored, vector, payload), labels in zip(changed, labeled, strict=True):
            try:
                body = _with_vectors(
                    to_write(
                        index,
                        UUID(stored.id),
                        payload,
                        vector if isinstance(vector, list) else None,
                        labels,
                        was=stored.payload.get("document"),
                    ),
                    vector,
                )
            except WriteRefused as refused:
                problems += refused.problems
                continue
            planned.append((index, UUID(stored.id), body, stored))
        if problems:
            raise WriteRefused(problems)
        return await self._write(who, planned, route)

    async def _labeled(
        self,
        who: Identity,
        payloads: Sequence[tuple[Payload, Any, str | None]],
        collection: str | None,
    ) -> list[LabelDecision | None]:
        """The labeling policy's answer for each payload that is a document (None for a
        memory record): one call for the batch. Each entry: the payload, the document
        a payload update changed, and whose that version is."""
        questions = [labeling_question(p, was=was, holder=h) for p, was, h in payloads]
        asked = [q for q in questions if q is not None]
        answers = iter(await self.writer.policy.labels(who, asked, collection))
        return [next(answers) if q is not None else None for q in questions]

    async def _write(
        self,
        who: Identity,
        points: Sequence[tuple[int, UUID, MemoryWrite, Stored | None]],
        route: WriteRoute,
    ) -> list[MemoryRecord]:
        _refuse_twice(points)
        plans: list[_Planned] = []
        problems: list[dict[str, Any]] = []
        for index, point, body, current in points:
            if current is None:
                plans.append(_Planned(body, point, index=index))
                continue
            reason = _changed_holder(current.payload, body)
            if reason is not None:
                problems.append({"index": index, "id": str(point), "reasons": [reason]})
                continue
            if _unchanged(current.payload, body):
                continue
            chosen = _chosen_of(current.payload, who.id)
            following = body.model_copy(update={"id": None})
            if _same_line(current.payload, body):
                named = following.model_copy(update={"supersedes": UUID(current.id)})
                plans.append(_Planned(named, chosen, index=index))
            else:
                plans.append(_Planned(following, chosen, reissues=current, index=index))
        if problems:
            raise WriteRefused(problems)
        if not plans:
            return []
        try:
            stored = await self.writer.write(
                [p.body for p in plans], who, self.clock(), route, chosen=[p.chosen for p in plans]
            )
        except WriteRefused as refused:
            # Each problem named by its place in the batch asked for, not among those planned.
            raise WriteRefused([_placed(p, plans) for p in refused.problems]) from None
        reissued = [
            (p.reissues, r.valid_at or self.clock())
            for p, r in zip(plans, stored, strict=True)
            if p.reissues is not None
        ]
        await self._withdraw(reissued, who.tenant)
        return stored

    async def _withdraw(self, reissued: list[tuple[Stored, datetime]], tenant: str) -> None:
        """The versions a new line replaced end where it starts; what was derived from
        them is marked `withdrawn`."""
        if not reissued:
            return
        changes: dict[str, PremiseChange] = {}
        keys = [chain_lock_key(old.payload) for old, _ in reissued]
        async with self.locks.hold(keys) as held:
            await held.confirm()
            for old, starts in reissued:
                ends = max(old.valid_at, starts)
                if old.invalid_at is None or old.invalid_at > ends:
                    await self.store.update(tenant, UUID(old.id), {"invalid_at": iso(ends)})
                # Withdrawn, whoever the new line's readers are: a reader of what was
                # derived may not see the new line, so its note must not say whether it
                # has fewer readers or others (issue 35).
                changes[old.id] = "withdrawn"
        await self.lineage.propagate(tenant, changes, self.clock())

    # --- deletes ----------------------------------------------------------------------

    async def delete(self, who: Identity, targets: Sequence[UUID] | Scope, route: str) -> list[str]:
        """Erase every version of each document named (ids, or the current documents a
        scope matches) that the asker may see, if the erasure policy lets the asker
        erase them all (ErasureRefused, nothing erased, otherwise)."""
        if isinstance(targets, Scope):
            found = await self._targets(who, targets, route)
            ids = [UUID(r.id) for r in found]
        else:
            named = await self.aliases(who, targets, every_version=True)
            ids = list(dict.fromkeys(r for rs in named.values() for r in rs))
        if not ids:
            return []
        erased = await self.eraser.forget(who, ids, route, history=True)
        return erased.erased

    async def _targets(
        self, who: Identity, targets: Sequence[UUID] | Scope, route: str
    ) -> list[Stored]:
        """The documents a request names that the asker may see: by id, as `visible`
        says; by filter, the current ones it matches, at most MAX_IDS (a broader
        filter is refused rather than half done)."""
        if not isinstance(targets, Scope):
            return list((await self.visible(who, targets, route)).values())
        question = DisclosureQuestion(asker=who, audience=[], purpose="recall", now=self.clock())
        answer = await self.reader.listing(question, route, targets, MAX_IDS)
        if answer.truncated:
            raise InvalidRequest(
                "filter matches too many points",
                [f"filter_matches_more_than_{MAX_IDS}_points"],
            )
        return [s.record for s in answer.shown]


def _with_vectors(body: MemoryWrite, vector: list[float] | Mapping[str, Vector]) -> MemoryWrite:
    """The record with a stack's named vectors, when it sent them by name."""
    return body if isinstance(vector, list) else body.with_vectors(vector)


def _converted(
    points: Sequence[WrittenPoint], labeled: Sequence[LabelDecision | None]
) -> list[MemoryWrite]:
    bodies: list[MemoryWrite] = []
    problems: list[dict[str, Any]] = []
    for index, (point, labels) in enumerate(zip(points, labeled, strict=True)):
        try:
            dense = point.vector if isinstance(point.vector, list) else None
            body = to_write(index, point.id, point.payload, dense, labels)
            bodies.append(_with_vectors(body, point.vector))
        except WriteRefused as refused:
            problems += refused.problems
    if problems:
        raise WriteRefused(problems)
    return bodies


def _placed(problem: dict[str, Any], plans: Sequence[_Planned]) -> dict[str, Any]:
    index = problem.get("index")
    if isinstance(index, int) and 0 <= index < len(plans):
        return {**problem, "index": plans[index].index}
    return problem


def _refuse_twice(points: Sequence[tuple[int, UUID, MemoryWrite, Stored | None]]) -> None:
    seen: set[UUID] = set()
    problems = []
    for index, point, _, _ in points:
        if point in seen:
            reasons = ["duplicate_id_in_batch"]
            problems.append({"index": index, "id": str(point), "reasons": reasons})
        seen.add(point)
    if problems:
        raise WriteRefused(problems)


def _current(versions: list[Stored], now: datetime) -> list[Stored]:
    """A line's current version: the open one (the newest, should a re-issue have been
    cut short), else the latest."""
    open_ = [r for r in versions if not r.superseded_by and not r.ended_by(now)]
    pool = open_ or versions
    latest = max(pool, key=_age, default=None)
    return [latest] if latest is not None else []


def _age(record: Stored) -> tuple[datetime, str, str]:
    return record.valid_at, str(record.payload.get("recorded_at", "")), record.id


def _chosen_of(record: Payload, writer: str) -> UUID | None:
    provenance = record.get("provenance") or {}
    chosen = provenance.get("chosen_id")
    if chosen and provenance.get("writer") == writer:
        return UUID(str(chosen))
    return None


def _voice(record: Payload) -> Any:
    return record.get("observer_id") or (record.get("source") or {}).get("speaker")


def _changed_holder(current: Payload, body: MemoryWrite) -> str | None:
    new = body.model_dump(mode="json", exclude_none=True)
    if _voice(current) != _voice(new) or current.get("observed_id") != new.get("observed_id"):
        return "new_version_changes_holder"
    return None


def _line(record: Payload) -> tuple[Any, ...]:
    return (
        frozenset(record.get("audience") or ()),
        record.get("access_scope"),
        (record.get("proposition") or {}).get("key"),
    )


def _same_line(current: Payload, body: MemoryWrite) -> bool:
    return _line(current) == _line(body.model_dump(mode="json", exclude_none=True))


# What makes a version different from another: all a writer says of it.
_COMPARED = (
    "content",
    "proposition",
    "observer_id",
    "observed_id",
    "observed_attitude",
    "source_id",
    "source",
    "modality",
    "evidence",
    "confidence",
    "audience",
    "access_scope",
    "document",
)


def _unchanged(current: Payload, body: MemoryWrite) -> bool:
    """The new version says nothing the current one does not (its vector aside): a
    library writing a document again unchanged makes no new version."""
    new = MemoryRecord.model_validate(body.model_dump(exclude={"vector", "id"})).payload()
    if any(current.get(k) != new.get(k) for k in _COMPARED):
        return False
    derived = (current.get("provenance") or {}).get("derived_from", [])
    return bool(derived == (new.get("provenance") or {}).get("derived_from", []))
