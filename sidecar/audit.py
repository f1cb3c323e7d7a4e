"""The disclosure audit log: one entry per request that asked the policy.

Requests never wait for it. `record()` only enqueues (a full queue drops the
entry and counts it); a background task writes batches to a Redis Stream,
trimmed to about `maxlen` entries, or to a JSONL file under the data directory
when there is no Redis. While Redis is unreachable, entries go to a local spill
file (counted as buffered) and are moved to the stream, oldest first, once Redis
answers again.

Queries read newest first and filter as they read, tenant first. One query
reads at most `scan` entries of all tenants (10 000 by default) inside its
`since`/`until` range, and stops sooner once it has `limit` matches: its cost is
bounded however large the log grows. Older entries are reached by narrowing
`until` (both sinks start the scan there without reading what is newer).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal, Protocol
from uuid import UUID

import orjson
import redis.asyncio as aioredis
from pydantic import BaseModel, Field, ValidationError
from redis.exceptions import RedisError

from sidecar import metrics

log = logging.getLogger(__name__)

Outcome = Literal["allowed", "withheld", "policy_unavailable"]
# Entries per sink write (one Redis pipeline), including each piece of a replay.
_BATCH = 500
# How much of the spill file a replay reads at a time (whole lines, at most _BATCH
# entries): memory and each read stay small whatever the file's size.
_SPILL_PIECE_BYTES = 2**20
# Stream entries fetched per XREVRANGE round trip while a query scans.
_PAGE = 500
# How many entries (of all tenants) one query reads at most.
SCAN = 10_000
# Time bounds are widened by this much before the exact filter applies: a stream id
# is Redis's clock when the entry was appended, not the sidecar's when it was
# decided, and lines reach the file in write order, which is time order only nearly.
_SLACK_S = 60.0
# The largest sequence part of a stream id ("<ms>-<seq>").
_MAX_SEQ = 2**64 - 1


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
    # Explain only: whose decision the policy admin (`asker`) looked at.
    explained_for: str | None = None


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
    async def ping(self) -> None: ...

    async def append(self, entries: list[AuditEntry]) -> None: ...

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        """The entries that match `query`, newest first, at most `query.limit`,
        reading at most `scan` entries of any tenant."""
        ...


class _Selection:
    """One query's pass over a log, newest first: keeps what matches and says when
    to stop (the limit reached, `scan` entries read, or, in a log kept in time
    order, an entry older than `since`)."""

    def __init__(self, query: AuditQuery, scan: int, in_time_order: bool) -> None:
        self.query = query
        self.left = scan
        self.found: list[AuditEntry] = []
        self.unreadable = 0
        self._older_than = (
            query.since.timestamp() - _SLACK_S if in_time_order and query.since else None
        )

    def offer(self, raw: bytes | str | None) -> bool:
        """Consider the next older entry; False once the scan should stop."""
        self.left -= 1
        fields = _json_object(raw)
        if fields is None:
            self.unreadable += 1
        elif self._before_range(fields):
            return False
        elif fields.get("tenant") == self.query.tenant:
            # Tenant first: another tenant's entry costs a JSON parse, never a model.
            self._consider(fields)
        return self.left > 0 and len(self.found) < self.query.limit

    def result(self) -> list[AuditEntry]:
        if self.unreadable:
            # Skipped, not fatal: one bad entry must not hide every tenant's log.
            log.warning("audit log: %d unreadable entries skipped", self.unreadable)
        return self.found

    def _before_range(self, fields: dict[str, Any]) -> bool:
        if self._older_than is None:
            return False
        time = _timestamp(fields)
        return time is not None and time < self._older_than

    def _consider(self, fields: dict[str, Any]) -> None:
        try:
            entry = AuditEntry.model_validate(fields)
        except ValidationError:
            self.unreadable += 1
            return
        if self.query.matches(entry):
            self.found.append(entry)


def _json_object(raw: bytes | str | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        fields = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return fields if isinstance(fields, dict) else None


def _timestamp(fields: dict[str, Any] | None) -> float | None:
    """An entry's time in seconds since 1970; None if it has no readable one."""
    value = fields.get("time") if fields else None
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError:
        return None


class RedisSink:
    """A Redis Stream, trimmed to about `maxlen` entries (approximate trim is O(1))."""

    def __init__(self, client: aioredis.Redis, stream: str, maxlen: int) -> None:
        self.client = client
        self.stream = stream
        self.maxlen = maxlen

    async def ping(self) -> None:
        await self.client.ping()

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
        # Not in time order: a replay after an outage appends old entries at its
        # own time. So no stop at `since`; the stream range bounds the scan instead.
        selection = _Selection(query, scan, in_time_order=False)
        high, low = _stream_range(query)
        while selection.left > 0:
            count = min(_PAGE, selection.left)
            rows = await self.client.xrevrange(self.stream, max=high, min=low, count=count) or []
            for _, fields in rows:
                if not selection.offer(fields.get(b"entry") if fields else None):
                    return selection.result()
            below = _id_before(rows[-1][0]) if len(rows) == count else None
            if below is None:
                break
            high = below
        return selection.result()


def _stream_range(query: AuditQuery) -> tuple[str, str]:
    """XREVRANGE's max and min for the query's time range.

    A stream id starts with Redis's clock (ms) when the entry was appended: never
    before the entry's own time, clock skew aside, so `since` less the slack is a
    safe lower bound. An entry replayed after an outage carries the replay's time,
    so `until` finds it only if the replay came before `until` plus the slack.
    Times before 1970 clamp to the start of the stream: ids are never negative.
    """
    high = _ms(query.until.timestamp() + _SLACK_S) if query.until else "+"
    low = _ms(query.since.timestamp() - _SLACK_S) if query.since else "-"
    return high, low


def _ms(seconds: float) -> str:
    return str(max(0, int(seconds * 1000)))


def _id_before(stream_id: bytes | str | None) -> str | None:
    """The greatest stream id below this one; None below the first possible id.

    (XREVRANGE's exclusive "(" bound would do it, but needs Redis 6.2.)"""
    if stream_id is None:
        return None
    text = stream_id.decode() if isinstance(stream_id, bytes) else stream_id
    ms_text, _, seq_text = text.partition("-")
    ms, seq = int(ms_text), int(seq_text or 0)
    if seq > 0:
        return f"{ms}-{seq - 1}"
    if ms > 0:
        return f"{ms - 1}-{_MAX_SEQ}"
    return None


class FileSink:
    """JSON lines, rotated once at `max_bytes`: `audit.jsonl`, and the file before it
    in `audit.1.jsonl`. Queries read both, newest first."""

    def __init__(self, path: Path, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = path
        self.previous = path.with_suffix(".1.jsonl")
        self.max_bytes = max_bytes
        # A query opens both files while no rotation runs, so it sees each entry once.
        self._rotation = threading.Lock()

    async def ping(self) -> None:
        """Nothing to ask: a local file's failures show when it is written."""

    async def append(self, entries: list[AuditEntry]) -> None:
        await asyncio.to_thread(self._write, _jsonl(entries))

    def _write(self, lines: bytes) -> None:
        with self._rotation, contextlib.suppress(FileNotFoundError):
            if self.path.stat().st_size + len(lines) > self.max_bytes:
                os.replace(self.path, self.previous)
        _append(self.path, lines)

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        return await asyncio.to_thread(self._select, query, scan)

    def _select(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        # Lines are appended in decision order: the scan may stop at `since`.
        selection = _Selection(query, scan, in_time_order=True)
        with contextlib.ExitStack() as stack:
            with self._rotation:
                files = [
                    stack.enter_context(path.open("rb"))
                    for path in (self.path, self.previous)
                    if path.exists()
                ]
            for handle in files:  # the newer file first
                end = _end_of_range(handle, query.until)
                for line in _lines_backwards(handle, end):
                    if not selection.offer(line):
                        return selection.result()
        return selection.result()


def _jsonl(entries: list[AuditEntry]) -> bytes:
    return b"".join(orjson.dumps(e.model_dump(mode="json")) + b"\n" for e in entries)


def _append(path: Path, lines: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as out:
        out.write(lines)


def _end_of_range(handle: BinaryIO, until: datetime | None) -> int:
    """Where a newest-first scan up to `until` starts: the offset of the first line
    stamped after `until` (plus the slack), found by bisection, the lines being in
    time order. A line without a readable time counts as inside the range."""
    size = handle.seek(0, os.SEEK_END)
    if until is None:
        return size
    bound = until.timestamp() + _SLACK_S
    # Lines starting before `low` are in the range; the line at `high` (if any) is not.
    low, high = 0, size
    while low < high:
        start = _line_start_from(handle, (low + high) // 2)
        if start >= high:
            start = low  # no line starts in the upper half: decide on the one at `low`
        handle.seek(start)
        line = handle.readline()
        time = _timestamp(_json_object(line))
        if time is not None and time > bound:
            high = start
        else:
            low = start + len(line)
    return low


def _line_start_from(handle: BinaryIO, offset: int) -> int:
    """The offset of the first line that starts at or after `offset`."""
    if offset == 0:
        return 0
    handle.seek(offset - 1)
    handle.readline()
    return handle.tell()


def _lines_backwards(handle: BinaryIO, end: int, block: int = 64 * 1024) -> Iterator[bytes]:
    """The lines before offset `end` (a line start), last first."""
    position = end
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


class SpillFile:
    """Entries held locally while the sink is unreachable, oldest first.

    One file that never rotates: a replay reads only this file, so an entry moved
    to a rotated one would be lost unseen. Its bound is the AuditLog's
    `spill_max_bytes`. A replay reads it in pieces, from an offset.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    async def append(self, entries: list[AuditEntry]) -> None:
        await asyncio.to_thread(_append, self.path, _jsonl(entries))

    def read_piece(self, offset: int) -> tuple[list[AuditEntry], int, int]:
        """The entries in the whole lines from `offset` on, up to about
        _SPILL_PIECE_BYTES or _BATCH entries: (entries, the offset after them,
        how many lines could not be read)."""
        entries: list[AuditEntry] = []
        unreadable = 0
        try:
            handle = self.path.open("rb")
        except FileNotFoundError:
            return entries, offset, unreadable
        with handle:
            handle.seek(offset)
            end = offset
            while end - offset < _SPILL_PIECE_BYTES and len(entries) < _BATCH:
                line = handle.readline()
                if not line:
                    break
                end += len(line)
                if not line.strip():
                    continue
                try:
                    entries.append(AuditEntry.model_validate_json(line))
                except ValidationError:
                    unreadable += 1
        return entries, end, unreadable

    def exists(self) -> bool:
        return self.path.exists()

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except FileNotFoundError:
            return 0


class AuditLog:
    def __init__(
        self,
        sink: Sink,
        spill: Path | None,
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
        self.spill = SpillFile(spill) if spill is not None else None
        self._queue: asyncio.Queue[AuditEntry | None] = asyncio.Queue(maxsize=queue_size)
        self._task: asyncio.Task[None] | None = None
        self._spilled = False
        # How far into the spill file the sink already holds every entry: a replay
        # cut short resumes there, so it repeats at most the piece that failed.
        self._replayed = 0
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
        if self.spill is not None and self.spill.exists():
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

    async def query(self, query: AuditQuery, scan: int = SCAN) -> list[AuditEntry]:
        """The newest entries that match (at most `query.limit`), reading at most
        `scan` entries of any tenant within the query's time range."""
        return await self.sink.newest_first(query, scan)

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
                # Older entries first, so the stream stays in time order; until
                # they are all in, newer ones queue behind them in the spill.
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

    async def _replay(self, spill: SpillFile) -> None:
        # While the sink is down a batch costs this ping and an append to the
        # spill; the spill is read only once the sink answers.
        await self.sink.ping()
        moved = 0
        while True:
            # A piece at a time, each read in a thread: memory and event-loop
            # stalls stay small however large the spill grew.
            entries, end, unreadable = await asyncio.to_thread(spill.read_piece, self._replayed)
            if unreadable:
                metrics.AUDIT_DROPPED.inc(unreadable)
                log.error("audit spill: %d unreadable lines dropped", unreadable)
            if end == self._replayed:
                break
            if entries:
                await self.sink.append(entries)
            # Only past a piece the sink took: a failure part-way repeats that
            # piece on the next replay rather than lose any of it.
            self._replayed = end
            moved += len(entries)
        await asyncio.to_thread(spill.clear)
        self._spilled = False
        self._replayed = 0
        log.info("replayed %d spilled audit entries", moved)
