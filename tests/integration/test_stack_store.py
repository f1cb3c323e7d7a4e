"""Stack collections (store/stacks.py) on both backends against the real engines: a
RAG stack's own collection, with its own vectors, per tenant.

`edge`: shards under a folder of the test's own. `server`: collections on the
session's real Qdrant server (skipped with one line where there is no binary), each
test with tenants of its own, since the server is shared."""

from __future__ import annotations

import asyncio
import functools
import math
import uuid
from collections.abc import AsyncIterator, Collection
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client.http import models as qm

from sidecar.auth.identity import Identity
from sidecar.embed.remote import RemoteEmbedder
from sidecar.errors import CollectionExists, CollectionRefused, QueryMissing, QueryRefused
from sidecar.http.request_metrics import Traffic
from sidecar.policy.engine import PolicyEngine
from sidecar.record import MemoryWrite
from sidecar.store import Store, Vectors
from sidecar.store.edge import EdgeStore
from sidecar.store.layout import VectorLayout
from sidecar.store.probes import Nearest, Recommend
from sidecar.store.schema import INDEXED_FIELDS
from sidecar.store.scope import Scope
from sidecar.store.stacks import StackCollections, physical_name
from sidecar.writes.locks import LocalLocks
from sidecar.writes.writer import Writer, WriteRefused
from tests.factories import record
from tests.integration.conftest import BACKENDS

DIM = 1536
SPARSE = "langchain-sparse"
# LangChain's hybrid collection (`from_texts` with OpenAI's size and its defaults).
KB = {
    "vectors": {"": {"size": DIM, "distance": "Cosine"}},
    "sparse_vectors": {SPARSE: {"modifier": "idf"}},
}


def kb() -> VectorLayout:
    return VectorLayout.from_create_body(KB)


def registry(
    kind: str, folder: Path, request: pytest.FixtureRequest, **more: Any
) -> StackCollections:
    if kind == "edge":
        return StackCollections.edge(folder / "stacks", optimize_interval_s=0.01, **more)
    qdrant = request.getfixturevalue("qdrant_server")
    client = AsyncQdrantClient(url=qdrant.url, timeout=30, check_compatibility=False)
    return StackCollections.server([client], **more)


@pytest.fixture(params=BACKENDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def stacks(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[StackCollections]:
    opened = registry(kind, tmp_path, request, reserved=["whose_memories"])
    await opened.open()
    yield opened
    await opened.close()


@pytest.fixture
def tenants() -> tuple[str, str]:
    """Two tenants of this test alone (the server is the session's)."""
    run = uuid.uuid4().hex[:8]
    return f"acme-{run}", f"globex-{run}"


def dense(*hot: int) -> list[float]:
    """A unit vector along the sum of the axes `hot`."""
    v = [0.0] * DIM
    for axis in hot:
        v[axis] = 1.0
    norm = math.sqrt(len(hot))
    return [x / norm for x in v]


def sparse(weights: dict[int, float]) -> qm.SparseVector:
    return qm.SparseVector(indices=list(weights), values=list(weights.values()))


async def put(store: Store, tenant: str, text: str, vectors: dict[str, Any]) -> str:
    payload = record(text, tenant=tenant)
    await store.put(tenant, [(payload, vectors)])
    return str(payload["id"])


async def test_a_stack_collection_holds_and_searches_its_own_vectors(
    stacks: StackCollections, tenants: tuple[str, str]
) -> None:
    acme, _ = tenants
    info = await stacks.create(acme, "kb", kb(), "alice")
    assert (info.tenant, info.name, info.creator) == (acme, "kb", "alice")
    store = await stacks.store(acme, "kb")
    assert store.vectors == kb()
    launch = await put(
        store, acme, "the launch is October 17", {"": dense(0), SPARSE: sparse({1: 2.0, 2: 1.0})}
    )
    venue = await put(
        store, acme, "the venue is hall A", {"": dense(1), SPARSE: sparse({2: 0.5, 3: 3.0})}
    )
    both = await put(
        store, acme, "launch at hall A", {"": dense(0, 1), SPARSE: sparse({1: 1.0, 3: 1.0})}
    )
    scope = Scope(tenant=acme)

    found = await store.probe(Nearest(dense(0)), "", scope, 3)
    assert [f.record.id for f in found] == [launch, both, venue]
    assert found[0].record.score == pytest.approx(1.0)
    assert found[1].record.score == pytest.approx(1 / math.sqrt(2))

    # Sparse: the dot product of the weights as sent (no IDF, whatever was asked).
    query = sparse({1: 1.0, 3: 1.0})
    found = await store.probe(
        Nearest(query), SPARSE, scope, 3, with_vectors=frozenset({SPARSE, ""})
    )
    scored = [(f.record.id, f.record.score) for f in found]
    assert scored[0] == (venue, 3.0)
    assert set(scored[1:]) == {(launch, 2.0), (both, 2.0)}
    stored = {f.record.id: f.vectors for f in found}
    assert stored[launch][SPARSE] == sparse({1: 2.0, 2: 1.0})
    assert stored[launch][""] == pytest.approx(dense(0))

    recommended = await store.probe(
        Recommend("best_score", (dense(1),), ()), "", scope, 1, exclude={venue}
    )
    assert [f.record.id for f in recommended] == [both]

    fetched = await store.fetch(acme, [uuid.UUID(launch)], frozenset({SPARSE}))
    assert [set(f.vectors) for f in fetched] == [{SPARSE}]
    with pytest.raises(QueryRefused, match="Not existing vector name"):
        await store.probe(Nearest(dense(0)), "lexical", scope, 3)


async def test_two_tenants_each_have_a_kb_and_never_see_the_others(
    stacks: StackCollections, tenants: tuple[str, str]
) -> None:
    acme, globex = tenants
    await stacks.create(acme, "kb", kb(), "alice")
    # Another layout under the same name: another collection altogether.
    theirs = VectorLayout.from_create_body({"vectors": {"size": 4, "distance": "Dot"}})
    await stacks.create(globex, "kb", theirs, "gary")
    ours_store, their_store = await stacks.store(acme, "kb"), await stacks.store(globex, "kb")
    ours = await put(ours_store, acme, "ours", {"": dense(0), SPARSE: sparse({1: 1.0})})
    their_id = await put(their_store, globex, "theirs", {"": [1.0, 0.0, 0.0, 0.0]})

    mine = await ours_store.probe(Nearest(dense(0)), "", Scope(tenant=acme), 10)
    assert [f.record.id for f in mine] == [ours]
    # The other tenant's scope on our store finds nothing, and the same the other way.
    assert await ours_store.probe(Nearest(dense(0)), "", Scope(tenant=globex), 10) == []
    assert await their_store.probe(Nearest([1.0, 0, 0, 0]), "", Scope(tenant=acme), 10) == []
    assert await ours_store.get(acme, [uuid.UUID(their_id)]) == []
    assert [r.id for r in (await their_store.find(Scope(tenant=globex), 10)).records] == [their_id]

    assert await stacks.names(acme) == ["kb"]
    assert (await stacks.get(globex, "kb")) is not None
    assert (await stacks.get(globex, "kb")).layout == theirs  # type: ignore[union-attr]
    # Dropping ours leaves theirs.
    assert await stacks.drop(acme, "kb")
    assert await stacks.names(globex) == ["kb"]
    assert [r.id for r in (await their_store.find(Scope(tenant=globex), 10)).records] == [their_id]


async def test_the_collections_survive_a_restart(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, tenants: tuple[str, str]
) -> None:
    acme, _ = tenants
    first = registry(kind, tmp_path, request)
    await first.open()
    docs = VectorLayout.from_create_body(
        {"vectors": {"text": {"size": 3, "distance": "Euclid"}}, "sparse_vectors": {"bm25": {}}}
    )
    await first.create(acme, "kb", kb(), "alice")
    await first.create(acme, "docs", docs, "bob")
    point = await put(await first.store(acme, "docs"), acme, "kept", {"text": [1.0, 2.0, 3.0]})
    await first.close()

    again = registry(kind, tmp_path, request)
    await again.open()
    try:
        assert await again.names(acme) == ["docs", "kb"]
        info = await again.get(acme, "docs")
        assert info is not None
        assert (info.layout, info.creator) == (docs, "bob")
        assert info.created <= datetime.now(UTC)
        assert (await again.get(acme, "kb")).layout == kb()  # type: ignore[union-attr]
        store = await again.store(acme, "docs")
        found = await store.probe(Nearest([1.0, 2.0, 3.5]), "text", Scope(tenant=acme), 5)
        assert [f.record.id for f in found] == [point]
        # Euclid: the distance, smaller is nearer.
        assert found[0].record.score == pytest.approx(0.5)
    finally:
        await again.close()


async def test_drop_removes_the_collection_and_its_points(
    kind: str, stacks: StackCollections, tenants: tuple[str, str], tmp_path: Path
) -> None:
    acme, _ = tenants
    await stacks.create(acme, "kb", kb(), "alice")
    store = await stacks.store(acme, "kb")
    await put(store, acme, "gone soon", {"": dense(0)})
    physical = physical_name(acme, "kb")
    if kind == "edge":
        assert (tmp_path / "stacks" / physical).is_dir()
        assert (tmp_path / "stacks" / f"{physical}.json").is_file()

    assert await stacks.drop(acme, "kb")
    assert await stacks.get(acme, "kb") is None
    assert await stacks.names(acme) == []
    assert not await stacks.drop(acme, "kb")
    with pytest.raises(QueryMissing, match="Collection `kb` doesn't exist"):
        await stacks.store(acme, "kb")
    if kind == "edge":
        assert list((tmp_path / "stacks").iterdir()) == []
    # The name is free again, for an empty collection.
    await stacks.create(acme, "kb", kb(), "alice")
    again = await stacks.store(acme, "kb")
    assert (await again.find(Scope(tenant=acme), 10)).records == []


async def test_names_exists_and_bounds_are_refused_by_name(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, tenants: tuple[str, str]
) -> None:
    acme, globex = tenants
    stacks = registry(kind, tmp_path, request, max_collections=2, reserved=["whose_memories"])
    await stacks.open()
    try:
        await stacks.create(acme, "a", kb(), "alice")
        with pytest.raises(CollectionExists):
            await stacks.create(acme, "a", kb(), "bob")
        # The whose collection's name is everyone's already.
        with pytest.raises(CollectionExists):
            await stacks.create(acme, "whose_memories", kb(), "alice")
        assert await stacks.get(acme, "whose_memories") is None
        for bad in ("", "a/b", "x" * 256, "nul\0"):
            with pytest.raises(CollectionRefused) as refused:
                await stacks.create(acme, bad, kb(), "alice")
            assert refused.value.reason == "collection_name"
            assert await stacks.get(acme, bad) is None
        await stacks.create(acme, "b", kb(), "alice")
        with pytest.raises(CollectionRefused) as refused:
            await stacks.create(acme, "c", kb(), "alice")
        assert refused.value.reason == "too_many_collections"
        # The bound is per tenant.
        await stacks.create(globex, "c", kb(), "gary")
        assert await stacks.names(acme) == ["a", "b"]
        assert await stacks.names(globex) == ["c"]
    finally:
        await stacks.close()


async def test_the_writer_stores_a_stacks_records_with_its_vectors_and_no_embedder(
    stacks: StackCollections, policy: PolicyEngine, tenants: tuple[str, str]
) -> None:
    acme, _ = tenants
    await stacks.create(acme, "kb", kb(), "alice")
    store = await stacks.store(acme, "kb")
    # An embedder nobody answers for: any call to it would fail the write.
    nowhere = RemoteEmbedder("http://127.0.0.1:9", "none", DIM, timeout_s=0.5, retries=0)
    writer = Writer(store, policy, nowhere, LocalLocks())
    alice = Identity("alice", acme)

    def body(text: str, vectors: dict[str, Any] | None) -> MemoryWrite:
        written = MemoryWrite.model_validate(
            {
                "content": text,
                "observer_id": "alice",
                "source_id": "doc-1",
                "modality": "asserted",
                "audience": ["alice"],
            }
        )
        return written if vectors is None else written.with_vectors(vectors)

    now = datetime.now(UTC)
    [stored] = await writer.write(
        [body("the launch is October 17", {"": dense(2), SPARSE: sparse({5: 1.0})})], alice, now
    )
    found = await store.probe(Nearest(dense(2)), "", Scope(tenant=acme), 5)
    assert [f.record.id for f in found] == [str(stored.id)]
    assert found[0].record.payload["content"] == "the launch is October 17"
    assert found[0].record.score == pytest.approx(1.0)

    refusals = [
        (body("no vectors", None), "vector_required"),
        (body("unknown", {"dense": dense(0)}), "vector_name_unknown:dense"),
        (body("short", {"": [1.0, 2.0]}), f"vector_dimension_must_be_{DIM}"),
        (
            body("ragged", {"": dense(0), SPARSE: qm.SparseVector(indices=[1, 2], values=[1.0])}),
            f"sparse_vector_invalid:{SPARSE}",
        ),
    ]
    for written, reason in refusals:
        with pytest.raises(WriteRefused) as refused:
            await writer.write([written], alice, now)
        assert refused.value.problems[0]["reasons"] == [reason]
    assert len((await store.find(Scope(tenant=acme), 10)).records) == 1


# What the shard of a stack is made with, as edge.MADE_WITH says it (spelled out, so
# the test holds the code to it): the tenant's and the audience's (HNSW links), and
# every index without which the engine answers otherwise (see the next test).
MADE_WITH = {
    "tenant",
    "audience",
    "content",
    "valid_at",
    "invalid_at",
    "recorded_at",
    "confidence",
    "evidence[].at",
    "evidence[].kind",
    "evidence[].ref",
    "evidence[].by",
}


async def test_an_embedded_stack_is_made_with_what_answers_need_and_completed_at_once(
    tmp_path: Path,
) -> None:
    """The engine flushes every index it has made on each one it makes: whose's 34, made
    on a stack's first use inside a request, stood the process still 0.6-0.8 s (past
    qdrant-client's 5 s timeout on a loaded machine). Opening makes MADE_WITH; a task
    makes the rest right after, with requests in flight (not at a quiet moment)."""
    opened = EdgeStore(tmp_path / "direct", DIM, vectors=kb())
    shard = await asyncio.to_thread(opened._open_shard)  # what open() waits for
    try:
        assert set(shard.info().payload_schema) == MADE_WITH
    finally:
        await asyncio.to_thread(shard.close)

    traffic = Traffic()
    traffic.in_flight = 1  # never quiet
    stacks = StackCollections.edge(
        tmp_path / "stacks", optimize_interval_s=0.05, quiet_for=traffic.quiet_for
    )
    await stacks.open()
    try:
        await stacks.create("acme", "kb", kb(), "alice")
        store = await stacks.store("acme", "kb")
        assert isinstance(store, EdgeStore)
        written = record("the launch is October 17", source_id="s2")
        await store.put("acme", [(written, {"": dense(0), SPARSE: sparse({1: 1.0})})])
        for _ in range(600):
            if set(store.shard.info().payload_schema) == INDEXED_FIELDS:
                break
            await asyncio.sleep(0.1)
        assert set(store.shard.info().payload_schema) == INDEXED_FIELDS
        found = await store.find(Scope(tenant="acme", source_id="s2"), 10)
        assert [r.id for r in found.records] == [written["id"]]
    finally:
        await stacks.close()


async def test_a_stack_on_a_server_gets_its_indexes_in_two_requests(
    qdrant_server: Any, tenants: tuple[str, str]
) -> None:
    """On a Qdrant server each index also flushes every one made before it: whose's
    34 on a stack's first use took about a second inside one request (past
    qdrant-client's 5 s in CI once). Creating the collection makes MADE_WITH, its first
    use the rest."""
    acme, _ = tenants
    client = AsyncQdrantClient(url=qdrant_server.url, timeout=30, check_compatibility=False)
    stacks = StackCollections.server([client])
    await stacks.open()
    try:
        await stacks.create(acme, "kb", kb(), "alice")
        physical = physical_name(acme, "kb")
        made = await client.get_collection(physical)
        assert set(made.payload_schema) == MADE_WITH
        await stacks.store(acme, "kb")
        used = await client.get_collection(physical)
        assert set(used.payload_schema) == INDEXED_FIELDS
    finally:
        await stacks.drop(acme, "kb")
        await stacks.close()


async def test_a_stack_filled_at_once_gets_its_indexes_before_it_grows(tmp_path: Path) -> None:
    """An index made later is built over every point there is, the process standing
    still the while: writes that keep a new stack busy (the task waits for a pause)
    make the remaining indexes before it holds LATE_INDEXES_UNDER points."""
    from sidecar.store.edge import LATE_INDEXES_UNDER

    store = EdgeStore(tmp_path / "kb", DIM, vectors=kb(), optimize_interval_s=60)
    await store.open()
    try:
        batch: list[tuple[dict[str, Any], Vectors]] = [
            (record(f"page {i}"), {"": dense(i % DIM), SPARSE: sparse({i: 1.0})})
            for i in range(LATE_INDEXES_UNDER + 1)
        ]
        await store.put("acme", batch[:1])
        assert set(store.shard.info().payload_schema) != INDEXED_FIELDS
        await store.put("acme", batch[1:])
        assert set(store.shard.info().payload_schema) == INDEXED_FIELDS
    finally:
        await store.close()


def test_the_indexes_made_after_a_stack_change_no_answer(tmp_path: Path) -> None:
    """Every index a stack's shard gets after it is made (all but MADE_WITH): each kind
    of single test a caller's filter may put on its field (http/qdrant/caller_filter.py
    refuses two in one condition) selects the same points with the index and without
    it, whatever the field holds (records hold strings)."""
    import qdrant_edge as qe

    from sidecar.store.edge import _indexes

    later = sorted(INDEXED_FIELDS - MADE_WITH)
    assert later
    assert all("[]" not in name for name in later)  # no `nested` condition reaches them
    # A keyword may read as a number or a time, too.
    when, later_on = "2026-03-01T00:00:00Z", "2027-01-01T10:00:00+02:00"
    shapes: list[Any] = [None, "", "x", "y", ["x"], ["x", "y"], [], ["y", "z"], "5", "-1.5"]
    shapes += [when, [when, later_on], ["x", when], "MISSING"]
    payloads = []
    for i, shape in enumerate(shapes):
        payload: dict[str, Any] = {"tenant": "acme", "n": i}
        for name in later:
            if shape == "MISSING":
                continue
            *outer, leaf = name.split(".")
            at = payload
            for part in outer:
                at = at.setdefault(part, {})
            at[leaf] = shape
        payloads.append(payload)

    def shard(folder: str, names: Collection[str]) -> Any:
        config = qe.EdgeConfig(vectors=qe.EdgeVectorParams(size=4, distance=qe.Distance.Cosine))
        made = qe.EdgeShard.create(str(tmp_path / folder), config)
        for name, schema in _indexes():
            if name in names:
                made.update(qe.UpdateOperation.create_field_index(name, schema))
        points = [qe.Point(i + 1, [1.0, 0.1 * i, 0.0, 0.0], p) for i, p in enumerate(payloads)]
        made.update(qe.UpdateOperation.upsert_points(points))
        return made

    without, indexed = shard("without", MADE_WITH), shard("indexed", INDEXED_FIELDS)

    def conditions(name: str) -> list[Any]:
        field = functools.partial(qe.FieldCondition, name)
        return [
            field(match=qe.MatchValue("x")),
            field(match=qe.MatchValue(5)),
            field(match=qe.MatchValue(True)),
            field(match=qe.MatchAny(["x", "z"])),
            field(match=qe.MatchAny([])),
            field(match=qe.MatchExcept(["x"])),
            field(match=qe.MatchExcept([])),
            field(values_count=qe.ValuesCount(gte=2)),
            field(values_count=qe.ValuesCount(lt=1)),
            field(range=qe.RangeFloat(gt=0)),
            field(range=qe.RangeDateTime(gt="2026-01-01T00:00:00Z")),
            field(is_empty=True),
            field(is_null=False),
            qe.IsEmptyCondition(name),
            qe.IsNullCondition(name),
        ]

    def selected(made: Any, flt: Any) -> list[int]:
        found, _ = made.scroll(qe.ScrollRequest(limit=100, filter=flt, with_payload=True))
        return sorted(p.payload["n"] for p in found)

    try:
        for name in later:
            for condition in conditions(name):
                tenant = qe.FieldCondition("tenant", match=qe.MatchValue("acme"))
                for flt in (
                    qe.Filter(must=[condition]),
                    qe.Filter(must_not=[condition]),
                    qe.Filter(must=[tenant], should=[condition]),
                ):
                    assert selected(without, flt) == selected(indexed, flt), (name, flt)
    finally:
        without.close()
        indexed.close()
