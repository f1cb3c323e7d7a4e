"""Decision cache: recall p50 and hit ratio with no cache, the in-process cache, and Redis.

    .venv/bin/python bench/cache_http.py [--records 10000] [--distinct 50] [--repeat 6]

Loads the recall benchmark's dataset once (10k records, asker allow rates about
0.9, 0.5, 0.1), then serves the same store three times with `whose serve --dev`
on embedded defaults (a local OPA whose bundle revision keys the cache):
  1. cache off (WHOSE_CACHE_SIZE=0, no Redis): every candidate goes to OPA;
  2. the in-process cache (the embedded default);
  3. Redis (WHOSE_REDIS_URL, a real redis-server on loopback).
Each run asks every (asker, query) pair once (first pass), then `repeat - 1`
more times in shuffled order (repeats). Decisions are cached per (asker, record),
not per query, so even a first ask hits when an earlier query found the same
candidate: the dataset's texts come from a small vocabulary, so that happens often. The hit ratio is
hits / (hits + misses + bypasses), from the sidecar's /metrics.

A benchmark, not a test: prints medians and writes bench/results/cache_http.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.recall_http import ASKERS, ATTRIBUTES, TOPICS, VALUES, dataset, load, summary  # noqa: E402
from tests.conftest import metric, start_redis, start_sidecar, stop  # noqa: E402


def queries(n: int, rng: random.Random) -> list[str]:
    """Specific questions ("is the launch date moved to Q3?"), so that different
    queries bring different candidates: a cache hit needs a repeated candidate."""
    combos = [(t, a, v) for t in TOPICS for a in ATTRIBUTES for v in VALUES]
    return [f"{t} {a} {v}" for t, a, v in rng.sample(combos, n)]


def cache_counts(base: str) -> dict[str, float]:
    return {
        result: metric(base, "whose_decision_cache_total", result=result)
        for result in ("hit", "miss", "bypass")
    }


def run(base: str, asks: list[tuple[str, str]]) -> dict[str, Any]:
    before = cache_counts(base)
    times: list[float] = []
    with httpx.Client(base_url=base, timeout=30) as http:
        for asker, q in asks:
            headers = {"X-Whose-Asker": asker, "X-Whose-Tenant": "acme"}
            started = time.perf_counter()
            response = http.post("/v1/recall", json={"query": q, "limit": 10}, headers=headers)
            times.append(time.perf_counter() - started)
            assert response.status_code == 200, response.text
    after = cache_counts(base)
    delta = {k: after[k] - before[k] for k in after}
    looked_up = sum(delta.values()) or 1
    return summary(times) | {
        "hit_ratio": round(delta["hit"] / looked_up, 3),
        "decisions": {k: int(v) for k, v in delta.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--distinct", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=6)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    records = dataset(args.records, rng)
    distinct = queries(args.distinct, rng)
    pairs = [(asker, q) for asker in ASKERS for q in distinct]
    first = rng.sample(pairs, len(pairs))
    repeats = pairs * (args.repeat - 1)
    rng.shuffle(repeats)
    workdir = Path(tempfile.mkdtemp(prefix="whose-cache-bench-"))
    data = workdir / "data"
    report: dict[str, Any] = {
        "records": args.records,
        "recalls": len(first) + len(repeats),
        "limit": 10,
    }
    redis_binary = shutil.which("redis-server")
    assert redis_binary, "redis-server is missing: run `make redis`"
    redis_url, redis = start_redis(redis_binary, workdir)
    try:
        base, process = start_sidecar(data, env={"WHOSE_OPTIMIZE_INTERVAL_S": "1"})
        try:
            report["load_s"] = round(load(base, records), 2)
            time.sleep(8)  # the background optimize builds HNSW after the last write
        finally:
            stop(process)
        configs = {
            "no_cache": {"WHOSE_CACHE_SIZE": "0"},
            "in_process": {},
            "redis": {"WHOSE_REDIS_URL": redis_url},
        }
        for name, env in configs.items():
            base, process = start_sidecar(data, env={"WHOSE_CACHE_BUCKET_S": "300", **env})
            try:
                # Warm-up on questions the runs never ask (connections, OPA's query cache).
                run(base, [(a, f"warm up {i}") for i, a in enumerate(list(ASKERS) * 10)])
                report[name] = {
                    # Every (asker, query) for the first time: hits are candidates that
                    # an earlier, different query also found.
                    "first_pass": run(base, first),
                    "repeats": run(base, repeats),
                }
            finally:
                stop(process)
    finally:
        stop(redis)
        shutil.rmtree(workdir, ignore_errors=True)
    for name in ("in_process", "redis"):
        for phase in ("first_pass", "repeats"):
            report[f"{name}_{phase}_p50_vs_no_cache"] = round(
                report[name][phase]["p50_ms"] / report["no_cache"][phase]["p50_ms"], 3
            )
    out = REPO / "bench" / "results" / "cache_http.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
