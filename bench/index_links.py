"""HNSW's links per indexed value, in process: the embedded store as shipped (links for
the tenant's and the audience's values only, store/schema.py LINKED_FIELDS) against one
whose every index has them (Qdrant's default, the store before round eight), on the
sweep's corpus (sidecar/bench/corpus.py `put`: times differing record by record).

For each store: how long loading and building took; the unfiltered neighbourhood
search's recall@100 against exact search at beams of 100, 200 and 400 (what the
planner's proof rests on); then each sweep cell's search as served (the planner on, the
shipped settings), the two stores interleaved query by query so load on the machine
falls on both alike: medians and recall@10.

    .venv/bin/python bench/index_links.py [--records 100000] [--queries 100]

A benchmark, not a test (docs/performance.md, round eight).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import qdrant_edge as qe
from qdrant_client.http import models as qm

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.corpus import DIM, Corpus, asker, build, cells, put  # noqa: E402
from sidecar.services import open_store  # noqa: E402
from sidecar.settings import Settings  # noqa: E402
from sidecar.store.edge import EdgeStore  # noqa: E402
from sidecar.store.schema import (  # noqa: E402
    DATETIME_FIELDS,
    FLOAT_FIELDS,
    KEYWORD_FIELDS,
    LINKED_FIELDS,
)
from sidecar.store.scope import Scope  # noqa: E402

BEAMS = (100, 200, 400)
NEIGHBOURHOOD = 100


async def store_of(folder: Path, corpus: Corpus, every_index_linked: bool) -> EdgeStore:
    settings = Settings(data_dir=folder, store="edge", vector_size=DIM, optimize_interval_s=3600)
    store = open_store(settings)
    assert isinstance(store, EdgeStore)
    await store.open()
    if every_index_linked:
        # Before any data, so every segment is built with them: Qdrant's default links.
        kinds: dict[qm.PayloadSchemaType, tuple[str, ...]] = {
            qm.PayloadSchemaType.KEYWORD: KEYWORD_FIELDS,
            qm.PayloadSchemaType.DATETIME: DATETIME_FIELDS,
            qm.PayloadSchemaType.FLOAT: FLOAT_FIELDS,
        }
        for schema, fields in kinds.items():
            for field in set(fields) - LINKED_FIELDS:
                await store.drop_index(field)
                await store.create_index(field, schema)
    started = time.perf_counter()
    await put(store, corpus)
    await store.optimize()
    print(f"loaded and built in {time.perf_counter() - started:.0f} s", flush=True)
    return store


def _nearest_ids(store: EdgeStore, vector: list[float], params: qe.SearchParams) -> set[str]:
    tenant = qe.Filter(must=[qe.FieldCondition("tenant", match=qe.MatchValue("acme"))])
    request = qe.QueryRequest(
        limit=NEIGHBOURHOOD,
        query=qe.Query.Nearest(vector),
        filter=tenant,
        params=params,
        with_payload=False,
    )
    return {str(p.id) for p in store.shard.query(request)}


def neighbourhood_recall(store: EdgeStore, corpus: Corpus, beam: int) -> tuple[float, float]:
    """Mean recall@100 of the tenant's unfiltered nearest at this beam, and its p50 ms."""
    found, times = [], []
    for query in corpus.queries:
        vector = query.tolist()
        started = time.perf_counter()
        walked = _nearest_ids(store, vector, qe.SearchParams(hnsw_ef=beam))
        times.append(time.perf_counter() - started)
        exact = _nearest_ids(store, vector, qe.SearchParams(exact=True))
        found.append(len(walked & exact) / NEIGHBOURHOOD)
    return statistics.mean(found), statistics.median(times) * 1e3


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    corpus = build(args.records, args.queries)
    folder = Path(tempfile.mkdtemp(prefix="whose-links-"))
    stores: dict[str, EdgeStore] = {}
    try:
        for name, every in (("shipped", False), ("every index linked", True)):
            print(name, end=": ", flush=True)
            stores[name] = await store_of(folder / name.replace(" ", "-"), corpus, every)
        for name, store in stores.items():
            for beam in BEAMS:
                share, p50 = neighbourhood_recall(store, corpus, beam)
                print(f"{name}: neighbourhood beam {beam}: recall@100 {share:.3f}, {p50:.2f} ms")
        for layout, fraction in cells():
            who = asker(layout, fraction)
            scope = Scope(tenant="acme", current_at=datetime.now(UTC), audience_any_of=((who,),))
            times: dict[str, list[float]] = {name: [] for name in stores}
            recall: dict[str, list[float]] = {name: [] for name in stores}
            for q, query in enumerate(corpus.queries):
                order = list(stores.items())
                for name, store in order if q % 2 else reversed(order):
                    started = time.perf_counter()
                    found = await store.search(query.tolist(), scope, 12)
                    times[name].append(time.perf_counter() - started)
                    indices = [int(r.payload["index"]) for r in found][:10]
                    recall[name].append(corpus.recall_at_10(who, q, indices))
            print(
                who,
                "; ".join(
                    f"{name}: p50 {statistics.median(times[name]) * 1e3:.1f} ms, "
                    f"recall@10 {statistics.mean(recall[name]):.3f}"
                    for name in stores
                ),
                flush=True,
            )
    finally:
        for store in stores.values():
            await store.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
