"""The disclosure gate: the one way a read gets a decision.

Per request, the read path (reads/reader.py) opens a `Disclosure`
(`async with gate.begin(question, route)`).
As it begins, the question gets the subjects' grants in force that may reach its
hearers (policy/grants.py `live`): part of every decision and of its cache key. It
gives the store filter the policy implies (`pushdown`, compiled and kept by
policy/pushdown.py) and the decision for each batch of candidates (`decide`): one
call into the policy (policy/decider.py: the cache, shapes and OPA behind it, under
the no-stale-allow rule). On leaving it hands the audit log one entry
(audit/model.py `read_entry`) with every record allowed and withheld, each naming
the OPA decision that decided it, and updates the asker's allow rate
(reads/allow_rate.py) from the search candidates it decided, off the request path.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

from sidecar import metrics
from sidecar.answers.wording import MalformedVocabulary, Vocabulary
from sidecar.audit import AuditEntry, read_entry
from sidecar.audit.writer import AuditLog
from sidecar.errors import PolicyUnavailable
from sidecar.policy.cache import DecisionCache
from sidecar.policy.contract import Decision, DisclosureQuestion
from sidecar.policy.decider import Consultation, Decider, Ruling
from sidecar.policy.engine import PolicyEngine
from sidecar.policy.grants import GrantSource, digest
from sidecar.policy.pushdown import Compiler, Pushdown
from sidecar.reads.allow_rate import AllowRates, LocalAllowRates, rate_key
from sidecar.record import Stored
from sidecar.store import StoreUnavailable

log = logging.getLogger("whose.disclosure")


class Gate:
    def __init__(
        self,
        policy: PolicyEngine,
        cache: DecisionCache,
        audit: AuditLog,
        bucket_s: float,
        rates: AllowRates | None = None,
        pushdown: bool = True,
        shapes: bool = True,
        grants: GrantSource | None = None,
    ) -> None:
        self.policy = policy
        # None: no grants (a core without a grant store; every grant rule then holds for none).
        self.grants = grants
        self.audit = audit
        self.rates = rates or LocalAllowRates()
        # The decisions: cache, shapes and OPA, one call per batch (policy/decider.py).
        self.decider = Decider(policy, cache, bucket_s, shapes=shapes)
        self.pushdowns = Compiler(policy, enabled=pushdown)
        self._background: set[asyncio.Task[None]] = set()
        # The policy's vocabulary (see answers/wording.py), parsed once per revision.
        self._vocabulary: tuple[str, Vocabulary] | None = None

    def begin(self, question: DisclosureQuestion, route: str) -> Disclosure:
        return Disclosure(self, question, route, self.decider.consult(question))

    def vocabulary_of(self, revision: str | None, raw: dict[str, Any]) -> Vocabulary:
        """The vocabulary an answer came with, parsed once per revision."""
        known = self._vocabulary
        if known is not None and revision is not None and known[0] == revision:
            return known[1]
        try:
            parsed = Vocabulary.parse(raw)
        except MalformedVocabulary as exc:
            raise PolicyUnavailable(str(exc)) from exc
        if revision is not None:
            self._vocabulary = (revision, parsed)
        return parsed

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
    # This question's decisions (policy/decider.py): the revision OPA reported in this
    # request, the OPA decisions asked.
    consultation: Consultation
    decision_id: uuid.UUID = field(default_factory=uuid.uuid4)
    rulings: dict[str, Ruling] = field(default_factory=dict)
    pushed_down: Pushdown | None = None
    # How this request's decisions are worded: from OPA's answer in this request.
    vocabulary: Vocabulary | None = None
    _compiled_under: str | None = None
    # Records whose decision is being asked (in the audit entry, should OPA fail).
    _pending: list[str] = field(default_factory=list)
    # Search candidates decided and allowed (`overfetched`): the allow rate learns from
    # these only. A read by id decides whatever ids the caller names, forbidden ones
    # included, so counting it would let records the caller may not see size the
    # caller's later searches (docs/security.md, "noninterference").
    _searched: int = 0
    _searched_allowed: int = 0

    async def __aenter__(self) -> Disclosure:
        if self.gate.grants is not None and not self.question.grants:
            grants = await self.gate.grants.live(self.question)
            if grants:
                self.question = replace(self.question, grants=grants)
                self.consultation.question = self.question
        return self

    @property
    def revision(self) -> str | None:
        """The policy revision OPA reported in this request (None until it has)."""
        return self.consultation.revision

    def follow_up(self, question: DisclosureQuestion, route: str) -> Disclosure:
        """Another question within the same request (its own audit entry).

        It starts from the revision OPA reported to this one, so decisions cached
        under it serve without asking OPA again: still the same request.
        """
        return Disclosure(
            self.gate,
            question,
            route,
            self.consultation.follow_up(question),
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
            self.question, self.gate.decider.last_revision
        )
        self.pushed_down = pushed
        return pushed

    async def decide(self, records: list[Stored]) -> dict[str, Decision]:
        """Decisions for a batch, keyed by record id; every id gets one (deny by default).
        One question to the policy (policy/decider.py) for the whole batch."""
        self._pending = [r.id for r in records]
        ruled = await self.consultation.decide(records)
        self._pending = []
        self._heard()
        self.rulings.update(ruled)
        decided = {r.id: ruled[r.id].decision for r in records}
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

    def _heard(self) -> None:
        """What this request heard from OPA: its wording; a pushdown compiled under
        another revision is forgotten."""
        consultation = self.consultation
        if consultation.vocabulary is not None:
            self.vocabulary = self.gate.vocabulary_of(
                consultation.revision, consultation.vocabulary
            )
        if self._compiled_under is not None and consultation.revision != self._compiled_under:
            self.gate.pushdowns.forget()
            self._compiled_under = None

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
            opa_decision_ids=self.consultation.opa_decision_ids,
            pushdown=self.pushed_down.describe() if self.pushed_down else None,
            error=error,
            as_of=question.at,
            claims=(question.asker.groups, question.asker.roles, question.asker.scopes),
            grants_digest=digest(question.grants),
        )


def _error_code(exc: BaseException | None) -> str | None:
    if exc is None:
        return None
    if isinstance(exc, PolicyUnavailable):
        return "policy_unavailable"
    if isinstance(exc, StoreUnavailable):
        return "store_unavailable"
    return "error"
