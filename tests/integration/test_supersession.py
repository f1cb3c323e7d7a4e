"""Supersession under concurrency: real stores (edge; the replica tests also on a Qdrant
server), real OPA, real Redis.

Invariant: per chain (tenant, observer, observed, proposition key) at most one
open version; no record is ever lost; every link is two-way (a.superseded_by
== b.id exactly when b.supersedes == a.id).
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.auth.identity import Identity
from sidecar.embed.hashing import HashingEmbedder
from sidecar.policy.opa import PolicyClient
from sidecar.record import MemoryWrite
from sidecar.store import Store
from sidecar.store.edge import EdgeStore
from sidecar.store.scope import Scope
from sidecar.store.server import ServerStore
from sidecar.writes.locks import LocalLocks, LockUnavailable, RedisLocks
from sidecar.writes.repair import repair
from sidecar.writes.supersession import chain_of
from sidecar.writes.writer import Writer, WriteRefused
from tests.integration.conftest import BACKENDS, backend
from tests.loops import own_loop

DIM = 32
embedder = HashingEmbedder(DIM)


def belief(holder: str, key: str, value: str, **extra: Any) -> MemoryWrite:
    return MemoryWrite.model_validate(
        {
            "content": f"{holder} believes {key} is {value}",
            "proposition": {"text": f"{key} is {value}", "key": key, "value": value},
            "observer_id": holder,
            "source_id": "session",
            "source": {"kind": "conversation", "speaker": holder},
            "modality": "believed",
            "audience": [holder],
        }
        | extra
    )


async def everything(store: Store) -> list[dict[str, Any]]:
    return [h.payload for h in (await store.find(Scope(tenant="acme"), 10_000)).records]


def check_chains(records: list[dict[str, Any]]) -> None:
    by_id = {r["id"]: r for r in records}
    open_per_chain = Counter(chain_of(r) for r in records if "invalid_at" not in r)
    assert all(n == 1 for chain, n in open_per_chain.items() if chain is not None), open_per_chain
    for record in records:
        if "superseded_by" in record:
            successor = by_id[record["superseded_by"]]
            assert successor["supersedes"] == record["id"]
            assert record["invalid_at"] == successor["valid_at"]
        if "supersedes" in record:
            assert by_id[record["supersedes"]]["superseded_by"] == record["id"]
    # Every chain is one line: no version has two successors.
    named = Counter(r["supersedes"] for r in records if "supersedes" in r)
    assert all(n == 1 for n in named.values()), named


@asynccontextmanager
async def policy_client(opa_url: str) -> AsyncIterator[PolicyClient]:
    client = PolicyClient(opa_url, 5.0)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def edge_store() -> AsyncIterator[EdgeStore]:
    with tempfile.TemporaryDirectory() as folder:
        store = EdgeStore(Path(folder) / "edge", DIM, optimize_interval_s=60)
        await store.open()
        try:
            yield store
        finally:
            await store.close()


class NoLocks:
    """Deliberately broken: lets the control test show what the locks prevent. Each of
    `writers` waits at `confirm` (after its snapshot, before its commit) until all have
    taken theirs: without it, whether two writes overlapped was the scheduler's choice,
    and on a loaded machine each could finish before the next read (no fork, and the
    control failed)."""

    def __init__(self, writers: int) -> None:
        self._all_read = asyncio.Barrier(writers)

    @asynccontextmanager
    async def hold(self, keys: Any) -> AsyncIterator[NoLocks]:
        yield self

    async def confirm(self) -> None:
        await self._all_read.wait()


ALICE = Identity("alice", "acme")
Loop = asyncio.AbstractEventLoop


@asynccontextmanager
async def two_replicas(
    store: Store, policy: PolicyClient, redis_url: str, second: Store | None = None
) -> AsyncIterator[list[Writer]]:
    """Two sidecar replicas' writers: separate Redis connections, one shared store
    (on a Qdrant server, each through a client of its own: `second`)."""
    clients = [aioredis.from_url(redis_url) for _ in range(2)]
    stores = [store, second or store]
    try:
        pairs = zip(stores, clients, strict=True)
        yield [Writer(s, policy, embedder, RedisLocks(c)) for s, c in pairs]
    finally:
        for c in clients:
            await c.aclose()


@asynccontextmanager
async def replica_stores(
    kind: str, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[Store, Store | None]]:
    """The store two replicas share: the embedded one (one object, as one process owns
    it), or one collection on the session's Qdrant server through two clients."""
    if kind == "edge":
        async with edge_store() as store:
            yield store, None
        return
    first = backend("server", Path(), DIM, 60, request)
    assert isinstance(first, ServerStore)
    second = ServerStore.connect([_url(request)], first.collection, DIM)
    await first.open()
    await second.open()
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def _url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("qdrant_server").url)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_two_replicas_updating_one_belief_leave_one_chain(
    opa_url: str, redis_url: str, kind: str, request: pytest.FixtureRequest
) -> None:
    async with (
        replica_stores(kind, request) as (store, second),
        policy_client(opa_url) as policy,
        two_replicas(store, policy, redis_url, second) as writers,
    ):
        updates = [
            writers[i % 2].write(
                [belief("alice", "launch.date", f"v{i}")], ALICE, datetime.now(UTC)
            )
            for i in range(20)
        ]
        await asyncio.gather(*updates)
        records = await everything(store)
    assert len(records) == 20
    check_chains(records)
    assert sum("invalid_at" not in r for r in records) == 1


@pytest.mark.parametrize("kind", BACKENDS)
async def test_without_locks_the_same_updates_fork_the_chain(
    opa_url: str, kind: str, request: pytest.FixtureRequest
) -> None:
    async with replica_stores(kind, request) as (store, _), policy_client(opa_url) as policy:
        writer = Writer(store, policy, embedder, NoLocks(writers=20))
        await asyncio.gather(
            *(
                writer.write([belief("alice", "launch.date", f"v{i}")], ALICE, datetime.now(UTC))
                for i in range(20)
            )
        )
        records = await everything(store)
    with pytest.raises(AssertionError):
        check_chains(records)


async def test_redis_down_refuses_the_write_and_stores_nothing(opa_url: str) -> None:
    async with edge_store() as store, policy_client(opa_url) as policy:
        dead = aioredis.from_url(f"redis://127.0.0.1:{_closed_port()}/0")
        writer = Writer(store, policy, embedder, RedisLocks(dead, wait_s=0.5))
        with pytest.raises(LockUnavailable):
            await writer.write([belief("alice", "launch.date", "v1")], ALICE, datetime.now(UTC))
        await dead.aclose()
        assert await everything(store) == []


def _closed_port() -> int:
    from tests.conftest import free_port

    return free_port()


async def test_an_interrupted_write_is_repaired_by_the_next_one(opa_url: str) -> None:
    async with edge_store() as store, policy_client(opa_url) as policy:
        writer = Writer(store, policy, embedder, LocalLocks())
        [old] = await writer.write([belief("alice", "k", "v1")], ALICE, datetime.now(UTC))
        # The state a crash between the two store writes leaves behind (a process
        # cannot be stopped at that exact instruction from a test): the new version
        # is stored and names its predecessor, which was never closed.
        orphan = belief("alice", "k", "v2").model_dump(
            mode="json", exclude_none=True, exclude={"vector"}
        )
        orphan |= {
            "id": str(uuid.uuid4()),
            "tenant": "acme",
            "supersedes": str(old.id),
            "valid_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        }
        await store.put("acme", [(orphan, {"": embedder.embed("k v2")})])
        assert sum("invalid_at" not in r for r in await everything(store)) == 2

        [newest] = await writer.write([belief("alice", "k", "v3")], ALICE, datetime.now(UTC))

        records = await everything(store)
    check_chains(records)
    by_id = {r["id"]: r for r in records}
    assert by_id[str(old.id)]["superseded_by"] == orphan["id"]
    assert by_id[orphan["id"]]["superseded_by"] == str(newest.id)


async def test_repair_closes_interrupted_chains_without_a_new_write(opa_url: str) -> None:
    async with edge_store() as store, policy_client(opa_url) as policy:
        writer = Writer(store, policy, embedder, LocalLocks())
        [old] = await writer.write([belief("alice", "k", "v1")], ALICE, datetime.now(UTC))
        assert old.id is not None
        orphan = {
            **(await store.get("acme", [old.id]))[0].payload,
            "id": str(uuid.uuid4()),
            "supersedes": str(old.id),
        }
        await store.put("acme", [(orphan, {"": embedder.embed("k")})])
        assert await repair(store, LocalLocks(), "acme") == 1
        assert await repair(store, LocalLocks(), "acme") == 0
        check_chains(await everything(store))


async def test_other_holders_chains_are_untouched(opa_url: str) -> None:
    async with edge_store() as store, policy_client(opa_url) as policy:
        writer = Writer(store, policy, embedder, LocalLocks())
        now = datetime.now(UTC)
        [alices] = await writer.write([belief("alice", "k", "v1")], ALICE, now)
        [bobs] = await writer.write([belief("bob", "k", "v2")], Identity("bob", "acme"), now)
        about_bob = belief("alice", "k", "v3", observed_id="bob", observed_attitude="knows")
        [nested] = await writer.write([about_bob], ALICE, now)
        records = {r["id"]: r for r in await everything(store)}
    assert all("invalid_at" not in records[str(r.id)] for r in (alices, bobs, nested))


# --- property: random interleavings of writes by several holders -----------------

HOLDERS = ["alice", "bob", "carol"]
write_op = st.tuples(
    st.sampled_from(HOLDERS),
    st.sampled_from([None, "bob"]),  # about whom: a first-person belief, or a belief about Bob
    st.sampled_from(["k1", "k2"]),
    st.booleans(),  # name the previous version explicitly
)


@pytest.fixture(scope="module")
def shared_edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EdgeStore, Loop]]:
    """One embedded store for every example, in the event loop it was opened in
    (opening a store costs most of an example): each example writes its own keys."""
    with own_loop() as loop:
        store = EdgeStore(
            tmp_path_factory.mktemp("interleavings") / "edge", DIM, optimize_interval_s=60
        )
        loop.run_until_complete(store.open())
        try:
            yield store, loop
        finally:
            loop.run_until_complete(store.close())
        loop.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(waves=st.lists(st.lists(write_op, min_size=1, max_size=5), min_size=1, max_size=5))
def test_random_interleavings_keep_one_open_version_and_lose_nothing(
    opa_url: str,
    shared_edge: tuple[EdgeStore, Loop],
    waves: list[list[tuple[str, str | None, str, bool]]],
) -> None:
    store, loop = shared_edge
    loop.run_until_complete(_interleave(store, opa_url, waves, f"-{uuid.uuid4().hex[:12]}"))


async def _interleave(
    store: Store, opa_url: str, waves: list[list[tuple[str, str | None, str, bool]]], suffix: str
) -> None:
    async with policy_client(opa_url) as policy:
        writer = Writer(store, policy, embedder, LocalLocks())
        written: set[str] = set()
        last: dict[tuple[str, str | None, str], str] = {}

        async def one(holder: str, about: str | None, key: str, explicit: bool, n: int) -> None:
            extra: dict[str, Any] = {}
            if about and about != holder:
                extra |= {"observed_id": about, "observed_attitude": "knows"}
            if explicit and (holder, about, key) in last:
                extra["supersedes"] = last[(holder, about, key)]
            try:
                [record] = await writer.write(
                    [belief(holder, key + suffix, f"v{n}", **extra)],
                    Identity(holder, "acme"),
                    datetime.now(UTC),
                )
            except WriteRefused as refused:
                problems = refused.problems
            else:
                written.add(str(record.id))
                last[(holder, about, key)] = str(record.id)
                return
            # The only acceptable refusal: naming a version that is no longer the head.
            assert problems[0]["reasons"] == ["cannot_supersede"]

        n = 0
        for wave in waves:
            jobs = []
            for holder, about, key, explicit in wave:
                n += 1
                jobs.append(one(holder, about, key, explicit, n))
            await asyncio.gather(*jobs)
        mine = [r for r in await everything(store) if r["proposition"]["key"].endswith(suffix)]
    assert {r["id"] for r in mine} == written
    check_chains(mine)


@pytest.mark.parametrize("kind", BACKENDS)
async def test_one_writer_retrying_one_id_on_two_replicas_cannot_store_it_twice(
    opa_url: str, redis_url: str, kind: str, request: pytest.FixtureRequest
) -> None:
    """A writer's chosen id names one record in its own namespace (writes.record_id):
    the same write sent to two replicas at once stores it once."""
    shared = str(uuid.uuid4())
    async with (
        replica_stores(kind, request) as (store, second),
        policy_client(opa_url) as policy,
        two_replicas(store, policy, redis_url, second) as writers,
    ):
        outcomes = await asyncio.gather(
            writers[0].write([belief("alice", "a", "v1", id=shared)], ALICE, datetime.now(UTC)),
            writers[1].write([belief("alice", "b", "v2", id=shared)], ALICE, datetime.now(UTC)),
            return_exceptions=True,
        )
        records = await everything(store)
    refused = [o for o in outcomes if isinstance(o, WriteRefused)]
    assert len(refused) == 1
    assert refused[0].problems[0]["reasons"] == ["id_exists"]
    [kept] = records
    winner = next(o for o in outcomes if not isinstance(o, BaseException))
    assert kept["proposition"]["key"] == winner[0].proposition.key  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", BACKENDS)
async def test_two_writers_choosing_one_id_store_two_records(
    opa_url: str, redis_url: str, kind: str, request: pytest.FixtureRequest
) -> None:
    """Nobody's chosen id can meet a record someone else stored (or learn it exists)."""
    shared = str(uuid.uuid4())
    async with (
        replica_stores(kind, request) as (store, second),
        policy_client(opa_url) as policy,
        two_replicas(store, policy, redis_url, second) as writers,
    ):
        [alices] = await writers[0].write(
            [belief("alice", "a", "v1", id=shared)], ALICE, datetime.now(UTC)
        )
        [bobs] = await writers[1].write(
            [belief("bob", "b", "v2", id=shared)], Identity("bob", "acme"), datetime.now(UTC)
        )
        records = await everything(store)
    assert alices.id != bobs.id
    assert len(records) == 2
