"""The disclosure policy as the read path asks it: one call per batch.

The read path (reads/gate.py) hands a batch of candidates over once
(`Consultation.decide`) and gets a ruling per record back; behind that one call:
each record's policy view, its shape (policy/shape.py) when decisions are shared
under the revision, the cache keys (policy/cache.py), one lookup for the batch, one
OPA call for what is not cached, and the write-back.

How decisions are shared is settled once per policy revision (`Plan`), from what the
compiled policy reads (policy/readset.py): by shape; per record; or not at all (no
cache, each batch as it is). The choice is logged once per revision and set on the
`whose_decision_sharing` gauge. An OPA server of the deployment's own (the policy is
not at hand) decides per record.

No stale allow: a cached decision is used only under the policy revision OPA
reported during this same request, or under the linked evaluator's standing
revision (it cannot change while it is loaded). The first batch is looked up under
the last revision seen and confirmed by this request's OPA call (made even when
every record was a hit); if OPA answers under another revision, the hits are thrown
away and every record is decided again, alone.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from sidecar import metrics
from sidecar.policy.cache import CacheUnavailable, DecisionCache, Keys
from sidecar.policy.contract import BatchDecisions, Decision, DisclosureQuestion, policy_view
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.readset import Path, ReadSet
from sidecar.policy.shape import Shaper
from sidecar.record import Stored

log = logging.getLogger("whose.policy")


@dataclass
class Ruling:
    """A decision as this request holds it: which OPA decision made it, and whether
    it came from the cache."""

    decision: Decision
    opa_decision_id: str | None
    cached: bool


@dataclass(frozen=True)
class Plan:
    """How decisions under one revision are shared: by shape (`shaper`), per record,
    or (`caches` false) not at all; `times` are the record times whose bucket-boundary
    check a cache entry needs."""

    mode: str
    shaper: Shaper | None
    caches: bool
    times: tuple[Path, ...]
    why: str
    # Said as a warning: the policy's own text takes sharing or caching away.
    warn: bool = False


# Decisions drawn under no revision (OPA not heard yet): each record alone, uncached.
_UNHEARD = Plan("record", None, False, (), "no policy revision heard")
# Revisions whose plan is kept (a rolling bundle update hears two or three).
_KEPT_PLANS = 8


class Decider:
    """The disclosure decisions of one gate: its cache, and a plan per revision."""

    def __init__(
        self, engine: PolicyEngine, cache: DecisionCache, bucket_s: float, shapes: bool = True
    ) -> None:
        self.engine = engine
        self.cache = cache
        self.bucket_s = bucket_s
        self.shapes = shapes
        # The revision OPA last answered under: the first guess of every request.
        self.last_revision: str | None = None
        # The vocabulary OPA last answered with, and under which revision.
        self._vocabulary: tuple[str | None, dict[str, Any]] | None = None
        self._plans: dict[str, Plan] = {}
        loaded = engine.read_set()
        if loaded is not None:
            # Said at start: what the policy this sidecar loaded is shared on.
            self.plan(loaded[0])

    def consult(self, question: DisclosureQuestion) -> Consultation:
        return Consultation(self, question)

    def plan(self, revision: str | None) -> Plan:
        """How decisions under `revision` are shared (settled, and said, once)."""
        if revision is None:
            return _UNHEARD
        known = self._plans.get(revision)
        if known is None:
            known = self._plans[revision] = self._settle(revision)
            while len(self._plans) > _KEPT_PLANS:
                self._plans.pop(next(iter(self._plans)))
            level = logging.WARNING if known.warn else logging.INFO
            log.log(level, "decisions under policy revision %s: %s", revision, known.why)
            for mode in ("shape", "record", "uncached"):
                metrics.DECISION_SHARING.labels(mode).set(1 if mode == known.mode else 0)
        return known

    def _settle(self, revision: str) -> Plan:
        loaded = self.engine.read_set()
        read_set: ReadSet | None = loaded[1] if loaded and loaded[0] == revision else None
        if read_set is None:
            return Plan(
                "record",
                None,
                True,
                (),
                "each record decided alone (cached per record): the policy is not at hand to "
                "compute what a decision reads (an OPA server of the deployment's own)",
            )
        if not read_set.caches:
            return Plan("uncached", None, False, (), read_set.describe(), warn=True)
        if not read_set.shares:
            return Plan("record", None, True, read_set.compared, read_set.describe(), warn=True)
        if not self.shapes:
            why = "each record decided alone (cached per record): WHOSE_DECIDE_SHAPES=false"
            return Plan("record", None, True, read_set.compared, why)
        return Plan("shape", Shaper(read_set), True, read_set.compared, read_set.describe())

    def vocabulary_under(self, revision: str) -> dict[str, Any] | None:
        """The vocabulary OPA answered with under `revision`, if it is the one kept."""
        known = self._vocabulary
        return known[1] if known is not None and known[0] == revision else None

    def heard(self, batch: BatchDecisions) -> None:
        self.last_revision = batch.revision
        self._vocabulary = (batch.revision, batch.vocabulary)


@dataclass
class Consultation:
    """One question's decisions within a request (its follow-ups share what OPA said)."""

    decider: Decider
    question: DisclosureQuestion
    # The revision OPA reported in this request, once it has answered (`heard`), and
    # the vocabulary it answered with.
    revision: str | None = None
    heard: bool = False
    vocabulary: dict[str, Any] | None = None
    opa_decision_ids: list[str] = field(default_factory=list)
    _keys: dict[str, Keys] = field(default_factory=dict)
    # Each record's policy view, made once: for its cache key and for OPA's input;
    # kept with the payload it was made from (see `_view`).
    _views: dict[str, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)

    def follow_up(self, question: DisclosureQuestion) -> Consultation:
        """Another question within the same request: it starts from the revision OPA
        reported to this one, so decisions cached under it serve without asking again."""
        return Consultation(self.decider, question, self.revision, self.heard, self.vocabulary)

    async def decide(self, records: list[Stored]) -> dict[str, Ruling]:
        """A ruling for each record of the batch, by record id (deny by default)."""
        guess = self.revision if self.heard else self.decider.last_revision
        units = self._units(records, guess)
        cached = await self._lookup(units, guess)
        missing = _distinct(u for u in units.values() if u.id not in cached)
        ruled = dict(cached)
        if missing or not self._confirmed(guess):
            # Asked even with nothing to decide: it confirms the revision of the hits.
            batch, ruled_now = await self._ask(missing)
            ruled |= ruled_now
            if batch.revision != guess and (cached or _shared(units)):
                # The policy changed since those were cached, or since the shapes were
                # drawn (they are the old policy's): decide every record afresh, alone.
                units = self._units(records, None)
                _, ruled = await self._ask(_distinct(units.values()))
        return {record.id: ruled[units[record.id].id] for record in records}

    def _units(self, records: list[Stored], revision: str | None) -> dict[str, _Unit]:
        """What OPA is asked about for each record (by record id): its shape, when
        decisions are shared under `revision` and the record has one, else the record."""
        plan = self.decider.plan(revision)
        keys = self._keys_under(revision, plan) if revision is not None else None
        units: dict[str, _Unit] = {}
        # A shape's unit is keyed only when every record of it may be cached.
        uncacheable: set[str] = set()
        for record in records:
            view = self._view(record)
            shape = (
                plan.shaper.shape_of(view, keys.instants)
                if plan.shaper is not None and keys is not None
                else None
            )
            shaped = shape is not None
            cacheable = plan.caches and keys is not None and keys.cacheable(view, shaped)
            if shape is not None and keys is not None:
                key = keys.key_of_shape(shape.digest) if cacheable else None
                units[record.id] = _Unit(shape.id, shape.representative, revision, key, True)
                if not cacheable:
                    uncacheable.add(shape.id)
            else:
                key = keys.key_of_view(view) if cacheable and keys is not None else None
                units[record.id] = _Unit(record.id, view, revision, key, False)
        if uncacheable:
            for record_id, unit in units.items():
                if unit.id in uncacheable and unit.key is not None:
                    units[record_id] = _Unit(unit.id, unit.view, revision, None, True)
        return units

    def _confirmed(self, guess: str | None) -> bool:
        """Whether the revision the hits were cached under is known to be in force
        without asking: heard in this request, or the evaluator's standing revision."""
        if self.heard:
            return True
        if guess is None or self.decider.engine.standing_revision() != guess:
            return False
        vocabulary = self.decider.vocabulary_under(guess)
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
            values = await self.decider.cache.get_many(list(wanted.values()))
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

    async def _ask(self, units: list[_Unit]) -> tuple[BatchDecisions, dict[str, Ruling]]:
        """OPA's decisions for `units`, by unit id."""
        batch = await self.decider.engine.disclosure(
            self.question, [u.view for u in units], viewed=True
        )
        self.revision, self.heard, self.vocabulary = batch.revision, True, batch.vocabulary
        self.decider.heard(batch)
        if batch.decision_id:
            self.opa_decision_ids.append(batch.decision_id)
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
                # Drawn under another revision's plan: a record's own view is keyed again
                # under this one's; a shape (the old policy's) is not kept.
                key = None if unit.shaped else self._key_of_view(unit.view, batch.revision)
            if key is not None:
                decision = batch.decisions[unit.id]
                entries[key] = orjson.dumps({"d": decision.model_dump(), "o": batch.decision_id})
        if entries:
            # A failed write is counted at the next lookup; OPA is asked again then.
            with contextlib.suppress(CacheUnavailable):
                await self.decider.cache.set_many(entries, self.bucket_ttl_s)

    @property
    def bucket_ttl_s(self) -> float:
        # Entries outlive their bucket only by a little: the bucket is in the key.
        return 2 * self.decider.bucket_s

    def _key_of_view(self, view: dict[str, Any], revision: str) -> str | None:
        plan = self.decider.plan(revision)
        if not plan.caches:
            return None
        return self._keys_under(revision, plan).key_of_view(view)

    def _keys_under(self, revision: str, plan: Plan) -> Keys:
        if revision not in self._keys:
            sided = plan.shaper.read_set.instants if plan.shaper is not None else ()
            self._keys[revision] = Keys(
                self.question, revision, self.decider.bucket_s, plan.times, sided
            )
        return self._keys[revision]

    def _view(self, record: Stored) -> dict[str, Any]:
        """The record as the policy sees it (contract.policy_view), made once per
        payload: a record read again from the store within the request (its links
        may have changed meanwhile) gets a view of what was read then."""
        known = self._views.get(record.id)
        if known is not None and known[0] is record.payload:
            return known[1]
        view = policy_view(record.payload)
        self._views[record.id] = (record.payload, view)
        return view


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


def _shared(units: dict[str, _Unit]) -> bool:
    return any(u.shaped for u in units.values())


class _Cached(BaseModel):
    """A decision cache entry as `_remember` writes it."""

    d: Decision
    o: str | None = None


def _load(value: bytes | None) -> Ruling | None:
    if value is None:
        return None
    entry = _entry(value)
    return None if entry is None else Ruling(entry.d, entry.o, cached=True)


# A handful of entries serve every recall of a steady state (one a shape): each is
# parsed once, by its bytes. Decisions are values here: nothing changes one in place.
@functools.lru_cache(maxsize=4096)
def _entry(value: bytes) -> _Cached | None:
    try:
        # Parsed and checked in one pass (no dict of the JSON in between).
        return _Cached.model_validate_json(value)
    except ValidationError:
        return None  # An unreadable entry is a miss.
