"""Writes cut short between storing new versions and closing old ones, and writes the
store applied after their writer gave up, on both stores.

A write stores its new versions first, then closes the versions they replace.
A process that dies in between leaves a stored record naming, in `supersedes`,
a version that is still open. The next write to that chain, or `whose repair`,
must close that version with the successor the stored link names.

The process cannot be stopped between those two store calls from a test, so
the death is simulated there and only there: the store's `update` raises once
the write has stored its new versions. Everything else is real: the store
(Qdrant's edge engine, and a real Qdrant server), OPA with the project's
policies, and the in-process locks.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sidecar.auth.identity import Identity
from sidecar.embed.hashing import HashingEmbedder
from sidecar.policy.engine import PolicyEngine
from sidecar.record import MemoryWrite
from sidecar.store import Store, StoreUnavailable, Vectors
from sidecar.store.edge import EdgeStore
from sidecar.store.schema import KEYWORD_FIELDS
from sidecar.store.scope import Scope
from sidecar.writes.locks import LocalLocks
from sidecar.writes.repair import repair
from sidecar.writes.writer import Writer, WriteRefused
from tests.integration.conftest import BACKENDS, backend
from tests.integration.test_supersession import check_chains

DIM = 32
embedder = HashingEmbedder(DIM)
ALICE = Identity("alice", "acme")


class ProcessDied(Exception):
    """Stands for the process stopping: nothing after it runs."""


class DiesBeforeClosing:
    """A real store whose `update` fails while `dying` is set (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.dying = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def update(self, tenant: str, record_id: uuid.UUID, fields: dict[str, Any]) -> None:
        if self.dying:
            raise ProcessDied
        await self.store.update(tenant, record_id, fields)


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = backend(request.param, tmp_path, DIM, optimize_interval_s=60, request=request)
    await opened.open()
    yield opened
    await opened.close()


def belief(key: str | None, valid_at: str, **extra: Any) -> MemoryWrite:
    body: dict[str, Any] = {
        "content": f"alice believes {key} as of {valid_at}",
        "observer_id": "alice",
        "source_id": "session",
        "source": {"kind": "conversation", "speaker": "alice"},
        "modality": "believed",
        "audience": ["alice"],
        "valid_at": valid_at,
    }
    if key is not None:
        body["proposition"] = {"text": key, "key": key, "value": valid_at}
    return MemoryWrite.model_validate(body | extra)


async def write(writer: Writer, *bodies: MemoryWrite) -> list[str]:
    return [str(r.id) for r in await writer.write(list(bodies), ALICE, datetime.now(UTC))]


async def dies_before_closing(writer: Writer, *bodies: MemoryWrite) -> None:
    """Write `bodies`; the process dies after storing them, before closing anything."""
    store = writer.store
    assert isinstance(store, DiesBeforeClosing)
    store.dying = True
    try:
        with pytest.raises(ProcessDied):
            await writer.write(list(bodies), ALICE, datetime.now(UTC))
    finally:
        store.dying = False


async def everything(store: Store) -> dict[str, dict[str, Any]]:
    return {h.id: h.payload for h in (await store.find(Scope(tenant="acme"), 1000)).records}


def open_ids(records: dict[str, dict[str, Any]]) -> set[str]:
    return {i for i, r in records.items() if "invalid_at" not in r}


@pytest.fixture
def writer(store: Store, policy: PolicyEngine) -> Writer:
    return Writer(DiesBeforeClosing(store), policy, embedder, LocalLocks())


async def _cut_short_batch(writer: Writer) -> tuple[str, dict[str, dict[str, Any]]]:
    """v1 stored; [v2, v3] stored, v2 already closed by v3; v1 never closed."""
    [v1] = await write(writer, belief("k", "2026-10-01T00:00:00Z"))
    await dies_before_closing(
        writer, belief("k", "2026-10-05T00:00:00Z"), belief("k", "2026-10-10T00:00:00Z")
    )
    records = await everything(writer.store)
    assert len(open_ids(records)) == 2
    return v1, records


def _v2_v3(records: dict[str, dict[str, Any]], v1: str) -> tuple[str, str]:
    [v2] = [i for i, r in records.items() if r.get("supersedes") == v1]
    return v2, records[v2]["superseded_by"]


async def test_repair_closes_a_cut_short_batch_along_its_stored_link(writer: Writer) -> None:
    v1, before = await _cut_short_batch(writer)
    v2, v3 = _v2_v3(before, v1)

    assert await repair(writer.store, LocalLocks(), "acme") == 1

    after = await everything(writer.store)
    # v1 ends where v2 starts (before: it ran on to v3, overlapping v2, and v2
    # dropped out of the chain when v3 was relinked to v1).
    assert after[v1]["superseded_by"] == v2
    assert after[v1]["invalid_at"] == "2026-10-05T00:00:00Z"
    assert after[v3] == before[v3]
    assert open_ids(after) == {v3}
    check_chains(list(after.values()))
    assert await repair(writer.store, LocalLocks(), "acme") == 0


async def test_the_next_write_closes_a_cut_short_batch_along_its_stored_link(
    writer: Writer,
) -> None:
    v1, before = await _cut_short_batch(writer)
    v2, v3 = _v2_v3(before, v1)

    [v4] = await write(writer, belief("k", "2026-10-20T00:00:00Z"))

    after = await everything(writer.store)
    assert after[v1]["superseded_by"] == v2
    assert after[v3]["superseded_by"] == v4
    assert after[v4]["supersedes"] == v3
    check_chains(list(after.values()))


class LandsLate:
    """A real store whose `put` answers like a request that timed out while `late` is
    set, and is applied only at `land()`: a Qdrant node still applies a write whose
    answer the sidecar stopped waiting for, after the chain lock was let go."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.late = False
        self.pending: list[tuple[str, list[tuple[dict[str, Any], Vectors]]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def put(self, tenant: str, items: list[tuple[dict[str, Any], Vectors]]) -> None:
        if self.late:
            self.pending.append((tenant, items))
            raise StoreUnavailable("ReadTimeout: ")
        await self.store.put(tenant, items)

    async def land(self) -> None:
        for tenant, items in self.pending:
            await self.store.put(tenant, items)
        self.pending = []


@pytest.mark.parametrize("later", [1, 2])
async def test_a_version_stored_after_its_writer_gave_up_is_mended_into_the_line(
    store: Store, policy: PolicyEngine, later: int
) -> None:
    """v2's store call fails (503), the lock is let go, `later` versions are written,
    and only then is v2 stored: it and the version after v1 both supersede v1. The
    next write puts v2 back where its valid time says: one line, links both ways."""
    lands_late = LandsLate(store)
    writer = Writer(lands_late, policy, embedder, LocalLocks())
    [v1] = await write(writer, belief("k", "2026-10-01T00:00:00Z"))
    lands_late.late = True
    with pytest.raises(StoreUnavailable):
        await write(writer, belief("k", "2026-10-02T00:00:00Z"))
    lands_late.late = False
    after_v2 = [
        await write(writer, belief("k", f"2026-10-{3 + n:02d}T00:00:00Z")) for n in range(later)
    ]
    await lands_late.land()
    forked = await everything(store)
    [v2] = [i for i, r in forked.items() if r["valid_at"] == "2026-10-02T00:00:00Z"]
    assert forked[v2]["supersedes"] == forked[after_v2[0][0]]["supersedes"] == v1

    await write(writer, belief("k", "2026-10-20T00:00:00Z"))

    records = await everything(store)
    check_chains(list(records.values()))
    line = sorted(records.values(), key=lambda r: r["valid_at"])
    assert [r.get("supersedes") for r in line] == [None] + [r["id"] for r in line[:-1]]


async def _cut_short_keyless(writer: Writer) -> tuple[str, str]:
    """A stored; B (supersedes A) stored; A never closed."""
    [a] = await write(writer, belief(None, "2026-10-01T00:00:00Z"))
    await dies_before_closing(writer, belief(None, "2026-10-02T00:00:00Z", supersedes=a))
    records = await everything(writer.store)
    [b] = [i for i, r in records.items() if r.get("supersedes") == a]
    assert open_ids(records) == {a, b}
    return a, b


async def test_a_keyless_version_left_open_cannot_be_superseded_twice(writer: Writer) -> None:
    a, b = await _cut_short_keyless(writer)

    with pytest.raises(WriteRefused) as refused:
        await write(writer, belief(None, "2026-10-03T00:00:00Z", supersedes=a))

    assert refused.value.problems == [
        {"index": 0, "id": refused.value.problems[0]["id"], "reasons": ["cannot_supersede"]}
    ]
    records = await everything(writer.store)
    assert set(records) == {a, b}  # nothing stored, the line not forked


async def test_repair_closes_a_keyless_version_left_open(writer: Writer) -> None:
    a, b = await _cut_short_keyless(writer)

    assert await repair(writer.store, LocalLocks(), "acme") == 1

    records = await everything(writer.store)
    assert records[a]["superseded_by"] == b
    assert records[a]["invalid_at"] == "2026-10-02T00:00:00Z"
    assert open_ids(records) == {b}
    check_chains(list(records.values()))
    assert await repair(writer.store, LocalLocks(), "acme") == 0
    # And the line goes on from its real head.
    [c] = await write(writer, belief(None, "2026-10-03T00:00:00Z", supersedes=b))
    assert (await everything(writer.store))[b]["superseded_by"] == c


def _stored(record_id: str, tenant: str = "acme", **extra: Any) -> dict[str, Any]:
    return {
        "id": record_id,
        "tenant": tenant,
        "content": "c",
        "observer_id": "alice",
        "valid_at": "2026-10-01T00:00:00Z",
    } | extra


async def test_the_store_finds_records_by_what_they_supersede(store: Store) -> None:
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    names_a, names_b = str(uuid.uuid4()), str(uuid.uuid4())
    records = [
        _stored(a),
        _stored(names_a, supersedes=a),
        _stored(names_b, supersedes=b),
        # Another tenant's record naming the same id is never found.
        _stored(str(uuid.uuid4()), tenant="globex", supersedes=a),
    ]
    for record in records:
        await store.put(record["tenant"], [(record, {"": embedder.embed("c")})])

    def found(ids: tuple[str, ...]) -> Scope:
        return Scope(tenant="acme", supersedes_any_of=ids)

    assert [h.id for h in (await store.find(found((a,)), 10)).records] == [names_a]
    assert {h.id for h in (await store.find(found((a, b, c)), 10)).records} == {
        names_a,
        names_b,
    }
    assert (await store.find(found(()), 10)).records == []


async def test_an_edge_store_made_without_the_supersedes_index_gains_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sidecar.store.edge as edge

    older = tuple(name for name in KEYWORD_FIELDS if name != "supersedes")
    a, names_a = str(uuid.uuid4()), str(uuid.uuid4())
    with monkeypatch.context() as patch:
        # A store folder written by a version that did not index `supersedes`.
        patch.setattr(edge, "KEYWORD_FIELDS", older)
        made = EdgeStore(tmp_path / "edge", DIM, optimize_interval_s=60)
        await made.open()
        assert "supersedes" not in made.shard.info().payload_schema
        await made.put("acme", [(_stored(a), {"": embedder.embed("c")})])
        await made.put("acme", [(_stored(names_a, supersedes=a), {"": embedder.embed("c")})])
        await made.close()

    reopened = EdgeStore(tmp_path / "edge", DIM, optimize_interval_s=60)
    await reopened.open()
    try:
        assert "supersedes" in reopened.shard.info().payload_schema
        page = await reopened.find(Scope(tenant="acme", supersedes_any_of=(a,)), 10)
        assert [h.id for h in page.records] == [names_a]
    finally:
        await reopened.close()
