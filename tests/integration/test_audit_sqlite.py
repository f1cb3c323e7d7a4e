"""The SQLite audit file (no Redis), on real files: every filter is an index lookup,
tenant first, bounded by `limit` and the time range rather than by a scan of the
newest entries; the file keeps at most its bound of entries; both sinks give one
answer to every filter; write entries round-trip and never hold a claim's text."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from prometheus_client import REGISTRY

from sidecar.audit import (
    AuditedRecord,
    AuditedWrite,
    AuditEntry,
    AuditPurpose,
    AuditQuery,
    Outcome,
    audited_write,
    write_entry,
)
from sidecar.audit.redis_sink import RedisSink
from sidecar.audit.sink import SINK_ERRORS
from sidecar.audit.sqlite_sink import SqliteSink, _selection
from sidecar.audit.writer import AuditLog

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)

# A claim as the write path holds it: everything a record can say about itself.
CLAIM: dict[str, Any] = {
    "id": "8d4f1c9e-0000-4000-8000-000000000001",
    "content": "Bob told me the launch slips to October 17",
    "proposition": {
        "text": "the launch is on October 17",
        "key": "launch.day",
        "value": "seventeenth-of-October",
    },
    "observer_id": "alice",
    "observed_id": "bob",
    "observed_attitude": "believes",
    "source_id": "chat-42",
    "source": {"kind": "conversation", "speaker": "bob"},
    "modality": "reported_belief",
    "audience": ["alice"],
}


def read(
    minutes: float,
    asker: str = "bob",
    purpose: str = "recall",
    allowed: tuple[str, ...] = (),
    withheld: tuple[str, ...] = (),
    error: str | None = None,
    tenant: str = "acme",
) -> AuditEntry:
    return AuditEntry(
        decision_id=uuid.uuid4(),
        time=T0 + timedelta(minutes=minutes),
        tenant=tenant,
        asker=asker,
        audience=[],
        purpose=purpose,
        route=purpose,
        allowed=[AuditedRecord(id=r, usable_as="belief") for r in allowed],
        withheld=[AuditedRecord(id=r, reasons=["audience_excludes:bob"]) for r in withheld],
        error=error,
    )


def write(
    minutes: float, writer: str, records: list[AuditedWrite], error: str | None = None
) -> AuditEntry:
    entry = write_entry(uuid.uuid4(), (writer, "acme"), "memories", "sha256:1", records, error)
    return entry.model_copy(update={"time": T0 + timedelta(minutes=minutes)})


def stored(record_id: str, index: int = 0) -> AuditedWrite:
    return AuditedWrite(id=record_id, index=index, holder="alice", outcome="stored")


def refused(
    record_id: str | None, index: int = 0, reason: str = "voice_is_not_writer"
) -> AuditedWrite:
    return AuditedWrite(
        id=record_id, index=index, holder="bob", outcome="refused", reasons=[reason]
    )


def acme_log() -> list[AuditEntry]:
    """One tenant's log with every kind of entry, oldest first, one a minute."""
    entries = [
        read(0, "bob", withheld=("r1",)),
        read(1, "alice", "get", allowed=("r1",)),
        write(2, "alice", [stored("w1"), stored("w2", 1)]),
        read(3, "bob", allowed=("r2",), withheld=("w1",)),
        write(4, "bob", [refused("w3"), refused(None, 1, "observer_id_required")]),
        read(5, "bob", "history", withheld=("r1", "r2"), error="policy_unavailable"),
        read(6, "pat", "explain", allowed=("w1",)),
        write(7, "alice", [refused("r2", 0, "policy_unavailable")], error="policy_unavailable"),
        read(8, "alice", "recall"),
        write(9, "alice", [stored("w4"), refused("w4", 1, "id_exists")]),
        read(10, "carol", "get", error="store_unavailable"),
    ]
    return [e.model_copy(update={"time": T0 + timedelta(minutes=i)}) for i, e in enumerate(entries)]


def ids(entries: list[AuditEntry]) -> list[uuid.UUID]:
    return [e.decision_id for e in entries]


OUTCOMES: list[Outcome | None] = [
    None,
    "allowed",
    "withheld",
    "stored",
    "refused",
    "policy_unavailable",
]
PURPOSES: list[AuditPurpose | None] = [None, "recall", "get", "history", "explain", "write"]
RANGES = [
    (None, None),
    (T0 + timedelta(minutes=3), None),
    (None, T0 + timedelta(minutes=6)),
    (T0 + timedelta(minutes=2), T0 + timedelta(minutes=9)),
]


def every_query(limit: int = 100) -> Iterator[AuditQuery]:
    for asker, record, outcome, purpose, (since, until) in itertools.product(
        [None, "bob", "alice"],
        [None, "r1", "r2", "w1", "w4", "missing"],
        OUTCOMES,
        PURPOSES,
        RANGES,
    ):
        yield AuditQuery(
            tenant="acme",
            asker=asker,
            record=record,
            outcome=outcome,
            purpose=purpose,
            since=since,
            until=until,
            limit=limit,
        )


def expected(log: list[AuditEntry], query: AuditQuery) -> list[uuid.UUID]:
    return ids([e for e in reversed(log) if query.matches(e)][: query.limit])


async def append_as_decided(stream: RedisSink, entries: list[AuditEntry]) -> None:
    """Append with stream ids at the entries' own times (XADD would use Redis's clock,
    which `since`/`until` on entries stamped in the past would never reach)."""
    async with stream.client.pipeline(transaction=False) as pipe:
        for seq, entry in enumerate(entries):
            stream_id = f"{int(entry.time.timestamp() * 1000)}-{seq}"
            pipe.xadd(stream.stream, {"entry": entry.model_dump_json()}, id=stream_id)
        await pipe.execute()


@pytest.fixture
async def sqlite_sink(tmp_path: Path) -> AsyncIterator[SqliteSink]:
    sink = SqliteSink(tmp_path / "audit.sqlite3")
    yield sink
    await sink.close()


@pytest.fixture
async def stream(redis_url: str) -> AsyncIterator[RedisSink]:
    client = aioredis.from_url(redis_url)
    sink = RedisSink(client, f"test:audit:{uuid.uuid4().hex}", maxlen=100_000)
    yield sink
    await client.delete(sink.stream)
    await client.aclose()


def test_the_filters_select_what_they_say() -> None:
    # The Python filter (the stream's, and the oracle below) against hand-made answers.
    log = acme_log()
    d = ids(log)

    def found(**filters: Any) -> list[uuid.UUID]:
        return expected(log, AuditQuery(tenant="acme", **filters))

    assert found(purpose="write") == [d[9], d[7], d[4], d[2]]
    assert found(outcome="stored") == [d[9], d[2]]
    assert found(outcome="refused") == [d[9], d[7], d[4]]
    assert found(outcome="policy_unavailable") == [d[7], d[5]]
    assert found(outcome="policy_unavailable", record="r2") == [d[7], d[5]]
    assert found(outcome="policy_unavailable", record="r1") == [d[5]]
    assert found(record="w1") == [d[6], d[3], d[2]]
    assert found(record="w1", outcome="stored") == [d[2]]
    assert found(record="w4", outcome="refused") == [d[9]]
    assert found(record="w4", outcome="stored") == [d[9]]
    assert found(outcome="withheld", asker="bob") == [d[5], d[3], d[0]]
    assert found(purpose="explain") == [d[6]]
    assert found(asker="carol") == [d[10]]  # a failed request, nothing decided: still listed


async def test_both_sinks_give_the_python_filters_answer_to_every_filter(
    sqlite_sink: SqliteSink, stream: RedisSink
) -> None:
    log = acme_log()
    other = [read(i, "bob", allowed=("r1",), withheld=("w1",), tenant="globex") for i in range(5)]
    mixed = sorted([*log, *other], key=lambda e: e.time)
    await sqlite_sink.append(mixed)
    await append_as_decided(stream, mixed)
    checked = 0
    for query in every_query():
        want = expected(log, query)
        assert ids(await sqlite_sink.newest_first(query, scan=100)) == want, query
        assert ids(await stream.newest_first(query, scan=100)) == want, query
        checked += bool(want)
    assert checked > 200  # most queries find something: the comparison is not vacuous


async def test_a_query_walks_an_index_whatever_the_filters(sqlite_sink: SqliteSink) -> None:
    await sqlite_sink.append(acme_log())
    with contextlib.closing(sqlite3.connect(sqlite_sink.path)) as db:
        for query, after in itertools.product(every_query(), [None, (1, 2)]):
            sql, params = _selection(query, 10, after)
            plan = [row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            # SEARCH: an index range; SCAN would read a table or an index whole, and a
            # temp b-tree would sort every match before the limit applies.
            assert all(step.startswith("SEARCH") for step in plan), (query, plan)
            assert not any("TEMP B-TREE" in step for step in plan), (query, plan)
            assert "(tenant=?" in plan[0], (query, plan)


async def test_more_than_ten_thousand_other_entries_hide_nothing(
    sqlite_sink: SqliteSink,
) -> None:
    # The stream's bound (and the JSONL file's before) reads 10 000 entries of all
    # tenants: a busier tenant's newer entries would leave this one's out of reach.
    log = acme_log()
    await sqlite_sink.append(log)
    for start in range(0, 12_000, 500):
        await sqlite_sink.append(
            [
                read(60 + (start + i) / 1000, "bob", allowed=("r1",), tenant="globex")
                for i in range(500)
            ]
        )
    checked = 0
    for query in every_query(limit=3):
        want = expected(log, query)
        assert ids(await sqlite_sink.newest_first(query, scan=10)) == want, query
        checked += bool(want)
    assert checked > 200
    everything = await sqlite_sink.newest_first(AuditQuery(tenant="globex", limit=20_000), 10)
    assert len(everything) == 12_000


async def test_the_file_keeps_at_most_its_bound_deleting_the_oldest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "audit.sqlite3"
    sink = SqliteSink(path, max_entries=1000)
    written: list[AuditEntry] = []

    async def fill(entries: int) -> None:
        for _ in range(entries // 100):
            batch = [
                read(len(written) + i, allowed=(str(uuid.uuid4()),), withheld=("r1",))
                for i in range(100)
            ]
            written.extend(batch)
            await sink.append(batch)

    with caplog.at_level(logging.INFO, logger="sidecar.audit"):
        await fill(3000)
    assert "oldest entries deleted" in caplog.text
    kept = await sink.newest_first(AuditQuery(tenant="acme", limit=5000), 0)
    assert 900 <= len(kept) <= 1000
    assert ids(kept) == ids(written[::-1][: len(kept)])  # the newest, oldest gone first
    # The record lookups went with their entries: nothing points at a deleted one.
    with_r1 = await sink.newest_first(AuditQuery(tenant="acme", record="r1", limit=5000), 0)
    assert ids(with_r1) == ids(kept)
    await sink.close()  # checkpoints the WAL into the file
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table in ("entry_records", "entry_outcomes"):
            orphans = db.execute(
                f"SELECT count(*) FROM {table} WHERE seq NOT IN (SELECT seq FROM entries)"
            ).fetchone()[0]
            assert orphans == 0, table
    full = path.stat().st_size

    # Once full, the freed pages are reused: the file stops growing.
    await fill(3000)
    await sink.close()
    assert path.stat().st_size <= full * 1.1


async def test_write_entries_round_trip_through_both_sinks(
    sqlite_sink: SqliteSink, stream: RedisSink
) -> None:
    entry = write(0, "alice", [audited_write(0, CLAIM, "stored"), refused(None, 1)])
    for sink in (sqlite_sink, stream):
        await sink.append([entry])
        [back] = await sink.newest_first(AuditQuery(tenant="acme", record=CLAIM["id"]), 10)
        assert back == entry
        assert back.written[0].holder == "alice"
        assert back.written[0].observed_id == "bob"
        [refusal] = await sink.newest_first(AuditQuery(tenant="acme", outcome="refused"), 10)
        assert refusal.written[1] == AuditedWrite(
            id=None, index=1, holder="bob", outcome="refused", reasons=["voice_is_not_writer"]
        )


def test_a_write_entry_names_the_claim_never_its_text() -> None:
    world_state = {**CLAIM, "id": None, "observer_id": None, "modality": "world_state"}
    entry = write_entry(
        uuid.uuid4(),
        ("alice", "acme"),
        "observations",
        "sha256:1",
        [
            audited_write(0, CLAIM, "stored"),
            audited_write(1, world_state, "refused", ["world_state_needs_relay"]),
        ],
    )
    text = entry.model_dump_json()
    for said in (CLAIM["content"], *CLAIM["proposition"].values(), CLAIM["source_id"]):
        assert said not in text
    assert (entry.purpose, entry.asker, entry.tenant, entry.route) == (
        "write",
        "alice",
        "acme",
        "observations",
    )
    assert [w.model_dump() for w in entry.written] == [
        {
            "id": CLAIM["id"],
            "index": 0,
            "holder": "alice",
            "observed_id": "bob",
            "outcome": "stored",
            "reasons": [],
        },
        {
            # No observer: the holder is the voice the claim is in, its speaker.
            "id": None,
            "index": 1,
            "holder": "bob",
            "observed_id": "bob",
            "outcome": "refused",
            "reasons": ["world_state_needs_relay"],
        },
    ]
    assert abs((entry.time - datetime.now(UTC)).total_seconds()) < 60


async def test_an_unusable_file_drops_and_counts_writes_and_fails_queries_until_moved_aside(
    tmp_path: Path,
) -> None:
    # A real fault: the file is not a database (a bad restore, another program's file).
    path = tmp_path / "audit.sqlite3"
    path.write_bytes(b"not a database, " * 512)
    log = AuditLog(SqliteSink(path), None, queue_size=10)
    await log.start()
    try:
        dropped = REGISTRY.get_sample_value("whose_audit_dropped_total") or 0.0
        log.record(read(0))
        await log.flushed()
        assert (REGISTRY.get_sample_value("whose_audit_dropped_total") or 0.0) - dropped == 1
        # What GET /v1/audit turns into 503 audit_unavailable.
        with pytest.raises(SINK_ERRORS):
            await log.query(AuditQuery(tenant="acme"))

        # Moved aside, the bad file is no longer used: the next batch starts a new one.
        path.rename(tmp_path / "audit.sqlite3.bad")
        after = read(1)
        log.record(after)
        await log.flushed()
        assert ids(await log.query(AuditQuery(tenant="acme"))) == [after.decision_id]
    finally:
        await log.close()


async def test_queries_and_writes_share_the_connection_from_many_threads(
    sqlite_sink: SqliteSink,
) -> None:
    # Each call runs in whichever worker thread is free: the sink's lock is what keeps
    # two of them off the one connection at once (without it this fails most runs).
    written: list[AuditEntry] = []
    for round_ in range(5):
        batches = [
            [read(len(written) + b * 10 + i, allowed=("r1",)) for i in range(10)] for b in range(20)
        ]
        written += [e for b in batches for e in b]
        query = AuditQuery(tenant="acme", record="r1", limit=10_000)
        await asyncio.gather(
            *(sqlite_sink.append(b) for b in batches),
            *(sqlite_sink.newest_first(query, 0) for _ in range(20)),
        )
        assert ids(await sqlite_sink.newest_first(query, 0)) == ids(written[::-1]), round_
