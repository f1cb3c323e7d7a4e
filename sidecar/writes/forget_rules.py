"""Standing forget rules: "never keep my PIN" (docs/forgetting.md).

A rule forgets a value, a proposition key or a pattern about a subject. Setting one
(the `whose.forgetting` policy says who may: the subject, or an erasure officer for
anyone) does two things: it starts an erasure request of kind `forget`
(writes/erasure_requests.py) over what matches now, with the setter's reach (an
officer's: every record of the tenant; anyone else's: the records they may see and
erase), and it stands in front of every later write (`Rules.enforce`, called by the
writer for every path: native writes, observations, witnessed events, the Qdrant
dialect's documents in any collection): the policy says whether a record that
carries it is refused or stored with the match masked. It stands until the subject,
whoever set it, or an officer lifts it.

Rules are kept like erasure requests: in Redis when configured (every replica reads
the same rules on every write), else a file per rule under the data directory. The
value is kept, since later writes are matched against it, but never answered,
audited or shown to the policy (only its length).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from sidecar.audit import AuditedErasure, AuditEntry
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.errors import (
    ErasureRefused,
    ErasureRequestsUnavailable,
    InvalidRequest,
    NotFound,
    WriteRefused,
)
from sidecar.messages import ForgetRule, ForgetRuleRequest, ForgetRuleSet
from sidecar.policy.contract import ErasureRequestView, ForgetRuleView
from sidecar.policy.engine import PolicyEngine
from sidecar.writes.erasure_requests import ErasureRequests
from sidecar.writes.forgetting import Matcher, carried, concealed, redacted
from sidecar.writes.locks import ChainLocks, bound_key

log = logging.getLogger(__name__)

# Why a write was refused, whichever rule: the same reason for every rule, so the
# refusal names no rule, subject or value (the writer sent the value; it learns that
# something it sent is kept out, nothing more).
FORGOTTEN = "forgotten"
# Why a stored record's audit line says it was masked.
REDACTED = "forget_rule_redacted"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class RuleStore(Protocol):
    async def save(self, rule: ForgetRule) -> None: ...

    async def all(self, tenant: str) -> list[ForgetRule]: ...


def _dumped(rule: ForgetRule) -> str:
    return json.dumps(rule.model_dump(mode="json") | {"value": rule.value})


def _loaded(text: str | bytes | None) -> ForgetRule | None:
    if text is None:
        return None
    try:
        return ForgetRule.model_validate_json(text)
    except ValidationError:
        log.warning("a forget rule is not readable; left alone")
        return None


class FileRules:
    """One JSON file per rule, a folder per tenant. One process owns the data dir, so
    the rules read once are kept in memory and changed with each save: a write does
    not read every rule's file again (bench/forgetting_scenarios.py --write-cost)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._read: dict[str, dict[uuid.UUID, ForgetRule]] = {}

    def _tenant(self, tenant: str) -> Path:
        return self.folder / hashlib.sha256(tenant.encode()).hexdigest()[:32]

    async def save(self, rule: ForgetRule) -> None:
        def write() -> None:
            folder = self._tenant(rule.tenant)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{rule.rule_id}.json"
            partial = path.with_suffix(".part")
            partial.write_text(_dumped(rule))
            partial.replace(path)  # whole or not at all

        await self.all(rule.tenant)  # read before, so the saved one is not read twice
        await asyncio.to_thread(write)
        self._read[rule.tenant][rule.rule_id] = rule

    async def all(self, tenant: str) -> list[ForgetRule]:
        def read() -> list[str]:
            folder = self._tenant(tenant)
            return [p.read_text() for p in sorted(folder.glob("*.json"))] if folder.exists() else []

        if tenant not in self._read:
            found = [_loaded(t) for t in await asyncio.to_thread(read)]
            rules = [r for r in found if r is not None and r.tenant == tenant]
            self._read[tenant] = {r.rule_id: r for r in rules}
        return sorted(self._read[tenant].values(), key=lambda r: str(r.rule_id))


class RedisRules:
    """Rules in one Redis hash per tenant, seen by every replica on every write. Each
    save bumps the tenant's revision in the same transaction; a replica keeps the
    rules it read under the revision it read first, so a write asks Redis for one
    number, and reads the rules again only after some replica changed them."""

    def __init__(self, client: aioredis.Redis, prefix: str = "whose:forget") -> None:
        self.client = client
        self.prefix = prefix
        self._read: dict[str, tuple[object, list[ForgetRule]]] = {}

    def _key(self, tenant: str) -> str:
        return f"{self.prefix}:{hashlib.sha256(tenant.encode()).hexdigest()[:32]}"

    async def save(self, rule: ForgetRule) -> None:
        key = self._key(rule.tenant)
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hset(key, str(rule.rule_id), _dumped(rule))
                pipe.incr(f"{key}:revision")
                await pipe.execute()
        except RedisError as exc:
            raise ErasureRequestsUnavailable(str(exc)) from exc

    async def all(self, tenant: str) -> list[ForgetRule]:
        key = self._key(tenant)
        try:
            # The revision before the rules: a save in between is read again next time.
            revision = await self.client.get(f"{key}:revision")
            kept = self._read.get(tenant)
            if kept is not None and revision is not None and kept[0] == revision:
                return kept[1]
            texts = await self.client.hvals(key)
        except RedisError as exc:
            raise ErasureRequestsUnavailable(str(exc)) from exc
        found = [_loaded(t) for t in sorted(texts)]
        rules = [r for r in found if r is not None and r.tenant == tenant]
        self._read[tenant] = (revision, rules)
        return rules


def _view(rule: ForgetRule) -> ForgetRuleView:
    """The rule as the policy sees it: its value's length, never the value."""
    return ForgetRuleView(
        id=str(rule.rule_id),
        kind=rule.kind,
        subject=rule.subject,
        length=rule.value_length,
        key=rule.key,
        pattern=rule.pattern,
        set_by=rule.set_by,
    )


def matcher(rule: ForgetRule) -> Matcher:
    return Matcher(
        rule_id=str(rule.rule_id),
        kind=rule.kind,
        subject=rule.subject,
        value=rule.value,
        key=rule.key,
        pattern=rule.pattern,
    )


class Rules:
    def __init__(
        self,
        store: RuleStore,
        policy: PolicyEngine,
        locks: ChainLocks,
        audit: AuditLog | None = None,
        clock: Callable[[], datetime] = _utcnow,
        per_setter: int = 100,
    ) -> None:
        self.store = store
        self.locks = locks
        self.policy = policy
        self.audit = audit
        self.clock = clock
        # Standing rules one person may have set (Settings.forget_rules_per_setter).
        # Every write of the tenant is matched against all of them, so this bounds a
        # write's cost per person who sets rules. Not a bound on the tenant's total: a
        # refusal once the tenant held so many would tell a setter how many rules the
        # others had set, which they may not see.
        self.per_setter = per_setter
        # Set once the erasure requests exist (services.py): a rule's erasure now.
        self.erasures: ErasureRequests | None = None

    async def standing(self, tenant: str) -> list[ForgetRule]:
        return [r for r in await self.store.all(tenant) if r.status == "standing"]

    async def set(self, who: Identity, request: ForgetRuleRequest) -> ForgetRuleSet:
        """Set a rule (ErasureRefused when the policy refuses), then erase what it
        names now with the setter's reach."""
        now = self.clock()
        rule = ForgetRule(
            rule_id=uuid.uuid4(),
            tenant=who.tenant,
            subject=request.subject or who.id,
            kind=request.kind,
            key=request.key,
            pattern=request.pattern,
            value_length=len(request.value) if request.value is not None else None,
            set_by=who.id,
            reason=request.reason,
            status="standing",
            created_at=now,
            value=request.value,
        )
        decision = await self.policy.forget_rule(who, "set", _view(rule))
        if not decision.allow:
            raise ErasureRefused("forget rule refused", sorted(decision.reasons))
        # Counted and saved under one lock per setter (every replica's, with Redis):
        # rules set at once would each count without the others and all pass.
        async with self.locks.hold([bound_key("forget-rules", who.tenant, who.id)]) as held:
            theirs = [r for r in await self.standing(who.tenant) if r.set_by == who.id]
            if len(theirs) >= self.per_setter:
                raise InvalidRequest(
                    "too many forget rules",
                    [f"forget_rules_per_setter:{self.per_setter}: lift one first"],
                )
            await held.confirm()
            await self.store.save(rule)
        self._audit(who, rule, "set")
        if self.erasures is None:
            raise RuntimeError("forget rules are used before the erasure requests are set")
        progress = await self.erasures.forget(who, rule)
        return ForgetRuleSet(rule=rule, erasure=progress)

    async def lift(self, who: Identity, rule_id: uuid.UUID) -> ForgetRule:
        """Lift a standing rule: NotFound for one the asker may not see (as missing),
        ErasureRefused for one they see but may not lift."""
        rule = await self._visible(who, rule_id)
        decision = await self.policy.forget_rule(who, "lift", _view(rule))
        if not decision.allow:
            raise ErasureRefused("forget rule refused", sorted(decision.reasons))
        lifted = rule.model_copy(
            update={"status": "lifted", "lifted_at": self.clock(), "lifted_by": who.id}
        )
        await self.store.save(lifted)
        self._audit(who, lifted, "lift")
        return lifted

    async def listed(self, who: Identity) -> list[ForgetRule]:
        """The rules the asker may see: about them or set by them; an officer's, all."""
        officer = await self._officer(who)
        rules = await self.store.all(who.tenant)
        return [r for r in rules if officer or who.id in (r.subject, r.set_by)]

    async def _visible(self, who: Identity, rule_id: uuid.UUID) -> ForgetRule:
        for rule in await self.listed(who):
            if rule.rule_id == rule_id and rule.status == "standing":
                return rule
        raise NotFound("forget rule")

    async def _officer(self, who: Identity) -> bool:
        """Whether the erasure policy lets the asker make an officer's request (the
        question erasure requests ask before letting someone follow any request)."""
        answer, _ = await self.policy.erasure(
            who, ErasureRequestView(kind="tenant"), [], self.clock()
        )
        return answer.request.allow

    def _audit(self, who: Identity, rule: ForgetRule, action: str) -> None:
        if self.audit is None:
            return
        self.audit.record(
            AuditEntry(
                decision_id=uuid.uuid4(),
                time=self.clock(),
                tenant=who.tenant,
                asker=who.id,
                audience=[],
                purpose="forget",
                route=f"forget-rules.{action}",
                erasure=AuditedErasure(
                    request_id=str(rule.rule_id),
                    kind=f"forget_{rule.kind}",
                    subject=rule.subject,
                    reason=rule.reason,
                ),
            )
        )

    # --- in front of every write -----------------------------------------------------

    async def enforce(
        self, writer: Identity, payloads: list[dict[str, Any]], supplied: list[bool]
    ) -> dict[int, list[str]]:
        """Each record that carries a standing rule of its tenant, refused or masked
        as the policy says (in place); the indexes masked, with their audit reason.
        WriteRefused (`forgotten`, nothing stored) for a record the policy refuses, and
        for one to mask whose vectors the writer sent (they were made from the text
        as sent, and whose cannot make the stack's own)."""
        rules = await self.standing(writer.tenant)
        if not rules:
            return {}
        matchers = [matcher(r) for r in rules]
        found = {str(p["id"]): carried(matchers, p) for p in payloads}
        found = {i: ms for i, ms in found.items() if ms}
        if not found:
            return {}
        by_id = {str(r.rule_id): r for r in rules}
        carried_views = {i: [_view(by_id[m.rule_id]) for m in ms] for i, ms in found.items()}
        decisions = await self.policy.forget_writes(writer, payloads, carried_views)
        refused: list[dict[str, Any]] = []
        masked: dict[int, list[str]] = {}
        for index, payload in enumerate(payloads):
            record_id = str(payload["id"])
            decision = decisions.get(record_id)
            if decision is None or decision.action == "keep":
                continue
            if decision.action == "refuse" or supplied[index]:
                refused.append({"index": index, "id": record_id, "reasons": [FORGOTTEN]})
                continue
            if decision.action == "conceal":
                payload.update(concealed(payload))
                masked[index] = [REDACTED]
                continue
            bound = [m for m in found[record_id] if m.rule_id in decision.rules]
            payload.update(redacted(payload, bound))
            if carried(bound, payload):
                # A value the mask could not take out (it spans the mask itself):
                # refused rather than stored carrying it.
                refused.append({"index": index, "id": record_id, "reasons": [FORGOTTEN]})
                continue
            masked[index] = [REDACTED]
        if refused:
            raise WriteRefused(refused)
        return masked
