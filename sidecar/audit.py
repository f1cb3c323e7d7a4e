"""The disclosure audit log: one entry per request that asked the policy.

Requests never wait for it. `record()` only enqueues (a full queue drops the
entry and counts it); a background task writes batches to a Redis Stream,
trimmed to about `maxlen` entries, or to a JSONL file under the data directory
when there is no Redis. While Redis is unreachable, entries go to a local spill
file (counted as buffered) and are moved to the stream once Redis answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol
from uuid import UUID

import orjson
import redis.asyncio as aioredis
from pydantic import BaseModel, Field
from redis.exceptions import RedisError

from sidecar import metrics

log = logging.getLogger(__name__)

Outcome = Literal["allowed", "withheld", "policy_unavailable"]
_BATCH = 500


class AuditedRecord(BaseModel):
    id: str
    usable_as: str | None = None
    reasons: list[str] = Field(default_factory=list)
    # The OPA decision that produced this answer (an earlier one when cached).
    opa_decision_id: str | None = None
    cached: bool = False


class AuditEntry(BaseModel):
    decision_id: UUID
    time: datetime
    tenant: str
    asker: str
    audience: list[str]
    purpose: str
    route: str | None = None
    policy_revision: str | None = None
    opa_decision_ids: list[str] = Field(default_factory=list)
    # What the store was told to filter on (whose.pushdown), where the path used it.
    pushdown: dict[str, Any] | None = None
    allowed: list[AuditedRecord] = Field(default_factory=list)
    withheld: list[AuditedRecord] = Field(default_factory=list)
    error: str | None = None


class AuditQuery(BaseModel):
    tenant: str
    asker: str | None = None
    record: str | None = None
    outcome: Outcome | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 100

    def matches(self, entry: AuditEntry) -> bool:
        if entry.tenant != self.tenant or (self.asker and entry.asker != self.asker):
            return False
        if (self.since and entry.time < self.since) or (self.until and entry.time > self.until):
            return False
        if self.outcome == "policy_unavailable":
            return entry.error == "policy_unavailable" and self._names_record(entry.withheld)
        if self.outcome == "allowed":
            return self._names_record(entry.allowed, required=True)
        if self.outcome == "withheld":
            return self._names_record(entry.withheld, required=True)
        return self._names_record(entry.allowed + entry.withheld)

    def _names_record(self, records: list[AuditedRecord], required: bool = False) -> bool:
        if self.record is None:
            return bool(records) or not required
        return any(r.id == self.record for r in records)


class Sink(Protocol):
    async def append(self, entries: list[AuditEntry]) -> None: ...

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]: ...


class RedisSink:
    """A Redis Stream, trimmed to about `maxlen` entries (approximate trim is O(1))."""

    def __init__(self, client: aioredis.Redis, stream: str, maxlen: int) -> None:
        self.client = client
        self.stream = stream
        self.maxlen = maxlen

    async def append(self, entries: list[AuditEntry]) -> None:
        async with self.client.pipeline(transaction=False) as pipe:
            for entry in entries:
                pipe.xadd(
                    self.stream,
                    {"entry": entry.model_dump_json()},
                    maxlen=self.maxlen,
                    approximate=True,
                )
            await pipe.execute()

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        # Stream ids start with the append time in ms: a cheap first cut on time.
        high = f"{int(query.until.timestamp() * 1000)}" if query.until else "+"
        low = f"{int(query.since.timestamp() * 1000)}" if query.since else "-"
        rows = await self.client.xrevrange(self.stream, max=high, min=low, count=scan) or []
        return [AuditEntry.model_validate_json(fields[b"entry"]) for _, fields in rows if fields]


class FileSink:
    """JSON lines, rotated once at `max_bytes` (one previous file kept)."""

    def __init__(self, path: Path, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = path
        self.max_bytes = max_bytes

    async def append(self, entries: list[AuditEntry]) -> None:
        lines = b"".join(orjson.dumps(e.model_dump(mode="json")) + b"\n" for e in entries)
        await asyncio.to_thread(self._write, lines)

    def _write(self, lines: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_size + len(lines) > self.max_bytes:
                os.replace(self.path, self.path.with_suffix(".1.jsonl"))
        with self.path.open("ab") as out:
            out.write(lines)

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        return await asyncio.to_thread(self._read, scan)

    def _read(self, scan: int) -> list[AuditEntry]:
        entries: list[AuditEntry] = []
        for line in _lines_backwards(self.path):
            if len(entries) >= scan:
                break
            with contextlib.suppress(ValueError):
                entries.append(AuditEntry.model_validate_json(line))
        return entries

    def read_all(self) -> list[AuditEntry]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        entries: list[AuditEntry] = []
        for line in raw.splitlines():
            with contextlib.suppress(ValueError):
                entries.append(AuditEntry.model_validate_json(line))
        return entries

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


def _lines_backwards(path: Path, block: int = 64 * 1024) -> Iterator[bytes]:
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        position = handle.seek(0, os.SEEK_END)
        tail = b""
        while position > 0:
            step = min(block, position)
            position -= step
            handle.seek(position)
            lines = (handle.read(step) + tail).split(b"\n")
            tail = lines.pop(0)
            yield from (line for line in reversed(lines) if line)
        if tail:
            yield tail


class AuditLog:
    def __init__(
        self,
        sink: Sink,
        spill: FileSink | None,
        queue_size: int,
        linger_s: float = 0.05,
        spill_max_bytes: int = 32 * 2**20,
    ) -> None:
        self.sink = sink
        self.spill_max_bytes = spill_max_bytes
        # How long the writer waits for more entries after the first: one write per
        # batch instead of one thread hop (file) or round trip (Redis) per request.
        self.linger_s = linger_s
        # Only a Redis sink has a spill file: the file sink is already local.
        self.spill = spill
        self._queue: asyncio.Queue[AuditEntry | None] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self._spilled = False
        # Callers waiting in `flushed()`: the writer does not linger for them.
        self._flushing = 0
        self._flush_now = asyncio.Event()

    def record(self, entry: AuditEntry) -> None:
        try:
            self._queue.put_nowait(entry)
        except asyncio.QueueFull:
            metrics.AUDIT_DROPPED.inc()
            log.warning("audit queue full; entry dropped", extra={"decision_id": entry.decision_id})

    async def start(self) -> None:
        if self.spill is not None and self.spill.path.exists():
            self._spilled = True
        self._task = asyncio.create_task(self._run(), name="whose-audit-writer")

    async def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (within the timeout), then stop."""
        if self._task is None:
            return
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        except TimeoutError:
            self._task.cancel()
            metrics.AUDIT_DROPPED.inc(self._queue.qsize())
        self._task = None

    async def flushed(self) -> None:
        """Wait until everything queued so far is written (audit reads, tests, shutdown)."""
        self._flushing += 1
        self._flush_now.set()
        try:
            await self._queue.join()
        finally:
            self._flushing -= 1

    async def query(self, query: AuditQuery, scan: int = 10_000) -> list[AuditEntry]:
        found = [e for e in await self.sink.newest_first(query, scan) if query.matches(e)]
        return found[: query.limit]

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            if first is not None and self._queue.qsize() < _BATCH and not self._flushing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._flush_now.wait(), self.linger_s)
            self._flush_now.clear()
            batch = [first]
            while len(batch) < _BATCH and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            entries = [e for e in batch if e is not None]
            try:
                if entries:
                    await self._write(entries)
            finally:
                for _ in batch:
                    self._queue.task_done()
            if None in batch:
                return

    async def _write(self, entries: list[AuditEntry]) -> None:
        try:
            if self._spilled and self.spill is not None:
                # Older entries first, so the stream stays in time order.
                await self._replay(self.spill)
            await self.sink.append(entries)
        except (RedisError, OSError) as exc:
            await self._spill(entries, exc)

    async def _spill(self, entries: list[AuditEntry], exc: Exception) -> None:
        if self.spill is None:
            metrics.AUDIT_DROPPED.inc(len(entries))
            log.error("audit write failed; %d entries dropped: %s", len(entries), exc)
            return
        if await asyncio.to_thread(self.spill.size) >= self.spill_max_bytes:
            metrics.AUDIT_DROPPED.inc(len(entries))
            log.error("audit spill file full; %d entries dropped: %s", len(entries), exc)
            return
        try:
            await self.spill.append(entries)
        except OSError as spill_exc:
            metrics.AUDIT_DROPPED.inc(len(entries))
            log.error("audit spill failed; %d entries dropped: %s", len(entries), spill_exc)
            return
        self._spilled = True
        metrics.AUDIT_BUFFERED.inc(len(entries))
        log.warning("audit sink unreachable; %d entries spilled locally: %s", len(entries), exc)

    async def _replay(self, spill: FileSink) -> None:
        # Cleared only after every entry is in the stream: a failure part-way
        # duplicates some entries on the next replay rather than losing them.
        entries = await asyncio.to_thread(spill.read_all)
        for start in range(0, len(entries), _BATCH):
            await self.sink.append(entries[start : start + _BATCH])
        await asyncio.to_thread(spill.clear)
        self._spilled = False
        log.info("replayed %d spilled audit entries", len(entries))
