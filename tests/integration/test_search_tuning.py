"""Exact search when the filter is selective (store/__init__.py `Search`), on both
backends: the nearest records an asker may read are found even where filtered HNSW
misses them.

The hard case, from the benchmark's corpus (sidecar/bench/corpus.py): 10k clustered
384-dim vectors, an asker who may read 90 % of them, none in the clusters the queries
come from. Their nearest permitted records are all far from the query, where a
filtered graph search wanders: the control below shows it missing some (so the test
can fail), and the tuned store must find every one.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import AsyncIterator

import pytest
from qdrant_client import models as qm

from sidecar.bench.corpus import DIM, Corpus, asker, build, put
from sidecar.store import Search, Store
from sidecar.store.edge import EdgeStore
from sidecar.store.scope import Scope
from sidecar.store.server import ServerStore
from sidecar.store.vectors import LEXICAL
from tests.integration.conftest import BACKENDS, backend

N = 10_000
QUERIES = 20
WHO = asker("far", 0.90)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return build(N, QUERIES, seed=11)


@pytest.fixture(scope="module", params=BACKENDS)
async def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, corpus: Corpus
) -> AsyncIterator[Store]:
    folder = tmp_path_factory.mktemp("tuning")
    opened = backend(request.param, folder, DIM, optimize_interval_s=3600, request=request)
    if isinstance(opened, ServerStore):
        # Made here as a deployment at this size would have it: HNSW built and used
        # (a server indexes a segment only past its indexing threshold, and searches
        # a filter exactly below its full-scan threshold; both are lowered so that
        # 10k points behave like a large collection). Empty and with whose's vectors,
        # the store adopts it (store/server.py).
        await opened.clients[0].create_collection(
            opened.collection,
            vectors_config=qm.VectorParams(size=DIM, distance=qm.Distance.COSINE),
            sparse_vectors_config={LEXICAL: qm.SparseVectorParams()},
            hnsw_config=qm.HnswConfigDiff(full_scan_threshold=1000),
            optimizers_config=qm.OptimizersConfigDiff(indexing_threshold=1000),
        )
    await opened.open()
    await put(opened, corpus)
    if isinstance(opened, EdgeStore):
        await opened.optimize()
    else:
        assert isinstance(opened, ServerStore)
        await _indexed(opened)
    yield opened
    await opened.close()


async def _indexed(store: ServerStore) -> None:
    client = store.clients[0]
    for _ in range(600):
        info = await client.get_collection(store.collection)
        if info.status == qm.CollectionStatus.GREEN and (info.indexed_vectors_count or 0) >= N:
            return
        await asyncio.sleep(0.5)
    raise AssertionError("Qdrant did not index the collection")


async def _recall(store: Store, corpus: Corpus) -> list[float]:
    scope = Scope(tenant="acme", audience_any_of=((WHO,),))
    found = []
    for q in range(QUERIES):
        hits = await store.search(corpus.queries[q].tolist(), scope, 10)
        found.append(corpus.recall_at_10(WHO, q, [h.payload["index"] for h in hits]))
    return found


async def test_a_selective_filter_is_searched_exactly(store: Store, corpus: Corpus) -> None:
    assert isinstance(store, EdgeStore | ServerStore)
    store.search_tuning = Search(exact_below=0)  # Qdrant alone: filtered HNSW
    approximate = await _recall(store, corpus)
    assert statistics.mean(approximate) < 0.99, "the scenario no longer defeats HNSW"
    store.search_tuning = Search(exact_below=N)  # the filter's 9,000 points: exact
    assert await _recall(store, corpus) == [1.0] * QUERIES


async def test_a_wide_filter_above_the_bound_stays_on_the_graph(
    store: Store, corpus: Corpus
) -> None:
    # The bound holds: 9,000 matching points exceed it, so the search stays
    # approximate (and its cost bounded by the graph, not by the points).
    assert isinstance(store, EdgeStore | ServerStore)
    store.search_tuning = Search(exact_below=8_000)
    assert statistics.mean(await _recall(store, corpus)) < 0.99
