"""Reads of minds: one chain of minds (recall's `observed`), and every mind of one
proposition to a depth (`minds`), through the one disclosure decision.

A view of a mind is either stored (a record with that observer and observed chain)
or derived from a record that implies it (answers/derived.py: a witness's
perception, a statement to hearers). Both are found within the question's scope and
the policy's pushdown, so every candidate is a record the asker and the audience
may see; derived views carry their base's audience, scope and times, and the
disclosure policy decides each of them like a stored record (one batch, one audit
entry). Then each line keeps its current version as this question may see it
(answers/current.py): computed from allowed views only, so a version the asker may
not see shapes nothing. Every store call is bounded by `Bounds.max_candidates`, and
the views one read derives by `max_views` (else the answer says `truncated`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sidecar.answers import current
from sidecar.answers.derived import (
    WITNESSED,
    heard_chain,
    heard_views,
    latest_per_line,
    latest_views,
    view,
)
from sidecar.answers.wording import disclosed_item
from sidecar.messages import Item
from sidecar.policy.contract import Decision, DisclosureQuestion
from sidecar.reads.gate import Disclosure
from sidecar.reads.reader import LINKS, ReadAnswer, Reader, Shown
from sidecar.record import Stored
from sidecar.store.scope import Absent, AnyOf, Condition, Match, NotAfter, Scope


@dataclass(frozen=True)
class Filters:
    """What a read keeps of the current views (recall's filters beyond the mind)."""

    attitude: str | None = None
    source_id: str | None = None
    modality: str | None = None
    min_confidence: float | None = None
    speech_act: bool | None = None
    observer: str | None = None

    def fits(self, item: Item) -> bool:
        return (
            (self.attitude is None or item.observed_attitude == self.attitude)
            and (self.source_id is None or item.source_id == self.source_id)
            and (self.modality is None or item.modality == self.modality)
            and (self.min_confidence is None or item.confidence >= self.min_confidence)
            and (self.speech_act is None or (item.act is not None) == self.speech_act)
            and (self.observer is None or item.observer_id == self.observer)
        )


def speech_conditions(speech_act: bool | None) -> tuple[Condition, ...]:
    """The store conditions for recall's `speech_act` filter."""
    if speech_act is None:
        return ()
    return (AnyOf("act", ("said", "heard")),) if speech_act else (Absent("act"),)


@dataclass(frozen=True)
class Derived:
    """The views derived for a `minds` answer, decided, and whether a bound cut them."""

    items: list[Item]
    truncated: bool


class Minds:
    def __init__(self, reader: Reader, max_views: int, max_depth: int) -> None:
        self.reader = reader
        self.max_views = max_views
        self.max_depth = max_depth

    async def chain(
        self,
        question: DisclosureQuestion,
        route: str,
        tenant: str,
        path: tuple[str, ...],
        *,
        key: str | None,
        filters: Filters,
        vector: list[float] | None,
        limit: int,
        history: bool,
        heard: bool = False,
    ) -> ReadAnswer:
        """The views of one chain of minds after the observer (`filters.observer`, or any
        holder), current as this question may see them (with `history`, every version,
        each marked), nearest to `vector` first (else by holder and time), at most
        `limit`. With `heard`, what the chain's last mind (none: the observer) heard
        anyone say, as the observer sees it: the speaker is not named."""
        at = question.at
        observer = filters.observer
        async with self.reader.gate.begin(question, route) as disclosure:
            pushed = await disclosure.pushdown()
            if heard:
                assert observer is not None  # memory.py refuses `heard` without one
                scope = _stored_heard(tenant, key, observer, path, at)
                stored, cut = await self._find(pushed.narrow(scope))
                stored = [r for r in stored if heard_chain(r.payload) == path]
                base_scopes = [_said(tenant, key, (observer, *path), at)]
            else:
                scope = _stored(tenant, key, observer, path, at)
                stored, cut = await self._find(pushed.narrow(scope))
                stored = [r for r in stored if r.path == path]
                base_scopes = _bases(tenant, key, observer, path, at)
            bases: list[Stored] = []
            for scope in base_scopes:
                found, more = await self._find(pushed.narrow(scope))
                bases += found
                cut = cut or more
            # Each line's view from its latest record (a history: from every record).
            if heard:
                assert observer is not None
                derived = [
                    v
                    for base in bases
                    if (v := heard_views(base, observer, path, self.max_depth)) is not None
                ]
            else:
                derived = _derived(bases, path, observer)
            if not history:
                derived = latest_per_line(derived)
            # Without an observer every hearer of every statement holds a view: bounded,
            # the latest first (a function of what the question may see).
            if len(derived) > self.max_views:
                derived = sorted(derived, key=lambda v: (-v.valid_at.timestamp(), v.id))
                derived, cut = derived[: self.max_views], True
            candidates = _distinct([*stored, *derived])
            decisions = await disclosure.decide(candidates)
            allowed = [(r, decisions[r.id]) for r in candidates if decisions[r.id].allow]
            shown = self._worded(disclosure, allowed, at)
            items = [item for _, _, item in shown]
            replaced = current.superseded(items, (), at)
            if history:
                marked = {i.id for i in current.marked(items, (), at) if i.status == "superseded"}
                shown = [
                    (r, d, i.model_copy(update={"status": "superseded"}) if i.id in marked else i)
                    for r, d, i in shown
                ]
            else:
                shown = [s for s in shown if s[2].id not in replaced]
            shown = [s for s in shown if filters.fits(s[2])]
            scores = await self._scores(tenant, vector, [r for r, _, _ in shown])
        ranked = sorted(shown, key=lambda s: _rank(s, scores, vector is not None))[:limit]
        visible = {r.id for r, _, _ in ranked}
        return ReadAnswer(
            shown=[
                Shown(_links_within(r, visible), d, _scored(_linked(i, visible), r, scores))
                for r, d, i in ranked
            ],
            decision_id=disclosure.decision_id,
            vocabulary=disclosure.wording(),
            truncated=cut and bool(ranked),
        )

    async def views(
        self, question: DisclosureQuestion, route: str, scope: Scope, depth: int
    ) -> tuple[ReadAnswer, Derived]:
        """Every disclosable current view of one proposition (`scope.about`), each
        holder's current one as this question may see it, and the views derived from
        what each holder witnessed or heard, to `depth` minds after the holder."""
        at = question.at
        key = scope.about
        async with self.reader.gate.begin(question, route) as disclosure:
            pushed = await disclosure.pushdown()
            page = await self.reader.store.find(
                pushed.narrow(scope), self.reader.bounds.max_candidates
            )
            bases: list[Stored] = []
            cut = False
            for base_scope in _bases(scope.tenant, key, None, (), at):
                found, more = await self._find(pushed.narrow(base_scope))
                bases += found
                cut = cut or more
            views, over_budget = latest_views(bases, depth, self.max_views)
            records = _distinct([*page.records, *views])
            decisions = await disclosure.decide(records)
            derived_ids = {v.id for v in views}
            allowed = [(r, decisions[r.id]) for r in records if decisions[r.id].allow]
            listed = [(r, d) for r, d in allowed if r.id not in derived_ids]
            worded = self._worded(disclosure, listed, at)
            perspectives = [item for _, _, item in worded]
            # One current view per mind: among what this question may be shown.
            replaced = current.superseded(perspectives, (), at)
            kept = [s for s in worded if s[2].id not in replaced]
            visible = {r.id for r, _, _ in kept}
            implied = [(r, d) for r, d in allowed if r.id in derived_ids]
            derived = [item for _, _, item in self._worded(disclosure, implied, at)]
        answer = ReadAnswer(
            shown=[Shown(_links_within(r, visible), d, _linked(i, visible)) for r, d, i in kept],
            decision_id=disclosure.decision_id,
            vocabulary=disclosure.wording(),
            truncated=page.next_offset is not None and bool(kept),
        )
        return answer, Derived(derived, (cut or over_budget) and bool(derived))

    # --- the parts -----------------------------------------------------------------

    async def _find(self, scope: Scope) -> tuple[list[Stored], bool]:
        """Records within scope, at most max_candidates; and whether more matched."""
        page = await self.reader.store.find(scope, self.reader.bounds.max_candidates)
        return page.records, page.next_offset is not None

    async def _scores(
        self, tenant: str, vector: list[float] | None, records: Sequence[Stored]
    ) -> dict[str, float]:
        """Each shown record's similarity to the query (a derived view: its base's)."""
        if vector is None or not records:
            return {}
        ids = sorted({_base_id(r) for r in records})
        scope = Scope(tenant=tenant, extra=(AnyOf("id", tuple(ids)),))
        found = await self.reader.store.search(vector, scope, len(ids))
        return {r.id: r.score or 0.0 for r in found}

    @staticmethod
    def _worded(
        disclosure: Disclosure, allowed: Iterable[tuple[Stored, Decision]], at: datetime
    ) -> list[tuple[Stored, Decision, Item]]:
        vocabulary = disclosure.wording()
        shown = []
        for record, decision in allowed:
            item = disclosed_item(record, decision, vocabulary, at)
            if record.id != _base_id(record):
                item = item.model_copy(update={"derived_from": _base_id(record)})
            shown.append((record, decision, item))
        return shown


def _stored(
    tenant: str, key: str | None, observer: str | None, path: tuple[str, ...], at: datetime
) -> Scope:
    """Stored views of this very chain of minds (the order is checked after: a filter
    can say which minds a chain holds, not in which order)."""
    extra: list[Condition] = [NotAfter("valid_at", at)]
    if len(path) == 1:
        extra.append(Absent("observed_path"))
    else:
        extra += [Match("observed_path", mind) for mind in sorted(set(path))]
    return Scope(tenant=tenant, about=key, observer=observer, observed=path[0], extra=tuple(extra))


def _stored_heard(
    tenant: str, key: str | None, observer: str, hearers: tuple[str, ...], at: datetime
) -> Scope:
    """Stored views of what the chain `hearers` heard anyone say, as the observer sees
    it (the exact chain is checked after, by heard_chain)."""
    extra: list[Condition] = [Match("act", "heard"), NotAfter("valid_at", at)]
    extra += [Match("observed_path", mind) for mind in sorted(set(hearers))]
    return Scope(
        tenant=tenant,
        about=key,
        observer=observer,
        observed=hearers[0] if hearers else None,
        extra=tuple(extra),
    )


def _said(tenant: str, key: str | None, present: Sequence[str], at: datetime) -> Scope:
    """Statements made where everyone in `present` was (speaker or hearer)."""
    return Scope(
        tenant=tenant,
        about=key,
        extra=(
            Match("act", "said"),
            NotAfter("valid_at", at),
            *(Match("source.participants", mind) for mind in sorted(set(present))),
        ),
    )


def _bases(
    tenant: str, key: str | None, observer: str | None, path: tuple[str, ...], at: datetime
) -> list[Scope]:
    """Where derived views of this chain can come from: the observer's perceptions
    of events where everyone in the chain was there, and statements made where the
    chain's first mind (and the observer) were."""
    there = sorted(set(path))
    witnessed = Scope(
        tenant=tenant,
        about=key,
        observer=observer,
        modality="observed",
        absent=("observed_id",),
        extra=(
            Match("provenance.method", WITNESSED),
            NotAfter("valid_at", at),
            *(Match("source.participants", mind) for mind in there),
        ),
    )
    # Of a statement, who must have been there: the chain's first mind (every chain the
    # statement implies starts among those present) and the observer. The minds its
    # claim is about need not have been (derived.view decides each base exactly).
    heard = sorted({*path[:1], *([observer] if observer else [])})
    said = Scope(
        tenant=tenant,
        about=key,
        extra=(
            Match("act", "said"),
            NotAfter("valid_at", at),
            *(Match("source.participants", mind) for mind in heard),
        ),
    )
    return [witnessed, said]


def _derived(bases: list[Stored], path: tuple[str, ...], observer: str | None) -> list[Stored]:
    """The views of `path` the bases imply: the holder's own perception, or each
    hearer (the observer, when named) of a statement."""
    found = []
    for base in bases:
        holders = (
            [observer]
            if observer
            else [str(p) for p in ((base.payload.get("source") or {}).get("participants") or ())]
            + [str(base.payload.get("observer_id"))]
        )
        for holder in dict.fromkeys(holders):
            for heard in (False, True):
                derived = view(base, holder, path, heard)
                if derived is not None:
                    found.append(derived)
    return found


def _distinct(records: Iterable[Stored]) -> list[Stored]:
    seen: dict[str, Stored] = {}
    for record in records:
        seen.setdefault(record.id, record)
    return list(seen.values())


def _base_id(record: Stored) -> str:
    derived_from = (record.payload.get("provenance") or {}).get("derived_from") or []
    if (record.payload.get("provenance") or {}).get("method") == "derived" and derived_from:
        return str(derived_from[0])
    return record.id


def _rank(
    shown: tuple[Stored, Decision, Item], scores: dict[str, float], by_score: bool
) -> tuple[float, str, float, str]:
    record, _, item = shown
    score = -scores.get(_base_id(record), 0.0) if by_score else 0.0
    started = item.valid_at.timestamp() if item.valid_at else float("-inf")
    return (score, item.observer_id or "", -started, record.id)


def _scored(item: Item, record: Stored, scores: dict[str, float]) -> Item:
    score = scores.get(_base_id(record))
    return item if score is None else item.model_copy(update={"score": score})


def _links_within(record: Stored, visible: set[str]) -> Stored:
    hidden = [link for link in LINKS if (t := record.payload.get(link)) and str(t) not in visible]
    return record.without(hidden) if hidden else record


def _linked(item: Item, visible: set[str]) -> Item:
    update = {
        link: None
        for link in LINKS
        if (t := getattr(item, link)) is not None and str(t) not in visible
    }
    return item.model_copy(update=update) if update else item
