"""Reading the audit log (GET /v1/audit): the stream filters as it scans, within a
bounded scan; the SQLite file filters in SQL by its indexes; a bad entry or an odd
time range never fails the query."""

from __future__ import annotations

import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from sidecar.audit import AuditedRecord, AuditEntry, AuditQuery
from sidecar.audit.redis_sink import RedisSink
from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


def entry(tenant: str = "acme", minutes: float = 0, asker: str = "bob") -> AuditEntry:
    return AuditEntry(
        decision_id=uuid.uuid4(),
        time=T0 + timedelta(minutes=minutes),
        tenant=tenant,
        asker=asker,
        audience=[],
        purpose="recall",
        allowed=[AuditedRecord(id="r1")],
    )


def ids(entries: list[AuditEntry]) -> list[uuid.UUID]:
    return [e.decision_id for e in entries]


@pytest.fixture
async def stream(redis_url: str) -> AsyncIterator[RedisSink]:
    client = aioredis.from_url(redis_url)
    sink = RedisSink(client, f"test:audit:{uuid.uuid4().hex}", maxlen=100_000)
    yield sink
    await client.delete(sink.stream)
    await client.aclose()


async def test_an_unreadable_stream_entry_is_skipped_not_a_failed_query(
    stream: RedisSink, caplog: pytest.LogCaptureFixture
) -> None:
    older, newer = entry(minutes=0), entry(minutes=1)
    await stream.append([older])
    # What another writer, an old version or a hand-made XADD may have left.
    await stream.client.xadd(stream.stream, {"entry": b"{not json"})
    await stream.client.xadd(stream.stream, {"entry": b'{"tenant": "acme"}'})
    await stream.client.xadd(stream.stream, {"something": b"else"})
    await stream.append([newer])
    log = AuditLog(stream, None, queue_size=10)
    with caplog.at_level(logging.WARNING, logger="sidecar.audit"):
        found = await log.query(AuditQuery(tenant="acme"))
    assert ids(found) == [newer.decision_id, older.decision_id]
    assert "3 unreadable" in caplog.text


async def test_times_before_1970_clamp_to_the_start_of_the_stream(stream: RedisSink) -> None:
    written = entry(minutes=0)
    await stream.append([written])
    log = AuditLog(stream, None, queue_size=10)
    before_1970 = datetime(1969, 7, 20, tzinfo=UTC)
    assert ids(await log.query(AuditQuery(tenant="acme", since=before_1970))) == [
        written.decision_id
    ]
    assert await log.query(AuditQuery(tenant="acme", until=before_1970)) == []
    assert await log.query(AuditQuery(tenant="acme", since=before_1970, until=before_1970)) == []


async def test_a_stream_query_pages_through_the_range_filtering_as_it_reads(
    stream: RedisSink,
) -> None:
    written = [entry("acme" if i % 3 == 0 else "globex", i / 1000) for i in range(3000)]
    # Six entries a millisecond (explicit ids): the page boundaries (every 500 entries)
    # fall both on a millisecond's first id and part-way through one.
    async with stream.client.pipeline(transaction=False) as pipe:
        for i, e in enumerate(written):
            entry_id = f"{1_000_000 + i // 6}-{i % 6}"
            pipe.xadd(stream.stream, {"entry": e.model_dump_json()}, id=entry_id)
        await pipe.execute()
    log = AuditLog(stream, None, queue_size=10)
    acme = [e for e in reversed(written) if e.tenant == "acme"]
    globex = [e for e in reversed(written) if e.tenant == "globex"]

    # Every entry is one tenant's or the other's: a page boundary that skipped or
    # repeated one shows in one of the two.
    assert ids(await log.query(AuditQuery(tenant="acme", limit=1000))) == ids(acme)
    assert ids(await log.query(AuditQuery(tenant="globex", limit=2000))) == ids(globex)
    # Other tenants' entries count towards the scan bound, never towards the limit.
    assert ids(await log.query(AuditQuery(tenant="acme", limit=1000), scan=1500)) == ids(acme[:500])
    assert ids(await log.query(AuditQuery(tenant="acme", limit=7))) == ids(acme[:7])


async def test_a_busy_tenant_does_not_hide_another_tenants_older_entries_in_the_file_log(
    tmp_path: Path,
) -> None:
    sink = SqliteSink(tmp_path / "audit.sqlite3")
    acme = [entry("acme", minutes=i) for i in range(3)]
    # Then globex is busy: far more entries than the stream's scan bound lets one query read.
    globex = [entry("globex", minutes=10 + i / 1000) for i in range(5000)]
    await sink.append([*acme, *globex])
    log = AuditLog(sink, None, queue_size=10)

    # The file is indexed by tenant: no scan bound, globex's burst is never read.
    assert ids(await log.query(AuditQuery(tenant="acme"), scan=1000)) == ids(acme[::-1])
    query = AuditQuery(tenant="acme", until=T0 + timedelta(minutes=5))
    assert ids(await log.query(query, scan=1000)) == ids(acme[::-1])
    query = AuditQuery(tenant="acme", since=T0 + timedelta(minutes=1), until=T0 + timedelta(1))
    assert ids(await log.query(query, scan=10_000)) == ids(acme[:0:-1])
    await log.close()


async def test_an_unreadable_file_entry_is_skipped_and_only_when_in_range(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.sqlite3"
    sink = SqliteSink(path)
    old = entry(minutes=-24 * 60)
    recent = [entry(minutes=i) for i in range(3)]
    await sink.append([old, *recent[:1]])
    # What a hand edit, another program or an older version may have left: a row
    # between `old` and the recent entries whose JSON cannot be read.
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO entries (tenant, time_us, asker, purpose, body) VALUES (?, ?, ?, ?, ?)",
            ("acme", int((T0 - timedelta(hours=1)).timestamp() * 1e6), "bob", "recall", "{a row"),
        )
    db.close()
    await sink.append(recent[1:])
    log = AuditLog(sink, None, queue_size=10)
    with caplog.at_level(logging.WARNING, logger="sidecar.audit"):
        found = await log.query(AuditQuery(tenant="acme", since=T0))
    assert ids(found) == ids(recent[::-1])
    assert "unreadable" not in caplog.text  # the bad row is older than `since`: never read
    with caplog.at_level(logging.WARNING, logger="sidecar.audit"):
        assert ids(await log.query(AuditQuery(tenant="acme"))) == ids([*recent[::-1], old])
    assert "1 unreadable" in caplog.text
    # The limit still holds across the skipped row: the next readable one takes its place.
    assert ids(await log.query(AuditQuery(tenant="acme", limit=4))) == ids([*recent[::-1], old])
    await log.close()
