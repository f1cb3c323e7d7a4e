"""The disclosure gate: the one way a read gets a decision.

Per request, the read path (reads/reader.py) opens a `Disclosure`
(`async with gate.begin(question, route)`).
It gives the store filter the policy implies (`pushdown`, compiled and kept by
policy/pushdown.py) and the decision for each batch of candidates (`decide`): from the
decision cache (policy/cache.py) what it can, from one OPA call the rest. On leaving
it hands the audit log one entry (audit/model.py `read_entry`) with every record
allowed and withheld, and why, and updates the asker's allow rate
(reads/allow_rate.py) from the search candidates it decided, off the request path.

No stale allow: a cached decision is used only under the policy revision OPA
reported during this same request. The first batch is looked up under the last
revision seen and then confirmed by this request's OPA call (made even when
every record was a hit); if OPA answers under another revision, the hits are
thrown away and decided again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from sidecar import metrics
from sidecar.answers.wording import MalformedVocabulary, Vocabulary
from sidecar.audit import AuditEntry, read_entry
from sidecar.audit.writer import AuditLog
from sidecar.policy.cache import CacheUnavailable, DecisionCache, Keys
from sidecar.policy.contract import BatchDecisions, Decision, DisclosureQuestion, policy_view
from sidecar.policy.opa import PolicyClient, PolicyUnavailable
from sidecar.policy.pushdown import Compiler, Pushdown
from sidecar.policy.shape import ShapeSpec, shape_of
from sidecar.policy.shape_guard import check as check_shape
from sidecar.reads.allow_rate import AllowRates, LocalAllowRates, rate_key
from sidecar.record import Stored
from sidecar.store import StoreUnavailable

log = logging.getLogger("whose.disclosure")


@dataclass
class Ruling:
    """A decision as this request holds it: which OPA decision made it, and whether
    it came from the cache."""

    decision: Decision
    opa_decision_id: str | None
    cached: bool


class Gate:
    def __init__(
        self,
        policy: PolicyClient,
        cache: DecisionCache,
        audit: AuditLog,
        bucket_s: float,
        rates: AllowRates | None = None,
        pushdown: bool = True,
        shapes: bool = False,
    ) -> None:
        self.policy = policy
        self.cache = cache
        self.audit = audit
        self.bucket_s = bucket_s
        self.rates = rates or LocalAllowRates()
        self.pushdowns = Compiler(policy, enabled=pushdown)
        self._background: set[asyncio.Task[None]] = set()
        # The revision OPA last answered under: the first guess of every request.
        self.last_revision: str | None = None
        # The policy's vocabulary under that revision (see answers/wording.py).
        self.vocabulary: Vocabulary | None = None
        self._worded_under: str | None = None
        # What the policy said it reads (policy/shape.py), and under which revision.
        self.shapes = shapes
        if shapes:
            log.warning(
                "decisions by shape: the policy's shape declaration is trusted as written "
                "(records it says differ only in what no rule reads share one decision)"
            )
        self._shape: tuple[str, ShapeSpec | None] | None = None

    def begin(self, question: DisclosureQuestion, route: str) -> Disclosure:
        return Disclosure(self, question, route)

    def vocabulary_of(self, batch: BatchDecisions) -> Vocabulary:
        """The vocabulary an answer came with, parsed once per revision."""
        known = self.vocabulary
        if known is None or batch.revision is None or batch.revision != self._worded_under:
            try:
                known = Vocabulary.parse(batch.vocabulary)
            except MalformedVocabulary as exc:
                raise PolicyUnavailable(str(exc)) from exc
            self.vocabulary, self._worded_under = known, batch.revision
        return known

    def worded_under(self, revision: str) -> Vocabulary | None:
        """The vocabulary heard under `revision`, if it is the one kept."""
        return self.vocabulary if self._worded_under == revision else None

    def learn_shape(self, batch: BatchDecisions) -> None:
        """Keep the policy's shape declaration of the revision it answered under."""
        if batch.revision is None or not self.shapes:
            return
        if self._shape is None or self._shape[0] != batch.revision:
            self._shape = (batch.revision, self._checked_shape(batch.shape))

    def _checked_shape(self, declared: Any) -> ShapeSpec | None:
        """The policy's declaration, less what its own text reads (policy/shape_guard.py)."""
        spec = ShapeSpec.parse(declared)
        if spec is None:
            if declared is not None:
                log.warning("the policy's shape declaration is malformed: no shapes")
            return None
        sources = self.policy.policy_sources()
        if sources is None:
            # An OPA of its own: its policy's text is not here to hold the lists to.
            return None
        checked = check_shape(spec, sources)
        for field_, why in checked.kept.items():
            log.warning("policy shape: %s stays in the shape (%s)", field_, why)
        return checked.spec

    def shape_spec(self, revision: str | None) -> ShapeSpec | None:
        """The shape declaration of `revision`, if heard (None: decide records alone)."""
        known = self._shape
        return known[1] if known is not None and known[0] == revision else None

    def in_background(self, work: Coroutine[Any, Any, None]) -> None:
        """Bookkeeping that must not delay the response (kept referenced until done)."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def idle(self) -> None:
        """Wait for the bookkeeping in flight (tests, shutdown)."""
        await asyncio.gather(*self._background)


@dataclass
class Disclosure:
    gate: Gate
    question: DisclosureQuestion
    route: str
    decision_id: uuid.UUID = field(default_factory=uuid.uuid4)
    # The revision OPA reported in this request, once it has answered (`heard`).
    revision: str | None = None
    heard: bool = False
    rulings: dict[str, Ruling] = field(default_factory=dict)
    opa_decision_ids: list[str] = field(default_factory=list)
    pushed_down: Pushdown | None = None
    # How this request's decisions are worded: from OPA's answer in this request.
    vocabulary: Vocabulary | None = None
    _compiled_under: str | None = None
    _key_makers: dict[str, Keys] = field(default_factory=dict)
    _record_keys: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # Each record's policy view, made once: for its cache key and for OPA's input;
    # kept with the payload it was made from (see `_view`).
    _views: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    _pending: list[str] = field(default_factory=list)
    # Search candidates decided and allowed (`overfetched`): the allow rate learns from
    # these only. A read by id decides whatever ids the caller names, forbidden ones
    # included, so counting it would let records the caller may not see size the
    # caller's later searches (docs/security.md, "noninterference").
    _searched: int = 0
    _searched_allowed: int = 0

    async def __aenter__(self) -> Disclosure:
        return self

    def follow_up(self, question: DisclosureQuestion, route: str) -> Disclosure:
        """Another question within the same request (its own audit entry).

        It starts from the revision OPA reported to this one, so decisions cached
        under it serve without asking OPA again: still the same request.
        """
        return Disclosure(
            self.gate,
            question,
            route,
            revision=self.revision,
            heard=self.heard,
            vocabulary=self.vocabulary,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        error = _error_code(exc)
        if isinstance(exc, PolicyUnavailable) and exc.decision_id is None:
            exc.decision_id = self.decision_id
        self.gate.audit.record(self._entry(error))
        if exc is None and self._searched:
            self.gate.in_background(
                self.gate.rates.observe(self._rate_key, self._searched_allowed, self._searched)
            )
        if not log.isEnabledFor(logging.INFO):
            return
        allowed = sum(s.decision.allow for s in self.rulings.values())
        log.info(
            "disclosure",
            extra={
                "decision_id": str(self.decision_id),
                "route": self.route,
                "asker": self.question.asker.id,
                "tenant": self.question.asker.tenant,
                "allowed": allowed,
                "withheld": len(self.rulings) - allowed + len(self._pending),
                "cached": sum(s.cached for s in self.rulings.values()),
                "policy_revision": self.revision,
                "error": error,
            },
        )

    @property
    def _rate_key(self) -> str:
        # A search without the policy's filter (pushdown off, or a fallback) decides
        # records the asker may not see: its estimate is kept apart, so that it never
        # sizes a filtered search.
        filtered = self.pushed_down is not None and self.pushed_down.derived
        return rate_key(self.question, filtered)

    def overfetched(self, decided: int, allowed: int) -> None:
        """One over-fetch round's candidates: what the allow rate learns from."""
        self._searched += decided
        self._searched_allowed += allowed

    async def allow_rate(self) -> float | None:
        """The share of candidates the policy allowed this asker and audience lately."""
        return await self.gate.rates.get(self._rate_key)

    async def pushdown(self) -> Pushdown:
        """The store filter for this question, from the policy (see policy/pushdown.py)."""
        pushed, self._compiled_under = await self.gate.pushdowns.pushdown(
            self.question, self.gate.last_revision
        )
        self.pushed_down = pushed
        return pushed

    async def decide(self, records: list[Stored]) -> dict[str, Decision]:
        """Decisions for a batch, keyed by record id; every id gets one (deny by default).

        Records the policy cannot tell apart share one decision (policy/shape.py): OPA
        is asked about each shape once, and only about shapes not in the cache.
        """
        guess = self.revision if self.heard else self.gate.last_revision
        units = self._units(records, guess)
        cached = await self._lookup(units, guess)
        missing = _distinct(u for u in units.values() if u.id not in cached)
        ruled = dict(cached)
        if missing or not self._confirmed(guess):
            # Asked even with nothing to decide: it confirms the revision of the hits.
            pending = [r.id for r in records if units[r.id].id not in cached]
            batch, ruled_now = await self._ask(missing, pending)
            ruled |= ruled_now
            if batch.revision != guess and (cached or _shaped(units)):
                # The policy changed since those were cached, or since the shapes were
                # drawn (they are the old policy's): decide every record afresh, alone.
                units = self._units(records, None)
                _, ruled = await self._ask(_distinct(units.values()), [r.id for r in records])
        for record in records:
            self.rulings[record.id] = ruled[units[record.id].id]
        decided = {r.id: self.rulings[r.id].decision for r in records}
        self._check_wording(decided)
        metrics.count_decisions((d.allow, d.reasons) for d in decided.values())
        return decided

    def wording(self) -> Vocabulary:
        """The policy's vocabulary under this request's revision."""
        if self.vocabulary is None:
            raise PolicyUnavailable("no vocabulary heard from the policy")
        return self.vocabulary

    def _check_wording(self, decided: dict[str, Decision]) -> None:
        try:
            self.wording().check(decided)
        except MalformedVocabulary as exc:
            # A use the policy cannot word is a malformed answer: disclose nothing.
            raise PolicyUnavailable(str(exc)) from exc

    def _units(self, records: list[Stored], revision: str | None) -> dict[str, _Unit]:
        """What OPA is asked about for each record (by record id): its shape, when the
        policy under `revision` declared one and the record has it, else the record."""
        spec = self.gate.shape_spec(revision)
        keys = self._keys(revision) if revision is not None else None
        units = {}
        for record in records:
            view = self._view(record)
            shape = shape_of(view, spec, keys.instants) if spec and keys else None
            if shape is not None and keys is not None:
                shared = keys.key_of_shape(shape.digest)
                units[record.id] = _Unit(shape.id, shape.representative, revision, shared, True)
            else:
                own = self._key(record, revision) if revision is not None else None
                units[record.id] = _Unit(record.id, view, revision, own, False)
        return units

    def _confirmed(self, guess: str | None) -> bool:
        """Whether the revision the hits were cached under is known to be in force
        without asking: heard in this request, or the evaluator's standing revision."""
        if self.heard:
            return True
        if guess is None or self.gate.policy.standing_revision() != guess:
            return False
        vocabulary = self.gate.worded_under(guess)
        if vocabulary is None:
            return False
        self.revision, self.heard, self.vocabulary = guess, True, vocabulary
        return True

    async def _lookup(self, units: dict[str, _Unit], revision: str | None) -> dict[str, Ruling]:
        """The cached rulings of the batch's units, by unit id."""
        if revision is None or not units:
            metrics.CACHE_BYPASS.inc(len(units))
            return {}
        wanted = {u.id: u.key for u in units.values() if u.key is not None}
        keyed = sum(u.key is not None for u in units.values())
        metrics.CACHE_BYPASS.inc(len(units) - keyed)
        if not wanted:
            return {}
        try:
            values = await self.gate.cache.get_many(list(wanted.values()))
        except CacheUnavailable:
            metrics.CACHE_BYPASS.inc(keyed)
            return {}
        found = {}
        for unit_id, value in zip(wanted, values, strict=True):
            ruling = _load(value)
            if ruling is not None:
                found[unit_id] = ruling
        hits = sum(u.id in found for u in units.values())
        metrics.CACHE_HIT.inc(hits)
        metrics.CACHE_MISS.inc(keyed - hits)
        return found

    async def _ask(
        self, units: list[_Unit], pending: list[str]
    ) -> tuple[BatchDecisions, dict[str, Ruling]]:
        """OPA's decisions for `units`, by unit id; `pending` names the records waiting
        on them (in the audit entry, should OPA fail)."""
        self._pending = pending
        batch = await self.gate.policy.disclosure(
            self.question, [u.view for u in units], viewed=True
        )
        self._pending = []
        self._heard(batch.decision_id, batch.revision)
        self.vocabulary = self.gate.vocabulary_of(batch)
        self.gate.learn_shape(batch)
        ruled = {
            unit_id: Ruling(decision, batch.decision_id, cached=False)
            for unit_id, decision in batch.decisions.items()
        }
        await self._remember(units, batch)
        return batch, ruled

    async def _remember(self, units: list[_Unit], batch: BatchDecisions) -> None:
        if batch.revision is None or not units:
            return
        entries = {}
        for unit in units:
            key = unit.key
            if unit.revision != batch.revision:
                # A shape is drawn by one revision's declaration: kept under it only.
                key = None if unit.shaped else self._keys(batch.revision).key_of_view(unit.view)
            if key is not None:
                decision = batch.decisions[unit.id]
                entries[key] = orjson.dumps({"d": decision.model_dump(), "o": batch.decision_id})
        if entries:
            # A failed write is counted at the next lookup; OPA is asked again then.
            with contextlib.suppress(CacheUnavailable):
                await self.gate.cache.set_many(entries, self._keys(batch.revision).ttl_s)

    def _keys(self, revision: str) -> Keys:
        if revision not in self._key_makers:
            self._key_makers[revision] = Keys(self.question, revision, self.gate.bucket_s)
        return self._key_makers[revision]

    def _key(self, record: Stored, revision: str) -> str | None:
        """The record's cache key under `revision` (None: not cacheable), computed once
        per request: a miss is looked up and then stored under the same key."""
        memo = (revision, record.id)
        if memo not in self._record_keys:
            self._record_keys[memo] = self._keys(revision).key_of_view(self._view(record))
        return self._record_keys[memo]

    def _view(self, record: Stored) -> dict[str, Any]:
        """The record as the policy sees it (decisions.policy_view), made once per
        payload: a record read again from the store within the request (its links
        may have changed meanwhile) gets a view of what was read then."""
        known = self._views.get(record.id)
        if known is not None and known[0] is record.payload:
            return known[1]
        view = policy_view(record.payload)
        self._views[record.id] = (record.payload, view)
        return view

    def _heard(self, opa_decision_id: str | None, revision: str | None) -> None:
        self.revision = revision
        self.heard = True
        self.gate.last_revision = revision
        if self._compiled_under is not None and revision != self._compiled_under:
            self.gate.pushdowns.forget()
            self._compiled_under = None
        if opa_decision_id:
            self.opa_decision_ids.append(opa_decision_id)

    def _entry(self, error: str | None) -> AuditEntry:
        question = self.question
        return read_entry(
            self.decision_id,
            (question.asker.id, question.asker.tenant),
            question.audience,
            question.purpose,
            self.route,
            self.revision,
            [(i, s.decision, s.opa_decision_id, s.cached) for i, s in self.rulings.items()],
            pending=self._pending,
            opa_decision_ids=self.opa_decision_ids,
            pushdown=self.pushed_down.describe() if self.pushed_down else None,
            error=error,
        )


@dataclass(frozen=True)
class _Unit:
    """What OPA decides for one or more records of a batch: a record's own view, or
    the representative of its shape (policy/shape.py)."""

    id: str
    view: dict[str, Any]
    # The revision the unit was drawn under, and its cache key there (None: uncached).
    revision: str | None
    key: str | None
    shaped: bool


def _distinct(units: Iterable[_Unit]) -> list[_Unit]:
    """Each unit once (records of one shape share theirs)."""
    return list({u.id: u for u in units}.values())


def _shaped(units: dict[str, _Unit]) -> bool:
    return any(u.shaped for u in units.values())


def _error_code(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, PolicyUnavailable):
        return "policy_unavailable"
    if isinstance(exc, StoreUnavailable):
        return "store_unavailable"
    return "error"


class _Cached(BaseModel):
    """A decision cache entry as `_remember` writes it."""

    d: Decision
    o: str | None = None


def _load(value: bytes | None) -> Ruling | None:
    if value is None:
        return None
    try:
        # Parsed and checked in one pass (no dict of the JSON in between).
        entry = _Cached.model_validate_json(value)
    except ValidationError:
        return None  # An unreadable entry is a miss.
    return Ruling(entry.d, entry.o, cached=True)
