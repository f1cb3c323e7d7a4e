"""Who is in a conversation, over time: membership events, and the hearers they give
an observation posted without participants.

An extractor of a conversation sees "Kim left" and "Kim is back", not a list of who
heard each turn. So a conversation (its `source_id`) is opened with members, and
members join and leave at instants; an observation in it without `participants` is
heard by its members at `said_at` (writes/observations.py then makes it what it would
be with those participants listed: the same records, the same write policy). Late
joiners do not hear earlier turns, and whoever left does not hear later ones. A
correction names the event it corrects and is itself an event (who may make one is
the conversations policy's, `whose.conversations`); the corrected event no longer
counts. Records already written keep the audience they were written with: a chain's
audience is fixed (docs/design.md §4), so a correction shapes what is posted after it.

Membership events are kept beside the memory store, not in it (docs/design.md §6,
"Conversations"): they are nobody's claim and no read path shows them; they only
shape the audience of later observations, which the ingest policy then decides like
any listed participants. Redis when configured (every replica sees them), else a file
per conversation under the data directory (one process owns it). Resolving hearers is
asked of the policy with nothing but the writer before membership is read, so whether
a writer may use membership never depends on who is in a conversation.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Protocol

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from sidecar.audit import AuditedMembership, AuditedMembershipChange, AuditEntry
from sidecar.audit.writer import AuditLog
from sidecar.auth.identity import Identity
from sidecar.errors import InvalidRequest, StoreUnavailable, WriteRefused
from sidecar.messages import MembershipChange, MembershipEvent, Observation
from sidecar.policy.contract import ConversationsInput, PolicyMembershipEvent
from sidecar.policy.engine import PolicyEngine
from sidecar.record import iso
from sidecar.writes.locks import ChainLocks, bound_key

# Events one writer may record in one conversation (Settings.conversation_max_events):
# every observation reads all of a conversation's events, so this bounds its cost per
# writer of membership.
MAX_EVENTS = 10_000


class EventLog(Protocol):
    """The membership events of each (tenant, conversation), in the order recorded."""

    async def events(self, tenant: str, conversation: str) -> list[MembershipEvent]: ...

    async def append(self, tenant: str, conversation: str, events: list[MembershipEvent]) -> None:
        """All of them, or (StoreUnavailable) none."""


def _name(tenant: str, conversation: str) -> str:
    # Tenant and conversation are any strings: hashed, they make one safe name.
    return hashlib.sha256(f"{tenant}\x00{conversation}".encode()).hexdigest()


class FileEvents:
    """A JSON-lines file per conversation under a folder (one process owns the data dir)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = asyncio.Lock()

    def _path(self, tenant: str, conversation: str) -> Path:
        return self.folder / f"{_name(tenant, conversation)}.jsonl"

    async def events(self, tenant: str, conversation: str) -> list[MembershipEvent]:
        path = self._path(tenant, conversation)
        text = await asyncio.to_thread(lambda: path.read_text() if path.exists() else "")
        return _parsed(text.splitlines())

    async def append(self, tenant: str, conversation: str, events: list[MembershipEvent]) -> None:
        path = self._path(tenant, conversation)
        lines = "".join(event.model_dump_json() + "\n" for event in events)

        def write() -> None:
            self.folder.mkdir(parents=True, exist_ok=True)
            # One write of every line: a batch is there whole, or (cut short) its last
            # line is partial and skipped when read; the next batch starts on a line of
            # its own, never glued to the partial one.
            with path.open("a+b") as file:
                cut = file.tell() > 0 and (file.seek(-1, 2), file.read(1))[1] != b"\n"
                file.write((b"\n" if cut else b"") + lines.encode())

        async with self._lock:
            try:
                await asyncio.to_thread(write)
            except OSError as exc:
                raise StoreUnavailable(f"membership events: {exc}") from exc


class RedisEvents:
    """A Redis list per conversation, seen by every replica."""

    def __init__(self, client: aioredis.Redis, prefix: str = "whose:membership") -> None:
        self.client = client
        self.prefix = prefix

    async def events(self, tenant: str, conversation: str) -> list[MembershipEvent]:
        try:
            raw = await self.client.lrange(f"{self.prefix}:{_name(tenant, conversation)}", 0, -1)
        except RedisError as exc:
            raise StoreUnavailable(f"membership events: {exc}") from exc
        return _parsed([r.decode() if isinstance(r, bytes) else str(r) for r in raw])

    async def append(self, tenant: str, conversation: str, events: list[MembershipEvent]) -> None:
        try:
            await self.client.rpush(
                f"{self.prefix}:{_name(tenant, conversation)}",
                *[event.model_dump_json() for event in events],
            )
        except RedisError as exc:
            raise StoreUnavailable(f"membership events: {exc}") from exc


def _parsed(lines: Sequence[str]) -> list[MembershipEvent]:
    events = []
    for line in lines:
        try:
            events.append(MembershipEvent.model_validate(json.loads(line)))
        except (ValueError, ValidationError):
            continue  # a line a write cut short
    return events


def members_at(events: Sequence[MembershipEvent], at: datetime) -> list[str]:
    """Who was in the conversation at `at`: each person's latest join or leave by then
    (a join and a leave at one instant: the one recorded later), corrected events left
    out, in name order."""
    corrected = {e.corrects for e in events if e.corrects is not None}
    state: dict[str, tuple[datetime, int, str]] = {}
    for order, event in enumerate(events):
        if event.id in corrected or event.change == "none" or event.at > at:
            continue
        seen = state.get(event.person)
        if seen is None or (event.at, order) > seen[:2]:
            state[event.person] = (event.at, order, event.change)
    return sorted(p for p, (_, _, change) in state.items() if change == "join")


class Membership:
    """Membership events recorded through the policy, and the hearers they give."""

    def __init__(
        self,
        log: EventLog,
        policy: PolicyEngine,
        locks: ChainLocks,
        audit: AuditLog | None = None,
        max_events: int = MAX_EVENTS,
    ) -> None:
        self.log = log
        # A writer's events in a conversation are counted and appended under their lock.
        self.locks = locks
        self.policy = policy
        self.max_events = max_events
        # Every batch stored or refused by policy is audited: who was said to be present,
        # and by whom, decides who hears what (a security team reviews it like a write).
        self.audit = audit

    async def record(
        self,
        who: Identity,
        conversation: str,
        changes: Sequence[MembershipChange],
        now: datetime,
    ) -> list[MembershipEvent]:
        """Store every change, or (WriteRefused with every reason per change,
        InvalidRequest) none."""
        # What a correction names is read first, outside any lock: events are only ever
        # appended, so it is still there when the batch is.
        known = await self.log.events(who.tenant, conversation) if _corrects(changes) else []
        by_id = {e.id: e for e in known}
        unknown = [
            i for i, c in enumerate(changes) if c.corrects is not None and c.corrects not in by_id
        ]
        if unknown:
            # Ids are the writer's tenant's; a stranger's guess finds nothing.
            raise InvalidRequest("changes", [f"{i}.corrects_no_event" for i in unknown])
        refusals: dict[int, list[str]] = {}
        for index, change in enumerate(changes):
            corrected = by_id.get(change.corrects) if change.corrects else None
            decision = await self.policy.conversation(
                ConversationsInput(
                    writer=who.policy_view(),
                    action="record",
                    conversation=conversation,
                    event=_policy_event(change),
                    corrected=_policy_event(corrected, corrected.writer) if corrected else None,
                )
            )
            if not decision.allow:
                refusals[index] = list(decision.reasons)
        if refusals:
            self._audit(who, conversation, changes, now, refused=refusals)
            raise WriteRefused([{"index": i, "reasons": r} for i, r in refusals.items()])
        events = [
            MembershipEvent(
                **change.model_dump(),
                id=uuid.uuid4(),
                source_id=conversation,
                writer=who.id,
                recorded_at=now,
            )
            for change in changes
        ]
        # Counted and appended under the writer's lock in this conversation (every
        # replica's, with Redis), and only that: the policy's calls stay outside it, and
        # other writers' appends, which the count does not read, do not wait on it. The
        # writer's own events, not the conversation's: the policy lets anyone record
        # their own leaving, so a bound on the conversation's count told anyone naming
        # it how many events others had recorded (and let one account fill it for
        # everyone).
        key = bound_key("membership", who.tenant, conversation, who.id)
        async with self.locks.hold([key]) as held:
            present = await self.log.events(who.tenant, conversation)
            theirs = sum(1 for e in present if e.writer == who.id)
            if theirs + len(changes) > self.max_events:
                raise InvalidRequest("membership", [f"at_most_{self.max_events}_events"])
            await held.confirm()
            await self.log.append(who.tenant, conversation, events)
        self._audit(who, conversation, changes, now, events=events)
        return events

    def _audit(
        self,
        who: Identity,
        conversation: str,
        changes: Sequence[MembershipChange],
        now: datetime,
        events: Sequence[MembershipEvent] = (),
        refused: dict[int, list[str]] | None = None,
    ) -> None:
        if self.audit is None:
            return
        reasons = refused or {}
        audited = [
            AuditedMembershipChange(
                person=change.person,
                change=change.change,
                at=change.at,
                corrects=str(change.corrects) if change.corrects else None,
                event_id=str(events[i].id) if events else None,
                refused_because=sorted(reasons.get(i, [])),
            )
            for i, change in enumerate(changes)
        ]
        self.audit.record(
            AuditEntry(
                decision_id=uuid.uuid4(),
                time=now,
                tenant=who.tenant,
                asker=who.id,
                audience=[],
                purpose="membership",
                route="conversations.membership",
                error="write_refused" if refused else None,
                membership=AuditedMembership(conversation=conversation, changes=audited),
            )
        )

    async def hearers(
        self, who: Identity, observations: Sequence[Observation], now: datetime
    ) -> list[Observation]:
        """Each observation without participants, with its conversation's members at
        said_at as participants; the others as they are. For a writer the policy does
        not let resolve hearers (one who may not attest presence), an observation
        without participants is heard by its speaker alone, as it always was: asked
        before membership is read, so nothing about a conversation's members shows."""
        if all(o.participants is not None for o in observations):
            return list(observations)
        writer = who.policy_view()
        # One decision and one read of the events per conversation of the batch.
        logs: dict[str, list[MembershipEvent]] = {}
        resolved = []
        for observation in observations:
            if observation.participants is None:
                conversation = observation.source_id
                if conversation not in logs:
                    decision = await self.policy.conversation(
                        ConversationsInput(
                            writer=writer, action="resolve", conversation=conversation
                        )
                    )
                    logs[conversation] = (
                        await self.log.events(who.tenant, conversation) if decision.allow else []
                    )
                members = members_at(logs[conversation], observation.said_at or now)
                observation = observation.model_copy(update={"participants": members})
            resolved.append(observation)
        return resolved


def _policy_event(change: MembershipChange, writer: str | None = None) -> PolicyMembershipEvent:
    return PolicyMembershipEvent(
        person=change.person, change=change.change, at=iso(change.at), writer=writer
    )


def _corrects(changes: Sequence[MembershipChange]) -> bool:
    return any(change.corrects is not None for change in changes)
