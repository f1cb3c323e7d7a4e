"""The disclosure gate: the one way a read gets a decision.

Per request, the read path (reads/reader.py) opens a `Disclosure`
(`async with gate.begin(question, route)`).
It gives the store filter the policy implies (`pushdown`, see policy/pushdown.py) and
the decision for each batch of candidates (`decide`): from the decision cache
what it can, from one OPA call the rest. On leaving it writes one audit entry
with every record allowed and withheld, and why, and updates the asker's allow
rate (reads/allow_rate.py) from the search candidates it decided, off the request path.

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
from collections.abc import Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import orjson
from cachetools import LRUCache
from pydantic import BaseModel, ValidationError

from sidecar import metrics
from sidecar.answers.wording import MalformedVocabulary, Vocabulary
from sidecar.audit import AuditEntry
from sidecar.audit.writer import AuditLog
from sidecar.policy.cache import CacheUnavailable, DecisionCache, Keys
from sidecar.policy.contract import Decision, DisclosureQuestion, Pushdown, Verdicts, policy_view
from sidecar.policy.opa import PolicyClient, PolicyUnavailable
from sidecar.policy.pushdown import COMPILE_QUERY, UNKNOWNS, Untranslatable, Visible, visible
from sidecar.reads.allow_rate import AllowRates, LocalAllowRates, rate_key
from sidecar.record import Stored
from sidecar.store import StoreUnavailable

log = logging.getLogger("whose.disclosure")


@dataclass
class Settled:
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
    ) -> None:
        self.policy = policy
        self.cache = cache
        self.audit = audit
        self.bucket_s = bucket_s
        self.rates = rates or LocalAllowRates()
        # Compiled pushdown filters, keyed by policy revision and member (see pushdown).
        self.compiled: LRUCache[bytes, Visible] = LRUCache(maxsize=10_000)
        self.pushdown_enabled = pushdown
        self._background: set[asyncio.Task[None]] = set()
        # The revision OPA last answered under: the first guess of every request.
        self.last_revision: str | None = None
        # The policy's vocabulary under that revision (see answers/wording.py).
        self.vocabulary: Vocabulary | None = None
        self._worded_under: str | None = None

    def begin(self, question: DisclosureQuestion, route: str) -> Disclosure:
        return Disclosure(self, question, route)

    def vocabulary_of(self, verdicts: Verdicts) -> Vocabulary:
        """The vocabulary an answer came with, parsed once per revision."""
        known = self.vocabulary
        if known is None or verdicts.revision is None or verdicts.revision != self._worded_under:
            try:
                known = Vocabulary.parse(verdicts.vocabulary)
            except MalformedVocabulary as exc:
                raise PolicyUnavailable(str(exc)) from exc
            self.vocabulary, self._worded_under = known, verdicts.revision
        return known

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
    settled: dict[str, Settled] = field(default_factory=dict)
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
        allowed = sum(s.decision.allow for s in self.settled.values())
        log.info(
            "disclosure",
            extra={
                "decision_id": str(self.decision_id),
                "route": self.route,
                "asker": self.question.asker.id,
                "tenant": self.question.asker.tenant,
                "allowed": allowed,
                "withheld": len(self.settled) - allowed + len(self._pending),
                "cached": sum(s.cached for s in self.settled.values()),
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
        if not self.gate.pushdown_enabled:
            metrics.PUSHDOWN.labels("off").inc()
            self.pushed_down = Pushdown()
            return self.pushed_down
        asker = self.question.asker
        members = [asker.policy_view()] + [
            {"id": m, "tenant": asker.tenant}
            for m in dict.fromkeys(self.question.audience)
            if m != asker.id
        ]
        try:
            seen = await asyncio.gather(*(self._visible_to(m) for m in members))
        except Untranslatable as exc:
            # Over-fetch on the tenant alone: slower, never less checked.
            log.warning("no pushdown: %s", exc)
            metrics.PUSHDOWN.labels("fallback").inc()
            self.pushed_down = Pushdown()
            return self.pushed_down
        metrics.PUSHDOWN.labels("compiled").inc()
        scopes = [v.scopes for v in seen if v.scopes is not None]
        self.pushed_down = Pushdown(
            audience_any_of=tuple(
                tuple(sorted(v.audience)) for v in seen if v.audience is not None
            ),
            scopes=tuple(sorted(frozenset.intersection(*scopes))) if scopes else None,
            derived=True,
        )
        return self.pushed_down

    async def _visible_to(self, member: dict[str, Any]) -> Visible:
        """One member's filter: compiled by OPA, or reused under the same policy revision.

        A reused filter can only be stale after a policy change, and then only until
        this request's first decision reports the new revision (see `_heard`): a stale
        filter may hide a record for one request, it cannot disclose one.
        """
        revision = self.gate.last_revision
        key = orjson.dumps([revision, member], option=orjson.OPT_SORT_KEYS)
        if revision is not None and (known := self.gate.compiled.get(key)) is not None:
            self._compiled_under = revision
            return known
        result = await self.gate.policy.compile(COMPILE_QUERY, {"member": member}, UNKNOWNS)
        seen = visible(result, member["tenant"])
        if revision is not None:
            self.gate.compiled[key] = seen
            self._compiled_under = revision
        return seen

    async def decide(self, records: list[Stored]) -> dict[str, Decision]:
        """Decisions for a batch, keyed by record id; every id gets one (deny by default)."""
        guess = self.revision if self.heard else self.gate.last_revision
        cached = await self._lookup(records, guess)
        misses = [r for r in records if r.id not in cached]
        if misses or not self.heard:
            # Asked even with nothing to decide: it confirms the revision of the hits.
            verdicts = await self._ask(misses)
            if cached and verdicts.revision != guess:
                # The policy changed since those were cached: decide them afresh.
                hits = [r for r in records if r.id in cached]
                cached = {}
                await self._ask(hits)
        for key, settled in cached.items():
            self.settled[key] = settled
        decided = {r.id: self.settled[r.id].decision for r in records}
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

    async def _lookup(self, records: list[Stored], revision: str | None) -> dict[str, Settled]:
        if revision is None or not records:
            metrics.CACHE_BYPASS.inc(len(records))
            return {}
        wanted = {r.id: key for r in records if (key := self._key(r, revision)) is not None}
        metrics.CACHE_BYPASS.inc(len(records) - len(wanted))
        if not wanted:
            return {}
        try:
            values = await self.gate.cache.get_many(list(wanted.values()))
        except CacheUnavailable:
            metrics.CACHE_BYPASS.inc(len(wanted))
            return {}
        found = {}
        for record_id, value in zip(wanted, values, strict=True):
            settled = _load(value)
            if settled is not None:
                found[record_id] = settled
        metrics.CACHE_HIT.inc(len(found))
        metrics.CACHE_MISS.inc(len(wanted) - len(found))
        return found

    async def _ask(self, records: list[Stored]) -> Verdicts:
        self._pending = [r.id for r in records]
        verdicts = await self.gate.policy.disclosure(
            self.question, [self._view(r) for r in records], viewed=True
        )
        self._pending = []
        self._heard(verdicts.decision_id, verdicts.revision)
        self.vocabulary = self.gate.vocabulary_of(verdicts)
        for record_id, decision in verdicts.decisions.items():
            self.settled[record_id] = Settled(decision, verdicts.decision_id, cached=False)
        await self._remember(records, verdicts)
        return verdicts

    async def _remember(self, records: list[Stored], verdicts: Verdicts) -> None:
        if verdicts.revision is None or not records:
            return
        entries = {}
        for record in records:
            key = self._key(record, verdicts.revision)
            if key is not None:
                decision = verdicts.decisions[record.id]
                entries[key] = orjson.dumps({"d": decision.model_dump(), "o": verdicts.decision_id})
        if entries:
            # A failed write is counted at the next lookup; OPA is asked again then.
            with contextlib.suppress(CacheUnavailable):
                await self.gate.cache.set_many(entries, self._keys(verdicts.revision).ttl_s)

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
            # The policy changed since those filters were compiled: compile afresh.
            self.gate.compiled.clear()
            self._compiled_under = None
        if opa_decision_id:
            self.opa_decision_ids.append(opa_decision_id)

    def _entry(self, error: str | None) -> AuditEntry:
        # Plain data, validated in one pass: cheaper than a model per record.
        allowed: list[dict[str, Any]] = []
        withheld: list[dict[str, Any]] = []
        for record_id, s in self.settled.items():
            audited = {
                "id": record_id,
                "usable_as": s.decision.usable_as if s.decision.allow else None,
                "reasons": s.decision.reasons,
                "opa_decision_id": s.opa_decision_id,
                "cached": s.cached,
            }
            (allowed if s.decision.allow else withheld).append(audited)
        withheld += [{"id": i, "reasons": ["policy_unavailable"]} for i in self._pending]
        question = self.question
        return AuditEntry.model_validate(
            {
                "decision_id": self.decision_id,
                "time": datetime.now(UTC),
                "tenant": question.asker.tenant,
                "asker": question.asker.id,
                "audience": question.audience,
                "purpose": question.purpose,
                "route": self.route,
                "policy_revision": self.revision,
                "opa_decision_ids": self.opa_decision_ids,
                "pushdown": self.pushed_down.describe() if self.pushed_down else None,
                "allowed": allowed,
                "withheld": withheld,
                "error": error,
            }
        )


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


def _load(value: bytes | None) -> Settled | None:
    if value is None:
        return None
    try:
        # Parsed and checked in one pass (no dict of the JSON in between).
        entry = _Cached.model_validate_json(value)
    except ValidationError:
        return None  # An unreadable entry is a miss.
    return Settled(entry.d, entry.o, cached=True)
