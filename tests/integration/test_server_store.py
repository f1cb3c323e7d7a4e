"""The server backend as its users run it: real Qdrant servers this test starts.

The collection and its indexes (tenant index included) made at start, the layout
from settings, the API key, failover between nodes, bounded retries, and a Qdrant
that goes down under a running sidecar (503 `store_unavailable`) and comes back
(no sidecar restart).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from qdrant_client import AsyncQdrantClient
from qdrant_client import models as qm

from sidecar.services import open_store
from sidecar.settings import Settings
from sidecar.store import StoreUnavailable
from sidecar.store.schema import (
    DATETIME_FIELDS,
    FLOAT_FIELDS,
    KEYWORD_FIELDS,
    LINKED_FIELDS,
    TENANT_FIELD,
)
from sidecar.store.scope import Scope
from sidecar.store.server import ServerStore
from tests.acceptance.story import said_by, stored
from tests.conftest import as_, free_port, ops, start_sidecar, stop
from tests.integration.test_store import DIM, embed, linked, put, rec
from tests.qdrant_server import QdrantNode, start_node

pytestmark = pytest.mark.filterwarnings(
    "ignore:Api key is used with an insecure connection:UserWarning"
)


def collection() -> str:
    return f"test_{uuid.uuid4().hex[:12]}"


def settings_for(node: QdrantNode, **more: Any) -> Settings:
    given: dict[str, Any] = {"qdrant_url": node.url, "collection": collection(), "vector_size": DIM}
    return Settings.model_validate({"store": "server"} | given | more)


async def test_start_creates_the_collection_with_every_index(qdrant_server: QdrantNode) -> None:
    settings = settings_for(qdrant_server, qdrant_shards=3)
    store = open_store(settings)
    await store.open()
    await store.close()
    client = AsyncQdrantClient(url=qdrant_server.url, check_compatibility=False)
    info = await client.get_collection(settings.collection)
    await client.close()
    assert info.config.params.shard_number == 3
    schema = info.payload_schema
    assert {TENANT_FIELD, *KEYWORD_FIELDS, *DATETIME_FIELDS, *FLOAT_FIELDS} <= set(schema)
    tenant = schema[TENANT_FIELD]
    assert tenant.data_type == qm.PayloadSchemaType.KEYWORD
    assert isinstance(tenant.params, qm.KeywordIndexParams)
    assert tenant.params.is_tenant
    assert all(schema[f].data_type == qm.PayloadSchemaType.DATETIME for f in DATETIME_FIELDS)
    assert all(schema[f].data_type == qm.PayloadSchemaType.FLOAT for f in FLOAT_FIELDS)
    # HNSW's links of an index's own only for the tenant and the audience (schema.py).
    assert linked(schema) == LINKED_FIELDS


async def test_a_collection_without_indexes_gains_them(qdrant_server: QdrantNode) -> None:
    """A collection made by hand (empty, with the dense and the lexical vector) is kept,
    and indexed."""
    name = collection()
    client = AsyncQdrantClient(url=qdrant_server.url, check_compatibility=False)
    params = qm.VectorParams(size=DIM, distance=qm.Distance.COSINE)
    await client.create_collection(
        name,
        vectors_config=params,
        sparse_vectors_config={"lexical": qm.SparseVectorParams()},
        shard_number=2,
    )
    store = ServerStore.connect([qdrant_server.url], name, DIM)
    await store.open()
    await put(store, rec("acme", "kept"))
    await store.close()
    info = await client.get_collection(name)
    await client.close()
    assert info.config.params.shard_number == 2
    assert {TENANT_FIELD, *KEYWORD_FIELDS} <= set(info.payload_schema)


@pytest.fixture(scope="module")
def locked_qdrant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QdrantNode]:
    """A server that wants an API key (QDRANT__SERVICE__API_KEY)."""
    node = start_node(tmp_path_factory.mktemp("qdrant-key"), api_key="test-key-" + "k" * 24)
    yield node
    node.stop()


async def test_the_api_key_is_sent_and_required(locked_qdrant: QdrantNode) -> None:
    without = open_store(settings_for(locked_qdrant))
    await without.open()
    with pytest.raises(StoreUnavailable, match=r"HTTP (401|403)"):
        await without.ping()
    await without.close()
    store = open_store(settings_for(locked_qdrant, qdrant_api_key=locked_qdrant.api_key))
    await store.open()
    try:
        await store.ping()
        await put(store, rec("acme", "behind a key"))
        assert await store.search(embed("behind a key"), Scope(tenant="acme"), 3)
    finally:
        await store.close()


async def test_a_dead_node_in_the_url_list_is_skipped(qdrant_server: QdrantNode) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    store = open_store(
        Settings(
            store="server",
            qdrant_url=f"{dead},{qdrant_server.url}",
            collection=collection(),
            vector_size=DIM,
        )
    )
    await store.open()
    try:
        r = rec("acme", "found on the live node")
        await put(store, r)  # a write, tried again on the next node: nothing was sent
        [hit] = await store.search(embed("found on the live node"), Scope(tenant="acme"), 3)
        assert hit.id == r["id"]
    finally:
        await store.close()


async def test_a_store_that_cannot_be_reached_fails_fast_and_bounded() -> None:
    urls = ",".join(f"http://127.0.0.1:{free_port()}" for _ in range(2))
    store = open_store(Settings(store="server", qdrant_url=urls, vector_size=DIM))
    await store.open()  # logs, does not raise: the sidecar starts and is not ready
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="ConnectError"):
        await store.search(embed("x"), Scope(tenant="acme"), 3)
    # Three attempts with waits of at most 0.5 s between them.
    assert time.monotonic() - started < 3
    await store.close()


# --- a sidecar over HTTP while its Qdrant goes down and comes back -----------------


@pytest.fixture
def own_qdrant(tmp_path: Path) -> Iterator[QdrantNode]:
    node = start_node(tmp_path / "qdrant")
    yield node
    node.stop()


def test_qdrant_down_answers_503_and_recovers_without_a_restart(
    own_qdrant: QdrantNode, tmp_path: Path
) -> None:
    env = {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": own_qdrant.url}
    base, process = start_sidecar(tmp_path / "sidecar", env=env)
    try:
        with httpx.Client(base_url=base, timeout=30) as http:
            [before] = stored(http, "alice", said_by("alice", "before"))
            own_qdrant.kill()

            down = http.post("/v1/recall", json={"query": "launch"}, headers=as_("alice"))
            assert (down.status_code, down.json()["error"]) == (503, "store_unavailable")
            refused = http.post(
                "/v1/memories", json=said_by("alice", "while down"), headers=as_("alice")
            )
            assert (refused.status_code, refused.json()["error"]) == (503, "store_unavailable")
            assert httpx.get(f"{ops(base)}/readyz").status_code == 503

            own_qdrant.start()  # the same ports and storage
            found = http.post("/v1/recall", json={"query": "launch"}, headers=as_("alice"))
            assert found.status_code == 200
            assert before["id"] in {i["id"] for i in found.json()["items"]}
            stored(http, "alice", said_by("alice", "after"))
            assert httpx.get(f"{ops(base)}/readyz").status_code == 200
        assert process.poll() is None
    finally:
        stop(process)
