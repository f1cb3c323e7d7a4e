"""Two versions of the sidecar served side by side, paired: recall p50, server CPU per
recall, and throughput at 8 in flight, cell by cell.

    .venv/bin/python bench/paired.py --before main [--after HEAD] [--records 10000]
        [--cell random:0.01 --cell random:0.9 --cell far:0.05] [--blocks 20]
        [--block 40] [--bursts 6] [--burst 400]

The sweep's corpus (sidecar/bench/corpus.py) is loaded once, through this tree, and
indexed; each version then serves its own copy of that store at the same time: a
revision from a git worktree (sidecar/bench/sweep.py `sources`, this tree's built
`bin/`), or this tree as it is when `--after` is left out. Per cell, one recall at a
time in `--blocks` blocks of `--block` recalls, the versions alternating
block by block (ABBA), so that whatever else the machine does falls on both alike;
then `--bursts` bursts of `--burst` recalls at 8 in flight, alternating the same way.
Reports medians: p50 of every recall, the server's CPU per recall (the sidecar's
process and its children, over the one-at-a-time blocks), and recalls a second; and
the after/before ratios. Writes bench/results/paired.json.

`whose bench --variant before@REV: --variant after:` measures two versions too, across
every cell and against the passthrough and the peer, but each cell once: this one
repeats a few cells until their ratio holds still. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench.corpus import asker, build, timed_load  # noqa: E402
from sidecar.bench.measure import closed_loop  # noqa: E402
from sidecar.bench.processes import Proc, sidecar  # noqa: E402
from sidecar.bench.sweep import IN_FLIGHT, parse_variants, sender, sources  # noqa: E402

OUT = REPO / "bench" / "results"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="a git revision of this repository")
    parser.add_argument("--after", help="a git revision (default: this tree as it is)")
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--cell", action="append", help="LAYOUT:FRACTION (repeat)")
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--block", type=int, default=40)
    parser.add_argument("--bursts", type=int, default=6)
    parser.add_argument("--burst", type=int, default=400)
    args = parser.parse_args()
    cells = [_cell(c) for c in args.cell or ["random:0.01", "random:0.9", "far:0.05"]]
    names = [f"before@{args.before}", f"after@{args.after}" if args.after else "after"]
    variants = parse_variants([f"{name}:" for name in names])
    assert variants is not None
    corpus = build(args.records, 200)
    workdir = Path(tempfile.mkdtemp(prefix="whose-paired-"))
    results: dict[str, Any] = {"records": args.records, "versions": names, "cells": {}}
    try:
        data = workdir / "data"
        loading = {"WHOSE_OPTIMIZE_INTERVAL_S": "2", "WHOSE_OPA_TIMEOUT_S": "30"}
        with sidecar(data, env=loading) as loader:
            timed_load(loader.base, corpus)
        with sidecar(data):  # reopening builds the HNSW index (store/edge.py)
            pass
        with contextlib.ExitStack() as running:
            trees = running.enter_context(sources(variants, workdir))
            procs = []
            for i, name in enumerate(names):
                copy = workdir / f"data-{i}"
                shutil.copytree(data, copy)
                procs.append(running.enter_context(sidecar(copy, source=trees[name])))
            for layout, fraction in cells:
                cell = f"{layout}:{fraction}"
                results["cells"][cell] = measured = _paired(procs, corpus, layout, fraction, args)
                print(_line(cell, measured), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "paired.json").write_text(json.dumps(results, indent=2) + "\n")


def _cell(spec: str) -> tuple[str, float]:
    layout, _, fraction = spec.partition(":")
    return layout, float(fraction)


def _paired(
    procs: list[Proc], corpus: Any, layout: str, fraction: float, args: argparse.Namespace
) -> dict[str, Any]:
    who = asker(layout, fraction)
    senders = [sender(p.base, corpus, who) for p in procs]
    times: list[list[float]] = [[], []]
    cpu: list[list[float]] = [[], []]
    rps: list[list[float]] = [[], []]
    clients = [httpx.Client(timeout=60) for _ in procs]
    try:
        for i in range(2):  # connections, the allow-rate estimate
            for q in range(10):
                senders[i][0](clients[i], q).raise_for_status()
        for block in range(args.blocks):
            for i in _order(block):
                send, proc = senders[i][0], procs[i]
                used = proc.cpu()
                for q in range(block * args.block, (block + 1) * args.block):
                    started = time.perf_counter()
                    send(clients[i], q).raise_for_status()
                    times[i].append(time.perf_counter() - started)
                cpu[i].append((proc.cpu() - used) / args.block)
        for burst in range(args.bursts):
            for i in _order(burst):
                measured = closed_loop(senders[i][1], args.burst, IN_FLIGHT, {"sidecar": procs[i]})
                rps[i].append(measured["rps"])
    finally:
        for client in clients:
            client.close()
    p50 = [statistics.median(t) * 1e3 for t in times]
    cpu_ms = [statistics.median(c) * 1e3 for c in cpu]
    rate = [statistics.median(r) for r in rps]
    return {
        "p50_ms": [round(x, 3) for x in p50],
        "cpu_ms_per_recall": [round(x, 3) for x in cpu_ms],
        "rps": [round(x, 1) for x in rate],
        "ratios": {
            "p50": round(p50[1] / p50[0], 3),
            "cpu": round(cpu_ms[1] / cpu_ms[0], 3),
            "rps": round(rate[1] / rate[0], 3),
        },
    }


def _order(n: int) -> list[int]:
    """ABBA: the version that goes first alternates."""
    return [0, 1] if n % 2 == 0 else [1, 0]


def _line(cell: str, m: dict[str, Any]) -> str:
    (b, a), (cb, ca), (rb, ra) = m["p50_ms"], m["cpu_ms_per_recall"], m["rps"]
    r = m["ratios"]
    return (
        f"{cell:12s} p50 {b:.2f} -> {a:.2f} ms ({r['p50']:.2f})  "
        f"CPU {cb:.2f} -> {ca:.2f} ms/recall ({r['cpu']:.2f})  "
        f"rps {rb:.0f} -> {ra:.0f} ({r['rps']:.2f})"
    )


if __name__ == "__main__":
    main()
