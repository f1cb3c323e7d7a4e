"""The search planner (sidecar/store/planner.py) in-process: the embedded store's
search of each sweep cell as served (the planner on: the neighbourhood first above
`Search.neighbourhood_above` admitted points, an unproven search exact up to 200 000)
and without it (exact up to WHOSE_SEARCH_EXACT_BELOW, HNSW above), interleaved query by
query, so load on the machine falls on both alike; medians, recall@10 and how often the
neighbourhood proved the answer. `--neighbourhood-above N` (repeat) measures the planner
with that threshold instead, one plan each.

    .venv/bin/python bench/search_plan.py [--records 10000] [--queries 200] [--limit 12]
        [--neighbourhood-above 20000 --neighbourhood-above 2000]

`--limit` is what one over-fetch round asks the store for (the reader's first round at
an allow rate of 1: limit 10 plus its margin). A benchmark, not a test.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.corpus import DIM, asker, build, cells, put  # noqa: E402
from sidecar.store import Search, planner  # noqa: E402
from sidecar.store.edge import EdgeStore, _edge_filter  # noqa: E402
from sidecar.store.planner import way  # noqa: E402
from sidecar.store.scope import Scope  # noqa: E402


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
    args = parser.parse_args()
    aboves = args.neighbourhood_above or [Search.neighbourhood_above]
    beams = args.beam or [planner.NEIGHBOURHOOD_BEAM]
    corpus = build(args.records, args.queries)
    folder = Path(tempfile.mkdtemp(prefix="whose-plan-"))
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
            flt = _edge_filter(scope, ())
            for name in proven:
                store.search_tuning = plans[name]
                planner.NEIGHBOURHOOD_BEAM = beam_of[name]
                looked = way(plans[name], args.limit, store._estimate(flt)) == "neighbourhood"
                proven[name] += looked and (
                    store._nearest_by_neighbourhood(vector, flt, "acme", args.limit, None, False)
                    is not None
                )
        report[who] = {
            name: {
                "p50_ms": round(statistics.median(times[name]) * 1e3, 3),
                "recall_at_10": round(statistics.mean(found[name]), 4),
            }
            for name in plans
        } | {"proven": {name: round(n / args.queries, 2) for name, n in proven.items()}}
        print(who, json.dumps(report[who]), flush=True)
    await store.close()
    shutil.rmtree(folder, ignore_errors=True)
    out = REPO / "bench" / "results" / "search_plan.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"records": args.records, "cells": report}, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
