"""Where a recall's time goes, by profile: py-spy samples a served sidecar.

    .venv/bin/python bench/profile_recall.py [--records 10000] [--seconds 20]
        [--cell far:0.9]

Loads the benchmark's dataset (`whose bench`) into a sidecar on embedded defaults,
reopens it (the store builds HNSW before serving), and, while one client sends
sequential recalls as carol (allow rate about 0.5), py-spy samples the sidecar
without pausing it. With `--cell LAYOUT:FRACTION`, the readable-fraction sweep's
corpus and that cell's asker instead (sidecar/bench/corpus.py: vectors as sent).

It writes bench/results/profile-recall.collapsed (folded stacks: load them into
speedscope or flamegraph.pl) and prints, per thread kind, the frames with the most
samples, inclusive.

py-spy needs ptrace rights over the sidecar (root, or kernel.yama.ptrace_scope=0).
A profile, not a benchmark: sampling costs the sidecar some speed.
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from sidecar.bench import corpus as sweep  # noqa: E402
from sidecar.bench.dataset import LIMIT, dataset, headers, load, queries  # noqa: E402
from sidecar.bench.processes import sidecar  # noqa: E402

OUT = REPO / "bench" / "results"
PY_SPY = Path(sys.executable).with_name("py-spy")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--cell", help="a sweep cell, LAYOUT:FRACTION (far:0.9)")
    args = parser.parse_args()
    rng = random.Random(7)
    records, qs = dataset(args.records, rng), queries(200, rng)
    bodies, who = [{"query": q, "limit": LIMIT} for q in qs], "carol"
    corpus = None
    if args.cell:
        layout, fraction = args.cell.split(":")
        corpus, who = sweep.build(args.records, 200), sweep.asker(layout, float(fraction))
        bodies = [{"vector": q.tolist(), "limit": LIMIT} for q in corpus.queries]
    workdir = Path(tempfile.mkdtemp(prefix="whose-profile-"))
    folded = OUT / "profile-recall.collapsed"
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        loading = {"WHOSE_OPTIMIZE_INTERVAL_S": "2", "WHOSE_OPA_TIMEOUT_S": "30"}
        with sidecar(workdir, env=loading) as server:
            if corpus is not None:
                sweep.load(server.base, corpus)
            else:
                load(server.base, records)
        folded.unlink(missing_ok=True)
        with sidecar(workdir) as server:
            sampler = subprocess.Popen(
                [
                    str(PY_SPY),
                    "record",
                    "--pid",
                    str(server.pid),
                    "--rate",
                    "250",
                    "--duration",
                    str(args.seconds),
                    "--nonblocking",
                    "--format",
                    "raw",
                    "--output",
                    str(folded),
                ],
                stdout=subprocess.DEVNULL,
            )
            sampled: int | None = None
            try:
                sent = drive(server.base, bodies, who, until=time.monotonic() + args.seconds)
                sampled = sampler.wait(timeout=60)
            finally:
                if sampler.poll() is None:
                    sampler.kill()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if sampled != 0 or not folded.exists():
        sys.exit(f"py-spy failed (exit {sampled}): it needs ptrace rights over the sidecar")
    print(f"{sent} recalls as {who} in {args.seconds} s; folded stacks: {folded}")
    print(summary(folded, args.top))


def drive(base: str, bodies: list[dict[str, object]], who: str, until: float) -> int:
    sent = 0
    asker = headers(who) if who == "carol" else sweep.headers(who)
    with httpx.Client(base_url=base, timeout=60) as http:
        while time.monotonic() < until:
            body = bodies[sent % len(bodies)]
            http.post("/v1/recall", json=body, headers=asker).raise_for_status()
            sent += 1
    return sent


def summary(folded: Path, top: int) -> str:
    """Per thread kind (the event loop; the worker threads that run store calls and
    audit writes): the sidecar's own functions by inclusive samples, and the leaf
    frames (any library) by the samples spent in them."""
    inclusive: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    leaves: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    totals: collections.Counter[str] = collections.Counter()
    for line in folded.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            # Sampling without pausing the process can read a frame name half-written
            # (multi-line garbage in the output): skip what does not parse.
            continue
        frames = [re.sub(r":\d+\)$", ")", f) for f in stack.split(";")]
        thread = "worker threads" if any("threading.py" in f for f in frames) else "event loop"
        totals[thread] += int(count)
        leaves[thread][frames[-1]] += int(count)
        for frame in {f for f in frames if "(sidecar/" in f}:
            inclusive[thread][frame] += int(count)
    lines = []
    for thread, total in totals.items():
        for title, counts in (("sidecar, inclusive", inclusive), ("leaf frames", leaves)):
            lines.append(f"\n{thread} ({total} samples), {title}:")
            for frame, n in counts[thread].most_common(top):
                lines.append(f"{100 * n / total:6.1f}%  {frame}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
