"""What was just written, recalled at once: two versions served side by side.

    .venv/bin/python bench/fresh_records.py [--before REV] [--records 2000]
        [--rounds 60] [--per-round 10] [--cell random:0.2]

An agent writes what was just said and recalls in its next turn, so many records a
recall finds were written seconds ago: their valid_at lies inside the decision
cache's time bucket (WHOSE_CACHE_BUCKET_S, 5 s). Each version (REV, served from a
worktree, and this tree) gets its own sidecar on its own empty store, loaded with the
same `--records` of the sweep's corpus (sidecar/bench/corpus.py). Then, round by
round and version by version in turn: write the corpus's next 10 records (one POST,
each written now), then `--per-round` recalls as the cell's asker, one at a time.

Prints, per version, the recalls' p50 and p90, and per recall the policy calls
(`whose_policy_call_seconds_count`) and decision-cache lookups
(`whose_decision_cache_total`: hit, miss, bypass). A benchmark, not a test: compare
the two versions within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.cache_misses import lookups  # noqa: E402
from sidecar.bench.corpus import asker, build, headers, write  # noqa: E402
from sidecar.bench.processes import sidecar  # noqa: E402
from sidecar.bench.sweep import parse_variants, sources  # noqa: E402

WRITTEN_A_ROUND = 10
LOAD_BATCH = 500


def counters(ops: str) -> dict[str, float]:
    """The policy calls and cache lookups the sidecar has counted so far."""
    text = httpx.get(f"{ops}/metrics").text
    calls = re.finditer(r"^whose_policy_call_seconds_count\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    return {"policy_calls": sum(float(c.group(1)) for c in calls)} | lookups(ops)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="HEAD")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--per-round", type=int, default=10)
    parser.add_argument("--cell", default="random:0.2")
    args = parser.parse_args()
    layout, fraction = args.cell.split(":")
    who = asker(layout, float(fraction))
    size = args.records + args.rounds * WRITTEN_A_ROUND
    corpus = build(size, args.rounds * args.per_round)
    bodies = list(corpus.bodies())
    variants = parse_variants([f"before@{args.before}:", "after:"])
    assert variants is not None
    work = Path(tempfile.mkdtemp(prefix="whose-fresh-"))
    times: dict[str, list[float]] = {name: [] for name in variants}
    seen: dict[str, dict[str, float]] = {}
    try:
        with (
            sources(variants, work) as trees,
            contextlib.ExitStack() as stack,
            httpx.Client(timeout=120) as http,
        ):
            served = {
                name: stack.enter_context(sidecar(work / f"data-{name}", source=tree))
                for name, tree in trees.items()
            }
            for proc in served.values():
                for start in range(0, args.records, LOAD_BATCH):
                    write(http, proc.base, bodies[start : min(args.records, start + LOAD_BATCH)])
            start_counts = {name: counters(proc.ops) for name, proc in served.items()}
            for r in range(args.rounds):
                fresh = bodies[args.records + r * WRITTEN_A_ROUND :][:WRITTEN_A_ROUND]
                for name, proc in served.items():
                    write(http, proc.base, fresh)
                    for q in range(args.per_round):
                        query = corpus.queries[r * args.per_round + q].tolist()
                        began = time.perf_counter()
                        http.post(
                            f"{proc.base}/v1/recall",
                            json={"vector": query, "limit": 10},
                            headers=headers(who),
                        ).raise_for_status()
                        times[name].append(time.perf_counter() - began)
            for name, proc in served.items():
                now = counters(proc.ops)
                seen[name] = {k: now[k] - start_counts[name][k] for k in now}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    recalls = args.rounds * args.per_round
    print(
        f"{args.cell}, {args.records} records, then {args.rounds} rounds of "
        f"{WRITTEN_A_ROUND} written and {args.per_round} recalled"
    )
    print(
        "| version | recall p50 ms | p90 ms | policy calls a recall "
        "| cache hit / miss / bypass a recall |"
    )
    print("|---|---|---|---|---|")
    for name, taken in times.items():
        ms = sorted(t * 1000 for t in taken)
        counts = seen[name]
        print(
            f"| {name} | {statistics.median(ms):.2f} | {ms[int(len(ms) * 0.9)]:.2f} "
            f"| {counts['policy_calls'] / recalls:.2f} "
            f"| {counts['hit'] / recalls:.1f} / {counts['miss'] / recalls:.1f} "
            f"/ {counts['bypass'] / recalls:.1f} |"
        )


if __name__ == "__main__":
    main()
