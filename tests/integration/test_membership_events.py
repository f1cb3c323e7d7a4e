"""Membership events kept beside the store: in Redis (every replica sees them) or in a
file per conversation; each tenant's conversations apart; a batch cut short is read
without its partial line; Redis down is `store_unavailable`, nothing half-written."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from sidecar.errors import StoreUnavailable
from sidecar.messages import MembershipEvent
from sidecar.writes.membership import EventLog, FileEvents, RedisEvents, members_at

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def joined(person: str) -> MembershipEvent:
    return MembershipEvent(
        id=uuid.uuid4(),
        source_id="kitchen",
        writer="extractor-bot",
        recorded_at=T0,
        person=person,
        change="join",
        at=T0,
    )


async def round_trip(log: EventLog, reader: EventLog, tenant: str) -> None:
    await log.append(tenant, "kitchen", [joined("ana"), joined("ben")])
    await log.append(tenant, "kitchen", [joined("cai")])
    # Another replica (another client of the same store) sees them, in order.
    events = await reader.events(tenant, "kitchen")
    assert [e.person for e in events] == ["ana", "ben", "cai"]
    assert members_at(events, T0) == ["ana", "ben", "cai"]
    # Another tenant's conversation of the same name, and another conversation: empty.
    assert await reader.events(f"{tenant}-other", "kitchen") == []
    assert await reader.events(tenant, "hall") == []


async def test_redis_events_are_seen_by_every_replica(redis_url: str) -> None:
    one, two = aioredis.from_url(redis_url), aioredis.from_url(redis_url)
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    try:
        await round_trip(RedisEvents(one), RedisEvents(two), tenant)
    finally:
        await one.aclose()
        await two.aclose()


async def test_file_events_round_trip_and_skip_a_line_cut_short(tmp_path: Path) -> None:
    log = FileEvents(tmp_path / "conversations")
    await round_trip(log, FileEvents(tmp_path / "conversations"), "acme")
    [path] = (tmp_path / "conversations").glob("*.jsonl")
    with path.open("a") as file:
        file.write(joined("dee").model_dump_json()[:40])  # a write cut short
    assert [e.person for e in await log.events("acme", "kitchen")] == ["ana", "ben", "cai"]
    # The next batch starts on a line of its own.
    await log.append("acme", "kitchen", [joined("eli")])
    events = await log.events("acme", "kitchen")
    assert [e.person for e in events] == ["ana", "ben", "cai", "eli"]


async def test_redis_down_is_store_unavailable() -> None:
    # A port nothing listens on: every Redis call fails for real.
    client = aioredis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    try:
        with pytest.raises(StoreUnavailable):
            await RedisEvents(client).append("acme", "kitchen", [joined("ana")])
        with pytest.raises(StoreUnavailable):
            await RedisEvents(client).events("acme", "kitchen")
    finally:
        await client.aclose()
