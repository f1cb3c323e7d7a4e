"""`whose bench --backend edge --backend server --workers 1 --workers 2`: scale-out.

A mode of its own beside the latency benchmark (benchmark.py, whose dataset, loading
and summaries it reuses). For each corpus size it loads the corpus once through the
API into the embedded store, copies the stored points into a Qdrant server this run
starts (same ids, payloads and vectors; then waits until Qdrant has indexed them),
and measures, for the embedded store with one worker and for the server store with
each worker count:

- recall p50/p99 one at a time, and throughput (closed loop) at 8 and 32 in flight;
- the CPU each request cost the sidecar (its workers and their OPAs), Qdrant, and
  this load client: on a small machine they share the same cores;

and, as each backend's baseline, the plain store with no policy: for the embedded
store the passthrough app (the same HTTP stack, the engine in-process), for the
server Qdrant's own REST query with the tenant filter. The server configurations run
with Redis (locks, cache, audit shared by the workers, as deployed); the embedded one
on its defaults.

A benchmark, not a test: compare within one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sidecar.benchmark import DIM, LIMIT, dataset, headers, load, queries, summary
from sidecar.embed import HashingEmbedder

IN_FLIGHT = (8, 32)
ASKER = "carol"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_cpu(root: int) -> float:
    """CPU seconds (user + system) of a live process and all its live descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            pid = int(stat.parent.name)
            parents[pid] = int(fields[1])
            used[pid] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid, seconds in used.items():
        walk = pid
        while walk not in (0, 1) and walk != root:
            walk = parents.get(walk, 0)
        if walk == root:
            total += seconds
    return total


@dataclass
class Proc:
    process: subprocess.Popen[bytes]
    base: str

    def cpu(self) -> float:
        return _tree_cpu(self.process.pid)


@contextlib.contextmanager
def _process(
    command: list[str], env: dict[str, str], log: Path, ready: str, base: str, wait_s: float
) -> Iterator[Proc]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            cwd=log.parent,
        )
    try:
        deadline = time.monotonic() + wait_s
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(ready, timeout=2).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield Proc(process, base)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def sidecar(
    data: Path, workers: int, env: dict[str, str]
) -> contextlib.AbstractContextManager[Proc]:
    port, ops_port = _free_port(), _free_port()
    command = [sys.executable, "-m", "sidecar", "serve", "--dev", "--data-dir", str(data)]
    command += ["--port", str(port), "--ops-port", str(ops_port), "--workers", str(workers)]
    # The default log level (INFO: an access log line per request, as deployed); it is
    # also how the run sees every worker finish starting.
    env = {"WHOSE_LOG_FORMAT": "json", "WHOSE_OPTIMIZE_INTERVAL_S": "2", **env}
    base = f"http://127.0.0.1:{port}"
    # Ready when the API answers (every worker has then started: see _all_started).
    return _process(command, env, data / "bench-sidecar.log", f"{base}/openapi.json", base, 3600)


def qdrant(binary: Path, folder: Path) -> contextlib.AbstractContextManager[Proc]:
    port = _free_port()
    env = {
        "QDRANT__SERVICE__HOST": "127.0.0.1",
        "QDRANT__SERVICE__HTTP_PORT": str(port),
        "QDRANT__SERVICE__GRPC_PORT": str(_free_port()),
        "QDRANT__STORAGE__STORAGE_PATH": str(folder / "storage"),
        "QDRANT__STORAGE__SNAPSHOTS_PATH": str(folder / "snapshots"),
        "QDRANT__TELEMETRY_DISABLED": "true",
        "QDRANT__LOG_LEVEL": "WARN",
    }
    base = f"http://127.0.0.1:{port}"
    return _process([str(binary)], env, folder / "qdrant.log", f"{base}/readyz", base, 60)


@contextlib.contextmanager
def redis(folder: Path) -> Iterator[str]:
    port = _free_port()
    folder.mkdir(parents=True, exist_ok=True)
    binary = shutil.which("redis-server") or "redis-server"
    command = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, cwd=folder)
    try:
        time.sleep(0.5)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait()


def _all_started(base: str, workers: int, log: Path, wait_s: float = 600) -> None:
    deadline = time.monotonic() + wait_s
    while log.read_text(errors="replace").count("Application startup complete") < workers:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not all start")
        time.sleep(0.5)
    # A few recalls per worker: connections, allow-rate estimates, OPA warm.
    with httpx.Client(base_url=base, timeout=60) as http:
        for q in queries(20 * workers, random.Random(1)):
            http.post("/v1/recall", json={"query": q, "limit": LIMIT}, headers=headers(ASKER))


# --- measurements ---------------------------------------------------------------------


def one_at_a_time(send: Any, qs: list[str]) -> dict[str, float]:
    times = []
    with httpx.Client(timeout=60) as http:
        for q in qs:
            started = time.perf_counter()
            send(http, q).raise_for_status()
            times.append(time.perf_counter() - started)
    return summary(times)


def closed_loop(send: Any, qs: list[str], in_flight: int, procs: dict[str, Proc]) -> dict[str, Any]:
    """Requests per second with `in_flight` callers, and the CPU milliseconds each
    request cost every process named in `procs` and this client."""

    async def run() -> tuple[float, list[float]]:
        async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as http:
            pending = list(qs)
            times: list[float] = []

            async def caller() -> None:
                while pending:
                    q = pending.pop()
                    started = time.perf_counter()
                    response = await send(http, q)
                    times.append(time.perf_counter() - started)
                    if response.status_code != 200:
                        # Counted, not fatal: a refusal under load is a result too.
                        failed[f"{response.status_code} {response.json().get('error')}"] += 1

            started = time.perf_counter()
            await asyncio.gather(*(caller() for _ in range(in_flight)))
            return len(qs) / (time.perf_counter() - started), times

    failed: Counter[str] = Counter()
    before = {name: proc.cpu() for name, proc in procs.items()}
    client = time.process_time()
    rps, times = asyncio.run(run())
    client = time.process_time() - client
    per = 1e3 / len(qs)
    report: dict[str, Any] = {"rps": round(rps, 1), "p50_ms": summary(times)["p50_ms"]}
    report |= {"p99_ms": summary(times)["p99_ms"]}
    for name, proc in procs.items():
        report[f"cpu_ms_{name}"] = round((proc.cpu() - before[name]) * per, 3)
    report["cpu_ms_client"] = round(client * per, 3)
    if failed:
        report["not_200"] = dict(failed)
    return report


def _recall(base: str) -> Any:
    def send(http: Any, q: str) -> Any:
        return http.post(
            f"{base}/v1/recall", json={"query": q, "limit": LIMIT}, headers=headers(ASKER)
        )

    return send


def _qdrant_query(base: str, collection: str) -> Any:
    embed = HashingEmbedder(DIM).embed

    def send(http: Any, q: str) -> Any:
        body = {
            "query": embed(q),
            "limit": LIMIT,
            "with_payload": True,
            "filter": {"must": [{"key": "tenant", "match": {"value": "acme"}}]},
        }
        return http.post(f"{base}/collections/{collection}/points/query", json=body)

    return send


def measure(send: Any, qs: list[str], procs: dict[str, Proc]) -> dict[str, Any]:
    report: dict[str, Any] = {"one_at_a_time": one_at_a_time(send, qs)}
    for n in IN_FLIGHT:
        report[f"in_flight_{n}"] = closed_loop(send, qs * 2, n, procs)
    return report


# --- loading ----------------------------------------------------------------------------


async def _copy_to_qdrant(edge_path: Path, url: str, collection: str) -> int:
    """Every point of the embedded store into the server's collection, as stored."""
    import qdrant_edge as qe
    from qdrant_client import AsyncQdrantClient
    from qdrant_client import models as qm

    from sidecar.store.edge import EdgeStore
    from sidecar.store.server import ServerStore

    server = ServerStore.connect([url], collection, DIM, timeout_s=60)
    await server.open()  # the collection and its indexes, as the sidecar makes them
    await server.close()
    edge = EdgeStore(edge_path, DIM)
    await edge.open()
    client = AsyncQdrantClient(url=url, timeout=120, check_compatibility=False)
    copied, offset = 0, None
    try:
        while True:
            request = qe.ScrollRequest(
                offset=offset, limit=1000, with_payload=True, with_vector=True
            )
            found, offset = await asyncio.to_thread(edge.shard.scroll, request)
            points = [
                qm.PointStruct(id=str(p.id), vector=p.vector, payload=p.payload) for p in found
            ]
            if points:
                await client.upsert(collection, points=points, wait=True)
            copied += len(points)
            if offset is None:
                break
        # Measure an indexed collection: wait until Qdrant's optimizers are done (green,
        # and the indexed count unchanged between two looks; a small collection stays
        # below Qdrant's indexing threshold and is searched exactly).
        seen = -1
        while True:
            await asyncio.sleep(3)
            info = await client.get_collection(collection)
            indexed = info.indexed_vectors_count or 0
            if info.status == qm.CollectionStatus.GREEN and indexed == seen:
                break
            seen = indexed
    finally:
        await client.close()
        await edge.close()
    return copied


# --- the run ------------------------------------------------------------------------------


def run_size(
    size: int,
    backends: list[str],
    workers: list[int],
    n_queries: int,
    workdir: Path,
    qdrant_binary: Path,
    seed: int = 7,
) -> dict[str, Any]:
    rng = random.Random(seed)
    records, qs = dataset(size, rng), queries(n_queries, rng)
    data = workdir / f"data-{size}"
    report: dict[str, Any] = {"records": size, "queries": n_queries, "limit": LIMIT}
    with sidecar(data / "edge", 1, {}) as proc:
        report["load_s"] = round(load(proc.base, records), 1)
    configs: dict[str, Any] = {}
    report["configs"] = configs
    if "edge" in backends:
        with sidecar(data / "edge", 1, {}) as proc:
            _all_started(proc.base, 1, data / "edge" / "bench-sidecar.log")
            configs["edge_1_worker"] = measure(_recall(proc.base), qs, {"sidecar": proc})
        passthrough = [sys.executable, "-m", "sidecar.benchmark", "passthrough"]
        port = _free_port()
        passthrough += ["--data-dir", str(data / "edge"), "--port", str(port)]
        base = f"http://127.0.0.1:{port}"
        log = data / "passthrough" / "log"
        with _process(passthrough, {}, log, f"{base}/healthz", base, 3600) as proc:

            def plain(http: Any, q: str) -> Any:
                return http.post(f"{base}/v1/recall", json={"query": q, "limit": LIMIT})

            configs["edge_passthrough"] = measure(plain, qs, {"passthrough": proc})
    if "server" in backends:
        collection = "whose_memories"
        with qdrant(qdrant_binary, data / "qdrant") as q, redis(data / "redis") as redis_url:
            started = time.perf_counter()
            edge_path = data / "edge" / "store" / collection
            report["copied"] = asyncio.run(_copy_to_qdrant(edge_path, q.base, collection))
            report["copy_and_index_s"] = round(time.perf_counter() - started, 1)
            env = {"WHOSE_STORE": "server", "WHOSE_QDRANT_URL": q.base}
            env |= {"WHOSE_REDIS_URL": redis_url}
            for n in workers:
                folder = data / f"server-{n}"
                with sidecar(folder, n, env) as proc:
                    _all_started(proc.base, n, folder / "bench-sidecar.log")
                    procs = {"sidecar": proc, "qdrant": q}
                    configs[f"server_{n}_workers"] = measure(_recall(proc.base), qs, procs)
            configs["qdrant_direct"] = measure(_qdrant_query(q.base, collection), qs, {"qdrant": q})
    shutil.rmtree(data, ignore_errors=True)
    return report


def run(
    sizes: list[int],
    backends: list[str],
    workers: list[int],
    n_queries: int,
    out: Path,
    qdrant_binary: Path,
) -> dict[str, Any]:
    qdrant_binary = qdrant_binary.resolve()
    if "server" in backends and not qdrant_binary.exists():
        raise ValueError(f"no Qdrant server at {qdrant_binary} (--qdrant)")
    workdir = Path(tempfile.mkdtemp(prefix="whose-scale-"))
    try:
        runs = [
            run_size(size, backends, workers, n_queries, workdir, qdrant_binary) for size in sizes
        ]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = {"runs": runs, "machine": {"cpus": os.cpu_count()}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def table(result: dict[str, Any]) -> str:
    """The figures as a Markdown table (what docs/operations.md shows)."""
    lines = [
        "| records | configuration | recall p50 / p99 (1 at a time) | rps at 8 / 32 in flight "
        "| p99 at 32 | CPU ms per request at 32: sidecar + Qdrant (+ client) |",
        "|---|---|---|---|---|---|",
    ]
    for run in result["runs"]:
        for name, c in run["configs"].items():
            one, eight, many = c["one_at_a_time"], c["in_flight_8"], c["in_flight_32"]
            own = many.get("cpu_ms_sidecar", many.get("cpu_ms_passthrough", 0.0))
            lines.append(
                f"| {run['records']:,} | {name} | {one['p50_ms']:.1f} / {one['p99_ms']:.1f} ms "
                f"| {eight['rps']:.0f} / {many['rps']:.0f} | {many['p99_ms']:.0f} ms "
                f"| {own:.1f} + {many.get('cpu_ms_qdrant', 0.0):.1f} "
                f"(+ {many['cpu_ms_client']:.1f}) |"
                + (f" not 200 at 32: {many['not_200']}" if "not_200" in many else "")
            )
    return "\n".join(lines)
