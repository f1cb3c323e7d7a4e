"""Whether the embedded engine holds the GIL through a query (store/edge.py `_read`).

    .venv/bin/python bench/edge_gil.py [--records 20000]

Stores random vectors in an EdgeStore, then runs exact queries on the main thread
while a second thread counts in a Python loop, and the same while the main thread
sleeps as long. A count of 0 (or near it) during the query: the engine holds the GIL
for the whole call, so running it in a worker thread lets nothing else run and only
adds the hop. Re-run after upgrading qdrant-edge-py: if the engine ever releases the
GIL, reads belong in a worker thread again.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import qdrant_edge as qe

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.store.edge import EdgeStore, _edge_filter  # noqa: E402
from sidecar.store.scope import Scope  # noqa: E402

DIM = 384


async def filled(
    folder: Path, records: int, *, audiences: bool = False
) -> tuple[EdgeStore, list[float]]:
    """An embedded store of `records` random points (with `audiences`, every other one
    public, the rest dave's), and the first point's vector."""
    store = EdgeStore(folder / "store", DIM, optimize_interval_s=3600)
    await store.open()
    vectors = np.random.default_rng(1).standard_normal((records, DIM)).astype("float32")
    for start in range(0, records, 2000):
        rows = range(start, min(records, start + 2000))
        await store.put(
            "acme",
            [
                (
                    {
                        "id": str(uuid.UUID(int=i + 1)),
                        "tenant": "acme",
                        "valid_at": "2026-10-01T00:00:00Z",
                    }
                    | ({"audience": ["public" if i % 2 else "user:dave"]} if audiences else {}),
                    {"": vectors[i].tolist()},
                )
                for i in rows
            ],
        )
    return store, vectors[0].tolist()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=9)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="whose-gil-"))
    try:
        store, vector = asyncio.run(filled(folder, args.records))
        flt = _edge_filter(Scope(tenant="acme", current_at=datetime.now(UTC)), ())
        request = qe.QueryRequest(
            limit=12,
            filter=flt,
            with_payload=True,
            with_vector=False,
            query=qe.Query.Nearest(vector),
            params=qe.SearchParams(exact=True),
        )
        ticks, stop = [0], [False]

        def count() -> None:
            while not stop[0]:
                ticks[0] += 1

        counter = threading.Thread(target=count)
        counter.start()
        try:
            time.sleep(0.2)
            for _ in range(args.queries):
                before, started = ticks[0], time.perf_counter()
                store.shard.query(request)
                took = time.perf_counter() - started
                during = ticks[0] - before
                before = ticks[0]
                time.sleep(took)
                idle = ticks[0] - before
                print(f"query {took * 1e3:.1f} ms: counted {during} (in as long asleep: {idle})")
        finally:
            stop[0] = True
            counter.join()
        asyncio.run(store.close())
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
