"""Filtered graph search against exact search in the embedded engine, in process: what
a wider beam or ACORN (the engine's two-hop walk past filtered-out points) buys in
recall@10 and costs in time, per sweep cell. A lead for the search planner
(sidecar/store/planner.py), not what whose does today.

    .venv/bin/python bench/filtered_search.py [--records 100000] [--queries 40]

Each variant is one engine query (limit 12, the filter the sidecar pushes down for the
cell's asker), timed alone; medians over the queries. A benchmark, not a test.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.corpus import DIM, asker, build, put  # noqa: E402
from sidecar.store.edge import EdgeStore, _edge_filter  # noqa: E402
from sidecar.store.scope import Scope  # noqa: E402

ACORN = qe.AcornSearchParams(enable=True, max_selectivity=1.0)
VARIANTS = {
    "beam 100": qe.SearchParams(),
    "beam 400": qe.SearchParams(hnsw_ef=400),
    "acorn": qe.SearchParams(acorn=ACORN),
    "acorn, beam 400": qe.SearchParams(hnsw_ef=400, acorn=ACORN),
    "exact": qe.SearchParams(exact=True),
}
CELLS = (("far", 0.9), ("random", 0.9), ("far", 0.2), ("random", 0.2))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    corpus = build(args.records, args.queries)
    folder = Path(tempfile.mkdtemp(prefix="whose-filtered-"))
    try:
        store = EdgeStore(folder / "store", DIM, optimize_interval_s=3600)
        await store.open()
        await put(store, corpus)
        await store.optimize()
        print("| cell | " + " | ".join(f"{name}: p50 ms, recall@10" for name in VARIANTS) + " |")
        print("|---" * (len(VARIANTS) + 1) + "|")
        for layout, fraction in CELLS:
            who = asker(layout, fraction)
            scope = Scope(tenant="acme", current_at=datetime.now(UTC), audience_any_of=((who,),))
            flt = _edge_filter(scope, ())
            row = []
            for params in VARIANTS.values():
                times, found = [], []
                for q in range(args.queries):
                    request = qe.QueryRequest(
                        limit=12,
                        filter=flt,
                        with_payload=True,
                        query=qe.Query.Nearest(corpus.queries[q].tolist()),
                        params=params,
                    )
                    started = time.perf_counter()
                    points = store.shard.query(request)
                    times.append(time.perf_counter() - started)
                    returned = [p.payload["index"] for p in points if p.payload][:10]
                    found.append(corpus.recall_at_10(who, q, returned))
                row.append(f"{statistics.median(times) * 1e3:.1f}, {statistics.mean(found):.3f}")
            print(f"| {who} | " + " | ".join(row) + " |", flush=True)
        await store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
