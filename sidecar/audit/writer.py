"""The audit writer: requests enqueue, a background task writes.

Requests never wait for it. `record()` only enqueues (a full queue drops the
entry and counts it); a background task writes batches to the sink. While the
sink is unreachable, entries go to a local spill file (counted as buffered) and
are moved to the sink, oldest first, once it answers again. Only the Redis sink
has a spill file: the SQLite sink is already local, and a batch it cannot take is
dropped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path

from sidecar import metrics
from sidecar.audit.model import AuditEntry, AuditQuery
from sidecar.audit.sink import BATCH, SCAN, SINK_ERRORS, Sink
from sidecar.audit.spill import SpillFile

log = logging.getLogger(__name__)


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
        # batch instead of one thread hop (SQLite) or round trip (Redis) per request.
        self.linger_s = linger_s
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

    # --- what requests and the audit route call -----------------------------------

    def record(self, entry: AuditEntry) -> None:
        try:
            self._queue.put_nowait(entry)
        except asyncio.QueueFull:
            metrics.AUDIT_DROPPED.inc()
            log.warning("audit queue full; entry dropped", extra={"decision_id": entry.decision_id})

    async def flushed(self) -> None:
        """Wait until everything queued so far is written (audit reads, tests, shutdown)."""
        self._flushing += 1
        self._flush_now.set()
        try:
            await self._queue.join()
        finally:
            self._flushing -= 1

    async def query(self, query: AuditQuery, scan: int = SCAN) -> list[AuditEntry]:
        """The newest entries that match (at most `query.limit`); a sink that scans
        (the stream) reads at most `scan` entries of any tenant in the time range."""
        return await self.sink.newest_first(query, scan)

    # --- lifetime ---------------------------------------------------------------------

    async def start(self) -> None:
        if self.spill is not None and self.spill.exists():
            self._spilled = True
        self._task = asyncio.create_task(self._run(), name="whose-audit-writer")

    async def close(self, timeout_s: float = 5.0) -> None:
        """Write what is queued (within the timeout), stop, and close the sink."""
        if self._task is not None:
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
            except TimeoutError:
                self._task.cancel()
                metrics.AUDIT_DROPPED.inc(self._queue.qsize())
            self._task = None
        await self.sink.close()

    # --- the background writer ------------------------------------------------------

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            if first is not None and self._queue.qsize() < BATCH and not self._flushing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._flush_now.wait(), self.linger_s)
            self._flush_now.clear()
            batch = [first]
            while len(batch) < BATCH and not self._queue.empty():
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
        except SINK_ERRORS as exc:
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
