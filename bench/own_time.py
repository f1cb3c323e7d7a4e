"""The sidecar's own time per recall, two versions side by side in one run.

    .venv/bin/python bench/own_time.py [--old main] [--new worktree] [--records 2000]
                                       [--recalls 300] [--turns 6]

Each version (a git ref, extracted with `git archive`, or `worktree`: this checkout as
it is) runs in a process of its own, in turn: the application in-process (ASGI, no
HTTP server) on embedded defaults with its own OPA, on the same data directory, while
sequential recalls as carol (allow rate about 0.5, limit 10) go through it. Per
recall it times the whole request at the outermost middleware, and, inside it, every
store call (`MeasuredStore`) and every call to OPA (`PolicyClient._post`/`_get`,
encoding and decoding included); the rest is the sidecar's own time, the figure
`where_time_goes_ms` calls `sidecar_own`. It gives both wall time and the CPU time of
the event-loop thread (`time.thread_time`), which other processes on the machine
cannot stretch. The versions alternate, so load from elsewhere falls on both alike:
compare the medians and their ratio, not the absolute figures. With `--together` the
two run at the same time, each on its own copy of the store, so the load falls on
both at the same moments. It writes bench/results/own_time.json.

The corpus is loaded once, through the newer version; neither touches the store
format, which is the store's own (sidecar/store/).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "results"
ASKER = "carol"
LIMIT = 10


def checkout(ref: str, into: Path) -> Path:
    """The source tree of `ref` (this checkout itself for `worktree`)."""
    if ref == "worktree":
        return REPO
    tree = into / ref.replace("/", "_")
    tree.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    return tree


# --- the child: one version, in-process ---------------------------------------------


class Clock:
    """Wall and event-loop-thread CPU seconds spent inside timed calls."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def wrap(self, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return await call(*args, **kwargs)
            finally:
                self.wall += time.perf_counter() - wall
                self.cpu += time.thread_time() - cpu

        return timed


async def child(data: Path, records: int, recalls: int, load_only: bool) -> dict[str, Any]:
    import httpx

    from sidecar.http.app import create_app

    try:
        from sidecar.bench.dataset import dataset, headers, queries
    except ImportError:  # a version from before sidecar/bench/ (an `--old` checkout)
        from sidecar.benchmark import (  # type: ignore[import-not-found,no-redef]
            dataset,
            headers,
            queries,
        )
    from sidecar.policy.opa import PolicyClient
    from sidecar.settings import Settings
    from sidecar.store.measured import MeasuredStore

    rng = random.Random(7)
    corpus, qs = dataset(records, rng), queries(recalls, rng)
    outside = Clock()
    for name in ("search", "get", "find"):
        setattr(MeasuredStore, name, outside.wrap(getattr(MeasuredStore, name)))
    for name in ("_post", "_get"):
        setattr(PolicyClient, name, outside.wrap(getattr(PolicyClient, name)))
    settings = Settings(
        dev=True, data_dir=data, log_level="WARNING", opa_binary=REPO / "bin" / "opa"
    )
    app = create_app(settings)
    requests: list[tuple[float, float, float, float]] = []

    async def timed_app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/recall":
            await app(scope, receive, send)
            return
        before = (outside.wall, outside.cpu)
        wall, cpu = time.perf_counter(), time.thread_time()
        await app(scope, receive, send)
        requests.append(
            (
                time.perf_counter() - wall,
                time.thread_time() - cpu,
                outside.wall - before[0],
                outside.cpu - before[1],
            )
        )

    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=timed_app), base_url="http://whose", timeout=60
        ) as http,
    ):
        if load_only:
            await _load(http, corpus)
            return {}
        for q in qs[:20]:  # warm-up: the allow-rate estimate, the caches
            await http.post("/v1/recall", json={"query": q, "limit": LIMIT}, headers=headers(ASKER))
        requests.clear()
        for q in qs:
            response = await http.post(
                "/v1/recall", json={"query": q, "limit": LIMIT}, headers=headers(ASKER)
            )
            response.raise_for_status()
    import sidecar

    walls = [r[0] * 1e3 for r in requests]
    own_wall = [(r[0] - r[2]) * 1e3 for r in requests]
    own_cpu = [(r[1] - r[3]) * 1e3 for r in requests]
    return {
        "source": os.path.dirname(os.path.dirname(sidecar.__file__)),
        "request_ms": round(statistics.median(walls), 3),
        "own_ms": round(statistics.median(own_wall), 3),
        "own_cpu_ms": round(statistics.median(own_cpu), 3),
        # The quickest tenth: what a recall costs when nothing else got in its way.
        "own_cpu_p10_ms": round(statistics.quantiles(own_cpu, n=10)[0], 3),
        "outside_ms": round(statistics.median(r[2] * 1e3 for r in requests), 3),
    }


async def _load(http: Any, corpus: list[dict[str, Any]]) -> None:
    """As sidecar.bench.dataset.load does, through the application (the newer version
    loads the corpus)."""
    from sidecar.bench.dataset import batches

    for headers, batch in batches(corpus):
        (await http.post("/v1/memories", json=batch, headers=headers)).raise_for_status()


def start_child(
    tree: Path, data: Path, args: argparse.Namespace, load_only: bool, loop: str = "asyncio"
) -> subprocess.Popen[str]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(data)]
    command += ["--loop", loop]
    command += ["--records", str(args.records), "--recalls", str(args.recalls)]
    command += ["--load-only"] if load_only else []
    # The tree's own package first, not the one installed in the venv.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, text=True)


def result_of(child: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(f"a measuring process failed ({child.returncode})")
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", default="main")
    parser.add_argument("--new", default="worktree")
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--recalls", type=int, default=300)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--child", type=Path)
    parser.add_argument("--load-only", action="store_true")
    # Both versions at once, each on its own copy of the store: whatever else loads
    # the machine then falls on both at the same moments (they also load each other).
    parser.add_argument("--together", action="store_true")
    # The event loop each version serves on (`whose serve`: see sidecar/cli.py).
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--old-loop", choices=["asyncio", "uvloop"], default="asyncio")
    parser.add_argument("--new-loop", choices=["asyncio", "uvloop"], default="asyncio")
    args = parser.parse_args()
    if args.child is not None:
        sys.path.insert(0, os.getcwd())
        main_coroutine = child(args.child, args.records, args.recalls, args.load_only)
        if args.loop == "uvloop":
            import uvloop

            result = uvloop.run(main_coroutine)
        else:
            result = asyncio.run(main_coroutine)
        print(json.dumps(result))
        return
    work = Path(tempfile.mkdtemp(prefix="whose-own-time-"))
    try:
        trees = {"old": checkout(args.old, work), "new": checkout(args.new, work)}
        data = work / "data"
        result_of(start_child(trees["new"], data, args, load_only=True))
        # Each version gets a copy of the store: with --together both run at once.
        for version in trees:
            shutil.copytree(data, work / f"data-{version}")
        runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
        for i in range(args.turns):
            # Alternate which goes first, so neither always follows the other.
            order = ("old", "new") if i % 2 == 0 else ("new", "old")
            started = {}
            for version in order:
                loop = args.old_loop if version == "old" else args.new_loop
                started[version] = start_child(
                    trees[version], work / f"data-{version}", args, False, loop
                )
                if not args.together:
                    runs[version].append(result_of(started[version]))
            if args.together:
                for version in order:
                    runs[version].append(result_of(started[version]))
            for version in order:
                print(version, runs[version][-1], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {
        version: {
            part: round(statistics.median(t[part] for t in turns), 3)
            for part in turns[0]
            if part != "source"
        }
        for version, turns in runs.items()
    }
    ratios = {
        part: round(medians["new"][part] / medians["old"][part], 3) for part in medians["new"]
    }
    report: dict[str, Any] = {
        "old": args.old,
        "new": args.new,
        "loops": {"old": args.old_loop, "new": args.new_loop},
        "together": args.together,
        "records": args.records,
        "recalls_per_turn": args.recalls,
        "turns": runs,
        "median_of_turn_medians_ms": medians,
        "new_over_old": ratios,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "own_time.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({"median_of_turn_medians_ms": medians, "new_over_old": ratios}, indent=2))


if __name__ == "__main__":
    main()
