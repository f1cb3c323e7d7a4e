"""The audit spill file, built as `whose serve` builds it (`app.audit_log`), against
a real redis-server: during an outage a batch costs an append to the spill, never
a read of it; the replay reads it in bounded pieces once Redis answers, oldest
first, and a replay cut short repeats entries rather than lose them; the spill
never rotates (its bound is WHOSE_AUDIT_SPILL_MAX_BYTES)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tracemalloc
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis

from sidecar.audit import AuditedRecord, AuditEntry
from sidecar.services import audit_log
from sidecar.settings import Settings
from tests.conftest import free_port, start_redis, stop

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)
STREAM = "test:audit-spill"

# Paths whose opening for reading a test is watching for (an audit hook: real
# opens, nothing replaced). The hook stays installed; it only looks at this dict.
WATCHED: dict[str, list[str]] = {}


def _on_open(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not WATCHED or not isinstance(args[0], str | os.PathLike):
        return
    reads = WATCHED.get(os.fspath(args[0]))
    mode = args[1]
    if reads is not None and isinstance(mode, str) and mode.startswith("r"):
        reads.append(mode)


sys.addaudithook(_on_open)


def entry(minutes: int = 0, records: int = 10) -> AuditEntry:
    return AuditEntry(
        decision_id=uuid.uuid4(),
        time=T0 + timedelta(minutes=minutes),
        tenant="acme",
        asker="bob",
        audience=[],
        purpose="recall",
        withheld=[
            AuditedRecord(id=str(uuid.uuid4()), reasons=["audience_excludes:bob"])
            for _ in range(records)
        ],
    )


def line(e: AuditEntry) -> bytes:
    return orjson.dumps(e.model_dump(mode="json")) + b"\n"


def settings(data_dir: Path, url: str, **more: Any) -> Settings:
    return Settings(data_dir=data_dir, redis_url=url, audit_stream=STREAM, **more)


async def stream_ids(url: str) -> list[str]:
    # Read on a connection of its own without the audit client's 0.5 s socket timeout
    # (which is there to notice an outage fast): a page of the stream can take longer
    # on a loaded machine, and what is read here is the test's check, not the log's.
    reader = aioredis.from_url(url, socket_timeout=60)
    try:
        return await _paged_ids(reader)
    finally:
        await reader.aclose()


async def _paged_ids(client: aioredis.Redis) -> list[str]:
    # In pages: the whole 16 MiB stream in one reply is one long read.
    found: list[str] = []
    low = "-"
    while rows := await client.xrange(STREAM, min=low, count=1000):
        for _, fields in rows:
            assert fields is not None
            found.append(orjson.loads(fields[b"entry"])["decision_id"])
        last = rows[-1][0]
        assert isinstance(last, bytes)
        ms, _, seq = last.decode().partition("-")
        low = f"{ms}-{int(seq) + 1}"
    return found


class Redis:
    """A real redis-server that a test can stop and start again on the same port."""

    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        assert binary is not None
        self.binary, self.folder, self.port = binary, folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        _, self.process = start_redis(self.binary, self.folder, port=self.port)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None


@pytest.fixture
async def redis(tmp_path: Path) -> AsyncIterator[Redis]:
    server = Redis(tmp_path)
    yield server
    server.stop()


@pytest.fixture
async def client(redis: Redis) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    yield client
    await client.aclose()


async def test_an_outage_appends_to_the_spill_without_reading_it(
    tmp_path: Path, redis: Redis, client: aioredis.Redis
) -> None:
    # Redis is down for real: nothing listens on its port yet.
    log = audit_log(settings(tmp_path, redis.url), client)
    assert log.spill is not None
    reads = WATCHED.setdefault(str(log.spill.path), [])
    await log.start()
    try:
        during = [entry(i) for i in range(4)]
        for e in during:  # one batch each
            log.record(e)
            await log.flushed()
        assert log.spill.path.stat().st_size == sum(len(line(e)) for e in during)
        assert reads == [], "the spill file was read while Redis was still down"

        redis.start()
        after = entry(5)
        log.record(after)
        await log.flushed()
        assert reads, "the spill file was not replayed once Redis answered"
        assert not log.spill.path.exists()
        assert await stream_ids(redis.url) == [str(e.decision_id) for e in [*during, after]]
    finally:
        WATCHED.clear()
        await log.close()


async def test_a_replay_reads_the_spill_in_bounded_pieces(
    tmp_path: Path, redis: Redis, client: aioredis.Redis
) -> None:
    # 16 MiB spilled by an earlier run: the replay must not hold it all at once.
    spilled = [entry(i) for i in range(100)]
    copies = (16 * 2**20) // sum(len(line(e)) for e in spilled)
    (tmp_path / "audit-spill.jsonl").write_bytes(b"".join(map(line, spilled)) * copies)
    redis.start()
    log = audit_log(settings(tmp_path, redis.url), client)
    await log.start()
    try:
        after = entry(200)
        tracemalloc.start()
        log.record(after)
        await log.flushed()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        expected = [str(e.decision_id) for e in spilled] * copies + [str(after.decision_id)]
        assert await stream_ids(redis.url) == expected
        # A piece is about 1 MiB of spill, parsed; the whole file parsed is far above 100 MiB.
        assert peak < 24 * 2**20, f"the replay held {peak / 2**20:.0f} MiB"
    finally:
        tracemalloc.stop()
        await log.close()


async def test_a_replay_cut_short_repeats_entries_but_never_loses_or_reorders_them(
    tmp_path: Path, redis: Redis, client: aioredis.Redis
) -> None:
    spilled = [entry(i) for i in range(3000)]  # six replay pieces
    (tmp_path / "audit-spill.jsonl").write_bytes(b"".join(map(line, spilled)))
    redis.start()
    # A real fault part-way through the replay: Redis refuses writes (OOM) once its
    # memory passes a bound that the first pieces already reach.
    await client.config_set("maxmemory-policy", "noeviction")
    used = int((await client.info("memory"))["used_memory"])
    await client.config_set("maxmemory", used + 2 * 2**20)
    log = audit_log(settings(tmp_path, redis.url), client)
    await log.start()
    try:
        cut_short = entry(4000)
        log.record(cut_short)
        await log.flushed()
        assert log.spill is not None
        assert log.spill.path.exists()
        first_pass = await stream_ids(redis.url)
        assert 0 < len(first_pass) < len(spilled), "the fault did not cut the replay short"

        await client.config_set("maxmemory", 0)
        after = entry(4001)
        log.record(after)
        await log.flushed()
        assert not log.spill.path.exists()
        found = await stream_ids(redis.url)
        expected = [str(e.decision_id) for e in [*spilled, cut_short, after]]
        assert list(dict.fromkeys(found)) == expected  # first sightings: all, in order
        assert len(found) - len(expected) <= 500  # at most the piece that failed again
    finally:
        await log.close()


async def test_the_spill_file_never_rotates(tmp_path: Path, redis: Redis) -> None:
    # Redis is down (never started). A spill just under 64 MiB, the size at which the
    # JSONL audit file used to rotate; the spill's own bound is higher.
    client = aioredis.from_url(redis.url, socket_timeout=0.5, socket_connect_timeout=0.5)
    spill = tmp_path / "audit-spill.jsonl"
    filler = line(entry(0, records=300))
    full = filler * (64 * 2**20 // len(filler))
    spill.write_bytes(full + b"\n" * (64 * 2**20 - 100 - len(full)))
    log = audit_log(settings(tmp_path, redis.url, audit_spill_max_bytes=2**27), client)
    await log.start()
    try:
        during = [entry(1), entry(2)]
        for e in during:
            log.record(e)
            await log.flushed()
        assert not (tmp_path / "audit-spill.1.jsonl").exists(), "the spill rotated"
        with spill.open("rb") as f:
            f.seek(-sum(len(line(e)) for e in during), os.SEEK_END)
            assert f.read() == b"".join(map(line, during))
    finally:
        await log.close()
        await client.aclose()
