"""What a store call of a recall costs around the engine (store/edge.py), in process.

    .venv/bin/python bench/edge_calls.py [--records 10000] [--calls 2000]

Two things, each the old way beside the new, interleaved call by call, medians:
the engine filter of a recall's scope (the tenant, the current-version bounds, the
asker's pushed-down audience and two grants, 12 ids already seen), built through
qdrant-client's models (`to_edge(to_qdrant(...))`) or as `_edge_filter` builds it;
and a filtered search of the stored points (HNSW, 12 results), in a worker thread
(`_run`) or on the loop's thread (`_read`), wall time and the process's CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import qdrant_edge as qe

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.edge_gil import filled  # noqa: E402
from sidecar.store.edge import _edge_filter, to_edge  # noqa: E402
from sidecar.store.scope import Granted, Scope, to_qdrant  # noqa: E402

DIM = 384


def recall_scope() -> tuple[Scope, list[str]]:
    scope = Scope(
        tenant="acme",
        current_at=datetime.now(UTC),
        audience_any_of=(("user:carol", "group:eng", "public"),),
        granted=((Granted("alice", ("health",)), Granted("bob", ("work", "travel"))),),
    )
    return scope, [str(uuid.UUID(int=i + 1)) for i in range(12)]


def filters(calls: int) -> None:
    scope, seen = recall_scope()
    old: list[float] = []
    new: list[float] = []
    for i in range(calls):
        # A new scope each time, as each request makes (its `now` differs).
        scope = Scope(**{**scope.__dict__, "current_at": datetime.now(UTC)})
        ways = [(old, True), (new, False)]
        for times, through_models in ways if i % 2 else ways[::-1]:
            started = time.perf_counter()
            if through_models:
                to_edge(to_qdrant(scope, seen))
            else:
                _edge_filter(scope, seen)
            times.append(time.perf_counter() - started)
    o, n = statistics.median(old) * 1e6, statistics.median(new) * 1e6
    print(
        f"engine filter, µs: to_edge(to_qdrant) {o:.0f}, _edge_filter {n:.0f} (ratio {n / o:.2f})"
    )


async def searches(records: int, calls: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="whose-calls-"))
    store, _ = await filled(folder, records, audiences=True)
    try:
        rng = np.random.default_rng(2)  # queries unlike the stored points (seed 1)
        await store.optimize()
        scope, seen = recall_scope()
        wall: dict[str, list[float]] = {"thread": [], "inline": []}
        cpu: dict[str, list[float]] = {"thread": [], "inline": []}
        for i in range(calls):
            vector = rng.standard_normal(DIM).astype("float32").tolist()
            flt = _edge_filter(scope, seen)
            query = store._query(vector, [], flt, 12)
            request = qe.QueryRequest(limit=12, filter=flt, with_payload=True, **query)
            ways = [("thread", store._run), ("inline", store._read)]
            for name, call in ways if i % 2 else ways[::-1]:
                started, used = time.perf_counter(), time.process_time()
                await call(store.shard.query, request)
                cpu[name].append(time.process_time() - used)
                wall[name].append(time.perf_counter() - started)
        for name in wall:
            print(
                f"search, {name}: wall {statistics.median(wall[name]) * 1e3:.3f} ms, "
                f"CPU {statistics.mean(cpu[name]) * 1e3:.3f} ms (mean)"
            )
        await store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    filters(args.calls)
    asyncio.run(searches(args.records, args.calls))


if __name__ == "__main__":
    main()
