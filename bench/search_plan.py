"""The search planner (sidecar/store/planner.py) in-process: the embedded store's
search of each sweep cell as served (the planner on: the neighbourhood first above
`Search.neighbourhood_above` admitted points, an unproven search exact up to 200 000)
and without it (exact up to WHOSE_SEARCH_EXACT_BELOW, HNSW above), interleaved query by
query, so load on the machine falls on both alike; medians, recall@10 and how often the
neighbourhood proved the answer. `--sieve`: each plan also with the sieve (an exact
search scanned under the audience alone first: planner.py `sifted`).
`--neighbourhood-above N` (repeat) measures the planner with that threshold instead,
one plan each; `--beam N` (repeat) with that beam for the
neighbourhood's own search (planner.NEIGHBOURHOOD_BEAM), one plan each. `--server`: the
server backend against a Qdrant server started for the run (bin/qdrant), its index built
before the first query.

    .venv/bin/python bench/search_plan.py [--records 10000] [--queries 200] [--limit 12]
        [--neighbourhood-above 20000 --neighbourhood-above 2000] [--beam 200 --beam 400]
        [--sieve] [--server]

`--limit` is what one over-fetch round asks the store for (the reader's first round at
an allow rate of 1: limit 10 plus its margin). A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.corpus import DIM, asker, build, cells, put  # noqa: E402
from sidecar.bench.processes import qdrant  # noqa: E402
from sidecar.store import Search, planner  # noqa: E402
from sidecar.store.edge import EdgeStore, _edge_filter  # noqa: E402
from sidecar.store.planner import way  # noqa: E402
from sidecar.store.scope import Scope, to_qdrant  # noqa: E402
from sidecar.store.server import ServerStore  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=12)
    parser.add_argument("--exact-below", type=int, default=20_000)
    parser.add_argument(
        "--neighbourhood-above",
        type=int,
        action="append",
        help="admitted points above which the planner reads the neighbourhood (repeat: "
        "one plan each; default the shipped Search.neighbourhood_above)",
    )
    parser.add_argument(
        "--beam",
        type=int,
        action="append",
        help="the neighbourhood search's beam (repeat: one plan each; default the shipped one)",
    )
    parser.add_argument(
        "--sieve",
        action="store_true",
        help="each plan also with the sieve (Search.sieve: the embedded store's default)",
    )
    parser.add_argument("--server", action="store_true", help="the server backend")
    args = parser.parse_args()
    aboves = args.neighbourhood_above or [Search.neighbourhood_above]
    beams = args.beam or [planner.NEIGHBOURHOOD_BEAM]
    corpus = build(args.records, args.queries)
    folder = Path(tempfile.mkdtemp(prefix="whose-plan-"))
    running = contextlib.ExitStack()
    store: EdgeStore | ServerStore
    if args.server:
        server = running.enter_context(qdrant(REPO / "bin" / "qdrant", folder))
        store = ServerStore.connect([server.base], "plan", DIM, timeout_s=120)
        await store.open()
        await put(store, corpus)
        await _indexed(store, len(corpus.vectors))
    else:
        store = EdgeStore(folder / "store", DIM, optimize_interval_s=3600)
        await store.open()
        await put(store, corpus)
        await store.optimize()
    plans: dict[str, Search] = {}
    beam_of: dict[str, int] = {}
    for above in aboves:
        for beam in beams:
            name = f"planner@{above}" + (f"/beam{beam}" if args.beam else "")
            plans[name] = Search(
                exact_below=args.exact_below,
                neighbourhood=True,
                unproven_exact_below=200_000,
                neighbourhood_above=above,
            )
            beam_of[name] = beam
            if args.sieve:
                plans[name + "+sieve"] = replace(plans[name], sieve=True)
                beam_of[name + "+sieve"] = beam
    plans["exact_below_only"] = Search(exact_below=args.exact_below)
    report: dict[str, dict[str, object]] = {}
    for layout, fraction in cells():
        who = asker(layout, fraction)
        scope = Scope(tenant="acme", current_at=datetime.now(UTC), audience_any_of=((who,),))
        times: dict[str, list[float]] = {name: [] for name in plans}
        found: dict[str, list[float]] = {name: [] for name in plans}
        proven = {name: 0 for name in plans if name.startswith("planner")}
        for q in range(args.queries):
            vector = corpus.queries[q].tolist()
            # In turn, each first every other query: the second finds the first's
            # points in the CPU's caches.
            order = list(plans.items())
            for name, plan in order if q % 2 else order[::-1]:
                store.search_tuning = plan
                planner.NEIGHBOURHOOD_BEAM = beam_of.get(name, beams[0])
                started = time.perf_counter()
                hits = await store.search(vector, scope, args.limit)
                times[name].append(time.perf_counter() - started)
                returned = [h.payload["index"] for h in hits][:10]
                found[name].append(corpus.recall_at_10(who, q, returned))
            for name in proven:
                store.search_tuning = plans[name]
                planner.NEIGHBOURHOOD_BEAM = beam_of[name]
                proven[name] += await _proven(store, vector, scope, args.limit)
        report[who] = {
            name: {
                "p50_ms": round(statistics.median(times[name]) * 1e3, 3),
                "recall_at_10": round(statistics.mean(found[name]), 4),
            }
            for name in plans
        } | {"proven": {name: round(n / args.queries, 2) for name, n in proven.items()}}
        print(who, json.dumps(report[who]), flush=True)
    await store.close()
    running.close()
    shutil.rmtree(folder, ignore_errors=True)
    out = REPO / "bench" / "results" / "search_plan.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"records": args.records, "cells": report}, indent=2) + "\n")


async def _proven(
    store: EdgeStore | ServerStore, vector: list[float], scope: Scope, limit: int
) -> bool:
    """Whether the planner looked at the neighbourhood and it proved the answer."""
    if isinstance(store, ServerStore):
        flt = to_qdrant(scope, ())
        if way(store.search_tuning, limit, await store._estimate(flt)) != "neighbourhood":
            return False
        found = await store._nearest_by_neighbourhood(vector, flt, "acme", limit, None, False)
        return found is not None
    edge_flt = _edge_filter(scope, ())
    chosen, _, points = store._plan(edge_flt, "acme", limit)
    if chosen != "neighbourhood":
        return False
    found = store._nearest_by_neighbourhood(vector, edge_flt, "acme", limit, None, False, points)
    return found is not None


async def _indexed(store: ServerStore, points: int) -> None:
    """Until the server has built HNSW over every point (its optimizer runs on its own)."""
    for _ in range(3000):
        info = await store._call(lambda c: c.get_collection(store.collection))
        if (info.indexed_vectors_count or 0) >= points and info.status == "green":
            return
        await asyncio.sleep(0.2)
    raise RuntimeError("the server did not index the corpus in 10 minutes")


if __name__ == "__main__":
    asyncio.run(main())
