"""`whose bench`: what disclosure costs per request, against its floor, in one run.

For each corpus size it generates a dataset (two tenants; principals with allow
rates of about 0.9 (alice), 0.5 (carol) and 0.1 (bob); groups, a scope, every
writable modality, supersession chains; and 1% of records readable only by erin,
about a topic far from every query), loads it through the API, and measures:

1. the store query alone (recall's first-round filter and size, in-process);
2. the policy evaluation alone (OPA's own `timer_rego_query_eval_ns`, same batch);
3. `POST /v1/recall` end to end over HTTP: latency; where its time goes, from the
   server's own histograms (store calls, policy calls, the rest); throughput at 8
   in flight and the CPU each request cost the sidecar, its OPA and the client;
4. a passthrough: the same HTTP stack returning the store's hits with no policy;
5. one batch OPA call versus one call per record, for 40 candidates;

and, with pushdown off, the over-fetch loop alone at allow rate 0.1 (share of
recalls that return `limit` records, mean rounds), and erin's recall@10 against
exact search over what she may read, with and without pushdown. It prints the
ratios, writes a JSON report and a PNG plot (latency against allow rate and limit).

A benchmark, not a test: numbers from a shared 2-core machine are noisy; compare
the ratios within one run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from sidecar.allow_rate import first_batch
from sidecar.audit import AuditLog, SqliteSink
from sidecar.cache import LocalCache
from sidecar.decisions import DisclosureQuestion, policy_view
from sidecar.disclosure import Gate
from sidecar.embed import HashingEmbedder
from sidecar.filters import Scope
from sidecar.identity import Identity
from sidecar.local_opa import LocalOpa
from sidecar.opa import PolicyClient
from sidecar.settings import REPO_ROOT, Settings
from sidecar.store.edge import EdgeStore

ASKERS = {"alice": 0.9, "carol": 0.5, "bob": 0.1}
TOPICS = [
    f"{a} {b}"
    for a in ("launch", "budget", "hiring", "roadmap", "vendor", "security", "pricing")
    for b in ("date", "owner", "risk", "status", "scope")
]
ATTRIBUTES = ["is due", "moved to", "depends on", "was approved by", "is blocked by"]
VALUES = ["October 17", "Q3", "the platform team", "legal", "next sprint", "the board"]
# (weight, audience, scope): alice reads ~0.9, carol ~0.5, bob ~0.1 of acme's records.
AUDIENCES = [
    (0.10, ["group:launch-team"], None),
    (0.25, ["alice", "carol"], None),
    (0.15, ["alice", "carol"], "launch-core"),
    (0.40, ["alice"], None),
    (0.10, ["dave"], None),
]
MODALITIES = ["reported_belief", "asserted", "believed", "inferred"]
FAR_TOPIC = "orchard irrigation schedule for the pear trees"
DIM = 384
LIMIT = 10


def _holder(audience: list[str], rng: random.Random) -> str:
    people = [a for a in audience if not a.startswith("group:")]
    return people[0] if people else rng.choice(["alice", "bob", "carol"])


def dataset(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Records of tenant acme (and a few of globex), ready for POST /v1/memories."""
    records: list[dict[str, Any]] = []
    weights = [w for w, _, _ in AUDIENCES]
    for i in range(n):
        if i % 100 == 0:  # 1%: erin's, far from every query
            records.append(_record(f"erin notes the {FAR_TOPIC} {i}", "erin", ["erin"], None, i))
            continue
        if i % 50 == 1:  # another tenant: never a candidate for acme's askers
            records.append(_record("mallory believes the launch is off", "mallory", ["mallory"]))
            records[-1]["tenant_hint"] = "globex"
            continue
        _, audience, scope = rng.choices(AUDIENCES, weights)[0]
        topic = rng.choice(TOPICS)
        text = f"the {topic} {rng.choice(ATTRIBUTES)} {rng.choice(VALUES)}"
        if i % 25 == 2:  # an authority's world-state claim
            record = _record(f"the release calendar says {text}", "release-bot", audience, scope, i)
            record.update(modality="world_state", source={"kind": "change_record"})
            del record["observer_id"]
        else:
            holder = _holder(audience, rng)
            record = _record(f"{holder} believes {text}", holder, audience, scope, i)
            record["modality"] = rng.choice(MODALITIES)
        # Keys repeat (i % 300): later writes by the same holder supersede earlier ones.
        record["proposition"] = {"text": text, "key": f"{topic.replace(' ', '.')}.{i % 300}"}
        records.append(record)
    return records


def _record(
    content: str, writer: str, audience: list[str], scope: str | None = None, i: int = 0
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "content": content,
        "observer_id": writer,
        "source_id": f"session-{i % 500}",
        "source": {"kind": "conversation", "speaker": writer},
        "modality": "asserted",
        "confidence": 0.8,
        "audience": audience,
        "writer_hint": writer,
    }
    if scope:
        record["access_scope"] = scope
    return record


def queries(n: int, rng: random.Random) -> list[str]:
    return [f"{rng.choice(TOPICS)} {rng.choice(ATTRIBUTES)}" for _ in range(n)]


def load(base: str, records: list[dict[str, Any]]) -> float:
    """Write every record as its writer, in order (so chains form), 500 at a time."""
    started = time.perf_counter()
    batch: list[dict[str, Any]] = []
    who: tuple[str, str] | None = None
    with httpx.Client(base_url=base, timeout=300) as http:

        def flush() -> None:
            if batch and who:
                headers = {"X-Whose-Asker": who[0], "X-Whose-Tenant": who[1]}
                http.post("/v1/memories", json=batch, headers=headers).raise_for_status()
            batch.clear()

        for record in records:
            body = {k: v for k, v in record.items() if not k.endswith("_hint")}
            writer = (record["writer_hint"], record.get("tenant_hint", "acme"))
            # One batch per writer run; a batch may not hold two versions of one chain.
            key = (record.get("proposition") or {}).get("key")
            if (
                writer != who
                or len(batch) >= 500
                or any((b.get("proposition") or {}).get("key") == key and key for b in batch)
            ):
                flush()
                who = writer
            batch.append(body)
        flush()
    return time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1e3 for s in seconds]
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p99_ms": round(pct(ms, 0.99), 3),
        "mean_ms": round(statistics.mean(ms), 3),
    }


# --- processes ---------------------------------------------------------------


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    base: str
    pid: int

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time (user + system) so far of the server itself and of its live child
        processes (the sidecar's local OPA). Linux /proc; zeros elsewhere."""
        if not Path("/proc/self/stat").exists():
            return 0.0, 0.0
        tick = os.sysconf("SC_CLK_TCK")
        own = children = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                # Fields after the command name: state, ppid, ... utime (12th), stime.
                fields = stat.read_text().rsplit(")", 1)[1].split()
                used = (int(fields[11]) + int(fields[12])) / tick
                if int(stat.parent.name) == self.pid:
                    own += used
                elif int(fields[1]) == self.pid:
                    children += used
        return own, children


@contextlib.contextmanager
def served(
    args: list[str], env: dict[str, str], log: Path, start_s: float = 60
) -> Iterator[Server]:
    """A loopback HTTP server from this package (`python -m ...`), until the block ends.
    `start_s`: how long it may take to answer /healthz."""
    port = _free_port()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", *args, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            cwd=REPO_ROOT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_s
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield Server(base, process.pid)
    finally:
        process.terminate()
        process.wait(timeout=20)


def sidecar(data: Path, **env: str) -> contextlib.AbstractContextManager[Server]:
    args = ["sidecar", "serve", "--dev", "--data-dir", str(data)]
    # Start-up includes indexing whatever the store holds unindexed (store/edge.py).
    env = {"WHOSE_LOG_LEVEL": "WARNING", **env}
    return served(args, env, data / "bench-sidecar.log", start_s=1800)


# --- measurements --------------------------------------------------------------


def headers(asker: str) -> dict[str, str]:
    return {"X-Whose-Asker": asker, "X-Whose-Tenant": "acme"}


def recalls(
    base: str, asker: str, qs: list[str], limit: int = LIMIT
) -> tuple[list[float], list[dict[str, Any]]]:
    times, bodies = [], []
    with httpx.Client(base_url=base, timeout=60) as http:
        for q in qs[:10]:  # warm-up: connections, the allow-rate estimate
            http.post("/v1/recall", json={"query": q, "limit": limit}, headers=headers(asker))
        for q in qs:
            started = time.perf_counter()
            response = http.post(
                "/v1/recall", json={"query": q, "limit": limit}, headers=headers(asker)
            )
            times.append(time.perf_counter() - started)
            response.raise_for_status()
            bodies.append(response.json())
    return times, bodies


def histogram(base: str, name: str, **labels: str) -> tuple[float, float]:
    """The sum and count of a histogram on the server, over the series with `labels`."""
    from prometheus_client.parser import text_string_to_metric_families

    total = count = 0.0
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text):
        for sample in family.samples:
            if labels.items() - sample.labels.items():
                continue
            if sample.name == f"{name}_sum":
                total += sample.value
            elif sample.name == f"{name}_count":
                count += sample.value
    return total, count


def throughput(
    server: Server, path: str, asker: str, qs: list[str], in_flight: int = 8
) -> dict[str, float]:
    """Requests per second with `in_flight` concurrent callers (closed loop), and the
    CPU milliseconds each request cost the server, its child processes (OPA) and
    this load client: on a small machine they share the same cores."""

    async def run() -> float:
        async with httpx.AsyncClient(base_url=server.base, timeout=60) as http:
            pending = list(qs)

            async def caller() -> None:
                while pending:
                    q = pending.pop()
                    response = await http.post(
                        path, json={"query": q, "limit": LIMIT}, headers=headers(asker)
                    )
                    response.raise_for_status()

            started = time.perf_counter()
            await asyncio.gather(*(caller() for _ in range(in_flight)))
            return len(qs) / (time.perf_counter() - started)

    own, children = server.cpu_seconds()
    client = time.process_time()
    rps = asyncio.run(run())
    client = time.process_time() - client
    own_after, children_after = server.cpu_seconds()
    per_request = 1e3 / len(qs)
    return {
        "rps": round(rps, 1),
        "cpu_ms_server": round((own_after - own) * per_request, 3),
        "cpu_ms_opa": round((children_after - children) * per_request, 3),
        "cpu_ms_client": round(client * per_request, 3),
    }


async def floor(data: Path, qs: list[str], settings: Settings) -> dict[str, Any]:
    """Store alone, OPA's evaluation alone, batch vs per-record: in-process, no HTTP."""
    store = EdgeStore(data / "store" / settings.collection, DIM)
    await store.open()
    opa = LocalOpa(settings.opa_binary, settings.policy_dir, data / "opa.log", data / "opa-b")
    await opa.start()
    policy = PolicyClient(opa.url, 10.0, unix_socket=str(opa.socket_path))
    await policy.start()
    embed = HashingEmbedder(DIM).embed
    now = datetime.now(UTC)
    # Recall's own store filter (the policy's pushdown) and first-round size: with
    # pushdown nearly every candidate is allowed, so the allow rate is about 1.
    gate = Gate(policy, LocalCache(0, 1), AuditLog(SqliteSink(data / "audit.sqlite3"), None, 1), 5)
    batch = first_batch(LIMIT, 1.0, settings.overfetch_factor, settings.max_candidates)
    report: dict[str, Any] = {}
    try:
        for asker in ASKERS:
            question = DisclosureQuestion(Identity(asker, "acme"), [], "recall", now)
            scope = (await gate.begin(question, "bench").pushdown()).narrow(
                Scope(tenant="acme", current_at=now)
            )
            store_s, eval_s, batch_s, single_s = [], [], [], []
            for q in qs:
                started = time.perf_counter()
                hits = await store.search(embed(q), scope, batch)
                store_s.append(time.perf_counter() - started)
                eval_s.append(await policy.eval_seconds(question, [h.payload for h in hits]))
            wide = Scope(tenant="acme", current_at=now)
            for q in qs[:30]:
                hits = await store.search(embed(q), wide, 40)
                records = [h.payload for h in hits]
                started = time.perf_counter()
                await policy.disclosure(question, records)
                batch_s.append(time.perf_counter() - started)
                started = time.perf_counter()
                for record in records:
                    await policy.disclosure(question, [record])
                single_s.append(time.perf_counter() - started)
            report[asker] = {
                "store_query": summary(store_s) | {"limit": batch},
                "policy_eval": summary(eval_s),
                "batch_40": summary(batch_s),
                "per_record_40": summary(single_s),
            }
    finally:
        await policy.close()
        await opa.stop()
        await store.close()
    return report


def recall_at_10(base: str, records: list[dict[str, Any]], qs: list[str]) -> float:
    """erin may read ~1% of the corpus, all far from the queries: does recall find her
    nearest records anyway? Truth: exact cosine search over just what she may read.
    Ties count: a returned record scoring at least the tenth-best score is a hit."""
    embedder = HashingEmbedder(DIM)
    mine = [r["content"] for r in records if r.get("audience") == ["erin"]]
    matrix = np.array([embedder.embed(text) for text in mine])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    found = []
    with httpx.Client(base_url=base, timeout=60) as http:
        for q in qs:
            vector = np.array(embedder.embed(q))
            scores = dict(zip(mine, matrix @ (vector / np.linalg.norm(vector)), strict=True))
            tenth = sorted(scores.values(), reverse=True)[LIMIT - 1]
            response = http.post(
                "/v1/recall", json={"query": q, "limit": LIMIT}, headers=headers("erin")
            )
            got = [item["content"] for item in response.json()["items"]]
            hits = sum(bool(scores.get(text, -2.0) >= tenth - 1e-6) for text in got)
            found.append(hits / LIMIT)
    return round(statistics.mean(found), 3)


def measure(size: int, n_queries: int, workdir: Path, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    records, qs = dataset(size, rng), queries(n_queries, rng)
    # The dataset stays in memory for the whole run: out of the cyclic GC, whose full
    # passes over it paused this client for ~100 ms, inflating a p99 the server never had.
    gc.collect()
    gc.freeze()
    data = workdir / f"data-{size}"
    report: dict[str, Any] = {"records": size, "queries": n_queries, "limit": LIMIT}
    with sidecar(data, WHOSE_OPTIMIZE_INTERVAL_S="2") as server:
        report["load_s"] = round(load(server.base, records), 1)
    # Reopening the store builds its HNSW index before serving (store/edge.py).
    started = time.perf_counter()
    with sidecar(data) as server:
        report["open_s"] = round(time.perf_counter() - started, 1)
        report["recall"] = {}
        for asker in ASKERS:
            before = _server_times(server.base)
            times, bodies = recalls(server.base, asker, qs)
            spent = _server_times(server.base, since=before)
            report["recall"][asker] = summary(times) | {
                "allow_rate": ASKERS[asker],
                "mean_rounds": spent["rounds"],
                "mean_items": round(statistics.mean(len(b["items"]) for b in bodies), 2),
            }
            if asker == "carol":
                report["where_time_goes_ms"] = _where_time_goes(times, spent)
        report["recall_by_limit"] = {
            str(limit): summary(recalls(server.base, "carol", qs[:100], limit)[0])
            for limit in (5, 10, 20, 50)
        }
        report["recall_throughput"] = throughput(server, "/v1/recall", "carol", qs * 2)
        report["erin_recall_at_10"] = {"pushdown": recall_at_10(server.base, records, qs[:50])}
    passthrough = ["sidecar.benchmark", "passthrough", "--data-dir", str(data)]
    with served(passthrough, {}, data / "bench-passthrough.log") as server:
        times = []
        with httpx.Client(base_url=server.base, timeout=60) as http:
            for q in qs:
                started = time.perf_counter()
                http.post("/v1/recall", json={"query": q, "limit": LIMIT}).raise_for_status()
                times.append(time.perf_counter() - started)
        report["passthrough"] = summary(times)
        report["passthrough_throughput"] = throughput(server, "/v1/recall", "carol", qs * 2)
    with sidecar(data, WHOSE_PUSHDOWN="false") as server:
        before = _server_times(server.base)
        times, bodies = recalls(server.base, "bob", qs)
        report["no_pushdown_bob"] = summary(times) | {
            "complete_share": round(sum(len(b["items"]) == LIMIT for b in bodies) / len(bodies), 3),
            "mean_rounds": _server_times(server.base, since=before)["rounds"],
        }
        report["erin_recall_at_10"]["no_pushdown"] = recall_at_10(server.base, records, qs[:50])
    report["floor"] = asyncio.run(floor(data, qs, Settings()))
    carol = report["floor"]["carol"]
    report["ratios"] = {
        "recall_over_store_plus_eval": round(
            report["recall"]["carol"]["p50_ms"]
            / (carol["store_query"]["p50_ms"] + carol["policy_eval"]["p50_ms"]),
            2,
        ),
        "recall_over_passthrough_p50": round(
            report["recall"]["carol"]["p50_ms"] / report["passthrough"]["p50_ms"], 2
        ),
        "throughput_share_of_passthrough": round(
            report["recall_throughput"]["rps"] / report["passthrough_throughput"]["rps"], 2
        ),
        "per_record_over_batch_40": round(
            carol["per_record_40"]["p50_ms"] / carol["batch_40"]["p50_ms"], 1
        ),
    }
    shutil.rmtree(data, ignore_errors=True)
    return report


# Server-side histograms a recall pass is read from: (metric, labels).
_SERVER_TIMES = {
    "request": ("whose_request_seconds", {"route": "/v1/recall"}),
    "store": ("whose_store_call_seconds", {"op": "search"}),
    "decisions": ("whose_policy_call_seconds", {"rule": "whose/disclosure/batch"}),
    "compile": ("whose_policy_call_seconds", {"rule": "compile"}),
    "rounds": ("whose_overfetch_rounds", {}),
}


def _server_times(base: str, since: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """The recall-related histograms now (sum, count); with `since`, the means per
    recall in between (seconds; rounds per recall)."""
    now = {
        name: histogram(base, metric, **labels) for name, (metric, labels) in _SERVER_TIMES.items()
    }
    if since is None:
        return now

    def mean(name: str, per: str) -> float:
        return (now[name][0] - since[name][0]) / max(1.0, now[per][1] - since[per][1])

    times = {name: mean(name, per="request") for name in now if name != "rounds"}
    return times | {"rounds": round(mean("rounds", per="rounds"), 2)}


def _where_time_goes(client_s: list[float], server: dict[str, float]) -> dict[str, float]:
    """Mean milliseconds per recall: what the client saw, what the server measured,
    and the server's part split into store calls, policy calls and everything else."""
    parts = {
        "client": statistics.mean(client_s),
        "server": server["request"],
        "store_calls": server["store"],
        "policy_calls": server["decisions"] + server["compile"],
    }
    parts["sidecar_own"] = parts["server"] - parts["store_calls"] - parts["policy_calls"]
    parts["http_and_client"] = parts["client"] - parts["server"]
    return {name: round(seconds * 1e3, 3) for name, seconds in parts.items()}


def plot(reports: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_rate, by_limit) = plt.subplots(1, 2, figsize=(10, 4))
    for report in reports:
        label = f"{report['records']:,} records"
        rates = sorted(report["recall"].values(), key=lambda r: r["allow_rate"])
        by_rate.plot(
            [r["allow_rate"] for r in rates], [r["p50_ms"] for r in rates], "o-", label=label
        )
        limits = report["recall_by_limit"]
        by_limit.plot(
            [int(k) for k in limits], [v["p50_ms"] for v in limits.values()], "o-", label=label
        )
    by_rate.set(xlabel="allow rate", ylabel="recall p50 (ms)", title="latency vs allow rate")
    by_limit.set(xlabel="limit", ylabel="recall p50 (ms)", title="latency vs limit (carol)")
    for axes in (by_rate, by_limit):
        axes.set_ylim(bottom=0)
        axes.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(sizes: list[int], n_queries: int, out: Path, seed: int = 7) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="whose-bench-"))
    try:
        reports = [measure(size, n_queries, workdir, seed) for size in sizes]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    result = {"runs": reports, "machine": {"cpus": os.cpu_count()}}
    (out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(reports, out / "bench.png")
    return result


# --- the passthrough baseline ----------------------------------------------------


def passthrough_app(data_dir: Path) -> Any:
    """The sidecar's HTTP stack returning the store's hits with no policy at all."""
    from collections.abc import AsyncIterator

    from fastapi import FastAPI

    store = EdgeStore(data_dir / "store" / Settings().collection, DIM)
    embedder = HashingEmbedder(DIM)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await store.open()
        yield
        await store.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/recall")
    async def recall(body: dict[str, Any]) -> dict[str, Any]:
        scope = Scope(tenant="acme", current_at=datetime.now(UTC))
        hits = await store.search(embedder.embed(body["query"]), scope, int(body["limit"]))
        return {"items": [policy_view(h.payload) | {"score": h.score} for h in hits]}

    return app


if __name__ == "__main__":
    # python -m sidecar.benchmark passthrough --data-dir D --port P
    import uvicorn

    _, _, _, data_dir, _, port = sys.argv
    app = passthrough_app(Path(data_dir))
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning")
