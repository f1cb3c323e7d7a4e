"""`whose bench --backend edge --backend server --workers 1 --workers 2`: scale-out.

A mode of its own beside the readable-fraction sweep (sweep.py), on the text dataset
of mixed allow rates (dataset.py). For each corpus size it loads the corpus once through the
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
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from sidecar.bench.dataset import DIM, LIMIT, dataset, headers, load, queries
from sidecar.bench.measure import closed_loop, summary
from sidecar.bench.processes import Proc, passthrough, qdrant, redis, sidecar
from sidecar.embed.hashing import HashingEmbedder

IN_FLIGHT = (8, 32)
ASKER = "carol"


def _sidecar(data: Path, workers: int, env: dict[str, str]) -> Any:
    # The default log level (INFO: an access log line per request, as deployed); it is
    # also how the run sees every worker finish starting.
    env = {"WHOSE_LOG_FORMAT": "json", "WHOSE_OPTIMIZE_INTERVAL_S": "2", **env}
    return sidecar(data, workers, env, log_level="INFO")


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
    doubled = qs * 2
    for n in IN_FLIGHT:
        report[f"in_flight_{n}"] = closed_loop(
            lambda http, i: send(http, doubled[i]), len(doubled), n, procs
        )
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
    with _sidecar(data / "edge", 1, {}) as proc:
        report["load_s"] = round(load(proc.base, records), 1)
    configs: dict[str, Any] = {}
    report["configs"] = configs
    if "edge" in backends:
        with _sidecar(data / "edge", 1, {}) as proc:
            _all_started(proc.base, 1, data / "edge" / "bench-sidecar.log")
            configs["edge_1_worker"] = measure(_recall(proc.base), qs, {"sidecar": proc})
        with passthrough(data / "edge") as proc:
            base = proc.base

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
                with _sidecar(folder, n, env) as proc:
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
