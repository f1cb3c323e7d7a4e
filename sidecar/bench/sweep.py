"""`whose bench`: what disclosure costs per recall against the plain store, swept over
how much of the corpus the asker may read (corpus.py: 1/5/20/90 %, far from the
queries or at random), at each corpus size.

Per size: the corpus is written through the API once, the sidecar reopened (which
builds HNSW before serving), and per cell (layout x fraction), as that cell's asker:

- `POST /v1/recall` one at a time: p50/p99, where the time goes (the sidecar's own
  histograms on its operations listener: store calls, policy calls, its own time,
  HTTP), and recall@10 of the permitted records against exact cosine search over
  just those records (numpy);
- throughput at 8 in flight (closed loop) and the CPU each request cost the sidecar,
  its OPA and the load client;
- the same two for the passthrough (passthrough.py: the plain store with the asker's
  audience as a payload filter), and whose's ratios to it.

Then bench.json and bench.png. A benchmark, not a test: figures from a shared
machine are noisy; compare the ratios within one run.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from sidecar.bench import report
from sidecar.bench.corpus import LIMIT, Corpus, asker, build, cells, headers, timed_load
from sidecar.bench.measure import (
    closed_loop,
    one_at_a_time,
    server_times,
    summary,
    where_time_goes,
)
from sidecar.bench.processes import Proc, passthrough, sidecar
from sidecar.settings import Settings

IN_FLIGHT = 8


def _sender(base: str, corpus: Corpus, who: str) -> tuple[Any, Any]:
    def body(i: int) -> dict[str, Any]:
        q = corpus.queries[i % len(corpus.queries)]
        return {"vector": q.tolist(), "limit": LIMIT}

    def send(http: httpx.Client, i: int) -> httpx.Response:
        return http.post(f"{base}/v1/recall", json=body(i), headers=headers(who))

    async def send_async(http: httpx.AsyncClient, i: int) -> httpx.Response:
        return await http.post(f"{base}/v1/recall", json=body(i), headers=headers(who))

    return send, send_async


def _recall_at_10(
    corpus: Corpus, who: str, responses: list[httpx.Response], index: dict[str, int]
) -> dict[str, Any]:
    found, extra = [], 0
    for q, response in enumerate(responses):
        returned = [index.get(str(item["id"]), -1) for item in response.json()["items"]]
        allowed = set(corpus.readable[who].tolist())
        extra += sum(i not in allowed for i in returned)
        found.append(corpus.recall_at_10(who, q % len(corpus.queries), returned))
    return {
        "mean": round(statistics.mean(found), 4),
        "min": round(min(found), 2),
        "not_permitted": extra,
    }


def _sidecar_cell(
    proc: Proc, corpus: Corpus, who: str, n: int, index: dict[str, int]
) -> dict[str, Any]:
    send, send_async = _sender(proc.base, corpus, who)
    one_at_a_time(send, 10, warm_up=0)  # connections, the allow-rate estimate
    before = server_times(proc.ops)
    times, responses = one_at_a_time(send, n, warm_up=0)
    spent = server_times(proc.ops, since=before)
    cell: dict[str, Any] = summary(times) | {
        "mean_rounds": spent["rounds"],
        "mean_items": round(statistics.mean(len(r.json()["items"]) for r in responses), 2),
        "recall_at_10": _recall_at_10(corpus, who, responses, index),
        "where_time_goes_ms": where_time_goes(times, spent),
    }
    cell["throughput"] = closed_loop(send_async, 2 * n, IN_FLIGHT, {"sidecar": proc}, "sidecar")
    return cell


def _passthrough_cell(
    proc: Proc, corpus: Corpus, who: str, n: int, index: dict[str, int]
) -> dict[str, Any]:
    send, send_async = _sender(proc.base, corpus, who)
    times, responses = one_at_a_time(send, n)
    cell: dict[str, Any] = summary(times)
    cell["recall_at_10"] = _recall_at_10(corpus, who, responses, index)
    cell["throughput"] = closed_loop(send_async, 2 * n, IN_FLIGHT, {"passthrough": proc})
    return cell


def measure(size: int, n_queries: int, workdir: Path, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    corpus = build(size, n_queries, seed)
    # The corpus stays in memory for the whole run: out of the cyclic GC, whose full
    # passes over it paused this client, inflating a p99 the server never had.
    gc.collect()
    gc.freeze()
    data = workdir / f"data-{size}"
    settings = Settings()
    result: dict[str, Any] = {
        "records": size,
        "queries": n_queries,
        "limit": LIMIT,
        "search": {
            "exact_below": settings.search_exact_below,
            "hnsw_ef": settings.search_hnsw_ef,
        },
    }
    # Loading only: the write policy decides a whole batch in one OPA call, which may
    # take longer than a serving deployment's timeout on a busy machine.
    loading = {"WHOSE_OPTIMIZE_INTERVAL_S": "2", "WHOSE_OPA_TIMEOUT_S": "30"}
    with sidecar(data, env=loading) as proc:
        ids, load_s = timed_load(proc.base, corpus)
    result["load_s"] = round(load_s, 1)
    result["load_route"] = "POST /v1/memories, 500 records a request, one at a time"
    index = {record_id: i for i, record_id in enumerate(ids)}
    cell_results: dict[str, dict[str, Any]] = {}
    opened = time.perf_counter()
    with sidecar(data) as proc:
        # Reopening the store builds its HNSW index before serving (store/edge.py).
        result["open_s"] = round(time.perf_counter() - opened, 1)
        for layout, fraction in cells():
            who = asker(layout, fraction)
            cell_results[who] = {"layout": layout, "fraction": fraction}
            cell_results[who]["whose"] = _sidecar_cell(proc, corpus, who, n_queries, index)
    with passthrough(data) as proc:
        for layout, fraction in cells():
            who = asker(layout, fraction)
            cell_results[who]["passthrough"] = _passthrough_cell(
                proc, corpus, who, n_queries, index
            )
    for cell in cell_results.values():
        whose, plain = cell["whose"], cell["passthrough"]
        cell["ratios"] = {
            "p50": round(whose["p50_ms"] / plain["p50_ms"], 2),
            "throughput": round(whose["throughput"]["rps"] / plain["throughput"]["rps"], 2),
        }
    result["cells"] = cell_results
    result["total_s"] = round(time.perf_counter() - started, 1)
    shutil.rmtree(data, ignore_errors=True)
    return result


def run(sizes: list[int], n_queries: int, out: Path, seed: int = 7) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="whose-bench-"))
    try:
        runs = [measure(size, n_queries, workdir, seed) for size in sizes]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    result = {"runs": runs, "machine": {"cpus": os.cpu_count()}}
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    report.plot(runs, out / "bench.png")
    return result
