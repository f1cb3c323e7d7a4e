"""What the embedded engine's exact search costs, piece by piece, on a store loaded the
way the sweep serves it (through a sidecar, then reopened so HNSW is built).

    .venv/bin/python bench/engine_costs.py [--records 10000] [--queries 60] [--repeats 3]

Per sweep cell, the same exact search of `--limit` points (the reader's first round at
an allow rate of 1), query by query in turn so load falls on every form alike:

- `served`: the recall's own filter (tenant, the validity times at now, the asker's
  audience: store/edge.py `_edge_filter` of the pushdown's scope) with payloads, as a
  recall asks;
- `no payload`: the same without payloads;
- `no validity times`: the tenant and audience conditions, no payloads;
- `audience only`: the audience condition alone, no payloads;
- `tenant only`: the tenant condition alone, no payloads;
- `unfiltered`: no filter, no payloads (every point of the store scored).

Medians in ms; writes bench/results/engine_costs.json. In process, one search thread
(`Search.threads`, as served). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import qdrant_edge as qe

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench import corpus as sweep  # noqa: E402
from sidecar.bench.processes import sidecar  # noqa: E402
from sidecar.settings import Settings  # noqa: E402
from sidecar.store.edge import EdgeStore, _edge_filter  # noqa: E402
from sidecar.store.schema import TENANT_FIELD  # noqa: E402
from sidecar.store.scope import Scope  # noqa: E402


def forms(who: str) -> dict[str, tuple[Any, bool]]:
    """Each form's filter, and whether it asks for payloads."""
    served = _edge_filter(
        Scope(tenant=sweep.TENANT, current_at=datetime.now(UTC), audience_any_of=((who,),)), ()
    )
    tenant = qe.FieldCondition(TENANT_FIELD, match=qe.MatchValue(sweep.TENANT))
    audience = qe.FieldCondition("audience", match=qe.MatchAny([who]))
    return {
        "served": (served, True),
        "no payload": (served, False),
        "no validity times": (qe.Filter(must=[tenant, audience]), False),
        "audience only": (qe.Filter(must=[audience]), False),
        "tenant only": (qe.Filter(must=[tenant]), False),
        "unfiltered": (None, False),
    }


async def measure(
    store: EdgeStore, corpus: sweep.Corpus, args: argparse.Namespace
) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for layout, fraction in sweep.cells():
        who = sweep.asker(layout, fraction)
        shapes = forms(who)
        times: dict[str, list[float]] = {name: [] for name in shapes}
        for _ in range(args.repeats):
            for q in range(args.queries):
                vector = corpus.queries[q].tolist()
                order = list(shapes.items())
                for name, (flt, payload) in order if q % 2 else order[::-1]:
                    request = qe.QueryRequest(
                        limit=args.limit,
                        query=qe.Query.Nearest(vector),
                        filter=flt,
                        with_payload=payload,
                        params=qe.SearchParams(exact=True),
                    )
                    started = time.perf_counter()
                    store.shard.query(request)
                    times[name].append(time.perf_counter() - started)
        report[who] = {name: round(statistics.median(t) * 1e3, 3) for name, t in times.items()}
        print(who, json.dumps(report[who]), flush=True)
    return report


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=15)
    args = parser.parse_args()
    corpus = sweep.build(args.records, args.queries)
    workdir = Path(tempfile.mkdtemp(prefix="whose-engine-costs-"))
    try:
        loading = {"WHOSE_OPTIMIZE_INTERVAL_S": "2", "WHOSE_OPA_TIMEOUT_S": "30"}
        with sidecar(workdir, env=loading) as server:
            sweep.load(server.base, corpus)
        with sidecar(workdir):
            pass  # reopened: the store builds HNSW and optimizes, as before serving
        store = EdgeStore(workdir / "store" / Settings().collection, sweep.DIM)
        await store.open()
        try:
            report = await measure(store, corpus, args)
        finally:
            await store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out = REPO / "bench" / "results" / "engine_costs.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"records": args.records, "cells": report}, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
