"""The audit log's writer: never blocks a request, counts what it loses, keeps
entries through a Redis outage, and reads newest first with filters."""

from __future__ import annotations

import asyncio
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from sidecar.audit import AuditedRecord, AuditEntry, AuditQuery
from sidecar.audit.redis_sink import RedisSink
from sidecar.audit.sqlite_sink import SqliteSink
from sidecar.audit.writer import AuditLog
from tests.conftest import free_port, start_redis, stop

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


def counted(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def entry(
    asker: str = "bob", minutes: int = 0, allowed: str = "", withheld: str = ""
) -> AuditEntry:
    return AuditEntry(
        decision_id=uuid.uuid4(),
        time=T0 + timedelta(minutes=minutes),
        tenant="acme",
        asker=asker,
        audience=[],
        purpose="recall",
        allowed=[AuditedRecord(id=allowed)] if allowed else [],
        withheld=[AuditedRecord(id=withheld, reasons=["audience_excludes:bob"])]
        if withheld
        else [],
    )


async def test_a_full_queue_drops_and_counts_without_blocking(tmp_path: Path) -> None:
    log = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=2)
    dropped = counted("whose_audit_dropped_total")
    for _ in range(5):
        log.record(entry())  # the writer is not running: the queue fills up
    assert counted("whose_audit_dropped_total") - dropped == 3


async def test_file_sink_reads_newest_first_and_filters(tmp_path: Path) -> None:
    log = AuditLog(SqliteSink(tmp_path / "audit.sqlite3"), None, queue_size=100)
    await log.start()
    written = [
        entry("bob", 0, withheld="r1"),
        entry("alice", 1, allowed="r1"),
        entry("bob", 2, allowed="r2"),
        entry("bob", 3, withheld="r2"),
    ]
    for e in written:
        log.record(e)
    await log.close()

    queries = {
        "all": AuditQuery(tenant="acme"),
        "bob": AuditQuery(tenant="acme", asker="bob"),
        "r1_withheld": AuditQuery(tenant="acme", record="r1", outcome="withheld"),
        "allowed": AuditQuery(tenant="acme", outcome="allowed"),
        "since": AuditQuery(tenant="acme", since=T0 + timedelta(minutes=2)),
        "other_tenant": AuditQuery(tenant="globex"),
        "limit": AuditQuery(tenant="acme", limit=1),
    }
    found = {name: await log.query(q) for name, q in queries.items()}
    d = [e.decision_id for e in written]
    assert [e.decision_id for e in found["all"]] == d[::-1]
    assert [e.decision_id for e in found["bob"]] == [d[3], d[2], d[0]]
    assert [e.decision_id for e in found["r1_withheld"]] == [d[0]]
    assert [e.decision_id for e in found["allowed"]] == [d[2], d[1]]
    assert [e.decision_id for e in found["since"]] == [d[3], d[2]]
    assert found["other_tenant"] == []
    assert [e.decision_id for e in found["limit"]] == [d[3]]


async def test_file_sink_keeps_at_most_its_bound_of_entries(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "audit.sqlite3", max_entries=100)
    written = [entry(minutes=i) for i in range(250)]
    try:
        for i in range(0, 250, 10):
            await sink.append(written[i : i + 10])
        kept = await sink.newest_first(AuditQuery(tenant="acme", limit=1000), scan=10)
    finally:
        await sink.close()
    assert 0 < len(kept) <= 100
    assert [e.decision_id for e in kept] == [e.decision_id for e in written[::-1][: len(kept)]]


async def test_redis_outage_spills_locally_then_replays_in_order(tmp_path: Path) -> None:
    binary = shutil.which("redis-server")
    assert binary is not None
    port = free_port()
    url, redis_process = start_redis(binary, tmp_path, port=port)
    client = aioredis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
    log = AuditLog(
        RedisSink(client, "test:audit", maxlen=1000), tmp_path / "spill.jsonl", queue_size=100
    )
    assert log.spill is not None
    spill = log.spill
    await log.start()
    try:
        before = entry("bob", 0)
        log.record(before)
        await log.flushed()
        stop(redis_process)
        buffered = counted("whose_audit_buffered_total")
        during = [entry("bob", 1), entry("bob", 2)]
        for e in during:
            log.record(e)
        await log.flushed()
        assert counted("whose_audit_buffered_total") - buffered == 2
        assert spill.path.exists()

        _, redis_process = start_redis(binary, tmp_path, port=port)  # empty: no persistence
        after = entry("bob", 3)
        log.record(after)
        await log.flushed()
        assert not spill.path.exists()
        found = await log.query(AuditQuery(tenant="acme"))
        assert [e.decision_id for e in found] == [after.decision_id] + [
            e.decision_id for e in reversed(during)
        ]
    finally:
        await log.close()
        await client.aclose()
        stop(redis_process)


async def test_redis_stream_is_trimmed_to_its_bound(redis_url: str) -> None:
    client = aioredis.from_url(redis_url)
    stream = f"test:trim:{uuid.uuid4().hex}"
    sink = RedisSink(client, stream, maxlen=100)
    try:
        for _ in range(10):
            await sink.append([entry() for _ in range(100)])
        # Approximate trimming keeps about maxlen (whole macro nodes): far below 1000.
        assert await client.xlen(stream) < 300
    finally:
        await client.delete(stream)
        await client.aclose()


@pytest.mark.parametrize("outcome", ["allowed", "withheld"])
def test_outcome_filter_without_a_record_needs_some_record_with_that_outcome(outcome: str) -> None:
    query = AuditQuery(tenant="acme", outcome=outcome)
    assert not query.matches(entry())


async def test_the_writer_batches_but_never_keeps_a_reader_waiting(tmp_path: Path) -> None:
    sink = SqliteSink(tmp_path / "audit.sqlite3")
    log = AuditLog(sink, None, queue_size=100, linger_s=30)
    await log.start()
    try:
        log.record(entry("bob", 0))
        log.record(entry("alice", 1))
        # The writer is lingering for more; an audit read must not wait it out.
        await asyncio.wait_for(log.flushed(), timeout=5)
        written = await sink.newest_first(AuditQuery(tenant="acme"), scan=10)
        assert {e.asker for e in written} == {"bob", "alice"}
    finally:
        await log.close()


async def test_the_spill_file_is_bounded_and_what_it_cannot_hold_is_counted(
    tmp_path: Path,
) -> None:
    # Redis unreachable for real: nothing listens on the port.
    client = aioredis.from_url(
        f"redis://127.0.0.1:{free_port()}", socket_timeout=0.5, socket_connect_timeout=0.5
    )
    log = AuditLog(
        RedisSink(client, "test:audit", maxlen=1000),
        tmp_path / "spill.jsonl",
        queue_size=100,
        spill_max_bytes=1,
    )
    assert log.spill is not None
    spill = log.spill
    await log.start()
    try:
        buffered = counted("whose_audit_buffered_total")
        dropped = counted("whose_audit_dropped_total")
        log.record(entry("bob", 0))
        await log.flushed()
        size = spill.path.stat().st_size
        assert counted("whose_audit_buffered_total") - buffered == 1
        for i in range(1, 4):
            log.record(entry("bob", i))
            await log.flushed()
        assert spill.path.stat().st_size == size  # full: nothing more written
        assert counted("whose_audit_dropped_total") - dropped == 3
    finally:
        await log.close()
        await client.aclose()
