"""Grants: a data subject's consent that a reader may see the subject's records of some
categories, for a purpose, until an end (docs/consent.md; rego/whose/consent decides
who may give and take one back, whose.disclosure `granted` applies them).

A grant is policy data, not a change to any record: it lives in a small store (Redis
when configured, so every replica sees it; else a file per tenant under the data
directory), and every read passes the grants in force that may reach one of its
hearers to the disclosure policy (`live`, called when a read begins, reads/gate.py).
So a grant, its end and its revocation change what every stored record discloses on
the next read, and no record is rewritten.

The decision cache keys on those grants (policy/cache.py `Keys`): a grant given or
revoked is a new key, and so is one that ended, since the grants passed are those in
force at the read's `now`: a decision cached while a grant was in force is never
served after its end, without any write at that instant.

Every grant, revocation and refusal is audited (purpose `consent`). A grant's answer
is about the grant alone: nothing in it depends on any record.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from sidecar.audit import AuditedGrant, AuditEntry
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.errors import ConsentRefused, GrantsUnavailable, InvalidRequest, NotFound
from sidecar.messages import Grant, GrantList, GrantRequest
from sidecar.policy.contract import ConsentAction, ConsentGrant, DisclosureQuestion
from sidecar.policy.engine import PolicyEngine
from sidecar.record import iso
from sidecar.writes.locks import ChainLocks, bound_key

log = logging.getLogger(__name__)

# Only a group's members are known to the policy (the directory, a token's groups): a
# grant to any group may reach a hearer, and is passed for the policy to decide.
GROUP = "group:"


def _utcnow() -> datetime:
    return datetime.now(UTC)


class GrantSource(Protocol):
    """Where the grants in force for a question come from (`Grants.live`): a read
    (reads/gate.py) and explain (oversight.py) apply them alike; and the grants held
    now (`held`), from which a policy edit's impact rebuilds those a read passed."""

    async def live(self, question: DisclosureQuestion) -> tuple[dict[str, Any], ...]: ...

    async def held(self, tenant: str) -> list[Grant]: ...


class GrantStore(Protocol):
    async def load(self, tenant: str) -> list[Grant]: ...

    async def add(self, grant: Grant, expired: Iterable[uuid.UUID]) -> None: ...

    async def remove(self, tenant: str, grant_id: uuid.UUID) -> bool: ...


class FileGrants:
    """One JSON file per tenant under a folder (one process owns the data dir), kept in
    memory once read: every read asks for the tenant's grants."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = asyncio.Lock()
        self._known: dict[str, dict[str, Grant]] = {}

    def _path(self, tenant: str) -> Path:
        # No tenant name in a file name (it is the caller's text).
        return self.folder / f"{hashlib.sha256(tenant.encode()).hexdigest()[:32]}.json"

    async def load(self, tenant: str) -> list[Grant]:
        return list((await self._of(tenant)).values())

    async def _of(self, tenant: str) -> dict[str, Grant]:
        known = self._known.get(tenant)
        if known is None:
            path = self._path(tenant)
            try:
                text = await asyncio.to_thread(lambda: path.read_text() if path.exists() else "{}")
                documents = json.loads(text)
                known = self._known[tenant] = _parsed(documents.values())
            except (OSError, ValueError, AttributeError) as exc:
                # An unreadable file fails as Redis does: a read applies no grant (deny
                # by default), a grant route answers 503; not a 500 on every read.
                raise GrantsUnavailable(f"grants file {path.name}: {exc}") from exc
        return known

    async def add(self, grant: Grant, expired: Iterable[uuid.UUID]) -> None:
        async with self._lock:
            grants = dict(await self._of(grant.tenant))
            for gone in expired:
                grants.pop(str(gone), None)
            grants[str(grant.grant_id)] = grant
            await self._save(grant.tenant, grants)

    async def remove(self, tenant: str, grant_id: uuid.UUID) -> bool:
        async with self._lock:
            grants = dict(await self._of(tenant))
            if grants.pop(str(grant_id), None) is None:
                return False
            await self._save(tenant, grants)
            return True

    async def _save(self, tenant: str, grants: dict[str, Grant]) -> None:
        path = self._path(tenant)
        text = json.dumps({k: g.model_dump(mode="json") for k, g in grants.items()})

        def write() -> None:
            self.folder.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".part")
            partial.write_text(text)
            partial.replace(path)  # whole or not at all

        await asyncio.to_thread(write)
        self._known[tenant] = grants


class RedisGrants:
    """A hash per tenant (grant id to grant), seen by every replica."""

    def __init__(self, client: aioredis.Redis, prefix: str = "whose:grants") -> None:
        self.client = client
        self.prefix = prefix

    def _key(self, tenant: str) -> str:
        return f"{self.prefix}:{hashlib.sha256(tenant.encode()).hexdigest()[:32]}"

    async def load(self, tenant: str) -> list[Grant]:
        try:
            found = await self.client.hgetall(self._key(tenant))
        except (RedisError, OSError) as exc:
            raise GrantsUnavailable(str(exc)) from exc
        grants = _parsed(json.loads(v) for v in found.values())
        return [g for g in grants.values() if g.tenant == tenant]

    async def add(self, grant: Grant, expired: Iterable[uuid.UUID]) -> None:
        key = self._key(grant.tenant)
        try:
            async with self.client.pipeline(transaction=True) as pipe:
                for gone in expired:
                    pipe.hdel(key, str(gone))
                pipe.hset(key, str(grant.grant_id), grant.model_dump_json())
                await pipe.execute()
        except (RedisError, OSError) as exc:
            raise GrantsUnavailable(str(exc)) from exc

    async def remove(self, tenant: str, grant_id: uuid.UUID) -> bool:
        try:
            return bool(await self.client.hdel(self._key(tenant), str(grant_id)))
        except (RedisError, OSError) as exc:
            raise GrantsUnavailable(str(exc)) from exc


def _parsed(documents: Iterable[Any]) -> dict[str, Grant]:
    grants = {}
    for document in documents:
        try:
            grant = Grant.model_validate(document)
        except ValidationError:
            log.warning("a stored grant is not readable; left out (it grants nothing)")
            continue
        grants[str(grant.grant_id)] = grant
    return grants


def in_force(grant: Grant, now: datetime) -> bool:
    """Begun, not ended and not revoked at `now` (a held grant is never revoked: a
    revocation removes it; one rebuilt from the audit may be). Decided here, not in
    Rego: the disclosure's read set analysis (policy/readset.py) turns the decision
    cache off for a rule that compares the instant asked about with anything but a
    record's times, and the cache keys on the grants passed, so a grant stops at its
    end exactly."""
    return (
        grant.granted_at <= now
        and (grant.until is None or now < grant.until)
        and (grant.revoked_at is None or now < grant.revoked_at)
    )


def passed(grants: Iterable[Grant], question: DisclosureQuestion) -> tuple[dict[str, Any], ...]:
    """The grants a read passes to the disclosure policy (`input.grants`), as it reads
    them, in grant id order: those that `reach` the question."""
    return tuple(
        policy_view(g)
        for g in sorted(grants, key=lambda g: str(g.grant_id))
        if reaches(g, question)
    )


def reaches(grant: Grant, question: DisclosureQuestion) -> bool:
    """Whether a read passes `grant`: in force at the question's `now`, for its
    purpose, and its reader a hearer or a group (the policy knows who is in one)."""
    return (
        in_force(grant, question.now)
        and (grant.purpose is None or grant.purpose == question.purpose)
        and (
            grant.reader.startswith(GROUP)
            or grant.reader == question.asker.id
            or grant.reader in question.audience
        )
    )


def digest(views: Iterable[dict[str, Any]]) -> str | None:
    """What a read's audit entry keeps of the grants it passed (None: it passed none).
    A digest, not the grants: a read passes every group grant of its tenant, and any
    subject may give a hundred, so a copy in every entry would let one user grow every
    read's entry; a policy edit's impact rebuilds the grants from the consent audit
    and the grants held, and replays a read only when they hash to its digest."""
    listed = list(views)
    if not listed:
        return None
    text = json.dumps(listed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def policy_view(grant: Grant) -> dict[str, Any]:
    """A grant as the disclosure policy reads it (contract.PolicyGrant)."""
    view: dict[str, Any] = {
        "id": str(grant.grant_id),
        "tenant": grant.tenant,
        "subject": grant.subject,
        "reader": grant.reader,
        "categories": sorted(grant.categories),
        "since": iso(grant.granted_at),
    }
    if grant.purpose is not None:
        view["purpose"] = grant.purpose
    if grant.until is not None:
        view["until"] = iso(grant.until)
    return view


class Grants:
    """Give, revoke and list grants, and the grants in force for a read."""

    def __init__(
        self,
        store: GrantStore,
        policy: PolicyEngine,
        audit: AuditLog,
        locks: ChainLocks,
        per_subject: int = 100,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self.store = store
        self.policy = policy
        self.audit = audit
        self.locks = locks
        self.per_subject = per_subject
        self.clock = clock

    async def grant(self, who: Identity, request: GrantRequest) -> Grant:
        """Give a grant (ConsentRefused, every reason, when the consent policy says no)."""
        now = self.clock()
        subject = request.subject or who.id
        asked = ConsentGrant(
            subject=subject,
            reader=request.reader,
            categories=sorted(set(request.categories)),
            purpose=request.purpose,
            until=iso(request.until) if request.until is not None else None,
        )
        await self._decide(who, "grant", asked, None, request.reason, now)
        # Counted and added under one lock per subject (every replica's, with Redis):
        # grants given at once would each count without the others and all pass.
        async with self.locks.hold([bound_key("grants", who.tenant, subject)]) as held:
            grants = await self.store.load(who.tenant)
            # Ended grants are dropped as a new one is written: the store holds what is
            # in force, or soon will be, and is bounded by the subject's limit. The
            # subject's own count is of every grant about them (they list them all);
            # someone acting for them counts only those they gave, since the others'
            # grants are not theirs to list and a refusal must not count them. So a
            # subject holds at most the limit once for themselves and once for each who
            # may act for them.
            expired = [g.grant_id for g in grants if g.until is not None and g.until <= now]
            theirs = [
                g
                for g in grants
                if g.subject == subject
                and g.grant_id not in expired
                and who.id in (subject, g.granted_by)
            ]
            if len(theirs) >= self.per_subject:
                raise InvalidRequest(
                    "too many grants", [f"grants_per_subject:{self.per_subject}: revoke one first"]
                )
            grant = Grant(
                grant_id=uuid.uuid4(),
                tenant=who.tenant,
                subject=subject,
                reader=request.reader,
                categories=asked.categories,
                purpose=request.purpose,
                until=request.until,
                granted_by=who.id,
                granted_at=now,
            )
            await held.confirm()
            await self.store.add(grant, expired)
        self._audit(who, "grant", asked, grant.grant_id, [], request.reason, now)
        return grant

    async def revoke(self, who: Identity, grant_id: uuid.UUID) -> Grant:
        """Take a grant back: from the next read on, it discloses nothing. NotFound for
        a grant the asker may not revoke and is no party to (as for one that does not
        exist); ConsentRefused for one they are party to but may not revoke (its
        reader)."""
        now = self.clock()
        found = next((g for g in await self.store.load(who.tenant) if g.grant_id == grant_id), None)
        if found is None:
            raise NotFound("grant")
        asked = _asked(found)
        decision = await self.policy.consent(who, "revoke", asked, now)
        if not decision.allow and not _party(who, found):
            raise NotFound("grant")  # whether it exists is the parties' business
        if not decision.allow:
            self._audit(who, "revoke", asked, grant_id, list(decision.reasons), None, now)
            raise ConsentRefused("revoke refused", sorted(decision.reasons))
        if not await self.store.remove(who.tenant, grant_id):
            raise NotFound("grant")  # revoked meanwhile by someone else
        self._audit(who, "revoke", asked, grant_id, [], None, now)
        return found.model_copy(update={"revoked_by": who.id, "revoked_at": now})

    async def listed(self, who: Identity) -> GrantList:
        """The grants in force the asker gave, is the subject of, or is the reader of
        (by name: a group's grants are listed to their subject and granter)."""
        now = self.clock()
        grants = await self.store.load(who.tenant)
        mine = [g for g in grants if _party(who, g) and in_force(g, now)]
        return GrantList(grants=sorted(mine, key=lambda g: (g.granted_at, str(g.grant_id))))

    async def live(self, question: DisclosureQuestion) -> tuple[dict[str, Any], ...]:
        """The grants in force at the question's `now`, for its purpose, whose reader
        is a hearer or a group (the policy knows who is in one), as the policy reads
        them; none when the store cannot be read (a grant then discloses nothing:
        deny by default)."""
        try:
            grants = await self.store.load(question.asker.tenant)
        except GrantsUnavailable:
            log.warning("grants cannot be read: this read applies none")
            return ()
        return passed(grants, question)

    async def held(self, tenant: str) -> list[Grant]:
        """The grants the store holds now (GrantsUnavailable when it cannot be read)."""
        return await self.store.load(tenant)

    async def _decide(
        self,
        who: Identity,
        action: ConsentAction,
        asked: ConsentGrant,
        grant_id: uuid.UUID | None,
        reason: str | None,
        now: datetime,
    ) -> None:
        decision = await self.policy.consent(who, action, asked, now)
        if not decision.allow:
            self._audit(who, action, asked, grant_id, list(decision.reasons), reason, now)
            raise ConsentRefused(f"{action} refused", sorted(decision.reasons))

    def _audit(
        self,
        who: Identity,
        action: ConsentAction,
        asked: ConsentGrant,
        grant_id: uuid.UUID | None,
        refused: list[str],
        reason: str | None,
        now: datetime,
    ) -> None:
        self.audit.record(
            AuditEntry(
                decision_id=uuid.uuid4(),
                time=now,
                tenant=who.tenant,
                asker=who.id,
                audience=[],
                purpose="consent",
                route="grants",
                grant=AuditedGrant(
                    action=action,
                    grant_id=str(grant_id) if grant_id is not None else None,
                    subject=asked.subject,
                    reader=asked.reader,
                    categories=asked.categories,
                    purpose=asked.purpose,
                    until=datetime.fromisoformat(asked.until) if asked.until else None,
                    refused_because=refused,
                    reason=reason,
                ),
            )
        )


def _party(who: Identity, grant: Grant) -> bool:
    return who.id in (grant.subject, grant.reader, grant.granted_by)


def _asked(grant: Grant) -> ConsentGrant:
    return ConsentGrant(
        subject=grant.subject,
        reader=grant.reader,
        categories=grant.categories,
        purpose=grant.purpose,
        until=iso(grant.until) if grant.until is not None else None,
    )
