"""The audit log in one SQLite file, for a sidecar without Redis.

Each entry is a row of `entries`, its JSON whole, with indexed columns for what
queries filter on: tenant and time, asker, purpose. `entry_records` maps each
record id an entry names to that entry (with what happened to the record), and
`entry_outcomes` each outcome an entry has. Every index leads with the tenant, so
a query walks one index newest first (the record's, else the outcome's, else the
asker's or purpose's, else the tenant's), checks the other filters on each entry
it reaches, and stops at `limit`: no other tenant's entry is read, and there is no
scan bound to page around.

The file keeps at most `max_entries` entries: past that, the oldest are deleted
(a hundredth of the bound at a time, so a full file does not delete on every
append) and the deletion is logged. SQLite reuses the freed pages, so the file
stops growing once full.

All SQLite work runs in a worker thread (asyncio.to_thread) on one connection,
opened on first use; a lock lets one thread use it at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import ValidationError

from sidecar.audit.model import POLICY_UNAVAILABLE, WANTED, AuditEntry, AuditQuery, RecordOutcome

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    time_us INTEGER NOT NULL,
    asker TEXT NOT NULL,
    purpose TEXT NOT NULL,
    error TEXT,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_time ON entries (tenant, time_us);
CREATE INDEX IF NOT EXISTS entries_by_asker ON entries (tenant, asker, time_us);
CREATE INDEX IF NOT EXISTS entries_by_purpose ON entries (tenant, purpose, time_us);
CREATE TABLE IF NOT EXISTS entry_records (
    tenant TEXT NOT NULL,
    record TEXT NOT NULL,
    time_us INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    outcomes INTEGER NOT NULL,
    PRIMARY KEY (tenant, record, time_us, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entry_records_by_seq ON entry_records (seq);
CREATE TABLE IF NOT EXISTS entry_outcomes (
    tenant TEXT NOT NULL,
    outcome TEXT NOT NULL,
    time_us INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    PRIMARY KEY (tenant, outcome, time_us, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entry_outcomes_by_seq ON entry_outcomes (seq);
"""

# entry_records.outcomes: what happened to the record in that entry, one bit each
# (one record can be both stored and refused in one write batch).
_BIT: dict[RecordOutcome, int] = {
    "allowed": 1,
    "withheld": 2,
    "stored": 4,
    "refused": 8,
    "erased": 16,
    "flagged": 32,
    "withdrawn": 64,
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

_Row = tuple[int, int, str]  # seq, time_us, body


class SqliteSink:
    def __init__(self, path: Path, max_entries: int = 100_000) -> None:
        self.path = path
        self.max_entries = max_entries
        self._db: sqlite3.Connection | None = None
        # One connection, used by whichever worker thread holds this lock.
        self._lock = threading.Lock()

    async def ping(self) -> None:
        """Nothing to ask: a local file's failures show when it is written."""

    async def append(self, entries: list[AuditEntry]) -> None:
        await asyncio.to_thread(self._insert, entries)

    async def newest_first(self, query: AuditQuery, scan: int) -> list[AuditEntry]:
        """`scan` is not needed: the query reads only the entries it returns (and
        any it has to skip as unreadable)."""
        return await asyncio.to_thread(self._select, query)

    async def close(self) -> None:
        await asyncio.to_thread(self._close)

    # --- in the worker thread -------------------------------------------------------

    @contextlib.contextmanager
    def _connected(self) -> Iterator[sqlite3.Connection]:
        """The connection, this thread's alone while in the `with`."""
        with self._lock:
            db = self._connection()
            try:
                yield db
            except sqlite3.Error:
                # Opened afresh next time: a file moved aside or restored meanwhile is
                # then the one used, not the broken one this connection still holds.
                self._db = None
                db.close()
                raise

    def _connection(self) -> sqlite3.Connection:
        """The connection, opened on first use (call with the lock held)."""
        if self._db is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, check_same_thread=False)
            try:
                # Readers (an operator's sqlite3 shell, a backup) never block the writer.
                db.execute("PRAGMA journal_mode=WAL")
                # Survives a crash of the process; a power cut may lose the last batches,
                # the price of not syncing the disk on every commit.
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
            except sqlite3.Error:
                db.close()
                raise
            self._db = db
        return self._db

    def _insert(self, entries: list[AuditEntry]) -> None:
        # Serialised before taking the lock: a query waits only for SQLite's part.
        prepared = [_Prepared(entry) for entry in entries]
        with self._connected() as db, db:  # one transaction per batch
            deleted = self._insert_prepared(db, prepared)
        if deleted:
            log.info(
                "audit file at its bound (WHOSE_AUDIT_MAX_ENTRIES=%d): %d oldest entries deleted",
                self.max_entries,
                deleted,
            )

    def _insert_prepared(self, db: sqlite3.Connection, prepared: list[_Prepared]) -> int:
        records: list[tuple[str, str, int, int, int]] = []
        outcomes: list[tuple[str, str, int, int]] = []
        for entry in prepared:
            seq = db.execute(
                "INSERT INTO entries (tenant, time_us, asker, purpose, error, body)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                entry.row,
            ).lastrowid
            assert seq is not None  # an INSERT into a rowid table always has one
            tenant, time_us = entry.row[0], entry.row[1]
            records += [(tenant, r, time_us, seq, bits) for r, bits in entry.records.items()]
            outcomes += [(tenant, outcome, time_us, seq) for outcome in entry.outcomes]
        # In key order: record ids are random, and sorted inserts visit each page of
        # the index once per batch rather than hop between them.
        records.sort()
        db.executemany(
            "INSERT INTO entry_records (tenant, record, time_us, seq, outcomes)"
            " VALUES (?, ?, ?, ?, ?)",
            records,
        )
        db.executemany(
            "INSERT INTO entry_outcomes (tenant, outcome, time_us, seq) VALUES (?, ?, ?, ?)",
            outcomes,
        )
        return self._trim(db)

    def _trim(self, db: sqlite3.Connection) -> int:
        """Delete the oldest entries once there are more than `max_entries`; how many."""
        low, high = db.execute("SELECT min(seq), max(seq) FROM entries").fetchone()
        # Sequence numbers only grow and only the oldest are deleted: no gaps, so
        # this is the count without a count(*) over the whole table.
        if high is None or high - low + 1 <= self.max_entries:
            return 0
        keep = self.max_entries - self.max_entries // 100
        oldest_kept = high - keep + 1
        db.execute("DELETE FROM entry_records WHERE seq < ?", (oldest_kept,))
        db.execute("DELETE FROM entry_outcomes WHERE seq < ?", (oldest_kept,))
        return db.execute("DELETE FROM entries WHERE seq < ?", (oldest_kept,)).rowcount

    def _select(self, query: AuditQuery) -> list[AuditEntry]:
        found: list[AuditEntry] = []
        unreadable = 0
        after: tuple[int, int] | None = None
        # Usually one round; an unreadable row is skipped and the next round asks
        # for as many more, from below the last row read, so `limit` still holds.
        while len(found) < query.limit:
            want = query.limit - len(found)
            sql, params = _selection(query, want, after)
            with self._connected() as db:
                rows: list[_Row] = db.execute(sql, params).fetchall()
            for _, _, body in rows:
                try:
                    found.append(AuditEntry.model_validate_json(body))
                except ValidationError:
                    unreadable += 1
            if len(rows) < want:
                break
            after = (rows[-1][1], rows[-1][0])
        if unreadable:
            # Skipped, not fatal: one bad row must not hide the rest of the log.
            log.warning("audit log: %d unreadable entries skipped", unreadable)
        return found

    def _close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class _Prepared:
    """One entry as its rows: the entries row, and what it names by record and outcome."""

    def __init__(self, entry: AuditEntry) -> None:
        self.row = (
            entry.tenant,
            _micros(entry.time),
            entry.asker,
            entry.purpose,
            entry.error,
            entry.model_dump_json(),
        )
        # One row per record, with every outcome it had in this entry.
        self.records: dict[str, int] = {}
        for record_id, outcome in entry.record_outcomes():
            if record_id is not None:
                self.records[record_id] = self.records.get(record_id, 0) | _BIT[outcome]
        self.outcomes = sorted(entry.outcomes())


def _selection(
    query: AuditQuery, limit: int, after: tuple[int, int] | None
) -> tuple[str, list[object]]:
    """The SQL for one round of a query: driven by one index, tenant first, newest
    first; `after` is (time_us, seq) of the last row a previous round read."""
    params: list[object] = [query.tenant]
    if query.record is not None:
        driver = "d"
        sql = (
            "SELECT e.seq, e.time_us, e.body FROM entry_records d JOIN entries e ON e.seq = d.seq"
            " WHERE d.tenant = ? AND d.record = ? AND d.outcomes & ? != 0"
        )
        params += [query.record, _bits(WANTED[query.outcome])]
        if query.outcome == POLICY_UNAVAILABLE:
            sql += " AND e.error = ?"
            params.append(POLICY_UNAVAILABLE)
    elif query.outcome is not None:
        driver = "d"
        sql = (
            "SELECT e.seq, e.time_us, e.body FROM entry_outcomes d JOIN entries e ON e.seq = d.seq"
            " WHERE d.tenant = ? AND d.outcome = ?"
        )
        params.append(query.outcome)
    else:
        driver = "e"
        sql = "SELECT e.seq, e.time_us, e.body FROM entries e WHERE e.tenant = ?"
    if query.asker is not None:
        sql += " AND e.asker = ?"
        params.append(query.asker)
    if query.purpose is not None:
        # With an asker too, walk the asker's index (the narrower): SQLite's unary "+"
        # keeps this term from choosing an index.
        sql += " AND +e.purpose = ?" if query.asker is not None else " AND e.purpose = ?"
        params.append(query.purpose)
    if query.since is not None:
        sql += f" AND {driver}.time_us >= ?"
        params.append(_micros(query.since))
    if query.until is not None:
        sql += f" AND {driver}.time_us <= ?"
        params.append(_micros(query.until))
    if after is not None:
        sql += f" AND ({driver}.time_us, {driver}.seq) < (?, ?)"
        params += after
    sql += f" ORDER BY {driver}.time_us DESC, {driver}.seq DESC LIMIT ?"
    params.append(limit)
    return sql, params


def _bits(outcomes: Iterable[RecordOutcome]) -> int:
    bits = 0
    for outcome in outcomes:
        bits |= _BIT[outcome]
    return bits


def _micros(moment: datetime) -> int:
    """Microseconds since 1970, exactly (a float timestamp would round); a naive
    time is local time, as `datetime.timestamp` reads it."""
    aware = moment if moment.tzinfo is not None else moment.astimezone()
    return (aware - _EPOCH) // _MICROSECOND
