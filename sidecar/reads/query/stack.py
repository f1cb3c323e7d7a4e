"""The leaf-search interface over a stack's own collection (docs/design.md, "Stack
collections").

A stack collection holds whose records like the whose collection (reads/query/whose.py:
the same store interface, gate, over-fetch and wording), with two differences a RAG
stack relies on:

- its vectors are the stack's, as it sent them (its names, sizes, distances: the
  collection's `VectorLayout`, store/layout.py), so its schema is the layout's;
- a point's id is the id the stack chose (`provenance.chosen_id`: a UUID, or an
  unsigned integer kept as the UUID of that number), whoever reads it: LangChain, LlamaIndex
  and Haystack find, update and delete their documents by the ids they wrote. An id
  names the current versions written under it that the asker may see; when several
  writers used one id, the most recently recorded of those wins a read by id.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from qdrant_client.http import models as qm

from sidecar.policy.contract import Decision
from sidecar.reads.gate import Disclosure
from sidecar.reads.query.collection import Hit, PointId, Schema, Where
from sidecar.reads.query.whose import Decided, WhoseCollection, _hit
from sidecar.record import Stored, uuid_text
from sidecar.store import Found
from sidecar.store.scope import Scope

CHOSEN_ID = "provenance.chosen_id"
# Lines one read by id may meet per id asked (several writers may use one id).
_LINES_PER_ID = 16
# Integer ids are kept as the UUID of the number; a UUID a library generates never
# has its top 64 bits all zero (its version bits are set), so the two never meet.
_INTEGER_IDS = 2**64


def chosen_key(point: PointId) -> str:
    """How an id a stack chose is stored: a UUID's canonical string (an integer's UUID)."""
    if isinstance(point, int):
        return str(uuid.UUID(int=point))
    return uuid_text(point)


def shown_id(record: Stored) -> PointId:
    """The id a record answers under: the one its writer chose, as the writer sent it."""
    chosen = (record.payload.get("provenance") or {}).get("chosen_id")
    if chosen is None:
        return record.id
    value = uuid.UUID(str(chosen))
    return value.int if value.int < _INTEGER_IDS else str(value)


def _named(points: frozenset[PointId]) -> qm.FieldCondition:
    keys = sorted({chosen_key(p) for p in points})
    return qm.FieldCondition(key=CHOSEN_ID, match=qm.MatchAny(any=keys))


@dataclass
class StackView(WhoseCollection):
    layout_schema: Schema | None = None

    @property
    def schema(self) -> Schema:
        assert self.layout_schema is not None
        return self.layout_schema

    async def _scope(self, where: Where) -> Scope | None:
        if self._pushed is None:
            self._pushed = await self.disclosure.pushdown()
        must: list[qm.Condition] = [*where.filters, *where.conditions]
        must_not: list[qm.Condition] = []
        if where.only is not None:
            if not where.only:
                return None
            must.append(_named(where.only))
        if where.exclude:
            must_not.append(_named(where.exclude))
        caller = qm.Filter(must=must or None, must_not=must_not or None)
        scope = Scope(tenant=self.tenant, current_at=self.now, caller=caller)
        return self._pushed.narrow(scope)

    def _excluded(self, where: Where) -> list[str]:
        return []  # by chosen id, in the scope's filter

    def _hit(self, found: Found, decision: Decision) -> Hit[Decided]:
        return replace(_hit(found, decision), id=shown_id(found.record))

    async def retrieve(
        self, ids: Sequence[PointId], *, vectors: frozenset[str]
    ) -> list[Hit[Decided]]:
        """Points by id within a query (an id as an example): decided as reads by id."""
        question = replace(self.disclosure.question, purpose="get", as_of=None)
        async with self.disclosure.follow_up(question, f"{self.disclosure.route}.ids") as by_id:
            return await self._chosen(ids, vectors, by_id)

    async def by_ids(
        self, ids: Sequence[PointId], *, vectors: frozenset[str]
    ) -> list[Hit[Decided]]:
        """Points by id, as the request's own question (a retrieve: purpose `get`)."""
        return await self._chosen(ids, vectors, self.disclosure)

    async def _chosen(
        self, ids: Sequence[PointId], vectors: frozenset[str], disclosure: Disclosure
    ) -> list[Hit[Decided]]:
        asked = frozenset(ids)
        store = self.reader.store
        records: list[Stored] = []
        if asked:
            named = qm.Filter(must=[_named(asked)])
            scope = Scope(tenant=self.tenant, current_at=self.now, caller=named)
            page = await store.find(scope, _LINES_PER_ID * len(asked))
            records = page.records
        # Asked even when nothing was found: a missing point and a forbidden one take
        # the same path (and fail the same way when the policy is down).
        decisions = await disclosure.decide(records)
        best: dict[PointId, Stored] = {}
        for record in records:
            if not decisions[record.id].allow:
                continue
            key = shown_id(record)
            held = best.get(key)
            if held is None or _recorded(record) > _recorded(held):
                best[key] = record
        chosen = [best[p] for p in _in_order(ids) if p in best]
        found = {f.record.id: f for f in await store.fetch(self.tenant, _ids(chosen), vectors)}
        return [self._hit(found[r.id], decisions[r.id]) for r in chosen if r.id in found]


def _in_order(ids: Sequence[PointId]) -> list[PointId]:
    shown = [uuid.UUID(chosen_key(p)) for p in ids]
    return list(dict.fromkeys(u.int if u.int < _INTEGER_IDS else str(u) for u in shown))


def _recorded(record: Stored) -> tuple[str, str]:
    return (str(record.payload.get("recorded_at") or ""), record.id)


def _ids(records: list[Stored]) -> list[uuid.UUID]:
    return [uuid.UUID(r.id) for r in records]
