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
  audience as a payload filter), and whose's ratios to it;
- the same for the peer (peer.py: wardowl's HTTP service and ACL authorizer on the
  same engine, the same vectors and the same readers; `--no-peer` leaves it out), and
  whose's ratios to it. Every answer's records are checked against what the asker may
  read: `leaks` counts the others (corpus.py `Corpus.leaks`);
- with `--dialect`, the same cells through the Qdrant dialect on a stack's own
  collection beside the same query sent to a Qdrant server directly (dialect.py).

With `--variant NAME:WHOSE_VAR=VALUE,...` (repeated) several sidecar configurations
are measured in one run, each on its own copy of the same indexed store, cell by cell
in turn with the passthrough, so that their ratios come from the same minutes. A
variant named `NAME@REV` is served from revision REV of this repository (a git
worktree, with this tree's built `bin/`), so two versions of the code are measured
side by side: `--variant before@main: --variant after:`.

Then bench.json and bench.png. A benchmark, not a test: figures from a shared
machine are noisy; compare the ratios within one run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from sidecar.bench import dialect, peer, report
from sidecar.bench.corpus import LIMIT, Corpus, asker, build, cells, headers, timed_load
from sidecar.bench.measure import (
    closed_loop,
    one_at_a_time,
    server_times,
    summary,
    where_time_goes,
)
from sidecar.bench.processes import Proc, passthrough, sidecar
from sidecar.bench.processes import peer as peer_process
from sidecar.settings import REPO_ROOT, Settings

IN_FLIGHT = 8


def sender(base: str, corpus: Corpus, who: str) -> tuple[Any, Any]:
    def body(i: int) -> dict[str, Any]:
        q = corpus.queries[i % len(corpus.queries)]
        return {"vector": q.tolist(), "limit": LIMIT}

    def send(http: httpx.Client, i: int) -> httpx.Response:
        return http.post(f"{base}/v1/recall", json=body(i), headers=headers(who))

    async def send_async(http: httpx.AsyncClient, i: int) -> httpx.Response:
        return await http.post(f"{base}/v1/recall", json=body(i), headers=headers(who))

    return send, send_async


def _whose_returned(response: httpx.Response, index: dict[str, int]) -> list[int]:
    """The record indices a whose recall answer holds (-1 for an id not written)."""
    return [index.get(str(item["id"]), -1) for item in response.json()["items"]]


def _sidecar_cell(
    proc: Proc, corpus: Corpus, who: str, n: int, index: dict[str, int]
) -> dict[str, Any]:
    send, send_async = sender(proc.base, corpus, who)
    one_at_a_time(send, 10, warm_up=0)  # connections, the allow-rate estimate
    before = server_times(proc.ops)
    times, responses = one_at_a_time(send, n, warm_up=0)
    spent = server_times(proc.ops, since=before)
    cell: dict[str, Any] = summary(times) | {
        "mean_rounds": spent["rounds"],
        "mean_items": round(statistics.mean(len(r.json()["items"]) for r in responses), 2),
        "recall_at_10": corpus.quality(who, [_whose_returned(r, index) for r in responses]),
        "where_time_goes_ms": where_time_goes(times, spent),
    }
    cell["throughput"] = closed_loop(send_async, 2 * n, IN_FLIGHT, {"sidecar": proc}, "sidecar")
    return cell


def _passthrough_cell(
    proc: Proc, corpus: Corpus, who: str, n: int, index: dict[str, int]
) -> dict[str, Any]:
    send, send_async = sender(proc.base, corpus, who)
    times, responses = one_at_a_time(send, n)
    cell: dict[str, Any] = summary(times)
    cell["recall_at_10"] = corpus.quality(who, [_whose_returned(r, index) for r in responses])
    cell["throughput"] = closed_loop(send_async, 2 * n, IN_FLIGHT, {"passthrough": proc})
    return cell


def _peer_cell(proc: Proc, corpus: Corpus, who: str, n: int) -> dict[str, Any]:
    """The same cell on wardowl (peer.py): its own request, answer and identity."""

    def body(i: int) -> dict[str, Any]:
        return peer.request(corpus.queries[i % len(corpus.queries)], LIMIT)

    def send(http: httpx.Client, i: int) -> httpx.Response:
        return http.post(f"{proc.base}/v1/retrieve", json=body(i), headers=peer.headers(who))

    async def send_async(http: httpx.AsyncClient, i: int) -> httpx.Response:
        return await http.post(f"{proc.base}/v1/retrieve", json=body(i), headers=peer.headers(who))

    times, responses = one_at_a_time(send, n)
    cell: dict[str, Any] = summary(times)
    cell["recall_at_10"] = corpus.quality(who, [peer.returned(r.json()) for r in responses])
    cell["throughput"] = closed_loop(send_async, 2 * n, IN_FLIGHT, {"peer": proc})
    return cell


# A sidecar configuration measured against the passthrough: a name and the settings
# (WHOSE_* variables) it runs with. By default one, the settings in force.
Variants = dict[str, dict[str, str]]
DEFAULT_VARIANTS: Variants = {"whose": {}}


def parse_variants(specs: list[str]) -> Variants | None:
    """`NAME[@REV]:VAR=VALUE[,VAR=VALUE]` per configuration (`whose bench --variant`);
    REV is checked here, before minutes of measuring."""
    variants: Variants = {}
    for spec in specs:
        name, _, assignments = spec.partition(":")
        settings = [a for a in assignments.split(",") if a]
        if not name or name == "passthrough" or name in variants:
            raise ValueError(f"--variant {spec!r}: a new name, then ':'")
        if not all("=" in a and a.startswith("WHOSE_") for a in settings):
            raise ValueError(f"--variant {spec!r}: settings are WHOSE_VAR=VALUE")
        revision = _revision(name)
        if revision is not None and _commit(revision) is None:
            raise ValueError(f"--variant {spec!r}: {revision!r} is not a commit of this repository")
        if revision is not None and _git("diff", "--quiet", revision, "--", *_SHARED).returncode:
            raise ValueError(
                f"--variant {spec!r}: {revision} differs from this tree in "
                f"{' or '.join(_SHARED)}, which a worktree borrows from it"
            )
        variants[name] = dict(a.split("=", 1) for a in settings)
    return variants or None


# What a revision's worktree takes from this tree (its interpreter and packages, its
# built bin/): the two must not differ there.
_SHARED = ("requirements.lock", "pyproject.toml", "native", "Makefile")


def _revision(name: str) -> str | None:
    """The revision a variant named `NAME@REV` is served from (None: this tree)."""
    _, at, revision = name.partition("@")
    return revision if at else None


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    git = shutil.which("git")
    if git is None:
        raise ValueError("NAME@REV variants need git")
    return subprocess.run(
        [git, "-C", str(REPO_ROOT), *args], capture_output=True, text=True, check=False
    )


def _commit(revision: str) -> str | None:
    found = _git("rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    return found.stdout.strip() if found.returncode == 0 and revision else None


@contextlib.contextmanager
def sources(variants: Variants, workdir: Path) -> Iterator[dict[str, Path]]:
    """The source tree each variant is served from: this one, or for `NAME@REV` a
    worktree of REV (the commit it names now), removed afterwards. The worktree
    borrows this tree's `bin/` (the linked OPA and the pinned binaries are built, not
    committed) and runs in this interpreter, so `parse_variants` refuses a revision
    that differs from this tree in `_SHARED`; it serves a copy of a store this tree
    wrote (the store's format is the engine's own)."""
    trees: dict[str, Path] = {}
    made: list[Path] = []
    try:
        for i, name in enumerate(variants):
            revision = _revision(name)
            if revision is None:
                trees[name] = REPO_ROOT
                continue
            tree = workdir / f"source-{i}"
            made.append(tree)
            added = _git("worktree", "add", "--detach", str(tree), _commit(revision) or revision)
            if added.returncode != 0:
                raise RuntimeError(f"git worktree add {revision}: {added.stderr.strip()}")
            (tree / "bin").symlink_to(REPO_ROOT / "bin", target_is_directory=True)
            trees[name] = tree
        yield trees
    finally:
        for tree in made:
            _git("worktree", "remove", "--force", str(tree))
        _git("worktree", "prune")  # whatever a failed removal left listed


def measure(
    size: int,
    n_queries: int,
    workdir: Path,
    seed: int,
    variants: Variants | None = None,
    with_peer: bool = True,
    dialect_on: Path | None = None,
) -> dict[str, Any]:
    """One size's cells; `dialect_on` (a Qdrant server binary): the dialect's too."""
    variants = variants or DEFAULT_VARIANTS
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
        "variants": variants,
    }
    # Loading only: the write policy decides a whole batch in one OPA call, which may
    # take longer than a serving deployment's timeout on a busy machine.
    loading = {"WHOSE_OPTIMIZE_INTERVAL_S": "2", "WHOSE_OPA_TIMEOUT_S": "30"}
    with sidecar(data, env=loading) as proc:
        ids, load_s = timed_load(proc.base, corpus)
    result["load_s"] = round(load_s, 1)
    result["load_route"] = "POST /v1/memories, 500 records a request, one at a time"
    index = {record_id: i for i, record_id in enumerate(ids)}
    opened = time.perf_counter()
    with sidecar(data):
        # Reopening the store builds its HNSW index before serving (store/edge.py).
        result["open_s"] = round(time.perf_counter() - opened, 1)
    # Each configuration and the passthrough on a copy of the same indexed store (the
    # embedded store has one owner), all serving at once, measured cell by cell in turn:
    # what a busy machine does to one, it does to the others within minutes.
    copies = {name: workdir / f"data-{size}-{i}" for i, name in enumerate(variants)}
    copies["passthrough"] = workdir / f"data-{size}-passthrough"
    for copy in copies.values():
        shutil.copytree(data, copy)
    peer_data = workdir / f"peer-{size}"
    if with_peer:
        built = time.perf_counter()
        peer.build(peer_data, corpus)
        result["peer_load_s"] = round(time.perf_counter() - built, 1)
    cell_results: dict[str, dict[str, Any]] = {}
    with contextlib.ExitStack() as running:
        trees = running.enter_context(sources(variants, workdir))
        procs = {
            name: running.enter_context(sidecar(copies[name], env=env, source=trees[name]))
            for name, env in variants.items()
        }
        plain = running.enter_context(passthrough(copies["passthrough"]))
        rival = running.enter_context(peer_process(peer_data)) if with_peer else None
        for layout, fraction in cells():
            who = asker(layout, fraction)
            cell: dict[str, Any] = {"layout": layout, "fraction": fraction}
            for name, proc in procs.items():
                cell[name] = _sidecar_cell(proc, corpus, who, n_queries, index)
            cell["passthrough"] = _passthrough_cell(plain, corpus, who, n_queries, index)
            if rival is not None:
                cell["peer"] = _peer_cell(rival, corpus, who, n_queries)
            cell["ratios_by_variant"] = {
                name: _ratios(cell[name], cell["passthrough"]) for name in procs
            }
            # The first configuration's, under the names the tables and plot read.
            first = next(iter(procs))
            cell["whose"], cell["ratios"] = cell[first], cell["ratios_by_variant"][first]
            if rival is not None:
                cell["ratios_to_peer"] = _to_peer(cell["whose"], cell["peer"])
            cell_results[who] = cell
    result["cells"] = cell_results
    if dialect_on is not None:
        result["dialect"] = dialect.measure(
            corpus, n_queries, workdir / f"dialect-{size}", dialect_on
        )
        shutil.rmtree(workdir / f"dialect-{size}", ignore_errors=True)
    result["total_s"] = round(time.perf_counter() - started, 1)
    for folder in [data, peer_data, *copies.values()]:
        shutil.rmtree(folder, ignore_errors=True)
    return result


def _ratios(whose: dict[str, Any], plain: dict[str, Any]) -> dict[str, float]:
    return {
        "p50": round(whose["p50_ms"] / plain["p50_ms"], 2),
        "throughput": round(whose["throughput"]["rps"] / plain["throughput"]["rps"], 2),
    }


def _to_peer(whose: dict[str, Any], rival: dict[str, Any]) -> dict[str, float]:
    """whose against wardowl: p50 and CPU per recall (below 1: whose is ahead) and
    throughput (above 1: whose is ahead)."""
    mine, theirs = whose["throughput"], rival["throughput"]
    cpu = mine["cpu_ms_sidecar"] / max(theirs["cpu_ms_peer"], 1e-9)
    return {
        "p50": round(whose["p50_ms"] / rival["p50_ms"], 2),
        "throughput": round(mine["rps"] / theirs["rps"], 2),
        "cpu": round(cpu, 2),
    }


def run(
    sizes: list[int],
    n_queries: int,
    out: Path,
    seed: int = 7,
    variants: Variants | None = None,
    with_peer: bool = True,
    dialect_on: Path | None = None,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="whose-bench-"))
    try:
        runs = [
            measure(size, n_queries, workdir, seed, variants, with_peer, dialect_on)
            for size in sizes
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    result = {"runs": runs, "machine": {"cpus": os.cpu_count()}}
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    report.plot(runs, out / "bench.png")
    return result
