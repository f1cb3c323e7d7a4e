"""`whose reindex` on both backends: every record copied under the new model's vectors,
resumable after a stop, the new collection in the old one's place, and the store then
opening for the new model only."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from sidecar.embed.hashing import HashingEmbedder
from sidecar.embed.indexed import indexed_text
from sidecar.store import Store
from sidecar.store.edge import EdgeStore
from sidecar.store.reindex import reindex_edge, reindex_server
from sidecar.store.schema import point_id
from sidecar.store.scope import Scope
from sidecar.store.server import ServerStore
from sidecar.store.vectors import LEXICAL, SPEC_KEY, IndexMismatch, IndexSpec
from tests.integration.conftest import BACKENDS
from tests.qdrant_server import QdrantNode

OLD, NEW = HashingEmbedder(64), HashingEmbedder(32)
OLD_SPEC, NEW_SPEC = IndexSpec(OLD.name, 64), IndexSpec(NEW.name, 32)


class Stopped(Exception):
    """The operator stopped the reindex (the process would have died here)."""


def records(tenant: str, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": str(uuid.uuid4()),
            "tenant": tenant,
            "content": f"claim {i} about the launch",
            "proposition": {"text": f"claim {i} about the launch"},
            "observer_id": "alice",
            "modality": "asserted",
            "source_id": "s",
            "audience": ["alice"],
            "confidence": 0.5,
            "valid_at": "2026-10-01T00:00:00Z",
        }
        for i in range(n)
    ]


async def fill(store: Store) -> list[dict[str, Any]]:
    written = records("acme", 25) + records("globex", 12)
    for tenant in ("acme", "globex"):
        mine = [r for r in written if r["tenant"] == tenant]
        await store.put(tenant, [(r, {"": OLD.embed(indexed_text(r))}) for r in mine])
    return written


async def everything(store: Store) -> list[dict[str, Any]]:
    found = []
    for tenant in ("acme", "globex"):
        page = await store.find(Scope(tenant=tenant), 1000, with_vector=True)
        assert all(r.vector is not None and len(r.vector) == 32 for r in page.records)
        found += [r.payload for r in page.records]
    return found


def stop_after_first_page() -> Any:
    def report(line: str) -> None:
        if line.startswith("copied"):
            raise Stopped(line)

    return report


@pytest.mark.parametrize("kind", BACKENDS)
async def test_reindex_copies_every_record_resumably(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if kind == "edge":
        path = tmp_path / "store" / "whose_memories"
        old: Store = EdgeStore(path, 64, index=OLD_SPEC)

        def reopened(spec: IndexSpec) -> Store:
            return EdgeStore(path, spec.dim, index=spec)

        async def run(report: Any) -> int:
            return await reindex_edge(path, NEW, NEW_SPEC, 10, report)
    else:
        node: QdrantNode = request.getfixturevalue("qdrant_server")
        name = f"test_{uuid.uuid4().hex[:12]}"
        old = ServerStore.connect([node.url], name, 64, index=OLD_SPEC)

        def reopened(spec: IndexSpec) -> Store:
            return ServerStore.connect([node.url], name, spec.dim, index=spec)

        async def run(report: Any) -> int:
            return await reindex_server([node.url], name, NEW, NEW_SPEC, 10, report)

    await old.open()
    written = await fill(old)
    await old.close()
    with pytest.raises(Stopped):
        await run(stop_after_first_page())
    assert await run(lambda _: None) == len(written) - 10  # the first page is not redone
    new = reopened(NEW_SPEC)
    await new.open()
    try:
        found = await everything(new)
        assert sorted(found, key=lambda p: p["id"]) == sorted(written, key=lambda p: p["id"])
        [best] = await new.search(NEW.embed("claim 7"), Scope(tenant="acme"), 1, text="claim 7")
        assert best.payload["content"] == "claim 7 about the launch"
    finally:
        await new.close()
    stale = reopened(OLD_SPEC)
    with pytest.raises(IndexMismatch, match="holds vectors of hashing-v1 \\(32 dimensions"):
        await stale.open()


async def test_a_store_with_corpus_idf_is_reindexed_without_its_term_lists(
    request: pytest.FixtureRequest,
) -> None:
    """The first hybrid version weighed terms by document frequencies the server store
    counted from a term list on every point (`_lexical_terms`). Its lexical encoder has
    another name, so its collection refuses to open until reindexed, and the reindex
    does not copy that list (it would be served in every payload)."""
    if "server" not in BACKENDS:
        pytest.skip("needs the server backend (WHOSE_TEST_BACKENDS)")
    node: QdrantNode = request.getfixturevalue("qdrant_server")
    name = f"test_{uuid.uuid4().hex[:12]}"
    before = IndexSpec(NEW.name, 32, "bm25-english-k1.2-b0.75-avg24")
    client = AsyncQdrantClient(url=node.url, check_compatibility=False)
    try:
        await client.create_collection(
            name,
            vectors_config=qm.VectorParams(size=32, distance=qm.Distance.COSINE),
            sparse_vectors_config={LEXICAL: qm.SparseVectorParams()},
            metadata={SPEC_KEY: before.as_json()},
        )
        written = records("acme", 3)
        await client.upsert(
            name,
            points=[
                qm.PointStruct(
                    id=point_id("acme", r["id"]),
                    vector={"": NEW.embed(indexed_text(r))},
                    payload={**r, "_lexical_terms": [1, 2, 3]},
                )
                for r in written
            ],
            wait=True,
        )
    finally:
        await client.close()
    stale = ServerStore.connect([node.url], name, 32, index=NEW_SPEC)
    with pytest.raises(IndexMismatch, match=re.escape("lexical bm25-english-k1.2-b0.75-avg24)")):
        await stale.open()
    assert await reindex_server([node.url], name, NEW, NEW_SPEC, 10, lambda _: None) == 3
    new = ServerStore.connect([node.url], name, 32, index=NEW_SPEC)
    await new.open()
    try:
        page = await new.find(Scope(tenant="acme"), 10)
        assert sorted((r.payload for r in page.records), key=lambda p: p["id"]) == sorted(
            written, key=lambda p: p["id"]
        )
        [best] = await new.search(None, Scope(tenant="acme"), 1, text="claim 2")
        assert best.payload["content"] == "claim 2 about the launch"
    finally:
        await new.close()
