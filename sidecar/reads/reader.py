"""The one disclosed-read path: every route that returns records reads through here.

A read opens a `Disclosure` (reads/gate.py) for its question, finds candidates in
the store within the question's scope (the tenant, the caller's filters, and the
store filter the policy pushes down), has each batch decided (one OPA call, or
the decision cache), keeps version links only to versions the answer may show,
and words every allowed record (answers/wording.py). Routes (http/api.py,
http/qdrant/routes.py) only translate their dialect in and out.

Relevance is not permission: the store finds what is similar within the scope;
the policy decides, per round, what may be disclosed to the asker and the whole
audience; a search widens while too few were allowed and more candidates exist,
within fixed bounds (`Bounds`).

Version links (`supersedes`, `superseded_by`) name other records. A link is shown
only when the version it names may be shown too, under the same question: a
search keeps links to versions among its own results (free), a read by id asks
the policy about the versions its links name (one batch, purpose `get`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Generic, TypeVar
from uuid import UUID

from sidecar import metrics
from sidecar.answers.wording import Vocabulary, disclosed_item
from sidecar.messages import Item
from sidecar.policy.contract import Decision, DisclosureQuestion
from sidecar.reads.allow_rate import first_batch
from sidecar.reads.gate import Disclosure, Gate
from sidecar.record import Stored
from sidecar.store import Store
from sidecar.store.schema import point_id
from sidecar.store.scope import AnyOf, Scope

F = TypeVar("F")

LINKS = ("supersedes", "superseded_by")
# The longest supersession chain a history or an as-of read follows.
MAX_HISTORY = 100
# Records a count examines per store call and per policy call: each call stays short,
# so another tenant's requests are answered between them (docs/security.md).
SCAN_PAGE = 250


@dataclass(frozen=True)
class Bounds:
    """What one read may examine: the over-fetch factor of the first round (until the
    asker's allow rate is known), the rounds, and the candidates in all; and how many
    matching records a count examines."""

    overfetch_factor: int
    max_rounds: int
    max_candidates: int
    max_count_scan: int = 10_000


@dataclass
class Candidates:
    """What a search's over-fetch found: the allowed records, best first; how many
    rounds it took; whether a bound stopped it before it had what it wanted."""

    allowed: list[tuple[Stored, Decision]]
    rounds: int
    truncated: bool


@dataclass
class Rounds(Generic[F]):
    """What an over-fetch loop (`Reader.rounds`) found: the allowed candidates, best
    first (ties in record-id order); the rounds; whether a bound stopped it; how many
    candidates it examined (decided)."""

    allowed: list[tuple[F, Decision]]
    rounds: int
    truncated: bool
    examined: int


@dataclass(frozen=True)
class Shown:
    """One record the answer discloses: as stored (links trimmed), as decided, as worded."""

    record: Stored
    decision: Decision
    item: Item


@dataclass
class ReadAnswer:
    shown: list[Shown]
    decision_id: uuid.UUID
    vocabulary: Vocabulary
    # The bounds stopped the read before it had all it asked for.
    truncated: bool = False
    # Scroll: where the next page starts (a point id), or None.
    next_offset: str | None = None
    # Further disclosable current views of the shown propositions (for conflicts).
    others: list[Item] = field(default_factory=list)

    @property
    def items(self) -> list[Item]:
        return [s.item for s in self.shown]


class Reader:
    def __init__(self, store: Store, gate: Gate, bounds: Bounds) -> None:
        self.store = store
        self.gate = gate
        self.bounds = bounds

    # --- searches: current versions by similarity or filter -------------------------

    async def nearest(
        self,
        question: DisclosureQuestion,
        route: str,
        vector: list[float] | None,
        scope: Scope,
        limit: int,
        *,
        text: str | None = None,
        offset: int = 0,
        score_threshold: float | None = None,
        with_vector: bool = False,
        adaptive: bool = True,
        with_other_views: bool = False,
    ) -> ReadAnswer:
        """The `limit` nearest disclosable records (after `offset` of them): by the
        dense `vector`, the lexical match of `text`, or both fused (Store.search).

        `adaptive=False` sizes the first round by the configured factor alone, so the
        same question always examines the same candidates (offset paging relies on
        it). `with_other_views`: also every disclosable current view of the shown
        propositions (see answers/verdict.py)."""
        async with self.gate.begin(question, route) as disclosure:
            narrowed = (await disclosure.pushdown()).narrow(scope)
            found = await self.overfetch(
                disclosure,
                vector,
                narrowed,
                limit + offset,
                text=text,
                score_threshold=score_threshold,
                with_vector=with_vector,
                adaptive=adaptive,
            )
            # Equal scores in id order (docs/security.md, "ordering"): the engine's
            # order among ties may change between calls, and pages by offset with it.
            allowed = sorted(found.allowed, key=_rank)
            page = allowed[offset : offset + limit]
            others: list[Item] = []
            if with_other_views:
                others = await self._other_views(disclosure, scope, page)
        shown = _links_within(page, [r for r, _ in allowed])
        return self._answer(disclosure, shown, question.at, found.truncated, others=others)

    async def listing(
        self, question: DisclosureQuestion, route: str, scope: Scope, limit: int
    ) -> ReadAnswer:
        """Disclosable records by filter alone, in store order, up to `limit` examined."""
        async with self.gate.begin(question, route) as disclosure:
            narrowed = (await disclosure.pushdown()).narrow(scope)
            page = await self.store.find(narrowed, limit)
            decisions = await disclosure.decide(page.records)
        allowed = [(r, decisions[r.id]) for r in page.records if decisions[r.id].allow]
        shown = _links_within(allowed, [r for r, _ in allowed])
        truncated = page.next_offset is not None and bool(shown)
        return self._answer(disclosure, shown, question.at, truncated)

    async def scroll(
        self,
        question: DisclosureQuestion,
        route: str,
        scope: Scope,
        limit: int,
        cursor: str | None,
        with_vector: bool = False,
    ) -> ReadAnswer:
        """A page of disclosable records in point-id order, and where the next starts.

        The next offset is given only when one more disclosable record exists, or
        when the examination bound stopped the page after showing some: then it is
        the point just after the last one shown, never a record the asker may not
        see (nor one that tells how many of those there are)."""
        tenant = question.asker.tenant
        returned: list[tuple[Stored, Decision]] = []
        next_offset: str | None = None
        examined = 0
        async with self.gate.begin(question, route) as disclosure:
            narrowed = (await disclosure.pushdown()).narrow(scope)
            while True:
                batch = min(max(2 * limit, 64), self.bounds.max_candidates - examined)
                page = await self.store.find(
                    narrowed, batch, offset=cursor, with_vector=with_vector
                )
                decisions = await disclosure.decide(page.records)
                examined += len(page.records)
                for record in page.records:
                    decision = decisions[record.id]
                    if not decision.allow:
                        continue
                    if len(returned) == limit:
                        next_offset = point_id(tenant, record.id)
                        break
                    returned.append((record, decision))
                cursor = page.next_offset
                if next_offset is not None or cursor is None:
                    break
                if examined >= self.bounds.max_candidates:
                    next_offset = _just_after(tenant, returned[-1][0]) if returned else None
                    break
        shown = _links_within(returned, [r for r, _ in returned])
        return self._answer(disclosure, shown, question.at, next_offset=next_offset)

    async def count(self, question: DisclosureQuestion, route: str, scope: Scope) -> int:
        """How many disclosable records match, among the first `max_count_scan` that
        match in store order: exact below that bound."""
        count, examined, cursor = 0, 0, None
        async with self.gate.begin(question, route) as disclosure:
            narrowed = (await disclosure.pushdown()).narrow(scope)
            while examined < self.bounds.max_count_scan:
                batch = min(SCAN_PAGE, self.bounds.max_count_scan - examined)
                page = await self.store.find(narrowed, batch, offset=cursor)
                decisions = await disclosure.decide(page.records)
                count += sum(decisions[r.id].allow for r in page.records)
                examined += len(page.records)
                if (cursor := page.next_offset) is None:
                    break
        return count

    # --- reads by id: any version ------------------------------------------------------

    async def by_ids(
        self,
        question: DisclosureQuestion,
        route: str,
        ids: list[UUID],
        with_vector: bool = False,
    ) -> ReadAnswer:
        """The records asked for that may be disclosed, in the order asked; the rest
        are absent exactly as if they did not exist."""
        found = await self.store.get(question.asker.tenant, ids, with_vector=with_vector)
        async with self.gate.begin(question, route) as disclosure:
            # Asked even when nothing was found, so a missing record and a forbidden one
            # take the same path (and fail the same way when OPA is down).
            decisions = await disclosure.decide(found)
        by_id = {r.id: r for r in found if decisions[r.id].allow}
        allowed = [(by_id[str(i)], decisions[str(i)]) for i in ids if str(i) in by_id]
        shown = await self._decided_links(disclosure, allowed)
        return self._answer(disclosure, shown, question.at)

    async def version_at(
        self, question: DisclosureQuestion, route: str, record_id: UUID, as_of: datetime
    ) -> ReadAnswer:
        """The version of a record's chain that applied at `as_of`, provided the record
        asked for may itself be seen (else a forbidden id would answer differently
        from a missing one)."""
        asked = replace(question, purpose="get", as_of=None)
        found = await self.store.get(question.asker.tenant, [record_id])
        async with self.gate.begin(asked, route) as disclosure:
            decisions = await disclosure.decide(found)
        if not (found and decisions[found[0].id].allow):
            return self._answer(disclosure, [], as_of)
        chain = await self._chain(question.asker.tenant, record_id)
        then = [r for r in chain if r.applied_at(as_of)][:1]
        at = replace(question, purpose="recall", as_of=as_of)
        async with self.gate.begin(at, route) as disclosure:
            decisions = await disclosure.decide(then)
        allowed = [(r, decisions[r.id]) for r in then if decisions[r.id].allow]
        shown = await self._decided_links(disclosure, allowed)
        return self._answer(disclosure, shown, as_of)

    async def history(
        self, question: DisclosureQuestion, route: str, record_id: UUID
    ) -> ReadAnswer | None:
        """The supersession chain through a record, oldest first, each version decided
        on its own; None when the record asked for may not be seen (or is missing)."""
        chain = await self._chain(question.asker.tenant, record_id)
        async with self.gate.begin(question, route) as disclosure:
            decisions = await disclosure.decide(chain)
        start = decisions.get(str(record_id))
        if start is None or not start.allow:
            return None
        allowed = [(r, decisions[r.id]) for r in chain if decisions[r.id].allow]
        shown = await self._decided_links(disclosure, allowed)
        return self._answer(disclosure, shown, question.at)

    # --- the parts -----------------------------------------------------------------------

    async def overfetch(
        self,
        disclosure: Disclosure,
        vector: list[float] | None,
        scope: Scope,
        wanted: int,
        *,
        text: str | None = None,
        score_threshold: float | None = None,
        with_vector: bool = False,
        adaptive: bool = True,
    ) -> Candidates:
        """Rounds of store search and policy decisions until `wanted` are allowed, the
        candidates run out, or the bounds stop it (then: truncated)."""

        if vector is not None and text is not None:
            return _counted(
                await self._fused(
                    disclosure, vector, text, scope, wanted, score_threshold, with_vector, adaptive
                )
            )

        async def fetch(batch: int, seen: frozenset[str]) -> list[Stored]:
            return await self.store.search(
                vector,
                scope,
                batch,
                exclude=seen,
                text=text,
                score_threshold=score_threshold,
                with_vector=with_vector,
            )

        found = await self.rounds(disclosure, fetch, _itself, wanted, adaptive=adaptive)
        return _counted(Candidates(found.allowed, found.rounds, found.truncated))

    async def _fused(
        self,
        disclosure: Disclosure,
        vector: list[float],
        text: str,
        scope: Scope,
        wanted: int,
        score_threshold: float | None,
        with_vector: bool,
        adaptive: bool,
    ) -> Candidates:
        """Hybrid: the `wanted` best disclosable records by the dense ranking and by the
        lexical one, each found by its own over-fetch, then fused (store/hybrid.py) over
        those alone. A record the asker may not see is in neither ranking, so it cannot
        push a disclosable one out of a branch; and each branch's best `wanted` do not
        depend on the size of any round. Fusing one store query whose branches the
        policy's filter did not narrow to what the asker may see (pushdown off, or a
        denial outside `visible_to`) let hidden records fill the branches (issue 35)."""

        def branch(
            dense: list[float] | None, lexical: str | None
        ) -> Callable[[int, frozenset[str]], Awaitable[list[Stored]]]:
            async def fetch(batch: int, seen: frozenset[str]) -> list[Stored]:
                return await self.store.search(dense, scope, batch, exclude=seen, text=lexical)

            return fetch

        union: dict[str, Decision] = {}
        rounds, truncated = 0, False
        for fetch in (branch(vector, None), branch(None, text)):
            found = await self.rounds(disclosure, fetch, _itself, wanted, adaptive=adaptive)
            rounds, truncated = rounds + found.rounds, truncated or found.truncated
            union.update((r.id, d) for r, d in found.allowed[:wanted])
        if not union:
            return Candidates([], rounds, truncated)
        only = replace(scope, only=tuple(sorted(union)))
        fused = await self.store.search(
            vector,
            only,
            len(union),
            text=text,
            score_threshold=score_threshold,
            with_vector=with_vector,
        )
        return Candidates([(r, union[r.id]) for r in fused], rounds + 1, truncated)

    async def rounds(
        self,
        disclosure: Disclosure,
        fetch: Callable[[int, frozenset[str]], Awaitable[list[F]]],
        record_of: Callable[[F], Stored],
        wanted: int,
        *,
        adaptive: bool = True,
        cap: int | None = None,
        smaller_better: bool = False,
        whole_ties: bool = False,
        bounded_rounds: bool = True,
    ) -> Rounds[F]:
        """The over-fetch loop of every search (this reader's, and the query engine's
        leaves, reads/query/): `fetch(batch, seen)` asks the store for the next `batch`
        best candidates leaving out the record ids `seen`, best first; each round is
        decided in one batch; it widens (doubling) until `wanted` are allowed and no
        tie straddles the cut, the candidates run out, or `max_rounds` or the
        candidates cap (`cap`, at most `max_candidates`) stops it (then: truncated).

        Ties are ranked in record-id order, so the allowed records it returns, best
        first, are the `wanted` best of all the store would find within its scope,
        whatever the size of each round; `smaller_better` for a distance (Euclid,
        Manhattan), where the best scores are the smallest.

        `whole_ties`: when a bound stops it, the allowed records that score as the last
        candidate fetched are left out, since the store chose which of the points of
        that score to return (its internal order, which points the asker may not see
        can shift, and which the bound cut): what is kept is every allowed record of
        a better score, all of which were fetched. `bounded_rounds` False: only the
        candidates cap stops it, not `max_rounds` (the rounds double, so there are at
        most about log2(cap / first round) of them), so a tie as large as the cap is
        still resolved by id."""
        bounds = self.bounds
        limit = bounds.max_candidates if cap is None else min(cap, bounds.max_candidates)
        rate = await disclosure.allow_rate() if adaptive else None
        batch = first_batch(wanted, rate, bounds.overfetch_factor, max(limit, 1))
        rank = _rank_ascending if smaller_better else _rank
        rounds = 0
        seen: set[str] = set()
        allowed: list[tuple[F, Decision]] = []
        while True:
            if limit <= 0:
                return Rounds(allowed, rounds, truncated=True, examined=len(seen))
            found = await fetch(batch, frozenset(seen))
            rounds += 1
            exhausted = len(found) < batch
            records = [record_of(f) for f in found]
            seen.update(r.id for r in records)
            # Asked even for an empty batch: with the policy down, "nothing found"
            # and "nothing allowed" must look the same.
            decisions = await disclosure.decide(records)
            round_allowed = [(f, decisions[record_of(f).id]) for f in found]
            round_allowed = [(f, d) for f, d in round_allowed if d.allow]
            disclosure.overfetched(len(found), len(round_allowed))
            allowed += round_allowed
            ranked = sorted(allowed, key=lambda a: rank(record_of(a[0])))
            if exhausted or (
                len(ranked) >= wanted and not _tie_at_cut(ranked, wanted, records, record_of)
            ):
                return Rounds(ranked, rounds, truncated=False, examined=len(seen))
            if (bounded_rounds and rounds >= bounds.max_rounds) or len(seen) >= limit:
                if whole_ties and records:
                    boundary = records[-1].score
                    ranked = [a for a in ranked if record_of(a[0]).score != boundary]
                return Rounds(ranked, rounds, truncated=True, examined=len(seen))
            batch = min(batch * 2, limit - len(seen))

    async def shown(
        self, disclosure: Disclosure, allowed: list[tuple[Stored, Decision]]
    ) -> list[Shown]:
        """Allowed records as an answer shows them (the query engine's, reads/query/):
        links kept only to versions shown or that the asker may get, each worded."""
        kept = await self._decided_links(disclosure, allowed)
        return self._answer(disclosure, kept, disclosure.question.at).shown

    async def _other_views(
        self, disclosure: Disclosure, scope: Scope, page: list[tuple[Stored, Decision]]
    ) -> list[Item]:
        """Every other disclosable view, current at the instant asked about, of the
        propositions the page shows a value for (whatever the search's other filters)."""
        keys = sorted({k for r, _ in page if (k := r.key) and _has_value(r)})
        if not keys:
            return []
        at = disclosure.question.at
        views = Scope(
            tenant=scope.tenant, current_at=at, extra=(AnyOf("proposition.key", tuple(keys)),)
        )
        narrowed = (await disclosure.pushdown()).narrow(views)
        found = await self.store.find(narrowed, self.bounds.max_candidates)
        shown = {r.id for r, _ in page}
        rest = [r for r in found.records if r.id not in shown]
        decisions = await disclosure.decide(rest)
        vocabulary = disclosure.wording()
        return [
            disclosed_item(r, decisions[r.id], vocabulary, at)
            for r in rest
            if decisions[r.id].allow
        ]

    async def _chain(self, tenant: str, record_id: UUID) -> list[Stored]:
        """Follow supersedes back and superseded_by forward, bounded by MAX_HISTORY."""
        found = await self.store.get(tenant, [record_id])
        if not found:
            return []
        chain = list(found)
        seen = {found[0].id}
        for link, at_front in (("supersedes", True), ("superseded_by", False)):
            cursor = found[0]
            while (
                (next_id := getattr(cursor, link))
                and next_id not in seen
                and len(chain) < MAX_HISTORY
            ):
                linked = await self.store.get(tenant, [UUID(next_id)])
                if not linked:
                    break
                cursor = linked[0]
                seen.add(next_id)
                chain.insert(0, cursor) if at_front else chain.append(cursor)
        return chain

    async def _decided_links(
        self, disclosure: Disclosure, allowed: list[tuple[Stored, Decision]]
    ) -> list[tuple[Stored, Decision]]:
        """`allowed`, keeping links to versions shown here or that this question's asker
        and audience may get; the others are decided in one batch."""
        visible = {r.id for r, _ in allowed}
        named = {link for r, _ in allowed for link in (r.supersedes, r.superseded_by) if link}
        unknown = sorted(named - visible)
        if unknown:
            found = await self.store.get(
                disclosure.question.asker.tenant, [UUID(i) for i in unknown]
            )
            ask = replace(disclosure.question, purpose="get", as_of=None)
            async with disclosure.follow_up(ask, "links") as follow_up:
                decisions = await follow_up.decide(found)
            visible |= {record_id for record_id, d in decisions.items() if d.allow}
        return _links_within(allowed, visible)

    def _answer(
        self,
        disclosure: Disclosure,
        shown: list[tuple[Stored, Decision]],
        at: datetime,
        truncated: bool = False,
        next_offset: str | None = None,
        others: list[Item] | None = None,
    ) -> ReadAnswer:
        vocabulary = disclosure.wording()
        return ReadAnswer(
            shown=[Shown(r, d, disclosed_item(r, d, vocabulary, at)) for r, d in shown],
            decision_id=disclosure.decision_id,
            vocabulary=vocabulary,
            truncated=truncated,
            next_offset=next_offset,
            others=others or [],
        )


def _links_within(
    page: list[tuple[Stored, Decision]], disclosed: Iterable[Stored | str]
) -> list[tuple[Stored, Decision]]:
    """The page, keeping only links to versions among `disclosed`."""
    visible = {d if isinstance(d, str) else d.id for d in disclosed}
    kept = []
    for record, decision in page:
        payload = record.payload
        # A link is its target's id (Stored.supersedes, .superseded_by): a page seldom
        # hides one, and then the record is kept as it is.
        hidden = [
            link for link in LINKS if (target := payload.get(link)) and str(target) not in visible
        ]
        kept.append((record.without(hidden) if hidden else record, decision))
    return kept


def _tie_at_cut(
    ranked: list[tuple[F, Decision]],
    wanted: int,
    found: list[Stored],
    record_of: Callable[[F], Stored],
) -> bool:
    """Whether points the store has not returned yet may score as the `wanted`-th
    allowed record: the engine chooses which of equally scored points fill a fetch,
    and ties are shown in id order (docs/security.md, "ordering"), so a cut inside a
    tie would let each page see a different part of it. `ranked`: best first."""
    if wanted <= 0 or not found:
        return False
    cut = record_of(ranked[wanted - 1][0]).score
    return found[-1].score == cut


def _rank(allowed: tuple[Stored, Decision] | Stored) -> tuple[float, str]:
    record = allowed if isinstance(allowed, Stored) else allowed[0]
    return (-(record.score or 0.0), record.id)


def _rank_ascending(record: Stored) -> tuple[float, str]:
    return ((record.score or 0.0), record.id)


def _itself(record: Stored) -> Stored:
    return record


def _has_value(record: Stored) -> bool:
    return (record.payload.get("proposition") or {}).get("value") is not None


def _just_after(tenant: str, record: Stored) -> str:
    """The smallest point id after this record's: where a scroll goes on from it."""
    return str(uuid.UUID(int=(uuid.UUID(point_id(tenant, record.id)).int + 1) % 2**128))


def _counted(found: Candidates) -> Candidates:
    metrics.OVERFETCH_ROUNDS.observe(found.rounds)
    if found.truncated:
        metrics.TRUNCATED.inc()
    return found
